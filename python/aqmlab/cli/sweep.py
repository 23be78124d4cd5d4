"""`aqmlab sweep` and `aqmlab reproduce` (`aqmlab report` and `aqmlab plot` are in report.py and plot.py)."""

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from aqmlab.cli.common import err, fail, out
from aqmlab.inputs.errors import ScenarioError
from aqmlab.studies import study_path

if TYPE_CHECKING:
    from aqmlab.sweep.runner import SweepResult
    from aqmlab.sweep.spec import Run, Sweep


def _execute(sw: "Sweep", output: Path, jobs: int | None, cluster: str | None, dry_run: bool, quiet: bool) -> "SweepResult | None":
    from aqmlab.sweep.runner import plan, run_sweep, start_workers  # start-up time: the runner loads pandas and pyarrow

    if not dry_run and cluster is None:
        start_workers()  # while the runs are planned and estimated
    try:
        runs = plan(sw)
    except ScenarioError as e:
        fail(e)
        raise
    if dry_run:
        t = Table(title=f"{sw.name}: {len(runs)} runs", title_justify="left")
        for a in sw.axis_names:
            t.add_column(a)
        t.add_column("hash")
        for r in runs:
            t.add_row(*[str(r.params[a]) for a in sw.axis_names], r.hash)
        out.print(t)
        return None
    _check_estimates(sw, runs)
    show = not quiet and err.is_terminal
    try:
        if show:
            # start-up time: the bar is drawn on a terminal only
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            with Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[failed]} failed"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=err,
                transient=False,
            ) as bar:
                task = bar.add_task(sw.name, total=None, failed=0)

                def on_progress(done: int, failed: int, todo: int, total: int) -> None:
                    bar.update(task, completed=done + failed, total=todo, failed=failed)

                res = run_sweep(sw, output, jobs=jobs, cluster=cluster, on_progress=on_progress, runs=runs)
        else:
            last = [0.0]

            def on_progress(done: int, failed: int, todo: int, total: int) -> None:
                now = time.monotonic()
                if not quiet and (now - last[0] > 10 or done + failed == todo):
                    last[0] = now
                    err.print(f"{sw.name}: {done + failed}/{todo} runs ({failed} failed)", highlight=False)

            res = run_sweep(sw, output, jobs=jobs, cluster=cluster, on_progress=on_progress, runs=runs)
    except ScenarioError as e:
        fail(e)
        raise
    if not quiet:
        out.print(
            f"{sw.name}: {res.total} runs — {res.ran} ran, {res.skipped} already done, {len(res.failed)} failed ({res.wall_s:.1f} s); index: {output / 'index.parquet'}",
            highlight=False,
            soft_wrap=True,
        )
        per_run = res.overhead_per_run_s
        if per_run is not None:
            out.print(
                f"time: {res.startup_s:.1f} s to plan and start {res.workers} worker{'s' if res.workers > 1 else ''}, then {res.sim_s:.1f} s of simulation "
                f"and {1000 * per_run:.0f} ms per run beyond it (hand-off, tables, atomic writes, index)",
                highlight=False,
                soft_wrap=True,
            )
    for h, msg in res.failed:
        err.print(f"[red]run {h} failed:[/] {msg}", highlight=False, soft_wrap=True)
    if res.failed:
        raise typer.Exit(1)
    return res


@contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """SIGINT (Ctrl-C) and SIGTERM end the block at once: the local workers are ended, not
    after the runs already handed to them, the runs they were writing removed (`run_sweep`);
    then one line, and exit status 130 or 143. The runs stored stay: the same command resumes."""
    from aqmlab.sweep.interrupt import exit_status, signals_interrupt

    with signals_interrupt() as got:
        try:
            yield
        except KeyboardInterrupt:
            err.print("interrupted: finished runs are kept; run the same command again to resume")
            raise typer.Exit(exit_status(got)) from None


