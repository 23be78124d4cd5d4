"""Convergence after a flow joins: the metric on a hand-built time series, and the effect it
must show in a simulation (FQ-CoDel equalises a newcomer within about a second; Reno at 100 ms
behind a deep drop-tail queue takes far longer — AIMD gains one segment per RTT)."""

from __future__ import annotations

import pandas as pd
import pytest

import aqmlab
from aqmlab.analysis.convergence import convergence, windowed_jain
from aqmlab.scenario import parse_scenario


def test_the_windowed_index_and_the_convergence_time_by_hand():
    # Flow 0 alone at 10 Mbit/s for 0–2 s; flow 1 joins at t = 2 s. 0.1 s samples. Flow 1 gets
    # 2, then (from t = 3.0) 5 Mbit/s while flow 0 drops to 5: equal from t = 3.0 on.
    rows = []
    for k in range(1, 81):
        t = round(k * 0.1, 1)
        if t <= 2.0:
            rows.append((t, 0, 10e6))
            continue
        equal = t >= 3.0
        rows.append((t, 0, 5e6 if equal else 8e6))
        rows.append((t, 1, 5e6 if equal else 2e6))
    ts = pd.DataFrame(rows, columns=["t_s", "flow", "throughput_bps"])
    flows = pd.DataFrame({"flow": [0, 1], "start_s": [0.0, 2.0]})
    # With a 0.5 s window the window is all-equal from t = 3.4 (samples 3.0..3.4): Jain = 1
    # there; at 3.3 the window holds 2.9 (8, 2) — mean flow 0 = (8 + 4·5)/5 = 5.6, flow 1 =
    # (2 + 4·5)/5 = 4.4 ⇒ Jain = 100/(2·(31.36 + 19.36)) = 0.9858 ≥ 0.98. At 3.2: (2·8 + 3·5)/5
    # = 6.2, 3.8 ⇒ Jain = 100/(2·(38.44 + 14.44)) = 0.9455 < 0.98. So t_c = 3.3 for
    # threshold 0.98, and the convergence time is 1.3 s.
    j = windowed_jain(ts, 0.5)
    assert j.loc[3.3] == pytest.approx(100 / (2 * (5.6**2 + 4.4**2)))
    assert j.loc[3.2] == pytest.approx(100 / (2 * (6.2**2 + 3.8**2)))
    c = convergence(ts, flows, threshold=0.98, window_s=0.5, hold_s=1.0)
    assert c.loc[0, "converged_s"] == pytest.approx(3.3)
    assert c.loc[0, "convergence_time_s"] == pytest.approx(1.3)
    # A threshold never reached is reported as None, not dropped.
    c = convergence(ts, flows, threshold=1.01, window_s=0.5, hold_s=1.0)
    assert len(c) == 1 and c.loc[0, "convergence_time_s"] is None


JOIN = """\
name = "join"
duration = "40s"

[bottleneck]
rate = "20Mbps"
buffer = "BUF"
aqm = AQM

[[flows]]
cc = "reno"
rtt = "100ms"
count = 2
start = "staggered(0s, 15s)"
"""


def test_fq_codel_equalises_a_newcomer_far_sooner_than_a_deep_taildrop_queue():
    def conv(aqm: str, buf: str) -> float | None:
        res = aqmlab.run(parse_scenario(JOIN.replace("AQM", aqm).replace("BUF", buf)))
        c = convergence(res.timeseries, res.flows, threshold=0.9, window_s=1.0, hold_s=3.0)
        return c.loc[0, "convergence_time_s"]

    fq = conv('{ kind = "fq_codel" }', "4bdp")
    td = conv('{ kind = "taildrop" }', "4bdp")
    print(f"convergence: fq_codel {fq} s, taildrop {td} s")
    assert fq is not None and fq <= 3.0, fq
    assert td is None or td >= 2 * fq, td


