"""The emulator's traffic: real kernel TCP (and UDP for CBR flows) senders and a receiver,
one process per namespace.

Run inside a namespace by the orchestrator (``_emulate``), as a script so that it starts fast
(importing the ``aqmlab`` package would cost a second and pull in pandas):

    ip netns exec aqD-<tag> python3 aqmlab/emu/traffic.py receive --spec recv.json --out recv-out.json
    ip netns exec aqS0-<tag> python3 aqmlab/emu/traffic.py send --spec send0.json --out send0-out.json

(``python3 -m aqmlab.emu.traffic ...`` works as well.) Each process prints one line ``ready``
(flushed) once it is set up, waits for its scenario times on CLOCK_MONOTONIC — the clock every
namespace shares — and writes its JSON output atomically (temp + rename) when it ends, or
with ``"complete": false`` on SIGTERM/SIGINT.

Both are one thread: an event loop over non-blocking sockets (epoll) and a timer heap, so a
workload of thousands of short flows costs sockets, not threads. The loop waits in select(2)
on the epoll descriptor, whose timeout has microsecond resolution (epoll_wait's own is whole
milliseconds), so timers fire within the kernel's timer slack (≈ 50 µs) of their time when the
loop is idle.

Sender (one process per class): at t0 + a flow's start it opens the flow's socket and issues
the non-blocking connect — the time of that call is recorded (`connect_ns`, the start-time
accuracy), and of its completion (`connected_ns`). A TCP flow has the class's congestion control
set on its socket (``TCP_CONGESTION``, tcp(7)) and sends until t0 + duration (bulk), its stop,
or until ``size_bytes`` are written (finite); then it half-closes and waits for the receiver's
FIN, which says that every byte arrived: the flow is done, its last ``TCP_INFO`` is kept and
its socket closed. ``TCP_INFO`` of every connected socket is read at each measurement tick
t0 + k·interval (a done flow shows once more, from its last reading, as the simulator's time
series). A CBR flow is a connected UDP socket sending the simulator's datagrams
(crates/sim/src/tcp/cbr.rs `CbrSender::transmit`): 1472 payload bytes (1500 on the wire), datagram
k due at start + ⌊k·1500·8·10⁹ / rate⌋ ns, every datagram whose time has come sent at once, none
due at or after its stop or the run's end; a finite one's last datagram carries the rest. Its
socket's TOS byte carries the class's ECN codepoint (`ecn = "ect0"`/`"ect1"`).

Receiver: accepts every TCP connection and counts each one's payload bytes exactly — in total,
and those returned by ``recv`` at a time inside the window [t0 + warmup, t0 + duration) — and
the time of the last byte (a finite flow's completion); it closes a connection at its EOF.
One UDP socket counts every CBR flow's datagrams and payload bytes by source address and port
the same way. At every tick it records each flow's byte count, which gives the per-interval
throughput (delivered bytes, as the simulator's time series).

Nothing here simulates anything: it only moves bytes and reads clocks and kernel counters.
"""

from __future__ import annotations

