"""The page of one run directory (`aqmlab run`, `aqmlab emulate`, a sweep's `runs/<hash>/`): the
run over time, from its own tables, and the figure of `aqmlab plot` for one run or several.

Three figures at most, each of several panels sharing the time axis (a figure's drawing has a
fixed cost, and a 100-flow, 60 s run's page is meant to take a couple of seconds):
- flows over time: throughput, cwnd and smoothed RTT per flow, one colour per class, the class
  mean thick; a class of more than `LINES_MAX` flows as percentile bands (10–90, 25–75)
  instead of a line per flow, so a 100-flow run stays readable;
- the congestion controls' own state, only where the time series has it: the phase (BBR's,
  Prague's) as the share of a class's flows in each phase, and α (Prague; BBRv2/v3 with ECN);
- the bottleneck: queueing delay over time (mean and max per interval) with the discipline's
  delay target where it has one, marks and drops per interval, and beside them the sojourn
  distribution as a CDF on a log axis.

Then the class table, completion times where there are finite flows, and the scenario as its
canonical TOML. The time series sample every `measure.interval`; nothing is re-measured here.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aqmlab.report.page import Page

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# numpy, pandas, pyarrow and matplotlib are imported where used: `aqmlab report` imports this
# module whatever directory it is given, before the page starts the processes that draw the
# figures (`write_run_report`), which should start as early as they can.

__all__ = ["LINES_MAX", "SERIES", "RunDirError", "delay_cdf", "is_run_dir", "log_delay_axis", "series_figure", "write_run_report"]

#: The most flows of one class drawn as a line each; a larger class is drawn as percentile
#: bands around its mean (a hundred overlapping lines show nothing).
LINES_MAX = 8

#: `aqmlab plot --series`: the time-series column, its scale and its axis label; `queue` is
#: the bottleneck's mean queueing delay per interval.
SERIES: dict[str, tuple[str, float, str]] = {
    "throughput": ("throughput_bps", 1e-6, "throughput (Mbit/s)"),
    "cwnd": ("cwnd", 1.0, "cwnd (packets)"),
    "srtt": ("srtt_ms", 1.0, "smoothed RTT (ms)"),
    "queue": ("sojourn_mean_ms", 1.0, "queueing delay (ms)"),
}

_TS_COLUMNS = ["t_s", "flow", "class", "throughput_bps", "cwnd", "srtt_ms", "cc_phase", "cc_alpha"]
#: Line styles of the classes when several runs share a figure (the colour is the run's).
_STYLES: tuple[Any, ...] = ("-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)))


class RunDirError(ValueError):
    """A directory that is not a run's results (exit 2 at the command line)."""


def is_run_dir(d: str | Path) -> bool:
    """A results directory of one run: summary.json and every table (store.result.TABLES)."""
    from aqmlab.store.result import TABLES  # start-up time: pyarrow

    d = Path(d)
    return (d / "summary.json").is_file() and all((d / f"{t}.parquet").is_file() for t in TABLES)


@dataclass
class _Run:
    label: str
    summary: dict[str, Any]
    ts: pd.DataFrame
    queue: pd.DataFrame
    hist: pd.DataFrame
    classes: pd.DataFrame
    #: The class names in the scenario's order (the colours follow it).
    order: list[str]

    @property
    def scenario(self) -> dict[str, Any]:
        s: dict[str, Any] = self.summary["scenario"]
        return s


def _check_run_dir(d: Path) -> None:
    """Raise RunDirError, naming what is missing, for a directory that is not a run's."""
    from aqmlab.store.result import TABLES

    if not is_run_dir(d):
        missing = [f"{t}.parquet" for t in TABLES if not (d / f"{t}.parquet").is_file()]
        why = "no summary.json" if not (d / "summary.json").is_file() else f"missing {', '.join(missing)}"
        raise RunDirError(f"{d}: not a run directory ({why})")


def _load(d: Path, label: str | None = None) -> _Run:
    from aqmlab.store.result import read_table

    _check_run_dir(d)
    summary = json.loads((d / "summary.json").read_text(encoding="utf-8"))
    ts = read_table(d / "timeseries.parquet", columns=_TS_COLUMNS).to_pandas()
    classes = read_table(d / "classes.parquet").to_pandas()
    order = [c["name"] for c in summary["classes"]] or list(classes["class"])
    return _Run(
        label=label or d.name,
        summary=summary,
        ts=ts,
        queue=read_table(d / "queue.parquet").to_pandas(),
        hist=read_table(d / "sojourn_hist.parquet").to_pandas(),
        classes=classes,
        order=order,
    )


