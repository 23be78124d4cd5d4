"""One writer per output directory: an advisory lock on `DIR/.aqmlab.lock`.

Two sweeps (or searches, atlases) started on the same directory would both run every point
and race on its files. The first takes an exclusive flock(2) on the lock file and writes its
pid and command into it; the second finds the lock held and is refused, naming the holder.
The kernel drops a flock when its last descriptor closes, so the lock goes however the holder
ends — SIGKILL included — and a stale lock file never blocks anyone. A process that holds a
directory may take it again (a search runs its sweeps in its own directory): flock(2) locks
belong to an open file, not to a process, so the directories held here are remembered.
"""

from __future__ import annotations

import fcntl
import functools
import inspect
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ParamSpec, TypeVar

from aqmlab.inputs.errors import ScenarioError

__all__ = ["LOCK_NAME", "DirectoryBusy", "hold", "writes_directory"]

LOCK_NAME = ".aqmlab.lock"

_held: set[Path] = set()


class DirectoryBusy(ScenarioError):
    """Another process writes into the directory: refused as bad input is (exit 2)."""


@contextmanager
def hold(directory: str | Path) -> Iterator[None]:
    """Hold `directory`'s writer lock for the block, or raise DirectoryBusy naming the process
    that holds it. A directory made for the lock and left empty by the block is removed again,
    so a run refused before it wrote anything leaves nothing behind."""
    d = Path(directory)
    made = not d.exists()
    d.mkdir(parents=True, exist_ok=True)
    key = d.resolve()
    if key in _held:
        yield
        return
    fd = os.open(d / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or "another process"
            raise DirectoryBusy(f"being written by {holder}; wait for it to finish or stop it (one writer per directory)", file=str(d)) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"process {os.getpid()} ({' '.join(sys.argv) or sys.executable})\n".encode(), 0)
        _held.add(key)
        try:
            yield
        finally:
            _held.discard(key)
            if made and [p.name for p in d.iterdir()] == [LOCK_NAME]:
                (d / LOCK_NAME).unlink()
                d.rmdir()
    finally:
        os.close(fd)


P = ParamSpec("P")
R = TypeVar("R")


def writes_directory(fn: Callable[P, R]) -> Callable[P, R]:
    """`fn` runs holding the lock of its `directory` argument (`hold`)."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def holding(*args: P.args, **kwargs: P.kwargs) -> R:
        with hold(signature.bind(*args, **kwargs).arguments["directory"]):
            return fn(*args, **kwargs)

    return holding
