"""Stopping `aqmlab search` and `aqmlab atlas` on SIGINT or SIGTERM.

Both signals end the command the way Ctrl-C ends a sweep (`KeyboardInterrupt`, "finished runs
are kept"), with what a clean stop also needs when the command runs its own local workers:

- SIGTERM (what `kill`, `timeout` and batch schedulers send) is Python's default otherwise: the
  process dies at once, its workers run on as orphans, and multiprocessing's resource tracker
  reports the pool's semaphores as leaked. Here it raises `KeyboardInterrupt` as SIGINT does.
- A pool shut down the ordinary way (`shutdown(wait=True)`) first runs every run already handed
  to it; `stop_workers` ends the workers at once instead.
- A worker ended while writing a run leaves the run's temporary directory: removed, so that the
  directory holds only complete runs, as after a finished command.

What stays is what the store keeps after any stop, `kill -9` included: each complete run under
its hash, the search's asked points, the atlas's map of its last finished round. The same
command run again resumes from there.
"""

from __future__ import annotations

import shutil
import signal
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

__all__ = ["SIGNALS", "signals_interrupt", "stop_workers", "remove_leftovers", "exit_status"]

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def signals_interrupt() -> Iterator[list[int]]:
    """For the block, SIGINT and SIGTERM raise `KeyboardInterrupt` in the main thread; the list
    yielded receives the signal's number. Only the first signal raises: later ones are ignored
    until the block ends, so that a second Ctrl-C cannot cut short the stopping of the workers
    and the removal of their leftovers. Outside the main thread (where Python cannot set
    handlers) the block runs with the handlers it has."""
    got: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        got.append(signum)
        for s in SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        raise KeyboardInterrupt

    try:
        old = {s: signal.signal(s, handler) for s in SIGNALS}
    except ValueError:
        yield got
        return
    try:
        yield got
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def exit_status(got: list[int]) -> int:
    """The shell's status for a command ended by a signal: 128 + its number (130 for SIGINT, as
    `aqmlab sweep` exits on Ctrl-C; 143 for SIGTERM)."""
    return 128 + (got[0] if got else signal.SIGINT)


def stop_workers(pool: ProcessPoolExecutor) -> None:
    """End the pool's workers now, not after the runs queued for them: runs not started are
    cancelled, running ones end with their worker (SIGTERM, whose default action ends the
    simulation in native code at once). Returns once every worker and the pool's own thread
    have ended, so that nothing writes into the directory afterwards."""
    # The executor has no public way to end its workers before Python 3.14's terminate_workers().
    procs = list((pool._processes or {}).values())
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join()
    # With its workers gone the pool is broken: its thread fails the remaining futures and ends.
    pool.shutdown(wait=True, cancel_futures=True)


def remove_leftovers(runs_dir: Path) -> None:
    """The temporary directories of runs whose worker was ended while writing them (`Result.save`
    writes `.<hash>.tmp-*`, then renames; replacing a run, it moves the old one to `.<hash>.old-*`
    first): the run itself is not stored, and is simulated again on resuming."""
    if not runs_dir.is_dir():
        return
    for pattern in (".*.tmp-*", ".*.old-*"):
        for tmp in runs_dir.glob(pattern):
            shutil.rmtree(tmp, ignore_errors=True)
