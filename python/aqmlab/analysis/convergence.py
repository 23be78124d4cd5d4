"""Convergence: how long after a flow joins or leaves the shares settle (the flows of Liu et al.
(CKCD) Fig. 8 join in turn).

Computed by the results crate (`results::convergence`, whose documentation carries the full
definition, window and tolerances included); this module only converts frames to columns and
back. Definition (documented, configurable): at each time-series sample t, the *windowed Jain index*
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

from typing import Any

import pandas as pd

from aqmlab import engine

__all__ = ["windowed_jain", "convergence", "events"]


def _flows_columns(flows: pd.DataFrame) -> tuple[list[int], list[float], list[float | None]]:
    """The flows table as (flow, start_s, stop_s) lists, stop None for a flow with none."""
    stop: list[Any] = flows["stop_s"].tolist() if "stop_s" in flows.columns else [None] * len(flows)
    return (
        [int(f) for f in flows["flow"]],
        [float(s) for s in flows["start_s"]],
        [None if s is None or pd.isna(s) else float(s) for s in stop],
    )


def _series_columns(timeseries: pd.DataFrame) -> tuple[list[float], list[int], list[float]]:
    return (
        timeseries["t_s"].astype(float).tolist(),
        [int(f) for f in timeseries["flow"]],
        timeseries["throughput_bps"].astype(float).tolist(),
    )


def windowed_jain(timeseries: pd.DataFrame, window_s: float, flows: pd.DataFrame | None = None) -> pd.Series:
    """Jain's index over the active flows' mean throughput in the trailing window, per sample
    time (index: t_s). With the run's `flows` table, flows are active from their start to
    their stop (`start_s`, `stop_s`); without it, wherever they have a sample."""
    cols = None if flows is None else _flows_columns(flows)
    t, j = engine.windowed_jain(*_series_columns(timeseries), float(window_s), cols)
    return pd.Series(j, index=pd.Index(t, name="t_s", dtype=float), name="jain", dtype=float)


def events(flows: pd.DataFrame, end_s: float) -> pd.DataFrame:
    """The joins (starts after the first) and leaves (stops before `end_s`) in time order, with
    the number of flows active right after each."""
    rows = engine.events(_flows_columns(flows), float(end_s))
    return pd.DataFrame([list(r) for r in rows], columns=["event", "flow", "event_s", "active_after"])


def convergence(timeseries: pd.DataFrame, flows: pd.DataFrame, *, threshold: float = 0.9, window_s: float = 1.0, hold_s: float = 2.0) -> pd.DataFrame:
    """One row per join or leave after which two or more flows share the link: the event, its
    time and the convergence time (None if the shares do not settle before the next event)."""
    cols = ["event", "flow", "event_s", "active_after", "converged_s", "convergence_time_s"]
    res = engine.convergence(*_series_columns(timeseries), _flows_columns(flows), float(threshold), float(window_s), float(hold_s))
    rows = [
        {"event": e, "flow": f, "event_s": t_e, "active_after": n, "converged_s": t_c, "convergence_time_s": (t_c - t_e) if t_c is not None else None}
        for e, f, t_e, n, t_c in res
    ]
    return pd.DataFrame(rows, columns=cols)
