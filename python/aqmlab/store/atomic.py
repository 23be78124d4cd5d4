"""Atomic writes: a file aqmlab writes appears whole or not at all, and stays once written.

The content goes to a temporary name in the target's directory, is fsynced, and is renamed
over the target — rename(2) replaces a name atomically within one filesystem (POSIX.1-2017,
rename()) — then the directory is fsynced so that the rename itself is on disk (fsync(2):
"fsync() on the file does not ensure that the entry in the directory has reached disk").
A writer killed at any point leaves the old file or the new one, and at most a temporary
file whose name starts with a dot.

A store of several files (a run's results) is written the same way as a whole: its files go
to a temporary directory, are fsynced together with it (`fsync_paths`), and the directory is
renamed into place.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["fsync_path", "fsync_paths", "replacing", "write_text", "json_text", "write_json", "write_parquet"]


def fsync_path(path: Path) -> None:
    """Flush a file's data, or a directory's entries, to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_paths(paths: Iterable[Path]) -> None:
    """fsync every path at once, each in a thread: the filesystem commits them together (on
    ext4, seven files and their directory take one journal commit, ≈ 2 ms, where one after
    the other take 20–35 ms: bench/README.md, "Where users wait")."""
    todo = list(paths)
    with ThreadPoolExecutor(max_workers=max(1, len(todo))) as pool:
        list(pool.map(fsync_path, todo))


@contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """A temporary path to write `path`'s new content to; on leaving the block without an
    error it is fsynced and renamed over `path`, and the directory fsynced. On an error the
    temporary file is removed and `path` is left as it was."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        fsync_path(tmp)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_path(target.parent)


def write_text(path: str | Path, text: str) -> None:
    with replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def json_text(obj: Any, *, indent: int = 2) -> str:
    """JSON as the stores keep it: indented, a final newline, no NaN (not JSON, RFC 8259 §6)."""
    return json.dumps(obj, indent=indent, allow_nan=False) + "\n"


def write_json(path: str | Path, obj: Any, *, indent: int = 2) -> None:
    write_text(path, json_text(obj, indent=indent))


def write_parquet(path: str | Path, table: pa.Table) -> None:
    # pyarrow is imported here, not at the top: reading a store's JSON needs no pyarrow.
    import pyarrow.parquet as pq

    with replacing(path) as tmp:
        pq.write_table(table, tmp)
