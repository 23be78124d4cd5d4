"""`[[workload]]` in scenarios: validation, the offered-load conversion, empirical CDF files,
and the completion-time summary in a run's results."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

import aqmlab
from aqmlab._scenario import parse_scenario

BASE = """\
name = "w"
duration = "10s"

[bottleneck]
rate = "40Mbps"
buffer = "2bdp"

[[flows]]
cc = "cubic"
rtt = "10ms"

[[workload]]
cc = "cubic"
rtt = "10ms"
WORKLOAD
"""


def scenario(workload: str, tmp_path: Path | None = None):
    text = BASE.replace("WORKLOAD", workload)
    return parse_scenario(text, base_dir=tmp_path)


def test_offered_load_becomes_an_arrival_rate_through_the_distributions_mean():
    # Bounded Pareto, α = 1.5 on [1 KB, 100 KB]: mean = L^α/(1 − (L/H)^α) · α/(α−1) ·
    # (L^(1−α) − H^(1−α)); by hand: 31 622.8 / 0.999 · 3 · (0.031 623 − 0.003 162) = 2702.7
    # bytes; load 0.25 of 40 Mbit/s = 1.25 MB/s ⇒ λ = 1.25e6 / 2702.7 = 462.5 flows/s.
    s = scenario('load = 0.25\nsize = { dist = "pareto", alpha = 1.5, min = "1KB", max = "100KB" }')
    L, H, a = 1000.0, 100000.0, 1.5
    mean = L**a / (1 - (L / H) ** a) * a / (a - 1) * (L ** (1 - a) - H ** (1 - a))
    assert mean == pytest.approx(2702.7, rel=1e-4)
    wl = s.engine_config()["classes"][1]["workload"]
    assert wl["rate_per_s"] == pytest.approx(0.25 * 40e6 / 8 / mean, rel=1e-9)
    # Lognormal with median 10 KB, σ = 1: mean = 10 000 · e^(1/2) = 16 487 bytes; μ = ln(10 000).
    s = scenario('load = 0.5\nsize = { dist = "lognormal", median = "10KB", sigma = 1.0 }')
    wl = s.engine_config()["classes"][1]["workload"]
    assert wl["size"]["mu"] == pytest.approx(math.log(10000))
    assert wl["rate_per_s"] == pytest.approx(0.5 * 5e6 / (10000 * math.exp(0.5)), rel=1e-9)


def test_an_empirical_cdf_file_is_read_relative_to_the_scenario(tmp_path):
    (tmp_path / "cdf.txt").write_text("# size cdf\n1000 0.0\n10000, 0.5\n100000 1.0\n")
    f = tmp_path / "s.toml"
    f.write_text(BASE.replace("WORKLOAD", 'rate = "20/s"\nsize = { dist = "empirical", file = "cdf.txt" }'))
    s = aqmlab.load_scenario(f)
    size = s.engine_config()["classes"][1]["workload"]["size"]
    assert size == {"dist": "empirical", "points": [[1000.0, 0.0], [10000.0, 0.5], [100000.0, 1.0]]}
    # The canonical scenario holds the points, so the run hash follows the file's content.
    h1 = s.hash()
    (tmp_path / "cdf.txt").write_text("1000 0.0\n20000 0.5\n100000 1.0\n")
    assert aqmlab.load_scenario(f).hash() != h1


@pytest.mark.parametrize(
    "workload, fragment",
    [
        ('size = { dist = "fixed", size = "10KB" }', "give exactly one of rate"),
        ('rate = "10/s"\nload = 0.5\nsize = { dist = "fixed", size = "10KB" }', "give exactly one of rate"),
        ('rate = "ten per second"\nsize = { dist = "fixed", size = "10KB" }', "flows per second"),
        ('rate = "10/s"\nsize = { dist = "pareto", min = "1KB", max = "1MB" }', "needs alpha"),
        ('rate = "10/s"\nsize = { dist = "fixed", size = "10KB", sigma = 1.0 }', "not sigma"),
        ('rate = "10/s"\nsize = { dist = "empirical", file = "missing.txt" }', "cannot read"),
        ('rate = "10/s"\nsize = { dist = "fixed", size = "10ms" }', "is not a size"),
    ],
    ids=["no-rate", "rate-and-load", "bad-rate", "pareto-without-alpha", "extra-field", "missing-cdf-file", "time-as-size"],
)
def test_bad_workloads_exit_2_naming_the_key(tmp_path, workload, fragment):
    f = tmp_path / "bad.toml"
    f.write_text(BASE.replace("WORKLOAD", workload))
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "aqmlab", "run", str(f), "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert fragment in r.stderr and "workload[0]" in r.stderr, r.stderr
    assert not out.exists()


def test_a_run_with_arrivals_reports_completion_times_by_size_with_unfinished_flows(tmp_path):
    s = scenario('rate = "30/s"\nsize = { dist = "pareto", alpha = 1.2, min = "1KB", max = "2MB" }')
    res = aqmlab.run(s)
    fct = res.summary["fct"]
    assert [b["bin"] for b in fct] == ["<100KB", "100KB–1MB", "≥1MB"]
    table = res.fct
    assert sum(b["flows"] for b in fct) == len(table)
    assert sum(b["unfinished"] for b in fct) == int((~table["completed"]).sum())
    # Slowdown = FCT ÷ (size/C + base RTT): recompute it from the table.
    done = table[table["completed"]]
    ideal = done["size_bytes"] * 8 / 40e6 + 0.010
    assert (done["slowdown"] - done["fct_s"] / ideal).abs().max() < 1e-9
    # A flow takes at least one RTT to be acknowledged: slowdown ≥ 1 up to serialization.
    assert done["slowdown"].min() >= 0.99
    # The workload class has no fair share (its flows come and go); the bulk class has one.
    classes = {c["name"]: c for c in res.summary["classes"]}
    assert classes["cubic-10ms-arrivals"]["rel_throughput"] is None
    assert classes["cubic-10ms"]["rel_throughput"] > 0.5
