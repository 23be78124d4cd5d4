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

A user's CC (a struct_ops C file of the form of bpf/aqmlab_dctcp.bpf.c) goes the same way:
`compile_kernel_object` builds it, `user_cc` describes it under a name unique to the run
(`unique_kernel_name`), and `Registration` has the loader register it under that name.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "BPF_CCS",
    "BpfCc",
    "CompileError",
    "Registration",
    "bpf_dir",
    "check_kernel_name",
    "compile_kernel_object",
    "registered",
    "remove_stale",
    "stale_loaders",
    "unique_kernel_name",
    "kernel_build_missing",
    "user_cc",
    "user_run_untrusted",
]

#: The kernel's list of registered congestion controls (every namespace sees the same).
AVAILABLE = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
#: The kernel's BTF: struct_ops needs it, and the build generates vmlinux.h from it.
KERNEL_BTF = Path("/sys/kernel/btf/vmlinux")
#: Time allowed for loading (the verifier) and registering.
READY_TIMEOUT_S = 20.0
#: Every CC name we register starts so (cleanup finds leftovers by it).
NAME_PREFIX = "aqmlab_"
#: The longest CC name the kernel takes: TCP_CA_NAME_MAX = 16 bytes with the NUL
#: (include/net/tcp.h).
NAME_MAX = 15
#: What the kernel copies into a BPF CC's name: kernel/bpf/syscall.c bpf_obj_name_cpy, called
#: by net/ipv4/bpf_tcp_ca.c bpf_tcp_ca_init_member, refuses anything but these.
_NAME_RE = re.compile(r"[A-Za-z0-9_.]+")


def check_kernel_name(name: str) -> None:
    """Raise ValueError unless the kernel would register a CC named `name`."""
    if len(name.encode()) > NAME_MAX:
        raise ValueError(f"congestion control name {name!r} is longer than {NAME_MAX} bytes (TCP_CA_NAME_MAX = 16 with the NUL, include/net/tcp.h)")
    if not _NAME_RE.fullmatch(name):
        raise ValueError(f"congestion control name {name!r}: the kernel takes only letters, digits, '_' and '.' (kernel/bpf/syscall.c bpf_obj_name_cpy)")


@dataclass(frozen=True)
class BpfCc:
    """An eBPF congestion control: the scenario's name for it, the name it registers under,
    its object and its source. `obj` is a file name in the build directory (one of our ports,
    registered under the name it declares) or an absolute path (a user's object, registered
    under `kernel_name` whatever it declares: `user_cc`)."""

    cc: str
    kernel_name: str
    obj: str | Path
    source: str
    #: Values of its `const volatile` globals, set before load (the loader's --set).
    tunables: tuple[tuple[str, int | bool], ...] = ()

    def __post_init__(self) -> None:
        check_kernel_name(self.kernel_name)

    @property
    def renamed(self) -> bool:
        """Registered under `kernel_name` rather than the name its object declares (the
        loader's --name): a user's object, which may run in several classes or runs at once."""
        return Path(self.obj).is_absolute()

    def obj_path(self) -> Path:
        return Path(self.obj) if self.renamed else bpf_dir() / self.obj


BPF_CCS: dict[str, BpfCc] = {
    "dctcp": BpfCc("dctcp", "aqmlab_dctcp", "aqmlab_dctcp.bpf.o", "bpf/aqmlab_dctcp.bpf.c (a port of net/ipv4/tcp_dctcp.c)"),
    "prague": BpfCc(
        "prague",
        "aqmlab_prague",
        "aqmlab_prague.bpf.o",
        "bpf/aqmlab_prague.bpf.c (a port of L4STeam tcp_prague.c; its data made ECT(1) by the router, which this kernel cannot do)",
    ),
}

#: CCs that send ECT(1) (L4S, RFC 9331) but that a BPF CC cannot make this kernel send: the
#: router turns their ECT(0) into ECT(1) on arrival (docs/emulator.md, "TCP Prague").
L4S_PORTS = {"prague"}


