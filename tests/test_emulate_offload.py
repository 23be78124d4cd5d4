"""The emulator with real hosts' offloads (`[host] offloads`, docs/emulator.md §Offloads).

Without a testbed: the `[host]` knobs real hosts cannot take are refused by name. With a
testbed (root and network namespaces; skipped otherwise, with that reason): one finite CUBIC
flow through a buffer larger than the flow itself, so that nothing can be lost anywhere, with
offloads on (the router must see super-packets and cut them) and off (it must see none); in
both, every byte arrives, nothing is retransmitted (a segment the router cut wrongly would fail
the receiver's checksum or sequence check and be sent again) and nothing is reordered.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from _testbed import testbed_missing

import aqmlab
from aqmlab.emu import emulate as E

needs_testbed = pytest.mark.skipif(testbed_missing() is not None, reason=f"the emulator's testbed: {testbed_missing()}")

BASE = 'duration = "3s"\nwarmup = "0s"\n[bottleneck]\nrate = "200Mbps"\nbuffer = "20000pkt"\n[[flows]]\ncc = "cubic"\nrtt = "10ms"\nsize = "8MB"\n'


def _scenario(tmp_path: Path, host: str) -> aqmlab.Scenario:
    p = tmp_path / "offload.toml"
    p.write_text('name = "offload"\n' + BASE + host)
    return aqmlab.load_scenario(p)


@pytest.mark.parametrize(
    ("host", "key", "words"),
    [
        ("[host]\npacing_shift = 8\n", "host.pacing_shift", "sk_pacing_shift"),
        ('[host]\ngso_max_size = "128KiB"\n', "host.gso_max_size", "BIG TCP"),
        ('[host]\ngro_max_size = "128KiB"\n', "host.gro_max_size", "BIG TCP"),
    ],
)
def test_host_knobs_real_hosts_cannot_take_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: str, key: str, words: str) -> None:
    # The scenario checks come after the environment's: pretend the environment is fine.
    monkeypatch.setattr(E, "is_root", lambda: True)
    monkeypatch.setattr(E.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(E.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, "", ""))
    s = _scenario(tmp_path, host)
    with pytest.raises(aqmlab.ScenarioError) as e:
        E.preflight(s, router=False)
    assert e.value.key == key and words in str(e.value)


def test_the_default_host_knobs_are_accepted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(E, "is_root", lambda: True)
    monkeypatch.setattr(E.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(E.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, "", ""))
    E.preflight(_scenario(tmp_path, '[host]\noffloads = true\npacing_shift = 10\ngso_max_size = "64KiB"\nrx_coalesce = "20us"\n'), router=False)


def _run_lossless(tmp_path: Path, host: str) -> aqmlab.Result:
    res = E.emulate(_scenario(tmp_path, host))
    c, f = res.summary["counters"], res.flows
    # 8 MB is at most 5 525 packets of 1 448 payload bytes: the 20 000-packet buffer (and the
    # TUN's 10 000-packet queue before it) can hold the whole flow, so no discipline or kernel
    # queue may drop anything, and with nothing lost TCP retransmits nothing.
    assert c["qdisc_drops"] == 0
    assert f["delivered_bytes"].tolist() == [8_000_000]
    assert f["retrans_segs"].tolist() == [0]
    assert bool(res.fct.iloc[0]["completed"])
    # In order: the router wrote no flow's packets out of order, and the sender's TCP saw no
    # reordering.
    assert c["reordered"] == 0 and c["tcp_reord_seen"] == 0
    assert c["write_errors"] == 0 and c["malformed"] == 0
    return res


@needs_testbed
def test_offloads_on_the_router_cuts_super_packets_and_every_byte_arrives(tmp_path: Path) -> None:
    res = _run_lossless(tmp_path, "[host]\noffloads = true\n")
    c = res.summary["counters"]
    assert res.summary["emu"]["offloads"] is True
    # TSO at the sender: the router read super-packets and cut each into several segments.
    assert c["gso_packets_in"] > 0 and c["gso_refused"] == 0
    assert c["gso_segments_in"] > c["gso_packets_in"]
    # The router queued and wrote MTU-sized segments, one by one: 8 MB of payload is at
    # least ⌈8e6 / 1448⌉ = 5 525 data packets (some of them sent unsegmented, in slow start),
    # and at most 64 KB arrived in one super-packet.
    assert c["tx_pkts"] >= 5_525
    assert c["gso_segments_in"] <= c["gso_packets_in"] * (65_536 // 1_448 + 1)
    # Coalesced writes towards the receiver's GRO: fewer writes than packets written.
    assert c["gso_packets_out"] > 0 and c["writes"] < c["tx_pkts"]


@needs_testbed
def test_offloads_off_the_router_sees_only_wire_packets(tmp_path: Path) -> None:
    res = _run_lossless(tmp_path, "[host]\noffloads = false\n")
    c = res.summary["counters"]
    assert res.summary["emu"]["offloads"] is False
    # The hypervisor's steal time over the run, per CPU: a counter's difference, so never
    # negative, and no more than the run lasted (3 s and the router's drain, well under 10 s).
    steal = res.summary["emu"]["steal_ms"]
    assert f"cpu{res.summary['emu']['pinning']['router_cpu']}" in steal and all(0 <= v < 10_000 for v in steal.values())
    assert c["late_1ms_pkts"] <= c["tx_pkts"] and 0 <= c["late_max_due_ns"] <= 3_500_000_000
    # The stall probe's record, one per CPU (the router's, the traffic's). Its deadlines tile
    # the run's window: each wake-up takes its own deadline and a stall also the ⌊late /
    # period⌋ deadlines that passed inside it, so together they are the window's deadlines,
    # plus at most what the last stall ran past the window's end.
    st = res.summary["emu"]["stalls"]
    assert {v["role"] for v in st["cpus"].values()} == {"router", "traffic"}
    assert st["window_ns"] == 3_000_000_000
    n = st["window_ns"] // st["period_ns"]
    for cpu in st["cpus"].values():
        lates = [late for _, late in cpu["stalls"]]
        taken = cpu["wakeups"] + sum(late // st["period_ns"] for late in lates)
        assert n <= taken <= n + max(lates, default=0) // st["period_ns"], (n, taken)
        assert all(0 <= t < st["window_ns"] and t % st["period_ns"] == 0 and late > st["threshold_ns"] for t, late in cpu["stalls"])
    assert c["gso_packets_in"] == 0 and c["gso_segments_in"] == 0 and c["gso_packets_out"] == 0
    # One write per packet.
    assert c["writes"] == c["tx_pkts"]
