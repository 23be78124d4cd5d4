"""An unresponsive source whose datagrams are ECN-capable (`cc = "cbr"`, `ecn = "ect0"|"ect1"`):
the codepoint reaches the AQM, which classifies and marks by it, and the source ignores the
marks. Through DualPI2 an ECT(1) flood above the link rate is what the overload protection is
for (sch_dualpi2.c `must_drop` before `do_step_aqm`; RFC 9332 §2.5.1.1, §4.2.3)."""

from __future__ import annotations

import pytest

import aqmlab

# 48 Mbit/s of 1500-byte datagrams into 40 Mbit/s: a sixth of them cannot leave.
RATE_BPS, LINK_BPS = 48e6, 40e6


def flood(ecn: str | bool, aqm: str = "dualpi2") -> aqmlab.Result:
    flows: list[dict[str, object]] = [{"cc": "cbr", "rate": "48Mbps", "rtt": "20ms", "name": "flood"}]
    if ecn is not False:
        flows[0]["ecn"] = ecn
    s = aqmlab.Scenario(duration="12s", warmup="4s", bottleneck={"rate": "40Mbps", "buffer": "2bdp", "rtt_ref": "20ms", "aqm": {"kind": aqm}}, flows=flows)
    return aqmlab.run(s)


def test_the_codepoint_is_lowered_for_cbr_classes_only() -> None:
    s = aqmlab.Scenario(duration="1s", bottleneck={"rate": "40Mbps", "buffer": "80pkt"}, flows=[{"cc": "cbr", "rate": "5Mbps", "rtt": "20ms", "ecn": "ect1"}])
    c = s.engine_config()["classes"][0]
    assert (c["ecn"], c["cbr_ecn"]) == (False, "ect1")
    tcp = aqmlab.Scenario(duration="1s", bottleneck={"rate": "40Mbps", "buffer": "80pkt"}, flows=[{"cc": "cubic", "rtt": "20ms", "ecn": True}])
    assert "cbr_ecn" not in tcp.engine_config()["classes"][0]


@pytest.mark.parametrize("ecn", ["ect1", False])
def test_a_flood_through_dualpi2_is_held_near_the_target_and_loses_its_excess(ecn: str | bool) -> None:
    r = flood(ecn)
    f = r.flows.iloc[0]
    # Conservation over the run: every datagram sent was received, dropped, or is still on
    # its way; and the link carries its rate, the excess is lost.
    assert f["segs_sent"] == f["segs_received"] + f["total_dropped_pkts"] + f["end_in_network_pkts"]
    assert r.summary["metrics"]["utilization"] == pytest.approx(1.0, abs=0.01)
    assert r.classes["drop_ratio"].iloc[0] == pytest.approx(1 - LINK_BPS / RATE_BPS, abs=0.01)
    # The buffer is 2 BDP (40 ms); the PI controller holds the queue at its 15 ms target: an
    # ECT(1) flood by dropping in the L queue once overloaded (k·p′ ≥ 1), a Not-ECT one by the
    # C queue's p′². Without the overload drop the L queue would fill the buffer.
    assert r.summary["metrics"]["sojourn_ms"]["mean"] == pytest.approx(15.0, abs=2.0)
    marks = r.classes["mark_ratio"].iloc[0]
    if ecn == "ect1":
        # The L queue marks what it does not drop: overloaded, every survivor.
        assert marks > 0.5
    else:
        assert marks == 0.0, "a Not-ECT datagram cannot be marked"


def test_ect1_datagrams_through_a_fifo_are_neither_marked_nor_spared() -> None:
    # TailDrop knows no ECN: the ECT(1) flood fills the 40 ms buffer and loses its excess by
    # overflow, as a Not-ECT one would.
    r = flood("ect1", aqm="taildrop")
    assert r.classes["mark_ratio"].iloc[0] == 0.0
    assert r.classes["drop_ratio"].iloc[0] == pytest.approx(1 - LINK_BPS / RATE_BPS, abs=0.01)
    assert r.summary["metrics"]["sojourn_ms"]["mean"] == pytest.approx(40.0, abs=1.5)