def _colours(n: int) -> list[Any]:
    from aqmlab.report._agg import plt

    if n <= 10:
        return list(plt.get_cmap("tab10").colors)[:n]  # type: ignore[attr-defined]
    cmap = plt.get_cmap("tab20")
    return [cmap(i % 20) for i in range(n)]


@dataclass(frozen=True)
class _Colours:
    """A colour per class, in the scenario's order (`_colours`), grey for a class outside it;
    looked up where the figure is drawn, which has loaded matplotlib's colour maps."""

    order: tuple[str, ...]

    def __call__(self, cls: str) -> Any:
        return _colours(len(self.order))[self.order.index(cls)] if cls in self.order else "0.4"


def _delay_target_ms(summary: dict[str, Any]) -> float | None:
    """The discipline's delay target, from the summary's delay-over-target ratios (the engine
    gives them only for a discipline with a target, so drop-tail or RED have none). A run whose
    packets never waited has a ratio of 0 and shows no target."""
    m = summary["metrics"]
    for key, rel in (("mean", "sojourn_mean_rel_target"), ("max", "sojourn_max_rel_target")):
        v, r = (m.get("sojourn_ms") or {}).get(key), m.get(rel)
        if v and r:
            return float(v / r)
    return None


def _scenario_toml(summary: dict[str, Any]) -> tuple[str, str]:
    """The scenario as the TOML file `aqmlab run` reads back as the same run (its hash), or as
    JSON when the stored form no longer validates."""
    from aqmlab.scenario import Scenario
    from aqmlab.search.runner import scenario_toml

    try:
        return "toml", scenario_toml(Scenario.model_validate(summary["scenario"]))
    except (ValueError, RuntimeError):
        return "json", json.dumps(summary["scenario"], indent=2, ensure_ascii=False) + "\n"


# Tick formatters at module level: a figure that holds them can be pickled to the page's
# drawing processes (a lambda cannot).
def _plain(v: float, _pos: int | None = None) -> str:
    return f"{v:g}"


def _plain_2_5(v: float, _pos: int | None = None) -> str:
    """Minor ticks of a log axis: 2 and 5 of each decade labelled, the rest not."""
    import numpy as np

    return f"{v:g}" if v > 0 and round(v / 10 ** np.floor(np.log10(v) + 1e-9)) in (2, 5) else ""


def log_delay_axis(ax: Axes, lo: float, hi: float) -> None:
    """A log x axis over [lo, hi] ms, at least a decade wide, labelled in plain numbers (1, 2,
    5, 10, 20, …): delays from sub-millisecond to a full buffer stay readable on one axis."""
    from matplotlib.ticker import FuncFormatter

    ax.set_xscale("log")
    lo = min(lo, hi / 10) if hi > 0 else lo
    ax.set_xlim(lo, hi * 1.05)
    ax.xaxis.set_major_formatter(FuncFormatter(_plain))
    ax.xaxis.set_minor_formatter(FuncFormatter(_plain_2_5))
    ax.tick_params(axis="x", which="both", labelsize=8)


def _cdf_points(hist: pd.DataFrame) -> tuple[np.ndarray, np.ndarray] | None:
    """A sojourn histogram (`sojourn_hist`) as the points of its CDF: at each bin's upper edge
    the fraction of packets below it, from the bin before the first packet's to the last
    packet's (so that a log axis spans the delays that occurred); None for an empty one."""
    import numpy as np

    h = hist.sort_values("bin_lo_ms")
    counts = h["count"].to_numpy()
    if counts.sum() == 0:
        return None
    seen = np.flatnonzero(counts)
    lo, hi = max(int(seen[0]) - 1, 0), int(seen[-1]) + 1
    return h["bin_hi_ms"].to_numpy()[lo:hi], (counts.cumsum() / counts.sum())[lo:hi]


def _draw_cdf(ax: Axes, x: np.ndarray, y: np.ndarray, **style: Any) -> tuple[float, float]:
    """Draw a CDF's points (`_cdf_points`), a marker on each when there are few; return the
    x span drawn."""
    (line,) = ax.plot(x, y, lw=1.4, marker="o" if len(x) <= 12 else None, ms=3, **style)
    line.set_gid("sojourn_cdf" if "label" not in style else f"sojourn_cdf/{style['label']}")
    return float(x[0]), float(x[-1])


def delay_cdf(ax: Axes, hist: pd.DataFrame, **style: Any) -> tuple[float, float] | None:
    """Draw a sojourn histogram (`sojourn_hist`) as a CDF (`_cdf_points`). Returns the x span
    drawn, None for an empty histogram."""
    points = _cdf_points(hist)
    return None if points is None else _draw_cdf(ax, *points, **style)


