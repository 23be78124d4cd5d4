"""End-to-end runs through the Python API and the CLI. Derived metrics are recomputed here
from the per-flow table by their definitions in docs/scenario.md, independently of the engine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import aqmlab

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def mixed() -> aqmlab.Result:
    s = aqmlab.Scenario(
        name="mixed",
        duration="6s",
        warmup="1s",
        bottleneck={"rate": "100Mbps", "buffer": "1bdp", "aqm": {"kind": "red", "avpkt": "1500B", "ecn": True}},
        flows=[
            {"cc": "cubic", "count": 3, "rtt": "20ms", "ecn": True, "start": "uniform(0s, 200ms)"},
            {"cc": "dctcp", "count": 2, "rtt": "40ms"},
            {"cc": "reno", "count": 1, "rtt": "80ms", "size": "300KB"},
            {"cc": "reno", "count": 1, "rtt": "80ms", "size": "50MB", "name": "big"},
        ],
    )
    return aqmlab.run(s)


def test_relative_throughput_and_jain_follow_their_definitions(mixed: aqmlab.Result) -> None:
    flows, classes = mixed.flows, mixed.classes
    n = len(flows)
    c = 100e6
    for _, row in classes.iterrows():
        g = flows[flows["class"] == row["class"]]["goodput_bps"].to_numpy()
        # relative throughput = mean class throughput / (C / N), N = all flows.
        assert row["rel_throughput"] == pytest.approx(g.mean() / (c / n), rel=1e-9)
        if g.sum() == 0:
            # (Σx)² / (n·Σx²) is 0/0: the 300 KB flow can finish before the warmup ends.
            assert np.isnan(row["jain"])
        else:
            assert row["jain"] == pytest.approx(g.sum() ** 2 / (len(g) * (g**2).sum()), rel=1e-9)
    x = flows["goodput_bps"].to_numpy()
    assert mixed.metrics["jain"] == pytest.approx(x.sum() ** 2 / (n * (x**2).sum()), rel=1e-9)
    assert mixed.metrics["goodput_bps"] == pytest.approx(x.sum(), rel=1e-9)


def test_ratios_and_histograms_are_consistent(mixed: aqmlab.Result) -> None:
    f = mixed.flows
    arrived = f["arrived_bytes"].sum()
    assert mixed.metrics["mark_ratio"] == pytest.approx(f["marked_bytes"].sum() / arrived)
    assert mixed.metrics["drop_ratio"] == pytest.approx(f["dropped_bytes"].sum() / arrived)
    # Goodput can never exceed the link, and utilization never exceeds 1.
    assert 0 < mixed.metrics["utilization"] <= 1 + 1e-12
    assert f["goodput_bps"].sum() <= 100e6
    h = mixed.sojourn_hist
    assert h["fraction"].sum() == pytest.approx(1.0)
    # 1 ms bins: the max sojourn falls in the last bin.
    assert h["bin_lo_ms"].iloc[-1] <= mixed.metrics["sojourn_ms"]["max"] < h["bin_hi_ms"].iloc[-1]
    s = mixed.metrics["sojourn_ms"]
    assert s["p50"] <= s["p99"] <= s["max"] + 0.001


def test_packets_are_conserved(mixed: aqmlab.Result) -> None:
    f = mixed.flows
    assert (f["segs_sent"] == f["segs_received"] + f["total_dropped_pkts"] + f["end_in_network_pkts"]).all()


def test_finite_flows_report_completion_and_unfinished_ones_are_counted(mixed: aqmlab.Result) -> None:
    fct = mixed.fct.set_index("class")
    small = fct.loc["reno-80ms"]
    assert small["size_bytes"] == 300_000 and bool(small["completed"])
    # The ideal is size/C + RTT = 0.024 s + 0.08 s; slow start alone takes several RTTs.
    assert small["fct_s"] > 0.104
    assert small["slowdown"] == pytest.approx(small["fct_s"] / 0.104)
    # 50 MB cannot cross a shared 100 Mbit/s link in 6 s: reported, never averaged away.
    big = fct.loc["big"]
    assert not bool(big["completed"]) and np.isnan(big["fct_s"])
    assert mixed.summary["counters"]["unfinished_flows"] == 1


def test_timeseries_cover_every_started_flow(mixed: aqmlab.Result) -> None:
    ts = mixed.timeseries
    assert set(ts["flow"]) == set(range(7))
    assert np.allclose(np.diff(sorted(set(ts["t_s"]))), 0.1)
    assert (mixed.queue["utilization"] <= 1 + 1e-9).all()


def test_same_seed_same_tables_other_seed_differs() -> None:
    def go(seed: int) -> aqmlab.Result:
        return aqmlab.run(
            aqmlab.Scenario(
                duration="3s",
                seed=seed,
                bottleneck={"rate": "50Mbps", "buffer": "1bdp"},
                flows=[{"cc": "cubic", "count": 3, "rtt": "10ms", "start": "uniform(0s, 1s)"}],
            )
        )

    a, b, c = go(1), go(1), go(2)
    for t in ("flows", "classes", "timeseries", "queue", "sojourn_hist", "fct"):
        assert a.tables[t].equals(b.tables[t]), t
    assert a.metrics == b.metrics
    assert not a.flows.equals(c.flows)


def test_cli_run_writes_the_store_and_prints_the_summary(tmp_path: Path) -> None:
    text = (ROOT / "examples" / "dctcp-cubic-step.toml").read_text().replace('duration = "30s"', 'duration = "3s"').replace('warmup = "5s"', 'warmup = "1s"')
    scen = tmp_path / "s.toml"
    scen.write_text(text)
    out = tmp_path / "res"
    r = subprocess.run([sys.executable, "-m", "aqmlab", "run", str(scen), "-o", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "dctcp-5ms" in r.stdout and "cubic-5ms" in r.stdout and "utilization" in r.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scenario"]["bottleneck"]["aqm"] == {"kind": "step", "target": "0.17rtt", "threshold": None}
    assert aqmlab.load_result(out).flows.shape[0] == 10
    # A second run into the same directory is refused without --overwrite.
    r2 = subprocess.run([sys.executable, "-m", "aqmlab", "run", str(scen), "-o", str(out)], capture_output=True, text=True, timeout=300)
    assert r2.returncode == 2 and "--overwrite" in r2.stderr


@pytest.mark.parametrize("example", ["ppv-gold-silver.toml", "csaqm-dctcp-cubic.toml"])
def test_the_packet_value_examples_run_and_report_value_drops_and_ctv_marks(example: str) -> None:
    # Shortened copies of the runnable examples of docs/scenario.md. PPV only drops (by value),
    # CSAQM only marks (every flow is ECN-capable, and nothing overflows a 500 ms buffer).
    s = aqmlab.load_scenario(ROOT / "examples" / example)
    s = s.model_copy(update={"duration": "4s", "warmup": "1s"})
    res = aqmlab.run(s)
    f = res.flows
    if example.startswith("ppv"):
        assert f["drops_value"].sum() > 0 and f["total_marked_pkts"].sum() == 0
        # Per-reason counters cover the window: every drop there is by value.
        assert f[[c for c in f.columns if c.startswith("drops_") and c != "drops_value"]].to_numpy().sum() == 0
        assert res.metrics["utilization"] > 0.95
    else:
        assert f["marks_ctv"].sum() > 0 and f["total_dropped_pkts"].sum() == 0
        assert res.summary["scenario"]["marker"] == {"tvf": "equal", "weights": {}, "rate_window": "100ms"}
