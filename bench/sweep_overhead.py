"""What a sweep costs beyond simulating its runs: the ckcd quick grid (25 runs) into a fresh
directory, `rounds` times, on `jobs` local workers.

    python3 bench/sweep_overhead.py [ROUNDS] [JOBS]

Per round: the call's wall time, the engine's own wall time summed over the runs (from their
summaries), and per run the rest of the workers' time, (wall × workers − simulated) ÷ runs,
with and without the start-up (planning, starting the workers: the sweep's own figures, where
the runner reports them). bench/README.md, "Where users wait".
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    import aqmlab
    from aqmlab.studies import study_path

    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    sweep = aqmlab.load_sweep(study_path("ckcd"), quick=True)
    run_sweep = aqmlab.run_sweep  # imported here, outside the timing
    whole: list[float] = []
    running: list[float] = []
    for k in range(rounds):
        with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
            t = time.perf_counter()
            res = run_sweep(sweep, Path(tmp) / "sweep", jobs=jobs)
            wall = time.perf_counter() - t
            sim = sum(json.loads(p.read_text())["wall_time_s"] for p in (Path(tmp) / "sweep" / "runs").glob("*/summary.json"))
        n = res.ran
        whole.append((wall * jobs - sim) / n)
        per_run = getattr(res, "overhead_per_run_s", None)
        line = f"round {k}: {n} runs, wall {wall:.2f} s, simulated {sim:.2f} s; per run beyond simulation {1000 * whole[-1]:.0f} ms with start-up"
        if per_run is not None:
            running.append(per_run)
            line += f", {1000 * per_run:.0f} ms once the workers were up (start-up {res.startup_s:.2f} s)"
        print(line, flush=True)
    print(
        f"median per run: {1000 * statistics.median(whole):.0f} ms with start-up" + (f", {1000 * statistics.median(running):.0f} ms without" if running else "")
    )


if __name__ == "__main__":
    main()
