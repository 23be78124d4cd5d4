"""The eBPF port of TCP Prague (bpf/aqmlab_prague.bpf.c) on the wire of this kernel.

Two network namespaces (``aqprS-<tag>`` sender, ``aqprD-<tag>`` receiver) joined by one veth,
TSO/GSO/GRO off and gso_max_segs 1 so that one skb is one segment; the port registered by the loader
(target/bpf/aqmlab-bpfcc) as ``aqmlab_prague`` and selected with TCP_CONGESTION on the
sender's socket and on the receiver's listener (a listener accepts an AccECN SYN only if its
CC needs AccECN: net/ipv4/tcp_input.c tcp_ecn_create_request, since net.ipv4.tcp_ecn refuses
3 here); a few seconds of bulk transfer by a small Python sender and receiver; tcpdump on the
sender's veth. Two runs: a clean path, and one through bpf/aqmlab_cemark.bpf.c, a tc classifier
that sets CE on every 4th ECN-capable data packet (this kernel has no sch_dualpi2,
sch_fq_codel, sch_red or sch_netem).

Expected values come from outside the port: the AE/CWR/ECE codepoints of RFC 9768
(§3.1.1, Tables 2 and 4), the IP ECN codepoints of RFC 3168 §5 / RFC 9331, the marker's
construction (floor(n/4) marks in n segments) and the hand-computed EWMA of tcp_prague.c
(alpha_k = F·(1 − (15/16)^k) from alpha_0 = 0 at a constant marked fraction F).

Needs root, network namespaces, the kernel's BTF, ``make bpf`` (the objects and the loader),
tcpdump, tc and ethtool; skipped otherwise, with the reason. Runs in ~15 s.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import _testbed
import pytest

pytestmark = pytest.mark.emulator

ROOT = Path(__file__).resolve().parents[1]
BPF_DIR = Path(os.environ.get("AQMLAB_BPF_DIR", ROOT / "target" / "bpf"))
LOADER = BPF_DIR / "aqmlab-bpfcc"
PRAGUE = BPF_DIR / "aqmlab_prague.bpf.o"
CEMARK = BPF_DIR / "aqmlab_cemark.bpf.o"
CC = "aqmlab_prague"  # the struct_ops name; no kernel CC is called so
KERNEL_BTF = Path("/sys/kernel/btf/vmlinux")
AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")

SND_ADDR, RCV_ADDR, PORT = "10.79.0.1", "10.79.0.2", 5201
CLEAN_SECONDS, MARKED_SECONDS = 1.0, 4.0

# IP ECN field (RFC 3168 §5).
NOT_ECT, ECT1, ECT0, CE = 0b00, 0b01, 0b10, 0b11
# PRAGUE_MAX_ALPHA of tcp_prague.c: alpha = 1.0 in the port's counters.
ALPHA_ONE = 1 << 24


def _registered() -> list[str]:
    try:
        return AVAILABLE.read_text().split()
    except OSError:
        return []


def _missing() -> str | None:
    why = _testbed.testbed_missing()
    if why:
        return why
    if not KERNEL_BTF.exists():
        return f"no {KERNEL_BTF}: the kernel cannot run struct_ops congestion controls"
    for p in (LOADER, PRAGUE, CEMARK):
        if not p.is_file():
            return f"{p} is missing: build it with `make bpf`"
    for tool in ("ip", "tc", "tcpdump", "ethtool"):
        if not shutil.which(tool):
            return f"{tool} is not installed"
    if CC in _registered():
        return f"{CC} is already registered (another run, or a leftover: `aqmlab emulate --cleanup`)"
    return None


_WHY = _missing()
needs_testbed = pytest.mark.skipif(_WHY is not None, reason=f"eBPF Prague on the wire: {_WHY}")

# The peers, run with this interpreter inside the namespaces. TCP_INFO is read by offset
# (include/uapi/linux/tcp.h struct tcp_info, as in 6.18; 280 bytes with the AccECN fields).
_PEER = r"""
import json, socket, struct, sys, time
TCP_CONGESTION, TCP_NOTSENT_LOWAT = 13, 25
FIELDS = {"options": ("B", 5), "unacked": ("I", 24), "rtt_us": ("I", 68), "snd_ssthresh": ("I", 76),
          "snd_cwnd": ("I", 80), "bytes_acked": ("Q", 120), "notsent_bytes": ("I", 144),
          "data_segs_in": ("I", 152), "data_segs_out": ("I", 156), "delivered": ("I", 192),
          "delivered_ce": ("I", 196), "received_ce": ("I", 248), "delivered_e1_bytes": ("I", 252),
          "delivered_e0_bytes": ("I", 256), "delivered_ce_bytes": ("I", 260),
          "received_e1_bytes": ("I", 264), "received_e0_bytes": ("I", 268),
          "received_ce_bytes": ("I", 272), "accecn_fail_mode": ("H", 276), "accecn_opt_seen": ("H", 278)}
