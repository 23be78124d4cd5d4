"""Reports: one static HTML page that a real browser (headless Chromium, Debian's package) opens
from disk with every figure loaded, no console error and a non-blank rendering; a PNG copy of
each figure beside it, and an SVG copy when asked; `aqmlab plot`."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

import aqmlab
from aqmlab.analysis.harm import load_harm
from aqmlab.cli.main import app
from aqmlab.report.study import write_harm_report, write_report
from aqmlab.sweep.spec import parse_sweep

SWEEP = """\
name = "report-test"
duration = "3s"
warmup = "1s"
seed = 1

[bottleneck]
rate = "20Mbps"
buffer = "${f}bdp"

[[flows]]
cc = "dctcp"
count = "${N}"
rtt = "10ms"

[[flows]]
cc = "cubic"
count = "${N}"
rtt = "10ms"
ecn = true

[sweep]
N = [1, 2]
f = [0.5, 2]
"bottleneck.aqm" = [{ kind = "step", target = "0.5rtt" }, { kind = "pie", ecn = true }]

[report]
x = "f"
col = "N"
row = "bottleneck.aqm"
"""

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _cli(args: list[str]) -> Result:
    """An `aqmlab` command in-process (Typer's runner: its exit status, stdout and stderr). An
    exception escaping the command (a traceback in a real process) fails here, naming it."""
    r = CliRunner().invoke(app, args)
    assert r.exception is None or isinstance(r.exception, SystemExit), f"{args[0]} raised {type(r.exception).__name__}: {r.exception}"
    return r


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    d = tmp_path_factory.mktemp("rep")
    aqmlab.run_sweep(parse_sweep(SWEEP), d / "sweep", jobs=2)
    r = _cli(["report", str(d / "sweep"), "-o", str(d / "site" / "report.html")])
    assert r.exit_code == 0, r.stderr
    return d


def test_every_figure_is_saved_as_png_and_embedded_and_as_svg_when_asked(report):
    html = (report / "site" / "report.html").read_text()
    figs = sorted((report / "site" / "report-figures").glob("*.png"))
    assert len(figs) >= 8
    for png in figs:
        assert png.stat().st_size > 1000
        assert f"report-figures/{png.name}" in html
        # The embedded image is the file, drawn once.
        assert base64.b64encode(png.read_bytes()).decode() in html
    assert html.count("<img ") == len(figs)
    assert not list((report / "site" / "report-figures").glob("*.svg")) and ".svg" not in html
    page = write_report(report / "sweep", report / "svg" / "report.html", svg=True)
    html = page.read_text()
    svgs = sorted((report / "svg" / "report-figures").glob("*.svg"))
    assert [p.stem for p in svgs] == [p.stem for p in figs]
    for svg in svgs:
        assert svg.read_text().lstrip().startswith(("<?xml", "<svg"))
        assert f"report-figures/{svg.name}" in html
    # The numbers under the utilization figure are the index's.
    df = aqmlab.load(report / "sweep")
    u = df.drop_duplicates("run")["utilization"]
    shown = [float(x) for x in re.findall(r"<td>([0-9.]+)</td>", html)]
    for v in u:
        assert any(abs(v - s) <= 5e-4 * max(1.0, abs(v)) for s in shown), v


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (make test installs it)")
def test_a_real_browser_opens_the_report_from_disk_with_every_image_loaded(report, tmp_path):
    open_in_browser(report / "site" / "report.html", tmp_path, min_images=8)


def open_in_browser(page: Path, tmp_path: Path, *, min_images: int, shot: Path | None = None) -> None:
    """Headless Chromium opens `page` from disk: every image decoded, no console error, and
    the rendering (screenshot to `shot`) neither blank nor solid."""
    # A copy of the page with a probe that records, after load, how many images decoded.
    probe = (
        "<script>window.addEventListener('load',()=>{const im=[...document.images];"
        "document.body.setAttribute('data-images',im.length);"
        "document.body.setAttribute('data-loaded',im.filter(i=>i.complete&&i.naturalWidth>0).length);});</script>"
    )
    probed = page.with_name("probed.html")
    probed.write_text(page.read_text().replace("</body>", probe + "</body>"))
    common = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files", "--virtual-time-budget=10000"]
    dom = subprocess.run(common + ["--enable-logging=stderr", "--v=0", "--dump-dom", probed.as_uri()], capture_output=True, text=True, timeout=180)
    assert dom.returncode == 0, dom.stderr[-2000:]
    n = int(re.search(r'data-images="(\d+)"', dom.stdout).group(1))
    loaded = int(re.search(r'data-loaded="(\d+)"', dom.stdout).group(1))
    assert n >= min_images and loaded == n, (n, loaded)
    console_errors = [line for line in dom.stderr.splitlines() if "CONSOLE" in line and ("Error" in line or "Uncaught" in line)]
    assert not console_errors, console_errors
    # The page as rendered (the unmodified report) is not blank.
    shot = shot or tmp_path / "shot.png"
    r = subprocess.run(common + ["--window-size=1280,2400", f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and shot.is_file(), r.stderr[-2000:]
    from PIL import Image

    img = Image.open(shot).convert("L")
    hist = img.histogram()
    non_white = sum(hist[:240]) / sum(hist)
    assert 0.01 < non_white < 0.9, f"screenshot looks blank or solid ({non_white:.3f} non-white)"


def test_plot_makes_one_facet_figure_and_refuses_an_unknown_column(report, tmp_path):
    out = tmp_path / "fig.svg"
    r = _cli(["plot", str(report / "sweep"), "--metric", "rel_throughput", "--x", "f", "--col", "N", "-o", str(out)])
    assert r.exit_code == 0, r.stderr
    svg = out.read_text()
    assert "<svg" in svg and "N=1" in svg and "N=2" in svg
    r = _cli(["plot", str(report / "sweep"), "--metric", "goodput", "--x", "f", "-o", str(tmp_path / "x.png")])
    assert r.exit_code == 2 and "--metric 'goodput': not a column" in r.stderr
    assert not (tmp_path / "x.png").exists()


# ------------------------------------------------------------------------------------------
# Harm pages and convergence figures
# ------------------------------------------------------------------------------------------

HARM = """\
name = "NAME"
duration = "24s"

[bottleneck]
rate = "50Mbps"
buffer = "0.25bdp"
aqm = AQM

[[flows]]
cc = "cubic"
count = 2
rtt = "20ms"
start = "staggered(0s, 4s)"

[[flows]]
cc = "bbr"
rtt = "20ms"
start = "8s"
stop = "16s"
"""


@pytest.fixture(scope="module")
def harm_report(tmp_path_factory):
    """Two `aqmlab harm` directories (drop-tail and FQ-CoDel; CUBIC flows joining at 0 and 4 s,
    a BBR flow from 8 to 16 s) and one report of both."""
    d = tmp_path_factory.mktemp("harm")
    for name, aqm in (("td", '{ kind = "taildrop" }'), ("fq", '{ kind = "fq_codel" }')):
        (d / f"{name}.toml").write_text(HARM.replace("NAME", f"bbr-cubic-{name}").replace("AQM", aqm))
        r = _cli(["harm", str(d / f"{name}.toml"), "-o", str(d / name)])
        assert r.exit_code == 0, r.stderr
    r = _cli(["report", str(d / "td"), str(d / "fq"), "-o", str(d / "site" / "harm.html")])
    assert r.exit_code == 0, r.stderr
    return d


def test_the_harm_page_has_the_table_and_a_heatmap_of_classes_by_metric(harm_report):
    html = (harm_report / "site" / "harm.html").read_text()
    figs = sorted(p.name for p in (harm_report / "site" / "harm-figures").glob("*.png"))
    assert figs == ["01-harm_heatmap.png", "02-convergence_jain.png", "03-convergence_time.png"]
    # Every harm value of both directories is in the page's table, as harm.json has it.
    for name in ("td", "fq"):
        for row in load_harm(harm_report / name).itertuples():
            for v in (row.throughput_harm, row.delay_harm):
                assert f"<td>{v:.4g}</td>" in html, (name, row)
    # The heatmap's rows are scenario · class, its columns the two metrics (its SVG, whose text is text).
    page = write_harm_report([harm_report / "td", harm_report / "fq"], harm_report / "svg" / "harm.html", svg=True)
    svg = (page.parent / "harm-figures" / "01-harm_heatmap.svg").read_text()
    for label in ("bbr-cubic-td · cubic-20ms", "bbr-cubic-fq · bbr-20ms", "throughput harm", "delay harm"):
        assert label in svg, label


def test_convergence_figures_mark_the_joins_and_leaves_and_show_each_events_time(harm_report):
    html = (harm_report / "site" / "harm.html").read_text()
    assert "<h2>Convergence</h2>" in html
    # The events of the mixed runs: joins at 4 s (a CUBIC flow) and 8 s (BBR), the leave at
    # 16 s; the convergence times shown are aqmlab.convergence's on the run's own tables.
    for name in ("td", "fq"):
        run = harm_report / name / "runs" / json.loads((harm_report / name / "harm.json").read_text())["scenario"]
        res = aqmlab.load_result(run)
        c = aqmlab.convergence(res.timeseries, res.flows, threshold=0.9, window_s=1.0, hold_s=2.0)
        assert list(zip(c["event"], c["event_s"])) == [("join", 4.0), ("join", 8.0), ("leave", 16.0)]
        for v in c["convergence_time_s"].dropna():
            assert f"<td>{v:.4g}</td>" in html, v
    # FQ-CoDel settles after every event.
    fq = aqmlab.load_result(harm_report / "fq" / "runs" / json.loads((harm_report / "fq" / "harm.json").read_text())["scenario"])
    assert aqmlab.convergence(fq.timeseries, fq.flows)["convergence_time_s"].notna().all()


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (make test installs it)")
def test_a_real_browser_opens_the_harm_page(harm_report, tmp_path):
    open_in_browser(harm_report / "site" / "harm.html", tmp_path, min_images=3, shot=harm_report / "site" / "shot.png")


def test_report_refuses_a_directory_that_is_neither_a_sweep_nor_harm(tmp_path, harm_report):
    r = _cli(["report", str(tmp_path)])
    expected = (
        "not a run directory (no summary.json), a sweep directory (no index.parquet), a harm directory (no harm.json) nor a compare directory (no compare.json)"
    )
    assert r.exit_code == 2 and expected in r.stderr, r.stderr
    r = _cli(["report", str(harm_report / "td"), str(tmp_path)])
    assert r.exit_code == 2 and "not a harm directory" in r.stderr, r.stderr
    assert not (harm_report / "td" / "report.html").exists()


JOINS = """\
name = "joins"
duration = "20s"
seed = 1

[bottleneck]
rate = "20Mbps"
buffer = "1bdp"

[[flows]]
cc = "cubic"
count = 3
rtt = "20ms"
start = "staggered(0s, 3s)"
stop = "staggered(12s, 3s)"

[sweep]
"bottleneck.aqm" = [{ kind = "taildrop" }, { kind = "fq_codel" }]
"""


def test_a_sweep_report_with_joins_and_leaves_gains_the_convergence_figures(tmp_path):
    aqmlab.run_sweep(parse_sweep(JOINS), tmp_path / "sweep", jobs=2)
    r = _cli(["report", str(tmp_path / "sweep")])
    assert r.exit_code == 0, r.stderr
    html = (tmp_path / "sweep" / "report.html").read_text()
    assert "<h2>Convergence</h2>" in html and "2 run(s) with joins or leaves" in html
    figs = {p.name.split("-", 1)[1] for p in (tmp_path / "sweep" / "report-figures").glob("*.png")}
    assert {"convergence_jain.png", "convergence_time.png"} <= figs
    # Flows at 0–12, 3–15 and 6–18 s: joins at 3 and 6 s and the leave at 12 s; the leaves at
    # 15 and 18 s leave one flow or none, with no shares to settle.
    for ev in ("join 3 s", "join 6 s", "leave 12 s"):
        assert f"<th>{ev}</th>" in html, ev
    assert "leave 15 s" not in html and "leave 18 s" not in html


def test_a_sweep_without_joins_or_leaves_has_no_convergence_section(report):
    # The module's sweep: every flow starts at 0 s and runs to the end.
    assert "Convergence" not in (report / "site" / "report.html").read_text()


FINITE = """
name = "finite"
duration = "3s"
[bottleneck]
rate = "20Mbps"
buffer = "1bdp"
[[workload]]
cc = "cubic"
rtt = "10ms"
rate = "40/s"
size = { dist = "uniform", min = "2KB", max = "60KB" }
[measure]
fct_bins = ["20KB"]
[sweep]
seed = [1, 2]
"""


def test_the_completion_time_tables_are_the_runs_own_bins_and_nearest_rank_quantiles(tmp_path):
    # The scenario's own bins (one edge at 20 KB: "<20KB", "≥20KB"), and each bin's p50/p99
    # the nearest-rank quantile (the ⌈q·n⌉-th smallest) of the run's completed flows,
    # computed here from fct.parquet.
    import math

    import pyarrow.parquet as pq

    aqmlab.run_sweep(parse_sweep(FINITE), tmp_path / "sweep", jobs=2)
    r = _cli(["report", str(tmp_path / "sweep")])
    assert r.exit_code == 0, r.stderr
    html = (tmp_path / "sweep" / "report.html").read_text()
    assert "<th>&lt;20KB</th>" in html and "<th>≥20KB</th>" in html and "100KB" not in html
    run_dir = sorted((tmp_path / "sweep" / "runs").iterdir())[0]
    f = pq.read_table(run_dir / "fct.parquet").to_pandas()
    small = sorted(f[f["completed"] & (f["size_bytes"] < 20_000)]["fct_s"])
    assert len(small) > 5
    p50, p99 = (small[math.ceil(q * len(small)) - 1] for q in (0.5, 0.99))
    # The table's row for that run's small flows: completed count, mean, p50, p99 (4 digits).
    cells = f"<td>{len(small)}</td>" + r"\s*<td>[^<]*</td>\s*<td>[^<]*</td>\s*" + f"<td>{p50:.4g}</td>" + r"\s*" + f"<td>{p99:.4g}</td>"
    assert re.search(cells, html), (p50, p99)


def test_a_figure_is_saved_with_the_pixels_of_matplotlibs_own_png(tmp_path):
    # The page drops the alpha channel of an opaque figure (every report's): the same pixels,
    # fewer bytes to compress; a figure with transparency keeps it.
    import io

    import matplotlib.pyplot as plt
    import numpy as np
    from PIL import Image

    from aqmlab.report.page import PNG_DPI, Page

    def figure(transparent: bool):
        fig, ax = plt.subplots(figsize=(3, 2))
        ax.fill_between([0, 1, 2], [0, 1, 0.5], color="tab:blue", alpha=0.3)
        ax.plot([0, 1, 2], [1, 0, 1], lw=2)
        ax.set_title("pixels")
        if transparent:
            fig.patch.set_alpha(0.0)
        return fig

    for transparent in (False, True):
        page = Page("t", tmp_path / f"figs-{transparent}", jobs=1)
        page.figure(figure(transparent), "f", "caption")
        saved = Image.open(tmp_path / f"figs-{transparent}" / "01-f.png")
        own = io.BytesIO()
        fig = figure(transparent)
        fig.savefig(own, format="png", dpi=PNG_DPI, bbox_inches="tight")
        plt.close(fig)
        theirs = Image.open(own)
        assert saved.mode == ("RGBA" if transparent else "RGB")
        assert saved.info["dpi"] == theirs.info["dpi"] and saved.info["Software"] == theirs.info["Software"]
        assert np.array_equal(np.asarray(saved.convert("RGBA")), np.asarray(theirs.convert("RGBA")))
