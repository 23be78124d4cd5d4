"""The emulator's traffic: real kernel TCP senders and a receiver, one process per namespace.

Run inside a namespace by the orchestrator (``_emulate``), as a script so that it starts fast
(importing the ``aqmlab`` package would cost a second and pull in pandas):

    ip netns exec aqD-<tag> python3 .../aqmlab/_traffic.py receive --spec recv.json --out recv-out.json
    ip netns exec aqS0-<tag> python3 .../aqmlab/_traffic.py send --spec send0.json --out send0-out.json

(``python3 -m aqmlab._traffic ...`` works as well.) Each process prints one line ``ready``
(flushed) once it is set up, waits for its scenario times on CLOCK_MONOTONIC — the clock every
namespace shares — and writes its JSON output atomically (temp + rename) when it ends, or
with ``"complete": false`` on SIGTERM/SIGINT.

Sender: one thread per flow. At t0 + the flow's start it opens a TCP connection with the
class's congestion control set on the socket (``TCP_CONGESTION``, tcp(7)), then sends until
t0 + duration (bulk) or until ``size_bytes`` are written (finite). A sampler thread reads
``TCP_INFO`` of every open socket at each measurement tick t0 + k·interval.

Receiver: one thread per accepted connection counting payload bytes exactly — in total, and
those returned by ``recv`` at a time inside the window [t0 + warmup, t0 + duration) — and the
time of the last byte (a finite flow's completion). A sampler records each connection's byte
count at every tick, which gives the per-interval throughput (delivered bytes, as the
simulator's time series).

Nothing here simulates anything: it only moves bytes and reads clocks and kernel counters.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import struct
import sys
import threading
import time
from typing import Any

# ------------------------------------------------------------------------------------------
# struct tcp_info (include/uapi/linux/tcp.h, Linux 6.7+; every field is native-endian)
# ------------------------------------------------------------------------------------------

#: The fields of `struct tcp_info` in declaration order with their struct codes. The eight
#: leading u8 (state .. the bit fields) are followed by u32/u64 fields with no padding, so
#: the offsets are: tcpi_rto 8, tcpi_unacked 24, tcpi_rtt 68, tcpi_snd_cwnd 80,
#: tcpi_total_retrans 100, tcpi_pacing_rate 104, tcpi_bytes_acked 120, tcpi_segs_out 136,
#: tcpi_delivery_rate 160, tcpi_delivered 192, tcpi_bytes_sent 200, tcpi_reord_seen 220,
#: tcpi_total_rto 240 (u16, 6.7), total size 248.
TCP_INFO_FIELDS: tuple[tuple[str, str], ...] = (
    ("state", "B"), ("ca_state", "B"), ("retransmits", "B"), ("probes", "B"),
    ("backoff", "B"), ("options", "B"), ("wscale", "B"), ("app_limited_bits", "B"),
    ("rto", "I"), ("ato", "I"), ("snd_mss", "I"), ("rcv_mss", "I"),
    ("unacked", "I"), ("sacked", "I"), ("lost", "I"), ("retrans", "I"), ("fackets", "I"),
    ("last_data_sent", "I"), ("last_ack_sent", "I"), ("last_data_recv", "I"), ("last_ack_recv", "I"),
    ("pmtu", "I"), ("rcv_ssthresh", "I"), ("rtt", "I"), ("rttvar", "I"),
    ("snd_ssthresh", "I"), ("snd_cwnd", "I"), ("advmss", "I"), ("reordering", "I"),
    ("rcv_rtt", "I"), ("rcv_space", "I"), ("total_retrans", "I"),
    ("pacing_rate", "Q"), ("max_pacing_rate", "Q"), ("bytes_acked", "Q"), ("bytes_received", "Q"),
    ("segs_out", "I"), ("segs_in", "I"), ("notsent_bytes", "I"), ("min_rtt", "I"),
    ("data_segs_in", "I"), ("data_segs_out", "I"),
    ("delivery_rate", "Q"), ("busy_time", "Q"), ("rwnd_limited", "Q"), ("sndbuf_limited", "Q"),
    ("delivered", "I"), ("delivered_ce", "I"),
    ("bytes_sent", "Q"), ("bytes_retrans", "Q"), ("dsack_dups", "I"), ("reord_seen", "I"),
    ("rcv_ooopack", "I"), ("snd_wnd", "I"), ("rcv_wnd", "I"), ("rehash", "I"),
    ("total_rto", "H"), ("total_rto_recoveries", "H"), ("total_rto_time", "I"),
)
TCP_INFO_FORMAT = "=" + "".join(code for _, code in TCP_INFO_FIELDS)
TCP_INFO_SIZE = struct.calcsize(TCP_INFO_FORMAT)

#: tcpi_ca_state values (include/uapi/linux/tcp.h, enum tcp_ca_state) by the names the
#: simulator's `ca_state` column uses (crates/sim/src/cc/mod.rs, CaState's Display).
CA_STATES = {0: "open", 1: "disorder", 2: "cwr", 3: "recovery", 4: "loss"}

#: TCP_CONGESTION is 13 in include/uapi/linux/tcp.h (Python's socket module has it too).
TCP_CONGESTION = getattr(socket, "TCP_CONGESTION", 13)
TCP_INFO = getattr(socket, "TCP_INFO", 11)

#: TCP_NOTSENT_LOWAT is 25 in include/uapi/linux/tcp.h.
TCP_NOTSENT_LOWAT = getattr(socket, "TCP_NOTSENT_LOWAT", 25)
#: Unsent bytes a sender keeps queued: 256 KB is 40 ms at 50 Mbit/s, 5 ms at 400 Mbit/s —
#: enough that a sender thread woken a little late still keeps the pipe full.
NOTSENT_LOWAT = 256 * 1024

#: Application write / read size: large enough that the socket, not the loop, is the limit.
CHUNK = 256 * 1024


def tcp_info(sock: socket.socket) -> dict[str, int]:
    """The socket's `struct tcp_info`; fields a shorter (older-kernel) answer lacks are absent."""
    raw = sock.getsockopt(socket.IPPROTO_TCP, TCP_INFO, TCP_INFO_SIZE)
    out: dict[str, int] = {}
    off = 0
    for name, code in TCP_INFO_FIELDS:
        size = struct.calcsize("=" + code)
        if off + size > len(raw):
            break
        out[name] = struct.unpack_from("=" + code, raw, off)[0]
        off += size
    return out


