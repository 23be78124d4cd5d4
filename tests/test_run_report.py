"""One run as a picture: `aqmlab run -o DIR` writes DIR/report.html (unless --no-report), whose
figures follow the run's classes (a CC-state figure only where a class's CC reports a state, a
line per flow up to LINES_MAX flows, bands above), opened by a real browser; `aqmlab report` on
a run directory; `aqmlab plot` of run directories; `compare`'s log delay axis and cwnd panels;
bad input refused in one line."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest
from click.testing import Result
from typer.testing import CliRunner

import aqmlab
from aqmlab.cli.main import app
from aqmlab.report.page import Page
from aqmlab.report.run import LINES_MAX

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

# BBR reports its phase (startup, drain, probe_bw, probe_rtt); CUBIC reports no state of its
# own. 10 CUBIC flows are more than LINES_MAX: drawn as bands, not lines.
MIXED = """\
name = "mixed"
duration = "3s"
warmup = "1s"
seed = 1

[bottleneck]
rate = "20Mbps"
buffer = "1bdp"
aqm = { kind = "pi2", target = "15ms" }

[[flows]]
cc = "bbr"
count = 2
rtt = "20ms"

[[flows]]
cc = "cubic"
count = 10
rtt = "20ms"
"""

# Loss-based CCs only, through drop-tail: no CC state and no delay target.
PLAIN = """\
name = "plain"
duration = "2s"
seed = 2

[bottleneck]
rate = "10Mbps"
buffer = "1bdp"
aqm = { kind = "taildrop" }

[[flows]]
cc = "cubic"
count = 3
rtt = "10ms"

[[flows]]
cc = "reno"
count = 1
rtt = "30ms"
"""

FLOWS = {"mixed": {"bbr-20ms": 2, "cubic-20ms": 10}, "plain": {"cubic-10ms": 3, "reno-30ms": 1}}


def _cli(args: list[str]) -> Result:
    r = CliRunner().invoke(app, args)
    assert r.exception is None or isinstance(r.exception, SystemExit), f"{args[0]} raised {type(r.exception).__name__}: {r.exception}"
    return r


#: The SVG ids (`Artist.set_gid`) of the artists of every figure a page drew, by the page's
#: figure folder and the figure's name: a line per flow, bands, the delay target.
DRAWN: dict[tuple[str, str], list[str]] = {}


def _record(mp: pytest.MonkeyPatch) -> None:
    figure = Page.figure

    def record(self: Page, fig: Any, name: str, *args: Any, **kwargs: Any) -> None:
        # A figure handed over as the function that builds it (drawn by a worker process) is
        # built here too, to read its artists.
        built = fig() if callable(fig) else fig
        DRAWN[(str(self.fig_dir), name)] = [a.get_gid() for a in built.findobj() if a.get_gid()]
        if callable(fig):
            plt.close(built)
        figure(self, fig, name, *args, **kwargs)

    mp.setattr(Page, "figure", record)


def _drawn(page: Path, name: str) -> list[str]:
    return DRAWN[(str(page.parent / f"{page.stem}-figures"), name)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("runrep")
    for name, text in (("mixed", MIXED), ("plain", PLAIN)):
        (d / f"{name}.toml").write_text(text)
    with pytest.MonkeyPatch.context() as mp:
        _record(mp)
        r = _cli(["run", str(d / "mixed.toml"), "-o", str(d / "mixed"), "-q"])
        assert r.exit_code == 0, r.stderr
        r = _cli(["run", str(d / "plain.toml"), "-o", str(d / "plain"), "-q", "--no-report"])
        assert r.exit_code == 0, r.stderr
    return d


def _figures(page: Path) -> list[str]:
    """The page's figures by name, in order (NN-name.png beside it)."""
    return [p.stem.split("-", 1)[1] for p in sorted((page.parent / f"{page.stem}-figures").glob("*.png"))]