import argparse
import errno
import heapq
import json
import os
import resource
import select
import selectors
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable
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
    ("state", "B"),
    ("ca_state", "B"),
    ("retransmits", "B"),
    ("probes", "B"),
    ("backoff", "B"),
    ("options", "B"),
    ("wscale", "B"),
    ("app_limited_bits", "B"),
    ("rto", "I"),
    ("ato", "I"),
    ("snd_mss", "I"),
    ("rcv_mss", "I"),
    ("unacked", "I"),
    ("sacked", "I"),
    ("lost", "I"),
    ("retrans", "I"),
    ("fackets", "I"),
    ("last_data_sent", "I"),
    ("last_ack_sent", "I"),
    ("last_data_recv", "I"),
    ("last_ack_recv", "I"),
    ("pmtu", "I"),
    ("rcv_ssthresh", "I"),
    ("rtt", "I"),
    ("rttvar", "I"),
    ("snd_ssthresh", "I"),
    ("snd_cwnd", "I"),
    ("advmss", "I"),
    ("reordering", "I"),
    ("rcv_rtt", "I"),
    ("rcv_space", "I"),
    ("total_retrans", "I"),
    ("pacing_rate", "Q"),
    ("max_pacing_rate", "Q"),
    ("bytes_acked", "Q"),
    ("bytes_received", "Q"),
    ("segs_out", "I"),
    ("segs_in", "I"),
    ("notsent_bytes", "I"),
    ("min_rtt", "I"),
    ("data_segs_in", "I"),
    ("data_segs_out", "I"),
    ("delivery_rate", "Q"),
    ("busy_time", "Q"),
    ("rwnd_limited", "Q"),
    ("sndbuf_limited", "Q"),
    ("delivered", "I"),
    ("delivered_ce", "I"),
    ("bytes_sent", "Q"),
    ("bytes_retrans", "Q"),
    ("dsack_dups", "I"),
    ("reord_seen", "I"),
    ("rcv_ooopack", "I"),
    ("snd_wnd", "I"),
    ("rcv_wnd", "I"),
    ("rehash", "I"),
    ("total_rto", "H"),
    ("total_rto_recoveries", "H"),
    ("total_rto_time", "I"),
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
#: Unsent bytes a sender keeps queued: the orchestrator's `notsent_lowat` in the spec
#: (`_emulate.notsent_lowat`: at least 256 KB, and 32 ms of the bottleneck rate), enough that a
#: sender loop busy elsewhere for a while still keeps the pipe full.

#: Application write / read size: large enough that the socket, not the loop, is the limit.
CHUNK = 256 * 1024


#: (name, offset, end, struct) of every field, computed once (tcp_info runs for every open
#: socket at every tick).
_TCP_INFO_LAYOUT: list[tuple[str, int, int, struct.Struct]] = []
_off = 0
for _name, _code in TCP_INFO_FIELDS:
    _st = struct.Struct("=" + _code)
    _TCP_INFO_LAYOUT.append((_name, _off, _off + _st.size, _st))
    _off += _st.size
del _off, _name, _code, _st


def tcp_info(sock: socket.socket) -> dict[str, int]:
    """The socket's `struct tcp_info`; fields a shorter (older-kernel) answer lacks are absent."""
    raw = sock.getsockopt(socket.IPPROTO_TCP, TCP_INFO, TCP_INFO_SIZE)
    n = len(raw)
    return {name: st.unpack_from(raw, off)[0] for name, off, end, st in _TCP_INFO_LAYOUT if end <= n}


#: TCP_CC_INFO is 26 in include/uapi/linux/tcp.h: the CC's own `get_info` (union tcp_cc_info,
#: include/uapi/linux/inet_diag.h). The kernel's BBR (tcp_bbr.c `bbr_get_info`) answers
#: struct tcp_bbr_info: bw_lo, bw_hi (bytes/s), min_rtt (µs), pacing_gain, cwnd_gain (<< 8).
#: An eBPF CC has no get_info: it answers nothing.
TCP_CC_INFO = 26
_BBR_INFO = struct.Struct("=IIIII")


def cc_info(sock: socket.socket, cc: str) -> dict[str, int]:
    """The CC's state where the kernel reports it (`ss -ti`'s `bbr:(bw:…,pacing_gain:…)`)."""
    if cc != "bbr":
        return {}
    raw = sock.getsockopt(socket.IPPROTO_TCP, TCP_CC_INFO, _BBR_INFO.size)
    if len(raw) < _BBR_INFO.size:
        return {}
    bw_lo, bw_hi, _, pacing_gain, cwnd_gain = _BBR_INFO.unpack(raw)
    return {"bbr_bw": bw_hi << 32 | bw_lo, "bbr_pacing_gain": pacing_gain, "bbr_cwnd_gain": cwnd_gain}


#: The simulator's CBR datagram (crates/sim/src/packet.rs): MTU_BYTES 1500 on the wire,
#: CBR_PAYLOAD_BYTES = 1500 − 20 (IP) − 8 (UDP) of payload.
CBR_WIRE_BYTES = 1500
CBR_PAYLOAD_BYTES = CBR_WIRE_BYTES - 28
#: SO_SNDBUFFORCE / SO_RCVBUFFORCE (include/uapi/asm-generic/socket.h): root may exceed
#: net.core.[rw]mem_max, so a burst of datagrams never finds a full socket buffer.
SO_SNDBUFFORCE = getattr(socket, "SO_SNDBUFFORCE", 32)
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)
UDP_BUF = 8 * 1024 * 1024


