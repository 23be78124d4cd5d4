"""DCTCP through STEP, traced on both backends: where does the kernel lose the link?

    sudo python3 bench/emu/dctcp_step_trace.py [--rate 100Mbps] [--rtt 5ms] [--k 0.17rtt]
        [--duration 8s] [--backend both|sim|emu] [--pcap] [--no-perf] [-o OUT]
    sudo AQMLAB_EMU_RECV_RT=0 python3 bench/emu/dctcp_step_trace.py ...   # the receiver at nice -10

Two DCTCP flows through STEP (K = --k), 50 ms buffer, as bench/emu/dctcp_oracle.py. Both
backends sample the router's queue and each flow's TCP state every 1 ms (`[measure] interval`).
On the emulator, `perf record -a` of the tcp:tcp_probe tracepoint (include/trace/events/tcp.h,
fired by tcp_rcv_established for every segment a socket receives) gives the senders' per-ACK
cwnd and in-flight (snd_nxt - snd_una); --pcap runs tcpdump on the first sender namespace's and
the receiver namespace's eth0: segments per ACK on the wire, how long a segment waits for its
ACK, and the senders' back-to-back trains. Everything runs with the emulator lock held, so the
only 10.77.x flows traced are this run's (tracefs must be mounted at /sys/kernel/tracing).
Prints one block of figures per backend; -o keeps the stores, perf.data and the pcaps.

Root for the emulator (perf, tcpdump, namespaces, the eBPF port: `make bpf`).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

import aqmlab  # noqa: E402
from aqmlab.emu import emulate as E  # noqa: E402
from aqmlab.scenario import units as u  # noqa: E402

MSS = 1448


def scenario(a: argparse.Namespace) -> aqmlab.Scenario:
    return aqmlab.Scenario(
        name="dctcp-step-trace",
        duration=a.duration,
        warmup=a.warmup,
        seed=a.seed,
        bottleneck={"rate": a.rate, "buffer": "50ms", "aqm": {"kind": "step", "target": a.k}},
        flows=[{"cc": "dctcp", "count": a.flows, "rtt": a.rtt}],
        measure={"interval": "1ms"},
    )


PROBE = re.compile(
    r"\s(\d+\.\d+):\s+tcp:tcp_probe:.*src=([\d.]+):(\d+) dest=([\d.]+):(\d+) .*data_len=(\d+) "
    r"snd_nxt=0x([0-9a-f]+) snd_una=0x([0-9a-f]+) snd_cwnd=(\d+) ssthresh=(\d+) .*srtt=(\d+)"
)


def start_pcaps(out: Path, stop: threading.Event) -> list[subprocess.Popen]:
    """tcpdump (headers only) on the first sender namespace's and the receiver namespace's eth0
    as soon as the testbed has them: the ACKs as they leave the receiver and as they reach the
    senders, before either socket processes them."""
    procs: list[subprocess.Popen] = []

    def watch() -> None:
        want = {"aqS0-": "sender", "aqD-": "receiver"}
        while want and not stop.is_set():
            names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
            for prefix, role in list(want.items()):
                ns = next((n for n in names if n.startswith(prefix)), None)
                up = ns and "state UP" in subprocess.run(["ip", "-n", ns, "link", "show", "eth0"], capture_output=True, text=True).stdout
                if up:
                    procs.append(
                        subprocess.Popen(
                            [
                                "ip",
                                "netns",
                                "exec",
                                ns,
                                "tcpdump",
                                "-q",
                                "-n",
                                "-s",
                                "96",
                                "--time-stamp-precision",
                                "nano",
                                "-i",
                                "eth0",
                                "-w",
                                str(out / f"{role}.pcap"),
                                "tcp",
                            ],
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                        )
                    )
                    del want[prefix]
            time.sleep(0.05)

    threading.Thread(target=watch, daemon=True).start()
    return procs


PCAP = re.compile(r"^(\d+\.\d+) IP ([\d.]+)\.(\d+) > ([\d.]+)\.(\d+): Flags \[([^\]]*)\](?:, seq (\d+)(?::(\d+))?)?(?:, ack (\d+))?, win (\d+).*length (\d+)")


def load_pcap(path: Path) -> pd.DataFrame:
    txt = subprocess.run(["tcpdump", "-r", str(path), "-n", "-S", "-tt", "--nano"], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in txt.splitlines():
        m = PCAP.match(line)
        if not m:
            continue
        t, s, sp, d, dp, fl, seq, seqe, ack, win, ln = m.groups()
        rows.append((float(t), s, int(sp), d, int(dp), fl, int(seq) if seq else -1, int(seqe) if seqe else -1, int(ack) if ack else -1, int(win), int(ln)))
    return pd.DataFrame(rows, columns="t src sport dst dport flags seq seqe ack win len".split())


def pcap_figures(d: Path, warm: float, pkts_per_ms: float) -> None:
    """The receiver's ACKs as they leave it (segments per ACK, how long a segment waits for
    the ACK covering it) and the sender's data as it leaves (trains of back-to-back packets)."""
    for role in ("receiver", "sender"):
        df = load_pcap(d / f"{role}.pcap")
        df = df[df.t >= df.t.min() + warm]
        data = df[df.len > 0]
        acks = df[(df.len == 0) & (df.src == "10.77.200.2")]
        print(f"{role} eth0: {len(data)} data, {len(acks)} ACKs")
        for port, a in acks.groupby("dport"):
            a = a.sort_values("t")
            segs = np.diff(a.ack.to_numpy()) % (1 << 32) / MSS
            segs = segs[segs > 0]
            q = np.percentile(segs, [50, 90, 99])
            print(
                f"  flow {port}: segments/ACK mean {segs.mean():.2f} p50 {q[0]:.0f} p90 {q[1]:.0f} p99 {q[2]:.0f} "
                f"max {segs.max():.0f}; ACKs of > 2 segments {(segs > 2).mean():.3f}; ECE {a['flags'].str.contains('E').mean():.3f}"
            )
            if role != "receiver":
                continue
            dd = data[data.sport == port].sort_values("t")
            at, cm = a.t.to_numpy(), np.maximum.accumulate(a.ack.to_numpy())
            j = np.searchsorted(at, dd.t.to_numpy())
            wait = [at[jj + k] - tt for tt, se, jj in zip(dd.t.to_numpy(), dd.seqe.to_numpy(), j) if jj + (k := int(np.searchsorted(cm[jj:], se))) < len(at)]
            w = np.array(wait) * 1e6
            g = np.diff(dd.t.to_numpy()) * 1e6
            print(
                f"  flow {port}: a segment waits for its ACK p50 {np.percentile(w, 50):.0f} p90 {np.percentile(w, 90):.0f} "
                f"p99 {np.percentile(w, 99):.0f} us; segments arrive {np.percentile(g, 50):.0f} us apart (p50), "
                f"{(g < 60).mean():.3f} closer than 60 us"
            )
        if role == "sender":
            dt = data.sort_values("t").t.to_numpy()
            g = np.diff(dt) * 1e6
            trains = np.array([len(b) for b in np.split(dt, np.where(g >= 30)[0] + 1)])  # < 30 us apart
            h = np.histogram(dt, np.arange(dt[0], dt[-1], 0.0005))[0]
            print(
                f"  data trains (< 30 us apart): mean {trains.mean():.2f} p99 {np.percentile(trains, 99):.0f} max {trains.max()}; "
                f"packets in trains >= 6: {trains[trains >= 6].sum() / trains.sum():.3f}; sent per 0.5 ms p99 "
                f"{np.percentile(h, 99):.0f} max {h.max()} (the link drains {pkts_per_ms / 2:.1f})"
            )