def _wide(g: pd.DataFrame, col: str, scale: float) -> pd.DataFrame:
    """One class's column as time × flow (NaN where a flow has no sample)."""
    return g.pivot(index="t_s", columns="flow", values=col).astype(float) * scale


def _row_percentiles(a: np.ndarray[Any, Any], qs: Sequence[float]) -> list[np.ndarray[Any, Any]]:
    """Each row's percentiles over its non-NaN values, interpolated linearly as numpy's default
    (np.nanpercentile gives the same numbers, a row at a time: slow for a 60 s run)."""
    import numpy as np

    s = np.sort(a, axis=1)  # NaNs last
    n = np.isfinite(a).sum(axis=1)
    out = []
    for q in qs:
        pos = np.maximum(n - 1, 0) * q / 100
        lo = np.floor(pos).astype(int)
        hi = np.minimum(lo + 1, np.maximum(n - 1, 0))
        v_lo = np.take_along_axis(s, lo[:, None], axis=1)[:, 0]
        v_hi = np.take_along_axis(s, hi[:, None], axis=1)[:, 0]
        out.append(np.where(n > 0, v_lo + (v_hi - v_lo) * (pos - lo), np.nan))
    return out


# The figures are drawn in the page's worker processes (`Page.figure` with a function), which
# load matplotlib but not pandas: this process turns the run's tables into the arrays each
# figure draws (`_ClassLines`, `_Panel`, …), and the figure's numbers, and hands the arrays over.


@dataclass(frozen=True)
class _Span:
    """The run's time axis: its warmup (shaded) and its duration, in seconds."""

    warmup: float
    duration: float


@dataclass(frozen=True)
class _ClassLines:
    """One class's column over time, as drawn: a line per flow (`lines`, time × flow) up to
    `LINES_MAX` flows, else the percentile bands (p10, p25, p75, p90); and the class mean."""

    cls: str
    t: np.ndarray
    flows: list[Any]
    lines: np.ndarray | None
    bands: list[np.ndarray] | None
    #: None for a class of one flow: its line is its mean.
    mean: np.ndarray | None


@dataclass(frozen=True)
class _Panel:
    """A panel of per-flow lines: its SVG id prefix, its classes and the top of its y axis (0:
    matplotlib's own)."""

    name: str
    classes: list[_ClassLines]
    top: float


def _class_lines(run: _Run, col: str, scale: float, panel: str) -> tuple[_Panel, dict[str, float]]:
    """`col` per flow of every class, from 0 up to the highest value drawn in the measurement
    window (a start-up burst in the warmup would squash the rest); and each class's mean over
    the window (for the figure's numbers)."""
    import numpy as np

    warmup = _seconds(run.scenario.get("warmup", "0s"))
    means: dict[str, float] = {}
    top = 0.0
    classes = []
    for cls, g in run.ts.groupby("class", sort=False):
        if g[col].isna().all():
            continue
        wide = _wide(g, col, scale)
        t = wide.index.to_numpy()
        n = wide.shape[1]
        values = wide.to_numpy()
        if n > LINES_MAX:
            q = _row_percentiles(values, (10, 25, 75, 90))
            drawn = q[3][t >= warmup]
            top = max(top, float(np.nanmax(drawn)) if np.isfinite(drawn).any() else 0.0)
        classes.append(
            _ClassLines(
                str(cls),
                t,
                list(wide.columns),
                values if n <= LINES_MAX else None,
                q if n > LINES_MAX else None,
                wide.mean(axis=1).to_numpy() if n > 1 else None,
            )
        )
        in_window = wide.loc[wide.index >= warmup].to_numpy()
        if np.isfinite(in_window).any():
            means[str(cls)] = float(np.nanmean(in_window))
            if n <= LINES_MAX:
                top = max(top, float(np.nanmax(in_window)))
        else:
            means[str(cls)] = float("nan")
    return _Panel(panel, classes, top), means


