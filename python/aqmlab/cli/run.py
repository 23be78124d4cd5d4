"""`aqmlab run` and `aqmlab validate`."""

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from aqmlab.cli.common import err, fail, out
from aqmlab.inputs.errors import ScenarioError

if TYPE_CHECKING:
    from aqmlab.scenario import Scenario


def _load(path: Path) -> "Scenario":
    from aqmlab.scenario import load_scenario  # start-up time: the scenario model loads pydantic and the engine

    try:
        return load_scenario(path)
    except ScenarioError as e:
        fail(e)
        raise  # unreachable


def validate(file: Annotated[Path, typer.Argument(help="Scenario TOML file")]) -> None:
    """Check a scenario file without running it."""
    from aqmlab.scenario import cc_label
    from aqmlab.simulate.estimate import estimate  # start-up time: as in _load

    s = _load(file)
    flows = ", ".join(f"{f.count}×{cc_label(f.cc)} {f.rtt}" for f in s.flows)
    out.print(
        f"ok: {s.name}: {s.bottleneck.rate}, buffer {s.bottleneck.buffer}, aqm {s.bottleneck.aqm.kind}; {flows}; {s.duration} (hash {s.hash()})",
        highlight=False,
    )
    out.print(estimate(s).line(), highlight=False, soft_wrap=True)


def _pct(x: Any) -> str:
    return "–" if x is None else f"{100 * x:.2f}%"


def _num(x: Any, fmt: str = ".3f") -> str:
    return "–" if x is None else format(x, fmt)


def print_summary(summary: dict[str, Any]) -> None:
    from rich.table import Table  # start-up time: `run -q` prints no table

    m = summary["metrics"]
    t = Table(title=f"{summary['scenario']['name']} — per class", title_justify="left")
    for col in ("class", "flows", "goodput", "rel. throughput", "Jain", "mark ratio", "drop ratio"):
        t.add_column(col, justify="left" if col == "class" else "right")
    for c in summary["classes"]:
        t.add_row(
            c["name"],
            str(c["count"]),
            f"{c['goodput_bps'] / 1e6:.1f} Mbps",
            _num(c["rel_throughput"]),
            _num(c["jain"]),
            _pct(c["mark_ratio"]),
            _pct(c["drop_ratio"]),
        )
    out.print(t)
    s = m["sojourn_ms"]
    out.print(
        f"utilization {_pct(m['utilization'])}   Jain {_num(m['jain'])}   goodput {m['goodput_bps'] / 1e6:.1f} Mbps   "
        f"mark {_pct(m['mark_ratio'])}   drop {_pct(m['drop_ratio'])}",
        highlight=False,
        soft_wrap=True,
    )
    out.print(
        f"queueing delay (ms): mean {_num(s['mean'])}  p50 {_num(s['p50'])}  p99 {_num(s['p99'])}  max {_num(s['max'])}"
        + (f"   mean/target {_num(m['sojourn_mean_rel_target'], '.2f')}" if m.get("sojourn_mean_rel_target") is not None else ""),
        highlight=False,
        soft_wrap=True,
    )
    unfinished = summary.get("counters", {}).get("unfinished_flows", 0)
    if unfinished:
        out.print(f"[yellow]{unfinished} finite flow(s) did not complete within the run[/]")


def run(
    file: Annotated[Path, typer.Argument(help="Scenario TOML file")],
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Results directory (default runs/<name>-<hash>)")] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing results directory")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar, no summary")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON")] = False,
    report: Annotated[bool, typer.Option("--report/--no-report", help="Also write DIR/report.html: the run over time (figures in DIR/report-figures/)")] = True,
) -> None:
    """Run a scenario, write its results store and its HTML page, print a summary."""
    from aqmlab.simulate.estimate import LONG_RUN_S, check_fits, estimate  # start-up time: as in _load
    from aqmlab.simulate.run import run as run_scenario  # start-up time: a run's tables load pyarrow

    s = _load(file)
    target = output or Path("runs") / f"{s.name}-{s.hash()}"
    if target.exists() and any(target.iterdir()) and not overwrite:
        fail(ScenarioError(f"{target} exists and is not empty (pass --overwrite to replace it)"))
    est = estimate(s)
    try:
        check_fits(est, file=str(file))
    except ScenarioError as e:
        fail(e)
    if est.wall_s > LONG_RUN_S:
        err.print(f"warning: {file}: this run is expected to take a long time ({est.line()})", highlight=False, soft_wrap=True, markup=False)
    show = not quiet and not as_json and sys.stderr.isatty()
    try:
        if show:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn  # start-up time: shown on a terminal only

            with Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.percentage:>5.1f}% of simulated time"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=err,
                transient=True,
            ) as bar:
                task = bar.add_task(s.name, total=1.0)
                res = run_scenario(s, progress=lambda f: bar.update(task, completed=f))
        else:
            res = run_scenario(s)
    except KeyboardInterrupt:
        err.print("interrupted: nothing written")
        raise typer.Exit(130) from None
    except MemoryError as e:
        fail(ScenarioError(f"out of memory during the run ({e}); nothing written ({est.line()})", file=str(file)))
    except ValueError as e:
        # What the engine refuses only while running: a plugin's trap or runaway call (the
        # message names the module, the function and the simulated time).
        fail(ScenarioError(f"{e}; nothing written", file=str(file)), code=1)
    res.save(target, overwrite=overwrite)
    if as_json:
        print(json.dumps(res.summary, indent=2))
    elif not quiet:
        print_summary(res.summary)
        out.print(f"results: {target}  (wall time {res.summary['wall_time_s']:.2f} s)", highlight=False, soft_wrap=True)
    if report:
        write_page(target, say=not quiet and not as_json)


def write_page(target: Path, say: bool) -> None:
    """DIR/report.html of a run just saved: drawn after the summary is out, so that a run's
    numbers are never held up by its figures."""
    from aqmlab.report.run import write_run_report  # start-up time: matplotlib

    page = write_run_report(target)
    if say:
        out.print(f"report: {page.resolve()}", highlight=False, soft_wrap=True)
