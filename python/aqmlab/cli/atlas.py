"""`aqmlab atlas`: fairness and harm of every CC pair under every AQM over buffer × RTT ratio."""

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from aqmlab.cli.common import err, fail, out
from aqmlab.cli.search import say_cost
from aqmlab.inputs.errors import ScenarioError

if TYPE_CHECKING:
    from aqmlab.sweep.spec import Run


def atlas(
    spec: Annotated[str, typer.Argument(help="Atlas spec TOML, or 'default' for the one shipped with aqmlab")] = "default",
    output: Annotated[Path, typer.Option("-o", "--output", help="Atlas directory (resumes if it exists)")] = Path("out/atlas"),
    quick: Annotated[bool, typer.Option("--quick", help="The spec's \\[quick] form (a laptop's atlas)")] = False,
    jobs: Annotated[int | None, typer.Option("-j", "--jobs", help="Parallel runs (default: every core)", min=1)] = None,
    cluster: Annotated[str | None, typer.Option("--cluster", help="Dask scheduler address")] = None,
    rounds: Annotated[
        int | None, typer.Option("--rounds", help="Refinement rounds (overrides the spec's \\[refine] rounds; a rerun with more extends the atlas)", min=0)
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the estimate (runs, wall time) and stop: nothing run, nothing written")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    """Map Jain's index and harm of every CC pair × AQM over buffer (BDP) × RTT ratio, refined adaptively; writes DIR/atlas.html."""
    from aqmlab.report.atlas import write_atlas_report  # start-up time: matplotlib
    from aqmlab.search.atlas import first_round, load_spec, run_atlas  # start-up time: pandas, pyarrow, the scenario model
    from aqmlab.search.cost import atlas_cost, cluster_workers, local_workers  # start-up time: the estimator loads the engine
    from aqmlab.sweep.interrupt import exit_status, signals_interrupt
    from aqmlab.sweep.runner import start_workers

    with signals_interrupt() as got:
        try:
            try:
                s = load_spec(None if spec == "default" else spec, quick=quick)
                if rounds is not None:
                    s.rounds = rounds
                if cluster is None and not dry_run:
                    start_workers()  # while the first round is planned and estimated, as `sweep` does
                workers = cluster_workers(cluster) if cluster is not None else local_workers(jobs)
            except ScenarioError as e:
                fail(e)

            def on_plan(runs: "list[Run]", cells: int) -> None:
                # A run that cannot fit in memory is refused (ScenarioError) before anything runs.
                say_cost(atlas_cost(s, runs, cells, output, workers=workers, on_cluster=cluster is not None), quiet=quiet, dry_run=dry_run)

            if dry_run:
                # The first round's runs, built as run_atlas builds them, without its directory.
                try:
                    on_plan(*first_round(s))
                except ScenarioError as e:
                    fail(e)
                return
            t0 = time.perf_counter()

            def on_round(rnd: int, cells: int, simulated: int) -> None:
                if not quiet:
                    err.print(
                        f"{s.name}: round {rnd}: {cells} cells evaluated ({simulated} runs simulated so far, {time.perf_counter() - t0:.0f} s)", highlight=False
                    )

            try:
                df = run_atlas(s, output, jobs=jobs, cluster=cluster, on_round=on_round, on_plan=on_plan)
            except ScenarioError as e:
                fail(e)
            except RuntimeError as e:
                fail(e, 1)
            html = write_atlas_report(output)
        except KeyboardInterrupt:
            err.print("interrupted: finished runs are kept; run the same command again to resume")
            raise typer.Exit(exit_status(got)) from None
    if not quiet:
        out.print(f"{s.name}: {len(df)} cells in {time.perf_counter() - t0:.0f} s; atlas: {html.resolve()}", highlight=False, soft_wrap=True)
