"""`aqmlab fidelity`: the simulator against the emulator on a fixed set of cases (docs/fidelity.md)."""

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from aqmlab.cli.common import err, fail, out
from aqmlab.inputs.errors import ScenarioError


def fidelity(
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Suite directory (resumes if it exists; default out/fidelity[-quick])")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="The short subset (cases marked quick: a few seconds each)")] = False,
    cases: Annotated[
        str | None,
        typer.Option(
            "--cases",
            help="Comma-separated case names (see --list), or scenario files of yours (FILE.toml: your own CC or discipline, scored with the same bands)",
        ),
    ] = None,
    emu_runs: Annotated[
        int | None, typer.Option("--emu-runs", min=1, help="Emulator runs per case (their mean is scored)", show_default="the suite's EMU_RUNS, 3")
    ] = None,
    lock: Annotated[
        Path | None, typer.Option("--lock", help="Hold an exclusive flock on this file during each emulator run (a machine shared with other emulator users)")
    ] = None,
    sim_stall: Annotated[
        str,
        typer.Option(
            "--sim-stall",
            help="The simulator's host stalls: 'measured' (as the emulator's traffic core stalled in the case's runs), 'none', or a length (with --sim-stall-every)",
        ),
    ] = "measured",
    sim_stall_every: Annotated[str | None, typer.Option("--sim-stall-every", help="With a --sim-stall length: the mean interval between those stalls")] = None,
    list_cases: Annotated[bool, typer.Option("--list", help="List the cases and exit")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    """Run the fidelity suite: each case on the simulator and the emulator (root), every metric scored against its band."""
    from aqmlab.emu.emulate import is_root  # start-up time: the emulator and the suite load pydantic, pandas and pyarrow
    from aqmlab.fidelity import suite as F  # start-up time: as above

    if emu_runs is None:
        emu_runs = F.EMU_RUNS

    try:
        allc = F.load_manifest()
        chosen = F.select(allc, [c.strip() for c in cases.split(",") if c.strip()] if cases else None, quick)
        sim_stalls: F.SimStalls = sim_stall
        if sim_stall in ("measured", "none"):
            if sim_stall_every is not None:
                raise ScenarioError(f"--sim-stall-every goes with a --sim-stall length, not with --sim-stall {sim_stall}")
        else:
            sim_stalls = {"stall": sim_stall, **({"stall_every": sim_stall_every} if sim_stall_every is not None else {})}
            allc[0].sim_seeded(0, sim_stalls)  # refused here, with the key, if malformed
    except ScenarioError as e:
        fail(e)
        return
    if list_cases:
        t = Table(title="fidelity cases", title_justify="left")
        for col in ("case", "quick", "what"):
            t.add_column(col)
        for c in allc:
            t.add_row(c.name, "yes" if c.quick else "", c.what)
        out.print(t)
        return
    if not is_root():
        fail(ScenarioError("the fidelity suite runs every case on the emulator, which needs root (network namespaces, veth and TUN devices); run it as root"))
    target = output or Path("out") / ("fidelity-quick" if quick else "fidelity")
    show = not quiet and err.is_terminal
    try:
        if show:
            # start-up time: the bar is drawn on a terminal only
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=True) as bar:
                task = bar.add_task("fidelity", total=len(chosen))
                docs = F.run_suite(
                    target,
                    chosen,
                    emu_runs=emu_runs,
                    lock=lock,
                    log=lambda m: bar.update(task, description=m),
                    on_case=lambda c, d: bar.advance(task),
                    sim_stalls=sim_stalls,
                )
        else:
            docs = F.run_suite(
                target,
                chosen,
                emu_runs=emu_runs,
                lock=lock,
                log=(lambda m: None) if quiet else (lambda m: err.print(m, highlight=False)),
                sim_stalls=sim_stalls,
            )
    except ScenarioError as e:  # EmulatorError included: the cases finished so far are kept
        fail(e)
        return
    except KeyboardInterrupt:
        err.print("interrupted: finished cases are kept; run the same command again to resume")
        raise typer.Exit(130) from None
    t = Table(
        title=f"fidelity: simulator (mean of {F.SIM_SEEDS} seeds{F.sim_hosts_text(docs)}) vs emulator ({emu_runs} run(s)); the extreme seed or run in brackets, dev/tol ± its standard error",
        title_justify="left",
    )
    for col in ("case", "metric", "sim", "emu", "band", "dev/tol", ""):
        t.add_column(col, justify="left" if col in ("case", "metric", "band", "") else "right")
    for d in docs:
        if not d["rows"]:
            t.add_row(d["case"], "", "", "", "", "", f"[dim]{escape(d['status'])}[/]")
        for r in d["rows"]:
            mark = "–" if r["pass"] is None else ("[green]pass[/]" if r["pass"] else "[bold red]MISS[/]")
            t.add_row(d["case"], r["metric"], F.fmt_range(r, "sim", _dim), F.fmt_range(r, "emu", _dim), r["band"], F.fmt_deviation(r), mark)
    out.print(t)
    n = F.summary_counts(docs)
    out.print(
        f"{n['cases_passed']} of {n['cases_scored']} scored cases within every band ({n['cases_not_run']} not run); "
        f"{n['metrics_passed']} of {n['metrics']} metrics within their bands",
        highlight=False,
    )
    if n["metrics_close"]:
        out.print(F.close_calls_text(n), highlight=False)
    out.print(f"results: {target / 'fidelity.parquet'}, {(target / 'fidelity.html').resolve()}", highlight=False, soft_wrap=True)


def _dim(text: str) -> str:
    return f"[dim]{text}[/]"
