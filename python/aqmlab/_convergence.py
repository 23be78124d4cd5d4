"""Convergence: how long after a flow joins the shares settle (issue "Traffic beyond bulk
flows" §5; seed 001 Fig. 8's flows joining in turn).

Definition (documented, configurable): at each time-series sample t, the *windowed Jain index*
is Jain's index over the flows active at t (started, and not finished) of their mean throughput
over (t − window, t]. After a flow joins at t_j, the shares have converged at the first sample
t_c ≥ t_j + window such that the windowed index stays ≥ `threshold` for every sample in
[t_c, t_c + hold] (and before the next join). The convergence time is t_c − t_j; None if the
shares never settle before the next join or the end of the run (reported, never dropped).
"""

from __future__ import annotations

import math

import pandas as pd

__all__ = ["windowed_jain", "convergence"]


def windowed_jain(timeseries: pd.DataFrame, window_s: float) -> pd.Series:
    """Jain's index over the active flows' mean throughput in the trailing window, per sample
    time (index: t_s)."""
    ts = timeseries[["t_s", "flow", "throughput_bps"]]
    wide = ts.pivot_table(index="t_s", columns="flow", values="throughput_bps", aggfunc="mean").sort_index()
    dt = float(pd.Series(wide.index).diff().median()) if len(wide) > 1 else window_s
    n = max(1, int(round(window_s / dt)))
    # A flow is active at a sample if it has a row there (the engine samples only flows under
    # way); its windowed mean uses the samples it has.
    active = wide.notna()
    mean = wide.rolling(n, min_periods=1).mean()
    out = {}
    for t in wide.index:
        x = mean.loc[t][active.loc[t]].dropna()
        if len(x) == 0:
            continue
        s, s2 = x.sum(), (x * x).sum()
        out[t] = (s * s) / (len(x) * s2) if s2 > 0 else math.nan
    return pd.Series(out, name="jain")


def convergence(timeseries: pd.DataFrame, flows: pd.DataFrame, *, threshold: float = 0.9, window_s: float = 1.0, hold_s: float = 2.0) -> pd.DataFrame:
    """One row per flow that joined after another was running: join time, convergence time."""
    j = windowed_jain(timeseries, window_s)
    starts = flows[["flow", "start_s"]].sort_values("start_s").reset_index(drop=True)
    first = starts["start_s"].min()
    joins = starts[starts["start_s"] > first + 1e-9]
    rows = []
    for i, r in joins.iterrows():
        t_j = float(r["start_s"])
        nxt = starts["start_s"][starts["start_s"] > t_j + 1e-9]
        horizon = float(nxt.min()) if len(nxt) else float(j.index.max())
        cand = j[(j.index >= t_j + window_s - 1e-9) & (j.index <= horizon + 1e-9)]
        t_c = None
        times = list(cand.index)
        for k, t in enumerate(times):
            span = cand[(cand.index >= t) & (cand.index <= t + hold_s + 1e-9)]
            if span.index.max() < t + hold_s - 1e-9 and t + hold_s <= horizon:
                continue
            if t + hold_s > horizon + 1e-9:
                break
            if (span >= threshold).all():
                t_c = float(t)
                break
        rows.append({"flow": int(r["flow"]), "join_s": t_j, "converged_s": t_c, "convergence_time_s": (t_c - t_j) if t_c is not None else None})
    return pd.DataFrame(rows, columns=["flow", "join_s", "converged_s", "convergence_time_s"])