def _ids(svg: Path) -> list[str]:
    root = ET.parse(svg).getroot()  # also: the file is well-formed XML
    assert root.tag.endswith("svg")
    return [e.get("id", "") for e in root.iter()]


def test_run_writes_its_page_with_a_figure_per_kind_of_data_the_classes_have(runs: Path) -> None:
    page = runs / "mixed" / "report.html"
    assert page.is_file()
    # BBR reports a phase: flows, the CCs' state, the bottleneck.
    assert _figures(page) == ["flows", "cc_state", "bottleneck"]
    html = page.read_text()
    assert html.count("<img ") == 3
    for cls, n in FLOWS["mixed"].items():
        assert re.search(rf"<td>{cls}</td>\s*<td>\w+</td>\s*<td>20</td>\s*<td>{n}</td>", html), cls
    # The scenario on the page is the run's: it reads back with the hash of the file it came from.
    toml = re.search(r"<pre[^>]*>(.*?)</pre>", html, re.S)
    assert toml is not None
    from html import unescape

    from aqmlab.scenario import Scenario

    back = Scenario.model_validate(tomllib.loads(unescape(toml.group(1))))
    assert back.hash() == aqmlab.load_scenario(runs / "mixed.toml").hash()
    # The discipline's delay target is the scenario's 15 ms.
    assert "pi2&#x27;s delay target, 15 ms" in html or "pi2's delay target, 15 ms" in html


def test_a_class_of_a_handful_of_flows_is_drawn_flow_by_flow_and_a_larger_one_as_bands(runs: Path) -> None:
    page = runs / "mixed" / "report.html"
    ids = _drawn(page, "flows")
    for panel in ("throughput", "cwnd", "srtt"):
        # 2 BBR flows ≤ LINES_MAX: a line each, and the class mean.
        bbr = [i for i in ids if re.fullmatch(rf"{panel}/bbr-20ms/\d+", i)]
        assert len(bbr) == FLOWS["mixed"]["bbr-20ms"], (panel, bbr)
        assert f"{panel}/bbr-20ms/mean" in ids
        # 10 CUBIC flows > LINES_MAX: no line per flow, two percentile bands and the mean.
        assert FLOWS["mixed"]["cubic-20ms"] > LINES_MAX
        assert not [i for i in ids if re.fullmatch(rf"{panel}/cubic-20ms/\d+", i)]
        assert {f"{panel}/cubic-20ms/p10-p90", f"{panel}/cubic-20ms/p25-p75", f"{panel}/cubic-20ms/mean"} <= set(ids)
    state = _drawn(page, "cc_state")
    # BBR's phases, and none for CUBIC; BBR's first phase is startup.
    assert "phase/bbr-20ms/startup" in state
    assert not [i for i in state if i.startswith("phase/cubic")]
    assert "target" in _drawn(page, "bottleneck")


