"""A run's cost estimated before it starts (sim::estimate): packets, flows and time-series rows
from hand computations on small scenarios; the refusal of a run that cannot fit in memory
(exit 2, the estimate and MemAvailable in the message, nothing written); the warning before a
run of days; an allocation failure inside the engine as a clean error, not an abort."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from aqmlab import _native
from aqmlab.cli import main as cli
from aqmlab.inputs.errors import ScenarioError
from aqmlab.scenario import parse_scenario
from aqmlab.simulate.estimate import check_fits, estimate, mem_available

PKT_BITS = 8 * 1500  # one full-sized packet on the wire (1500-byte MTU)


def scenario(flows: str, *, duration: str = "2s", rate: str = "10Mbps", extra: str = "") -> str:
    return textwrap.dedent(
        f"""\
        name = "est"
        duration = "{duration}"
        [bottleneck]
        rate = "{rate}"
        buffer = "1bdp"
        aqm = {{ kind = "taildrop" }}
        {extra}
        """
    ) + textwrap.dedent(flows)


def native(text: str) -> dict:
    return _native.estimate(json.dumps(parse_scenario(text).engine_config()))


def test_bulk_flows_fill_the_link() -> None:
    # Bulk TCP from t = 0 keeps the link busy: C·T / (8·1500) = 10e6 · 2 / 12000 packets.
    e = native(scenario('[[flows]]\ncc = "cubic"\ncount = 3\nrtt = "10ms"\n'))
    assert e["bottleneck_packets"] == round(10e6 * 2 / PKT_BITS) == 1667
    assert e["excess_packets"] == 0
    assert e["flows"] == 3
    # Linux hosts (the default): 2.5 events per packet (transmission end, forward delay line,
    # one ACK per two segments), plus the sender NIC's transmission end and a GRO poll per
    # four packets (50 µs polls at 12 µs per packet: 1 Gbit/s).
    assert abs(e["events"] - 10e6 * 2 / PKT_BITS * (2.5 + 1 + 0.25)) <= 1
    ideal = native(scenario('[[flows]]\ncc = "cubic"\ncount = 3\nrtt = "10ms"\n', extra="[host]\nideal = true"))
    assert abs(ideal["events"] - 10e6 * 2 / PKT_BITS * 2.5) <= 1
    # Linux hosts cost 1.27 times as much per packet (bench/README.md §The host model).
    assert ideal["wall_s"] * 1.27 == e["wall_s"]
    # Linux hosts without offloads keep the NIC and the NAPI polls (their receivers poll at
    # rx-usecs whether or not GRO merges), so the same events; without GRO every packet is
    # acknowledged on its own terms, which costs 1.41 times an ideal host's packet.
    off = native(scenario('[[flows]]\ncc = "cubic"\ncount = 3\nrtt = "10ms"\n', extra="[host]\noffloads = false"))
    assert off["events"] == e["events"] and off["wall_s"] == ideal["wall_s"] * 1.41


def test_cbr_beyond_capacity_is_carried_up_to_capacity_and_the_rest_handled() -> None:
    # Two 10 Mbit/s CBR flows on a 10 Mbit/s link for 1 s: 2 × 833.3 offered, 833.3 carried.
    e = native(scenario('[[flows]]\ncc = "cbr"\nrate = "10Mbps"\ncount = 2\nrtt = "10ms"\n', duration="1s"))
    assert e["bottleneck_packets"] == round(10e6 / PKT_BITS) == 833
    assert e["excess_packets"] == 833


def test_workload_arrivals_and_their_segments() -> None:
    # 100 arrivals/s for 10 s of 10-segment flows (10 × 1448 B): 1000 flows, 10 000 packets.
    wl = '[[workload]]\ncc = "cubic"\nrate = "100/s"\nrtt = "10ms"\nsize = { dist = "fixed", size = "14480B" }\n'
    e = native(scenario(wl, duration="10s", rate="1Gbps"))
    assert e["flows"] == 1000
    assert e["bottleneck_packets"] == 10_000


def test_time_series_rows_match_a_real_run() -> None:
    # Three bulk flows from t = 0, 1 s, one sample per 100 ms: 10 samples × 3 flows. The run's
    # own table is the independent count.
    text = scenario('[[flows]]\ncc = "reno"\ncount = 3\nrtt = "10ms"\n', duration="1s", extra='[measure]\ninterval = "100ms"')
    e = native(text)
    out = _native.run(json.dumps(parse_scenario(text).engine_config()))
    assert e["timeseries_rows"] == out["tables"]["timeseries"]["t_s"][1] == 30  # (type, length, ...)


def test_a_hundred_million_flows_need_more_than_any_machine_has() -> None:
    # Each flow is a TCP sender and receiver with their state, well over 100 bytes: 10^8 flows
    # need more than 10 GB before anything else.
    # (No time series: the flows alone.)
    est = estimate(parse_scenario(scenario('[[flows]]\ncc = "cubic"\ncount = 100000000\nrtt = "10ms"\n', extra='[measure]\ninterval = "0s"')))
    assert est.flows == 100_000_000
    assert est.peak_bytes > 100_000_000 * 100
    assert est.main_key == "flows"
    with pytest.raises(ScenarioError, match=r"s\.toml: flows: .*MemAvailable 1 GB"):
        check_fits(est, file="s.toml", available=2**30)


def test_mem_available_reads_proc_meminfo(tmp_path: Path) -> None:
    # proc(5): "MemAvailable: %lu kB".
    f = tmp_path / "meminfo"
    f.write_text("MemTotal:       8000000 kB\nMemFree:         100 kB\nMemAvailable:    5000000 kB\n")
    assert mem_available(f) == 5_000_000 * 1024
    f.write_text("MemTotal:       8000000 kB\n")
    assert mem_available(f) is None


def test_cli_refuses_a_run_that_cannot_fit(tmp_path: Path) -> None:
    f = tmp_path / "huge.toml"
    f.write_text(scenario('[[flows]]\ncc = "cubic"\ncount = 100000000\nrtt = "10ms"\n'))
    out = tmp_path / "out"
    r = CliRunner().invoke(cli.app, ["run", str(f), "-o", str(out)])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    # With the default 100 ms sampling, the time series dominates: 10^8 flows × 20 samples.
    assert len(lines) == 1 and lines[0].startswith(f"error: {f}: measure.interval: ") and "MemAvailable" in lines[0], r.output
    assert "100 M flows, 2 G time-series rows" in lines[0]
    assert not out.exists()
    # validate reports the estimate instead of refusing.
    r = CliRunner().invoke(cli.app, ["validate", str(f)])
    assert r.exit_code == 0 and "estimate:" in r.output and "100 M flows" in r.output, r.output


def test_sweep_refuses_before_writing(tmp_path: Path) -> None:
    f = tmp_path / "sw.toml"
    f.write_text(scenario('[[flows]]\ncc = "cubic"\ncount = 1\nrtt = "10ms"\n', duration="0.1s") + '\n[sweep]\n"flows.*.count" = [1, 100000000]\n')
    out = tmp_path / "out"
    r = CliRunner().invoke(cli.app, ["sweep", str(f), "-o", str(out), "-q"])
    assert r.exit_code == 2, r.output
    assert "MemAvailable" in r.output and "flows.*.count=100000000" in r.output, r.output
    assert not out.exists()


def test_run_of_days_is_announced_before_it_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 30 days at 10 Gbit/s: 10e9 · 2 592 000 / 12000 = 2.16e12 packets, at millions per second
    # 2.16e12 / 4.71e6 packets/s (bench/README.md) = 4.59e5 s = 5.31 days on ideal hosts, × 1.27
    # for Linux hosts' offloads (the default; bench/README.md §The host model) = 6.74 days (the
    # front's own second of start-up is lost in the rounding). The run is stopped at once (Ctrl-C) after the warning.
    f = tmp_path / "long.toml"
    f.write_text(scenario('[[flows]]\ncc = "cubic"\nrtt = "10ms"\n', duration="2592000s", rate="10Gbps", extra='[measure]\ninterval = "0s"'))
    # The command imports the runner when it runs (start-up time): it finds this one.
    from aqmlab.simulate import run as simulate

    def interrupted(*a: object, **k: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(simulate, "run", interrupted)
    r = CliRunner().invoke(cli.app, ["run", str(f), "-o", str(tmp_path / "out")])
    assert r.exit_code == 130
    warning = [ln for ln in r.output.splitlines() if ln.startswith("warning:")]
    assert len(warning) == 1 and "2.16 T packets" in warning[0] and "6.74 days" in warning[0], r.output
    assert r.output.index("warning:") < r.output.index("interrupted")


def test_an_allocation_failure_in_the_engine_is_a_clean_error(tmp_path: Path) -> None:
    # Address space capped a little above what the process already maps: the estimate passes
    # (it compares with MemAvailable), the engine's allocation of 2 M flows fails, and the run
    # ends with exit 2 and one line, not SIGABRT.
    f = tmp_path / "big.toml"
    f.write_text(scenario('[[flows]]\ncc = "cubic"\ncount = 2000000\nrtt = "10ms"\n', duration="0.1s"))
    code = textwrap.dedent(
        f"""
        import resource, sys
        import pandas, pyarrow, pyarrow.parquet, aqmlab, aqmlab.cli.main
        vm = int(next(l for l in open("/proc/self/status") if l.startswith("VmSize")).split()[1]) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (vm + 400 * 2**20, resource.RLIM_INFINITY))
        sys.argv = ["aqmlab", "run", {str(f)!r}, "-o", {str(tmp_path / "out")!r}]
        aqmlab.cli.main.main()
        """
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "out of memory" in lines[0] and str(f) in lines[0], r.stderr
    assert not (tmp_path / "out").exists()
