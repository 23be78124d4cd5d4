"""What the emulator's stall probe costs the router: its lateness with and without the probe.

    sudo python3 bench/emu/stall_probe_cost.py [--pairs 6] [--case dctcp-step-400m]

The emulator runs `aqmlab-stallprobe` on each CPU during a run (SCHED_FIFO 99, a wake-up every
500 µs: crates/router/src/stallprobe.rs), above the router (SCHED_FIFO 20). This runs a fidelity
case `--pairs` times each way, alternating (with, without, with, ...; the same seed per pair),
and prints per run and as medians the router's write lateness (`late_p50_ns`, `late_p99_ns`,
`late_max_ns`), the utilization and the case's mean queueing delay, then the ratios with ÷
without. "Without" is the same emulator with the probe's spawn replaced by nothing.
Root (namespaces); the emulator lock is taken for each run.
"""

from __future__ import annotations

import argparse
import fcntl
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from aqmlab.emu import emulate as E  # noqa: E402
from aqmlab.fidelity.suite import load_manifest  # noqa: E402

_spawn_probe, _probe_results = E._spawn_probe, E._probe_results


def run(case, seed_k: int, probe: bool) -> dict[str, float]:
    E._spawn_probe = _spawn_probe if probe else (lambda *a: None)
    E._probe_results = _probe_results if probe else (lambda *a: None)
    with open("/tmp/aqmlab-emu.lock", "a") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        s = E.emulate(case.seeded(seed_k)).summary
    c = s["counters"]
    return {
        "late_p50_us": c["late_p50_ns"] / 1e3,
        "late_p99_us": c["late_p99_ns"] / 1e3,
        "late_max_us": c["late_max_ns"] / 1e3,
        "util": s["metrics"]["utilization"],
        "delay_ms": s["metrics"]["sojourn_ms"]["mean"],
        "jain": s["metrics"]["jain"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--case", default="dctcp-step-400m")
    a = ap.parse_args()
    cases = {c.name: c for c in load_manifest()}
    if a.case not in cases:
        sys.exit(f"--case: no fidelity case {a.case!r}")
    case = cases[a.case]
    rows: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    for k in range(a.pairs):
        for probe in (True, False):
            r = run(case, k, probe)
            rows[probe].append(r)
            print(f"pair {k + 1} {'with   ' if probe else 'without'} " + "  ".join(f"{n} {v:.4g}" for n, v in r.items()), flush=True)
    print(f"\n{a.case}, {a.pairs} pairs, medians:")
    for n in rows[True][0]:
        w, wo = statistics.median(r[n] for r in rows[True]), statistics.median(r[n] for r in rows[False])
        print(f"  {n:12s} with {w:10.4g}  without {wo:10.4g}  ratio {w / wo if wo else float('nan'):.3f}")


if __name__ == "__main__":
    main()