#: CCs of the scenario language that neither this kernel nor our eBPF ports provide, and why
#: (the emulator's refusal says it; docs/emulator.md, "eBPF congestion controls").
NO_PORT: dict[str, str] = {
    "bbr2": "aqmlab has no eBPF port of BBRv2 (an out-of-tree tcp_bbr2.c): this kernel lacks what its loss and ECN bounds are computed from "
    '(rate_sample.tx_in_flight and .lost, the skb_marked_lost op), so a port would not be an honest reference (docs/emulator.md, "BBRv3 on this kernel")',
    "bbr3": "aqmlab has no eBPF port of BBRv3 (google/bbr v3 tcp_bbr.c): this kernel lacks what its loss and ECN bounds are computed from "
    '(rate_sample.tx_in_flight and .lost, the skb_marked_lost op), so a port would not be an honest reference (docs/emulator.md, "BBRv3 on this kernel")',
}


def bpf_dir() -> Path:
    """Where ``make build`` puts the objects and the loader: $AQMLAB_BPF_DIR, else the
    source tree's target/bpf."""
    env = os.environ.get("AQMLAB_BPF_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[3] / "target" / "bpf"


def loader_path() -> Path:
    return bpf_dir() / "aqmlab-bpfcc"


def unique_kernel_name() -> str:
    """A CC name for one registration of a user's object: "aqmlab_p" and 7 random hex digits
    (15 bytes, NAME_MAX), so that the same file in two flow classes, or in two runs at once,
    registers twice without clashing (names are unique in the kernel: net/ipv4/tcp_cong.c
    tcp_register_congestion_control). 2^28 names; one already registered is skipped, and a
    race with another run that picks the same one fails with the loader's "already registered"."""
    taken = set(registered())
    while True:
        name = f"{NAME_PREFIX}p{secrets.token_hex(4)[:7]}"
        if name not in taken:
            return name


def user_cc(cc: str, obj: Path, source: str) -> BpfCc:
    """A user's compiled CC (`compile_kernel_object`) as one registration: `cc` is the
    scenario's name for it, `source` what the run's summary says it is (its C file)."""
    return BpfCc(cc, unique_kernel_name(), Path(obj).resolve(), source)


class CompileError(RuntimeError):
    """A CC's C file could not be compiled for the kernel: one message saying why (clang's
    own errors included)."""


#: What `make deps` installs for the eBPF congestion controls.
_DEPS = "apt-get install clang llvm libbpf-dev bpftool (`make deps` installs them)"


def kernel_build_missing() -> str | None:
    """Why a CC file cannot be built for the kernel here (None: it can): no clang, or no
    vmlinux.h (`make build` writes it from the running kernel's BTF)."""
    if shutil.which("clang") is None:
        return f"compiling for the kernel needs clang: {_DEPS}"
    if not (bpf_dir() / "vmlinux.h").is_file():
        return f"{bpf_dir() / 'vmlinux.h'} is missing: run `make build` (or `make bpf`), which writes it from the running kernel's BTF ({KERNEL_BTF})"
    return None


def compile_kernel_object(source: Path, out: Path) -> None:
    """Compile a struct_ops CC's C file for the running kernel, as `make bpf` compiles ours
    (clang -target bpf -O2 -g -Wall against bpf_dir()'s vmlinux.h: CO-RE, its field offsets
    relocated against the kernel's BTF at load). `out` appears whole or not at all: a
    concurrent run never loads a half-written object."""
    source, out = Path(source), Path(out)
    if not source.is_file():
        raise CompileError(f"{source}: no such file")
    why = kernel_build_missing()
    if why is not None:
        raise CompileError(f"{source}: {why}")
    clang, inc = shutil.which("clang") or "clang", bpf_dir()
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    os.close(fd)
    try:
        r = subprocess.run([clang, "-target", "bpf", "-O2", "-g", "-Wall", "-I", str(inc), "-c", str(source), "-o", tmp], capture_output=True, text=True)
        if r.returncode != 0:
            err = r.stderr.strip()
            m = re.search(r"'(bpf/[\w.]+\.h)' file not found", err)
            if m:
                raise CompileError(f"compiling {source} for the kernel: libbpf's header {m.group(1)} is missing: {_DEPS}\n{err}")
            raise CompileError(f"compiling {source} for the kernel failed (clang exit status {r.returncode}):\n{err}")
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def registered() -> list[str]:
    try:
        return AVAILABLE.read_text().split()
    except OSError:
        return []


#: A window or ssthresh at or above this came from a skipped op (docs/emulator.md, "The
#: anomaly"): include/net/tcp.h tcp_snd_cwnd_set warns at 2^31, and snd_ssthresh never exceeds
#: TCP_INFINITE_SSTHRESH = 2^31 - 1.
SKIPPED_OPS_WINDOW = 1 << 31


def user_run_untrusted(cc: str, stats: dict[str, Any], samples: Iterable[dict[str, Any]]) -> str | None:
    """Why a run of a user's CC cannot be trusted (None: it can). The port's guard checks every
    ACK inside the CC (its "corrupt" counter); a user's file has none, so this looks at what is
    left: each program's recursion misses (the loader's last line) and the TCP_INFO samples of
    the flows that ran it (`snd_ssthresh`, `snd_cwnd`; the anomaly's inflated state lasts
    long enough to be sampled, docs/emulator.md)."""
    if "recursion_misses" not in stats:
        return f"the eBPF {cc} left no counters (--keep-work keeps its loader's log); the run cannot be checked"
    misses = {k: v for k, v in stats["recursion_misses"].items() if v}
    bad = [x for x in samples if max(x.get("snd_ssthresh") or 0, x.get("snd_cwnd") or 0) >= SKIPPED_OPS_WINDOW]
    if not misses and not bad:
        return None
    first = f", first ssthresh {bad[0].get('snd_ssthresh')} cwnd {bad[0].get('snd_cwnd')}" if bad else ""
    return (
        f"the kernel skipped ops of the eBPF {cc} during the run ({len(bad)} samples saw snd_ssthresh/snd_cwnd >= 2^31{first}; "
        f'recursion misses {misses or 0}); its figures cannot be trusted (docs/emulator.md, "The anomaly")'
    )


def missing(b: BpfCc) -> str | None:
    """Why `b` cannot be registered here (None: it can)."""
    if not KERNEL_BTF.exists():
        return f"the kernel exposes no BTF ({KERNEL_BTF}), which struct_ops congestion controls need"
    if b.renamed and not b.obj_path().is_file():
        return f"{b.obj_path()} is missing: compile {b.source} first (compile_kernel_object)"
    for p in (b.obj_path(), loader_path()):
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
    name is gone. Call `start()` from a thread that outlives the run: the loader's
    PR_SET_PDEATHSIG fires when the thread that forked it exits (kernel/exit.c
    forget_original_parent, per thread), so a registration started in a short-lived worker
    thread ends with that thread."""

    b: BpfCc
    log: Path
    proc: subprocess.Popen[str] | None = None
    stats: dict[str, Any] = field(default_factory=dict)

    def start(self) -> None:
        with open(self.log, "w") as err:
            # Own session: a Ctrl-C reaches the orchestrator only, which ends this in order
            # (after the sockets that use the CC are gone).
            self.proc = subprocess.Popen(
                [
                    str(loader_path()),
                    *(["--name", self.b.kernel_name] if self.b.renamed else []),
                    *(a for k, v in self.b.tunables for a in ("--set", f"{k}={int(v)}")),
                    str(self.b.obj_path()),
                ],
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
            if line and line[0].startswith("ready "):
                self.stop()
            else:
                # It registered nothing: a name still listed is another holder's (the
                # loader's "already registered"), not one to wait for.
                p, self.proc = self.proc, None
                if p is not None:
                    p.kill()
                    p.communicate()
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
