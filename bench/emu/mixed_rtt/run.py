"""Mixed RTTs through TailDrop: the drop-tail phase effect behind the simulator's and the
kernel's different shares (bench/README.md §Emulator, "the drop-tail phase").

    python3 bench/emu/mixed_rtt/run.py sim bench/emu/mixed_rtt/*.toml [--seeds 10]
    python3 bench/emu/mixed_rtt/run.py grid cubic          # the drop-tail phase grid
    sudo python3 bench/emu/mixed_rtt/run.py emu bench/emu/mixed_rtt/cubic-base.toml [--rounds 2]
    sudo python3 bench/emu/mixed_rtt/run.py ping           # the testbed's own loop delay

`sim`: each scenario on the simulator, seeds 1..N: the short-RTT flows' goodput share (mean,
σ, min, max) and each class's drops per flow in the window.
`grid`: the 5+5 scenario with the 10 ms class at 10 ms + d1 and the 30 ms class at 30 ms + d3,
d1, d3 in 0, 40, ..., 200 µs (a 1500-byte packet takes 240 µs at 50 Mbit/s, so this walks
each class's arrival phase relative to the bottleneck's departures), seeds 1–5 each.
`noise`: each scenario on a simulator patched with noise-experiment.patch (NOT part of the
model: an experiment), seeds 1..N: every class's RTT + `--offset` µs (a constant extra loop
delay, as the kernel hosts and the router's wake-ups add) and, on the ACK path, a uniform
random extra delay in [0, `--jitter` µs) (FIFO kept); `--fwd 1000` puts the whole RTT on
the forward path as the router does (default 500: the simulator's R/2 + R/2). Build it in a
scratch worktree:

    git worktree add --detach /tmp/noise HEAD && cd /tmp/noise
    git apply bench/emu/mixed_rtt/noise-experiment.patch
    cargo build --release -p sim --example share
    python3 bench/emu/mixed_rtt/run.py noise --share /tmp/noise/target/release/examples/share \
        --offset 150 --jitter 120 bench/emu/mixed_rtt/*.toml

`emu`: each scenario on the emulator, `--rounds` runs alternating the scenarios; per run the
share, utilization, the router's lateness, per-class drops and retransmissions per flow and,
from TCP_INFO, the fraction of busy time each class spent receive-window or
send-buffer limited. One JSON line per run.
`ping`: an idle testbed (10 and 30 ms classes, no traffic until 9.5 s): ping (iputils) from
each sender namespace to the receiver through the router, 10 ms apart; prints the RTT in
excess of the base RTT (the hosts' and the router's own delay; ping's resolution is 0.1 ms
at these RTTs, and its time includes ping's user space).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics as st

import aqmlab


def share0(summary: dict) -> float:
    """The short-RTT flows' goodput share: the classes with an RTT below the midpoint of the
    shortest and the longest (the first class when all are equal)."""
    cl = summary["classes"]
    total = sum(c["goodput_bps"] for c in cl)
    lo, hi = min(c["rtt_ms"] for c in cl), max(c["rtt_ms"] for c in cl)
    if lo == hi:
        return cl[0]["goodput_bps"] / total
    return sum(c["goodput_bps"] for c in cl if c["rtt_ms"] < (lo + hi) / 2) / total


def per_class(flows, col: str) -> list[float]:
    """Per class, the mean over its flows of `col` ("drops": dropped packets, all 1500 B)."""
    x = flows["dropped_bytes"] / 1500 if col == "drops" else flows[col]
    g = x.groupby(flows["class"], sort=False).mean()
    return [round(float(x), 1) for x in g.values]


def sim(files: list[str], seeds: int) -> None:
    for f in files:
        s = aqmlab.load_scenario(f)
        sh, drops = [], []
        for k in range(1, seeds + 1):
            r = aqmlab.run(s.model_copy(update={"seed": k}))
            sh.append(share0(r.summary))
            fl = r.tables["flows"].to_pandas() if hasattr(r.tables["flows"], "to_pandas") else r.tables["flows"]
            drops.append(per_class(fl, "drops"))
        print(
            json.dumps(
                {
                    "file": os.path.basename(f),
                    "seeds": seeds,
                    "share0": round(st.mean(sh), 4),
                    "sd": round(st.stdev(sh), 4),
                    "min": round(min(sh), 4),
                    "max": round(max(sh), 4),
                    "drops_per_flow": [round(st.mean(x), 1) for x in zip(*drops)],
                }
            ),
            flush=True,
        )


def grid(cc: str) -> None:
    steps = [0, 40, 80, 120, 160, 200]
    print(f"{cc}: 10 ms class's share; rows d1 (10 ms + d1 µs), columns d3 (30 ms + d3 µs); seeds 1-5")
    print("d1\\d3 " + " ".join(f"{d:>5}" for d in steps))
    allv = []
    for d1 in steps:
        row = []
        for d3 in steps:
            flows = [
                {"cc": cc, "count": 5, "rtt": f"{10 + d1 / 1000}ms", "start": "uniform(0s, 1s)"},
                {"cc": cc, "count": 5, "rtt": f"{30 + d3 / 1000}ms", "start": "uniform(0s, 1s)"},
            ]
            v = st.mean(
                share0(
                    aqmlab.run(
                        aqmlab.Scenario(
                            name="grid", duration="10s", warmup="3s", seed=k, flows=flows, bottleneck={"rate": "50Mbps", "buffer": "1bdp", "rtt_ref": "10ms"}
                        )
                    ).summary
                )
                for k in range(1, 6)
            )
            row.append(v)
        allv += row
        print(f"{d1:>5} " + " ".join(f"{v:.3f}" for v in row), flush=True)
    print(f"mean over the grid {st.mean(allv):.3f}, min {min(allv):.3f}, max {max(allv):.3f}")


def noise(files: list[str], seeds: int, share: str, offset_us: int, jitter_us: int, fwd: int) -> None:
    import subprocess
    import tempfile

    env = dict(os.environ, AQMLAB_JITTER_NS=str(jitter_us * 1000), AQMLAB_FWD_PERMILLE=str(fwd))
    with tempfile.TemporaryDirectory() as d:
        for f in files:
            s = aqmlab.load_scenario(f)
            paths = []
            for k in range(1, seeds + 1):
                c = s.model_copy(update={"seed": k}).engine_config()
                for cl in c["classes"]:
                    cl["rtt_ns"] += offset_us * 1000
                paths.append(os.path.join(d, f"s{k}.json"))
                with open(paths[-1], "w") as fh:
                    json.dump(c, fh)
            out = subprocess.run([share, *paths], env=env, check=True, capture_output=True, text=True).stdout
            sh = [float(line.split()[1]) for line in out.splitlines()]
            print(
                json.dumps(
                    {
                        "file": os.path.basename(f),
                        "seeds": seeds,
                        "offset_us": offset_us,
                        "jitter_us": jitter_us,
                        "fwd_permille": fwd,
                        "share0": round(st.mean(sh), 4),
                        "sd": round(st.stdev(sh), 4),
                    }
                ),
                flush=True,
            )


def emu(files: list[str], rounds: int) -> None:
    import pandas as pd

    from aqmlab.emu.emulate import emulate

    base = os.environ.get("MIXED_RTT_OUT", "/tmp/mixed_rtt")
    for rnd in range(rounds):
        for f in files:
            out = os.path.join(base, f"{os.path.basename(f).removesuffix('.toml')}-{rnd}")
            r = emulate(f, out, overwrite=True)
            s = r.summary
            fl = pd.read_parquet(os.path.join(out, "flows.parquet"))
            ti = pd.read_parquet(os.path.join(out, "tcp_info.parquet"))
            last = ti.sort_values("t_s").groupby("flow").tail(1)
            lim = {}
            for k in ("rwnd_limited", "sndbuf_limited"):
                x = last.groupby("class", sort=False).apply(lambda d, k=k: float(d[k].sum() / max(d["busy_time"].sum(), 1)), include_groups=False)
                lim[k] = [round(float(v), 4) for v in x.values]
            print(
                json.dumps(
                    {
                        "file": os.path.basename(f),
                        "round": rnd,
                        "share0": round(share0(s), 4),
                        "util": round(s["metrics"]["utilization"], 4),
                        "late_p99_us": s["counters"]["late_p99_ns"] / 1e3,
                        "late_max_us": s["counters"]["late_max_ns"] / 1e3,
                        "drops_per_flow": per_class(fl, "drops"),
                        "retrans_per_flow": per_class(fl, "retrans_segs"),
                        **lim,
                        "loadavg": os.getloadavg()[0],
                    }
                ),
                flush=True,
            )


IDLE = """name = "idle-ping"
duration = "10s"
warmup = "1s"
[bottleneck]
rate = "50Mbps"
buffer = "1bdp"
[[flows]]
cc = "cubic"
rtt = "10ms"
start = "9.5s"
[[flows]]
cc = "cubic"
rtt = "30ms"
start = "9.5s"
"""


def ping() -> None:
    import re
    import shutil
    import subprocess
    import sys
    import tempfile
    import time

    if shutil.which("ping") is None:
        sys.exit("run.py ping: needs ping (apt-get install iputils-ping; `make deps` does not install it)")

    with tempfile.NamedTemporaryFile("w", suffix=".toml") as f:
        f.write(IDLE)
        f.flush()
        emu = subprocess.Popen([sys.executable, "-c", f"from aqmlab.emu.emulate import emulate; emulate({f.name!r})"])
        try:
            tag = None
            for _ in range(100):
                ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
                m = re.search(r"aqD-([0-9a-f]{8})", ns)
                if m and f"aqS1-{m.group(1)}" in ns:
                    tag = m.group(1)
                    break
                time.sleep(0.05)
            if tag is None:
                raise SystemExit("no testbed appeared")
            time.sleep(3.0)  # the router and the receiver are up by scenario time 0 (≈ 2.5 s)
            pings = [
                subprocess.Popen(["ip", "netns", "exec", f"aqS{i}-{tag}", "ping", "-c", "400", "-i", "0.01", "10.77.200.2"], stdout=subprocess.PIPE, text=True)
                for i in (0, 1)
            ]
            for i, (p, base) in enumerate(zip(pings, (10.0, 30.0))):
                ms = [float(x) for x in re.findall(r"time=([\d.]+) ms", p.communicate()[0])][20:]
                ex = sorted(round((x - base) * 1000) for x in ms)
                q = lambda f: ex[int(f * (len(ex) - 1))]  # noqa: E731
                print(
                    json.dumps(
                        {"class": i, "base_ms": base, "n": len(ex), "excess_us": {"min": ex[0], "p10": q(0.1), "p50": q(0.5), "p90": q(0.9), "p99": q(0.99)}}
                    )
                )
        finally:
            emu.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("sim")
    a.add_argument("files", nargs="+")
    a.add_argument("--seeds", type=int, default=10)
    b = sub.add_parser("grid")
    b.add_argument("cc", choices=["cubic", "reno"])
    n = sub.add_parser("noise")
    n.add_argument("files", nargs="+")
    n.add_argument("--share", required=True, help="the patched simulator's share example")
    n.add_argument("--seeds", type=int, default=10)
    n.add_argument("--offset", type=int, default=0, help="µs added to every class's RTT")
    n.add_argument("--jitter", type=int, default=0, help="µs: uniform [0, J) extra ACK-path delay")
    n.add_argument("--fwd", type=int, default=500, help="permille of the RTT on the forward path")
    sub.add_parser("ping")
    c = sub.add_parser("emu")
    c.add_argument("files", nargs="+")
    c.add_argument("--rounds", type=int, default=2)
    x = ap.parse_args()
    if x.cmd == "sim":
        sim(x.files, x.seeds)
    elif x.cmd == "noise":
        noise(x.files, x.seeds, x.share, x.offset, x.jitter, x.fwd)
    elif x.cmd == "ping":
        ping()
    elif x.cmd == "grid":
        grid(x.cc)
    else:
        emu(x.files, x.rounds)


if __name__ == "__main__":
    main()
