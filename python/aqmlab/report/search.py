"""The page of a worst-case search (DIR/report.html): the objective over evaluations with the
running worst, the explored space coloured by the objective, the worst points, and the shrunk
case with its check on other seeds. Static, figures embedded (PNG and SVG copies beside it)."""

from __future__ import annotations

import html
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from aqmlab.report.page import Page  # noqa: E402
from aqmlab.search.runner import Search  # noqa: E402
from aqmlab.store.result import read_table  # noqa: E402

__all__ = ["write_search_report"]


def write_search_report(search: Search, directory: str | Path, output: str | Path | None = None) -> Path:
    d = Path(directory)
    out = Path(output) if output else d / "report.html"
    df = read_table(d / "trials.parquet").to_pandas().sort_values("point")
    obj = search.objective
    worse_first = obj.sense == "max"
    page = Page(f"Search {search.name}: {obj}", out.with_name(out.stem + "-figures"))
    page.para(
        f'{len(df)} points ({search.optimizer}, batch {search.batch}, seed {search.seed}), each the mean over seeds {search.seeds}. Lower is worse for "min" objectives, higher for "max".'
    )

    # Objective over evaluations, with the running worst.
    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.plot(df["point"], df["objective"], "o", ms=4, alpha=0.7, label="point")
    run = df["objective"].cummax() if worse_first else df["objective"].cummin()
    ax.step(df["point"], run, where="post", color="C3", lw=1.5, label="worst so far")
    ax.set_xlabel("evaluation")
    ax.set_ylabel(str(obj).split(" ", 1)[1])
    ax.grid(True, lw=0.3)
    ax.legend(fontsize=8, frameon=False)
    page.heading("Objective over evaluations")
    page.figure(fig, "objective", f"{obj} of each evaluated point, in the order asked, and the worst so far")

    # Explored space: each variable against the objective; the first two variables' plane.
    names = search.var_names
    fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names) + 0.6, 3.0), squeeze=False)
    for ax, v in zip(axes[0], search.space):
        x = df[v.name]
        ax.scatter(
            x.astype(str) if v.choices is not None and not all(isinstance(c, (int, float)) for c in v.choices) else x,
            df["objective"],
            c=df["point"],
            cmap="viridis",
            s=14,
        )
        if v.log:
            ax.set_xscale("log")
        ax.set_xlabel(v.name)
        ax.grid(True, lw=0.3)
    axes[0][0].set_ylabel(str(obj).split(" ", 1)[1])
    fig.tight_layout()
    page.heading("Explored space")
    page.figure(fig, "space", "objective against each variable (colour: evaluation order, dark = early)")
    numeric = [v for v in search.space if v.choices is None or all(isinstance(c, (int, float)) for c in v.choices)]
    if len(numeric) >= 2:
        a, b = numeric[0], numeric[1]
        fig, ax = plt.subplots(figsize=(5.2, 4.2))
        sc = ax.scatter(df[a.name], df[b.name], c=df["objective"], cmap="viridis_r" if worse_first else "viridis", s=24, edgecolors="k", linewidths=0.3)
        best = df.loc[df["objective"].idxmax() if worse_first else df["objective"].idxmin()]
        ax.plot([best[a.name]], [best[b.name]], marker="*", ms=16, color="C3", mec="k", ls="none", label="worst")
        if a.log:
            ax.set_xscale("log")
        if b.log:
            ax.set_yscale("log")
        ax.set_xlabel(a.name)
        ax.set_ylabel(b.name)
        fig.colorbar(sc, ax=ax, label=str(obj).split(" ", 1)[1])
        ax.legend(fontsize=8, frameon=False)
        page.figure(fig, "plane", f"points in the {a.name}–{b.name} plane, coloured by the objective (star: the worst)")

    page.heading("Worst points")
    worst = df.sort_values("objective", ascending=not worse_first).head(10)
    cols = ["point", *names, "objective", *[c for c in df.columns if c.startswith("value_seed")]]
    page.parts.append(worst[cols].to_html(index=False, float_format=lambda v: f"{v:.4g}", border=0, classes="nums"))
    page.para(
        "best.toml is the worst point as a plain scenario (first seed); trials.parquet has every point, its per-seed values and run hashes (the runs are under runs/)."
    )

    sj = d / "shrink.json"
    if sj.is_file():
        doc = json.loads(sj.read_text(encoding="utf-8"))
        page.heading("Shrunk counterexample")
        page.para(
            f"Each step kept only if the objective stays within {doc['tolerance']:g}·|worst| of the worst value {doc['worst']['value']:.4g}. Shrunk: {doc['shrunk']['value']:.4g} with "
            + ", ".join(f"{k} = {v}" for k, v in {**doc["shrunk"]["params"], **doc["shrunk"]["patch"]}.items())
            + " (shrunk.toml)."
        )
        steps = pd.DataFrame(doc["steps"])
        if not steps.empty:
            page.parts.append(steps.to_html(index=False, float_format=lambda v: f"{v:.4g}", border=0, classes="nums", na_rep="–"))
        c = doc["check"]
        verdict = "holds" if c["holds"] else "does not hold"
        page.para(f"On other seeds {c['seeds']}: mean {c['mean']:.4g} — the shrunk case {verdict}.")
        page.parts.append(
            pd.DataFrame({"seed": list(c["values"]), "value": list(c["values"].values()), "holds": [c["holds_per_seed"][k] for k in c["values"]]}).to_html(
                index=False, float_format=lambda v: f"{v:.4g}", border=0, classes="nums"
            )
        )
    ej = d / "emu.json"
    if ej.is_file():
        e = json.loads(ej.read_text(encoding="utf-8"))
        page.heading("On the emulator")
        page.parts.append(
            f"<p>{html.escape(str(obj))}: emulator {e['emu_value']:.4g}, simulator {e['sim_value']:.4g} (scenario {html.escape(e['scenario'])}; results in emu/).</p>"
        )
    page.write(out)
    return out
