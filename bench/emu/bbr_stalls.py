"""BBRv1 in a deep buffer on the emulator: does each rise of its bandwidth estimate follow a stall
of the testbed's CPUs?

    sudo python3 bench/emu/bbr_stalls.py [--runs 6] [--first-seed 1] [--offloads on|off] [-o OUT]

Runs the fidelity suite's bbr-deep-taildrop case (1 BBRv1 flow, 100 Mbit/s, 20 ms, 667 packets)
on the emulator, with the sender's TCP_INFO sampled every 10 ms, and reads the run's stall record:
the emulator's probe on each CPU (`aqmlab-stallprobe`: SCHED_FIFO 99, pinned, waking every
500 us on an absolute CLOCK_MONOTONIC deadline, crates/router/src/stallprobe.rs) logs every
wakeup more than 300 us late — time that CPU ran nothing of ours: a vCPU the hypervisor did not
run, or a hard interrupt — the "stall" (`summary.emu.stalls`). BBR's bandwidth estimate is the
maximum delivery-rate sample over 10 rounds (net/ipv4/tcp_bbr.c bbr_update_bw, `bbr_bw_rtts`), so
it rises only when a sample exceeds the previous maximum; on a single flow through a fixed-rate
link a sample above the link's rate needs ACKs compressed after the bottleneck
(net/ipv4/tcp_rate.c tcp_rate_gen takes the longer of the send and ACK intervals). For each rise
of the estimate above 1.01 x its level at rest, the script reports the longest stall of the router's CPU and of the traffic CPU (the
senders' and the receiver's) in the 3 RTTs before it, and, as the base rate, how often a window
of that length anywhere in the run holds a stall of 1 ms or more; then the mean queueing delay
of the runs with and without a rise of 3 % or more. -o keeps each run's stores and its stalls
(stalls.csv: cpu, t_s from the run's start, late_ns).

Prints one line per run (mean queueing delay, the estimate's rises, stalls per CPU) and a summary.
Root (namespaces); the emulator lock is taken for each run.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from aqmlab.emu import emulate as E  # noqa: E402
from aqmlab.fidelity.suite import case_metrics, load_manifest  # noqa: E402
from aqmlab.scenario import units as u  # noqa: E402

LINK_GOODPUT_BPS = 100e6 * 1448 / 1500  # BBR's bw counts payload: 1448 of each 1500-byte packet
#: A rise is counted from 1 % above the estimate at rest (1.002-1.003 x the link in these runs).
RISE = 1.01
#: A rise this large (3 % above the link) builds the 10-20 ms queues of the slow runs.
EPISODE = 1.03
#: Startup's own samples leave the max filter within a second of the start.
SETTLED_S = 1.5


def rises(ts: pd.DataFrame) -> tuple[float, list[tuple[float, float]]]:
    """The estimate at rest (bw / link) and each rise above RISE x rest: (t_s, bw / link).

    TCP_INFO gives the pacing rate, gain x bw x 0.99 (tcp_bbr.c bbr_rate_bytes_per_sec,
    `bbr_pacing_margin_percent`); ProbeBW spends 6 of its 8 phases, one min-RTT each, at gain 1
    (`bbr_pacing_gain`), so the median over 110 ms of 10-ms samples is the cruise rate, bw x 0.99."""
    pr = ts.dropna(subset=["pacing_rate_bps"]).sort_values("t_s")
    t = pr["t_s"].to_numpy()
    r = pr["pacing_rate_bps"].rolling(11, center=True).median().to_numpy() / 0.99 / LINK_GOODPUT_BPS
    keep = (t > SETTLED_S) & np.isfinite(r)
    t, r = t[keep], r[keep]
    rest = float(np.median(r))
    out, above = [], False
    for ti, ri in zip(t, r):
        if ri > RISE * rest and not above:
            out.append((float(ti), float(ri)))
        above = ri > RISE * rest
    return rest, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--offloads", choices=["on", "off"], default="on")
    ap.add_argument("-o", "--out", type=Path)
    a = ap.parse_args()
    name = "bbr-deep-taildrop" if a.offloads == "on" else "bbr-deep-taildrop-nooffload"
    case = {c.name: c for c in load_manifest()}[name]
    tmp = Path(tempfile.mkdtemp(prefix="bbr-stalls-"))
    rows = []
    try:
        for seed in range(a.first_seed, a.first_seed + a.runs):
            d = case.seeded(seed - 1).model_dump(exclude_unset=True)
            d["measure"] = {"interval": "10ms"}
            s = type(case.scenario).model_validate(d)
            duration_s = u.parse_time(s.duration) / 1e9
            out = (a.out or tmp) / f"run{seed}"
            shutil.rmtree(out, ignore_errors=True)
            with open("/tmp/aqmlab-emu.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                r = E.emulate(s, out)
            rec = r.summary["emu"]["stalls"]
            st = pd.DataFrame([(int(k[3:]), t, late) for k, c in rec["cpus"].items() for t, late in c["stalls"]], columns=["cpu", "t_ns", "late_ns"])
            st["t_s"] = st["t_ns"] / 1e9
            st.to_csv(out / "stalls.csv", index=False)
            ts = pd.read_parquet(out / "timeseries.parquet")
            rest, up = rises(ts)
            win = 3 * float(ts["srtt_ms"].median()) / 1e3
            pin = r.summary["emu"]["pinning"]
            roles = {"router": pin["router_cpu"], "traffic": pin["traffic_cpu"]}

            def longest(role: str, a_s: float, b_s: float) -> float:
                w = st[(st["cpu"] == roles[role]) & (st["t_s"] > a_s) & (st["t_s"] <= b_s)]
                return float(w["late_ns"].max() / 1e6) if len(w) else 0.0

            # How often a window of the same length, anywhere in the settled run, holds a stall >= 1 ms.
            grid = np.arange(SETTLED_S + win, duration_s, 0.005)
            base = {role: float(np.mean([longest(role, g - win, g) >= 1.0 for g in grid])) for role in roles}
            row = {
                "seed": seed,
                "delay_ms": round(case_metrics(r.summary)["sojourn_mean_ms"], 3),
                "rest": round(rest, 4),
                "rises": [{"t_s": tu, "bw_over_link": round(ru, 4), **{f"stall_{k}_ms": round(longest(k, tu - win, tu), 2) for k in roles}} for tu, ru in up],
                "base": {k: round(v, 3) for k, v in base.items()},
                "stalls_ge_1ms": {k: int(((st["cpu"] == c) & (st["late_ns"] >= 1_000_000)).sum()) for k, c in roles.items()},
                "stall_max_ms": {k: round(float(st[st["cpu"] == c]["late_ns"].max() / 1e6), 2) if (st["cpu"] == c).any() else 0.0 for k, c in roles.items()},
                "steal_ms": r.summary["emu"].get("steal_ms"),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        if a.out is None:
            shutil.rmtree(tmp, ignore_errors=True)
    summarize(rows)


def summarize(rows: list[dict]) -> None:
    def is_episode(x: dict, r: dict) -> bool:
        return x["bw_over_link"] >= EPISODE * r["rest"]

    episodes = [x for r in rows for x in r["rises"] if is_episode(x, r)]
    small = [x for r in rows for x in r["rises"] if not is_episode(x, r)]
    for role in ("traffic", "router"):
        print(
            f"{role} CPU: a stall >= 1 ms in the 3 RTTs before {sum(x[f'stall_{role}_ms'] >= 1 for x in episodes)} of "
            f"{len(episodes)} rises >= {EPISODE} x rest and {sum(x[f'stall_{role}_ms'] >= 1 for x in small)} of {len(small)} "
            f"smaller ones; in a random window of that length: {np.mean([r['base'][role] for r in rows]):.3f}"
        )
    loud = [r["delay_ms"] for r in rows if any(is_episode(x, r) for x in r["rises"])]
    quiet = [r["delay_ms"] for r in rows if not any(is_episode(x, r) for x in r["rises"])]
    print(
        f"mean queueing delay: {np.mean(quiet) if quiet else float('nan'):.2f} ms over the {len(quiet)} runs without a rise >= "
        f"{EPISODE} x rest, {np.mean(loud) if loud else float('nan'):.2f} ms over the {len(loud)} with one"
    )


if __name__ == "__main__":
    main()