def _draw_lines(ax: Axes, panel: _Panel, colours: _Colours, label: bool) -> None:
    """Draw a `_Panel`. Every line and band carries an SVG id, `<panel>/<class>/<flow>`,
    `<panel>/<class>/mean`, `<panel>/<class>/p10-p90` and `p25-p75`."""
    for k in panel.classes:
        c = colours(k.cls)
        if k.mean is None:
            assert k.lines is not None
            (line,) = ax.plot(k.t, k.lines[:, 0], lw=1.4, color=c, label=k.cls if label else None)
            line.set_gid(f"{panel.name}/{k.cls}/{k.flows[0]}")
            continue
        if k.lines is not None:
            for flow, line in zip(k.flows, ax.plot(k.t, k.lines, lw=0.6, alpha=0.55, color=c)):
                line.set_gid(f"{panel.name}/{k.cls}/{flow}")
        else:
            assert k.bands is not None
            q = k.bands
            ax.fill_between(k.t, q[0], q[3], color=c, alpha=0.15, lw=0).set_gid(f"{panel.name}/{k.cls}/p10-p90")
            ax.fill_between(k.t, q[1], q[2], color=c, alpha=0.3, lw=0).set_gid(f"{panel.name}/{k.cls}/p25-p75")
        (line,) = ax.plot(k.t, k.mean, lw=2.0, color=c, label=f"{k.cls} (mean of {len(k.flows)})" if label else None)
        line.set_gid(f"{panel.name}/{k.cls}/mean")
    if panel.top > 0:
        ax.set_ylim(0, panel.top * 1.08)


def _seconds(text: str) -> float:
    from aqmlab.scenario.units import parse_time

    return parse_time(text) / 1e9


def _span(run: _Run) -> _Span:
    return _Span(_seconds(run.scenario.get("warmup", "0s")), _seconds(run.scenario["duration"]))


def _time_axes(axes: Sequence[Axes], span: _Span) -> None:
    from matplotlib.ticker import MaxNLocator

    for ax in axes:
        if span.warmup > 0:
            ax.axvspan(0, span.warmup, color="0.93", lw=0, zorder=0)
        ax.set_xlim(0, span.duration)
        ax.grid(True, lw=0.3, alpha=0.6)
        ax.tick_params(labelsize=8)
        # Few ticks: laying out tick labels is much of a figure's drawing time.
        ax.xaxis.set_major_locator(MaxNLocator(7))
        ax.yaxis.set_major_locator(MaxNLocator(4))
    axes[-1].set_xlabel("time (s)", fontsize=9)