def test_no_report_writes_none_and_report_draws_a_run_directory(runs: Path, tmp_path: Path) -> None:
    d = tmp_path / "plain"
    shutil.copytree(runs / "plain", d)
    assert not (d / "report.html").exists() and not (d / "report-figures").exists()
    assert (d / "summary.json").is_file()
    with pytest.MonkeyPatch.context() as mp:
        _record(mp)
        r = _cli(["report", str(d)])
    assert r.exit_code == 0, r.stderr
    assert str((d / "report.html").resolve()) in r.stdout.replace("\n", "")
    # Neither CUBIC nor Reno reports a state: two figures; drop-tail has no delay target.
    assert _figures(d / "report.html") == ["flows", "bottleneck"]
    assert "target" not in _drawn(d / "report.html", "bottleneck")
    ids = _drawn(d / "report.html", "flows")
    # 3 CUBIC flows: a line each; the lone Reno flow is its own line (no separate mean).
    assert len([i for i in ids if re.fullmatch(r"throughput/cubic-10ms/\d+", i)]) == 3
    assert [i for i in ids if i.startswith("throughput/reno-30ms/")] == ["throughput/reno-30ms/3"]
    # -o elsewhere: the page and its figures go there, the run directory is left alone.
    r = _cli(["report", str(d), "-o", str(tmp_path / "site" / "plain.html")])
    assert r.exit_code == 0, r.stderr
    assert _figures(tmp_path / "site" / "plain.html") == ["flows", "bottleneck"]


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (make test installs it)")
def test_a_real_browser_opens_the_run_page_with_every_figure_loaded(runs: Path, tmp_path: Path) -> None:
    page = runs / "mixed" / "report.html"
    probe = (
        "<script>window.addEventListener('load',()=>{const im=[...document.images];"
        "document.body.setAttribute('data-images',im.length);"
        "document.body.setAttribute('data-loaded',im.filter(i=>i.complete&&i.naturalWidth>0).length);});</script>"
    )
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text().replace("</body>", probe + "</body>"))
    common = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files", "--virtual-time-budget=10000"]
    dom = subprocess.run(common + ["--enable-logging=stderr", "--v=0", "--dump-dom", probed.as_uri()], capture_output=True, text=True, timeout=180)
    assert dom.returncode == 0, dom.stderr[-2000:]
    attr = {k: int(re.search(rf'data-{k}="(\d+)"', dom.stdout).group(1)) for k in ("images", "loaded")}  # type: ignore[union-attr]
    # Two classes, one of them with a CC state (BBR's phase): flows, state, bottleneck.
    assert attr == {"images": 3, "loaded": 3}, attr
    errors = [ln for ln in dom.stderr.splitlines() if "CONSOLE" in ln and ("Error" in ln or "Uncaught" in ln)]
    assert not errors, errors


