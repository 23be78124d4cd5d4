"""One HTML page of figures and tables: the builder every report shares (study, harm, compare,
search, fidelity, atlas). Each figure is saved beside the page as PNG and SVG and embedded; its
numbers go under it in a collapsed table. A figure whose parts link elsewhere (the atlas's maps)
is embedded as inline SVG instead, since an <img> cannot carry links."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from aqmlab.store.atomic import write_text  # noqa: E402

__all__ = ["Page"]


class Page:
    def __init__(self, title: str, fig_dir: Path, width_px: int = 1200):
        self.title = title
        self.fig_dir = fig_dir
        self.width_px = width_px
        self.parts: list[str] = []
        self.n = 0

    def heading(self, text: str) -> None:
        self.parts.append(f"<h2>{html.escape(text)}</h2>")

    def para(self, text: str) -> None:
        self.parts.append(f"<p>{html.escape(text)}</p>")

    def figure(self, fig: Figure, name: str, caption: str, table: pd.DataFrame | None = None) -> None:
        self.n += 1
        stem = f"{self.n:02d}-{name}"
        self.fig_dir.mkdir(parents=True, exist_ok=True)
        fig.savefig(self.fig_dir / f"{stem}.png", dpi=150, bbox_inches="tight")
        fig.savefig(self.fig_dir / f"{stem}.svg", bbox_inches="tight")
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
        plt.close(fig)
        data = base64.b64encode(buf.getvalue()).decode()
        links = f'<a href="{self.fig_dir.name}/{stem}.png">PNG</a> · <a href="{self.fig_dir.name}/{stem}.svg">SVG</a>'
        self.parts.append(
            f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}"><figcaption>{html.escape(caption)} ({links})</figcaption></figure>'
        )
        if table is not None and not table.empty:
            self.parts.append(
                "<details><summary>numbers</summary>" + table.to_html(float_format=lambda v: f"{v:.4g}", na_rep="–", border=0, classes="nums") + "</details>"
            )

    def inline_svg(self, fig: Figure, css_class: str) -> None:
        """Embed `fig` as inline SVG in a <div class=css_class>, its text left as text and its
        artists' URLs (Artist.set_urls) as working links."""
        buf = io.StringIO()
        with plt.rc_context({"svg.fonttype": "none"}):
            fig.savefig(buf, format="svg")
        plt.close(fig)
        text = buf.getvalue()
        self.parts.append(f'<div class="{css_class}">{text[text.index("<svg") :]}</div>')

    def write(self, out: Path) -> None:
        """Write the page to `out` atomically (temp file + rename), creating its folder."""
        out.parent.mkdir(parents=True, exist_ok=True)
        write_text(out, self.render())

    def render(self) -> str:
        style = (
            f"body{{font-family:system-ui,sans-serif;max-width:{self.width_px}px;margin:2em auto;padding:0 1em;color:#222}}"
            "figure{margin:1.2em 0}img,svg{max-width:100%;height:auto}figcaption{font-size:.9em;color:#555}"
            "table.nums{border-collapse:collapse;font-size:.8em}table.nums td,table.nums th{padding:2px 6px;border-bottom:1px solid #ddd;text-align:right}"
            "details{margin-bottom:1.5em}code{background:#f4f4f4;padding:0 3px}"
            "table.findings{border-collapse:collapse;font-size:.85em;margin-bottom:1.5em}table.findings td,table.findings th{padding:4px 6px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}"
        )
        body = "\n".join(self.parts)
        return f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(self.title)}</title><style>{style}</style></head><body><h1>{html.escape(self.title)}</h1>\n{body}\n</body></html>\n'
