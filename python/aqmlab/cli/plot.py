"""`aqmlab plot`: one figure, of a sweep's index (a metric over a swept parameter) or of run
directories over time (throughput, cwnd, smoothed RTT, queueing delay; several runs on the same
axes for comparison)."""

from pathlib import Path
from typing import Annotated

import typer

from aqmlab.cli.common import fail, out

FORMATS = (".png", ".svg", ".pdf")


def plot(
    directories: Annotated[list[Path], typer.Argument(help="One or more run directories, or a sweep directory")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Figure file (.png, .svg or .pdf)")],
    series: Annotated[
        list[str] | None,
        typer.Option(
            "--series", "-s", help="Run directories: throughput, cwnd, srtt or queue; repeat or comma-separate for one panel each (default throughput)"
        ),
    ] = None,
    by: Annotated[str, typer.Option("--by", help="Run directories: a line per flow, or per class (its mean)")] = "flow",
    metric: Annotated[str | None, typer.Option("--metric", "-m", help="Sweep: index column to plot, e.g. rel_throughput, jain, utilization")] = None,
    x: Annotated[str | None, typer.Option("--x", help="Sweep: swept parameter on the x axis")] = None,
    col: Annotated[str | None, typer.Option("--col", help="Sweep: facet columns by this parameter")] = None,
    row: Annotated[str | None, typer.Option("--row", help="Sweep: facet rows by this parameter")] = None,
    hue: Annotated[str, typer.Option("--hue", help="Sweep: one line per value of this column")] = "class",
) -> None:
    """One figure: run directories over time (--series), or a facet grid of a sweep's index (--metric, --x)."""
    from aqmlab.report.run import SERIES, is_run_dir, series_figure

    if output.suffix.lower() not in FORMATS:
        fail(ValueError(f"-o {output}: the figure's format comes from its suffix: {', '.join(FORMATS)}"))
    sweeps = [d for d in directories if (d / "index.parquet").is_file()]
    if sweeps:
        if len(directories) > 1:
            fail(ValueError(f"{sweeps[0]}: a sweep directory is plotted alone (one figure of its index)"))
        if series:
            fail(ValueError("--series is for run directories; a sweep's figure takes --metric and --x"))
        if metric is None or x is None:
            fail(ValueError(f"{directories[0]}: a sweep's figure needs --metric and --x"))
        _sweep(directories[0], metric, x, col, row, hue, output)
        return
    bad = [d for d in directories if not is_run_dir(d)]
    if bad:
        fail(ValueError(f"{bad[0]}: not a run directory (no summary.json and tables) nor a sweep directory (no index.parquet)"))
    for name, v in (("--metric", metric), ("--x", x), ("--col", col), ("--row", row)):
        if v is not None:
            fail(ValueError(f"{name} is for a sweep directory; run directories take --series"))
    names = [s.strip() for item in (series or ["throughput"]) for s in item.split(",") if s.strip()]
    unknown = [s for s in names if s not in SERIES]
    if unknown:
        fail(ValueError(f"--series {unknown[0]!r}: not a series (series: {', '.join(SERIES)})"))
    if by not in ("flow", "class"):
        fail(ValueError(f"--by {by!r}: not flow or class"))
    fig = series_figure(directories, list(dict.fromkeys(names)), by=by)
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=300, bbox_inches="tight")
    out.print(f"figure: {output}", highlight=False)


def _sweep(directory: Path, metric: str, x: str, col: str | None, row: str | None, hue: str, output: Path) -> None:
    from aqmlab.report.study import facet_figure
    from aqmlab.sweep.runner import load

    try:
        df = load(directory)
    except FileNotFoundError as e:
        fail(e)
    for name, v in (("--metric", metric), ("--x", x), ("--col", col), ("--row", row), ("--hue", hue)):
        if v is not None and v not in df.columns:
            fail(ValueError(f"{name} {v!r}: not a column of the index (columns: {', '.join(df.columns)})"))
    fig = facet_figure(df, metric=metric, x=x, col=col, row=row, hue=hue)
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=150, bbox_inches="tight")
    out.print(f"figure: {output}", highlight=False)
