"""The atlas page (DIR/atlas.html): an overview of where each AQM breaks (worst Jain's index
and worst harm of each pair under each AQM), then per pair a row of maps per metric over
buffer × RTT ratio, one column per AQM. The maps are inline SVG whose cells link to the cell's
scenario (cells/<hash>.toml), so any cell is one click from a runnable file."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator  # noqa: E402

from aqmlab.report.page import Page  # noqa: E402
from aqmlab.store.result import read_table  # noqa: E402

__all__ = ["write_atlas_report"]

_METRIC = {
    "jain": ("Jain's index", "RdYlGn", 0.5, 1.0),
    "harm_first": ("throughput harm to the first", "RdBu_r", -1.0, 1.0),
    "harm_second": ("throughput harm to the second", "RdBu_r", -1.0, 1.0),
}


_TICKS = (0.01, 0.03, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 100)


def _overview(df: pd.DataFrame, aqms: list[str], pairs: list[str]) -> Figure:
    # One above the other, so that a wide atlas (21 pairs) stays readable at the page's width.
    fig, axes = plt.subplots(2, 1, figsize=(2.0 + 0.62 * len(pairs), 2 * (1.6 + 0.3 * len(aqms))), squeeze=False)
    g = df.assign(pair=df["first"] + " vs " + df["second"])
    g["harm_max"] = g[["harm_first", "harm_second"]].max(axis=1)
    for ax, (metric, agg, title, cmap, lo, hi) in zip(
        axes[:, 0],
        (
            ("jain", "min", "worst Jain's index over the plane", "RdYlGn", 0.5, 1.0),
            ("harm_max", "max", "worst throughput harm (either side)", "RdBu_r", -1.0, 1.0),
        ),
    ):
        m = g.pivot_table(index="aqm", columns="pair", values=metric, aggfunc=agg).reindex(index=aqms, columns=pairs)
        im = ax.imshow(m.values, cmap=cmap, vmin=lo, vmax=hi, aspect="auto")
        for (i, j), v in np.ndenumerate(m.values):
            if np.isfinite(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=6.5)
        ax.set_xticks(range(len(pairs)), pairs, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(len(aqms)), aqms, fontsize=7)
        ax.set_title(title, fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.04)
    fig.tight_layout()
    return fig


def _pair_maps(sub: pd.DataFrame, aqms: list[str], first: str, second: str, xlim: tuple[float, float], ylim: tuple[float, float]) -> Figure:
    fig, axes = plt.subplots(3, len(aqms), figsize=(1.2 + 1.9 * len(aqms), 6.0), squeeze=False, sharex=True, sharey=True)
    # Fixed margins, no minor ticks: a layout engine and log-axis minor ticks dominate the
    # drawing time of a page with hundreds of maps.
    fig.subplots_adjust(left=0.9 / (1.2 + 1.9 * len(aqms)), right=1 - 0.7 / (1.2 + 1.9 * len(aqms)), bottom=0.08, top=0.95, wspace=0.08, hspace=0.1)
    names = {"harm_first": f"harm to {first}", "harm_second": f"harm to {second}", "jain": "Jain's index"}
    for i, metric in enumerate(("jain", "harm_first", "harm_second")):
        label, cmap_name, lo, hi = _METRIC[metric]
        cmap = plt.get_cmap(cmap_name)
        norm = matplotlib.colors.Normalize(lo, hi)
        for j, aqm in enumerate(aqms):
            ax = axes[i][j]
            allc = sub[sub["aqm"] == aqm]
            cells = allc[allc["error"].isna()]
            bad = allc[allc["error"].notna()]
            if len(bad):
                # Cells with no valid scenario (the discipline's parameters do not exist there).
                ax.add_collection(
                    PolyCollection(
                        [[(10**r.x0, 10**r.y0), (10**r.x1, 10**r.y0), (10**r.x1, 10**r.y1), (10**r.x0, 10**r.y1)] for r in bad.itertuples()],
                        facecolors="#dddddd",
                        edgecolors="white",
                        hatch="xx",
                        linewidths=0.4,
                    )
                )
            # One collection per map (fast to draw); each cell's polygon links to its scenario.
            polys = [[(10**r.x0, 10**r.y0), (10**r.x1, 10**r.y0), (10**r.x1, 10**r.y1), (10**r.x0, 10**r.y1)] for r in cells.itertuples()]
            coll = PolyCollection(polys, facecolors=cmap(norm(cells[metric].to_numpy())), edgecolors="white", linewidths=0.4)
            coll.set_urls([f"cells/{h}.toml" for h in cells["run"]])
            ax.add_collection(coll)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlim(*xlim)
            ax.set_ylim(*ylim)
            for axis, lim in ((ax.xaxis, xlim), (ax.yaxis, ylim)):
                axis.set_major_locator(FixedLocator([t for t in _TICKS if lim[0] <= t <= lim[1]]))
                axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
                axis.set_minor_locator(NullLocator())
            ax.tick_params(labelsize=6)
            if i == 0:
                ax.set_title(aqm, fontsize=8)
            if j == 0:
                ax.set_ylabel(f"{names[metric]}\nRTT ratio", fontsize=7)
            if i == 2:
                ax.set_xlabel("buffer (BDP)", fontsize=7)
        pos = axes[i][-1].get_position()
        cax = fig.add_axes((pos.x1 + 0.01, pos.y0, 0.012, pos.height))
        fig.colorbar(matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap), cax=cax)
        cax.tick_params(labelsize=6)
    return fig


def write_atlas_report(directory: str | Path, output: str | Path | None = None) -> Path:
    d = Path(directory)
    out = Path(output) if output else d / "atlas.html"
    doc = json.loads((d / "atlas.json").read_text(encoding="utf-8"))
    df = read_table(d / "atlas.parquet").to_pandas()
    if "error" not in df:
        df["error"] = None
    aqms = doc["aqms"]
    pairs = [f"{a} vs {b}" for a, b in dict.fromkeys(zip(df["first"], df["second"]))]
    xlim = (10 ** df["x0"].min(), 10 ** df["x1"].max())
    ylim = (10 ** df["y0"].min(), 10 ** df["y1"].max())
    page = Page(f"Coexistence atlas: {doc['name']}", out.parent / f"{out.stem}-figures", width_px=1400)
    page.para(
        f"{len(pairs)} pair(s) of congestion controls × {len(aqms)} AQM(s), {doc['count']} flow(s) each, at {doc['rate']}; the first CC's RTT is {doc['rtt']}, "
        f"the second's is the RTT ratio times it; buffer in BDPs of the first's RTT. {doc['cells']} cells after {doc['rounds']} refinement round(s) (threshold {doc['threshold']:g}); "
        f"{doc['runs']} runs ({doc['duration']} each, mean over seeds {doc['seeds']}). Jain's index over all flows (red: unfair); harm is the throughput harm a CC suffers against its solo baseline "
        "(Ware et al., HotNets 2019; red: harmed, blue: better off than among its own kind). Click a cell for its scenario."
    )
    page.heading("Where each AQM breaks")
    page.figure(_overview(df, aqms, pairs), "overview", "Worst value over the buffer × RTT-ratio plane, per AQM (rows) and pair (columns)")
    for (a, b), sub in df.groupby(["first", "second"], sort=False):
        page.heading(f"{a} vs {b}")
        page.inline_svg(_pair_maps(sub, aqms, a, b, xlim, ylim), "map")
        for r in sub[sub["error"].notna()].drop_duplicates("aqm").itertuples():
            page.para(f"{r.aqm}: grey cells have no valid scenario ({r.error}).")
        worst = sub.nsmallest(3, "jain")[["aqm", "buffer_bdp", "rtt_ratio", "jain", "harm_first", "harm_second", "run"]]
        worst["run"] = [f'<a href="cells/{h}.toml">{h}</a>' for h in worst["run"]]
        page.parts.append(
            "<details><summary>least fair cells</summary>"
            + worst.to_html(index=False, escape=False, float_format=lambda v: f"{v:.3g}", border=0, classes="nums")
            + "</details>"
        )
    page.write(out)
    return out
