"""`aqmlab compare`: one scenario on the simulator and the emulator, the metrics side by side."""

import json
import os
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from aqmlab.cli.common import err, fail, out
from aqmlab.cli.emulate import load_or_fail, run_emulator
from aqmlab.inputs.errors import ScenarioError


def compare(
    file: Annotated[Path, typer.Argument(help="Scenario TOML file")],
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Directory for both runs (sim/, emu/), compare.json and report.html")] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace existing results")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON")] = False,
) -> None:
    """Run a scenario on the simulator and on the emulator; print the metrics side by side."""
    from aqmlab.analysis.compare import compare_rows
    from aqmlab.emu.emulate import preflight  # start-up time: the emulator loads pyarrow and the scenario model
    from aqmlab.simulate.run import run as run_sim  # start-up time: as above

    s = load_or_fail(file)
    try:
        preflight(s)  # refuse before spending the simulation
    except ScenarioError as e:
        fail(e)
    if output is not None:
        for sub in ("sim", "emu"):
            t = output / sub
            if t.exists() and any(t.iterdir()) and not overwrite:
                fail(ScenarioError(f"{t} exists and is not empty (pass --overwrite to replace it)"))
    show = not quiet and not as_json and err.is_terminal
    if show:
        # start-up time: the bar is drawn on a terminal only
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.percentage:>5.1f}%"), TimeElapsedColumn(), console=err, transient=True
        ) as bar:
            task = bar.add_task(f"{s.name} (simulator)", total=1.0)
            sim = run_sim(s, progress=lambda f: bar.update(task, completed=f))
    else:
        sim = run_sim(s)
    if output is not None:
        sim.save(output / "sim", overwrite=overwrite)
    emu = run_emulator(s, output / "emu" if output is not None else None, overwrite, show)
    rows = compare_rows(sim.summary, emu.summary)
    report: Path | None = None
    if output is not None:
        from aqmlab.report.compare import write_compare_report  # start-up time: matplotlib
        from aqmlab.store.atomic import write_text

        write_text(output / "compare.json", json.dumps(rows, indent=1) + "\n")
        report = write_compare_report(output, output / "report.html")
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title=f"{s.name}: simulator vs emulator (real Linux {os.uname().release} TCP)", title_justify="left")
    for col in ("metric", "sim", "emu", "emu − sim"):
        table.add_column(col, justify="left" if col == "metric" else "right")

    def fmt(x: float | None, f: str, diff: bool = False) -> str:
        if x is None:
            return "–"
        if f == "pct":
            return f"{100 * x:+.2f} pp" if diff else f"{100 * x:.2f}%"
        return f"{x:+.3f}" if diff else f"{x:.3f}"

    for r in rows:
        table.add_row(r["metric"], fmt(r["sim"], r["format"]), fmt(r["emu"], r["format"]), fmt(r["diff"], r["format"], True))
    out.print(table)
    if output is not None and report is not None:
        out.print(f"results: {output / 'sim'}, {output / 'emu'}, {output / 'compare.json'}", highlight=False, soft_wrap=True)
        out.print(f"report: {report.resolve()}", highlight=False, soft_wrap=True)
