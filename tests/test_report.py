"""Reports: one static HTML page that a real browser (headless Chromium, Debian's package) opens
from disk with every figure loaded, no console error and a non-blank rendering; PNG and SVG
copies of each figure; `aqmlab plot`."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import aqmlab
from aqmlab._sweep import parse_sweep

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


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    d = tmp_path_factory.mktemp("rep")
    aqmlab.run_sweep(parse_sweep(SWEEP), d / "sweep", jobs=2)
    r = subprocess.run([sys.executable, "-m", "aqmlab", "report", str(d / "sweep"), "-o", str(d / "site" / "report.html")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return d


def test_every_figure_is_saved_as_png_and_svg_and_embedded(report):
    html = (report / "site" / "report.html").read_text()
    figs = sorted((report / "site" / "report-figures").glob("*.png"))
    assert len(figs) >= 8
    for png in figs:
        assert png.stat().st_size > 1000
        assert png.with_suffix(".svg").read_text().lstrip().startswith(("<?xml", "<svg"))
        assert f'report-figures/{png.name}' in html
    assert html.count("<img ") == len(figs)
    # The numbers under the utilization figure are the index's.
    df = aqmlab.load(report / "sweep")
    u = df.drop_duplicates("run")["utilization"]
    shown = [float(x) for x in re.findall(r"<td>([0-9.]+)</td>", html)]
    for v in u:
        assert any(abs(v - s) <= 5e-4 * max(1.0, abs(v)) for s in shown), v


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (make test installs it)")
def test_a_real_browser_opens_the_report_from_disk_with_every_image_loaded(report, tmp_path):
    page = report / "site" / "report.html"
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
    assert n >= 8 and loaded == n, (n, loaded)
    console_errors = [l for l in dom.stderr.splitlines() if "CONSOLE" in l and ("Error" in l or "Uncaught" in l)]
    assert not console_errors, console_errors
    # The page as rendered (the unmodified report) is not blank.
    shot = tmp_path / "shot.png"
    r = subprocess.run(common + ["--window-size=1280,2400", f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and shot.is_file(), r.stderr[-2000:]
    from PIL import Image

    img = Image.open(shot).convert("L")
    hist = img.histogram()
    non_white = sum(hist[:240]) / sum(hist)
    assert 0.01 < non_white < 0.9, f"screenshot looks blank or solid ({non_white:.3f} non-white)"


def test_plot_makes_one_facet_figure_and_refuses_an_unknown_column(report, tmp_path):
    out = tmp_path / "fig.svg"
    r = subprocess.run([sys.executable, "-m", "aqmlab", "plot", str(report / "sweep"), "--metric", "rel_throughput", "--x", "f", "--col", "N", "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    svg = out.read_text()
    assert "<svg" in svg and "N=1" in svg and "N=2" in svg
    r = subprocess.run([sys.executable, "-m", "aqmlab", "plot", str(report / "sweep"), "--metric", "goodput", "--x", "f", "-o", str(tmp_path / "x.png")], capture_output=True, text=True)
    assert r.returncode == 2 and "--metric 'goodput': not a column" in r.stderr
    assert not (tmp_path / "x.png").exists()