def now_ns() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def sleep_until(t_ns: int, stop: threading.Event) -> bool:
    """Sleep until CLOCK_MONOTONIC reaches `t_ns`; False if `stop` was set first."""
    while True:
        left = t_ns - now_ns()
        if left <= 0:
            return not stop.is_set()
        if stop.wait(min(left / 1e9, 0.05)):
            return False


def write_atomic(path: str, obj: Any) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)


def ready() -> None:
    sys.stdout.write("ready\n")
    sys.stdout.flush()


def install_stop(stop: threading.Event) -> None:
    def handler(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


# ------------------------------------------------------------------------------------------
# Sender
# ------------------------------------------------------------------------------------------


class Flow:
    """One connection's sender state (explicit, read by the sampler and the writer)."""

    def __init__(self, spec: dict[str, Any]):
        self.flow: int = spec["flow"]
        self.cc: str = spec["cc"]
        self.start_ns: int = spec["start_ns"]
        #: When the application stops writing (scenario ns); None = at the run's end.
        self.stop_ns: int | None = spec.get("stop_ns")
        #: First sample with nothing unacknowledged and nothing unsent after the last write.
        self.done_ns: int | None = None
        self.size_bytes: int | None = spec.get("size_bytes")
        self.sock: socket.socket | None = None
        self.sport: int | None = None
        self.connected_ns: int | None = None
        self.written_bytes = 0
        self.finished_writing_ns: int | None = None
        self.error: str | None = None
        self.final_info: dict[str, int] | None = None
        self.lock = threading.Lock()


def run_flow(f: Flow, spec: dict[str, Any], stop: threading.Event) -> None:
    t0, end = spec["t0_ns"], spec["t0_ns"] + spec["duration_ns"]
    if not sleep_until(t0 + f.start_ns, stop):
        return
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, f.cc.encode())
        # Abort on close (RST, no FIN_WAIT lingering): the run's accounting ends at the
        # deadline and the namespaces go away right after.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        # Keep at most NOTSENT_LOWAT unsent bytes in the socket (tcp(7) TCP_NOTSENT_LOWAT): a
        # flow that stops writing then sends at most that much more, not megabytes of
        # autotuned send buffer.
        s.setsockopt(socket.IPPROTO_TCP, TCP_NOTSENT_LOWAT, NOTSENT_LOWAT)
        s.bind((spec["src"], 0))
        s.settimeout(max(0.05, (end - now_ns()) / 1e9))
        s.connect((spec["dst"], spec["port"]))
        with f.lock:
            f.sock = s
            f.sport = s.getsockname()[1]
            f.connected_ns = now_ns()
        buf = memoryview(bytearray(CHUNK))
        left = f.size_bytes
        write_end = end if f.stop_ns is None else min(end, t0 + f.stop_ns)
        while not stop.is_set():
            t = now_ns()
            if t >= write_end:
                break
            s.settimeout(min(0.05, (write_end - t) / 1e9))
            n = CHUNK if left is None else min(CHUNK, left)
            if n == 0:
                break
            try:
                sent = s.send(buf[:n])
            except socket.timeout:
                continue
            f.written_bytes += sent
            if left is not None:
                left -= sent
        if left == 0 or (write_end < end and not stop.is_set()):
            # Finite flow written, or the flow's stop: no new data; what is in the socket is
            # still delivered (FIN after it). The socket stays open until the run's end.
            f.finished_writing_ns = now_ns()
            s.shutdown(socket.SHUT_WR)
            sleep_until(end, stop)
    except OSError as e:
        f.error = f"{type(e).__name__}: {e}"
    finally:
        with f.lock:
            if f.sock is not None:
                try:
                    f.final_info = tcp_info(f.sock)
                except OSError:
                    pass
                f.sock.close()
                f.sock = None


