"""`aqmlab emulate`, `aqmlab compare` and `aqmlab router`: the emulator backend (docs/emulator.md)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from aqmlab.scenario import Scenario, ScenarioError, load_scenario
from aqmlab.cli.run import print_summary
from aqmlab.store.atomic import write_text
from aqmlab.cli.common import err, fail, out


#: Router lateness (`counters.late_p50_ns`) above which a run is flagged: on the 2-core VM the
#: median is 9–19 µs under load and 42 µs with one 2 Mbit/s flow, where idle vCPUs wake late
#: and paths came out ≈ 0.2 ms longer than their RTT (docs/emulator.md, "What differs from
#: the simulator"); beyond 100 µs the router was kept from its core. The value is ours.
LATE_P50_WARN_NS = 100_000



def _load(path: Path) -> Scenario:
    try:
        return load_scenario(path)
    except ScenarioError as e:
        fail(e)
        raise


def _emulate(s: Scenario, target: Path | None, overwrite: bool, show: bool, keep_work: bool = False) -> Any:
    from aqmlab.emu.emulate import emulate

    try:
        if show:
            with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.percentage:>5.1f}% of the run"), TimeElapsedColumn(), TimeRemainingColumn(), console=err, transient=True) as bar:
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
    cleanup: Annotated[bool, typer.Option("--cleanup", help="Remove stale testbeds (namespaces aq*-<tag>, their processes) left by a killed run, then exit")] = False,
    force: Annotated[bool, typer.Option("--force", help="With --cleanup: also remove testbeds whose run is still alive")] = False,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing results directory")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar, no summary")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON")] = False,
    keep_work: Annotated[bool, typer.Option("--keep-work", help="Keep the work directory (router.json, logs, raw outputs) in /tmp")] = False,
) -> None:
    """Run a scenario with real Linux TCP through the userspace AQM router (root; see docs/emulator.md)."""
    from aqmlab.emu.emulate import EmulatorError, cleanup as do_cleanup, is_root

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
    s = _load(file)
    target = output or Path("runs") / f"{s.name}-{s.hash()}-emu"
    if target.exists() and (not target.is_dir() or any(target.iterdir())) and not overwrite:
        fail(ScenarioError(f"{target} exists and is not empty (pass --overwrite to replace it)"))
    show = not quiet and not as_json and err.is_terminal
    res = _emulate(s, target, overwrite, show, keep_work)
    if as_json:
        print(json.dumps(res.summary, indent=2))
        return
    if not quiet:
        print_summary(res.summary)
        c = res.summary["counters"]
        if c.get("sched_fifo") is False:
            err.print("[yellow]the router could not run under SCHED_FIFO (see its stderr): expect late packets on a busy machine (counters.late_p99_ns)[/]", highlight=False)
        late = c.get("late_p50_ns")
        if late is not None and late > LATE_P50_WARN_NS:
            err.print(
                f"[yellow]the router wrote packets {late / 1000:.0f} µs after they were due (median): every path was at least that much "
                "longer than its RTT (its CPU was taken by other work or the hypervisor, or woke from idle slowly; docs/emulator.md, \"What differs from the simulator\")[/]",
                highlight=False, soft_wrap=True,
            )
        unstamped_ipv4 = c.get("unstamped", 0) - c.get("non_ipv4", 0)
        if unstamped_ipv4 > 0:
            err.print(
                f"[yellow]{unstamped_ipv4} IPv4 packets had no arrival stamp from the router's packet ring and entered the queue when read, "
                "not when they reached the router (counters.unstamped; crates/router/README.md, \"Timing\")[/]",
                highlight=False, soft_wrap=True,
            )
        if c.get("flow_errors"):
            err.print(f"[yellow]flow errors: {escape('; '.join(c['flow_errors']))}[/]", highlight=False)
        out.print(f"results: {target}  (wall time {res.summary['wall_time_s']:.2f} s)", highlight=False, soft_wrap=True)


#: The rows of `aqmlab compare`: (label, getter on a summary, format).
def _rows(sim: dict[str, Any], emu: dict[str, Any]) -> list[tuple[str, float | None, float | None, str]]:
    def m(summary: dict[str, Any], *path: str) -> float | None:
        x: Any = summary["metrics"]
        for p in path:
            x = None if x is None else x.get(p)
        return x

    rows: list[tuple[str, float | None, float | None, str]] = [
        ("utilization", m(sim, "utilization"), m(emu, "utilization"), "pct"),
        ("Jain (all flows)", m(sim, "jain"), m(emu, "jain"), "num"),
        ("mean sojourn (ms)", m(sim, "sojourn_ms", "mean"), m(emu, "sojourn_ms", "mean"), "num"),
        ("p99 sojourn (ms)", m(sim, "sojourn_ms", "p99"), m(emu, "sojourn_ms", "p99"), "num"),
        ("mark ratio", m(sim, "mark_ratio"), m(emu, "mark_ratio"), "pct"),
        ("drop ratio", m(sim, "drop_ratio"), m(emu, "drop_ratio"), "pct"),
    ]
    tot_s = sum(c["goodput_bps"] for c in sim["classes"]) or None
    tot_e = sum(c["goodput_bps"] for c in emu["classes"]) or None
    for cs, ce in zip(sim["classes"], emu["classes"]):
        n = cs["name"]
        rows += [
            (f"{n}: goodput share", cs["goodput_bps"] / tot_s if tot_s else None, ce["goodput_bps"] / tot_e if tot_e else None, "pct"),
            (f"{n}: rel. throughput", cs["rel_throughput"], ce["rel_throughput"], "num"),
            (f"{n}: mean sojourn (ms)", cs.get("sojourn_mean_ms"), ce.get("sojourn_mean_ms"), "num"),
            (f"{n}: mark ratio", cs["mark_ratio"], ce["mark_ratio"], "pct"),
            (f"{n}: drop ratio", cs["drop_ratio"], ce["drop_ratio"], "pct"),
        ]
    return rows


def compare_rows(sim: dict[str, Any], emu: dict[str, Any]) -> list[dict[str, Any]]:
    """The side-by-side metrics as records: metric, sim, emu, diff (emu − sim)."""
    return [{"metric": k, "sim": a, "emu": b, "diff": None if a is None or b is None else b - a, "format": f} for k, a, b, f in _rows(sim, emu)]


def compare(
    file: Annotated[Path, typer.Argument(help="Scenario TOML file")],
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Directory for both runs (sim/, emu/), compare.json and report.html")] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace existing results")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON")] = False,
) -> None:
    """Run a scenario on the simulator and on the emulator; print the metrics side by side."""
    from aqmlab.emu.emulate import preflight
    from aqmlab.simulate.run import run as run_sim

    s = _load(file)
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
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.percentage:>5.1f}%"), TimeElapsedColumn(), console=err, transient=True) as bar:
            task = bar.add_task(f"{s.name} (simulator)", total=1.0)
            sim = run_sim(s, progress=lambda f: bar.update(task, completed=f))
    else:
        sim = run_sim(s)
    if output is not None:
        sim.save(output / "sim", overwrite=overwrite)
    emu = _emulate(s, output / "emu" if output is not None else None, overwrite, show)
    rows = compare_rows(sim.summary, emu.summary)
    report = None
    if output is not None:
        from aqmlab.report.compare import write_compare_report

        write_text(output / "compare.json", json.dumps(rows, indent=1) + "\n")
        report = write_compare_report(output, output / "report.html")
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    t = Table(title=f"{s.name}: simulator vs emulator (real Linux {os.uname().release} TCP)", title_justify="left")
    for col in ("metric", "sim", "emu", "emu − sim"):
        t.add_column(col, justify="left" if col == "metric" else "right")

    def fmt(x: float | None, f: str, diff: bool = False) -> str:
        if x is None:
            return "–"
        if f == "pct":
            return f"{100 * x:+.2f} pp" if diff else f"{100 * x:.2f}%"
        return f"{x:+.3f}" if diff else f"{x:.3f}"

    for r in rows:
        t.add_row(r["metric"], fmt(r["sim"], r["format"]), fmt(r["emu"], r["format"]), fmt(r["diff"], r["format"], True))
    out.print(t)
    if output is not None:
        out.print(f"results: {output / 'sim'}, {output / 'emu'}, {output / 'compare.json'}", highlight=False, soft_wrap=True)
        out.print(f"report: {report.resolve()}", highlight=False, soft_wrap=True)


def router(
    ctx: typer.Context,
    config: Annotated[Path, typer.Option("--config", help="router.json (docs/emulator.md §Router)")],
) -> None:
    """Run the bottleneck router alone (aqmlab-router) inside your own namespace / TUN setup."""
    from aqmlab.emu.emulate import EmulatorError, router_binary

    try:
        binary = router_binary()
    except EmulatorError as e:
        fail(e)
        return
    sys.stdout.flush()
    sys.stderr.flush()
    # Replace this process: signals, stdout ("ready") and the exit status are the router's own.
    os.execv(str(binary), [str(binary), "--config", str(config), *ctx.args])
