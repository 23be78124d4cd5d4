"""Stopping `aqmlab sweep`, `reproduce`, `search` and `atlas` on SIGINT or SIGTERM.

Both signals end the command as Ctrl-C in the foreground does (`KeyboardInterrupt`, "finished
runs are kept"), with what a clean stop also needs when the command runs its own local workers:

- SIGTERM (what `kill`, `timeout` and batch schedulers send) is Python's default otherwise: the
  process dies at once, its workers run on as orphans, and multiprocessing's resource tracker
  reports the pool's semaphores as leaked. Here it raises `KeyboardInterrupt` as SIGINT does.
- A pool shut down the ordinary way (`shutdown(wait=True)`) first runs every run already handed
  to it; `stop_workers` ends the workers at once instead.
- A worker ended while writing a run leaves the run's temporary directory: removed, so that the
  directory holds only complete runs, as after a finished command.
- A `KeyboardInterrupt` raised where it lands can leave a lock held: one of concurrent.futures'
  (a future's, taken in `wait()` or `Future.result()`, or the pool's), raised between its
  acquisition and the `with` block that would release it. The pool's thread then blocks on it
  for ever, and so does `stop_workers`, which waits for that thread (a sweep stopped this way
  hung, once in a few stops). Where the main thread waits for a pool, `deferred` takes the
  signal instead, and the waiting loop raises at a point where it holds no lock.

What stays is what the store keeps after any stop, `kill -9` included: each complete run under
its hash, the search's asked points, the atlas's map of its last finished round. The same
command run again resumes from there (a sweep runs what its directory lacks).
"""

from __future__ import annotations

import shutil
import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

__all__ = ["SIGNALS", "signals_interrupt", "Deferral", "deferred", "stop_workers", "remove_leftovers", "exit_status"]

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Deferral:
    """A signal taken by a `deferred` block: recorded, the block woken, raised by `check`."""

    def __init__(self, wake: Callable[[], None]) -> None:
        self.wake = wake
        self.signalled = False

    def take(self) -> None:
        self.signalled = True
        self.wake()

    def check(self) -> None:
        """Raise `KeyboardInterrupt` if a signal has come: to be called where no lock is held."""
        if self.signalled:
            raise KeyboardInterrupt


#: The `deferred` blocks open in the main thread, innermost last.
_deferrals: list[Deferral] = []


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
        if _deferrals:
            _deferrals[-1].take()
        else:
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


@contextmanager
def deferred(wake: Callable[[], None]) -> Iterator[Deferral]:
    """For the block, a signal that would raise `KeyboardInterrupt` (in `signals_interrupt`, or
    Ctrl-C under Python's default handler, as in a program calling `run_sweep`) calls `wake`
    instead, which must return at once and must not raise (`SimpleQueue.put`); the block
    raises by calling the `Deferral`'s `check` where it holds no lock, and a signal it has not
    raised on is raised when it ends, in place of any exception the block raises after it. Later signals at most wake it again: the block may stop
    its workers undisturbed. Outside the main thread, signals are never taken here."""
    d = Deferral(wake)
    if threading.current_thread() is not threading.main_thread():
        yield d
        return
    old = signal.getsignal(signal.SIGINT)
    own = old is signal.default_int_handler
    if own:
        signal.signal(signal.SIGINT, lambda signum, frame: d.take())
    _deferrals.append(d)
    try:
        yield d
    except Exception:
        # What fails once a signal has been taken is the stop's doing (a signal sent to the
        # process group ends the workers too, and the next `submit` finds the pool broken).
        if d.signalled:
            raise KeyboardInterrupt from None
        raise
    finally:
        _deferrals.remove(d)
        if own:
            signal.signal(signal.SIGINT, old)
    d.check()


def exit_status(got: list[int]) -> int:
    """The shell's status for a command ended by a signal: 128 + its number (130 for SIGINT,
    and for a `KeyboardInterrupt` no signal of the block raised; 143 for SIGTERM)."""
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