def sender(spec: dict[str, Any], out: str) -> int:
    stop = threading.Event()
    install_stop(stop)
    flows = [Flow(x) for x in spec["flows"]]
    samples: list[dict[str, Any]] = []
    t0, iv, end = spec["t0_ns"], spec["interval_ns"], spec["t0_ns"] + spec["duration_ns"]

    def sampler() -> None:
        k = 1
        while iv > 0 and sleep_until(t0 + k * iv, stop) and t0 + k * iv <= end:
            t = now_ns()
            for f in flows:
                with f.lock:
                    if f.sock is None:
                        continue
                    try:
                        info = tcp_info(f.sock)
                    except OSError:
                        continue
                # As the simulator's time series: a flow done (finite flow delivered, stopped
                # flow's last data acknowledged) shows one more sample, then none.
                if f.done_ns is None and f.finished_writing_ns is not None and info.get("unacked") == 0 and info.get("notsent_bytes") == 0:
                    f.done_ns = t
                if f.done_ns is not None and f.done_ns + iv <= t:
                    continue
                samples.append({"k": k, "t_ns": t - t0, "flow": f.flow, **{n: info.get(n) for n in SAMPLED}})
            k += 1

    threads = [threading.Thread(target=run_flow, args=(f, spec, stop), daemon=True) for f in flows]
    sth = threading.Thread(target=sampler, daemon=True)
    for th in threads:
        th.start()
    sth.start()
    ready()
    for th in threads:
        while th.is_alive() and not stop.is_set():
            th.join(0.1)
    stop.set()
    for th in threads:
        th.join(1.0)
    sth.join(1.0)
    write_atomic(
        out,
        {
            "complete": now_ns() >= end,
            "flows": [
                {
                    "flow": f.flow, "cc": f.cc, "sport": f.sport, "start_ns": f.start_ns, "stop_ns": f.stop_ns,
                    "connected_ns": None if f.connected_ns is None else f.connected_ns - t0,
                    "written_bytes": f.written_bytes, "size_bytes": f.size_bytes,
                    "finished_writing_ns": None if f.finished_writing_ns is None else f.finished_writing_ns - t0,
                    "error": f.error, "final_info": f.final_info,
                }
                for f in flows
            ],
            "samples": list(samples),
        },
    )
    return 0


#: The TCP_INFO fields kept in each time-series sample.
SAMPLED = (
    "ca_state", "snd_cwnd", "snd_ssthresh", "unacked", "sacked", "lost", "retrans", "rtt", "rttvar",
    "min_rtt", "pacing_rate", "delivery_rate", "total_retrans", "bytes_acked", "bytes_sent",
    "bytes_retrans", "delivered", "delivered_ce", "reord_seen", "snd_mss", "notsent_bytes",
    # Whether the flow was limited by something other than the network: bit 0 of the byte
    # at offset 7 is tcpi_delivery_rate_app_limited; busy/rwnd/sndbuf-limited times in µs.
    "app_limited_bits", "busy_time", "rwnd_limited", "sndbuf_limited",
)