def _check_estimates(sw: "Sweep", runs: "list[Run]") -> None:
    """Refuse a sweep any of whose runs cannot fit in memory; say, in one line, when runs are
    expected to take over an hour each."""
    from aqmlab.simulate.estimate import LONG_RUN_S, check_fits, estimate  # start-up time: loads the engine

    ests = {r.hash: (r, estimate(r.scenario)) for r in runs}
    try:
        for r, e in ests.values():
            params = ", ".join(f"{k}={v}" for k, v in r.params.items())
            check_fits(e, file=str(sw.file) if sw.file else None, what=f"run {r.hash} ({params})")
    except ScenarioError as e:
        fail(e)
    long = [e for _, e in ests.values() if e.wall_s > LONG_RUN_S]
    if long:
        worst = max(long, key=lambda e: e.wall_s)
        total = sum(e.wall_s for _, e in ests.values())
        err.print(
            f"warning: {len(long)} of {len(ests)} runs are expected to take over an hour each on one core "
            f"(the longest: {worst.line()}); the sweep: {total / 3600:.3g} core-hours",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )


def sweep(
    file: Annotated[Path, typer.Argument(help="Sweep TOML file (a scenario plus [sweep])")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Sweep directory (resumes if it exists)")],
    jobs: Annotated[int | None, typer.Option("-j", "--jobs", help="Parallel runs (default: every core)", min=1)] = None,
    quick: Annotated[bool, typer.Option("--quick", help="Use the file's [quick] form")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List the runs, run nothing")] = False,
    cluster: Annotated[str | None, typer.Option("--cluster", help="Dask scheduler address, e.g. tcp://host:8786")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    """Run every point of a sweep; resumable; writes DIR/index.parquet."""
    from aqmlab.sweep.spec import load_sweep  # start-up time: sweep files load pydantic and the scenario model

    with _stopped_by_signals():
        try:
            sw = load_sweep(file, quick=quick)
        except ScenarioError as e:
            fail(e)
            raise
        _execute(sw, output, jobs, cluster, dry_run, quiet)


def reproduce(
    study: Annotated[str, typer.Argument(help="Study name (see `aqmlab list studies`)")],
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Sweep directory (default out/STUDY[-quick])")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="The short form: fewer points, shorter runs")] = False,
    jobs: Annotated[int | None, typer.Option("-j", "--jobs", min=1)] = None,
    cluster: Annotated[str | None, typer.Option("--cluster", help="Dask scheduler address")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
    svg: Annotated[bool, typer.Option("--svg", help="Also save each figure of the report as SVG (beside its PNG)")] = False,
) -> None:
    """Run a seed study's sweep and write its report (DIR/report.html)."""
    from aqmlab.sweep.spec import load_sweep  # start-up time: as in `sweep`

    # The sweep stops on SIGINT and SIGTERM as `sweep` does; the report after it as before.
    with _stopped_by_signals():
        try:
            path = study_path(study)
            sw = load_sweep(path, quick=quick)
        except (ScenarioError, KeyError) as e:
            fail(e if isinstance(e, ScenarioError) else ValueError(e.args[0]))
            raise
        target = output or Path("out") / (study + ("-quick" if quick else ""))
        res = _execute(sw, target, jobs, cluster, dry_run, quiet)
    if res is None:
        return
    from aqmlab.report.study import write_report  # start-up time: reports load matplotlib and pandas
    from aqmlab.studies.findings import evaluate_all  # start-up time: as above

    verdicts = evaluate_all(target, study)
    html = write_report(target, target / "report.html", study=study, svg=svg, verdicts=verdicts)
    if not quiet:
        t = Table(title=f"{study}: the paper's findings beside this sweep (report.html has the details)", title_justify="left")
        for col in ("finding", "aqmlab measures", "verdict"):
            t.add_column(col)
        for v in verdicts:
            t.add_row(v.finding.id, v.measured, v.verdict + (f": {v.reason}" if v.reason else ""))
        out.print(t)
    out.print(f"report: {html.resolve()}", highlight=False, soft_wrap=True)
