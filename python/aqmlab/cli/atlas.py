"""`aqmlab atlas`: fairness and harm of every CC pair under every AQM over buffer × RTT ratio."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from aqmlab.cli.common import err, fail, out
from aqmlab.inputs.errors import ScenarioError


def atlas(
    spec: Annotated[str, typer.Argument(help="Atlas spec TOML, or 'default' for the one shipped with aqmlab")] = "default",
    output: Annotated[Path, typer.Option("-o", "--output", help="Atlas directory (resumes if it exists)")] = Path("out/atlas"),
    quick: Annotated[bool, typer.Option("--quick", help="The spec's \\[quick] form (a laptop's atlas)")] = False,
    jobs: Annotated[int | None, typer.Option("-j", "--jobs", help="Parallel runs (default: every core)", min=1)] = None,
    cluster: Annotated[str | None, typer.Option("--cluster", help="Dask scheduler address")] = None,
    rounds: Annotated[
        int | None, typer.Option("--rounds", help="Refinement rounds (overrides the spec's \\[refine] rounds; a rerun with more extends the atlas)", min=0)
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    """Map Jain's index and harm of every CC pair × AQM over buffer (BDP) × RTT ratio, refined adaptively; writes DIR/atlas.html."""
    from aqmlab.report.atlas import write_atlas_report  # start-up time: matplotlib
    from aqmlab.search.atlas import load_spec, run_atlas  # start-up time: pandas, pyarrow, the scenario model

    try:
        s = load_spec(None if spec == "default" else spec, quick=quick)
        if rounds is not None:
            s.rounds = rounds
    except ScenarioError as e:
        fail(e)
        raise
    t0 = time.perf_counter()

    def on_round(rnd: int, cells: int, simulated: int) -> None:
        if not quiet:
            err.print(f"{s.name}: round {rnd}: {cells} cells evaluated ({simulated} runs simulated so far, {time.perf_counter() - t0:.0f} s)", highlight=False)

    try:
        df = run_atlas(s, output, jobs=jobs, cluster=cluster, on_round=on_round)
    except ScenarioError as e:
        fail(e)
        raise
    except RuntimeError as e:
        fail(e, 1)
        raise
    except KeyboardInterrupt:
        err.print("interrupted: finished runs are kept; run the same command again to resume")
        raise typer.Exit(130) from None
    html = write_atlas_report(output)
    if not quiet:
        out.print(f"{s.name}: {len(df)} cells in {time.perf_counter() - t0:.0f} s; atlas: {html.resolve()}", highlight=False, soft_wrap=True)