def info(s):
    b = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 512)
    d = {k: struct.unpack_from(f, b, o)[0] for k, (f, o) in FIELDS.items() if o + struct.calcsize(f) <= len(b)}
    d["tcp_info_len"] = len(b)
    d["cc"] = s.getsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, 16).rstrip(b"\0").decode()
    return d
role, cc, addr, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if role == "recv":
    l = socket.socket()
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, cc.encode())
    l.bind((addr, port)); l.listen(1)
    print("listening", flush=True)
    c, _ = l.accept(); n = 0
    while True:
        x = c.recv(1 << 20)
        if not x:
            break
        n += len(x)
    print(json.dumps({"bytes": n, **info(c)}), flush=True)
else:
    seconds = float(sys.argv[5])
    s = socket.socket()
    s.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, cc.encode())
    # Bound what waits unsent in the socket, so that the end drains in well under a second.
    s.setsockopt(socket.IPPROTO_TCP, TCP_NOTSENT_LOWAT, 32768)
    s.connect((addr, port)); s.settimeout(0.2)
    buf = b"\x55" * 65536; t0 = time.monotonic(); sent = 0
    while time.monotonic() - t0 < seconds:
        try:
            sent += s.send(buf)
        except socket.timeout:
            pass
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        d = info(s)
        if not d["unacked"] and not d["notsent_bytes"]:
            break
        time.sleep(0.01)
    out = info(s)
    s.shutdown(socket.SHUT_WR); s.settimeout(5)
    try:
        s.recv(1)
    except OSError:
        pass
    s.close()
    print(json.dumps({"sent": sent, "seconds": time.monotonic() - t0, **out}), flush=True)
"""


@dataclass
class Packet:
    src: str
    ecn: int  # IP ECN field
    ae: bool
    cwr: bool
    ece: bool
    syn: bool
    ack: bool
    payload: int


@dataclass
class Run:
    marked: bool
    sender: dict[str, Any]
    receiver: dict[str, Any]
    stats: dict[str, Any]
    packets: list[Packet]
    #: The CE marker's own counters (its .bss): ECN-capable data packets seen, and marked.
    marker: dict[str, int]

    def alpha(self, key: str) -> float:
        return self.stats[key] / ALPHA_ONE


def _marker_counts() -> dict[str, int]:
    """The attached CE marker's counters, read with bpftool from its .bss map."""
    progs = json.loads(_sh("bpftool", "-j", "prog", "show", "name", "aqmlab_cemark").stdout)
    progs = progs if isinstance(progs, list) else [progs]
    if len(progs) != 1:
        raise RuntimeError(f"expected one aqmlab_cemark program, found {len(progs)}")
    (map_id,) = progs[0]["map_ids"]
    (entry,) = json.loads(_sh("bpftool", "-j", "map", "dump", "id", str(map_id)).stdout)
    return {k: v for field in entry["formatted"]["value"][".bss"] for k, v in field.items()}


def _sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=30, check=False)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip() or r.stdout.strip()}")
    return r


def _readline(stream: Any, timeout: float) -> str:
    line: list[str] = []
    th = threading.Thread(target=lambda: line.append(stream.readline()), daemon=True)
    th.start()
    th.join(timeout)
    return line[0].strip() if line else ""


def _parse_pcap(path: Path) -> list[Packet]:
    """IPv4/TCP packets of a classic pcap file (Ethernet link type)."""
    data = path.read_bytes()
    magic = struct.unpack_from("<I", data, 0)[0]
    end = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    assert struct.unpack_from(end + "I", data, 20)[0] == 1, "not an Ethernet capture"
    off, out = 24, []
    while off + 16 <= len(data):
        incl = struct.unpack_from(end + "I", data, off + 8)[0]
        frame = data[off + 16 : off + 16 + incl]
        off += 16 + incl
        if len(frame) < 14 + 20 or frame[12:14] != b"\x08\x00":
            continue
        ip = frame[14:]
        ihl = (ip[0] & 0x0F) * 4
        if ip[9] != 6 or len(ip) < ihl + 14:
            continue
        tcp = ip[ihl:]
        doff = (tcp[12] >> 4) * 4
        flags = tcp[13]
        out.append(
            Packet(
                src=".".join(str(b) for b in ip[12:16]),
                ecn=ip[1] & 0b11,
                ae=bool(tcp[12] & 0x01),  # RFC 9768 §3.2.1: AE is bit 7 of byte 12 (ex-NS)
                cwr=bool(flags & 0x80),
                ece=bool(flags & 0x40),
                syn=bool(flags & 0x02),
                ack=bool(flags & 0x10),
                payload=struct.unpack_from(">H", ip, 2)[0] - ihl - doff,
            )
        )
    return out