def test_leaves_are_events_too_and_a_stopped_flows_draining_samples_do_not_count():
    # Flows 0 and 1 from t = 0 at 10 Mbit/s each; flow 2 joins at 2 s and all three get 6 at
    # once; flow 1 stops at 5 s (its sample at 5.1 s shows the in-flight data it drained: 2);
    # then flow 0 gets 10 and flow 2 6 until 6.0 s, and 8 each from 6.0 s on; flow 2 stops at
    # 7 s, leaving flow 0 alone (not reported: no shares to settle). 0.1 s samples, 0.5 s
    # window (5 samples), hold 0.5 s, threshold 0.98.
    rows = []
    for k in range(1, 81):
        t = round(k * 0.1, 1)
        if t <= 2.0:
            rows += [(t, 0, 10e6), (t, 1, 10e6)]
        elif t <= 5.0:
            rows += [(t, 0, 6e6), (t, 1, 6e6), (t, 2, 6e6)]
        else:
            late = t >= 6.0
            rows.append((t, 0, 8e6 if late else 10e6))
            if t <= 7.0:
                rows.append((t, 2, 8e6 if late else 6e6))
            if t == 5.1:
                rows.append((t, 1, 2e6))
    ts = pd.DataFrame(rows, columns=["t_s", "flow", "throughput_bps"])
    flows = pd.DataFrame({"flow": [0, 1, 2], "start_s": [0.0, 0.0, 2.0], "stop_s": [None, 5.0, 7.0]})
    j = windowed_jain(ts, 0.5, flows)
    # At 5.1 s: flows 0 and 2 only; window 4.7–5.1: flow 0 (6, 6, 6, 6, 10) → 6.8, flow 2 6 ⇒
    # Jain = 12.8² / (2 · (6.8² + 6²)) = 0.99611.
    assert j.loc[5.1] == pytest.approx(12.8**2 / (2 * (6.8**2 + 6**2)))
    # At 6.0 s: window 5.6–6.0: flow 0 (10, 10, 10, 10, 8) → 9.6, flow 2 (6, 6, 6, 6, 8) → 6.4
    # ⇒ 16² / (2 · (9.6² + 6.4²)) = 0.96154; at 6.1: 9.2, 6.8 ⇒ 0.97800 (< 0.98); at 6.2: 8.8,
    # 7.2 ⇒ 0.99010 and ≥ 0.98 from then on. So after the leave at 5 s, t_c = 6.2: 1.2 s.
    assert j.loc[6.0] == pytest.approx(16**2 / (2 * (9.6**2 + 6.4**2)))
    assert j.loc[6.1] == pytest.approx(16**2 / (2 * (9.2**2 + 6.8**2)))
    assert j.loc[6.2] == pytest.approx(16**2 / (2 * (8.8**2 + 7.2**2)))
    c = convergence(ts, flows, threshold=0.98, window_s=0.5, hold_s=0.5)
    assert list(c["event"]) == ["join", "leave"]
    assert list(c["flow"]) == [2, 1]
    # The join at 2 s: all equal from 2.1 s, so converged as soon as the window is past it.
    assert c["converged_s"].tolist() == pytest.approx([2.5, 6.2])
    assert c["convergence_time_s"].tolist() == pytest.approx([0.5, 1.2])
    assert c["active_after"].tolist() == [3, 2]
    # A hold that does not fit before the next event (flow 2's leave at 7 s): not settled.
    c = convergence(ts, flows, threshold=0.98, window_s=0.5, hold_s=1.0)
    assert pd.isna(c.loc[1, "convergence_time_s"])


JOIN_LEAVE = """\
name = "join-leave"
duration = "60s"

[bottleneck]
rate = "20Mbps"
buffer = "2bdp"
aqm = { kind = "fq_codel" }

[[flows]]
cc = "cubic"
rtt = "40ms"
count = 3
start = "staggered(0s, 10s)"
stop = "staggered(35s, 10s)"
"""


def test_flows_joining_and_leaving_in_turn_converge_after_each_event_under_fq_codel():
    # The pattern of Liu et al. (CKCD) Fig. 8, with leaves: three CUBIC flows join at 0, 10, 20 s and leave at
    # 35, 45, 55 s. Events with two or more flows after them: the joins at 10 and 20 s and the
    # leave at 35 s (two left); the leaves at 45 and 55 s leave one flow or none.
    res = aqmlab.run(parse_scenario(JOIN_LEAVE))
    c = convergence(res.timeseries, res.flows, threshold=0.9, window_s=1.0, hold_s=3.0)
    print(c)
    assert list(zip(c["event"], c["event_s"])) == [("join", 10.0), ("join", 20.0), ("leave", 35.0)]
    assert c["convergence_time_s"].notna().all(), c
    assert (c["convergence_time_s"] <= 5.0).all(), c
    # The flows table carries the schedule.
    assert res.flows["stop_s"].tolist() == [35.0, 45.0, 55.0]
    # After the last leave nobody is sampled.
    assert res.timeseries["t_s"].max() <= 55.0 + 1.0
