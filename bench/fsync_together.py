"""What a run directory's fsyncs cost: its seven files (summary.json and six Parquet tables,
20 KB each here) and the directory, fsynced one after the other (as the store did) and all at
once (`aqmlab.store.atomic.fsync_paths`), alternating, in a directory under DIR.

    python3 bench/fsync_together.py [DIR] [ROUNDS]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from aqmlab.store.atomic import fsync_path, fsync_paths


def _files(d: Path) -> list[Path]:
    paths = [d / f"f{i}" for i in range(7)]
    for p in paths:
        p.write_bytes(os.urandom(20_000))
    return paths


def main() -> None:
    base = sys.argv[1] if len(sys.argv) > 1 else "/tmp"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    apart: list[float] = []
    together: list[float] = []
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        for k in range(rounds):
            for mode in ("apart", "together"):
                d = Path(tmp) / f"{mode}{k}"
                d.mkdir()
                paths = _files(d)
                t = time.perf_counter()
                if mode == "apart":
                    for p in [*paths, d]:
                        fsync_path(p)
                    apart.append(time.perf_counter() - t)
                else:
                    fsync_paths([*paths, d])
                    together.append(time.perf_counter() - t)
    print(
        f"{base}: seven files and their directory, median of {rounds}: one after the other {1000 * statistics.median(apart):.1f} ms, together {1000 * statistics.median(together):.1f} ms"
    )


if __name__ == "__main__":
    main()