def now_ns() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


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


def set_timer_slack(ns: int = 1) -> None:
    """This process's timer slack (prctl(2) PR_SET_TIMERSLACK = 29): the kernel may otherwise
    fire a timer up to 50 µs late to batch wake-ups; a flow's start or a CBR datagram should
    not be. Best effort (the default slack only costs precision)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(29, ns, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - Linux with glibc always has it
        pass


def raise_fd_limit() -> None:
    """A workload keeps a socket per flow under way: allow as many descriptors as the hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# ------------------------------------------------------------------------------------------
# The event loop
# ------------------------------------------------------------------------------------------


class Loop:
    """Timers (a heap of absolute CLOCK_MONOTONIC times) and socket readiness (epoll), in one
    thread. `run_until(t)` runs every timer due and every ready socket's callback until the
    clock reaches t or `stop()` is called (from a signal handler)."""

    def __init__(self) -> None:
        self.sel = selectors.EpollSelector()
        self.timers: list[tuple[int, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = 0
        self.stopped = False

    def at(self, t_ns: int, fn: Callable[..., None], *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self.timers, (t_ns, self._seq, fn, args))

    def stop(self) -> None:
        self.stopped = True

    def run_until(self, t_end: int) -> None:
        sel, timers = self.sel, self.timers
        epfd = sel.fileno()
        while not self.stopped:
            now = now_ns()
            while timers and timers[0][0] <= now and not self.stopped:
                _, _, fn, args = heapq.heappop(timers)
                fn(*args)
                now = now_ns()
            if now >= t_end or self.stopped:
                return
            wake = min(timers[0][0], t_end) if timers else t_end
            # select(2) on the epoll descriptor: microsecond timeouts (epoll_wait rounds up to
            # whole milliseconds), woken by any registered socket's readiness. A long wait ends
            # 1 ms early and the rest is waited again, since a long select overshoots by more
            # than a short one even at 1 ns of timer slack (`set_timer_slack`; the figures in
            # bench/README.md §Emulator). At least every 50 ms, so that a signal's stop() is seen.
            left = wake - now
            timeout = left if left <= 2_000_000 else min(left - 1_000_000, 50_000_000)
            try:
                r, _, _ = select.select([epfd], [], [], timeout / 1e9)
            except InterruptedError:  # pragma: no cover - PEP 475 retries; a handler may stop us
                continue
            if r:
                for key, mask in sel.select(0):
                    key.data(mask)


# ------------------------------------------------------------------------------------------
# Sender
# ------------------------------------------------------------------------------------------


class _Flow:
    """What every sender flow has: its plan (scenario ns) and its socket."""

    def __init__(self, spec: dict[str, Any]):
        self.flow: int = spec["flow"]
        self.start_ns: int = spec["start_ns"]
        #: When the application stops writing (scenario ns); None = at the run's end.
        self.stop_ns: int | None = spec.get("stop_ns")
        self.size_bytes: int | None = spec.get("size_bytes")
        self.sock: socket.socket | None = None
        self.sport: int | None = None
        #: Absolute CLOCK_MONOTONIC time of the connect call.
        self.connect_ns: int | None = None
        self.error: str | None = None


class TcpFlow(_Flow):
    """One TCP connection's sender state."""

    cbr = False

    def __init__(self, spec: dict[str, Any]):
        super().__init__(spec)
        self.cc: str = spec["cc"]
        #: "planned", "connecting", "writing", "draining" (half-closed, waiting for the
        #: receiver's FIN), "closed".
        self.state = "planned"
        self.stop_pending = False
        #: Absolute CLOCK_MONOTONIC times (made relative to t0 in the output).
        self.connected_ns: int | None = None
        self.finished_writing_ns: int | None = None
        #: The receiver's FIN arrived: every byte written was received.
        self.done_ns: int | None = None
        self.written_bytes = 0
        self.left: int | None = self.size_bytes
        self.final_info: dict[str, int] | None = None


class CbrFlow(_Flow):
    """One unresponsive constant-bit-rate flow's sender state (a connected UDP socket)."""

    cbr = True

    def __init__(self, spec: dict[str, Any]):
        super().__init__(spec)
        self.rate_bps: int = spec["rate_bps"]
        #: The IP header's TOS byte, whose low two bits are the datagrams' ECN codepoint.
        self.tos: int = spec["tos"]
        #: Datagrams of a finite flow, and its last one's payload (the simulator's CbrSender::new).
        self.total: int | None = None
        self.last_payload = CBR_PAYLOAD_BYTES
        if self.size_bytes is not None:
            self.total = -(-self.size_bytes // CBR_PAYLOAD_BYTES)
            self.last_payload = self.size_bytes - (self.total - 1) * CBR_PAYLOAD_BYTES
        self.k = 0
        self.sent_payload = 0
        #: Absolute time the flow stopped sending for good (finite: its last datagram's send;
        #: stopped: its stop).
        self.finished_ns: int | None = None
        #: Datagrams the kernel refused (ENOBUFS, ...), counted as sent and lost at the source.
        self.send_errors = 0
        #: Times a due datagram found the socket buffer full (retried 100 µs later).
        self.blocked = 0
        #: Largest lateness of a datagram's send behind its due time, ns.
        self.late_max_ns = 0


class Sender:
    def __init__(self, spec: dict[str, Any]):
        self.spec = spec
        self.t0, self.iv = spec["t0_ns"], spec["interval_ns"]
        self.end = self.t0 + spec["duration_ns"]
        self.src, self.dst, self.port = spec["src"], spec["dst"], spec["port"]
        self.flows: list[TcpFlow | CbrFlow] = [CbrFlow(x) if x.get("cc") == "cbr" else TcpFlow(x) for x in spec["flows"]]
        self.loop = Loop()
        self.samples: list[dict[str, Any]] = []
        #: Flows the time series may still show (started, not done one interval ago).
        self.live: list[TcpFlow | CbrFlow] = []
        self.buf = memoryview(bytearray(CHUNK))
        self.dgram = bytearray(CBR_PAYLOAD_BYTES)

    # -- TCP ---------------------------------------------------------------------------------

    def start_tcp(self, f: TcpFlow) -> None:
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            f.sock = s
            s.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, f.cc.encode())
            # Abort on close (RST, no FIN_WAIT lingering) for a flow cut at the run's end: the
            # accounting ends at the deadline and the namespaces go away right after.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            # Keep at most notsent_lowat unsent bytes in the socket (tcp(7) TCP_NOTSENT_LOWAT): a
            # flow that stops writing then sends at most that much more, not megabytes of
            # autotuned send buffer.
            s.setsockopt(socket.IPPROTO_TCP, TCP_NOTSENT_LOWAT, self.spec["notsent_lowat"])
            s.bind((self.src, 0))
            s.setblocking(False)
            f.sport = s.getsockname()[1]
            f.connect_ns = now_ns()
            err = s.connect_ex((self.dst, self.port))
            if err not in (0, errno.EINPROGRESS):
                raise OSError(err, os.strerror(err))
        except OSError as e:
            self.fail(f, e)
            return
        f.state = "connecting"
        self.live.append(f)
        self.loop.sel.register(s, selectors.EVENT_WRITE, lambda mask, f=f: self.on_tcp(f, mask))

    def on_tcp(self, f: TcpFlow, mask: int) -> None:
        s = f.sock
        assert s is not None
        now = now_ns()
        try:
            if f.state == "connecting":
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    raise OSError(err, f"connect: {os.strerror(err)}")
                f.connected_ns = now
                f.state = "writing"
                if f.stop_pending:
                    self.finish_writing(f)
                    return
            if f.state == "writing":
                n = CHUNK if f.left is None else min(CHUNK, f.left)
                try:
                    sent = s.send(self.buf[:n])
                except BlockingIOError:
                    return
                f.written_bytes += sent
                if f.left is not None:
                    f.left -= sent
                    if f.left == 0:
                        # Finite flow written: FIN after the data, then wait for the receiver's.
                        self.finish_writing(f)
            elif f.state == "draining":
                try:
                    data = s.recv(4096)
                except BlockingIOError:
                    return
                if data == b"":
                    # The receiver's FIN: it read every byte to our FIN and closed.
                    f.done_ns = now
                    self.close_tcp(f)
        except OSError as e:
            self.fail(f, e)

    def finish_writing(self, f: TcpFlow) -> None:
        """No new data (finite flow written, or its stop): half-close; what is in the socket
        is still delivered, then the FIN."""
        assert f.sock is not None
        f.finished_writing_ns = now_ns()
        f.sock.shutdown(socket.SHUT_WR)
        f.state = "draining"
        self.loop.sel.modify(f.sock, selectors.EVENT_READ, lambda mask, f=f: self.on_tcp(f, mask))

    def stop_tcp(self, f: TcpFlow) -> None:
        """The flow's scheduled stop: the application writes nothing more."""
        if f.state == "writing":
            try:
                self.finish_writing(f)
            except OSError as e:
                self.fail(f, e)
        elif f.state in ("planned", "connecting"):
            f.stop_pending = True

    def close_tcp(self, f: TcpFlow) -> None:
        s = f.sock
        if s is None:
            return
        try:
            f.final_info = tcp_info(s) | cc_info(s, f.cc)
        except OSError:
            pass
        try:
            self.loop.sel.unregister(s)
        except (KeyError, ValueError):
            pass
        s.close()
        f.sock = None
        f.state = "closed"

    def fail(self, f: TcpFlow | CbrFlow, e: OSError) -> None:
        f.error = f"{type(e).__name__}: {e}"
        if isinstance(f, TcpFlow):
            self.close_tcp(f)
        elif f.sock is not None:
            f.sock.close()
            f.sock = None

    # -- CBR ---------------------------------------------------------------------------------

    def start_cbr(self, f: CbrFlow) -> None:
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            f.sock = s
            s.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, UDP_BUF)
            # A UDP socket's datagrams carry the ECN bits set here (TCP's the kernel sets itself).
            s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, f.tos)
            s.bind((self.src, 0))
            f.connect_ns = now_ns()
            s.connect((self.dst, self.port))
            s.setblocking(False)
            f.sport = s.getsockname()[1]
        except OSError as e:
            self.fail(f, e)
            return
        self.live.append(f)
        self.send_cbr(f)

    def send_cbr(self, f: CbrFlow) -> None:
        """Every datagram whose time has come (crates/sim/src/tcp/cbr.rs `CbrSender::transmit`), then
        a timer for the next one."""
        s = f.sock
        if s is None:
            return
        start = self.t0 + f.start_ns
        write_end = self.end if f.stop_ns is None else min(self.end, self.t0 + f.stop_ns)
        now = now_ns()
        while True:
            if f.total is not None and f.k >= f.total:
                return
            # Datagram k leaves at start + k·1500·8/rate, exactly (integer ns).
            due = start + (f.k * CBR_WIRE_BYTES * 8 * 1_000_000_000) // f.rate_bps
            if due >= write_end:
                if f.stop_ns is not None and write_end < self.end:
                    f.finished_ns = self.t0 + f.stop_ns
                return
            if due > now:
                self.loop.at(due, self.send_cbr, f)
                return
            payload = f.last_payload if f.total is not None and f.k == f.total - 1 else CBR_PAYLOAD_BYTES
            if payload >= 4:
                struct.pack_into("!I", self.dgram, 0, f.k & 0xFFFFFFFF)
            try:
                s.send(memoryview(self.dgram)[:payload])
            except BlockingIOError:
                f.blocked += 1
                self.loop.at(now + 100_000, self.send_cbr, f)
                return
            except OSError:
                # ENOBUFS, or ECONNREFUSED reporting an earlier ICMP error: this datagram is lost
                # at the source (counted), the flow goes on.
                f.send_errors += 1
            f.late_max_ns = max(f.late_max_ns, now - due)
            f.k += 1
            f.sent_payload += payload
            if f.total is not None and f.k == f.total:
                f.finished_ns = now
                return
            now = now_ns()

    # -- the run -----------------------------------------------------------------------------

    def tick(self, k: int) -> None:
        """TCP_INFO of every connected socket (and a done flow's last reading, once more); a
        CBR flow's row carries no TCP state, only which flow and when."""
        t = now_ns()
        keep: list[TcpFlow | CbrFlow] = []
        for f in self.live:
            if isinstance(f, CbrFlow):
                if f.finished_ns is not None and f.finished_ns + self.iv <= t:
                    continue
                keep.append(f)
                self.samples.append({"k": k, "t_ns": t - self.t0, "flow": f.flow, "cbr": True})
                continue
            if f.sock is not None:
                keep.append(f)
                if f.connected_ns is None:
                    continue
                try:
                    info = tcp_info(f.sock) | cc_info(f.sock, f.cc)
                except OSError:
                    continue
            elif f.done_ns is not None and f.done_ns + self.iv > t and f.final_info is not None:
                keep.append(f)
                info = f.final_info
            else:
                continue
            self.samples.append({"k": k, "t_ns": t - self.t0, "flow": f.flow, **{n: info.get(n) for n in SAMPLED}})
        self.live = keep
        nxt = self.t0 + (k + 1) * self.iv
        if nxt <= self.end:
            self.loop.at(nxt, self.tick, k + 1)

    def run(self) -> bool:
        loop = self.loop
        for f in self.flows:
            if self.t0 + f.start_ns >= self.end:
                continue  # starts after the run (the simulator never starts it either)
            if isinstance(f, CbrFlow):
                loop.at(self.t0 + f.start_ns, self.start_cbr, f)
            else:
                loop.at(self.t0 + f.start_ns, self.start_tcp, f)
                if f.stop_ns is not None and self.t0 + f.stop_ns < self.end:
                    loop.at(self.t0 + f.stop_ns, self.stop_tcp, f)
        if 0 < self.iv <= self.spec["duration_ns"]:
            loop.at(self.t0 + self.iv, self.tick, 1)
        ready()
        loop.run_until(self.end)
        complete = not loop.stopped
        for f in self.flows:
            if isinstance(f, TcpFlow):
                self.close_tcp(f)
            elif f.sock is not None:
                f.sock.close()
                f.sock = None
        return complete

    def output(self, complete: bool) -> dict[str, Any]:
        rel = lambda t: None if t is None else t - self.t0  # noqa: E731
        flows = []
        for f in self.flows:
            row: dict[str, Any] = {
                "flow": f.flow,
                "sport": f.sport,
                "start_ns": f.start_ns,
                "stop_ns": f.stop_ns,
                "size_bytes": f.size_bytes,
                "connect_ns": rel(f.connect_ns),
                "error": f.error,
            }
            if isinstance(f, CbrFlow):
                row.update(
                    {
                        "cc": "cbr",
                        "rate_bps": f.rate_bps,
                        "datagrams_sent": f.k,
                        "payload_sent": f.sent_payload,
                        "finished_ns": rel(f.finished_ns),
                        "send_errors": f.send_errors,
                        "blocked": f.blocked,
                        "late_max_ns": f.late_max_ns,
                    }
                )
            else:
                row.update(
                    {
                        "cc": f.cc,
                        "connected_ns": rel(f.connected_ns),
                        "written_bytes": f.written_bytes,
                        "finished_writing_ns": rel(f.finished_writing_ns),
                        "done_ns": rel(f.done_ns),
                        "final_info": f.final_info,
                    }
                )
            flows.append(row)
        return {"complete": complete, "flows": flows, "samples": self.samples}


