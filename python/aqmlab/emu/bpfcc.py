"""Congestion controls the kernel lacks, run as eBPF ``struct_ops`` (docs/emulator.md, "eBPF
congestion controls").

A scenario's CC is the kernel's own when the kernel has it (built in, or a ``tcp_<cc>`` module
that loads); otherwise, for the CCs in `BPF_CCS`, our port in ``bpf/`` (built by ``make build``
into ``target/bpf/``) is registered for the run by ``aqmlab-bpfcc`` (bpf/loader.c), which holds
the registration as a bpf_link: it ends when that process ends, however it ends (a signal,
SIGKILL, the orchestrator's death), and the kernel then unregisters the CC. Congestion controls
are global to the kernel (net/ipv4/tcp_cong.c keeps one ``tcp_cong_list``; only the default is
per network namespace), so one registration serves the sender and receiver namespaces alike;
the CC is set per socket (TCP_CONGESTION, root), never as a namespace's default.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["BPF_CCS", "BpfCc", "Registration", "bpf_dir", "registered", "stale_loaders", "remove_stale"]

#: The kernel's list of registered congestion controls (every namespace sees the same).
AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
#: The kernel's BTF: struct_ops needs it, and the build generates vmlinux.h from it.
KERNEL_BTF = Path("/sys/kernel/btf/vmlinux")
#: Time allowed for loading (the verifier) and registering.
READY_TIMEOUT_S = 20.0
#: Every CC name we register starts so (cleanup finds leftovers by it).
NAME_PREFIX = "aqmlab_"


@dataclass(frozen=True)
class BpfCc:
    """One of our eBPF congestion controls: the scenario's name for it, the name it registers
    under (TCP_CA_NAME_MAX = 16 bytes with the NUL, include/net/tcp.h), its object in the
    build directory and its source."""

    cc: str
    kernel_name: str
    obj: str
    source: str


BPF_CCS: dict[str, BpfCc] = {
    "dctcp": BpfCc("dctcp", "aqmlab_dctcp", "aqmlab_dctcp.bpf.o", "bpf/aqmlab_dctcp.bpf.c (a port of net/ipv4/tcp_dctcp.c)"),
}


#: CCs of the scenario language that neither this kernel nor our eBPF ports provide, and why
#: (the emulator's refusal says it; docs/emulator.md, "eBPF congestion controls").
NO_PORT: dict[str, str] = {
    "prague": "aqmlab's eBPF port of TCP Prague (bpf/aqmlab_prague.bpf.c) negotiates AccECN but on this kernel "
    "sends its data as ECT(0), not ECT(1): a BPF CC cannot set the socket's ECN codepoint after the handshake "
    '(docs/emulator.md, "eBPF congestion controls"), so an L4S AQM would treat it as a Classic flow',
    "bbr2": "aqmlab has no eBPF port of BBRv2 (an out-of-tree tcp_bbr2.c; cong_control with the rate sample is allowed for a BPF CC, the port is not written)",
    "bbr3": "aqmlab has no eBPF port of BBRv3 (an out-of-tree tcp_bbr.c v3; cong_control with the rate sample is allowed for a BPF CC, the port is not written)",
}


def bpf_dir() -> Path:
    """Where ``make build`` puts the objects and the loader: $AQMLAB_BPF_DIR, else the
    source tree's target/bpf."""
    env = os.environ.get("AQMLAB_BPF_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[3] / "target" / "bpf"


def loader_path() -> Path:
    return bpf_dir() / "aqmlab-bpfcc"


def registered() -> list[str]:
    try:
        return AVAILABLE.read_text().split()
    except OSError:
        return []


def missing(b: BpfCc) -> str | None:
    """Why `b` cannot be registered here (None: it can)."""
    if not KERNEL_BTF.exists():
        return f"the kernel exposes no BTF ({KERNEL_BTF}), which struct_ops congestion controls need"
    for p in (bpf_dir() / b.obj, loader_path()):
        if not p.is_file():
            return f"{p} is missing: build it with `make build` (clang, libbpf-dev and bpftool; `make deps` installs them)"
    if b.kernel_name in registered():
        holders = [str(p) for p, _ in stale_loaders(include_live=True)]
        who = f"aqmlab-bpfcc pid {', '.join(holders)}" if holders else "not an aqmlab-bpfcc of ours: `aqmlab emulate --cleanup` removes it"
        return f"{b.kernel_name} is already registered ({who}); is another emulator run active?"
    return None


@dataclass
class Registration:
    """One CC registered for one run: `start()` returns when the kernel lists it; `stop()` ends
    the loader (so the kernel unregisters it), returns the CC's counters and checks that the
    name is gone."""

    b: BpfCc
    log: Path
    proc: subprocess.Popen[str] | None = None
    stats: dict[str, Any] = field(default_factory=dict)

    def start(self) -> None:
        with open(self.log, "w") as err:
            # Own session: a Ctrl-C reaches the orchestrator only, which ends this in order
            # (after the sockets that use the CC are gone).
            self.proc = subprocess.Popen(
                [str(loader_path()), str(bpf_dir() / self.b.obj)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                start_new_session=True,
            )
        line: list[str] = []
        th = threading.Thread(target=lambda: line.append(self.proc.stdout.readline().strip()), daemon=True)  # type: ignore[union-attr]
        th.start()
        th.join(READY_TIMEOUT_S)
        if not line or line[0] != f"ready {self.b.kernel_name}" or self.b.kernel_name not in registered():
            detail = _tail(self.log)
            self.stop()
            raise RuntimeError(f"registering the eBPF congestion control {self.b.kernel_name} failed" + (f": {detail}" if detail else ""))

    def stop(self) -> dict[str, Any]:
        p, self.proc = self.proc, None
        if p is None:
            return self.stats
        try:
            # EOF on its stdin: the loader prints its counters and exits.
            out, _ = p.communicate(input="", timeout=5)
            last = out.strip().splitlines()[-1] if out.strip() else ""
            self.stats = json.loads(last) if last.startswith("{") else {}
            # Beside the log, for a kept work directory (--keep-work).
            self.log.with_suffix(".stats.json").write_text(json.dumps(self.stats))
        except (subprocess.TimeoutExpired, ValueError, OSError):
            p.kill()
            p.wait()
        # The link is closed with the process; the kernel unregisters at once.
        deadline = time.monotonic() + 2.0
        while self.b.kernel_name in registered() and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.stats


def _tail(p: Path) -> str:
    try:
        lines = [x for x in p.read_text().strip().splitlines() if x.strip()]
        return lines[-1] if lines else ""
    except OSError:
        return ""


def stale_loaders(include_live: bool = False) -> list[tuple[int, int]]:
    """(pid, parent pid) of aqmlab-bpfcc processes; without `include_live`, only those whose
    orchestrator is gone (re-parented: PR_SET_PDEATHSIG normally ends them first)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
            if not argv or not argv[0].endswith(b"aqmlab-bpfcc"):
                continue
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if include_live or ppid == 1:
            out.append((int(d.name), ppid))
    return out


def remove_stale(log: Any = lambda m: None) -> list[str]:
    """Remove what a killed run could leave: orphaned loaders (their registration ends with
    them), and struct_ops maps of ours registered without a link (`bpftool struct_ops
    register`, which persists until unregistered). Returns what was removed."""
    removed = []
    for pid, _ in stale_loaders():
        try:
            os.kill(pid, signal.SIGKILL)
            removed.append(f"aqmlab-bpfcc pid {pid}")
        except ProcessLookupError:
            pass
    if shutil.which("bpftool"):
        r = subprocess.run(["bpftool", "struct_ops", "list"], capture_output=True, text=True)
        for m in re.finditer(r"^(\d+):\s+(\S+)\s+tcp_congestion_ops", r.stdout, re.M):
            map_id, name = m.groups()
            if name.startswith(NAME_PREFIX) and name in registered() and not stale_loaders(include_live=True):
                # By id: a link-based map of the same name (a run's, or one freed later
                # because a socket still holds it) refuses this (EOPNOTSUPP), harmlessly.
                u = subprocess.run(["bpftool", "struct_ops", "unregister", "id", map_id], capture_output=True, text=True)
                if u.returncode == 0:
                    removed.append(f"struct_ops {name}")
    for x in removed:
        log(f"removed {x}")
    return removed
