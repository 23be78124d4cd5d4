"""Reproduce the eBPF congestion-control anomaly (docs/emulator.md, "The anomaly").

    sudo python3 bench/emu/bpf_anomaly.py --cc reno-kfunc --rps on --runs 6 [--stack]
    sudo python3 bench/emu/bpf_anomaly.py --cc port --rps off --runs 6

Runs the emulator `--runs` times on 2 flows of "dctcp" (200 Mbit/s, 5 ms, STEP at 0.17 RTT,
8 s) with either our port (bpf/aqmlab_dctcp.bpf.c) or the minimal kfunc-only Reno of
bench/emu/bpf_anomaly/reno_kfunc.bpf.c registered in its place, RPS on the router's TUN on or
off (AQMLAB_EMU_BPF_RPS), and counts the runs in which an ACK found snd_ssthresh or snd_cwnd at
or above 2^31 (the emulator refuses those). For each, it prints the CC's counters (for
reno_kfunc: which op ran last before, and what it saw). With --stack, a tracepoint program
records the kernel stack of the first CA-state change that finds such an ssthresh.

Root; build first with `make bpf`. Every run holds /tmp/aqmlab-emu.lock (one emulator run at a
time on the machine).
"""

from __future__ import annotations

import argparse
import bisect
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = Path(__file__).resolve().with_name("bpf_anomaly")
OUT = ROOT / "target" / "bpf-anomaly"
SCENARIO = """name = "bpf-anomaly"
duration = "8s"
warmup = "2s"
seed = 1
[bottleneck]
rate = "200Mbps"
buffer = "50ms"
aqm = { kind = "step", target = "0.17rtt" }
[[flows]]
cc = "dctcp"
count = 2
rtt = "5ms"
"""
OPS = {1: "ssthresh", 2: "cong_avoid", 3: "undo_cwnd", 4: "in_ack_event", 5: "set_state"}


def sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True)


def build() -> Path:
    """The objects: the kfunc Reno (with the port's loader, as the emulator expects them side
    by side), the stack catcher and its attach program. Returns the kfunc Reno's directory."""
    bpf = ROOT / "target" / "bpf"
    if not (bpf / "vmlinux.h").exists() or not (bpf / "aqmlab-bpfcc").exists():
        sys.exit("build the eBPF CCs first: make bpf")
    rk = OUT / "reno-kfunc"
    rk.mkdir(parents=True, exist_ok=True)
    flags = ["clang", "-target", "bpf", "-O2", "-g", "-Wall", f"-I{bpf}", "-c"]
    sh(*flags, str(SRC / "reno_kfunc.bpf.c"), "-o", str(rk / "aqmlab_dctcp.bpf.o"))
    shutil.copy2(bpf / "aqmlab-bpfcc", rk / "aqmlab-bpfcc")
    sh(*flags, str(SRC / "catch_stack.bpf.c"), "-o", str(OUT / "catch_stack.bpf.o"))
    sh("cc", "-O2", "-Wall", "-o", str(OUT / "attach"), str(SRC / "attach.c"), "-lbpf")
    return rk


def kallsyms() -> tuple[list[int], list[str]]:
    syms = []
    with open("/proc/kallsyms") as f:
        for line in f:
            a, _, n = line.split()[:3]
            syms.append((int(a, 16), n))
    syms.sort()
    return [a for a, _ in syms], [n for _, n in syms]


def dump_stack() -> None:
    r = subprocess.run(["bpftool", "-j", "map", "dump", "name", "catch_st.bss"], capture_output=True, text=True)
    if r.returncode != 0:
        print("  (no stack map)", r.stderr.strip())
        return
    v: dict = {}
    for x in json.loads(r.stdout)[0]["formatted"]["value"][".bss"]:
        v.update(x)
    print(f"  stack catcher: CA-state changes to CWR {v['ncwr']}, with ssthresh >= 2^31 {v['nbig']}; first: ssthresh {v['ssth']} cwnd {v['cwnd']}")
    p = json.loads(subprocess.run(["bpftool", "-j", "prog", "show", "name", "t_state"], capture_output=True, text=True).stdout or "{}")
    print(f"  stack catcher's own recursion misses (runs skipped by the kernel): {p.get('recursion_misses', 0) if isinstance(p, dict) else p}")
    addrs, names = kallsyms()
    for a in v["stack"]:
        if not a:
            break
        i = bisect.bisect_right(addrs, a) - 1
        print(f"    {names[i]}+{a - addrs[i]:#x}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cc", choices=["port", "reno-kfunc"], default="reno-kfunc")
    ap.add_argument("--rps", choices=["on", "off"], default="on")
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--stack", action="store_true", help="record the kernel stack of the first hit (tracepoint)")
    a = ap.parse_args()
    rk = build()
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), AQMLAB_EMU_BPF_RPS="1" if a.rps == "on" else "0")
    if a.cc == "reno-kfunc":
        env["AQMLAB_BPF_DIR"] = str(rk)
    tmp = Path(tempfile.mkdtemp(prefix="bpf-anomaly-"))
    (tmp / "s.toml").write_text(SCENARIO)
    hits = 0
    for k in range(a.runs):
        catcher = None
        if a.stack:
            catcher = subprocess.Popen([str(OUT / "attach"), str(OUT / "catch_stack.bpf.o")], stdout=subprocess.PIPE, text=True)
            assert catcher.stdout is not None and catcher.stdout.readline().strip() == "attached"
        with open("/tmp/aqmlab-emu.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            before = set(Path("/tmp").glob("aqmlab-emu-*"))
            r = subprocess.run(
                [sys.executable, "-m", "aqmlab", "emulate", str(tmp / "s.toml"), "-o", str(tmp / f"out{k}"), "-q", "--keep-work"],
                env=env,
                capture_output=True,
                text=True,
            )
        work = sorted(set(Path("/tmp").glob("aqmlab-emu-*")) - before)
        stats = json.loads((work[-1] / "bpfcc-dctcp.stats.json").read_text()) if work and (work[-1] / "bpfcc-dctcp.stats.json").exists() else {}
        for w in work:
            shutil.rmtree(w, ignore_errors=True)
        hit = r.returncode != 0 and "2^31" in r.stderr
        hits += hit
        print(f"run {k + 1}: {'ANOMALY' if hit else 'clean' if r.returncode == 0 else 'error: ' + r.stderr.strip()[-300:]}")
        if hit:
            c = {x: y for x, y in stats.items() if x.startswith(("corrupt", "caught"))}
            if "caught_prev_op" in c:
                c["caught_prev_op"] = OPS.get(c["caught_prev_op"], c["caught_prev_op"])
            print("  counters:", c)
        if catcher is not None:
            if hit:
                dump_stack()
            catcher.send_signal(signal.SIGTERM)
            catcher.wait()
            catcher.stdout.close()  # type: ignore[union-attr]
    print(f"{hits} of {a.runs} runs with the anomaly (cc {a.cc}, RPS {a.rps}); load average {os.getloadavg()[0]:.1f}")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