def sender(spec: dict[str, Any], out: str) -> int:
    raise_fd_limit()
    set_timer_slack()
    snd = Sender(spec)
    signal.signal(signal.SIGTERM, lambda *_: snd.loop.stop())
    signal.signal(signal.SIGINT, lambda *_: snd.loop.stop())
    complete = snd.run()
    write_atomic(out, snd.output(complete))
    return 0


#: The TCP_INFO (and TCP_CC_INFO) fields kept in each time-series sample.
SAMPLED = (
    "ca_state",
    "snd_cwnd",
    "snd_ssthresh",
    "unacked",
    "sacked",
    "lost",
    "retrans",
    "rtt",
    "rttvar",
    "min_rtt",
    "pacing_rate",
    "delivery_rate",
    "total_retrans",
    "bytes_acked",
    "bytes_sent",
    "bytes_retrans",
    "delivered",
    "delivered_ce",
    "reord_seen",
    "snd_mss",
    "notsent_bytes",
    # Whether the flow was limited by something other than the network: bit 0 of the byte
    # at offset 7 is tcpi_delivery_rate_app_limited; busy/rwnd/sndbuf-limited times in µs.
    "app_limited_bits",
    "busy_time",
    "rwnd_limited",
    "sndbuf_limited",
    # The kernel BBR's own state (TCP_CC_INFO, `cc_info`).
    "bbr_bw",
    "bbr_pacing_gain",
    "bbr_cwnd_gain",
)


