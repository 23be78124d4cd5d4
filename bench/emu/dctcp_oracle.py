"""DCTCP on the oracle cases, the emulator's eBPF port beside the simulator.

    sudo python3 bench/emu/dctcp_oracle.py [--quick] [-o out/dctcp-oracle.json]

(a) `bernoulli` marking at a fixed probability p, one flow, 20 ms, a 200 Mbit/s link it cannot
fill (so no queue, no drop): the mean window W (TCP_INFO on the emulator, the timeseries on the
simulator, after the warmup) against the reference 2/p (tcp_dctcp.c: alpha converges to the
marked fraction p; once per RTT with a mark, dctcp_ssthresh cuts W·alpha/2;
tcp_reno_cong_avoid adds 1 per RTT: W·p/2 = 1), and the mark ratio against p.
(b) STEP at K = 0.17 RTT, 2 flows, 100 Mbit/s, 5 and 20 ms: utilization, mean and p99
queueing delay against K, mark ratio.

Both backends run the same scenario (the emulator with its eBPF port of tcp_dctcp.c: `make
bpf`; root). Each emulator run holds /tmp/aqmlab-emu.lock. Prints one table; -o writes the rows.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import math
import os
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

import aqmlab  # noqa: E402
from aqmlab.emu import emulate as E  # noqa: E402


def bernoulli(p: float, duration: str) -> aqmlab.Scenario:
    return aqmlab.Scenario(
        name=f"dctcp-bernoulli-{p}",
        duration=duration,
        warmup="3s",
        seed=1,
        bottleneck={"rate": "200Mbps", "buffer": "100ms", "aqm": {"kind": "bernoulli", "mark": p}},
        flows=[{"cc": "dctcp", "rtt": "20ms"}],
    )


def step(rtt: str, duration: str) -> aqmlab.Scenario:
    return aqmlab.Scenario(
        name=f"dctcp-step-{rtt}",
        duration=duration,
        warmup="3s",
        seed=1,
        bottleneck={"rate": "100Mbps", "buffer": "50ms", "aqm": {"kind": "step", "target": "0.17rtt"}},
        flows=[{"cc": "dctcp", "count": 2, "rtt": rtt}],
    )


def mean_cwnd_sim(res: aqmlab.Result, warmup_s: float) -> float:
    ts = res.timeseries
    return float(ts[ts.t_s >= warmup_s].cwnd.mean())


def emulate(s: aqmlab.Scenario, out: Path) -> aqmlab.Result:
    with open("/tmp/aqmlab-emu.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return E.emulate(s, out)


def mean_cwnd_emu(out: Path, warmup_s: float) -> float:
    t = pq.read_table(out / "tcp_info.parquet").to_pandas()
    return float(t[t.t_s >= warmup_s].snd_cwnd.mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="8 s runs instead of 15 s")
    ap.add_argument("-o", "--out", type=Path)
    a = ap.parse_args()
    duration = "8s" if a.quick else "15s"
    tmp = Path(tempfile.mkdtemp(prefix="dctcp-oracle-"))
    rows = []
    for p in (0.01, 0.02, 0.05):
        s = bernoulli(p, duration)
        sim = aqmlab.run(s)
        emu = emulate(s, tmp / f"b{p}")
        rows.append(
            {
                "case": f"bernoulli p={p}",
                "W_ref_2/p": 2 / p,
                "W_sim": mean_cwnd_sim(sim, 3.0),
                "W_emu": mean_cwnd_emu(tmp / f"b{p}", 3.0),
                "mark_sim": sim.summary["metrics"]["mark_ratio"],
                "mark_emu": emu.summary["metrics"]["mark_ratio"],
                "util_sim": sim.summary["metrics"]["utilization"],
                "util_emu": emu.summary["metrics"]["utilization"],
            }
        )
    for rtt in ("5ms", "20ms"):
        s = step(rtt, duration)
        k_ms = 0.17 * float(rtt[:-2])
        sim = aqmlab.run(s)
        emu = emulate(s, tmp / f"s{rtt}")
        ms, me = sim.summary["metrics"], emu.summary["metrics"]
        rows.append(
            {
                "case": f"step K={k_ms:.2f}ms rtt={rtt}",
                "K_ms": k_ms,
                "util_sim": ms["utilization"],
                "util_emu": me["utilization"],
                "qmean_sim_ms": ms["sojourn_ms"]["mean"],
                "qmean_emu_ms": me["sojourn_ms"]["mean"],
                "qp99_sim_ms": ms["sojourn_ms"]["p99"],
                "qp99_emu_ms": me["sojourn_ms"]["p99"],
                "mark_sim": ms["mark_ratio"],
                "mark_emu": me["mark_ratio"],
                "drop_sim": ms["drop_ratio"],
                "drop_emu": me["drop_ratio"],
                "W_sim": mean_cwnd_sim(sim, 3.0),
                "W_emu": mean_cwnd_emu(tmp / f"s{rtt}", 3.0),
            }
        )
    keys = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    print(" | ".join(keys))
    for r in rows:
        print(" | ".join("" if r.get(k) is None else (f"{r[k]:.3g}" if isinstance(r.get(k), float) and not math.isnan(r[k]) else str(r[k])) for k in keys))
    print(f"load average {os.getloadavg()[0]:.1f}; kernel {os.uname().release}; runs of {duration}")
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        tmp_out = a.out.with_suffix(".tmp")
        tmp_out.write_text(json.dumps(rows, indent=1))
        os.replace(tmp_out, a.out)


if __name__ == "__main__":
    main()