# ------------------------------------------------------------------------------------------
# Receiver
# ------------------------------------------------------------------------------------------


class Conn:
    """One accepted connection's byte counts (explicit state)."""

    def __init__(self, peer: tuple[str, int]):
        self.peer = peer
        self.accepted_ns = now_ns()
        self.bytes = 0
        self.window_bytes = 0
        self.first_byte_ns: int | None = None
        self.last_byte_ns: int | None = None
        self.eof_ns: int | None = None
        self.final_info: dict[str, int] | None = None


def serve(sock: socket.socket, c: Conn, spec: dict[str, Any], stop: threading.Event) -> None:
    lo = spec["t0_ns"] + spec["warmup_ns"]
    hi = spec["t0_ns"] + spec["duration_ns"]
    buf = bytearray(CHUNK)
    sock.settimeout(0.05)
    try:
        while not stop.is_set():
            try:
                n = sock.recv_into(buf)
            except socket.timeout:
                continue
            t = now_ns()
            if n == 0:
                c.eof_ns = t
                break
            c.bytes += n
            if c.first_byte_ns is None:
                c.first_byte_ns = t
            c.last_byte_ns = t
            if lo <= t < hi:
                c.window_bytes += n
    except OSError:
        pass
    finally:
        try:
            c.final_info = tcp_info(sock)
        except OSError:
            pass
        sock.close()


def receiver(spec: dict[str, Any], out: str) -> int:
    stop = threading.Event()
    install_stop(stop)
    t0, iv = spec["t0_ns"], spec["interval_ns"]
    end = t0 + spec["duration_ns"]
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((spec["bind"], spec["port"]))
    lsock.listen(1024)
    lsock.settimeout(0.05)
    conns: list[Conn] = []
    ticks: list[dict[str, Any]] = []
    lock = threading.Lock()

    def sampler() -> None:
        k = 1
        while iv > 0 and sleep_until(t0 + k * iv, stop) and t0 + k * iv <= end:
            with lock:
                ticks.append({"k": k, "bytes": [[c.peer[0], c.peer[1], c.bytes] for c in conns]})
            k += 1

    sth = threading.Thread(target=sampler, daemon=True)
    sth.start()
    ready()
    workers: list[threading.Thread] = []
    # Accept until the end of the run plus the drain (late finite flows still count for FCT).
    stop_at = end + spec.get("drain_ns", 0)
    while not stop.is_set() and now_ns() < stop_at:
        try:
            s, peer = lsock.accept()
        except socket.timeout:
            continue
        c = Conn(peer)
        with lock:
            conns.append(c)
        th = threading.Thread(target=serve, args=(s, c, spec, stop), daemon=True)
        th.start()
        workers.append(th)
    complete = not stop.is_set()
    stop.set()
    for th in workers:
        th.join(1.0)
    sth.join(1.0)
    lsock.close()
    rel = lambda t: None if t is None else t - t0  # noqa: E731
    with lock:
        write_atomic(
            out,
            {
                "complete": complete,
                "conns": [
                    {
                        "src": c.peer[0], "sport": c.peer[1], "bytes": c.bytes, "window_bytes": c.window_bytes,
                        "accepted_ns": rel(c.accepted_ns), "first_byte_ns": rel(c.first_byte_ns),
                        "last_byte_ns": rel(c.last_byte_ns), "eof_ns": rel(c.eof_ns), "final_info": c.final_info,
                    }
                    for c in conns
                ],
                "ticks": ticks,
            },
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="aqmlab._traffic", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("role", choices=("send", "receive"))
    p.add_argument("--spec", required=True, help="JSON spec written by the orchestrator")
    p.add_argument("--out", required=True, help="where to write the JSON output (atomically)")
    a = p.parse_args(argv)
    with open(a.spec, encoding="utf-8") as f:
        spec = json.load(f)
    return sender(spec, a.out) if a.role == "send" else receiver(spec, a.out)


if __name__ == "__main__":
    sys.exit(main())
