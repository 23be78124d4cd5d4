"""One HTML page of figures and tables: the builder every report shares (study, harm, compare,
search, fidelity, atlas). Each figure is drawn once, as a PNG that is both embedded and saved
beside the page (with `svg=True` also as SVG, for papers: a second drawing); its numbers go
under it in a collapsed table. A figure whose parts link elsewhere (the atlas's maps) is
embedded as inline SVG instead, since an <img> cannot carry links.

Drawing is most of a report's time, so figures are drawn in worker processes, one per core,
while the caller goes on reading and computing: `figure` takes a Figure (pickled to a worker)
or a function that builds one there, and `write` waits for them. The workers are forked from a
server that has loaded matplotlib once (multiprocessing's forkserver), started when the page
is, so each worker starts at once; the caller itself need not load matplotlib at all when it
hands over functions (this module loads it only to draw here). A figure that cannot be pickled
is drawn in the caller's process, as is every figure with `jobs=1`."""

from __future__ import annotations

import base64
import html
import io
import multiprocessing as mp
import multiprocessing.forkserver
import os
import pickle
import struct
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from aqmlab.store.atomic import write_text

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = ["Page", "PNG_DPI"]

#: The PNG's resolution; the page shows it at the size a 110-dpi drawing would have (the
#: browser scales it down, a high-density screen gets the detail).
PNG_DPI = 150
_SHOWN_DPI = 110


@dataclass(frozen=True)
class _Target:
    """Where and how a figure is saved: its PNG, its SVG (None: not asked for), and whether
    to crop it to everything drawn (a tight bounding box: another layout pass)."""

    png: str
    svg: str | None
    crop: bool


def _draw(made: Figure | Callable[[], Figure], to: _Target) -> bytes:
    """Draw a figure, or the figure a function builds: write its PNG (and its SVG, if asked)
    and return the PNG's bytes."""
    from matplotlib.layout_engine import PlaceHolderLayoutEngine

    from aqmlab.report._agg import OpaquePngCanvas, plt

    fig = made() if callable(made) else made
    OpaquePngCanvas(fig)
    bbox = "tight" if to.crop else None
    if not to.crop and isinstance(fig.get_layout_engine(), PlaceHolderLayoutEngine):
        # What tight_layout leaves behind: it does nothing when drawn, but its presence
        # alone makes savefig lay the figure out in a drawing of its own first.
        fig.set_layout_engine(None)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=PNG_DPI, bbox_inches=bbox)
    if to.svg is not None:
        fig.savefig(to.svg, bbox_inches=bbox)
    plt.close(fig)
    data = buf.getvalue()
    Path(to.png).write_bytes(data)
    return data


def _draw_pickled(job: bytes, to: _Target) -> bytes:
    """`_draw` in a worker process."""
    return _draw(pickle.loads(job), to)


def _png_size(data: bytes) -> tuple[int, int]:
    """Width and height of a PNG, from its IHDR chunk."""
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


@dataclass
class _Drawing:
    #: The PNG; while it is being drawn, the submission of the drawing to a worker.
    png: Future[Future[bytes]] | bytes
    job: bytes
    to: _Target
    stem: str
    caption: str


