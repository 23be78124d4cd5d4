"""Convergence: how long after a flow joins or leaves the shares settle (the flows of Liu et al.
(CKCD) Fig. 8 join in turn).

Definition (documented, configurable): at each time-series sample t, the *windowed Jain index*
is Jain's index over the flows active at t of their mean throughput over (t − window, t]. A
flow is active at t if the engine sampled it there (it samples only flows under way), it
started before t (a sample at its very start covers an interval before it) and it did not stop
before t (a sample covers the interval that ends at t; after its stop a flow only drains what
it had in flight, and is no longer counted).

Events are the joins (every start after the first) and the leaves (every scheduled stop before
the end of the series). After an event at t_e the shares have converged at the first sample
t_c ≥ t_e + window such that the windowed index stays ≥ `threshold` for every sample in
[t_c, t_c + hold], all before the next event (or the end of the run). The convergence time is
t_c − t_e; None if the shares never settle before the next event or the end (reported, never
dropped). An event is reported when at least two flows are active right after it: with one
flow left there are no shares to settle (Jain's index of one flow is 1 by definition).
"""

from __future__ import annotations

import math

import pandas as pd

__all__ = ["windowed_jain", "convergence", "events"]

_EPS = 1e-9


def _stops(flows: pd.DataFrame | None) -> dict[int, float]:
    """flow → stop time (s), for flows with a scheduled stop."""
    if flows is None or "stop_s" not in flows.columns:
        return {}
    return {int(f): float(s) for f, s in zip(flows["flow"], flows["stop_s"]) if s is not None and not pd.isna(s)}


def windowed_jain(timeseries: pd.DataFrame, window_s: float, flows: pd.DataFrame | None = None) -> pd.Series:
    """Jain's index over the active flows' mean throughput in the trailing window, per sample
    time (index: t_s). With the run's `flows` table, flows are active from their start to
    their stop (`start_s`, `stop_s`); without it, wherever they have a sample."""
    ts = timeseries[["t_s", "flow", "throughput_bps"]]
    wide = ts.pivot_table(index="t_s", columns="flow", values="throughput_bps", aggfunc="mean").sort_index()
    dt = float(pd.Series(wide.index).diff().median()) if len(wide) > 1 else window_s
    n = max(1, int(round(window_s / dt)))
    active = wide.notna()
    if flows is not None:
        starts = {int(f): float(s) for f, s in zip(flows["flow"], flows["start_s"])}
        stops = _stops(flows)
        t = pd.Series(wide.index, index=wide.index)
        for f in wide.columns:
            ok = t > starts.get(int(f), -math.inf) + _EPS
            if int(f) in stops:
                ok &= t <= stops[int(f)] + _EPS
            active[f] &= ok
    # A flow's windowed mean uses the samples it has in the window (min_periods=1); the index
    # at t is over the flows active at t.
    x = wide.where(active).rolling(n, min_periods=1).mean().where(active)
    k = x.notna().sum(axis=1)
    s, s2 = x.sum(axis=1), (x * x).sum(axis=1)
    j = (s * s / (k * s2)).where(s2 > 0, math.nan)
    return j[k > 0].rename("jain").astype(float)


def events(flows: pd.DataFrame, end_s: float) -> pd.DataFrame:
    """The joins (starts after the first) and leaves (stops before `end_s`) in time order, with
    the number of flows active right after each."""
    starts = [(float(s), "join", int(f)) for f, s in zip(flows["flow"], flows["start_s"])]
    first = min(s for s, _, _ in starts) if starts else 0.0
    stops = _stops(flows)
    evs = [e for e in starts if e[0] > first + _EPS] + [(s, "leave", f) for f, s in stops.items() if s < end_s - _EPS]
    evs.sort()
    rows = []
    for t, kind, f in evs:
        n = sum(1 for g, s in zip(flows["flow"], flows["start_s"]) if float(s) <= t + _EPS and stops.get(int(g), math.inf) > t + _EPS)
        rows.append({"event": kind, "flow": f, "event_s": t, "active_after": n})
    return pd.DataFrame(rows, columns=["event", "flow", "event_s", "active_after"])


def convergence(timeseries: pd.DataFrame, flows: pd.DataFrame, *, threshold: float = 0.9, window_s: float = 1.0, hold_s: float = 2.0) -> pd.DataFrame:
    """One row per join or leave after which two or more flows share the link: the event, its
    time and the convergence time (None if the shares do not settle before the next event)."""
    j = windowed_jain(timeseries, window_s, flows)
    cols = ["event", "flow", "event_s", "active_after", "converged_s", "convergence_time_s"]
    if j.empty:
        return pd.DataFrame([], columns=cols)
    end = float(j.index.max())
    ev = events(flows, end)
    times = sorted(set(ev["event_s"]))
    rows = []
    for _, e in ev.iterrows():
        if e["active_after"] < 2:
            continue
        t_e = float(e["event_s"])
        nxt = [t for t in times if t > t_e + _EPS]
        horizon = nxt[0] if nxt else end
        cand = j[(j.index >= t_e + window_s - _EPS) & (j.index <= horizon + _EPS)]
        t_c = None
        for t in cand.index:
            if t + hold_s > horizon + _EPS:
                break
            span = cand[(cand.index >= t) & (cand.index <= t + hold_s + _EPS)]
            if (span >= threshold).all():
                t_c = float(t)
                break
        rows.append({**e.to_dict(), "converged_s": t_c, "convergence_time_s": (t_c - t_e) if t_c is not None else None})
    return pd.DataFrame(rows, columns=cols)
