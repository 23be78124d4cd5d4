"""The report of an `aqmlab compare` directory: the same scenario on the simulator (``sim/``)
and on the emulator (``emu/``, real Linux TCP through the router), side by side.

One static page, as the sweep reports (`report.page.Page`): the metrics table of `compare.json`
(sim, emu, emu − sim), per-class goodput of both backends, per-flow throughput and cwnd over
time for each backend on a shared scale, the queue-delay CDFs of both on one log axis, and the
bottleneck's mean sojourn over time. Every figure carries its numbers and a copy beside the page.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aqmlab.report.page import Page
from aqmlab.report.run import delay_cdf, log_delay_axis

if TYPE_CHECKING:
    from aqmlab.store.result import Result

# matplotlib, pandas and pyarrow are imported where used: `aqmlab report` imports this module
# for `is_compare_dir` whatever directory it is given.

__all__ = ["is_compare_dir", "write_compare_report"]

#: Backends in the order and colours every figure uses.
_BACKENDS = (("sim", "simulator", "tab:blue"), ("emu", "emulator (Linux)", "tab:orange"))


def is_compare_dir(d: str | Path) -> bool:
    """An `aqmlab compare -o DIR` directory: compare.json beside the sim/ and emu/ results."""
    d = Path(d)
    return (d / "compare.json").is_file() and (d / "sim" / "summary.json").is_file() and (d / "emu" / "summary.json").is_file()


def _fmt(x: Any, f: str, diff: bool = False) -> str:
    if x is None:
        return "–"
    if f == "pct":
        return f"{100 * x:+.2f} pp" if diff else f"{100 * x:.2f} %"
    return f"{x:+.3f}" if diff else f"{x:.3f}"


def _goodput(page: Page, res: dict[str, Result]) -> None:
    import pandas as pd

    from aqmlab.report._agg import plt

    per = {k: res[k].classes.set_index("class")["goodput_bps"] / 1e6 for k, _, _ in _BACKENDS}
    t = pd.DataFrame({lab: per[k] for k, lab, _ in _BACKENDS})
    fig, ax = plt.subplots(figsize=(max(4.0, 1.6 * len(t) + 2.0), 3.2))
    width = 0.38
    for i, (_, lab, colour) in enumerate(_BACKENDS):
        ax.bar([j + (i - 0.5) * width for j in range(len(t))], t[lab], width, label=lab, color=colour)
    ax.set_xticks(range(len(t)), list(t.index), fontsize=8)
    ax.set_ylabel("goodput per class (Mbit/s)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    page.figure(fig, "class_goodput", "goodput per flow class, simulator and emulator (measurement window)", t)


def _delay_cdf(page: Page, res: dict[str, Result]) -> None:
    import pandas as pd

    from aqmlab.report._agg import plt

    fig, ax = plt.subplots(figsize=(6.0, 3.2))
    rows = {}
    spans = []
    for k, lab, colour in _BACKENDS:
        h = res[k].sojourn_hist
        span = delay_cdf(ax, h, label=lab, color=colour)
        if span is None:
            continue
        spans.append(span)
        h = h.sort_values("bin_lo_ms")
        cdf = h["count"].cumsum() / h["count"].sum()
        rows[lab] = {q: float(h["bin_hi_ms"][cdf >= q].iloc[0]) for q in (0.5, 0.9, 0.99)}
    if spans:
        log_delay_axis(ax, min(lo for lo, _ in spans), max(hi for _, hi in spans))
    ax.set_xlabel("queueing delay (ms)")
    ax.set_ylabel("fraction of packets")
    ax.set_ylim(0, 1.02)
    ax.grid(True, lw=0.3, alpha=0.6)
    ax.legend(fontsize=8)
    fig.tight_layout()
    page.figure(
        fig,
        "delay_cdf",
        "queue-delay CDF of every packet at the bottleneck, log axis: at each bin's upper edge, the fraction of packets that waited less "
        "(percentiles in ms below)",
        pd.DataFrame(rows).rename(index=lambda q: f"p{round(q * 100)}"),
    )


def _sojourn_over_time(page: Page, res: dict[str, Result]) -> None:
    import pandas as pd

    from aqmlab.report._agg import plt

    fig, ax = plt.subplots(figsize=(7.0, 3.0))
    cols = {}
    for k, lab, colour in _BACKENDS:
        q = res[k].queue
        if q.empty:
            continue
        ax.plot(q["t_s"], q["sojourn_mean_ms"], label=lab, color=colour, lw=1)
        cols[lab] = q.set_index("t_s")["sojourn_mean_ms"].describe()[["mean", "50%", "max"]]
    ax.set_xlabel("time (s)")
    ax.set_ylabel("mean sojourn per interval (ms)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    page.figure(fig, "sojourn_over_time", "the bottleneck's mean sojourn per sample interval over time", pd.DataFrame(cols))


def _throughput_over_time(page: Page, res: dict[str, Result]) -> None:
    """Per-flow throughput (top) and cwnd (below, where the backend's samples have it: the
    simulator's sender state, the emulator's TCP_INFO snd_cwnd), one column per backend."""
    import pandas as pd

    from aqmlab.report._agg import plt

    frames = {k: res[k].timeseries for k, _, _ in _BACKENDS}
    if all(f.empty for f in frames.values()):
        return
    rows = [("throughput_bps", 1e-6, "throughput per flow (Mbit/s)")]
    if any(not f.empty and f["cwnd"].notna().any() for f in frames.values()):
        rows.append(("cwnd", 1.0, "cwnd per flow (packets)"))
    fig, axes = plt.subplots(len(rows), 2, figsize=(11.0, 2.9 * len(rows) + 0.3), sharex=True, sharey="row", squeeze=False)
    means = {}
    for j, (k, lab, _) in enumerate(_BACKENDS):
        ts = frames[k]
        for i, (col, scale, ylabel) in enumerate(rows):
            ax = axes[i, j]
            for (cls, flow), g in ts.groupby(["class", "flow"], sort=True):
                ax.plot(g["t_s"], g[col] * scale, lw=0.8, label=f"{cls} #{flow}")
            ax.set_ylim(bottom=0)
            ax.grid(True, lw=0.3, alpha=0.6)
            if j == 0:
                ax.set_ylabel(ylabel)
            if not ts.empty:
                means[(lab, ylabel)] = ts.groupby("class")[col].mean() * scale
        axes[0, j].set_title(lab, fontsize=9)
        axes[-1, j].set_xlabel("time (s)")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    if len(labels) <= 12:
        axes[0, 1].legend(handles, labels, fontsize=7, loc="upper right")
    fig.tight_layout()
    what = "throughput and cwnd" if len(rows) > 1 else "throughput"
    page.figure(
        fig,
        "throughput_over_time",
        f"per-flow {what} over time, each backend on the same scale (class means below)",
        pd.DataFrame(means),
    )


def write_compare_report(directory: str | Path, output: str | Path) -> Path:
    """Write the HTML page of a compare directory; figures also go to <output stem>-figures/."""
    import pandas as pd

    from aqmlab.store.result import load_result

    d = Path(directory)
    out = Path(output)
    rows = json.loads((d / "compare.json").read_text(encoding="utf-8"))
    res = {k: load_result(d / k) for k, _, _ in _BACKENDS}
    name = res["sim"].summary["scenario"]["name"]
    kernel = (res["emu"].summary.get("emu") or {}).get("kernel", "?")
    page = Page(f"aqmlab compare — {name}", out.parent / f"{out.stem}-figures")
    page.para(
        f"The scenario {name!r} run on the simulator (Linux-faithful TCP models) and on the emulator (real Linux {kernel} "
        "TCP in network namespaces through aqmlab's router, which runs the same queue discipline). Same measurement window "
        "and metric definitions; the emulator's choices and limits are in docs/emulator.md."
    )
    page.heading("Metrics side by side")
    table = pd.DataFrame(
        [
            {
                "metric": r["metric"],
                "simulator": _fmt(r["sim"], r["format"]),
                "emulator": _fmt(r["emu"], r["format"]),
                "emu − sim": _fmt(r["diff"], r["format"], True),
            }
            for r in rows
        ]
    )
    page.parts.append(table.to_html(index=False, border=0, classes="nums"))
    page.heading("Throughput")
    _goodput(page, res)
    _throughput_over_time(page, res)
    page.heading("Queueing delay")
    _delay_cdf(page, res)
    _sojourn_over_time(page, res)
    page.write(out)
    return out