class Page:
    def __init__(self, title: str, fig_dir: Path, width_px: int = 1200, *, svg: bool = False, jobs: int | None = None, preload: Sequence[str] = ()):
        """`svg`: also save each figure as SVG. `jobs`: processes drawing figures (default: one
        per core this process may use; 1 draws each figure here, when added).
        `preload`: the modules whose functions build the figures, and what those need (pandas,
        where they take DataFrames), loaded once for every worker (when this page starts the
        forkserver) rather than by each."""
        self.title = title
        self.fig_dir = fig_dir
        self.width_px = width_px
        self.svg = svg
        self.parts: list[str] = []
        self.n = 0
        self._jobs = jobs if jobs is not None else len(os.sched_getaffinity(0))
        self._pool: ProcessPoolExecutor | None = None
        # Figures are handed to the pool from a thread of their own: the first hand-off waits
        # for the forkserver to have loaded matplotlib, which the caller need not.
        self._handoff: ThreadPoolExecutor | None = None
        # Each figure's place in `parts` is a token, replaced by its <figure> when written.
        self._drawings: dict[str, _Drawing] = {}
        if self._jobs > 1 and "forkserver" in mp.get_all_start_methods():
            ctx = mp.get_context("forkserver")
            # "__main__": a script's (the `aqmlab` console script's), which each worker would
            # otherwise run again as it starts, loading the command line (≈ 0.3 s) for nothing.
            ctx.set_forkserver_preload(["__main__", __name__, "aqmlab.report._agg", *preload])
            # Started now, so that it has loaded matplotlib by the time the first figure comes.
            multiprocessing.forkserver.ensure_running()
            # A worker per core: this process only waits for them once it has handed every
            # figure over (drawing here would mean loading matplotlib here too).
            self._pool = ProcessPoolExecutor(max_workers=self._jobs, mp_context=ctx)
            self._handoff = ThreadPoolExecutor(max_workers=1)

    def heading(self, text: str) -> None:
        self.parts.append(f"<h2>{html.escape(text)}</h2>")

    def para(self, text: str) -> None:
        self.parts.append(f"<p>{html.escape(text)}</p>")

    def figure(self, fig: Figure | Callable[[], Figure], name: str, caption: str, table: pd.DataFrame | None = None, *, crop: bool = True) -> None:
        """Add a figure: a Figure, or a function that builds one (a module-level function or a
        functools.partial of one, so that it can be pickled), called in a worker process.
        `crop`: save the tight bounding box of everything drawn, outside the canvas too;
        False for a figure laid out to fit its canvas, which then costs one layout pass less."""
        self.n += 1
        stem = f"{self.n:02d}-{name}"
        self.fig_dir.mkdir(parents=True, exist_ok=True)
        png = self.fig_dir / f"{stem}.png"
        to = _Target(str(png), str(png.with_suffix(".svg")) if self.svg else None, crop)
        job = b""
        if self._pool is not None:
            try:
                job = pickle.dumps(fig)
            except Exception:  # noqa: BLE001 - whatever pickle refuses (a lambda, an open file) is drawn here instead
                job = b""
        drawn: Future[Future[bytes]] | bytes
        if job and self._pool is not None and self._handoff is not None:
            if not callable(fig):
                from aqmlab.report._agg import plt

                plt.close(fig)
            drawn = self._handoff.submit(self._pool.submit, _draw_pickled, job, to)
        else:
            drawn = _draw(fig, to)
        token = f"\x00figure {stem}\x00"
        self._drawings[token] = _Drawing(drawn, job, to, stem, caption)
        self.parts.append(token)
        if table is not None and not table.empty:
            self.parts.append(
                "<details><summary>numbers</summary>" + table.to_html(float_format=lambda v: f"{v:.4g}", na_rep="–", border=0, classes="nums") + "</details>"
            )

    def inline_svg(self, fig: Figure, css_class: str) -> None:
        """Embed `fig` as inline SVG in a <div class=css_class>, its text left as text and its
        artists' URLs (Artist.set_urls) as working links."""
        from aqmlab.report._agg import plt

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

    def _finish(self, d: _Drawing) -> bytes:
        """The figure's PNG, once drawn: waits for its worker."""
        if isinstance(d.png, Future):
            try:
                d.png = d.png.result().result()
            except (BrokenProcessPool, OSError, EOFError, RuntimeError):
                # No worker could start, or one died: most often a script without the
                # `if __name__ == "__main__":` guard that multiprocessing needs (its traceback
                # says so), which the forkserver or the worker runs again; drawn here instead.
                d.png = _draw_pickled(d.job, d.to)
        return d.png

    def _figure_html(self, d: _Drawing) -> str:
        png = self._finish(d)
        width, _ = _png_size(png)
        links = f'<a href="{self.fig_dir.name}/{d.stem}.png">PNG</a>'
        if d.to.svg is not None:
            links += f' · <a href="{self.fig_dir.name}/{d.stem}.svg">SVG</a>'
        return (
            f'<figure><img alt="{html.escape(d.caption)}" width="{round(width * _SHOWN_DPI / PNG_DPI)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'
            f"<figcaption>{html.escape(d.caption)} ({links})</figcaption></figure>"
        )

    def render(self) -> str:
        """The page's HTML, once every figure is drawn."""
        try:
            parts = [self._figure_html(self._drawings[p]) if p in self._drawings else p for p in self.parts]
        finally:
            if self._handoff is not None:
                self._handoff.shutdown()
                self._handoff = None
            if self._pool is not None:
                self._pool.shutdown(cancel_futures=True)
                self._pool = None
        style = (
            f"body{{font-family:system-ui,sans-serif;max-width:{self.width_px}px;margin:2em auto;padding:0 1em;color:#222}}"
            "figure{margin:1.2em 0}img,svg{max-width:100%;height:auto}figcaption{font-size:.9em;color:#555}"
            "table.nums{border-collapse:collapse;font-size:.8em}table.nums td,table.nums th{padding:2px 6px;border-bottom:1px solid #ddd;text-align:right}"
            "details{margin-bottom:1.5em}code{background:#f4f4f4;padding:0 3px}"
            "table.findings{border-collapse:collapse;font-size:.85em;margin-bottom:1.5em}table.findings td,table.findings th{padding:4px 6px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}"
        )
        body = "\n".join(parts)
        return f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(self.title)}</title><style>{style}</style></head><body><h1>{html.escape(self.title)}</h1>\n{body}\n</body></html>\n'
