"""Running a sweep: every run once, in parallel, resumable, into one directory.

Layout of a sweep directory::

    DIR/sweep.json          what was swept: axes, report layout, and every run (params → hash)
    DIR/runs/<hash>/        one results store per run (see _results), named by scenario hash
    DIR/index.parquet       one row per run and flow class: swept params next to every metric

A run directory appears only complete (written to a temporary name, fsynced, renamed), so a
sweep killed at any moment — SIGKILL included — resumes by skipping the runs whose directory
exists and checks out; a directory that does not (hash mismatch, unreadable summary, missing
table) is removed and redone. Results do not depend on the parallelism: each run is a
deterministic function of its scenario.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import multiprocessing.forkserver
import os
import shutil
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.context import BaseContext
from pathlib import Path
from queue import SimpleQueue
from typing import Any

import pandas as pd
import pyarrow as pa

from aqmlab.scenario import Scenario, plugin
from aqmlab.simulate.run import run
from aqmlab.store.atomic import write_json, write_parquet
from aqmlab.store.lock import writes_directory
from aqmlab.store.result import TABLES, read_table
from aqmlab.sweep.interrupt import deferred, remove_leftovers, stop_workers
from aqmlab.sweep.spec import Run, Sweep, SweepError

__all__ = ["SweepResult", "plan", "run_sweep", "load", "is_complete", "build_index", "local_pool", "start_workers"]


def is_complete(directory: Path, expected_hash: str) -> bool:
    """A run directory counts only if its summary names the expected scenario and every table
    is there."""
    try:
        summary = json.loads((directory / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if summary.get("scenario_hash") != expected_hash:
        return False
    return all((directory / f"{t}.parquet").is_file() and (directory / f"{t}.parquet").stat().st_size > 0 for t in TABLES)


def execute(canonical_json: str, expected_hash: str, target: str, plugin_cache: str | None = None) -> dict[str, Any]:
    """Run one scenario and store it (in a worker process, local or on a Dask worker).
    `plugin_cache` is the plugin cache the sweep's process uses (`plugin.cache_dir()`): a
    local worker is forked from multiprocessing's forkserver, whose environment is the one it
    started with, so the cache is passed rather than inherited."""

    started = time.time()
    if plugin_cache is not None:
        os.environ[plugin.CACHE_ENV] = str(Path(plugin_cache).parent)
    scenario = Scenario.model_validate(json.loads(canonical_json))
    if scenario.hash() != expected_hash:
        raise RuntimeError(f"scenario hash changed in the worker ({scenario.hash()} != {expected_hash})")
    res = run(scenario)
    res.save(target, overwrite=True)
    return {"hash": expected_hash, "wall_time_s": res.summary["wall_time_s"], "started": started}


@dataclass
class SweepResult:
    directory: Path
    total: int
    skipped: int
    ran: int
    failed: list[tuple[str, str]] = field(default_factory=list)
    #: From the call to the last run's end.
    wall_s: float = 0.0
    #: The engine's own wall time, summed over the runs that ran here.
    sim_s: float = 0.0
    #: Local worker processes (0: on a Dask cluster, whose size the sweep does not know).
    workers: int = 0
    #: From the call to the first run's start: planning, starting the workers.
    startup_s: float = 0.0
    #: From the first run's start to the index written.
    running_s: float = 0.0

    @property
    def overhead_per_run_s(self) -> float | None:
        """What the sweep spent per run beyond simulating it, once its workers were up: the
        workers' time (running_s × workers) less the simulated time, over the runs: the
        hand-off to a worker, validation and lowering, the tables, the store's atomic
        writes, the index, and workers left idle by the last runs. None on a cluster."""
        if not self.workers or not self.ran:
            return None
        return (self.running_s * self.workers - self.sim_s) / self.ran


def plan(sweep: Sweep) -> list[Run]:
    """Validate and expand every run before anything is written."""
    return [sweep._build(point) for point in sweep.points()]


def _write_sweep_json(directory: Path, sweep: Sweep, runs: list[Run]) -> None:
    doc = {
        "name": sweep.name,
        "axes": sweep.axis_names,
        "report": sweep.report,
        "runs": [{"hash": r.hash, "params": {k: _jsonable(v) for k, v in r.params.items()}} for r in runs],
    }
    write_json(directory / "sweep.json", doc)


def _jsonable(v: Any) -> Any:
    return v if isinstance(v, (str, int, float, bool)) or v is None else str(v)


@writes_directory
def run_sweep(
    sweep: Sweep,
    directory: str | Path,
    *,
    jobs: int | None = None,
    cluster: str | None = None,
    on_progress: Callable[[int, int, int, int], None] | None = None,
    pool: ProcessPoolExecutor | None = None,
    runs: list[Run] | None = None,
) -> SweepResult:
    """Run every run of `sweep` not already complete in `directory`, then write the index.

    `on_progress(done, failed, todo, total)` is called as runs finish. `pool`: local worker
    processes to use instead of starting `jobs` new ones (a caller running many small sweeps,
    such as `aqmlab search`, keeps one pool). `runs`: the sweep's `plan`, when the caller has
    made it already.
    """
    # Wall-clock time, comparable with the workers' (`execute` reports when each run began).
    t0 = time.time()
    if cluster is None and pool is None:
        start_workers()
    if runs is None:
        runs = plan(sweep)
    client = None
    if cluster is not None:
        client = _connect(cluster)
    d = Path(directory)
    runs_dir = d / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    _write_sweep_json(d, sweep, runs)
    # Leftovers of runs killed mid-write.
    remove_leftovers(runs_dir)
    unique: dict[str, Run] = {}
    for r in runs:
        unique.setdefault(r.hash, r)
    todo: list[Run] = []
    for h, r in unique.items():
        target = runs_dir / h
        if target.exists() and not is_complete(target, h):
            shutil.rmtree(target)
        if not target.exists():
            todo.append(r)
    result = SweepResult(d, total=len(unique), skipped=len(unique) - len(todo), ran=0)
    if on_progress:
        on_progress(0, 0, len(todo), len(unique))
    first: list[float] = []
    if todo:
        if client is not None:
            # The workers' clocks are not this machine's: no start-up or overhead figures.
            _run_dask(client, todo, runs_dir, result, on_progress)
        else:
            result.workers = max(1, min(jobs or os.cpu_count() or 1, len(todo)))
            _run_local(todo, runs_dir, result.workers, result, on_progress, pool, first)
    result.wall_s = time.time() - t0
    # A worker killed mid-write leaves its temporary directory (its run was redone elsewhere).
    remove_leftovers(runs_dir)
    build_index(d)
    if first:
        result.startup_s = min(first) - t0
        result.running_s = time.time() - min(first)
    return result


def _connect(address: str) -> Any:
    try:
        from distributed import Client
    except ImportError:
        # Dask is an extra: the base install runs sweeps on this machine's cores.
        raise SweepError("--cluster needs Dask, which is not installed: pip install 'aqmlab[cluster]'", key="--cluster") from None
    try:
        return Client(address, timeout="5s")
    except (OSError, TimeoutError) as e:
        raise SweepError(f"the Dask scheduler at {address} does not answer ({type(e).__name__}: {e})", key="--cluster") from None


def _forkserver() -> BaseContext:
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload([__name__])
    return ctx


def start_workers() -> None:
    """Start the process local workers are forked from, which imports this module (≈ 1 s):
    called before planning a sweep, it is ready by the time the runs are."""
    _forkserver()
    multiprocessing.forkserver.ensure_running()


def local_pool(jobs: int) -> ProcessPoolExecutor:
    """Worker processes for local runs, forked from multiprocessing's forkserver: a clean
    process (no copy of the parent's threads or progress display) that has imported this
    module once, so that each worker starts at once rather than importing it again."""
    return ProcessPoolExecutor(max_workers=jobs, mp_context=_forkserver())


def _run_local(
    todo: list[Run],
    runs_dir: Path,
    jobs: int,
    result: SweepResult,
    on_progress: Callable[..., None] | None,
    given: ProcessPoolExecutor | None = None,
    started: list[float] | None = None,
) -> None:
    """Run `todo` on local workers: `given`'s (its owner shuts them down, and ends them when
    interrupted), else a pool of `jobs` started here. Interrupted (`KeyboardInterrupt`, which
    `interrupt.signals_interrupt` makes of SIGTERM too), the pool started here is ended at once,
    not after the runs already handed to it, and the runs it was writing are removed.

    Finished runs come through a queue their futures put themselves in, and a signal wakes the
    loop through it (`interrupt.deferred`): it raises there, holding none of concurrent.futures'
    locks, which a `KeyboardInterrupt` raised inside `wait()` could leave held, the pool's thread
    then blocked on it and `stop_workers` waiting for that thread for ever."""
    jobs = max(1, min(jobs, len(todo)))
    finished: SimpleQueue[Future[dict[str, Any]] | None] = SimpleQueue()
    pool = given
    with deferred(lambda: finished.put(None)) as signals:
        try:
            if pool is None:
                pool = local_pool(jobs)
            pending: dict[Future[dict[str, Any]], Run] = {}
            for r in todo:
                fut = pool.submit(execute, r.scenario.canonical_json(), r.hash, str(runs_dir / r.hash), str(plugin.cache_dir()))
                pending[fut] = r
                fut.add_done_callback(finished.put)
            while pending:
                got = finished.get()
                signals.check()
                if got is None:
                    continue
                r = pending.pop(got)
                try:
                    _count(got.result(), result, started)
                except Exception as e:  # noqa: BLE001 - reported per run, the sweep goes on
                    result.failed.append((r.hash, f"{type(e).__name__}: {e}"))
                if on_progress:
                    on_progress(result.ran, len(result.failed), len(todo), result.total)
            if given is None:
                pool.shutdown()
        except BaseException:
            if given is None and pool is not None:
                stop_workers(pool)
                remove_leftovers(runs_dir)
            raise


def _count(done: dict[str, Any], result: SweepResult, started: list[float] | None) -> None:
    result.ran += 1
    result.sim_s += done["wall_time_s"]
    if started is not None:
        started.append(done["started"])


def _run_dask(
    client: Any, todo: list[Run], runs_dir: Path, result: SweepResult, on_progress: Callable[..., None] | None, started: list[float] | None = None
) -> None:
    from distributed import as_completed

    # pure=False: never deduplicate against another client's identical submission; a worker
    # that dies mid-run has its task rescheduled by the scheduler, and the atomic rename of
    # the run directory makes a redone run replace, never duplicate, a half-written one.
    futures = {client.submit(execute, r.scenario.canonical_json(), r.hash, str(runs_dir.resolve() / r.hash), pure=False, retries=2): r for r in todo}
    for fut in as_completed(list(futures)):
        r = futures[fut]
        try:
            _count(fut.result(), result, started)
        except Exception as e:  # noqa: BLE001
            result.failed.append((r.hash, f"{type(e).__name__}: {e}"))
        if on_progress:
            on_progress(result.ran, len(result.failed), len(todo), result.total)


# ------------------------------------------------------------------------------------------
# The index
# ------------------------------------------------------------------------------------------

_RUN_METRICS = ("utilization", "jain", "goodput_bps", "mark_ratio", "drop_ratio", "sojourn_mean_rel_target", "sojourn_max_rel_target")
_CLASS_METRICS = ("goodput_bps", "rel_throughput", "jain", "mark_ratio", "drop_ratio", "sojourn_mean_ms")


def build_index(directory: str | Path) -> pd.DataFrame:
    """Write DIR/index.parquet from the sweep's completed runs and return it."""
    d = Path(directory)
    doc = json.loads((d / "sweep.json").read_text(encoding="utf-8"))
    rows: list[dict[str, Any]] = []
    for order, entry in enumerate(doc["runs"]):
        run_dir = d / "runs" / entry["hash"]
        if not is_complete(run_dir, entry["hash"]):
            continue
        s = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
        m = s["metrics"]
        base = {"run": entry["hash"], "run_order": order, **entry["params"]}
        for k in _RUN_METRICS:
            base[f"run_{k}" if k in _CLASS_METRICS else k] = m.get(k)
        for q in ("mean", "p50", "p99", "max"):
            base[f"sojourn_{q}_ms"] = m["sojourn_ms"].get(q)
        base["wall_time_s"] = s.get("wall_time_s")
        for c in s["classes"]:
            row = dict(base)
            row.update({"class": c["name"], "cc": c["cc"], "rtt_ms": c["rtt_ms"], "count": c["count"]})
            for k in _CLASS_METRICS:
                # The class's own mean sojourn (its queue, under DualPI2/FQ) beside the run's.
                row["class_sojourn_mean_ms" if k == "sojourn_mean_ms" else k] = c.get(k)
            rows.append(row)
    df = pd.DataFrame(rows)
    write_parquet(d / "index.parquet", pa.Table.from_pandas(df, preserve_index=False))
    return df


def load(directory: str | Path) -> pd.DataFrame:
    """The index of a sweep directory as a DataFrame: one row per run and flow class, swept
    parameters as columns next to every metric (`run_*` columns are whole-run metrics)."""
    d = Path(directory)
    path = d / "index.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"{d} is not a sweep directory (no index.parquet)")
    return read_table(path).to_pandas()