def parse_perf(data: Path) -> pd.DataFrame:
    """The senders' side of tcp_probe: one row per ACK a sender's socket received (the
    socket's own address is src, a sender's; data_len 0)."""
    txt = subprocess.run(["perf", "script", "-i", str(data)], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in txt.splitlines():
        m = PROBE.search(line)
        if not m or m.group(2).startswith("10.77.200.") or int(m.group(6)) != 0:
            continue
        rows.append((float(m.group(1)), int(m.group(3)), int(m.group(7), 16), int(m.group(8), 16), int(m.group(9)), int(m.group(10)), int(m.group(11))))
    return pd.DataFrame(rows, columns=["t", "port", "snd_nxt", "snd_una", "cwnd", "ssthresh", "srtt_us"])


def ack_figures(tr: pd.DataFrame, warm_frac: float) -> dict:
    out = {}
    per = []
    for port, g in tr.groupby("port"):
        g = g.sort_values("t")
        g = g[g.t >= g.t.min() + warm_frac * (g.t.max() - g.t.min())]
        una = g.snd_una.astype(np.int64).to_numpy()
        acked = (np.diff(una) % (1 << 32)) / MSS  # segments newly acked by the next ACK
        inflight = ((g.snd_nxt.astype(np.int64) - g.snd_una.astype(np.int64)) % (1 << 32)) / MSS
        gap = np.diff(g.t.to_numpy()) * 1e6
        per.append(
            dict(
                port=port,
                acks=len(g),
                cwnd=g.cwnd.mean(),
                inflight=inflight.mean(),
                acked_per_ack=acked[acked > 0].mean(),
                gap_p50_us=np.median(gap),
                gap_lt_20us=(gap < 20).mean(),
                srtt_ms=g.srtt_us.mean() / 1e3,
            )
        )
    out["flows"] = per
    return out


def queue_figures(res: aqmlab.Result, warm: float, k_pkts: float) -> dict:
    q = res.queue
    q = q[q.t_s >= warm]
    u = q.utilization.to_numpy()
    return dict(
        util=res.summary["metrics"]["utilization"],
        mark=res.summary["metrics"]["mark_ratio"],
        q_mean_pkts=q.qlen_pkts.mean(),
        q_p99_pkts=q.qlen_pkts.quantile(0.99),
        frac_ms_empty=(q.qlen_pkts == 0).mean(),
        frac_ms_above_k=(q.qlen_pkts > k_pkts).mean(),
        frac_ms_util_lt_0_5=(u < 0.5).mean(),
        mean_util_ms=u.mean(),
    )


def flow_ts(res: aqmlab.Result, warm: float) -> dict:
    ts = res.timeseries
    ts = ts[ts.t_s >= warm]
    return dict(cwnd=ts.cwnd.mean(), inflight=ts.inflight.mean(), srtt_ms=ts.srtt_ms.mean(), frac_cwr=(ts.ca_state.astype(str).str.lower() == "cwr").mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", default="100Mbps")
    ap.add_argument("--rtt", default="5ms")
    ap.add_argument("--k", default="0.17rtt")
    ap.add_argument("--flows", type=int, default=2)
    ap.add_argument("--duration", default="8s")
    ap.add_argument("--warmup", default="3s")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--backend", choices=["both", "sim", "emu"], default="both")
    ap.add_argument("--no-perf", action="store_true")
    ap.add_argument("--pcap", action="store_true", help="tcpdump the sender's and the receiver's eth0")
    ap.add_argument("-o", "--out", type=Path)
    a = ap.parse_args()
    s = scenario(a)
    warm = u.parse_time(a.warmup) / 1e9
    rate_bps = u.parse_rate(a.rate)
    rtt_s = u.parse_time(a.rtt) / 1e9
    k_s = float(a.k.removesuffix("rtt")) * rtt_s if a.k.endswith("rtt") else u.parse_time(a.k) / 1e9
    k_pkts = k_s * rate_bps / (1500 * 8)
    print(f"BDP {rate_bps * rtt_s / (1500 * 8):.1f} pkts, K {k_s * 1e3:.3f} ms = {k_pkts:.1f} pkts")
    out = a.out or Path(tempfile.mkdtemp(prefix="dctcp-step-trace-"))
    out.mkdir(parents=True, exist_ok=True)
    if a.backend in ("both", "sim"):
        r = aqmlab.run(s)
        print("sim  queue:", {k: round(v, 4) for k, v in queue_figures(r, warm, k_pkts).items()})
        print("sim  flows:", {k: round(v, 3) for k, v in flow_ts(r, warm).items()})
    if a.backend in ("both", "emu"):
        with open("/tmp/aqmlab-emu.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            load = os.getloadavg()[0]
            perf = None
            if not a.no_perf:
                perf = subprocess.Popen(
                    ["perf", "record", "-q", "-a", "-e", "tcp:tcp_probe", "-o", str(out / "perf.data")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                )
            stop = threading.Event()
            pcaps = start_pcaps(out, stop) if a.pcap else []
            try:
                emu_dir = out / "emu"
                if emu_dir.exists():
                    shutil.rmtree(emu_dir)
                r = E.emulate(s, emu_dir)
            finally:
                stop.set()
                for p in pcaps:
                    p.send_signal(signal.SIGINT)
                    p.wait()
                if perf:
                    perf.send_signal(signal.SIGINT)
                    perf.wait()
        print(
            f"emu  (load average {load:.1f} at start, {os.getloadavg()[0]:.1f} at end; late_p99 "
            f"{r.summary['counters'].get('late_p99_ns', float('nan')) / 1e3 if 'counters' in r.summary else 'n/a'} us)"
        )
        print("emu  queue:", {k: round(v, 4) for k, v in queue_figures(r, warm, k_pkts).items()})
        print("emu  flows (TCP_INFO 1 ms):", {k: round(v, 3) for k, v in flow_ts(r, warm).items()})
        ti = pq.read_table(emu_dir / "tcp_info.parquet").to_pandas()
        ti = ti[ti.t_s >= warm]
        cols = [c for c in ("min_rtt_us", "rtt_us", "snd_cwnd", "unacked", "ca_state", "delivered_ce", "delivered") if c in ti.columns]
        print("emu  tcp_info means:", ti[cols].mean(numeric_only=True).round(2).to_dict())
        if perf:
            tr = parse_perf(out / "perf.data")
            tr.to_parquet(out / "acks.parquet")
            frac = warm / float(a.duration[:-1])
            for f in ack_figures(tr, frac)["flows"]:
                print("emu  per-ACK:", {k: (round(v, 3) if isinstance(v, float) else v) for k, v in f.items()})
        if a.pcap:
            pcap_figures(out, warm, rate_bps / (1500 * 8) / 1e3)
    print("stores in", out)


if __name__ == "__main__":
    main()
