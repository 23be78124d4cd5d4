"""The report of an `aqmlab compare` directory: the same scenario on the simulator (``sim/``)
and on the emulator (``emu/``, real Linux TCP through the router), side by side.

One static page, as the sweep reports (`_report.Page`): the metrics table of `compare.json`
(sim, emu, emu − sim), per-class goodput of both backends, the queue-delay CDFs of both on one
axes, the bottleneck's mean sojourn over time, and per-flow throughput over time for each
backend on a shared scale. Every figure carries its numbers and PNG/SVG copies.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd

from aqmlab.report.page import Page
from aqmlab.store.result import Result, load_result

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
    fig, ax = plt.subplots(figsize=(6.0, 3.2))
    rows = {}
    for k, lab, colour in _BACKENDS:
        h = res[k].sojourn_hist
        if h.empty:
            continue
        h = h.sort_values("bin_lo_ms")
        cdf = h["count"].cumsum() / h["count"].sum()
        ax.step(h["bin_hi_ms"], cdf, where="post", label=lab, color=colour)
        rows[lab] = {q: float(h["bin_hi_ms"][cdf >= q].iloc[0]) for q in (0.5, 0.9, 0.99)}
    ax.set_xlabel("queueing delay (ms)")
    ax.set_ylabel("fraction of packets")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=8)
    fig.tight_layout()
    page.figure(
        fig,
        "delay_cdf",
        "queue-delay CDF of every packet at the bottleneck (upper bin edges; percentiles in ms below)",
        pd.DataFrame(rows).rename(index=lambda q: f"p{round(q * 100)}"),
    )


def _sojourn_over_time(page: Page, res: dict[str, Result]) -> None:
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
    frames = {k: res[k].timeseries for k, _, _ in _BACKENDS}
    if all(f.empty for f in frames.values()):
        return
    top = max(float(f["throughput_bps"].max()) for f in frames.values() if not f.empty) / 1e6
    fig, axes = plt.subplots(1, 2, figsize=(11.0, 3.2), sharey=True)
    means = {}
    for ax, (k, lab, _) in zip(axes, _BACKENDS):
        ts = frames[k]
        for (cls, flow), g in ts.groupby(["class", "flow"], sort=True):
            ax.plot(g["t_s"], g["throughput_bps"] / 1e6, lw=0.8, label=f"{cls} #{flow}")
        ax.set_title(lab, fontsize=9)
        ax.set_xlabel("time (s)")
        ax.set_ylim(0, top * 1.05)
        if not ts.empty:
            means[lab] = ts.groupby("class")["throughput_bps"].mean() / 1e6
    axes[0].set_ylabel("throughput per flow (Mbit/s)")
    handles, labels = axes[0].get_legend_handles_labels()
    if len(labels) <= 12:
        axes[1].legend(handles, labels, fontsize=7, loc="upper right")
    fig.tight_layout()
    page.figure(fig, "throughput_over_time", "per-flow throughput over time, each backend on the same scale (class means, Mbit/s, below)", pd.DataFrame(means))


def write_compare_report(directory: str | Path, output: str | Path) -> Path:
    """Write the HTML page of a compare directory; figures also go to <output stem>-figures/."""
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
