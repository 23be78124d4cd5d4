"""`[[workload]]` in scenarios: validation, the offered-load conversion, empirical CDF files,
and the completion-time summary in a run's results."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

import aqmlab
from aqmlab.cli.main import app
from aqmlab.scenario import parse_scenario

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


def _run_cli(f, out) -> tuple[int, str]:
    """`aqmlab run F -o OUT` in-process (Typer's runner): its exit status and stderr."""
    r = CliRunner().invoke(app, ["run", str(f), "-o", str(out)])
    assert r.exception is None or isinstance(r.exception, SystemExit), f"run raised {type(r.exception).__name__}: {r.exception}"
    return r.exit_code, r.stderr


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
    code, err = _run_cli(f, out)
    assert code == 2, err
    assert fragment in err and "workload[0]" in err, err
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


# ------------------------------------------------------------------------------------------
# Schedules with stops
# ------------------------------------------------------------------------------------------

STOPS = """\
name = "stops"
duration = "DURATION"
warmup = "WARMUP"

[bottleneck]
rate = "50Mbps"
buffer = "1bdp"

[[flows]]
cc = "cubic"
rtt = "20ms"
count = 3
start = "staggered(0s, 5s)"
stop = "STOP"

[[flows]]
cc = "cbr"
rate = "6Mbps"
rtt = "20ms"
start = "2s"
stop = "8s"
"""


def stops(stop: str = "staggered(20s, 5s)", duration: str = "40s", warmup: str = "0s") -> str:
    return STOPS.replace("STOP", stop).replace("DURATION", duration).replace("WARMUP", warmup)


def test_flows_stopping_in_turn_and_fair_shares_over_the_time_each_is_active():
    res = aqmlab.run(parse_scenario(stops()))
    f = res.flows.set_index("flow")
    # The schedule: CUBIC flows at 0, 5, 10 s leaving at 20, 25, 30 s; the CBR flow 2–8 s.
    assert f["start_s"].tolist() == [0.0, 5.0, 10.0, 2.0]
    assert f["stop_s"].tolist() == [20.0, 25.0, 30.0, 8.0]
    # The CBR flow: one 1500-byte datagram per 1500·8/6e6 = 2 ms over 6 s = 3000 datagrams.
    assert f.loc[3, "wire_bytes_sent"] == 3000 * 1500
    # Fair shares by hand over the 40 s window, C = 50 Mbit/s; who is active when:
    #   [0, 2) 0 | [2, 5) 0, cbr | [5, 8) 0, 1, cbr | [8, 10) 0, 1 | [10, 20) 0, 1, 2 |
    #   [20, 25) 1, 2 | [25, 30) 2 | [30, 40) nobody.
    c = 50e6
    share = {
        0: c * (2 + 3 / 2 + 3 / 3 + 2 / 2 + 10 / 3) / 40,
        1: c * (3 / 3 + 2 / 2 + 10 / 3 + 5 / 2) / 40,
        2: c * (10 / 3 + 5 / 2 + 5) / 40,
        3: c * (3 / 2 + 3 / 3) / 40,
    }
    for k, v in share.items():
        assert f.loc[k, "fair_share_bps"] == pytest.approx(v, rel=1e-12), k
    # Relative throughput of a class: its goodput over its fair shares; Jain's index over the
    # normalized throughputs x_i = goodput_i / share_i (Jain, Chiu & Hawe 1984).
    g = f["goodput_bps"]
    classes = {r["name"]: r for r in res.summary["classes"]}
    assert classes["cubic-20ms"]["rel_throughput"] == pytest.approx(sum(g[k] for k in (0, 1, 2)) / sum(share[k] for k in (0, 1, 2)), rel=1e-12)
    assert classes["cbr-20ms"]["rel_throughput"] == pytest.approx(g[3] / share[3], rel=1e-12)
    x = [g[k] / share[k] for k in range(4)]
    assert res.metrics["jain"] == pytest.approx(sum(x) ** 2 / (4 * sum(v * v for v in x)), rel=1e-12)
    # A stopped flow's goodput is its delivered bytes over the whole window (40 s).
    assert g[0] == pytest.approx(f.loc[0, "delivered_bytes"] * 8 / 40, rel=1e-12)


def test_a_stop_is_left_out_of_the_canonical_form_when_absent_and_lowered_when_given():
    s = parse_scenario(stops("staggered(20s, 5s)"))
    cls = s.engine_config()["classes"]
    assert cls[0]["stop"] == {"kind": "staggered", "first_ns": 20 * 10**9, "spacing_ns": 5 * 10**9}
    assert cls[1]["stop"] == {"kind": "fixed", "at_ns": 8 * 10**9}
    assert parse_scenario(stops("uniform(20s, 21.5s)")).engine_config()["classes"][0]["stop"] == {
        "kind": "uniform",
        "lo_ns": 20 * 10**9,
        "hi_ns": 21_500_000_000,
    }
    no_stop = aqmlab.Scenario(duration="1s", bottleneck={"rate": "1Mbps", "buffer": "1bdp"}, flows=[{"cc": "reno", "rtt": "10ms"}])
    assert "stop" not in no_stop.canonical()["flows"][0]
    assert "stop" not in no_stop.engine_config()["classes"][0]


@pytest.mark.parametrize(
    "text, where, fragment",
    [
        (stops("8s"), "14: flows[0].stop", "flow 2 of the class could stop at 8 s, not after its start at 10 s"),
        (stops("soon"), "14: flows[0].stop", "'soon' is not a stop (expected a time such as 60s, uniform(50s, 60s) or staggered(60s, 10s))"),
        (stops("staggered(20s, 0s)"), "14: flows[0].stop", "needs a positive spacing"),
        (stops("uniform(9s, 8s)"), "14: flows[0].stop", "uniform(a, b) needs a <= b"),
        (stops().replace("count = 3\n", 'count = 3\nsize = "1MB"\n'), "15: flows[0].stop", "a stop is for bulk and cbr flows"),
        (stops().replace('stop = "8s"', 'stop = "1s"'), "21: flows[1].stop", "flow 0 of the class could stop at 1 s, not after its start at 2 s"),
    ],
    ids=["stop-before-a-start", "unparsable", "zero-spacing", "uniform-reversed", "finite-flow", "cbr-stop-before-start"],
)
def test_bad_stops_exit_2_naming_the_line_and_key(tmp_path, text, where, fragment):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    out = tmp_path / "out"
    code, err = _run_cli(f, out)
    assert code == 2, err
    assert f"{f}:{where}: " in err and fragment in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert not out.exists()
