"""The emulator backend: the scenario run with real Linux TCP in network namespaces through
aqmlab's userspace bottleneck router (``crates/router``, the same ``crates/aqm`` code as the
simulator). See docs/emulator.md.

Topology (the router ⇄ orchestrator contract, docs/emulator.md §Topology):

    aqS<i>-<tag>  (class i senders, 10.77.<i+1>.2/24) ──veth── ┐
                                                               aqR-<tag>: aqtun ⇄ aqmlab-router
    aqD-<tag>     (receiver, 10.77.200.2/24)          ──veth── ┘

Every device lives inside one of the run's namespaces; nothing is created in, or changed on,
the host's own namespace (its interfaces, routes and sysctls are never touched). The run is
torn down — processes, namespaces (and with them every device) — on success, on error and on
SIGTERM/SIGINT; a run killed with SIGKILL leaves a stale testbed that ``cleanup()``
(``aqmlab emulate --cleanup``) finds by its names and removes.

This module orchestrates; ``_emu_results`` hands the measurements to the simulator's own result
code (``engine.tables_from_records``); nothing here simulates or computes a metric.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aqmlab import engine
from aqmlab.emu import bpfcc as _bpfcc
from aqmlab.emu.results import PORT, assemble, save_extra
from aqmlab.scenario import Flows, Host, Scenario, ScenarioError, Workload, load_scenario, plugin_cc
from aqmlab.store.result import Result

__all__ = [
    "emulate",
    "cleanup",
    "EmulatorError",
    "preflight",
    "kernel_ccs",
    "flow_plan",
    "list_testbeds",
    # re-exported from _emu_results (the assembly of the results)
    "assemble",
]

#: Names of everything a run creates: aqS<i>-<tag>, aqR-<tag>, aqD-<tag> (and the probe aqP-<tag>
#: of the preflight check); <tag> = 8 hex digits.
NS_PATTERN = re.compile(r"^aq(S\d+|R|D|P)-([0-9a-f]{8})$")
#: Work directories (configs, outputs, the owner's pid) live here, one per tag.
WORK_PREFIX = "aqmlab-emu-"
#: Addresses of the contract: class i 10.77.<i+1>.0/24, receiver 10.77.200.0/24, so at most
#: 199 classes (10.77.1 .. 10.77.199).
MAX_CLASSES = 199
#: Router policy-routing table (contract: `lookup 100`).
TABLE = 100
#: Time from the decision on t0 to t0: covers starting the router (TUN attach) and the Python
#: traffic processes (a fraction of a second each); a startup slower than this is refused,
#: never run with shifted starts.
STARTUP_MARGIN_S = 2.5
#: The router drains 200 ms after the scenario's end (contract); allow its exit this long.
ROUTER_EXIT_GRACE_S = 5.0
#: Socket buffer ceilings in the run's namespaces (net.ipv4.tcp_rmem / tcp_wmem max): far above
#: any BDP + buffer of a test scenario, so neither the receive window nor the send buffer caps
#: a flow (the simulator has no such limits).
SOCKET_BUF_MAX = 64 * 1024 * 1024
#: Scheduling. The router is a real-time program (a packet due at t must leave at t), so it
#: is started under SCHED_FIFO (sched(7)) with chrt; it sleeps in ppoll between packets and
#: polls at most 3 ms in 10 ms, and the kernel's RT throttling (sched_rt_runtime_us, 95 %) bounds it
#: anyway (the router keeps a policy given from outside; `counters.sched_fifo` reports it). The
#: traffic runs at nice −10: a compiler or another job on the machine takes CPU from the
#: senders only in proportion to CFS weights (9548 : 1024), so flows do not turn
#: application-limited. AQMLAB_EMU_PRIORITY=0 runs both plain.
_PRIO = os.environ.get("AQMLAB_EMU_PRIORITY", "1") != "0"
PRIORITY_RT = ["chrt", "-f", "20"] if _PRIO else []
PRIORITY_TRAFFIC = ["nice", "-n", "-10"] if _PRIO else []
#: The receiver runs under SCHED_FIFO too, below the router. Linux ACKs every second segment
#: only while the advertised window's right edge keeps up (net/ipv4/tcp_input.c
#: `__tcp_ack_snd_check`: `__tcp_select_window(sk) >= tp->rcv_wnd`); while data wait unread,
#: the ACK waits for the application's read (net/ipv4/tcp.c `tcp_cleanup_rbuf`). A receiver
#: that waits behind other jobs for its core thus turns the ACK clock into stretch ACKs and
#: the senders' windows into line-rate bursts, which a STEP queue marks at a total window
#: below the BDP (docs/fidelity.md, "DCTCP through STEP"). A real host's application, and
#: the simulator's receiver, read as data arrive. AQMLAB_EMU_RECV_RT=0 runs it as the senders.
PRIORITY_RECEIVER = (["chrt", "-f", "10"] if os.environ.get("AQMLAB_EMU_RECV_RT", "1") != "0" else PRIORITY_TRAFFIC) if _PRIO else []
#: Move the kernel's work on the router's output to the traffic core (see Testbed.build).
RPS = os.environ.get("AQMLAB_EMU_RPS", "1") != "0"
#: The CCs the scenario names that the kernel calls differently (none today: reno, cubic,
#: bbr, dctcp are the kernel's module names tcp_<name>).
KERNEL_CC = {"reno": "reno", "cubic": "cubic", "bbr": "bbr", "dctcp": "dctcp", "bbr2": "bbr2", "bbr3": "bbr3", "prague": "prague"}
#: CCs with receiver-side logic (tcp_dctcp.c: the CE state machine in dctcp_cwnd_event decides
#: the receiver's ECE and immediate ACKs): their flows' receiving sockets run them too.
RECEIVER_SIDE_CC = {"dctcp", "prague"}
#: AQMLAB_EMU_BPF=1 runs our eBPF port (_bpfcc.BPF_CCS) even where the kernel has its own.
FORCE_BPF = os.environ.get("AQMLAB_EMU_BPF", "0") == "1"


class EmulatorError(ScenarioError):
    """The emulator cannot run this (environment or unsupported feature): one clear message."""


# ------------------------------------------------------------------------------------------
# Preflight: what the machine and the scenario allow
# ------------------------------------------------------------------------------------------


def kernel_ccs() -> list[str]:
    try:
        return Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    except OSError:
        return []


def _have_cc(name: str) -> bool:
    if name in kernel_ccs():
        return True
    # A module may be present but not loaded (tcp_dctcp.ko): loading it is allowed as root.
    if shutil.which("modprobe"):
        subprocess.run(["modprobe", "-q", f"tcp_{name}"], capture_output=True, check=False)
    return name in kernel_ccs()


def is_root() -> bool:
    return os.geteuid() == 0


def preflight(s: Scenario, *, router: bool = True) -> None:
    """Refuse, with one message saying what, whatever this emulator cannot do for `s`."""
    if not is_root():
        raise EmulatorError("the emulator needs root (network namespaces, veth and TUN devices); run it as root")
    if shutil.which("ip") is None:
        raise EmulatorError("the emulator needs iproute2's `ip` command (apt-get install iproute2)")
    if shutil.which("ethtool") is None:
        raise EmulatorError("the emulator needs `ethtool` to set the hosts' segmentation offloads (apt-get install ethtool; `make deps` does it)")
    if not Path("/dev/net/tun").exists():
        raise EmulatorError("/dev/net/tun is missing: the kernel has no TUN support here")
    for tool in ("taskset", *(PRIORITY_RT[:1] + PRIORITY_TRAFFIC[:1])):
        if shutil.which(tool) is None:
            raise EmulatorError(f"the emulator needs `{tool}` (util-linux / coreutils)")
    if PRIORITY_RT:
        r = subprocess.run([*PRIORITY_RT, "true"], capture_output=True, text=True)
        if r.returncode != 0:
            raise EmulatorError(
                f"cannot give the router real-time priority (`{' '.join(PRIORITY_RT)}`: {r.stderr.strip()}); "
                "set AQMLAB_EMU_PRIORITY=0 to run without it (expect late packets on a busy machine)"
            )
    probe = f"aqP-{secrets.token_hex(4)}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        raise EmulatorError(f"network namespaces are unavailable: `ip netns add` failed: {r.stderr.strip()}")
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    # Classes are the [[flows]], then the [[workload]]s (the engine config's order).
    if len(s.flows) + len(s.workload) > MAX_CLASSES:
        raise ScenarioError(f"the emulator addresses at most {MAX_CLASSES} flow classes (10.77.<i+1>.0/24), [[flows]] and [[workload]] together", key="flows")
    keyed: list[tuple[str, Flows | Workload]] = [
        *((f"flows[{i}]", f) for i, f in enumerate(s.flows)),
        *((f"workload[{i}]", w) for i, w in enumerate(s.workload)),
    ]
    for key, f in keyed:
        if f.cc == "cbr":
            continue  # UDP from the built-in sender: no kernel CC involved
        if f.cc_params and plugin_cc(f.cc) is None:
            raise ScenarioError(
                f"the emulator cannot set {f.cc} tunables per flow (the kernel's are module parameters, global to the host); remove cc_params",
                key=f"{key}.cc_params",
            )
        if f.fq_pacing:
            raise ScenarioError("the emulator does not support fq_pacing yet (no fq qdisc on the senders)", key=f"{key}.fq_pacing")
        module = plugin_cc(f.cc)
        if module is not None:
            # A user's CC file: built for the kernel here, so that its compiler's (and later
            # the verifier's) refusal comes before the testbed is built.
            _check_user_cc(module.source, key=f"{key}.cc")
            continue
        b = _bpfcc.BPF_CCS.get(f.cc)
        if b is not None and (FORCE_BPF or not _have_cc(KERNEL_CC.get(f.cc, f.cc))):
            why = _bpfcc.missing(b)
            if why is not None:
                raise EmulatorError(f"the kernel has no {f.cc!r} and our eBPF port cannot run: {why}", key=f"{key}.cc")
            continue
        if not _have_cc(KERNEL_CC.get(f.cc, f.cc)):
            offered = kernel_ccs()
            why = _bpfcc.NO_PORT.get(f.cc)
            raise ScenarioError(
                f"the kernel has no {f.cc!r} congestion control (modprobe tcp_{f.cc} failed); "
                f"it offers: {', '.join(offered) or 'none'} (/proc/sys/net/ipv4/tcp_available_congestion_control)" + (f"; {why}" if why else ""),
                key=f"{key}.cc",
            )
    _check_host(s.host)
    if router:
        router_binary()


def _check_user_cc(source: Path, key: str) -> None:
    """Refuse a user's CC file the kernel side cannot take: no BTF or loader, or a source that
    does not compile for the kernel (clang's messages, naming the file)."""
    why = None
    if not _bpfcc.KERNEL_BTF.exists():
        why = f"the kernel exposes no BTF ({_bpfcc.KERNEL_BTF}), which struct_ops congestion controls need"
    elif not _bpfcc.loader_path().is_file():
        why = f"{_bpfcc.loader_path()} is missing: build it with `make build` (clang, libbpf-dev and bpftool; `make deps` installs them)"
    if why is not None:
        raise EmulatorError(f"a user's CC cannot run here: {why}", key=key)
    with tempfile.TemporaryDirectory(prefix="aqmlab-cc-") as d:
        try:
            _bpfcc.compile_kernel_object(source, Path(d) / "cc.bpf.o")
        except _bpfcc.CompileError as e:
            raise EmulatorError(str(e), key=key) from None


def plan_key(f: Flows | Workload) -> str:
    """A class's entry in `cc_plan`: its `cc`, and for a user's CC with tunables the values too
    (each set of values is a registration of its own, as its tunables are set before load)."""
    if f.cc_params and plugin_cc(f.cc) is not None:
        return f"{f.cc} {json.dumps(f.cc_params, sort_keys=True)}"
    return f.cc


def cc_plan(s: Scenario) -> dict[str, dict[str, Any]]:
    """Which implementation runs each TCP CC of `s` (after `preflight`), by the class's `cc`:
    the kernel's own, our eBPF port, or a user's file (``"user": True``, registered per run
    under a name of its own, once per set of tunables: `plan_key`); recorded in the run's
    summary (``emu.cc``)."""
    plan: dict[str, dict[str, Any]] = {}
    for f in s.classes():
        if f.cc == "cbr" or plan_key(f) in plan:
            continue
        module = plugin_cc(f.cc)
        if module is not None:
            plan[plan_key(f)] = {
                "kernel_name": _bpfcc.unique_kernel_name(),
                "implementation": "bpf",
                "source": str(module.source),
                "label": module.label,
                "user": True,
                "tunables": dict(f.cc_params),
                "ect1_at_router": module.info["ecn"] == "l4s",
            }
            continue
        b = _bpfcc.BPF_CCS.get(f.cc)
        if b is not None and (FORCE_BPF or not _have_cc(KERNEL_CC.get(f.cc, f.cc))):
            plan[f.cc] = {"kernel_name": b.kernel_name, "implementation": "bpf", "source": b.source, "ect1_at_router": f.cc in _bpfcc.L4S_PORTS}
        else:
            name = KERNEL_CC.get(f.cc, f.cc)
            plan[f.cc] = {"kernel_name": name, "implementation": "kernel", "source": f"the running kernel's {name}"}
    return plan


#: Largest GSO and GRO packet this emulator's IPv4 hosts can use: beyond 64 KiB needs BIG TCP
#: (`gso_ipv4_max_size`, `gro_ipv4_max_size`), which the testbed does not set up.
MAX_OFFLOAD_BYTES = 65_536


def _check_host(h: Host) -> None:
    """The `[host]` knobs the real hosts can take. `nic_rate` and `rx_coalesce` are the
    router's (it spaces a burst's segments at the NIC rate and writes departures every
    `rx_coalesce`); `gso_max_size`, `gro_max_size` and `min_tso_segs` are set on the hosts;
    `jitter` is the simulator's model of what real hosts do anyway. Ideal hosts exist only in
    the simulator; with offloads off the hosts keep the kernel's defaults and the router no NIC
    or interrupt timing (`build`), so a knob other than the defaults is refused there."""
    if h.ideal:
        raise ScenarioError(
            "the emulator's hosts are real Linux hosts and cannot be ideal (ideal = true is the simulator's model only; offloads = false gives Linux hosts without offloads)",
            key="host.ideal",
        )
    e = h.engine()
    if "pacing_shift" in h.model_fields_set and e["pacing_shift"] != Host().engine()["pacing_shift"]:
        raise ScenarioError(
            f"the emulator cannot set pacing_shift (the kernel's sk_pacing_shift is {Host().pacing_shift} for every TCP socket; no sysctl or socket option changes it)",
            key="host.pacing_shift",
        )
    if "jitter" in h.model_fields_set:
        raise ScenarioError("the emulator's hosts have their own timing noise; jitter is the simulator's model of it (remove it to emulate)", key="host.jitter")
    for k in ("stall", "stall_every"):
        if k in h.model_fields_set:
            raise ScenarioError(f"the emulator's hosts stall as their machine does; {k} is the simulator's model of it (remove it to emulate)", key=f"host.{k}")
    if not h.offloads:
        defaults = Host(offloads=False).engine()
        for key, field in (
            ("nic_rate", "nic_rate_bps"),
            ("gso_max_size", "gso_max_bytes"),
            ("min_tso_segs", "min_tso_segs"),
            ("rx_coalesce", "rx_coalesce_ns"),
        ):
            if e[field] != defaults[field]:
                raise ScenarioError(
                    f"the emulator applies {key} only to hosts with offloads (with offloads = false its hosts and router keep their defaults)",
                    key=f"host.{key}",
                )
        return
    for key, field in (("gso_max_size", "gso_max_bytes"), ("gro_max_size", "gro_max_bytes")):
        if e[field] > MAX_OFFLOAD_BYTES:
            raise ScenarioError(
                f"the emulator's hosts use at most {MAX_OFFLOAD_BYTES} B ({e[field]} B needs BIG TCP, which the testbed does not set up)", key=f"host.{key}"
            )


def router_binary() -> Path:
    """The router: $AQMLAB_ROUTER, the workspace's target/release/aqmlab-router, or on PATH."""
    env = os.environ.get("AQMLAB_ROUTER")
    cands = [Path(env)] if env else []
    cands.append(Path(__file__).resolve().parents[3] / "target" / "release" / "aqmlab-router")
    w = shutil.which("aqmlab-router")
    if w:
        cands.append(Path(w))
    for c in cands:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    raise EmulatorError("the router binary aqmlab-router is missing: build it with `cargo build --release -p router` (or `make build`), or set AQMLAB_ROUTER")


# ------------------------------------------------------------------------------------------
# The flows: the simulator's own plan
# ------------------------------------------------------------------------------------------


def flow_plan(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Every flow of the run, in flow-id order, exactly as the simulator creates them
    (``engine.flow_plan`` → crates/sim/src/world.rs ``flow_plan``, which ``World::new`` itself
    uses): ``{"flow", "class", "start_ns", "stop_ns", "size_bytes"}`` — scheduled starts and
    stops and a workload's Poisson arrivals with their size draws. So both backends run the same
    flows at the same times with the same sizes."""
    try:
        plan = engine.flow_plan(json.dumps(config))
    except ValueError as e:
        raise ScenarioError(str(e)) from None
    return [{"flow": k, "class": c, "start_ns": a, "stop_ns": b, "size_bytes": z} for k, (c, a, b, z) in enumerate(plan)]


# ------------------------------------------------------------------------------------------
# Commands in namespaces
# ------------------------------------------------------------------------------------------


def _run(*args: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(args)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise EmulatorError(f"testbed setup failed: `{' '.join(cmd)}`: {r.stderr.strip() or r.stdout.strip()}")
    return r


def _steal_ms() -> dict[int, float]:
    """Each CPU's steal time so far, ms (/proc/stat, proc(5): the 8th value of a cpuN line, in
    USER_HZ ticks): time a virtual machine's CPU was runnable but the hypervisor ran something
    else. On a VM it stalls the router for milliseconds at a time, which no setting here can
    prevent; the run reports it (`emu.steal_ms`) so a stall can be told from the kernel's TCP."""
    tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
    out: dict[int, float] = {}
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            for line in fh:
                f = line.split()
                if f and f[0].startswith("cpu") and f[0][3:].isdigit() and len(f) > 8:
                    out[int(f[0][3:])] = int(f[8]) * tick_ms
    except OSError:
        return {}
    return out


def _sysctl(ns: str, key: str, value: str) -> None:
    # Written through /proc/sys inside the namespace (no sysctl binary needed).
    path = "/proc/sys/" + key.replace(".", "/")
    _run("sh", "-c", f"echo '{value}' > {path}", ns=ns)


def _cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - Linux always has it
        return list(range(os.cpu_count() or 1))


def list_testbeds() -> dict[str, list[str]]:
    """Namespaces of aqmlab testbeds on this host, by tag."""
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    out: dict[str, list[str]] = {}
    for line in r.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        m = NS_PATTERN.match(name)
        if m:
            out.setdefault(m.group(2), []).append(name)
    # Work directories of tags whose namespaces are already gone still count (their processes).
    for d in Path(tempfile.gettempdir()).glob(f"{WORK_PREFIX}*"):
        m = re.match(rf"^{WORK_PREFIX}([0-9a-f]{{8}})$", d.name)
        if m:
            out.setdefault(m.group(1), [])
    return out


def _ns_pids(ns: str) -> list[int]:
    r = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
    return [int(x) for x in r.stdout.split() if x.isdigit()]


def _kill(pids: list[int], grace_s: float = 2.0) -> None:
    """SIGTERM, then SIGKILL what is still alive after `grace_s`."""
    for p in pids:
        try:
            os.kill(p, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return False


def _owner_alive(tag: str) -> bool:
    pidfile = Path(tempfile.gettempdir()) / f"{WORK_PREFIX}{tag}" / "owner.pid"
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return False
    return pid != os.getpid() and _alive(pid)


def _teardown(tag: str, namespaces: list[str], procs: list[subprocess.Popen[Any]], keep_work: bool = False) -> None:
    """Remove every process and namespace of `tag` (and so every device: veths and the TUN
    live only inside them), then its work directory."""
    pids = [p.pid for p in procs if p.poll() is None]
    for ns in namespaces:
        pids += _ns_pids(ns)
    _kill(sorted(set(pids)))
    for p in procs:
        try:
            p.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        if p.stdout is not None:
            p.stdout.close()
    for ns in namespaces:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    if not keep_work:
        shutil.rmtree(Path(tempfile.gettempdir()) / f"{WORK_PREFIX}{tag}", ignore_errors=True)


def cleanup(*, force: bool = False, log: Callable[[str], None] = lambda m: None) -> list[str]:
    """Remove stale testbeds (a run killed with SIGKILL): their processes, namespaces and work
    directories. A testbed whose owning `aqmlab emulate` is still alive is left alone unless
    `force`. Returns the tags removed."""
    removed = []
    for tag, nss in sorted(list_testbeds().items()):
        if not force and _owner_alive(tag):
            log(f"skipping testbed {tag}: its run (pid in {WORK_PREFIX}{tag}/owner.pid) is still alive")
            continue
        _teardown(tag, nss, [])
        log(f"removed testbed {tag}: {', '.join(nss) or 'work directory only'}")
        removed.append(tag)
    # eBPF congestion controls: a loader outlives its run only if re-parented (the run was
    # SIGKILLed between fork and PR_SET_PDEATHSIG); a link-less registration of ours (bpftool)
    # stays until unregistered.
    _bpfcc.remove_stale(log)
    return removed


# ------------------------------------------------------------------------------------------
# The testbed
# ------------------------------------------------------------------------------------------


@dataclass
class Testbed:
    tag: str
    n_classes: int
    work: Path
    namespaces: list[str] = field(default_factory=list)
    procs: list[subprocess.Popen[Any]] = field(default_factory=list)

    @property
    def router_ns(self) -> str:
        return f"aqR-{self.tag}"

    @property
    def receiver_ns(self) -> str:
        return f"aqD-{self.tag}"

    def sender_ns(self, i: int) -> str:
        return f"aqS{i}-{self.tag}"

    def build(self, kernel_cpu: int | None = None, *, host: Host | None = None) -> None:
        """Namespaces, veths, addresses, routes, the TUN and the policy rules of the contract.
        `kernel_cpu`: the core that does the kernel's receive work for packets the router
        writes back (RPS on the TUN), so that the router's core does only the router's.
        `host`: with offloads, the hosts segment (TSO/GSO, up to `gso_max_size`, at least
        `min_tso_segs`) and merge (GRO, up to `gro_max_size`) as real hosts do, and the router
        takes super-packets (docs/emulator.md §Offloads); otherwise (or None) every veth has
        them off."""
        r = self.router_ns
        for ns in [r, self.receiver_ns, *(self.sender_ns(i) for i in range(self.n_classes))]:
            _run("ip", "netns", "add", ns)
            self.namespaces.append(ns)
            _run("ip", "link", "set", "lo", "up", ns=ns)
        # Router forwarding, reverse-path filter off (packets written to the TUN carry the
        # senders' sources, which the main table reaches through the class veths).
        for key, val in (("net.ipv4.ip_forward", "1"), ("net.ipv4.conf.all.rp_filter", "0"), ("net.ipv4.conf.default.rp_filter", "0")):
            _sysctl(r, key, val)
        veths: list[tuple[str, str]] = []  # (namespace, device)
        for i in range(self.n_classes):
            s = self.sender_ns(i)
            # Created directly inside the two namespaces: never in the host's.
            _run("ip", "link", "add", "eth0", "netns", s, "type", "veth", "peer", "name", f"c{i}", "netns", r)
            _run("ip", "addr", "add", f"10.77.{i + 1}.2/24", "dev", "eth0", ns=s)
            _run("ip", "link", "set", "eth0", "up", ns=s)
            _run("ip", "route", "add", "default", "via", f"10.77.{i + 1}.1", ns=s)
            _run("ip", "addr", "add", f"10.77.{i + 1}.1/24", "dev", f"c{i}", ns=r)
            _run("ip", "link", "set", f"c{i}", "up", ns=r)
            veths += [(s, "eth0"), (r, f"c{i}")]
        d = self.receiver_ns
        _run("ip", "link", "add", "eth0", "netns", d, "type", "veth", "peer", "name", "dst", "netns", r)
        _run("ip", "addr", "add", "10.77.200.2/24", "dev", "eth0", ns=d)
        _run("ip", "link", "set", "eth0", "up", ns=d)
        _run("ip", "route", "add", "default", "via", "10.77.200.1", ns=d)
        _run("ip", "addr", "add", "10.77.200.1/24", "dev", "dst", ns=r)
        _run("ip", "link", "set", "dst", "up", ns=r)
        veths += [(d, "eth0"), (r, "dst")]
        if host is not None and host.offloads:
            # Real hosts: the senders' NICs segment (TSO/GSO: the kernel hands them bursts of up
            # to gso_max_size) and every host merges what it receives (GRO); a veth comes with
            # GRO off, so it is turned on at the hosts. The router's veths keep TSO/GSO so a
            # super-packet crosses the router whole in both directions: into the TUN, which
            # takes it (TUNSETOFFLOAD) for aqmlab-router to segment before its queue, and out
            # towards the receiver, when the router writes a run of departures as one.
            e = host.engine()
            for i in range(self.n_classes):
                s = self.sender_ns(i)
                _run("ethtool", "-K", "eth0", "tso", "on", "gso", "on", "gro", "on", ns=s)
                _run("ip", "link", "set", "dev", "eth0", "gso_max_size", str(e["gso_max_bytes"]), ns=s)
                _sysctl(s, "net.ipv4.tcp_min_tso_segs", str(e["min_tso_segs"]))
            _run("ethtool", "-K", "eth0", "tso", "on", "gso", "on", "gro", "on", ns=d)
            _run("ip", "link", "set", "dev", "eth0", "gro_max_size", str(e["gro_max_bytes"]), ns=d)
            for dev in [*(f"c{i}" for i in range(self.n_classes)), "dst"]:
                _run("ethtool", "-K", dev, "tso", "on", "gso", "on", "gro", "off", ns=r)
        else:
            # Wire-size packets from the hosts themselves: the kernel segments in software
            # before the veth, and nothing is merged on receipt.
            for ns, dev in veths:
                _run("ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off", ns=ns)
        # The TUN: persistent, no packet-info header, MTU 1500 (contract). Its txqueuelen is
        # raised from 500 so that a short stall of the router program never drops packets in
        # the kernel before the AQM sees them (those would be losses no discipline decided).
        _run("ip", "tuntap", "add", "dev", "aqtun", "mode", "tun", ns=r)
        _run("ip", "link", "set", "aqtun", "mtu", "1500", "txqueuelen", "10000", "up", ns=r)
        _run("ip", "route", "add", "default", "dev", "aqtun", "table", str(TABLE), ns=r)
        for i in range(self.n_classes):
            _run("ip", "rule", "add", "iif", f"c{i}", "lookup", str(TABLE), ns=r)
        for dev in [*(f"c{i}" for i in range(self.n_classes)), "dst", "aqtun"]:
            _sysctl(r, f"net.ipv4.conf.{dev}.rp_filter", "0")
        if kernel_cpu is not None:
            # A packet written to the TUN is received (routed, handed through the receiver's
            # veth to its TCP, which ACKs, which reaches the sender's TCP, which sends more)
            # inside the router's write() unless RPS moves that work to another core's backlog
            # (Documentation/networking/scaling.rst, "RPS"). One target core keeps each
            # flow's order.
            _run("sh", "-c", f"echo {1 << kernel_cpu:x} > /sys/class/net/aqtun/queues/rx-0/rps_cpus", ns=r)

    def set_sender_sysctls(self, i: int, ecn: bool) -> None:
        s = self.sender_ns(i)
        # tcp_ecn 1: request ECN on outgoing connections (the class's `ecn`); 0: never.
        _sysctl(s, "net.ipv4.tcp_ecn", "1" if ecn else "0")
        # No per-destination metrics cache: a flow must not inherit its predecessor's
        # ssthresh (every flow of a class talks to the same receiver address).
        _sysctl(s, "net.ipv4.tcp_no_metrics_save", "1")
        _sysctl(s, "net.ipv4.tcp_wmem", f"4096 16384 {SOCKET_BUF_MAX}")

    def set_receiver_sysctls(self) -> None:
        d = self.receiver_ns
        # tcp_ecn 2 (the default): accept ECN when the sender asks.
        _sysctl(d, "net.ipv4.tcp_ecn", "2")
        _sysctl(d, "net.ipv4.tcp_rmem", f"4096 131072 {SOCKET_BUF_MAX}")
        _sysctl(d, "net.ipv4.tcp_no_metrics_save", "1")

    def spawn(self, ns: str, args: list[str], cpu: int | None, log: Path, *, priority: list[str] = PRIORITY_TRAFFIC) -> subprocess.Popen[str]:
        cmd = ["ip", "netns", "exec", ns]
        if cpu is not None:
            cmd += ["taskset", "-c", str(cpu)]
        cmd += priority
        cmd += args
        with open(log, "w") as err:
            # Own session: a Ctrl-C on the terminal reaches the orchestrator only, which then
            # stops everything in order.
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True)
        self.procs.append(p)
        return p


def _wait_ready(p: subprocess.Popen[str], what: str, deadline: float, log: Path) -> None:
    """Wait for the process's `ready` line, until `deadline` (time.monotonic())."""
    result: list[str] = []

    def reader() -> None:
        try:
            assert p.stdout is not None
            result.append(p.stdout.readline().strip())
        except (OSError, ValueError):  # the pipe closed by the teardown
            pass

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    th.join(max(0.0, deadline - time.monotonic()))
    if not result or result[0] != "ready":
        try:
            detail = log.read_text().strip().splitlines()[-1]
        except (OSError, IndexError):
            detail = ""
        state = f"exited with status {p.poll()}" if p.poll() is not None else "not ready in time"
        raise EmulatorError(f"{what} {state}" + (f": {detail}" if detail else ""))


# ------------------------------------------------------------------------------------------
# Running
# ------------------------------------------------------------------------------------------


class _Interrupted(Exception):
    pass


def _signals_raise() -> Callable[[], None]:
    """SIGTERM/SIGINT raise in the main thread (so the finally tears down); returns a restorer.
    Outside the main thread signals cannot be caught: the caller's own handling applies."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def handler(signum: int, frame: Any) -> None:
        raise _Interrupted(signal.Signals(signum).name)

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}

    def restore() -> None:
        for s, h in old.items():
            signal.signal(s, h)

    return restore


def _signals_ignore() -> None:
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)


def emulate(
    scenario: Scenario | str | Path,
    out_dir: str | Path | None = None,
    *,
    progress: Callable[[float], None] | None = None,
    overwrite: bool = False,
    keep_work: bool = False,
) -> Result:
    """Run `scenario` on the emulator and return its `Result` (the simulator's schema,
    ``summary["backend"] == "emu"``); with `out_dir`, also store it there (atomically).

    Raises `EmulatorError` / `ScenarioError` (before anything is created) for what it cannot do,
    `KeyboardInterrupt` on SIGINT/SIGTERM (after tearing everything down, nothing stored).
    """
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    s = scenario
    preflight(s)
    if out_dir is not None:
        t = Path(out_dir)
        if t.exists() and (not t.is_dir() or any(t.iterdir())) and not overwrite:
            raise EmulatorError(f"{t} exists and is not empty (use overwrite)")
    config = s.engine_config()
    router = router_binary()
    stall_probe_binary(router)
    tag = secrets.token_hex(4)
    work = Path(tempfile.gettempdir()) / f"{WORK_PREFIX}{tag}"
    work.mkdir(mode=0o700)
    (work / "owner.pid").write_text(f"{os.getpid()}\n")
    tb = Testbed(tag, len(config["classes"]), work)
    ccs = cc_plan(s)
    regs = []
    for k, (cc, p) in enumerate(ccs.items()):
        if p["implementation"] != "bpf":
            continue
        if p.get("user"):
            # A user's file: built for the kernel into the run's work directory, registered
            # under the plan's name (a second registration of the same file, by another run,
            # gets another).
            obj = work / f"usercc-{k}.bpf.o"
            try:
                _bpfcc.compile_kernel_object(Path(p["source"]), obj)
            except _bpfcc.CompileError as e:
                shutil.rmtree(work, ignore_errors=True)
                raise EmulatorError(str(e)) from None
            b = _bpfcc.BpfCc(cc, p["kernel_name"], obj, p["source"], tuple(p["tunables"].items()))
        else:
            b = _bpfcc.BPF_CCS[cc]
        regs.append(_bpfcc.Registration(b, work / f"bpfcc-{b.kernel_name}.log"))
    # RPS stays off with an eBPF CC: with it, ACKs are processed in softirqs on the IRQ exit
    # of RPS IPIs on the traffic core, where the kernel sometimes ran none of the CC's ops and
    # took snd_ssthresh from a stale word (docs/emulator.md, "The anomaly");
    # without it, never in our runs. AQMLAB_EMU_BPF_RPS=1 keeps it on (to reproduce that).
    rps = RPS and (not regs or os.environ.get("AQMLAB_EMU_BPF_RPS") == "1")
    restore = _signals_raise()
    wall0 = time.perf_counter()
    try:
        try:
            for reg in regs:
                try:
                    reg.start()
                except RuntimeError as e:
                    raise EmulatorError(str(e)) from None
            cpus = _cpus()
            tb.build(kernel_cpu=cpus[1] if len(cpus) >= 2 and rps else None, host=s.host)
            for i, c in enumerate(config["classes"]):
                tb.set_sender_sysctls(i, c["ecn"])
            tb.set_receiver_sysctls()
            raw = _run_traffic(s, config, tb, router, progress, ccs)
        except _Interrupted as e:
            raise KeyboardInterrupt(str(e)) from None
    finally:
        # A second Ctrl-C / SIGTERM must not stop the teardown half-way: ignored until
        # everything is gone, then the caller's handlers come back.
        _signals_ignore()
        try:
            # The sockets go first (with the namespaces), then the registrations.
            _teardown(tag, tb.namespaces, tb.procs, keep_work=True)
            for reg in regs:
                ccs[reg.b.cc]["stats"] = reg.stop()
            if not keep_work:
                shutil.rmtree(work, ignore_errors=True)
        finally:
            restore()
    class_cc = [plan_key(f) for f in s.classes()]
    for cc, p in ccs.items():
        if p.get("user"):
            # No guard inside a user's CC: its loader's recursion misses and the sampled state
            # of the flows that ran it (bpfcc.user_run_untrusted).
            samples = [x for i, c in enumerate(class_cc) if c == cc for x in raw["senders"][i]["samples"] if not x.get("cbr")]
            why = _bpfcc.user_run_untrusted(p["label"], p.get("stats") or {}, samples)
            if why:
                raise EmulatorError(why + "; nothing was written")
        elif p["implementation"] == "bpf":
            _check_bpf_run(cc, p.get("stats") or {})
    res = assemble(s, config, raw, wall_time_s=time.perf_counter() - wall0)
    res.summary["emu"]["cc"] = ccs
    res.summary["emu"]["rps"] = rps
    res.summary["emu"]["receiver_priority"] = " ".join(PRIORITY_RECEIVER) or "default"
    if out_dir is not None:
        res.save(out_dir, overwrite=overwrite)
        save_extra(Path(out_dir), res)
    return res


def _check_bpf_run(cc: str, stats: dict[str, Any]) -> None:
    """Refuse a run whose eBPF CC reports that the kernel skipped its ops (docs/emulator.md,
    "The anomaly"): its figures cannot be trusted. Nothing is written."""
    if "corrupt" not in stats:
        raise EmulatorError(f"the eBPF {cc} left no counters (--keep-work keeps its loader's log); the run cannot be checked, nothing was written")
    misses = {k: v for k, v in (stats.get("recursion_misses") or {}).items() if v}
    if stats["corrupt"] or misses:
        raise EmulatorError(
            f"the kernel skipped ops of the eBPF {cc} during the run ({stats['corrupt']} ACKs saw snd_ssthresh/snd_cwnd >= 2^31, "
            f"first ssthresh {stats.get('corrupt_ssthresh')} cwnd {stats.get('corrupt_cwnd')}; recursion misses {misses or 0}); "
            'its figures cannot be trusted and nothing was written (docs/emulator.md, "The anomaly")'
        )


def notsent_lowat(rate_bps: int) -> int:
    """The senders' TCP_NOTSENT_LOWAT, bytes: what a socket holds unsent, so that a sender
    descheduled for a while still keeps its flow busy — at least 256 KB, and 32 ms of the
    bottleneck rate (4 MB at 1 Gbit/s): with only 2 ms of the rate unsent, one BBR flow, which
    keeps little queue, left the link idle for part of the run (bench/README.md §Emulator, the
    `TCP_NOTSENT_LOWAT` table). A flow that stops writing still sends up to this much after its
    stop."""
    return max(256 * 1024, rate_bps * 32 // 8 // 1000)


def _run_traffic(
    s: Scenario, config: dict[str, Any], tb: Testbed, router: Path, progress: Callable[[float], None] | None, ccs: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    work = tb.work
    cpus = _cpus()
    # Router on one core, all traffic on another: a sender migrating between cores reorders
    # packets on the veths; with a single core nothing is pinned.
    router_cpu, traffic_cpu = (cpus[0], cpus[1]) if len(cpus) >= 2 else (None, None)
    duration_ns, warmup_ns = config["duration_ns"], config["warmup_ns"]
    interval_ns = config["measure"]["interval_ns"]
    plan = flow_plan(config)
    t0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC) + int(STARTUP_MARGIN_S * 1e9)
    deadline_ready = time.monotonic() + STARTUP_MARGIN_S - 0.1
    class_cc = [plan_key(f) for f in s.classes()]
    router_out = work / "router-out.json"
    (work / "router.json").write_text(
        json.dumps(
            {
                "tun": "aqtun",
                "engine": config,
                "class_sources": [f"10.77.{i + 1}.0/24" for i in range(len(config["classes"]))],
                # L4S senders whose kernel sends ECT(0): their data becomes ECT(1) at the edge.
                "ect1_classes": [i for i, k in enumerate(class_cc) if ccs.get(k, {}).get("ect1_at_router")],
                "t0_monotonic_ns": t0,
                "output": str(router_out),
            },
            indent=1,
        )
    )
    rp = tb.spawn(tb.router_ns, [str(router), "--config", str(work / "router.json")], router_cpu, work / "router.log", priority=PRIORITY_RT)
    _wait_ready(rp, "the router (aqmlab-router)", deadline_ready, work / "router.log")
    traffic_py = str(Path(__file__).resolve().with_name("traffic.py"))
    drain_ns = 500_000_000
    # Receiver-side CCs: the class's connections are accepted by a listener running its CC, on
    # a port of its own (emu/traffic.py). A user's CC runs at both ends too: an ECN-needing one
    # otherwise meets a listener that negotiates classic ECN (tcp_ecn.h: the listener's CC
    # decides), and for a sender-only CC the receiver's is never consulted.
    receiver_cc = [
        ccs[class_cc[i]]["kernel_name"] if c.get("cc") is not None and (c["cc"]["name"] in RECEIVER_SIDE_CC or ccs[class_cc[i]].get("user")) else None
        for i, c in enumerate(config["classes"])
    ]
    listen_port = {cc: PORT + 1 + k for k, cc in enumerate(sorted({cc for cc in receiver_cc if cc is not None}))}
    class_ports = [listen_port[cc] if cc is not None else PORT for cc in receiver_cc]
    (work / "recv.json").write_text(
        json.dumps(
            {
                "bind": "10.77.200.2",
                "port": PORT,
                "t0_ns": t0,
                "warmup_ns": warmup_ns,
                "duration_ns": duration_ns,
                "interval_ns": interval_ns,
                "drain_ns": drain_ns,
                "listeners": [{"port": PORT, "cc": None}] + [{"port": p, "cc": cc} for cc, p in listen_port.items()],
            }
        )
    )
    recv = tb.spawn(
        tb.receiver_ns,
        [sys.executable, traffic_py, "receive", "--spec", str(work / "recv.json"), "--out", str(work / "recv-out.json")],
        traffic_cpu,
        work / "recv.log",
        priority=PRIORITY_RECEIVER,
    )
    _wait_ready(recv, "the traffic receiver", deadline_ready, work / "recv.log")
    senders = []
    for i, c in enumerate(config["classes"]):
        # A CBR class has no cc but its rate and its datagrams' ECN codepoint (the IP header's
        # TOS byte: RFC 3168 §5, ECT(1) = 01, ECT(0) = 10); a TCP flow gets the kernel's name of its CC.
        tos = {None: 0, "ect1": 0b01, "ect0": 0b10}[c.get("cbr_ecn")]
        kind = {"cc": "cbr", "rate_bps": c["cbr_rate_bps"], "tos": tos} if c.get("cc") is None else {"cc": ccs[class_cc[i]]["kernel_name"]}
        flows = [{**{k: p[k] for k in ("flow", "start_ns", "stop_ns", "size_bytes")}, **kind} for p in plan if p["class"] == i]
        spec = {
            "t0_ns": t0,
            "duration_ns": duration_ns,
            "interval_ns": interval_ns,
            "src": f"10.77.{i + 1}.2",
            "dst": "10.77.200.2",
            "port": class_ports[i],
            "notsent_lowat": notsent_lowat(config["bottleneck"]["rate_bps"]),
            "flows": flows,
        }
        (work / f"send{i}.json").write_text(json.dumps(spec))
        senders.append(
            tb.spawn(
                tb.sender_ns(i),
                [sys.executable, traffic_py, "send", "--spec", str(work / f"send{i}.json"), "--out", str(work / f"send{i}-out.json")],
                traffic_cpu,
                work / f"send{i}.log",
            )
        )
    for i, p in enumerate(senders):
        _wait_ready(p, f"the traffic sender of class {i}", deadline_ready, work / f"send{i}.log")
    if time.clock_gettime_ns(time.CLOCK_MONOTONIC) >= t0:
        raise EmulatorError(f"the testbed took longer than its {STARTUP_MARGIN_S} s startup margin; nothing was measured")
    # The probes watch the cores the testbed uses: the router's and the traffic's (cpus[0], cpus[1]), or the only one.
    probes = {c: _spawn_probe(tb, router, c, t0, duration_ns) for c in cpus[:2]}
    steal_before = _steal_ms()
    # Wait for the run: the router exits at duration + its drain.
    router_cpu_s: float | None = None
    end_wall = time.monotonic() + (t0 - time.clock_gettime_ns(time.CLOCK_MONOTONIC)) / 1e9 + duration_ns / 1e9
    while True:
        now = time.monotonic()
        if progress is not None:
            progress(min(1.0, max(0.0, 1.0 - (end_wall - now) / (duration_ns / 1e9))))
        if rp.returncode is None:
            router_cpu_s = _reap(rp)
        if rp.returncode is not None and all(p.poll() is not None for p in [recv, *senders]):
            break
        if now > end_wall + drain_ns / 1e9 + ROUTER_EXIT_GRACE_S:
            break
        time.sleep(0.1)
    if rp.poll() is None:
        raise EmulatorError(f"the router did not exit {ROUTER_EXIT_GRACE_S} s after the run's end; see its log")
    if rp.returncode != 0:
        raise EmulatorError(f"the router exited with status {rp.returncode}: {_tail(work / 'router.log')}")
    for name, p in [("receiver", recv), *((f"sender {i}", q) for i, q in enumerate(senders))]:
        if p.poll() is None:
            raise EmulatorError(f"the traffic {name} did not exit after the run; see its log")
        if p.returncode != 0:
            raise EmulatorError(
                f"the traffic {name} exited with status {p.returncode}: {_tail(work / ('recv.log' if name == 'receiver' else f'send{name.split()[1]}.log'))}"
            )
    try:
        raw = {
            "class_ports": class_ports,
            "router": json.loads(router_out.read_text()),
            "receiver": json.loads((work / "recv-out.json").read_text()),
            "senders": [json.loads((work / f"send{i}-out.json").read_text()) for i in range(len(config["classes"]))],
        }
    except (OSError, ValueError) as e:
        raise EmulatorError(f"a testbed program left no usable output: {e}") from None
    raw["router_cpu_s"] = router_cpu_s
    roles: dict[int | None, str] = {router_cpu: "router", traffic_cpu: "traffic"} if router_cpu is not None else {c: "all" for c in cpus}
    raw["stalls"] = _probe_results(work, probes, t0, duration_ns, roles)
    steal_after = _steal_ms()
    raw["steal_ms"] = {f"cpu{c}": round(steal_after[c] - steal_before[c], 1) for c in sorted(steal_after) if c in steal_before}
    raw["pinning"] = {"router_cpu": router_cpu, "traffic_cpu": traffic_cpu}
    raw["t0_monotonic_ns"] = t0
    raw["offloads"] = s.host.offloads
    return raw


def stall_probe_binary(router: Path) -> Path:
    """The stall probe, built beside the router (crates/router/src/stallprobe.rs)."""
    p = router.with_name("aqmlab-stallprobe")
    if not (p.is_file() and os.access(p, os.X_OK)):
        raise EmulatorError(f"the stall probe {p} is missing: build it with `cargo build --release -p router` (or `make build`)")
    return p


def _spawn_probe(tb: Testbed, router: Path, cpu: int, t0: int, duration_ns: int) -> subprocess.Popen[str]:
    """Start the stall probe on `cpu` for the run's window [t0, t0 + duration): it records when
    the CPU ran nothing of ours (docs/emulator.md, "Host stalls"). Root namespace, own session."""
    log = tb.work / f"stalls-cpu{cpu}.log"
    args = [
        str(stall_probe_binary(router)),
        "--cpu",
        str(cpu),
        "--start-ns",
        str(t0),
        "--end-ns",
        str(t0 + duration_ns),
        "--output",
        str(tb.work / f"stalls-cpu{cpu}.json"),
    ]
    with open(log, "w") as err:
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err, text=True, start_new_session=True)
    tb.procs.append(p)
    return p


def _probe_results(work: Path, probes: dict[int, subprocess.Popen[str]], t0: int, duration_ns: int, roles: dict[int | None, str]) -> dict[str, Any]:
    """Each CPU's stalls over the run's window: `{"period_ns", "threshold_ns", "window_ns",
    "cpus": {"cpuN": {"role", "wakeups", "stalls": [[t_ns from t0, late_ns], ...]}}}`."""
    cpus: dict[str, Any] = {}
    period = threshold = None
    for c, p in probes.items():
        try:
            p.wait(timeout=ROUTER_EXIT_GRACE_S)  # the window ended before the router's drain
        except subprocess.TimeoutExpired:
            raise EmulatorError(f"the stall probe on CPU {c} did not exit after the run; see its log") from None
        if p.returncode != 0:
            raise EmulatorError(f"the stall probe on CPU {c} exited with status {p.returncode}: {_tail(work / f'stalls-cpu{c}.log')}")
        try:
            d = json.loads((work / f"stalls-cpu{c}.json").read_text())
        except (OSError, ValueError) as e:
            raise EmulatorError(f"the stall probe on CPU {c} left no usable output: {e}") from None
        if d["start_ns"] != t0 or not d["complete"]:
            raise EmulatorError(
                f"the stall probe on CPU {c} did not cover the run's window (it started {(d['start_ns'] - t0) / 1e6:g} ms after its start, complete: {d['complete']})"
            )
        period, threshold = d["period_ns"], d["threshold_ns"]
        cpus[f"cpu{c}"] = {"role": roles[c], "wakeups": d["wakeups"], "stalls": [[t - t0, late] for t, late in d["stalls"]]}
    return {"period_ns": period, "threshold_ns": threshold, "window_ns": duration_ns, "cpus": cpus}


def _reap(p: subprocess.Popen[Any]) -> float | None:
    """Reap `p` if it has exited, setting its returncode; returns its CPU time (user + system,
    s, from wait4's rusage — the router's cost for the benchmark), None while it runs."""
    try:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
    except ChildProcessError:
        p.poll()
        return None
    if pid == 0:
        return None
    p.returncode = os.waitstatus_to_exitcode(status)
    return ru.ru_utime + ru.ru_stime


def _tail(p: Path) -> str:
    try:
        lines = p.read_text().strip().splitlines()
        return lines[-1] if lines else "(no output)"
    except OSError:
        return "(no log)"
