"""`aqmlab atlas`: the refinement rule on a hand-made map, a small atlas whose page a real
browser opens with every cell linking to a file that is that cell's scenario, FQ-CoDel's
flow isolation visible in it, resumption, and bad specs refused in one keyed line."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from _search_cases import ATLAS
from typer.testing import CliRunner

import aqmlab
from aqmlab.cli.main import app
from aqmlab.search.atlas import Cell, _to_split, load_spec, parse_spec, run_atlas

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

SPEC = ATLAS


def test_a_cell_is_split_when_an_edge_neighbour_differs_by_more_than_the_threshold():
    # A 2 × 2 map: cell (0, 0) differs from the rest by 0.3 in Jain's index. Its two edge
    # neighbours (1, 0) and (0, 1) differ from it by 0.3 > 0.2: the three split; the diagonal
    # cell (1, 1) touches it only at a corner and differs from its own neighbours by 0.
    cells = []
    for i in range(2):
        for j in range(2):
            c = Cell(("a", "b"), "q", i, i + 1, j, j + 1, 0)
            c.values = {"jain": 0.6 if (i, j) == (0, 0) else 0.9, "harm_first": 0.0, "harm_second": 0.0}
            cells.append(c)
    assert _to_split(cells, 0.2, 1) == {0, 1, 2}
    # At the depth limit nothing splits; a difference at the threshold is not "more".
    assert _to_split(cells, 0.2, 0) == set()
    assert _to_split(cells, 0.3 + 1e-9, 1) == set()
    # A split cell's four children tile it exactly.
    kids = cells[0].split()
    assert sum((k.x1 - k.x0) * (k.y1 - k.y0) for k in kids) == pytest.approx(1.0)
    assert all(k.depth == 1 for k in kids)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("atlas")
    (d / "spec.toml").write_text(SPEC)
    r = subprocess.run([sys.executable, "-m", "aqmlab", "atlas", str(d / "spec.toml"), "-o", str(d / "out"), "-j", "2", "-q"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return d


def test_every_cell_of_every_map_links_to_its_own_scenario(tiny):
    df = pd.read_parquet(tiny / "out" / "atlas.parquet")
    html = (tiny / "out" / "atlas.html").read_text()
    # One map per metric (Jain, two harms) per AQM: each cell appears in three maps.
    links = re.findall(r'<a xlink:href="(cells/[0-9a-f]+\.toml)"', html)
    assert len(links) == 3 * len(df)
    for link in set(links):
        s = aqmlab.load_scenario(tiny / "out" / link)
        row = df[df["run"] == Path(link).stem].iloc[0]
        assert s.hash() == row["run"]
        # The file is the cell: the pair, the AQM, the buffer and the second CC's RTT.
        assert [f.cc for f in s.flows] == [row["first"], row["second"]]
        assert s.bottleneck.aqm.kind == row["aqm"]
        assert s.bottleneck.buffer == f"{row['buffer_bdp']:g}bdp"
        assert float(s.flows[1].rtt.removesuffix("ms")) == pytest.approx(20 * row["rtt_ratio"], rel=1e-3)
    # Initial 2 × 2 cells per map: refined cells are depth 1, a quarter of their parent.
    for _, m in df.groupby(["aqm"]):
        area = ((m["x1"] - m["x0"]) * (m["y1"] - m["y0"])).sum()
        assert area == pytest.approx((1.2041199826559248) * (0.6020599913279624))  # log10(16) × log10(4)


def test_fq_codel_isolates_the_pair(tiny):
    # FQ-CoDel's DRR scheduler gives every backlogged flow an equal share of the link (RFC 8290
    # §4.2, quantum per flow per round), whatever its CC or RTT: Jain's index of the two flows
    # stays near 1 and neither side is harmed much, where drop-tail lets BBR take the link.
    df = pd.read_parquet(tiny / "out" / "atlas.parquet")
    fq = df[df["aqm"] == "fq_codel"]
    assert (fq["jain"] > 0.95).all(), fq[["buffer_bdp", "rtt_ratio", "jain"]]
    assert (fq[["harm_first", "harm_second"]].abs() < 0.15).all().all()
    assert df[df["aqm"] == "taildrop"]["jain"].min() < 0.9


def test_rerunning_an_atlas_simulates_nothing(tiny):
    spec = load_spec(tiny / "spec.toml")
    before = pd.read_parquet(tiny / "out" / "atlas.parquet")
    after = run_atlas(spec, tiny / "out", jobs=1)
    assert json.loads((tiny / "out" / "atlas.json").read_text())["simulated"] == 0
    pd.testing.assert_frame_equal(before, after)


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (make test installs it)")
def test_a_real_browser_opens_the_atlas_with_its_maps_and_links(tiny, tmp_path):
    page = tiny / "out" / "atlas.html"
    probe = (
        "<script>window.addEventListener('load',()=>{const im=[...document.images];"
        "document.body.setAttribute('data-images',im.length);"
        "document.body.setAttribute('data-loaded',im.filter(i=>i.complete&&i.naturalWidth>0).length);"
        "document.body.setAttribute('data-links',document.querySelectorAll('svg a').length);"
        "document.body.setAttribute('data-maps',document.querySelectorAll('div.map svg').length);});</script>"
    )
    probed = page.with_name("probed.html")
    probed.write_text(page.read_text().replace("</body>", probe + "</body>"))
    common = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files", "--virtual-time-budget=10000"]
    dom = subprocess.run(common + ["--enable-logging=stderr", "--v=0", "--dump-dom", probed.as_uri()], capture_output=True, text=True, timeout=180)
    assert dom.returncode == 0, dom.stderr[-2000:]
    attr = {k: int(re.search(rf'data-{k}="(\d+)"', dom.stdout).group(1)) for k in ("images", "loaded", "links", "maps")}
    cells = len(pd.read_parquet(tiny / "out" / "atlas.parquet"))
    assert attr["images"] == attr["loaded"] == 1, attr  # the overview
    assert attr["maps"] == 1 and attr["links"] == 3 * cells, attr  # one pair: one figure of maps
    errors = [ln for ln in dom.stderr.splitlines() if "CONSOLE" in ln and ("Error" in ln or "Uncaught" in ln)]
    assert not errors, errors
    shot = tmp_path / "shot.png"
    r = subprocess.run(common + ["--window-size=1280,1600", f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and shot.is_file(), r.stderr[-2000:]
    from PIL import Image

    hist = Image.open(shot).convert("L").histogram()
    assert 0.01 < sum(hist[:240]) / sum(hist) < 0.9


def test_the_default_spec_covers_every_cc_and_discipline_but_the_validation_dropper():
    from aqmlab import _native

    spec = load_spec()
    ccs = {c for c in aqmlab.scenario.available("cc")} - {"cbr"}
    assert set(spec.ccs) == ccs
    assert set(spec.aqm_labels()) == {a["kind"] for a in _native.describe_aqms()} - {"bernoulli"}
    quick = load_spec(quick=True)
    assert len(quick.pairs()) * len(quick.aqms) < len(spec.pairs()) * len(spec.aqms)


BAD = [
    ("unknown-cc", SPEC.replace('ccs = ["cubic", "bbr"]', 'ccs = ["cubic", "bbrr"]'), "7: ccs:", "'bbrr' is not a congestion control"),
    ("one-cc", SPEC.replace('ccs = ["cubic", "bbr"]', 'ccs = ["cubic"]'), "7: ccs:", "at least two"),
    ("empty-range", SPEC.replace("low = 0.25\nhigh = 4.0", "low = 4.0\nhigh = 4.0"), "buffer:", "empty range"),
    ("no-levels", SPEC.replace("levels = 2\n\n[ratio]", "levels = 0\n\n[ratio]"), "buffer.levels:", "at least 1"),
    ("unknown-key", SPEC.replace('rate = "10Mbps"', 'rtae = "10Mbps"'), "2: rtae:", "unknown key"),
    ("bad-aqm", SPEC.replace('{ kind = "fq_codel" }', '{ kind = "step" }'), "8: aqms:", "target"),
]


@pytest.mark.parametrize("name,text,where,fragment", BAD, ids=[b[0] for b in BAD])
def test_a_bad_spec_is_one_keyed_line_exit_2_nothing_written(tmp_path, name, text, where, fragment):
    f = tmp_path / "spec.toml"
    f.write_text(text)
    r = CliRunner().invoke(app, ["atlas", str(f), "-o", str(tmp_path / "out")])
    msg = r.stderr.strip()
    assert r.exit_code == 2 and len(msg.splitlines()) == 1 and where in msg and fragment in msg, (r.exit_code, msg)
    assert not (tmp_path / "out").exists()


def _line_of(text: str, fragment: str) -> int:
    """The 1-based line of the one line of `text` that holds `fragment`."""
    lines = [i for i, ln in enumerate(text.splitlines(), 1) if fragment in ln]
    assert len(lines) == 1, (fragment, lines)
    return lines[0]


# (id, spec text, --quick, the line's fragment, the error after "spec.toml:<line>: ")
SPEC_ERRORS = [
    ("misspelt-refine-key", SPEC.replace("rounds = 1", "round = 1"), False, "round =", "refine.round: unknown key (did you mean 'rounds'?)"),
    (
        "misspelt-axis-key",
        SPEC.replace("levels = 2\n\n[ratio]", "levles = 2\n\n[ratio]"),
        False,
        "levles",
        "buffer.levles: unknown key (did you mean 'levels'?)",
    ),
    ("misspelt-quick-key", SPEC + '\n[quick]\nccss = ["cubic", "reno"]\n', False, "ccss", "quick.ccss: unknown key (did you mean 'ccs'?)"),
    ("count-as-a-string", SPEC.replace("seeds = [1]", 'seeds = [1]\ncount = "2"'), False, "count", "count: '2': Input should be a valid integer"),
    (
        "levels-not-an-integer",
        SPEC.replace("levels = 2\n\n[ratio]", "levels = 2.5\n\n[ratio]"),
        False,
        "levels = 2.5",
        "buffer.levels: 2.5: Input should be a valid integer",
    ),
    (
        "rate-not-a-rate",
        SPEC.replace('rate = "10Mbps"', 'rate = "10 parsecs"'),
        False,
        "parsecs",
        "rate: '10 parsecs' is not a rate: unknown unit 'parsecs' (use bps, Kbps, Mbps, Gbps)",
    ),
    # A bad value in [quick] is named where it is written, not at the key it overrides.
    (
        "quick-one-cc",
        SPEC + '\n[quick]\nccs = ["cubic"]\n',
        True,
        'ccs = ["cubic"]',
        'quick.ccs: needs at least two congestion controls, e.g. ["cubic", "bbr"]',
    ),
    (
        "quick-axis-levels",
        SPEC + "\n[quick]\nbuffer = { levels = 0 }\n",
        True,
        "levels = 0",
        "quick.buffer.levels: levels is a number of initial cells, at least 1",
    ),
]


@pytest.mark.parametrize("name,text,quick,fragment,error", SPEC_ERRORS, ids=[s[0] for s in SPEC_ERRORS])
def test_a_spec_is_checked_by_its_model_with_file_line_and_key(name, text, quick, fragment, error):
    with pytest.raises(aqmlab.ScenarioError) as e:
        parse_spec(text, file="spec.toml", quick=quick)
    assert str(e.value) == f"spec.toml:{_line_of(text, fragment)}: {error}"


def test_a_cell_without_a_valid_scenario_is_marked_not_run(tmp_path):
    # RED with tc's derivation (limit = the buffer, max = limit/4, min = max/3; tc-red(8)) has
    # no parameters for a buffer of 0.045 BDP at 20 Mbit/s × 20 ms (2.2 KB: max below one
    # 1500-byte packet); at 0.9 BDP (45 KB) it has. Cells: centres of [0.01, 0.2] and [0.2, 4].
    spec = SPEC.replace('rate = "10Mbps"', 'rate = "20Mbps"').replace(
        'aqms = [{ kind = "taildrop" }, { kind = "fq_codel" }]', 'aqms = [{ kind = "red", avpkt = "1500B", bandwidth = "20Mbps" }]'
    )
    spec = spec.replace("low = 0.25\nhigh = 4.0", "low = 0.01\nhigh = 4.0").replace("rounds = 1", "rounds = 0")
    s = parse_spec(spec)
    df = run_atlas(s, tmp_path / "out", jobs=2)
    small, large = df[df["buffer_bdp"] < 0.1], df[df["buffer_bdp"] > 0.5]
    assert len(small) == len(large) == 2
    assert small["error"].str.contains("bottleneck.aqm").all() and small["jain"].isna().all() and small["run"].isna().all()
    assert large["error"].isna().all() and large["jain"].between(0.5, 1.0).all()
    from aqmlab.report.atlas import write_atlas_report

    html = write_atlas_report(tmp_path / "out").read_text()
    assert "grey cells have no valid scenario" in html
    assert len(re.findall(r'<a xlink:href="cells/', html)) == 3 * len(large)


def test_the_atlas_says_its_runs_and_wall_time_before_starting_and_writes_nothing_on_a_dry_run(tmp_path, tiny):
    f = tmp_path / "spec.toml"
    f.write_text(SPEC)
    r = CliRunner().invoke(app, ["atlas", str(f), "-o", str(tmp_path / "out"), "--dry-run", "-j", "2"])
    assert r.exit_code == 0, r.output
    # 1 pair × 2 AQMs × 2 × 2 cells = 8 cells, each the pair's run and its two solo baselines
    # (the baselines of one place are shared between pairs: here there is one pair): 24 runs.
    # One refinement round splits at most every cell into four: 32 more cells.
    assert "24 runs to simulate (the first round's 8 cells)" in r.stdout and "estimate from the engine's estimator" in r.stdout, r.stdout
    assert "on 2 workers" in r.stdout and "at most 32 more cells" in r.stdout, r.stdout
    assert "warning" not in r.stderr and not (tmp_path / "out").exists()
    # The finished atlas of the fixture: its first round is all stored.
    r = CliRunner().invoke(app, ["atlas", str(tiny / "spec.toml"), "-o", str(tiny / "out"), "--dry-run"])
    assert r.exit_code == 0 and "no run to simulate (the first round's 8 cells, 24 already stored)" in r.stdout, r.stdout
    # Three hours at 10 Gbit/s a run: over an hour, said once.
    f.write_text(SPEC.replace('rate = "10Mbps"', 'rate = "10Gbps"').replace('duration = "6s"', 'duration = "10800s"'))
    r = CliRunner().invoke(app, ["atlas", str(f), "-o", str(tmp_path / "out"), "--dry-run", "-j", "2"])
    assert r.exit_code == 0, r.output
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and "this atlas is expected to take over an hour" in warnings[0], r.stderr
    assert not (tmp_path / "out").exists()


def test_an_atlas_whose_runs_cannot_fit_in_memory_is_refused_before_anything_runs(tmp_path):
    f = tmp_path / "spec.toml"
    f.write_text(SPEC.replace("seeds = [1]", "seeds = [1]\ncount = 3000000"))
    r = CliRunner().invoke(app, ["atlas", str(f), "-o", str(tmp_path / "out")])
    msg = r.stderr.strip()
    assert r.exit_code == 2 and len(msg.splitlines()) == 1, (r.exit_code, r.output)
    assert str(f) in msg and "needs an estimated" in msg and "of memory" in msg and "pair=cubic-bbr" in msg, msg
    assert not (tmp_path / "out").exists()


def test_a_plugin_discipline_maps_as_its_builtin_twin(tmp_path, monkeypatch):
    # examples/plugins/step.c gives every verdict of the built-in STEP (tests/test_plugin.py):
    # its maps are the built-in's, cell for cell. The module's path is relative to the spec's
    # directory, and it is labelled by its file name.
    monkeypatch.setenv("AQMLAB_CACHE_DIR", str(tmp_path / "cache"))
    specs = tmp_path / "specs"
    specs.mkdir()
    shutil.copy(Path(__file__).resolve().parents[1] / "examples" / "plugins" / "step.c", specs / "step.c")
    aqms = 'aqms = [{ kind = "plugin", module = "step.c", threshold_bytes = "20KB" }, { kind = "step", threshold = "20KB" }]'
    text = SPEC.replace('aqms = [{ kind = "taildrop" }, { kind = "fq_codel" }]', aqms).replace("rounds = 1", "rounds = 0")
    text = text.replace('duration = "6s"', 'duration = "3s"').replace('warmup = "2s"', 'warmup = "1s"')
    (specs / "atlas.toml").write_text(text)
    monkeypatch.chdir(tmp_path)
    df = run_atlas(load_spec("specs/atlas.toml"), tmp_path / "out", jobs=2)
    assert sorted(df["aqm"].unique()) == ["step", "step.c"]
    cols = ["first", "second", "buffer_bdp", "rtt_ratio", "jain", "harm_first", "harm_second"]
    mine = df[df["aqm"] == "step.c"][cols].reset_index(drop=True)
    theirs = df[df["aqm"] == "step"][cols].reset_index(drop=True)
    assert len(mine) == 4 and mine.equals(theirs)


def test_a_plugin_cc_pairs_with_its_builtin_twin_without_harm(tmp_path, monkeypatch):
    # examples/plugins/reno.bpf.c is made of the kernel's Reno functions and gives the built-in
    # Reno's results bit for bit (crates/sim/tests/cc_plugin.rs): paired with Reno, each side
    # does exactly what its solo baseline (two flows of itself) does, so both harms are 0 in
    # every cell. The file is relative to the spec; the maps name it by its struct_ops name.
    monkeypatch.setenv("AQMLAB_CACHE_DIR", str(tmp_path / "cache"))
    specs = tmp_path / "specs"
    specs.mkdir()
    shutil.copy(Path(__file__).resolve().parents[1] / "examples" / "plugins" / "reno.bpf.c", specs / "mine.bpf.c")
    text = SPEC.replace('ccs = ["cubic", "bbr"]', 'ccs = ["reno", { plugin = "mine.bpf.c" }]').replace("rounds = 1", "rounds = 0")
    text = text.replace('aqms = [{ kind = "taildrop" }, { kind = "fq_codel" }]', 'aqms = [{ kind = "taildrop" }]')
    text = text.replace('duration = "6s"', 'duration = "3s"').replace('warmup = "2s"', 'warmup = "1s"')
    (specs / "atlas.toml").write_text(text)
    monkeypatch.chdir(tmp_path)
    df = run_atlas(load_spec("specs/atlas.toml"), tmp_path / "out", jobs=2)
    assert len(df) == 4 and set(zip(df["first"], df["second"])) == {("reno", "aqmlab_reno")}
    assert (df["harm_first"] == 0).all() and (df["harm_second"] == 0).all(), df
    assert df["jain"].between(0.5, 1).all()
