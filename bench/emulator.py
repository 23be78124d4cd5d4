"""Emulator benchmark (bench/README.md §Emulator): the highest bottleneck rate the router
sustains with a rate error under 1 % and no reordering, and its CPU time per packet.

    sudo python3 bench/emulator.py [--rates 50,100,200,400] [--flows 4] [--rounds 2] [--offloads on,off] [--cc cubic]

For each rate and each host setting (`[host] offloads`), N flows (CUBIC unless `--cc`; 10 ms,
4-BDP TailDrop, 8 s, 2 s warmup) keep the queue
backlogged (a CUBIC back-off by 0.7 from 5 BDP in flight leaves 2.5 BDP queued), so the link
should be busy the whole window: rate error = link bytes ÷ window
against the configured rate (|utilization − 1|). Reordering: the router's own count of
packets written out of order within a flow, and the senders' tcpi_reord_seen. Router CPU per
packet: its user + system time (wait4 rusage) ÷ packets it queued (with offloads, the
segments it cut from super-packets), and the user/system split from its own getrusage. The
receiver's goodput ÷ (C · 1448/1500) checks the rate from the other end (1448 payload bytes
per 1500-byte packet with TCP timestamps). Rounds alternate the rates and host settings so a
busy spell on the machine does not land on one of them. Each run records the load average
(os.getloadavg) at its end. One JSON line per run; a table at the end.

    sudo python3 bench/emulator.py --agreement bench/emu/*.toml [--rounds 2]

Agreement: each scenario on the simulator (seeds 1–5: mean and σ of each class's goodput
share) and on the emulator (`--rounds` runs, alternating scenarios): utilization, class
shares, mean sojourn, drop ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import platform
import time
from collections.abc import Iterator
from typing import Any

import aqmlab
from aqmlab.emu.emulate import emulate

#: Payload per 1500-byte packet of a Linux TCP flow with timestamps (1500 − 20 − 20 − 12).
PAYLOAD_FRACTION = 1448 / 1500


def scenario(rate_mbps: int, flows: int, offloads: bool, cc: str = "cubic", aqm: dict[str, Any] | None = None) -> aqmlab.Scenario:
    return aqmlab.Scenario(
        name=f"emu-bench-{rate_mbps}M",
        duration="8s",
        warmup="2s",
        bottleneck={"rate": f"{rate_mbps}Mbps", "buffer": "4bdp", "aqm": aqm or {"kind": "taildrop"}},
        flows=[{"cc": cc, "count": flows, "rtt": "10ms", "start": "uniform(0s, 200ms)"}],
        host={"offloads": offloads},
    )


@contextlib.contextmanager
def _locked(path: str | None) -> Iterator[None]:
    if path is None:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _shares(summary: dict) -> list[float]:
    total = sum(c["goodput_bps"] for c in summary["classes"])
    return [c["goodput_bps"] / total for c in summary["classes"]]


def agreement(files: list[str], rounds: int) -> None:
    import statistics as st

    sims = {}
    for f in files:
        s = aqmlab.load_scenario(f)
        runs = [aqmlab.run(s.model_copy(update={"seed": k})).summary for k in range(1, 6)]
        sims[f] = {
            "util": st.mean(r["metrics"]["utilization"] for r in runs),
            "shares": [st.mean(x) for x in zip(*(_shares(r) for r in runs))],
            "shares_sd": [st.stdev(x) for x in zip(*(_shares(r) for r in runs))],
            "sojourn_ms": st.mean(r["metrics"]["sojourn_ms"]["mean"] for r in runs),
            "drop": st.mean(r["metrics"]["drop_ratio"] or 0 for r in runs),
            "jain": st.mean(r["metrics"]["jain"] for r in runs),
        }
    emus: dict[str, list[dict]] = {f: [] for f in files}
    for rnd in range(rounds):
        for f in files:
            r = emulate(f).summary
            row = {
                "file": f,
                "round": rnd,
                "util": r["metrics"]["utilization"],
                "shares": _shares(r),
                "sojourn_ms": r["metrics"]["sojourn_ms"]["mean"],
                "drop": r["metrics"]["drop_ratio"] or 0,
                "jain": r["metrics"]["jain"],
                "late_p99_us": r["counters"]["late_p99_ns"] / 1e3,
            }
            emus[f].append(row)
            print(json.dumps(row), flush=True)
    print(
        "\n| scenario | utilization sim / emu | class-0 share sim (σ over seeds) / emu runs | mean sojourn ms sim / emu | drop ratio sim / emu | Jain sim / emu |"
    )
    print("|---|---|---|---|---|---|")
    for f in files:
        sm, es = sims[f], emus[f]
        name = os.path.basename(f).removesuffix(".toml")
        j = lambda k, fmt: " ".join(format(e[k], fmt) for e in es)  # noqa: E731
        print(
            f"| {name} | {sm['util']:.3f} / {j('util', '.3f')} | {sm['shares'][0]:.3f} ({sm['shares_sd'][0]:.3f}) / {' '.join(format(e['shares'][0], '.3f') for e in es)} "
            f"| {sm['sojourn_ms']:.2f} / {j('sojourn_ms', '.2f')} | {sm['drop']:.4f} / {j('drop', '.4f')} | {sm['jain']:.3f} / {j('jain', '.3f')} |"
        )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rates", default="50,100,200,400")
    p.add_argument("--flows", type=int, default=4)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--offloads", default="on,off", help="host settings to measure: on, off or both")
    p.add_argument("--cc", default="cubic", help="the flows' congestion control (the kernel's)")
    p.add_argument("--aqm", help='the discipline as JSON, e.g. \'{"kind": "plugin", "module": "examples/plugins/codel.c"}\' (default: taildrop)')
    p.add_argument("--lock", help="a file to hold an exclusive flock on during each run (to share the machine's testbed with others)")
    p.add_argument("--agreement", nargs="*", help="scenario files: compare the two backends instead")
    a = p.parse_args()
    if a.agreement:
        print(
            json.dumps(
                {"machine": platform.node(), "cpus": os.cpu_count(), "kernel": platform.release(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
            )
        )
        agreement(a.agreement, a.rounds)
        return
    rates = [int(x) for x in a.rates.split(",")]
    hosts = [{"on": True, "off": False}[x] for x in a.offloads.split(",")]
    print(
        json.dumps(
            {"machine": platform.node(), "cpus": os.cpu_count(), "kernel": platform.release(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        )
    )
    rows: dict[tuple[bool, int], list[dict[str, Any]]] = {(h, r): [] for h in hosts for r in rates}
    for rnd in range(a.rounds):
        for h in hosts:
            for r in rates:
                with _locked(a.lock):
                    res = emulate(scenario(r, a.flows, h, a.cc, json.loads(a.aqm) if a.aqm else None))
                m, c, e = res.summary["metrics"], res.summary["counters"], res.summary["emu"]
                pkts = c["rx_pkts"]
                row = {
                    "round": rnd,
                    "offloads": h,
                    "cc": a.cc,
                    "aqm": json.loads(a.aqm)["kind"] if a.aqm else "taildrop",
                    "flows": a.flows,
                    "rate_mbps": r,
                    "utilization": m["utilization"],
                    "rate_error": abs(m["utilization"] - 1.0),
                    "goodput_ratio": m["goodput_bps"] / (r * 1e6 * PAYLOAD_FRACTION),
                    "router_reordered": c["reordered"],
                    "tcp_reord_seen": c["tcp_reord_seen"],
                    "late_p99_us": c["late_p99_ns"] / 1e3,
                    "late_max_us": c["late_max_ns"] / 1e3,
                    "rx_pkts": pkts,
                    "router_cpu_s": e["router_cpu_s"],
                    "cpu_per_pkt_us": e["router_cpu_s"] / pkts * 1e6 if e["router_cpu_s"] and pkts else None,
                    "user_per_pkt_us": c["cpu_user_ns"] / pkts / 1e3 if pkts else None,
                    "sys_per_pkt_us": c["cpu_sys_ns"] / pkts / 1e3 if pkts else None,
                    "gso_packets_in": c["gso_packets_in"],
                    "gso_segments_in": c["gso_segments_in"],
                    "writes": c["writes"],
                    "polls": c["polls"],
                    "goodput_mbps": m["goodput_bps"] / 1e6,
                    "drop_ratio": m["drop_ratio"],
                    "load1": os.getloadavg()[0],
                }
                rows[(h, r)].append(row)
                print(json.dumps(row), flush=True)
    print(
        "\n| offloads | rate | utilization | rate error | goodput ÷ C·1448/1500 | router reordered | TCP reord_seen | late p99 µs | router CPU µs/pkt (user + sys) | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for h in hosts:
        for r in rates:
            xs = rows[(h, r)]
            f = lambda k, fmt: " ".join(format(x[k], fmt) for x in xs)  # noqa: E731
            cpu = " ".join(f"{x['cpu_per_pkt_us']:.1f} ({x['user_per_pkt_us']:.1f} + {x['sys_per_pkt_us']:.1f})" for x in xs)
            print(
                f"| {'on' if h else 'off'} | {r} Mbit/s | {f('utilization', '.4f')} | {f('rate_error', '.2%')} | {f('goodput_ratio', '.4f')} | {f('router_reordered', 'd')} | {f('tcp_reord_seen', 'd')} | {f('late_p99_us', '.0f')} | {cpu} | {f('load1', '.1f')} |"
            )


if __name__ == "__main__":
    main()