# ------------------------------------------------------------------------------------------
# Receiver
# ------------------------------------------------------------------------------------------


class Conn:
    """One flow's byte counts at the receiver: a TCP connection, or a CBR flow's datagrams
    (proto 17, by source address and port)."""

    def __init__(self, proto: int, peer: tuple[str, int], t: int):
        self.proto = proto
        self.peer = peer
        self.accepted_ns = t
        self.sock: socket.socket | None = None
        self.bytes = 0
        self.window_bytes = 0
        self.datagrams = 0
        #: Datagrams whose sequence number was below one already received.
        self.out_of_order = 0
        self.max_seq = -1
        self.first_byte_ns: int | None = None
        self.last_byte_ns: int | None = None
        self.eof_ns: int | None = None
        self.error: str | None = None
        self.final_info: dict[str, int] | None = None


class Receiver:
    def __init__(self, spec: dict[str, Any]):
        self.spec = spec
        self.t0, self.iv = spec["t0_ns"], spec["interval_ns"]
        self.end = self.t0 + spec["duration_ns"]
        self.lo, self.hi = self.t0 + spec["warmup_ns"], self.end
        self.loop = Loop()
        self.conns: list[Conn] = []
        self.udp: dict[tuple[str, int], Conn] = {}
        self.ticks: list[dict[str, Any]] = []
        self.buf = bytearray(CHUNK)
        self.view = memoryview(self.buf)
        # One TCP listener per receiver-side CC (DCTCP's CE state machine, an AccECN CC), on its
        # own port, and one with the namespace's default CC on `port`: a connection is
        # negotiated by its listener's CC (net/ipv4/tcp_input.c tcp_ecn_create_request: a
        # listener whose CC needs ECN or AccECN accepts it, whatever tcp_ecn says) and its
        # child inherits that CC (net/ipv4/tcp_cong.c tcp_ca_openreq_child). A listener shared
        # by CCs would have a classic-ECN CUBIC connection negotiated by Prague's, after which
        # it answers none of its marks.
        self.lsocks: list[socket.socket] = []
        for ln in spec.get("listeners") or [{"port": spec["port"], "cc": None}]:
            lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if ln["cc"] is not None:
                lsock.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, ln["cc"].encode())
            lsock.bind((spec["bind"], ln["port"]))
            lsock.listen(4096)
            lsock.setblocking(False)
            self.lsocks.append(lsock)
            self.loop.sel.register(lsock, selectors.EVENT_READ, lambda mask, ls=lsock: self.on_accept(ls))
        usock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        usock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, UDP_BUF)
        usock.bind((spec["bind"], spec["port"]))
        usock.setblocking(False)
        self.usock = usock
        self.loop.sel.register(usock, selectors.EVENT_READ, self.on_udp)

    def on_accept(self, lsock: socket.socket) -> None:
        while True:
            try:
                s, peer = lsock.accept()
            except BlockingIOError:
                return
            except OSError:  # ECONNABORTED and the like: the next one
                continue
            s.setblocking(False)
            c = Conn(6, peer, now_ns())
            c.sock = s
            self.conns.append(c)
            self.loop.sel.register(s, selectors.EVENT_READ, lambda mask, c=c: self.on_conn(c))

    def count(self, c: Conn, n: int, t: int) -> None:
        c.bytes += n
        if c.first_byte_ns is None:
            c.first_byte_ns = t
        c.last_byte_ns = t
        if self.lo <= t < self.hi:
            c.window_bytes += n

    def on_conn(self, c: Conn) -> None:
        s = c.sock
        assert s is not None
        try:
            n = s.recv_into(self.buf)
        except BlockingIOError:
            return
        except OSError as e:
            c.error = f"{type(e).__name__}: {e}"
            self.close(c)
            return
        t = now_ns()
        if n == 0:
            c.eof_ns = t
            self.close(c)
            return
        self.count(c, n, t)

    def on_udp(self, mask: int) -> None:
        # Everything queued now (bounded, so timers are not starved by a flood).
        for _ in range(256):
            try:
                n, addr = self.usock.recvfrom_into(self.buf)
            except BlockingIOError:
                return
            except OSError:
                continue
            t = now_ns()
            c = self.udp.get(addr)
            if c is None:
                c = Conn(17, addr, t)
                self.udp[addr] = c
                self.conns.append(c)
            c.datagrams += 1
            if n >= 4:
                seq = struct.unpack_from("!I", self.buf, 0)[0]
                if seq < c.max_seq:
                    c.out_of_order += 1
                c.max_seq = max(c.max_seq, seq)
            self.count(c, n, t)

    def close(self, c: Conn) -> None:
        s = c.sock
        if s is None:
            return
        try:
            c.final_info = tcp_info(s)
        except OSError:
            pass
        self.loop.sel.unregister(s)
        s.close()
        c.sock = None

    def tick(self, k: int) -> None:
        # Each flow's byte count: those still open, and those closed in the last two
        # intervals (a sender shows a done flow once more); never the thousands long gone.
        t = now_ns()
        horizon = t - 2 * self.iv
        # CBR flows (few; a datagram-less interval must read as 0, not as missing) always.
        rows = [
            [c.proto, c.peer[0], c.peer[1], c.bytes]
            for c in self.conns
            if c.proto == 17 or c.sock is not None or (c.eof_ns or 0) > horizon or (c.last_byte_ns or 0) > horizon
        ]
        self.ticks.append({"k": k, "bytes": rows})
        nxt = self.t0 + (k + 1) * self.iv
        if nxt <= self.end:
            self.loop.at(nxt, self.tick, k + 1)

    def run(self) -> bool:
        if 0 < self.iv <= self.spec["duration_ns"]:
            self.loop.at(self.t0 + self.iv, self.tick, 1)
        ready()
        # Until the end of the run plus the drain (late finite flows still count for FCT).
        self.loop.run_until(self.end + self.spec.get("drain_ns", 0))
        complete = not self.loop.stopped
        for c in self.conns:
            self.close(c)
        for lsock in self.lsocks:
            lsock.close()
        self.usock.close()
        return complete

    def output(self, complete: bool) -> dict[str, Any]:
        rel = lambda t: None if t is None else t - self.t0  # noqa: E731
        conns = []
        for c in self.conns:
            row: dict[str, Any] = {
                "proto": c.proto,
                "src": c.peer[0],
                "sport": c.peer[1],
                "bytes": c.bytes,
                "window_bytes": c.window_bytes,
                "accepted_ns": rel(c.accepted_ns),
                "first_byte_ns": rel(c.first_byte_ns),
                "last_byte_ns": rel(c.last_byte_ns),
                "eof_ns": rel(c.eof_ns),
                "error": c.error,
                "final_info": c.final_info,
            }
            if c.proto == 17:
                row.update({"datagrams": c.datagrams, "out_of_order": c.out_of_order})
            conns.append(row)
        return {"complete": complete, "conns": conns, "ticks": self.ticks}


def receiver(spec: dict[str, Any], out: str) -> int:
    raise_fd_limit()
    set_timer_slack()
    rcv = Receiver(spec)
    signal.signal(signal.SIGTERM, lambda *_: rcv.loop.stop())
    signal.signal(signal.SIGINT, lambda *_: rcv.loop.stop())
    complete = rcv.run()
    write_atomic(out, rcv.output(complete))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="aqmlab.emu.traffic", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("role", choices=("send", "receive"))
    p.add_argument("--spec", required=True, help="JSON spec written by the orchestrator")
    p.add_argument("--out", required=True, help="where to write the JSON output (atomically)")
    a = p.parse_args(argv)
    with open(a.spec, encoding="utf-8") as f:
        spec = json.load(f)
    return sender(spec, a.out) if a.role == "send" else receiver(spec, a.out)


if __name__ == "__main__":
    sys.exit(main())