def _run(tmp: Path, marked: bool, seconds: float) -> Run:
    """One transfer through a fresh pair of namespaces; everything it creates is removed."""
    tag = secrets.token_hex(4)
    snd, rcv = f"aqprS-{tag}", f"aqprD-{tag}"
    pcap = tmp / "sender.pcap"
    procs: list[subprocess.Popen[str]] = []
    loader = subprocess.Popen(
        [str(LOADER), str(PRAGUE)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        ready = _readline(loader.stdout, 20)
        if ready != f"ready {CC}" or CC not in _registered():
            raise RuntimeError(f"registering {CC} failed: {ready!r}")
        _sh("ip", "netns", "add", snd)
        _sh("ip", "netns", "add", rcv)
        _sh("ip", "link", "add", "aqpr0", "netns", snd, "type", "veth", "peer", "aqpr1", "netns", rcv)
        for ns, dev, addr in ((snd, "aqpr0", SND_ADDR), (rcv, "aqpr1", RCV_ADDR)):
            _sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            _sh("ip", "-n", ns, "link", "set", dev, "up")
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
            _sh("ip", "netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off")
            # TCP builds GSO skbs even for a device without GSO, segmented only after clsact
            # egress (net/core/dev.c validate_xmit_skb): one segment per skb, so that the
            # marker's every 4th skb is every 4th segment.
            _sh("ip", "-n", ns, "link", "set", dev, "gso_max_segs", "1")
        if marked:
            _sh("ip", "netns", "exec", snd, "tc", "qdisc", "add", "dev", "aqpr0", "clsact")
            _sh("ip", "netns", "exec", snd, "tc", "filter", "add", "dev", "aqpr0", "egress", "bpf", "direct-action", "obj", str(CEMARK), "sec", "tc")
        # Headers only, the first 3000 TCP packets: the handshake and ~1500 data segments.
        dump = subprocess.Popen(
            ["ip", "netns", "exec", snd, "tcpdump", "-i", "aqpr0", "-n", "-s", "96", "-c", "3000", "-U", "-w", str(pcap), "tcp"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        procs.append(dump)
        if "listening" not in _readline(dump.stderr, 10):
            raise RuntimeError("tcpdump did not start")
        recv = subprocess.Popen(
            ["ip", "netns", "exec", rcv, sys.executable, "-c", _PEER, "recv", CC, RCV_ADDR, str(PORT)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        procs.append(recv)
        if _readline(recv.stdout, 10) != "listening":
            raise RuntimeError(f"receiver did not start: {recv.stderr.read() if recv.poll() is not None else ''}")
        send = subprocess.run(
            ["ip", "netns", "exec", snd, sys.executable, "-c", _PEER, "send", CC, RCV_ADDR, str(PORT), str(seconds)],
            capture_output=True,
            text=True,
            timeout=seconds + 20,
            check=False,
        )
        if send.returncode != 0:
            raise RuntimeError(f"sender: {send.stderr.strip()}")
        rout, rerr = recv.communicate(timeout=10)
        if recv.returncode != 0:
            raise RuntimeError(f"receiver: {rerr.strip()}")
        time.sleep(0.2)
        if dump.poll() is None:
            dump.terminate()
        dump.wait(timeout=5)
        sender = json.loads(send.stdout.strip().splitlines()[-1])
        receiver = json.loads(rout.strip().splitlines()[-1])
        marker = _marker_counts() if marked else {}
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            for f in (p.stdout, p.stderr):
                if f:
                    f.close()
        for ns in (snd, rcv):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
        # EOF: the loader prints the CC's counters and exits; the kernel unregisters the CC.
        try:
            out, _ = loader.communicate(input="", timeout=10)
        except (subprocess.TimeoutExpired, ValueError, OSError):
            loader.kill()
            out = ""
        for f in (loader.stdin, loader.stdout, loader.stderr):
            if f and not f.closed:
                f.close()
        loader.wait()
    last = out.strip().splitlines()[-1] if out.strip() else "{}"
    stats = json.loads(last) if last.startswith("{") else {}
    return Run(marked, sender, receiver, stats, _parse_pcap(pcap), marker)


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    if _WHY:
        pytest.skip(_WHY)
    yield _run(tmp_path_factory.mktemp("prague-clean"), marked=False, seconds=CLEAN_SECONDS)


@pytest.fixture(scope="module")
def marked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    if _WHY:
        pytest.skip(_WHY)
    yield _run(tmp_path_factory.mktemp("prague-marked"), marked=True, seconds=MARKED_SECONDS)


def _syn(run: Run) -> tuple[Packet, Packet, Packet]:
    syn = next(p for p in run.packets if p.syn and not p.ack)
    synack = next(p for p in run.packets if p.syn and p.ack)
    third = next(p for p in run.packets if p.src == SND_ADDR and not p.syn and p.ack)
    return syn, synack, third


def _data(run: Run) -> list[Packet]:
    return [p for p in run.packets if p.src == SND_ADDR and p.payload > 0]


# ------------------------------------------------------------------------------------------


@needs_testbed
def test_the_sockets_run_the_port(clean: Run) -> None:
    # Both ends selected the registered port, and the loader saw its init run for them (the
    # sender's connection and the receiver's accepted child; the listener's own socket is in
    # LISTEN and initializes nothing until a child is made).
    assert clean.sender["cc"] == CC and clean.receiver["cc"] == CC
    assert clean.stats["inits"] >= 2 and clean.stats["reno_fallbacks"] == 0
    assert clean.stats["corrupt"] == 0
    assert all(v == 0 for v in clean.stats["recursion_misses"].values())


@needs_testbed
def test_the_handshake_negotiates_accecn_with_ect1(clean: Run) -> None:
    syn, synack, third = _syn(clean)
    # RFC 9768 §3.1.1: an AccECN SYN sets AE, CWR and ECE.
    assert (syn.ae, syn.cwr, syn.ece) == (True, True, True)
    # TCP_CONG_ECT_1_NEGOTIATION: SYN and SYN-ACK leave as ECT(1) (RFC 9331's L4S codepoint).
    assert syn.ecn == ECT1 and synack.ecn == ECT1
    # RFC 9768 Table 2: a server that received the SYN as ECT(1) answers AE=0, CWR=1, ECE=1.
    assert (synack.ae, synack.cwr, synack.ece) == (False, True, True)
    # RFC 9768 Table 4: the client's first ACK echoes the SYN-ACK's ECT(1) as ACE = 0b011.
    assert (third.ae, third.cwr, third.ece) == (False, True, True)


@needs_testbed
def test_data_segments_are_ecn_capable(clean: Run) -> None:
    # Every data segment carries an ECT codepoint, none Not-ECT or CE on a clean path; the
    # receiver's AccECN byte counters, fed back to the sender in the AccECN option, agree
    # with what was sent (received_e*_bytes at the receiver = delivered_e*_bytes here).
    data = _data(clean)
    assert len(data) > 500
    assert {p.ecn for p in data} <= {ECT0, ECT1}
    s, r = clean.sender, clean.receiver
    assert s["delivered_e0_bytes"] + s["delivered_e1_bytes"] > 0
    assert (s["delivered_e0_bytes"], s["delivered_e1_bytes"]) == (r["received_e0_bytes"], r["received_e1_bytes"])


@needs_testbed
@pytest.mark.xfail(
    strict=True,
    reason="Linux 6.18: tcp_cong.c tcp_init_congestion_control sets ECT(0) (INET_ECN_xmit) right "
    "after the CC's init; TCP_CONG_ECT_1_NEGOTIATION covers only the handshake, and a BPF CC "
    "can neither write inet_sock.tos (bpf_tcp_ca_btf_struct_access) nor change a stream "
    "socket's ECN bits with bpf_setsockopt(IP_TOS) (__ip_sock_set_tos): "
    "bpf/aqmlab_prague.bpf.c, note 1",
)
def test_data_segments_leave_as_ect1(clean: Run) -> None:
    # RFC 9331 §4.1 / tcp_prague.c prague_init (TCP_ECN_ECT_1): a Prague sender's packets
    # are ECT(1), the L4S identifier; the sender's own AccECN byte counters say the same.
    data = _data(clean)
    assert data and all(p.ecn == ECT1 for p in data)
    assert clean.sender["delivered_e0_bytes"] == 0


@needs_testbed
def test_without_marks_alpha_stays_zero(clean: Run) -> None:
    # Nothing marks: no CE reaches the receiver, none is fed back, and tcp_prague.c
    # prague_update_alpha never leaves alpha's initial 0 (prague_alpha_mode 0), since it
    # skips the EWMA until the first CE ("proof that there's an AQM on the path").
    assert clean.receiver["received_ce"] == 0 and clean.sender["delivered_ce"] == 0
    st = clean.stats
    assert st["ce_acks"] == 0 and st["alpha_updates"] == 0
    assert st["alpha_max"] == 0 and st["alpha_last"] == 0
    assert st["alpha_skipped_no_ce"] > 0  # the EWMA point was reached, and skipped
    assert st["cwr_reductions"] == 0


@needs_testbed
def test_the_ace_counter_feeds_delivered_ce(marked: Run) -> None:
    # The marker sets CE on packets 4, 8, 12, ... of the ECN-capable data packets it sees; the
    # receiver counts every one of those CE (nothing is lost on the veth: the sender's data
    # segments are the receiver's). AccECN's ACE field (and option) carries that count back:
    # the sender's delivered_ce equals it, and so does the sum of the per-ACK increases the
    # port saw (its rebuilt rs->ece_delta, note 2 of the port).
    s, r, m = marked.sender, marked.receiver, marked.marker
    n = r["data_segs_in"]
    assert s["unacked"] == 0 and s["notsent_bytes"] == 0  # the sender's figures are final
    assert s["data_segs_out"] == n
    assert m["ce_marked"] == m["ect_data_packets"] // 4 > 100
    assert r["received_ce"] == m["ce_marked"]
    assert s["delivered_ce"] == r["received_ce"]
    # With gso_max_segs 1 the marker sees one packet per segment: all n, or in a rare run a
    # few fewer (seen twice, once 8011 or fewer of 8012: 2002 marks), which would be skbs of
    # two segments or packets it could not parse; not investigated further, as the exactness
    # of the feedback checked above does not depend on it.
    assert n - 4 <= m["ect_data_packets"] <= n, (n, m)
    assert marked.stats["ce_segments"] == s["delivered_ce"]
    # The capture shows the marks as they left (clsact egress runs before the taps:
    # net/core/dev.c __dev_queue_xmit, sch_handle_egress, then xmit_one's dev_queue_xmit_nit).
    data = _data(marked)
    marks = [i for i, p in enumerate(data) if p.ecn == CE]
    assert marks and all(b - a == 4 for a, b in pairwise(marks))


@needs_testbed
def test_alpha_tends_to_the_marked_fraction(marked: Run) -> None:
    # tcp_prague.c prague_update_alpha: upscaled_alpha += F·2^24 − upscaled_alpha/16 per
    # update, i.e. alpha_k = (1 − 1/16)·alpha_{k−1} + F/16, from alpha_0 = 0 at the first CE.
    # With a constant F the closed form is alpha_k = F·(1 − (15/16)^k), and the mean of
    # alpha_1..alpha_N is F·(1 − (15/16)·(1 − (15/16)^N)·16/N). F is the marker's 1/4.
    st = marked.stats
    F = marked.receiver["received_ce"] / marked.receiver["data_segs_in"]
    assert abs(F - 0.25) < 0.005
    N = st["alpha_updates"]
    assert N >= 40  # ≥ 1 s of updates, at most one per 25 ms once RTT-independent
    last = marked.alpha("alpha_last")
    expect_last = F * (1 - (15 / 16) ** N)
    assert abs(last - expect_last) < 0.06, (last, expect_last)
    mean = st["alpha_sum"] / N / ALPHA_ONE
    expect_mean = F * (1 - (15 / 16) * (1 - (15 / 16) ** N) * 16 / N)
    assert abs(mean - expect_mean) < 0.04, (mean, expect_mean)
    assert marked.alpha("alpha_max") < 0.5
    # The response: the first CE halved the window (prague_alpha_mode 0), and CWR entries
    # cut it by alpha/2 (prague_enter_cwr), at most once per 25 ms once RTT-independent.
    assert st["first_ce_halvings"] == 1 and st["cwr_reductions"] > 0
    assert st["cwr_skipped_rtt_indep"] > 0
    assert all(v == 0 for v in st["recursion_misses"].values())
    # Not asserted: st["corrupt"]. This kernel's anomaly (docs/emulator.md, "The anomaly":
    # snd_ssthresh = 0x81104110 after a CWR entry) shows up in about half of these runs,
    # here with TCP's internal pacing, which the port requests as the source does. It
    # touches ssthresh only (the port owns cwnd through cong_control, so no PRR blow-up);
    # alpha depends on delivered and delivered_ce alone, so the checks above stand.
    if st["corrupt"]:
        print(f"kernel anomaly: {st['corrupt']} ACKs saw snd_ssthresh {st['corrupt_ssthresh']:#x}")
