"""Static HTML reports of a sweep: the figure types the seed papers publish, each with the
numbers under it, as one page that opens from disk (figures embedded), plus PNG and SVG copies
for papers.

Figures (each only where the sweep has the data):
- facet grids of Jain's index, utilization, relative throughput per class and ECN-mark ratio
  per class over the report's x parameter, faceted by its `col` and `row` parameters (the
  figures of Fejes et al. 2019 and 2020; ECN marks as Fejes et al. 2020 Fig. 10);
- mean and max queueing delay relative to the AQM's target (Fejes et al. 2020);
- per-flow throughput over time for one run per facet cell (Liu et al. (CKCD), De Schepper et
  al. (DualQ));
- queue-delay CDFs per run (De Schepper et al. (DualQ));
- completion time over flow size and slowdown CDFs (the dynamic runs of De Schepper et al.
  (DualQ));
- convergence where runs have joins or leaves (Liu et al. (CKCD) Fig. 8): the windowed Jain index over
  time with the join and leave times marked, and the convergence time of each event.

`aqmlab harm` directories get a page of their own (`write_harm_report`): the harm table and a
heatmap of classes × metric (throughput and delay harm), one or several directories side by
side, plus the convergence figures of their mixed runs where those have joins or leaves.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aqmlab.report.page import Page
from aqmlab.studies import STUDIES

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import pyarrow.parquet as pq
    from matplotlib.figure import Figure
    from matplotlib.legend import Legend
    from matplotlib.text import Text

    from aqmlab.studies.findings import Verdict

# matplotlib, pandas and pyarrow are imported where used: `aqmlab report` imports this module
# whatever directory it is given. The figures are built in worker processes (`Page.figure`),
# which load matplotlib and this module once, before any figure comes (`_PRELOAD`), and no
# pandas: this process hands them lists and arrays (`_Facets`, …), not DataFrames.
_PRELOAD = [__name__]

__all__ = ["write_report", "write_harm_report", "facet_figure", "is_harm_dir"]

_LABELS = {
    "jain": "Jain's index (classes' flows)",
    "run_jain": "Jain's index (all flows)",
    "run_utilization": "utilization",
    "utilization": "utilization",
    "rel_throughput": "relative throughput",
    "mark_ratio": "ECN-mark ratio",
    "drop_ratio": "drop ratio",
    "sojourn_mean_rel_target": "mean delay / target",
    "sojourn_max_rel_target": "max delay / target",
    "sojourn_mean_ms": "mean queueing delay (ms)",
    "sojourn_p99_ms": "p99 queueing delay (ms)",
}


def _sorted_values(s: pd.Series) -> list[Any]:
    import pandas as pd

    vals = list(pd.unique(s.dropna()))
    try:
        return sorted(vals)
    except TypeError:
        return vals


@dataclass(frozen=True)
class _FacetLine:
    """One hue's values in a facet panel: its index among the hues (its colour), its label,
    and its points (x values, or bar positions for categories, and the metric's means)."""

    k: int
    label: str | None
    x: list[Any]
    y: np.ndarray


@dataclass(frozen=True)
class _FacetPanel:
    row: int
    col: int
    heading: str
    lines: list[_FacetLine]
    #: The bars' width (categories: one slot per hue present in the panel).
    width: float


@dataclass(frozen=True)
class _Facets:
    """A facet grid as drawn (`_facet_drawing`): what `facet_figure` computes from the index."""

    nrows: int
    ncols: int
    hues: int
    #: x's categories, for a non-numeric x (bars); None for a numeric x (lines).
    xcats: list[str] | None
    log_x: bool
    xlabel: str
    ylabel: str
    title: str | None
    panels: list[_FacetPanel]


def _facets(df: pd.DataFrame, *, metric: str, x: str, col: str | None, row: str | None, hue: str | None, title: str | None) -> _Facets:
    """The means `facet_figure` draws, per panel and hue."""
    import pandas as pd

    rows = _sorted_values(df[row]) if row else [None]
    cols = _sorted_values(df[col]) if col else [None]
    xs_numeric = pd.api.types.is_numeric_dtype(df[x])
    hues = _sorted_values(df[hue]) if hue else [None]
    xcats = [str(v) for v in _sorted_values(df[x])]
    panels = []
    for i, rv in enumerate(rows):
        for j, cv in enumerate(cols):
            sub = df
            if row:
                sub = sub[sub[row] == rv]
            if col:
                sub = sub[sub[col] == cv]
            present = [hv for hv in hues if hue is None or (sub[hue] == hv).any()]
            width = 0.8 / max(1, len(present))
            lines = []
            for k, hv in enumerate(hues):
                h = sub if hue is None else sub[sub[hue] == hv]
                if h.empty or h[metric].isna().all():
                    continue
                slot = present.index(hv)
                g = h.groupby(x, sort=True)[metric].mean()
                label = str(hv) if hv is not None else None
                if xs_numeric:
                    lines.append(_FacetLine(k, label, list(g.index), g.to_numpy()))
                else:
                    lines.append(_FacetLine(k, label, [xcats.index(str(v)) - 0.4 + (slot + 0.5) * width for v in g.index], g.to_numpy()))
            heading = " · ".join(f"{n}={v}" for n, v in ((row, rv), (col, cv)) if n)
            panels.append(_FacetPanel(i, j, heading, lines, width))
    log_x = bool(xs_numeric and len(df[x].unique()) > 2 and df[x].min() > 0 and df[x].max() / df[x].min() >= 20)
    return _Facets(len(rows), len(cols), len(hues), None if xs_numeric else xcats, log_x, x, _LABELS.get(metric, metric), title, panels)


def facet_figure(
    df: pd.DataFrame, *, metric: str, x: str, col: str | None = None, row: str | None = None, hue: str | None = "class", title: str | None = None
) -> Figure:
    """A grid of small line plots: metric over x, one panel per (row, col), one line per hue."""
    return _facet_drawing(_facets(df, metric=metric, x=x, col=col, row=row, hue=hue, title=title))


def _facet_drawing(f: _Facets) -> Figure:
    """Draw a `_Facets`; a page's worker process calls this, with no pandas to load."""
    from aqmlab.report._agg import plt

    fig, axes = plt.subplots(f.nrows, f.ncols, figsize=(2.6 * f.ncols + 1.2, 2.1 * f.nrows + 0.9), squeeze=False, sharex=True, sharey=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"] if f.hues <= 10 else [plt.get_cmap("tab20")(i % 20) for i in range(20)]
    for p in f.panels:
        ax = axes[p.row][p.col]
        for line in p.lines:
            if f.xcats is None:
                ax.plot(line.x, line.y, marker="o", ms=3, lw=1.2, color=colors[line.k % len(colors)], label=line.label)
            else:
                # Categories (AQMs, mixes): grouped bars, no lines between unrelated points.
                ax.bar(line.x, line.y, width=p.width, color=colors[line.k % len(colors)], label=line.label)
        if f.xcats is not None:
            ax.set_xticks(range(len(f.xcats)), f.xcats, rotation=30, ha="right")
        if f.log_x:
            ax.set_xscale("log")
        if p.heading:
            ax.set_title(p.heading, fontsize=8)
        ax.grid(True, lw=0.3, alpha=0.6)
        ax.tick_params(labelsize=7)
        if p.row == f.nrows - 1:
            ax.set_xlabel(f.xlabel, fontsize=8)
        if p.col == 0:
            ax.set_ylabel(f.ylabel, fontsize=8)
    handles, labels = axes[0][0].get_legend_handles_labels()
    for a in axes.flat:
        for hnd, lab in zip(*a.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(hnd)
                labels.append(lab)
    fig.tight_layout()
    if labels:
        _above(fig, fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 6), fontsize=8, frameon=False, title=f.title, title_fontsize=10))
    elif f.title:
        _above(fig, fig.suptitle(f.title, va="bottom", fontsize=10))
    return fig


def _above(fig: Figure, artist: Legend | Text) -> None:
    """Put a figure's legend or title centred above its panels, as laid out by tight_layout,
    growing the figure by its height: the panels keep their size and place, and everything
    drawn lies inside the canvas, so the figure is saved as it is (Page.figure's crop=False)
    rather than laid out once more to find what sticks out."""
    from matplotlib.legend import Legend

    height_in = artist.get_window_extent().height / fig.dpi + 0.1
    old = fig.get_figheight()
    new = old + height_in
    sp = fig.subplotpars
    fig.set_figheight(new)
    fig.subplots_adjust(top=sp.top * old / new, bottom=sp.bottom * old / new)
    if isinstance(artist, Legend):
        artist.set_bbox_to_anchor((0.5, old / new), transform=fig.transFigure)
    else:
        artist.set_position((0.5, old / new))


def _layout(doc: dict[str, Any], df: pd.DataFrame) -> tuple[str, str | None, str | None]:
    rep = doc.get("report", {})
    axes = [a for a in doc["axes"] if a in df.columns]
    varying = [a for a in axes if df[a].nunique() > 1]
    x = rep.get("x") if rep.get("x") in varying else (varying[0] if varying else (axes[0] if axes else "run"))
    rest = [a for a in varying if a != x]
    col = rep.get("col") if rep.get("col") in rest else (rest[0] if rest else None)
    rest = [a for a in rest if a != col]
    row = rep.get("row") if rep.get("row") in rest else (rest[0] if rest else None)
    return x, col, row


def _pivot(df: pd.DataFrame, metric: str, x: str, col: str | None, row: str | None, hue: str | None) -> pd.DataFrame:
    keys = [k for k in (row, col, hue) if k]
    t = df.groupby(keys + [x], dropna=False)[metric].mean().unstack(x) if keys else df.groupby(x)[metric].mean().to_frame().T
    return t


def write_report(directory: str | Path, output: str | Path, *, study: str | None = None, svg: bool = False, verdicts: list[Verdict] | None = None) -> Path:
    """Write the HTML report of a sweep directory; figures also go to <output stem>-figures/ as
    PNG (and SVG with `svg`). A seed study's sweep (`study`, or a sweep with a study's name and
    axes) opens with its paper's findings beside what the runs measure (`verdicts`, when the
    caller has judged them already)."""
    d = Path(directory)
    out = Path(output)
    doc = json.loads((d / "sweep.json").read_text(encoding="utf-8"))
    # The page first: it starts the processes that draw the figures, which load matplotlib
    # while this one loads pyarrow and pandas and reads the runs.
    page = Page(f"aqmlab report — {doc['name']}", out.parent / f"{out.stem}-figures", svg=svg, preload=_PRELOAD)
    from aqmlab.store.result import read_table

    index = read_table(d / "index.parquet").to_pandas()
    # The findings open the page but are judged last: that loads pydantic's models (≈ 0.5 s),
    # which the figures, handed over first, need not wait for.
    findings_at = len(page.parts)
    _sweep_sections(page, d, doc, index)
    study = study or _study_of(doc)
    if study is not None:
        from aqmlab.studies.findings import evaluate_all  # start-up time: figure workers import this module, and need no pydantic

        end = len(page.parts)
        _findings_table(page, study, verdicts if verdicts is not None else evaluate_all(d, study, index=index))
        added = page.parts[end:]
        del page.parts[end:]
        page.parts[findings_at:findings_at] = added
    page.write(out)
    return out


def _sweep_sections(page: Page, d: Path, doc: dict[str, Any], df: pd.DataFrame) -> None:
    """Everything of a sweep's page after its findings: the runs, and each figure the sweep
    has the data for."""
    n_runs = df["run"].nunique() if not df.empty else 0
    page.para(f"{n_runs} runs of sweep {doc['name']!r}; axes: {', '.join(doc['axes'])}. Each point is one run (deterministic; seed in the scenario).")
    if df.empty:
        page.para("No completed runs.")
        return
    all_runs = df.drop_duplicates("run")
    # `[report] where = { axis = value }` restricts the facet grids (e.g. to the steady runs).
    for k, v in doc.get("report", {}).get("where", {}).items():
        if k in df.columns:
            df = df[df[k] == v]
    x, col, row = _layout(doc, df)
    per_run = df.drop_duplicates("run")
    page.heading("Fairness and utilization")
    for metric, data, hue in (("run_jain", per_run, None), ("utilization", per_run, None), ("rel_throughput", df, "class"), ("jain", df, "class")):
        if data[metric].notna().any():
            fig = partial(_facet_drawing, _facets(data, metric=metric, x=x, col=col, row=row, hue=hue, title=_LABELS.get(metric, metric)))
            page.figure(
                fig,
                metric,
                f"{_LABELS.get(metric, metric)} over {x}" + (f", by {col}" if col else "") + (f" and {row}" if row else ""),
                _pivot(data, metric, x, col, row, hue),
                crop=False,
            )
    if df["mark_ratio"].fillna(0).gt(0).any():
        page.heading("Congestion signals")
        fig = partial(_facet_drawing, _facets(df, metric="mark_ratio", x=x, col=col, row=row, hue="class", title="ECN-mark ratio per class"))
        page.figure(fig, "mark_ratio", "ECN-mark ratio per class (CE-marked ÷ arriving bytes)", _pivot(df, "mark_ratio", x, col, row, "class"), crop=False)
    if df["drop_ratio"].fillna(0).gt(0).any():
        fig = partial(_facet_drawing, _facets(df, metric="drop_ratio", x=x, col=col, row=row, hue="class", title="drop ratio per class"))
        page.figure(fig, "drop_ratio", "drop ratio per class (dropped ÷ arriving bytes)", _pivot(df, "drop_ratio", x, col, row, "class"), crop=False)
    page.heading("Queueing delay")
    for metric in ("sojourn_mean_rel_target", "sojourn_max_rel_target", "sojourn_mean_ms", "sojourn_p99_ms"):
        if per_run[metric].notna().any():
            fig = partial(_facet_drawing, _facets(per_run, metric=metric, x=x, col=col, row=row, hue=None, title=_LABELS[metric]))
            page.figure(fig, metric, _LABELS[metric], _pivot(per_run, metric, x, col, row, None), crop=False)
    _delay_cdfs(page, d, per_run, x, col, row)
    _throughput_over_time(page, d, per_run, x, col, row)
    _completion_times(page, d, all_runs, doc["axes"])
    varying = _varying(all_runs, doc["axes"])
    _convergence_figures(page, [(_run_label(r, varying), d / "runs" / r["run"]) for _, r in all_runs.iterrows()])


def _study_of(doc: dict[str, Any]) -> str | None:
    """The seed study a sweep directory runs: its name and axes are the study's."""
    from aqmlab.studies.findings import findings_path, study_axes  # start-up time: as in write_report

    name = doc.get("name")
    if name not in STUDIES or not findings_path(name).is_file():
        return None
    return name if set(doc["axes"]) == set(study_axes(name)) else None


_VERDICT_COLOURS = {"reproduced": "#1a7f37", "differs": "#b42318", "not comparable": "#6b7280"}


def _findings_table(page: Page, study: str, verdicts: list[Any]) -> None:
    """The paper's findings, what the runs measure in the same setting, and the verdict
    computed from them (python/aqmlab/studies/findings.py)."""

    counts = {v: sum(1 for x in verdicts if x.verdict == v) for v in _VERDICT_COLOURS}
    page.heading(f"Findings of {STUDIES[study][0]} beside aqmlab")
    page.para(
        f"{len(verdicts)} findings: "
        + ", ".join(f"{n} {v}" for v, n in counts.items())
        + ". Each claim is checked on this sweep's runs (the simulator); the setting is the paper's, from the study file."
    )
    rows = []
    for v in verdicts:
        f = v.finding
        setting = ", ".join(f"{k} = {x}" for k, x in f.where.items())
        if f.ratio_to:
            setting += " ÷ " + ", ".join(f"{k} = {x}" for k, x in f.ratio_to.items())
        verdict = v.verdict + (f": {v.reason}" if v.reason else "")
        notes = f.why if v.verdict != "reproduced" else ""
        rows.append(
            "<tr>"
            f"<td>{html.escape(f.statement)}<br><small>{html.escape(f.source)}</small></td>"
            f"<td><code>{html.escape(f.metric)}</code> {html.escape(f.claim.text())}{' (mean)' if f.agg == 'mean' else ''}<br><small>{html.escape(setting)}</small></td>"
            f"<td>{html.escape(v.measured)}</td>"
            f'<td style="color:{_VERDICT_COLOURS[v.verdict]};font-weight:600">{html.escape(verdict)}</td>'
            f"<td>{html.escape(notes)}</td>"
            f"<td>{html.escape(f.emulator) or '–'}</td>"
            "</tr>"
        )
    page.parts.append(
        '<table class="findings"><thead><tr><th>the paper states</th><th>claim checked (setting)</th><th>aqmlab measures</th>'
        "<th>verdict</th><th>where it differs, why</th><th>real stack (emulator)</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )


def _cells(per_run: pd.DataFrame, col: str | None, row: str | None) -> list[tuple[str, pd.DataFrame]]:
    keys = [k for k in (row, col) if k]
    if not keys:
        return [("all runs", per_run)]
    return [(" · ".join(f"{k}={v}" for k, v in zip(keys, key if isinstance(key, tuple) else (key,))), g) for key, g in per_run.groupby(keys, sort=True)]


def _delay_cdfs(page: Page, d: Path, per_run: pd.DataFrame, x: str, col: str | None, row: str | None) -> None:
    from aqmlab.store.result import read_table

    cells: list[tuple[str, list[tuple[str, np.ndarray, np.ndarray]]]] = []
    for name, g in _cells(per_run, col, row)[:12]:
        lines = []
        for _, r in g.sort_values(x).iterrows():
            # Two columns as arrays: a full study's report reads thousands of these.
            h = read_table(d / "runs" / r["run"] / "sojourn_hist.parquet", columns=["bin_hi_ms", "count"])
            count = h["count"].to_numpy()
            if not count.sum():
                continue
            lines.append((f"{x}={r[x]}", h["bin_hi_ms"].to_numpy(), count.cumsum() / count.sum()))
        cells.append((name, lines))
    if any(lines for _, lines in cells):
        page.figure(partial(_delay_cdf_figure, cells), "delay_cdf", f"queue-delay CDFs (1 ms bins), one line per {x}", crop=False)


def _delay_cdf_figure(cells: list[tuple[str, list[tuple[str, np.ndarray, np.ndarray]]]]) -> Figure:
    """One panel per facet cell, one CDF per run: (cell name, [(label, delay bins, CDF)])."""
    from aqmlab.report._agg import plt

    ncol = min(4, len(cells))
    nrow = math.ceil(len(cells) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.1 * ncol, 2.3 * nrow), squeeze=False)
    for ax, (name, lines) in zip(axes.flat, cells):
        for label, bins, cdf in lines:
            ax.plot(bins, cdf, lw=1, label=label)
        ax.set_title(name, fontsize=8)
        ax.set_xlabel("queueing delay (ms)", fontsize=8)
        ax.set_ylabel("CDF", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, lw=0.3, alpha=0.6)
        if lines:
            ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(cells) :]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def _throughput_over_time(page: Page, d: Path, per_run: pd.DataFrame, x: str, col: str | None, row: str | None) -> None:
    from aqmlab.store.result import read_table

    picks = [(name, g.sort_values(x).iloc[len(g) // 2]) for name, g in _cells(per_run, col, row)][:8]
    panels = []
    for name, r in picks:
        ts = read_table(d / "runs" / r["run"] / "timeseries.parquet", columns=["t_s", "flow", "class", "throughput_bps"]).to_pandas()
        lines = [(f"{cls} #{flow}", g["t_s"].to_numpy(), (g["throughput_bps"] / 1e6).to_numpy()) for (cls, flow), g in ts.groupby(["class", "flow"], sort=True)]
        panels.append((f"{name} · {x}={r[x]}", lines, len(ts["flow"].unique()) <= 6))
    page.figure(
        partial(_throughput_figure, panels),
        "throughput_time",
        "per-flow throughput over time (100 ms intervals), one run per facet cell (the middle x value)",
        crop=False,
    )


def _throughput_figure(panels: list[tuple[str, list[tuple[str, np.ndarray, np.ndarray]], bool]]) -> Figure:
    """One panel per run: (title, a line per flow (label, time, Mbit/s), whether to label them)."""
    from aqmlab.report._agg import plt

    ncol = min(4, len(panels))
    nrow = math.ceil(len(panels) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.3 * ncol, 2.4 * nrow), squeeze=False)
    for ax, (title, lines, legend) in zip(axes.flat, panels):
        for label, t, mbps in lines:
            ax.plot(t, mbps, lw=0.7, label=label)
        ax.set_title(title, fontsize=8)
        ax.set_xlabel("time (s)", fontsize=8)
        ax.set_ylabel("throughput (Mbps)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, lw=0.3, alpha=0.6)
        if legend:
            ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def _completion_times(page: Page, d: Path, runs: pd.DataFrame, axes: list[str]) -> None:
    """FCT over flow size (log–log, as De Schepper et al. (DualQ)) and slowdown CDFs, for runs with finite flows."""
    import pandas as pd
    import pyarrow.parquet as pq

    from aqmlab.store.result import read_table

    tables = []
    # Per run and flow-size bin, the engine's own summary (`results::metrics::fct_by_size`:
    # the scenario's bins, nearest-rank quantiles), so the tables say what the run says.
    by_bin: list[dict[str, Any]] = []
    varying = _varying(runs, axes)
    # Most runs have no finite flows: their table's row count is in its footer.
    finite = runs[[pq.read_metadata(d / "runs" / h / "fct.parquet").num_rows > 0 for h in runs["run"]]]
    for _, r in finite.iterrows():
        f = read_table(d / "runs" / r["run"] / "fct.parquet").to_pandas()
        label = " · ".join(str(r[a]) for a in varying)
        f["label"] = label or r["run"]
        tables.append(f)
        summary = json.loads((d / "runs" / r["run"] / "summary.json").read_text(encoding="utf-8"))
        for b in summary["fct"]:
            if b["flows"]:
                by_bin.append(
                    {
                        "label": label or r["run"],
                        "size bin": b["bin"],
                        "flows": b["flows"],
                        "completed": b["completed"],
                        "unfinished": b["unfinished"],
                        **{f"{k} {q}": b[k][q] for k in ("fct_s", "slowdown") for q in ("mean", "p50", "p99")},
                    }
                )
    stats = pd.DataFrame(by_bin)
    if not tables:
        return
    fct = pd.concat(tables, ignore_index=True)
    done = fct[fct["completed"]]
    page.heading("Completion times")
    unfinished = fct.groupby("label")["completed"].apply(lambda c: int((~c).sum()))
    page.para("Unfinished flows at the end of each run (counted, not averaged away): " + ", ".join(f"{k}: {v}" for k, v in unfinished.items()))
    # Per run (sorted by label, which gives its colour): its flows' sizes and completion
    # times, and its slowdowns in order.
    runs_done = [
        (lab, g["size_bytes"].to_numpy(), g["fct_s"].to_numpy(), g["slowdown"].sort_values().to_numpy())
        for lab, g in ((lab, done[done["label"] == lab]) for lab in sorted(done["label"].unique()))
    ]
    fct_table = stats[["label", "size bin", "flows", "completed", "unfinished", "fct_s mean", "fct_s p50", "fct_s p99"]].set_index(["label", "size bin"])
    page.figure(
        partial(_fct_figure, runs_done),
        "fct_size",
        "flow completion time over flow size (log–log), one colour per run; per size bin, FCT in seconds (p50, p99: nearest rank)",
        fct_table,
        crop=False,
    )
    slowdown_table = stats[["label", "size bin", "completed", "slowdown mean", "slowdown p50", "slowdown p99"]].set_index(["label", "size bin"])
    page.figure(
        partial(_slowdown_figure, runs_done), "slowdown_cdf", "slowdown CDFs per run; per size bin (p50, p99: nearest rank)", slowdown_table, crop=False
    )


def _run_colour(i: int) -> Any:
    from aqmlab.report._agg import plt

    return plt.get_cmap("tab10")(i % 10)


def _fct_figure(runs: list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]) -> Figure:
    """Completion time over size, one colour per run: (label, sizes, completion times, sorted
    slowdowns), as `_completion_times` hands them over."""
    from aqmlab.report._agg import plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for k, (lab, size, fct, _) in enumerate(runs):
        ax.scatter(size, fct, s=4, alpha=0.5, color=_run_colour(k), label=lab)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("flow size (bytes)")
    ax.set_ylabel("completion time (s)")
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    ax.legend(fontsize=7, markerscale=3)
    fig.tight_layout()
    return fig


def _slowdown_figure(runs: list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]) -> Figure:
    """Slowdown CDFs, one per run, coloured as in `_fct_figure`."""
    from aqmlab.report._agg import plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for k, (lab, _, _, v) in enumerate(runs):
        if len(v):
            ax.plot(v, [(i + 1) / len(v) for i in range(len(v))], lw=1.2, color=_run_colour(k), label=lab)
    ax.set_xscale("log")
    ax.set_xlabel("slowdown (FCT ÷ (size/C + base RTT))")
    ax.set_ylabel("CDF")
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _varying(runs: pd.DataFrame, axes: list[str]) -> list[str]:
    """The axes whose value differs between `runs`: what tells one run from another."""
    return [a for a in axes if a in runs.columns and runs[a].nunique() > 1]


def _run_label(r: pd.Series, varying: list[str]) -> str:
    label = " · ".join(f"{a}={r[a]}" for a in varying)
    return label or str(r["run"])


# ------------------------------------------------------------------------------------------
# Convergence (joins and leaves)
# ------------------------------------------------------------------------------------------

#: The convergence definition the report draws (aqmlab.convergence's defaults; docs/scenario.md).
CONVERGENCE = {"threshold": 0.9, "window_s": 1.0, "hold_s": 2.0}


def _run_events(run_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.Series] | None:
    """(convergence table, events, windowed Jain) of a run with joins or leaves, else None.

    Starts within the first window of the first start (e.g. uniform(0s, 1s)) are the run's
    start-up, not joins: no window of shares exists before them to compare with."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from aqmlab.analysis.convergence import convergence, events, windowed_jain  # start-up time: as in write_report (they load the engine)
    from aqmlab.store.result import read_table

    # A sweep's report asks this of every run, and most have no event: the table's footer
    # answers when it can, and otherwise only the columns the events are made of are read,
    # as a DataFrame only for a run that has events.
    table = pq.ParquetFile(run_dir / "flows.parquet")
    w = CONVERGENCE["window_s"]
    if _starts_only_at_first(table, w):
        return None
    cols = table.read(columns=[c for c in ("flow", "start_s", "stop_s") if c in table.schema_arrow.names])
    if not cols.num_rows or "start_s" not in cols.column_names:
        return None
    starts = cols["start_s"].cast(pa.float64()).to_numpy()
    # A flow without a stop has none (null; NaN here, which no comparison holds for).
    stops = cols["stop_s"].cast(pa.float64()).to_numpy() if "stop_s" in cols.column_names else starts[:0]
    settled = float(starts.min()) + w
    if not ((starts >= settled - 1e-9).any() or (stops >= settled - 1e-9).any()):
        return None  # every flow starts within the first window and none stops: no event to follow
    flows = cols.to_pandas()
    if pq.read_metadata(run_dir / "fct.parquet").num_rows:
        return None  # arrivals: thousands of short flows come and go; their yardstick is the FCT
    ts = read_table(run_dir / "timeseries.parquet", columns=["t_s", "flow", "throughput_bps"]).to_pandas()
    if ts.empty:
        return None
    ev = events(flows, float(ts["t_s"].max()))
    ev = ev[ev["event_s"] >= settled - 1e-9]
    if ev.empty:
        return None
    conv = convergence(ts, flows, **CONVERGENCE)
    conv = conv[conv["event_s"] >= settled - 1e-9]
    return conv, ev, windowed_jain(ts, w, flows)


def _starts_only_at_first(flows: pq.ParquetFile, window_s: float) -> bool:
    """Whether, by the flows table's footer alone, every flow starts within `window_s` of the
    first and none stops (`stop_s` all null: Arrow's null type); False when it cannot tell."""
    import pyarrow as pa

    schema = flows.schema_arrow
    if "start_s" not in schema.names or ("stop_s" in schema.names and schema.field("stop_s").type != pa.null()):
        return False
    meta = flows.metadata
    column = schema.get_field_index("start_s")
    bounds = []
    for i in range(meta.num_row_groups):
        stats = meta.row_group(i).column(column).statistics
        if stats is None or not stats.has_min_max:
            return False
        bounds += [stats.min, stats.max]
    return bool(bounds) and max(bounds) < min(bounds) + window_s - 1e-9


def _convergence_figures(page: Page, runs: list[tuple[str, Path]]) -> None:
    """Windowed Jain over time with joins/leaves marked, and the convergence time per event,
    for the runs that have joins or leaves (at most 12 panels)."""
    import pandas as pd

    found = []
    for label, run_dir in runs:
        r = _run_events(run_dir)
        if r is not None:
            found.append((label, *r))
    if not found:
        return
    c = CONVERGENCE
    page.heading("Convergence")
    page.para(
        f"Windowed Jain index: Jain's index over the flows active at each sample (from their start to their stop) of their mean "
        f"throughput over the trailing {c['window_s']:g} s. After a join or a leave the shares have converged at the first sample, "
        f"at least one window after the event, from which the index stays ≥ {c['threshold']:g} for {c['hold_s']:g} s before the "
        f"next event; events after which fewer than two flows share the link have nothing to settle. "
        f"{len(found)} run(s) with joins or leaves."
    )
    table = pd.concat([conv.assign(run=label) for label, conv, _, _ in found], ignore_index=True)
    table = table[["run", "event", "flow", "event_s", "active_after", "converged_s", "convergence_time_s"]]
    shown = [
        (
            label,
            j.index.to_numpy(),
            j.to_numpy(),
            [(e["event_s"], e["event"]) for _, e in ev.iterrows()],
            conv.loc[conv["converged_s"].notna(), "converged_s"].to_numpy(),
        )
        for label, conv, ev, j in found[:12]
    ]
    page.figure(
        partial(_convergence_jain_figure, shown),
        "convergence_jain",
        "windowed Jain index over time; dashed lines: joins (green) and leaves (red); ×: converged",
        table,
        crop=False,
    )
    # The convergence time of each event, one bar per run; an event whose shares never
    # settled before the next one is marked, not dropped.
    evlabels: list[str] = []
    for _, conv, _, _ in found:
        for _, e in conv.iterrows():
            name = f"{e['event']} {e['event_s']:g} s"
            if name not in evlabels:
                evlabels.append(name)
    if not evlabels:
        return
    wide = table.assign(ev=[f"{e} {t:g} s" for e, t in zip(table["event"], table["event_s"])]).pivot_table(
        index="run", columns="ev", values="convergence_time_s", aggfunc="first", dropna=False
    )
    # Per run, each event's name and its convergence time (None: it did not settle).
    times = [
        (
            label,
            [(f"{e['event']} {e['event_s']:g} s", None if pd.isna(e["convergence_time_s"]) else float(e["convergence_time_s"])) for _, e in conv.iterrows()],
        )
        for label, conv, _, _ in found
    ]
    page.figure(
        partial(_convergence_time_figure, times, evlabels),
        "convergence_time",
        "convergence time after each join and leave, one bar per run (×: did not settle before the next event)",
        wide,
    )


def _convergence_jain_figure(shown: list[tuple[str, np.ndarray, np.ndarray, list[tuple[float, str]], np.ndarray]]) -> Figure:
    """One panel per run (label, the windowed Jain index's times and values, the events'
    times and kinds, the convergence times): the index over time, the events as dashed
    lines, the convergence points as crosses."""
    from matplotlib.lines import Line2D

    from aqmlab.report._agg import plt

    c = CONVERGENCE
    ncol = min(3, len(shown))
    nrow = math.ceil(len(shown) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 2.5 * nrow), squeeze=False, sharey=True)
    for ax, (label, t, jain, events, converged) in zip(axes.flat, shown):
        ax.plot(t, jain, lw=0.8, color="#1f77b4")
        ax.axhline(c["threshold"], color="#888", lw=0.6, ls=":")
        for at, kind in events:
            ax.axvline(at, color="#2ca02c" if kind == "join" else "#d62728", lw=0.8, ls="--")
        if len(converged):
            ax.plot(converged, [c["threshold"]] * len(converged), "kx", ms=5)
        ax.set_title(label, fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("time (s)", fontsize=8)
        ax.set_ylabel("windowed Jain", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, lw=0.3, alpha=0.6)
    for ax in list(axes.flat)[len(shown) :]:
        ax.axis("off")

    kinds = {kind for _, _, _, events, _ in shown for _, kind in events}
    handles = [Line2D([], [], color=col, ls="--", label=k) for k, col in (("join", "#2ca02c"), ("leave", "#d62728")) if k in kinds]
    handles += [
        Line2D([], [], color="k", marker="x", ls="", label="converged"),
        Line2D([], [], color="#888", ls=":", label=f"threshold {c['threshold']:g}"),
    ]
    fig.tight_layout()
    _above(fig, fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False))
    return fig


def _convergence_time_figure(found: list[tuple[str, list[tuple[str, float | None]]]], evlabels: list[str]) -> Figure:
    """The convergence time of each event (`evlabels`: "join 5 s", …), one bar per run:
    (label, [(event, its convergence time, None where it did not settle)])."""
    from aqmlab.report._agg import plt

    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(evlabels) + 2.0), 3.6))
    width = 0.8 / len(found)
    colors = [plt.get_cmap("tab10")(i % 10) for i in range(len(found))]
    ymax = max([v for _, times in found for _, v in times if v is not None] or [1.0])
    for k, (label, times) in enumerate(found):
        for event, v in times:
            x = evlabels.index(event) - 0.4 + (k + 0.5) * width
            if v is None:
                ax.plot([x], [0.03 * ymax], marker="x", color=colors[k], ms=6)
            else:
                ax.bar([x], [v], width=width, color=colors[k], label=label)
    ax.set_xticks(range(len(evlabels)), evlabels, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("convergence time (s)", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(True, axis="y", lw=0.3, alpha=0.6)
    hs, ls = ax.get_legend_handles_labels()
    uniq = dict(zip(ls, hs))
    if uniq:
        # Beside the axes, so that no bar hides behind it.
        ax.legend(uniq.values(), uniq.keys(), fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------------------------------
# Harm
# ------------------------------------------------------------------------------------------


def is_harm_dir(d: str | Path) -> bool:
    """An `aqmlab harm` output directory (harm.json and the runs it was computed from)."""
    return (Path(d) / "harm.json").is_file()


def write_harm_report(directories: Sequence[str | Path], output: str | Path, *, svg: bool = False) -> Path:
    """The harm page of one or several `aqmlab harm` directories: the harm table, a heatmap of
    classes × metric, and the mixed runs' convergence figures where they have joins/leaves
    (PNG beside the page, and SVG with `svg`)."""
    import pandas as pd

    frames = []
    mixed: list[tuple[str, Path]] = []
    for d in map(Path, directories):
        doc = json.loads((d / "harm.json").read_text(encoding="utf-8"))
        run_dir = d / "runs" / doc["scenario"]
        name = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))["scenario"]["name"] if (run_dir / "summary.json").is_file() else d.name
        if any(n == name for n, _ in mixed):
            name = f"{name} ({d.name})"
        mixed.append((name, run_dir))
        frames.append(pd.DataFrame(doc["harm"]).assign(scenario=name))
    df = pd.concat(frames, ignore_index=True)
    out = Path(output)
    title = "aqmlab harm — " + ", ".join(n for n, _ in mixed)
    page = Page(title, out.parent / f"{out.stem}-figures", svg=svg, preload=_PRELOAD)
    page.para(
        "Harm (Ware et al., HotNets 2019) each flow class suffers in the mixed scenario against its solo baseline: the same "
        "scenario with every class running that class's CC. Throughput harm = (baseline − mixed) ÷ baseline; delay harm = "
        "(mixed − baseline) ÷ mixed of the mean queueing delay. 0: no harm; 1: all of it; negative: better off than among its own kind."
    )
    several = len(mixed) > 1
    df["row"] = [f"{s} · {c}" if several else str(c) for s, c in zip(df["scenario"], df["class"])]
    metrics = [("throughput_harm", "throughput harm"), ("delay_harm", "delay harm")]
    m = df.set_index("row")[[k for k, _ in metrics]].astype(float)
    table = df[
        ["scenario", "class", "cc", "goodput_bps", "baseline_goodput_bps", "throughput_harm", "sojourn_mean_ms", "baseline_sojourn_mean_ms", "delay_harm"]
    ]
    page.heading("Harm")
    shown = table.rename(
        columns={
            "goodput_bps": "goodput (Mbit/s)",
            "baseline_goodput_bps": "baseline goodput (Mbit/s)",
            "sojourn_mean_ms": "mean delay (ms)",
            "baseline_sojourn_mean_ms": "baseline mean delay (ms)",
            "throughput_harm": "throughput harm",
            "delay_harm": "delay harm",
        }
    )
    for col in ("goodput (Mbit/s)", "baseline goodput (Mbit/s)"):
        shown[col] = shown[col] / 1e6
    page.parts.append(shown.to_html(index=False, float_format=lambda v: f"{v:.4g}", na_rep="–", border=0, classes="nums"))
    page.figure(
        partial(_harm_figure, m.to_numpy(), list(m.index), [lab for _, lab in metrics]),
        "harm_heatmap",
        "harm per class (rows) and metric (columns); red: harmed, blue: better off than against its own kind",
        table.set_index(["scenario", "class"]),
        crop=False,
    )
    _convergence_figures(page, mixed)
    page.write(out)
    return out


def _harm_figure(m: np.ndarray, rows: list[str], labels: list[str]) -> Figure:
    """The heatmap of harm: a row per class (`rows`), a column per metric (`labels`)."""
    from aqmlab.report._agg import plt

    fig, ax = plt.subplots(figsize=(2.2 * len(labels) + 2.8, 0.42 * len(m) + 1.4))
    # Diverging around 0 (no harm); colours saturate at ±1, the numbers in the cells do not.
    im = ax.imshow(m, cmap="RdBu_r", vmin=-1.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_yticks(range(len(m)), rows, fontsize=8)
    for i in range(len(m)):
        for k in range(len(labels)):
            v = m[i, k]
            ax.text(
                k,
                i,
                "–" if math.isnan(v) else f"{v:+.2f}",
                ha="center",
                va="center",
                fontsize=8,
                color="white" if not math.isnan(v) and abs(v) > 0.6 else "black",
            )
    fig.colorbar(im, ax=ax, fraction=0.05, pad=0.04).ax.tick_params(labelsize=7)
    fig.tight_layout()
    return fig
