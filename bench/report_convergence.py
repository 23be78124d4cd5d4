"""The cost of the report's convergence section: `write_report` of a sweep directory with and
without it, alternating rounds (the other figures are the same in both).

    python3 bench/report_convergence.py out/ckcd-quick [ROUNDS]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from aqmlab.report import study as R


def main() -> None:
    d = Path(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    orig = R._convergence_figures
    times: dict[str, list[float]] = {"with": [], "without": []}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(rounds):
            for mode in ("with", "without") if k % 2 == 0 else ("without", "with"):
                R._convergence_figures = orig if mode == "with" else (lambda page, runs: None)
                t = time.perf_counter()
                R.write_report(d, Path(tmp) / f"{mode}.html")
                times[mode].append(time.perf_counter() - t)
                print(f"round {k} {mode:8s} {times[mode][-1]:.2f} s", flush=True)
    ratios = sorted(a / b for a, b in zip(times["with"], times["without"]))
    print(
        "ratios with/without:",
        " ".join(f"{r:.3f}" for r in ratios),
        f"median {ratios[len(ratios) // 2]:.3f}" if len(ratios) % 2 else f"median {(ratios[len(ratios) // 2 - 1] + ratios[len(ratios) // 2]) / 2:.3f}",
    )


# The report draws its figures in worker processes, which multiprocessing starts by importing
# the main module: only run here.
if __name__ == "__main__":
    main()
