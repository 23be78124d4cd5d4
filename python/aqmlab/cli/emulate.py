"""`aqmlab emulate`: a scenario on the emulator backend (docs/emulator.md)."""

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from aqmlab.cli.common import err, fail, out
from aqmlab.cli.run import print_summary, write_page
from aqmlab.inputs.errors import ScenarioError

if TYPE_CHECKING:
    from aqmlab.scenario import Scenario

#: Router lateness (`counters.late_p50_ns`) above which a run is flagged: a router that has
#: its core writes packets tens of µs after they are due (bench/README.md §Emulator;
#: docs/emulator.md, "What differs from the simulator"); beyond 100 µs it was kept from its
#: core and every path came out longer than its RTT. The value is ours.
LATE_P50_WARN_NS = 100_000


def load_or_fail(path: Path) -> "Scenario":
    from aqmlab.scenario import load_scenario  # start-up time: the scenario model loads pydantic and the engine

    try:
        return load_scenario(path)
    except ScenarioError as e:
        fail(e)
        raise


def run_emulator(s: "Scenario", target: Path | None, overwrite: bool, show: bool, keep_work: bool = False) -> Any:
    from aqmlab.emu.emulate import emulate

    try:
        if show:
            # start-up time: the bar is drawn on a terminal only
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            with Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.percentage:>5.1f}% of the run"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=err,
                transient=True,
            ) as bar:
                task = bar.add_task(f"{s.name} (emulator)", total=1.0)
                return emulate(s, target, progress=lambda f: bar.update(task, completed=f), overwrite=overwrite, keep_work=keep_work)
        return emulate(s, target, overwrite=overwrite, keep_work=keep_work)
    except ScenarioError as e:  # EmulatorError included
        fail(e)
    except KeyboardInterrupt:
        err.print("interrupted: testbed removed, nothing written")
        raise typer.Exit(130) from None


def emulate_cmd(
    file: Annotated[Path | None, typer.Argument(help="Scenario TOML file")] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Results directory (default runs/<name>-<hash>-emu)")] = None,
    cleanup: Annotated[
        bool, typer.Option("--cleanup", help="Remove stale testbeds (namespaces aq*-<tag>, their processes) left by a killed run, then exit")
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="With --cleanup: also remove testbeds whose run is still alive")] = False,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing results directory")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar, no summary")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON")] = False,
    keep_work: Annotated[bool, typer.Option("--keep-work", help="Keep the work directory (router.json, logs, raw outputs) in /tmp")] = False,
    report: Annotated[bool, typer.Option("--report/--no-report", help="Also write DIR/report.html: the run over time (figures in DIR/report-figures/)")] = True,
) -> None:
    """Run a scenario with real Linux TCP through the userspace AQM router (root; see docs/emulator.md)."""
    from aqmlab.emu.emulate import EmulatorError, is_root
    from aqmlab.emu.emulate import cleanup as do_cleanup

    if cleanup:
        if file is not None:
            fail(ScenarioError("--cleanup takes no scenario"))
        if not is_root():
            fail(EmulatorError("--cleanup needs root (it removes network namespaces)"))
        removed = do_cleanup(force=force, log=lambda m: err.print(m, highlight=False))
        out.print(f"removed {len(removed)} stale testbed(s)", highlight=False)
        return
    if file is None:
        fail(ScenarioError("give a scenario file (or --cleanup)"))
        return
    s = load_or_fail(file)
    target = output or Path("runs") / f"{s.name}-{s.hash()}-emu"
    if target.exists() and (not target.is_dir() or any(target.iterdir())) and not overwrite:
        fail(ScenarioError(f"{target} exists and is not empty (pass --overwrite to replace it)"))
    show = not quiet and not as_json and err.is_terminal
    res = run_emulator(s, target, overwrite, show, keep_work)
    if as_json:
        print(json.dumps(res.summary, indent=2))
    elif not quiet:
        print_summary(res.summary)
        c = res.summary["counters"]
        if c.get("sched_fifo") is False:
            err.print(
                "[yellow]the router could not run under SCHED_FIFO (see its stderr): expect late packets on a busy machine (counters.late_p99_ns)[/]",
                highlight=False,
            )
        late = c.get("late_p50_ns")
        if late is not None and late > LATE_P50_WARN_NS:
            err.print(
                f"[yellow]the router wrote packets {late / 1000:.0f} µs after they were due (median): every path was at least that much "
                'longer than its RTT (its CPU was taken by other work or the hypervisor, or woke from idle slowly; docs/emulator.md, "What differs from the simulator")[/]',
                highlight=False,
                soft_wrap=True,
            )
        unstamped_ipv4 = c.get("unstamped", 0) - c.get("non_ipv4", 0)
        if unstamped_ipv4 > 0:
            err.print(
                f"[yellow]{unstamped_ipv4} IPv4 packets had no arrival stamp from the router's packet ring and entered the queue when read, "
                'not when they reached the router (counters.unstamped; crates/router/README.md, "Timing")[/]',
                highlight=False,
                soft_wrap=True,
            )
        if c.get("flow_errors"):
            err.print(f"[yellow]flow errors: {escape('; '.join(c['flow_errors']))}[/]", highlight=False)
        out.print(f"results: {target}  (wall time {res.summary['wall_time_s']:.2f} s)", highlight=False, soft_wrap=True)
    if report:
        write_page(target, say=not quiet and not as_json)