def _flows_figure(page: Page, run: _Run, colours: _Colours, span: _Span) -> None:
    import pandas as pd

    panels = []
    numbers = {}
    for name in ("throughput", "cwnd", "srtt"):
        col, scale, ylabel = SERIES[name]
        if run.ts[col].notna().any():
            panel, numbers[ylabel] = _class_lines(run, col, scale, name)
            panels.append((panel, ylabel))
    if not panels:
        return
    sizes = run.ts.groupby("class")["flow"].nunique()
    banded = [str(c) for c, n in sizes.items() if n > LINES_MAX]
    how = "thin lines are flows, thick the class mean; each axis scaled to the measurement window"
    if banded:
        how += f"; for {', '.join(banded)} (over {LINES_MAX} flows) the bands hold the middle 80 % and 50 % of its flows"
    interval = run.scenario.get("measure", {}).get("interval", "100ms")
    page.figure(
        partial(_flows_drawing, panels, colours, span, min(4, len(run.order) // 4 + 1)),
        "flows",
        f"per flow over time, sampled every {interval} ({how}; grey: warmup). Numbers: each class's mean over the measurement window",
        pd.DataFrame(numbers),
    )


def _flows_drawing(panels: list[tuple[_Panel, str]], colours: _Colours, span: _Span, ncol: int) -> Figure:
    """Throughput, cwnd and smoothed RTT per flow, a panel each (`_flows_figure`)."""
    from aqmlab.report._agg import plt

    fig, axes = plt.subplots(len(panels), 1, figsize=(8.5, 1.8 * len(panels) + 0.4), sharex=True, squeeze=False)
    for i, (ax, (panel, ylabel)) in enumerate(zip(axes[:, 0], panels)):
        _draw_lines(ax, panel, colours, label=i == 0)
        ax.set_ylabel(ylabel, fontsize=9)
    axes[0, 0].legend(fontsize=7, loc="upper right", ncol=ncol)
    _time_axes(list(axes[:, 0]), span)
    fig.subplots_adjust(hspace=0.08)
    return fig


@dataclass(frozen=True)
class _Phases:
    """A class's phases over time, as stacked steps: at each sample `t`, the running sum of
    the share of its flows in each phase (`tops`, time × phase, in `names`' order)."""

    cls: str
    t: np.ndarray
    names: list[str]
    tops: np.ndarray


def _state_figure(page: Page, run: _Run, colours: _Colours, span: _Span) -> None:
    """The CCs' own state, where the time series has it: the phase as the share of a class's
    flows in each phase (one panel per class that reports one), and α per flow."""
    import pandas as pd

    ts = run.ts[run.ts["cc_phase"].notna()]
    present = set(ts["class"].unique())
    with_phase = [c for c in run.order if c in present]
    has_alpha = bool(run.ts["cc_alpha"].notna().any())
    if not with_phase and not has_alpha:
        return
    numbers: dict[str, pd.Series] = {}
    # Phases in the order the run first enters them (startup before drain before probe_bw),
    # one colour each across every class.
    phases = list(ts.sort_values("t_s", kind="stable")["cc_phase"].drop_duplicates())
    stacks = []
    for cls in with_phase:
        g = ts[ts["class"] == cls]
        counts = g.groupby(["t_s", "cc_phase"]).size().unstack(fill_value=0)
        share = counts.div(counts.sum(axis=1), axis=0)
        cols = [p for p in phases if p in share.columns]
        stacks.append(_Phases(cls, share.index.to_numpy(), cols, share[cols].to_numpy().cumsum(axis=1)))
        numbers[f"{cls}: share of samples"] = (counts.sum() / counts.to_numpy().sum()).reindex(phases)
    alpha = None
    if has_alpha:
        alpha, means = _class_lines(run, "cc_alpha", 1.0, "alpha")
        numbers["mean α"] = pd.Series(means)
    what, nums = [], []
    if with_phase:
        what.append("the phase, as the share of each class's flows in each phase per sample")
        nums.append("the share of samples in each phase")
    if has_alpha:
        what.append("α (the smoothed fraction of CE-marked bytes) per flow, thick the class mean")
        nums.append("each class's mean α over the measurement window")
    page.figure(
        partial(_state_drawing, stacks, phases, alpha, colours, span),
        "cc_state",
        f"the congestion controls' own state: {'; '.join(what)}. Numbers: {'; '.join(nums)}",
        pd.DataFrame(numbers),
    )


def _state_drawing(stacks: list[_Phases], phases: list[str], alpha: _Panel | None, colours: _Colours, span: _Span) -> Figure:
    """A panel per class with phases, and one of α (`_state_figure`)."""
    import numpy as np
    from matplotlib.patches import Rectangle

    from aqmlab.report._agg import plt

    n = len(stacks) + (alpha is not None)
    fig, axes = plt.subplots(n, 1, figsize=(8.5, 1.3 * n + 0.8), sharex=True, squeeze=False)
    colour = dict(zip(phases, _colours(len(phases))))
    for ax, st in zip(axes[:, 0], stacks):
        # Stacked steps: a sample's phase holds until the next sample.
        for i, p in enumerate(st.names):
            below = st.tops[:, i - 1] if i else np.zeros(len(st.t))
            ax.fill_between(st.t, below, st.tops[:, i], step="post", color=colour[p], lw=0).set_gid(f"phase/{st.cls}/{p}")
        ax.set_ylim(0, 1)
        ax.set_ylabel(f"{st.cls}\nphase share", fontsize=8)
    if alpha is not None:
        ax = axes[-1, 0]
        _draw_lines(ax, alpha, colours, label=True)
        ax.set_ylabel("α", fontsize=9)
        ax.set_ylim(0, 1.02)
        ax.legend(fontsize=7, loc="upper right")
    _time_axes(list(axes[:, 0]), span)
    if stacks:
        handles = [Rectangle((0, 0), 1, 1, color=colour[p]) for p in phases]
        axes[0, 0].legend(handles, phases, fontsize=7, loc="lower left", bbox_to_anchor=(0, 1.02), ncol=min(6, len(phases)), frameon=False)
    fig.subplots_adjust(hspace=0.1)
    return fig


@dataclass(frozen=True)
class _Queue:
    """The bottleneck per sample interval: its time, mean and max queueing delay (ms), drops
    and CE marks."""

    t: np.ndarray
    mean_ms: np.ndarray
    max_ms: np.ndarray
    drops: np.ndarray
    marks: np.ndarray


def _bottleneck_figure(page: Page, run: _Run, target_ms: float | None, span: _Span) -> None:
    """Queueing delay and marks and drops over time (left, where the run has a time series),
    the sojourn CDF (right)."""
    import pandas as pd

    q = run.queue
    h = run.hist.sort_values("bin_lo_ms")
    if q.empty and (h.empty or h["count"].sum() == 0):
        return
    kind = run.scenario["bottleneck"]["aqm"]["kind"]
    queue = None
    if not q.empty:
        queue = _Queue(*(q[c].to_numpy() for c in ("t_s", "sojourn_mean_ms", "sojourn_max_ms", "drops", "marks")))
    s = run.summary["metrics"]["sojourn_ms"]

    def stats(x: pd.Series) -> dict[str, float]:
        return {"mean": float(x.mean()), "p50": float(x.quantile(0.5)), "p99": float(x.quantile(0.99)), "max": float(x.max())}

    numbers = pd.DataFrame({"every packet (ms)": {k: s.get(k) for k in ("mean", "p50", "p99", "max")}})
    if not q.empty:
        numbers["interval means (ms)"] = pd.Series(stats(q["sojourn_mean_ms"]))
        numbers["drops per interval"] = pd.Series(stats(q["drops"]))
        numbers["marks per interval"] = pd.Series(stats(q["marks"]))
    hist_bin = run.scenario.get("measure", {}).get("hist_bin", "1ms")
    counts = h["count"].to_numpy()
    coarse = " (nearly every packet is in the first bin: a finer measure.hist_bin resolves it)" if counts.sum() and counts[0] >= 0.9 * counts.sum() else ""
    target = f"dashed: {kind}'s delay target, {target_ms:.4g} ms" if target_ms is not None else f"{kind} has no delay target"
    over_time = (
        "the bottleneck: queueing delay per sample interval (mean and max) and drops and CE marks per interval over time; right, "
        if not q.empty
        else "the bottleneck (no time series: measure.interval is 0): "
    )
    page.figure(
        partial(_bottleneck_drawing, queue, _cdf_points(h), kind, target_ms, span),
        "bottleneck",
        f"{over_time}the distribution of every packet's queueing delay in the window, log axis: at each {hist_bin} bin's upper edge, the "
        f"fraction of packets that waited less{coarse}; {target}. Numbers: the run's exact delay statistics"
        + (", and over the intervals" if not q.empty else ""),
        numbers,
    )


def _bottleneck_drawing(q: _Queue | None, cdf: tuple[np.ndarray, np.ndarray] | None, kind: str, target_ms: float | None, span: _Span) -> Figure:
    """Delay, drops and marks over time beside the sojourn CDF (`_bottleneck_figure`)."""
    from aqmlab.report._agg import plt

    if q is None:
        fig, a3 = plt.subplots(figsize=(4.5, 3.2))
    else:
        fig = plt.figure(figsize=(10.0, 4.0))
        grid = fig.add_gridspec(2, 2, width_ratios=(2.6, 1.0), hspace=0.08, wspace=0.06)
        a1 = fig.add_subplot(grid[0, 0])
        a2 = fig.add_subplot(grid[1, 0], sharex=a1)
        a3 = fig.add_subplot(grid[:, 1])
        a1.plot(q.t, q.max_ms, lw=0.7, color="tab:red", alpha=0.7, label="max per interval")
        a1.plot(q.t, q.mean_ms, lw=1.4, color="tab:blue", label="mean per interval")
        if target_ms is not None:
            a1.axhline(target_ms, ls="--", lw=1.0, color="k", label=f"{kind} target {target_ms:.4g} ms").set_gid("target")
        a1.set_ylabel("queueing delay (ms)", fontsize=9)
        a1.set_ylim(bottom=0)
        a1.legend(fontsize=7, loc="upper right")
        a1.tick_params(labelbottom=False)
        a2.plot(q.t, q.drops, lw=1.0, color="tab:red", drawstyle="steps-post", label=f"drops ({int(q.drops.sum())})")
        a2.plot(q.t, q.marks, lw=1.0, color="tab:green", drawstyle="steps-post", label=f"CE marks ({int(q.marks.sum())})")
        a2.set_ylabel("packets per interval", fontsize=9)
        a2.set_ylim(bottom=0)
        a2.legend(fontsize=7, loc="upper right")
        _time_axes([a1, a2], span)
        a3.yaxis.set_label_position("right")
        a3.yaxis.tick_right()
    if cdf is not None:
        drawn = _draw_cdf(a3, *cdf, color="tab:blue")
        if target_ms is not None:
            a3.axvline(target_ms, ls="--", lw=1.0, color="k").set_gid("target_cdf")
            drawn = (min(drawn[0], target_ms), max(drawn[1], target_ms))
        log_delay_axis(a3, *drawn)
    a3.set_xlabel("queueing delay (ms)", fontsize=9)
    a3.set_ylabel("fraction of packets", fontsize=9)
    a3.set_ylim(0, 1.02)
    a3.grid(True, which="major", lw=0.3, alpha=0.6)
    a3.tick_params(labelsize=8)
    return fig


def _fmt(x: Any, f: str) -> str:
    import numpy as np

    return "–" if x is None or (isinstance(x, float) and np.isnan(x)) else format(x, f)


def _tables(page: Page, run: _Run) -> None:
    import pandas as pd

    m = run.summary["metrics"]
    s = m["sojourn_ms"]
    overall = pd.DataFrame(
        [
            ("utilization", _fmt(m["utilization"], ".4f")),
            ("Jain's index (all flows)", _fmt(m["jain"], ".4f")),
            ("goodput (Mbit/s)", _fmt(m["goodput_bps"] / 1e6, ".2f")),
            ("queueing delay mean / p50 / p99 / max (ms)", " / ".join(_fmt(s.get(k), ".3f") for k in ("mean", "p50", "p99", "max"))),
            ("mean delay / target", _fmt(m.get("sojourn_mean_rel_target"), ".3f")),
            ("mark ratio", _fmt(m["mark_ratio"], ".5f")),
            ("drop ratio", _fmt(m["drop_ratio"], ".5f")),
            ("measurement window (s)", _fmt(m["window_s"], "g")),
        ],
        columns=["metric", "value"],
    )
    page.heading("Summary")
    page.parts.append(overall.to_html(index=False, border=0, classes="nums"))
    page.heading("Classes")
    k = run.classes.copy()
    k["goodput_bps"] = k["goodput_bps"] / 1e6
    k = k.rename(
        columns={
            "goodput_bps": "goodput (Mbit/s)",
            "rtt_ms": "RTT (ms)",
            "count": "flows",
            "rel_throughput": "rel. throughput",
            "jain": "Jain",
            "mark_ratio": "mark ratio",
            "drop_ratio": "drop ratio",
            "sojourn_mean_ms": "mean sojourn (ms)",
        }
    )
    page.parts.append(k.to_html(index=False, border=0, classes="nums", float_format=lambda v: f"{v:.4g}", na_rep="–"))
    bins = [b for b in run.summary.get("fct", []) if b.get("flows")]
    if bins:
        page.heading("Completion times")
        fct = pd.DataFrame(
            [
                {
                    "size bin": b["bin"],
                    "flows": b["flows"],
                    "completed": b["completed"],
                    "unfinished": b["unfinished"],
                    **{f"{key} {q}": (b.get(key) or {}).get(q) for key in ("fct_s", "slowdown") for q in ("mean", "p50", "p99")},
                }
                for b in bins
            ]
        )
        page.parts.append(fct.to_html(index=False, border=0, classes="nums", float_format=lambda v: f"{v:.4g}", na_rep="–"))


def write_run_report(directory: str | Path, output: str | Path | None = None) -> Path:
    """Write the HTML page of a run directory (default DIR/report.html); its figures also go to
    <output stem>-figures/ as PNG. Raises RunDirError for a directory that is not a run."""
    d = Path(directory)
    out = Path(output) if output is not None else d / "report.html"
    # The page first: it starts the processes that draw the figures, which load matplotlib
    # while this one reads the run's tables (a directory that is not a run's is refused there).
    page = Page(f"aqmlab run — {d.name}", out.parent / f"{out.stem}-figures", preload=[__name__])
    run = _load(d)
    sc = run.scenario
    page.title = f"aqmlab run — {sc.get('name', d.name)}"
    colours = _Colours(tuple(run.order))
    span = _span(run)
    target_ms = _delay_target_ms(run.summary)
    backend = run.summary.get("backend", "sim")
    emu = run.summary.get("emu") or {}
    b = sc["bottleneck"]
    # The folder is this page's own: figures of an earlier drawing that this one lacks go.
    for old in page.fig_dir.glob("[0-9][0-9]-*.*"):
        if old.suffix in (".png", ".svg"):
            old.unlink()
    page.para(
        f"Run on {'the emulator (real Linux ' + str(emu.get('kernel', '?')) + ' TCP)' if backend == 'emu' else 'the simulator'}: "
        f"{run.summary['metrics']['flows']} flows in {len(run.order)} class(es) through a {b['rate']} bottleneck "
        f"({b['aqm']['kind']}, buffer {b['buffer']}), {sc['duration']} with {sc.get('warmup', '0s')} of warmup (grey in the figures, "
        f"outside every metric), seed {sc.get('seed')}, scenario hash {run.summary.get('scenario_hash', '?')}, "
        f"wall time {run.summary.get('wall_time_s', 0):.2f} s."
    )
    _tables(page, run)
    page.heading("Flows over time")
    _flows_figure(page, run, colours, span)
    _state_figure(page, run, colours, span)
    stateless = [c for c in run.order if not run.ts.loc[run.ts["class"] == c, ["cc_phase", "cc_alpha"]].notna().any().any()]
    if stateless and len(stateless) < len(run.order):
        page.para(f"No congestion-control state (phase, α) in this run's time series for: {', '.join(stateless)}.")
    page.heading("The bottleneck")
    _bottleneck_figure(page, run, target_ms, span)
    page.heading("Scenario")
    # While the figures are drawn: validating the scenario loads pydantic's models.
    fmt, text = _scenario_toml(run.summary)
    page.para(
        "The canonical scenario, every default filled in: `aqmlab run` on this file repeats the run."
        if fmt == "toml"
        else "The stored scenario (it does not validate as a scenario of this aqmlab version, so it is shown as stored)."
    )
    page.parts.append(f'<pre style="background:#f4f4f4;padding:.8em;overflow-x:auto">{html.escape(text)}</pre>')
    page.write(out)
    return out


# ------------------------------------------------------------------------------------------
# `aqmlab plot` of run directories
# ------------------------------------------------------------------------------------------


def _labels(dirs: Sequence[Path]) -> list[str]:
    """Each directory's name, or its path where two share a name (sim/ of two compares)."""
    names = [d.name for d in dirs]
    return [str(d) if names.count(d.name) > 1 else d.name for d in dirs]


def series_figure(dirs: Sequence[str | Path], series: Sequence[str], *, by: str = "flow") -> Figure:
    """One panel per series over time, for one run or several on the same axes. One run: a
    colour per class; several: a colour per run (labelled by its directory) and a line style
    per class. `by="flow"` draws every flow, `by="class"` each class's mean. Every line carries
    an SVG id: `<series>/<run>/<class>/<flow>` (`mean` for a class mean), `queue/<run>` and
    `target/<run>` for the bottleneck."""
    unknown = [s for s in series if s not in SERIES]
    if unknown:
        raise ValueError(f"--series {unknown[0]!r}: not a series (series: {', '.join(SERIES)})")
    if by not in ("flow", "class"):
        raise ValueError(f"--by {by!r}: not flow or class")
    from aqmlab.report._agg import plt

    paths = [Path(d) for d in dirs]
    runs = [_load(p, lab) for p, lab in zip(paths, _labels(paths))]
    several = len(runs) > 1
    run_colours = _colours(len(runs))
    fig, axes = plt.subplots(len(series), 1, figsize=(6.4, 2.1 * len(series) + 0.5), sharex=True, squeeze=False)
    duration = max(_seconds(r.scenario["duration"]) for r in runs)
    for ax, name in zip(axes[:, 0], series):
        col, scale, ylabel = SERIES[name]
        for ri, run in enumerate(runs):
            class_colours = dict(zip(run.order, _colours(len(run.order))))
            if name == "queue":
                c = run_colours[ri] if several else "tab:blue"
                (line,) = ax.plot(run.queue["t_s"], run.queue[col], lw=1.1, color=c, label=run.label if several else "mean per interval")
                line.set_gid(f"queue/{run.label}")
                target = _delay_target_ms(run.summary)
                if target is not None:
                    t = ax.axhline(target, ls=":", lw=0.9, color=c, label=f"{run.label} target" if several else f"target {target:.4g} ms")
                    t.set_gid(f"target/{run.label}")
                continue
            for ci, cls in enumerate(run.order):
                g = run.ts[run.ts["class"] == cls]
                if g.empty or g[col].isna().all():
                    continue
                c = run_colours[ri] if several else class_colours[cls]
                style = _STYLES[ci % len(_STYLES)] if several else "-"
                label = f"{run.label} · {cls}" if several else cls
                wide = _wide(g, col, scale)
                if by == "class":
                    (line,) = ax.plot(wide.index, wide.mean(axis=1), lw=1.3, color=c, ls=style, label=label)
                    line.set_gid(f"{name}/{run.label}/{cls}/mean")
                    continue
                lines = ax.plot(wide.index, wide.to_numpy(), lw=0.7, color=c, ls=style, alpha=0.8)
                lines[0].set_label(label)
                for flow, line in zip(wide.columns, lines):
                    line.set_gid(f"{name}/{run.label}/{cls}/{flow}")
        ax.set_ylabel(ylabel, fontsize=8)
        ax.set_ylim(bottom=0)
        ax.set_xlim(0, duration)
        ax.grid(True, lw=0.3, alpha=0.6)
        ax.tick_params(labelsize=7)
        handles, labels = ax.get_legend_handles_labels()
        # The flows' legend once, on the first flow panel (every flow panel has the same lines).
        if handles and (name == "queue" or name == next(s for s in series if s != "queue")):
            ax.legend(fontsize=6, loc="upper right", ncol=1 if len(labels) <= 6 else 2)
    axes[-1, 0].set_xlabel("time (s)", fontsize=8)
    fig.tight_layout()
    return fig
