"""`aqmlab search`: the worst case of a scenario space, shrunk, checked on other seeds, and
(with --replay-emu) replayed on the emulator."""

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from aqmlab.cli.common import err, fail, out
from aqmlab.inputs.errors import ScenarioError

if TYPE_CHECKING:
    # Imported where used: the search pulls in optuna, which `aqmlab --help` need not load.
    from aqmlab.search.cost import Cost
    from aqmlab.search.runner import Evaluator
    from aqmlab.search.spec import Search


def search(
    file: Annotated[Path, typer.Argument(help="Scenario TOML with ${var} placeholders and a \\[search] table")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Search directory (resumes if it holds this search)")],
    budget: Annotated[int | None, typer.Option("--budget", help="Points to evaluate (overrides \\[search] budget)")] = None,
    jobs: Annotated[int | None, typer.Option("-j", "--jobs", help="Parallel runs (default: every core)", min=1)] = None,
    cluster: Annotated[str | None, typer.Option("--cluster", help="Dask scheduler address, e.g. tcp://host:8786")] = None,
    no_shrink: Annotated[bool, typer.Option("--no-shrink", help="Stop after the search: no shrinking, no seed check")] = False,
    replay_emu: Annotated[bool, typer.Option("--replay-emu", help="Re-run the shrunk worst case on the emulator (root, kernel CCs)")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the estimate (runs, wall time) and stop: nothing run, nothing written")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    """Search a scenario space for its worst case; writes DIR/trials.parquet, best.toml, shrunk.toml, report.html."""
    from aqmlab.search.cost import cluster_workers, local_workers, search_cost  # start-up time: the estimator loads the engine
    from aqmlab.search.runner import Evaluator, SearchError, load_search  # start-up time: optuna, pandas, the scenario model
    from aqmlab.store.lock import hold
    from aqmlab.sweep.interrupt import exit_status, signals_interrupt
    from aqmlab.sweep.runner import start_workers

    with signals_interrupt() as got:
        try:
            try:
                s = load_search(file)
                if budget is not None:
                    if budget < 1:
                        raise SearchError(f"{budget}: the budget is a number of points, at least 1", key="--budget")
                    s.budget = budget
                if replay_emu:
                    _emu_preflight(s)
                if cluster is None and not dry_run:
                    start_workers()  # while the search is estimated, as `sweep` does while planning
                workers = cluster_workers(cluster) if cluster is not None else local_workers(jobs)
                cost = search_cost(s, output, workers=workers, on_cluster=cluster is not None, shrink=not no_shrink)
            except ScenarioError as e:
                fail(e)
            say_cost(cost, quiet=quiet, dry_run=dry_run)
            if dry_run:
                return
            show = not quiet and err.is_terminal
            t0 = time.perf_counter()
            # The lock spans the workers' stopping too: nothing else writes here until they are gone.
            with hold(output), Evaluator(s, output, jobs=jobs, cluster=cluster) as ev:
                _search_and_shrink(s, output, ev, quiet, show, t0, no_shrink, replay_emu)
        except KeyboardInterrupt:
            err.print("interrupted: evaluated points are kept; run the same command again to resume")
            raise typer.Exit(exit_status(got)) from None


def say_cost(cost: "Cost", *, quiet: bool, dry_run: bool) -> None:
    """The estimate before a search or an atlas starts (on stdout for --dry-run, whose answer it
    is; else on stderr, beside the progress), and its warning, once, whatever --quiet says."""
    if dry_run:
        out.print(cost.line(), highlight=False, soft_wrap=True, markup=False)
    elif not quiet:
        err.print(cost.line(), highlight=False, soft_wrap=True, markup=False)
    warning = cost.warning()
    if warning:
        err.print(warning, highlight=False, soft_wrap=True, markup=False)


def _search_and_shrink(s: "Search", output: Path, ev: "Evaluator", quiet: bool, show: bool, t0: float, no_shrink: bool, replay_emu: bool) -> None:
    from aqmlab.report.search import write_search_report  # start-up time: matplotlib
    from aqmlab.search.runner import run_search, shrink  # start-up time: as in `search`

    try:
        if show:
            # start-up time: the bar is drawn on a terminal only
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            with Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("points"), TimeElapsedColumn(), console=err
            ) as bar:
                task = bar.add_task(s.name, total=s.budget)
                res = run_search(s, output, evaluator=ev, on_points=lambda n, total: bar.update(task, completed=n, total=total))
        else:
            last = [0.0]

            def on_points(n: int, total: int) -> None:
                now = time.monotonic()
                if not quiet and (now - last[0] > 10 or n == total):
                    last[0] = now
                    err.print(f"{s.name}: {n}/{total} points", highlight=False)

            res = run_search(s, output, evaluator=ev, on_points=on_points)
    except ScenarioError as e:
        fail(e)
        raise
    except RuntimeError as e:
        fail(e, 1)
        raise
    b = res.best
    where = ", ".join(f"{k} = {v:.4g}" if isinstance(v, float) else f"{k} = {v}" for k, v in b.params.items())
    if not quiet:
        out.print(
            f"{s.name}: {len(res.points)} points, {res.simulated} runs simulated ({time.perf_counter() - t0:.1f} s); worst {s.objective} = {b.value:.4g} at {where}",
            highlight=False,
            soft_wrap=True,
        )
        out.print(f"worst point: {output / 'best.toml'}", highlight=False)
    shrunk = None
    if not no_shrink:
        try:
            shrunk = shrink(s, output, b, evaluator=ev, on_step=None if quiet else (lambda m: err.print(f"shrink: {m}", highlight=False)))
        except RuntimeError as e:
            fail(e, 1)
        assert shrunk is not None
        c = shrunk["check"]
        if not quiet:
            out.print(
                f"shrunk: {shrunk['shrunk']['value']:.4g} (tolerance {s.tolerance:g} of {b.value:.4g}); on seeds {c['seeds']}: mean {c['mean']:.4g} — {'holds' if c['holds'] else 'does NOT hold'}; {output / 'shrunk.toml'}",
                highlight=False,
                soft_wrap=True,
            )
    emu = None
    if replay_emu:
        emu = _replay(s, output, shrunk)
        if not quiet:
            out.print(f"emulator: {s.objective} = {emu['emu_value']:.4g} (simulator {emu['sim_value']:.4g}); {output / 'emu'}", highlight=False)
    html = write_search_report(s, output)
    if not quiet:
        out.print(f"report: {html.resolve()}", highlight=False, soft_wrap=True)


def _emu_preflight(s: "Search") -> None:
    """Refuse --replay-emu before anything runs when the emulator cannot run the scenario."""
    from aqmlab.emu.emulate import preflight  # start-up time: the emulator loads pyarrow and the scenario model

    sc = s.scenario({v.name: v.mid() for v in s.space}, s.seeds[0])
    if s.objective.metric == "harm":
        raise ScenarioError(
            "--replay-emu with a harm objective would need the solo baselines on the emulator too; replay best.toml with `aqmlab harm` and `aqmlab emulate` by hand",
            key="--replay-emu",
        )
    try:
        preflight(sc)
    except ScenarioError as e:
        raise ScenarioError(f"cannot replay on the emulator: {e.detail}", key="--replay-emu") from None


def _replay(s: "Search", output: Path, shrunk: dict[str, Any] | None) -> dict[str, Any]:
    """Run the shrunk case (else the worst point) on the emulator with the search's first seed."""
    from aqmlab.emu.emulate import emulate  # start-up time: as in _emu_preflight
    from aqmlab.store.atomic import write_text

    params = shrunk["shrunk"]["params"] if shrunk else None
    patch = shrunk["shrunk"]["patch"] if shrunk else {}
    if params is None:
        from aqmlab.store.result import read_table  # start-up time: pyarrow

        df = read_table(output / "trials.parquet").to_pandas()
        row = df.loc[df["objective"].idxmin() if s.objective.sense == "min" else df["objective"].idxmax()]
        params = {v.name: (row[v.name].item() if hasattr(row[v.name], "item") else row[v.name]) for v in s.space}
    sc = s.scenario(params, s.seeds[0], patch)
    sim = json.loads((output / "runs" / sc.hash() / "summary.json").read_text())
    try:
        res = emulate(sc, output / "emu", overwrite=True)
    except ScenarioError as e:
        fail(ScenarioError(f"cannot replay on the emulator: {e.detail}", key="--replay-emu"))
        raise
    doc = {"scenario": sc.hash(), "objective": str(s.objective), "sim_value": s.objective.value(sim, None), "emu_value": s.objective.value(res.summary, None)}
    write_text(output / "emu.json", json.dumps(doc, indent=1) + "\n")
    return doc