def test_plot_puts_two_runs_on_one_figure_a_line_per_flow_labelled_by_directory(runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "fig.svg"
    r = _cli(["plot", str(runs / "mixed"), str(runs / "plain"), "--series", "throughput,cwnd", "--series", "queue", "-o", str(out)])
    assert r.exit_code == 0, r.stderr
    ids = _ids(out)
    for series in ("throughput", "cwnd"):
        for run, classes in FLOWS.items():
            for cls, n in classes.items():
                assert len([i for i in ids if re.fullmatch(rf"{series}/{run}/{re.escape(cls)}/\d+", i)]) == n, (series, run, cls)
    # The bottleneck: a line per run; a target only for PI2 (drop-tail has none).
    assert [i for i in ids if i.startswith("queue/")] == ["queue/mixed", "queue/plain"]
    assert [i for i in ids if i.startswith("target/")] == ["target/mixed"]
    # The legend names each run by its directory (matplotlib keeps each text as a comment).
    text = out.read_text()
    for run, classes in FLOWS.items():
        for cls in classes:
            assert f"<!-- {run} · {cls} -->" in text, (run, cls)
    # --by class: one line per class; PNG and PDF by suffix.
    r = _cli(["plot", str(runs / "mixed"), "--series", "srtt", "--by", "class", "-o", str(tmp_path / "c.svg")])
    assert r.exit_code == 0, r.stderr
    assert sorted(i for i in _ids(tmp_path / "c.svg") if i.startswith("srtt/")) == ["srtt/mixed/bbr-20ms/mean", "srtt/mixed/cubic-20ms/mean"]
    for suffix, magic in ((".png", b"\x89PNG"), (".pdf", b"%PDF")):
        r = _cli(["plot", str(runs / "plain"), "-o", str(tmp_path / f"f{suffix}")])
        assert r.exit_code == 0, r.stderr
        assert (tmp_path / f"f{suffix}").read_bytes().startswith(magic)


def _one_error(r: Result) -> str:
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (r.exit_code, r.stderr)
    return lines[0]


def test_bad_input_is_refused_in_one_line_naming_what_is_wrong(runs: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    line = _one_error(_cli(["report", str(empty)]))
    assert f"{empty}: not a run directory (no summary.json), a sweep directory (no index.parquet)" in line
    assert not (empty / "report.html").exists()
    line = _one_error(_cli(["plot", str(empty), "--series", "cwnd", "-o", str(tmp_path / "x.svg")]))
    assert f"{empty}: not a run directory" in line
    line = _one_error(_cli(["plot", str(runs / "mixed"), "--series", "goodput", "-o", str(tmp_path / "x.svg")]))
    assert "--series 'goodput': not a series (series: throughput, cwnd, srtt, queue)" in line
    line = _one_error(_cli(["plot", str(runs / "mixed"), "-o", str(tmp_path / "x.txt")]))
    assert "x.txt" in line and ".png, .svg, .pdf" in line
    line = _one_error(_cli(["plot", str(runs / "mixed"), "--metric", "jain", "-o", str(tmp_path / "x.svg")]))
    assert "--metric is for a sweep directory" in line
    assert not list(tmp_path.glob("x.*"))
    # A run directory missing a table is named as such.
    broken = tmp_path / "broken"
    shutil.copytree(runs / "plain", broken)
    (broken / "queue.parquet").unlink()
    line = _one_error(_cli(["report", str(broken)]))
    assert f"{broken}: not a run directory (missing queue.parquet)" in line


def test_compare_draws_cwnd_beside_throughput_and_the_delay_cdf_on_a_log_axis(runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A compare directory whose "emulator" side is another simulator run (the page reads only
    # the two result stores and compare.json).
    from aqmlab.analysis.compare import compare_rows
    from aqmlab.report.compare import write_compare_report

    d = tmp_path / "cmp"
    shutil.copytree(runs / "plain", d / "sim")
    shutil.copytree(runs / "plain", d / "emu")
    summaries = [json.loads((d / k / "summary.json").read_text()) for k in ("sim", "emu")]
    (d / "compare.json").write_text(json.dumps(compare_rows(*summaries)))
    drawn: dict[str, Any] = {}
    figure = Page.figure

    def keep(self: Page, fig: Any, name: str, *args: Any, **kwargs: Any) -> None:
        drawn[name] = [(ax.get_xscale(), ax.get_ylabel(), len(ax.get_lines())) for ax in fig.axes]
        figure(self, fig, name, *args, **kwargs)

    monkeypatch.setattr(Page, "figure", keep)
    write_compare_report(d, d / "report.html")
    assert [a[0] for a in drawn["delay_cdf"]] == ["log"]
    # Throughput and cwnd, one column per backend; a line per flow in each panel.
    panels = drawn["throughput_over_time"]
    assert len(panels) == 4
    assert sum(n for n in FLOWS["plain"].values()) == 4
    assert all(lines == 4 for _, _, lines in panels), panels
    assert [label for _, label, _ in panels if label] == ["throughput per flow (Mbit/s)", "cwnd per flow (packets)"]


def test_the_page_is_written_without_loading_matplotlib_where_workers_draw_the_figures(runs: Path, tmp_path: Path) -> None:
    # A process of its own: this one has loaded matplotlib already. The figures are drawn by
    # worker processes from the arrays the page's process hands over: the same files as the
    # page of the same run drawn by the `runs` fixture. The process is shown two cores, so
    # that the page draws with workers (one per core) on a one-core machine too.
    out = tmp_path / "site" / "report.html"
    code = (
        "import os, sys\n"
        "os.sched_getaffinity = lambda pid: {0, 1}\n"
        "from aqmlab.report.run import write_run_report\n"
        f"write_run_report({str(runs / 'mixed')!r}, {str(out)!r})\n"
        "print(sorted(m for m in ('matplotlib', 'PIL') if m in sys.modules))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[]", r.stdout
    assert _figures(out) == ["flows", "cc_state", "bottleneck"]
    for name in ("flows", "cc_state", "bottleneck"):
        here = next((runs / "mixed" / "report-figures").glob(f"*-{name}.png"))
        there = next((out.parent / "report-figures").glob(f"*-{name}.png"))
        assert here.read_bytes() == there.read_bytes(), name
