"""Convergence after a flow joins: the metric on a hand-built time series, and the effect it
must show in a simulation (FQ-CoDel equalises a newcomer within about a second; Reno at 100 ms
behind a deep drop-tail queue takes far longer — AIMD gains one segment per RTT)."""

from __future__ import annotations

import pandas as pd
import pytest

import aqmlab
from aqmlab._convergence import convergence, windowed_jain
from aqmlab._scenario import parse_scenario


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
