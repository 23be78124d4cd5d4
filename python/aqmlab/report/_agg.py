"""pyplot on the Agg backend, for the functions that draw: imported where a figure is built
(`from aqmlab.report._agg import plt`), not when a report module is, so that a report's own
process need not load matplotlib (≈ 0.5 s) when its figures are drawn by worker processes,
which load it once, in the forkserver they are forked from (`report.page.Page`)."""

from __future__ import annotations

from typing import IO, Any

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from PIL import Image, PngImagePlugin  # noqa: E402

__all__ = ["OpaquePngCanvas", "plt"]

#: zlib's level for the report's PNGs: as small as matplotlib's (level 6) once the alpha
#: channel is gone, in half the time.
PNG_COMPRESS_LEVEL = 3


class OpaquePngCanvas(FigureCanvasAgg):
    """An Agg canvas whose PNG of an opaque drawing (every figure of a report: white behind
    everything) is RGB, not RGBA: the same pixels, a quarter less to compress. Otherwise as
    matplotlib's own (its Software text and the resolution are written too)."""

    def print_png(
        self, filename_or_obj: str | IO[bytes], *, metadata: dict[str, Any] | None = None, pil_kwargs: dict[str, Any] | None = None, **_ignored: Any
    ) -> None:
        # `_ignored`: what savefig passes every canvas (dpi, facecolor, orientation, …) and
        # Agg's own print_png is spared, being matplotlib's; its figure holds them already.
        FigureCanvasAgg.draw(self)
        rgba = np.asarray(self.buffer_rgba())
        image = Image.frombuffer("RGBA", (rgba.shape[1], rgba.shape[0]), rgba, "raw", "RGBA", 0, 1)
        if rgba[..., 3].min() == 255:
            image = image.convert("RGB")
        info = PngImagePlugin.PngInfo()
        for key, value in {"Software": f"Matplotlib version{matplotlib.__version__}, https://matplotlib.org/", **(metadata or {})}.items():
            if value is not None:
                info.add_text(key, value)
        dpi = self.figure.dpi
        image.save(filename_or_obj, format="png", dpi=(dpi, dpi), pnginfo=info, compress_level=PNG_COMPRESS_LEVEL, **(pil_kwargs or {}))
