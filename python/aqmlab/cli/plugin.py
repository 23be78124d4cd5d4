"""`aqmlab plugin build`: a discipline's C file, or a congestion control's struct_ops BPF C
file, → its WebAssembly module, and what the module declares (docs/plugins.md)."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from aqmlab.cli.common import fail, out

if TYPE_CHECKING:
    from aqmlab.scenario.plugin import CcModule

app = typer.Typer(
    help="Build plugins: a queue discipline (one C file) or a congestion control (one struct_ops BPF C file) (docs/plugins.md).", no_args_is_help=True
)

#: include/net/tcp.h's TCP_CONG_* flags, by bit (a CC file defines them itself: vmlinux.h
#: holds no macros).
TCP_CONG_FLAGS = {
    1 << 0: "TCP_CONG_NON_RESTRICTED",
    1 << 1: "TCP_CONG_NEEDS_ECN",
    1 << 2: "TCP_CONG_NEEDS_ACCECN",
    1 << 3: "TCP_CONG_ECT_1_NEGOTIATION",
    1 << 4: "TCP_CONG_NO_FALLBACK_RFC3168",
}
#: What each `ecn` of `engine.cc_plugin_info` means for a flow (crates/sim/src/cc/plugin.rs
#: `Params::ecn_use`, and the sender and receiver it sets up as for the built-ins).
ECN_USE = {
    "classic": "classic: ECN only where the class sets ecn = true (RFC 3168), as reno and cubic",
    "dctcp": "dctcp: ECN always on, CE echoed by DCTCP's receiver state machine, as dctcp (TCP_CONG_NEEDS_ECN)",
    "l4s": "l4s: ECN always on, ECT(1) and accurate (AccECN) feedback, as prague (TCP_CONG_NEEDS_ACCECN or TCP_CONG_ECT_1_NEGOTIATION)",
}
#: Ops a CC may set that the simulator never calls (crates/sim/src/cc/plugin.rs, its docs).
NOT_CALLED = {
    "undo_cwnd": "undo is not modelled, for any CC",
    "sndbuf_expand": "the send buffer is unlimited",
    "release": "a flow's socket is never freed before the run ends",
}


def is_cc_file(file: Path) -> bool:
    """A congestion control's C file rather than a discipline's: named `*.bpf.c`, or holding a
    `SEC(".struct_ops")` (a discipline's file never has one)."""
    if file.name.endswith(".bpf.c"):
        return True
    if file.suffix != ".c":
        return False
    try:
        return 'SEC(".struct_ops")' in file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False  # the discipline's path then says it cannot read the file


@app.command("build")
def build(
    file: Annotated[Path, typer.Argument(help="The discipline's C file (or a .wasm module, to check it and see what it declares)")],
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Where to write the module (default: FILE with .wasm for a C file; nothing for a module)")
    ] = None,
) -> None:
    """Compile FILE against the ABI header, check the module as a run would load it, write it,
    and print what it declares: kind, queues, timer, options. A congestion control (FILE named
    *.bpf.c, or with a SEC(".struct_ops")) is built against the simulator's kernel headers
    instead: its ops, flags and ECN."""
    if is_cc_file(file):
        build_cc(file, output)
        return
    from aqmlab.cli.listing import aqm_table
    from aqmlab.inputs.errors import ScenarioError
    from aqmlab.scenario import plugin  # start-up time: the scenario model loads pydantic and the engine
    from aqmlab.store.atomic import replacing

    try:
        module = plugin.resolve(str(file))
        about = plugin.describe(module)
    except ValueError as e:
        fail(ScenarioError(str(e)))
    target = output if output is not None else file.with_suffix(".wasm") if file.suffix == ".c" else None
    if target is not None and not (target.exists() and target.resolve() == file.resolve()):
        try:
            with replacing(target) as tmp:
                tmp.write_bytes(module.wasm.read_bytes())
        except OSError as e:
            fail(ScenarioError(f"cannot write {target} ({e.strerror})"))
    info = module.info
    timer = (
        "set by aqmlab_init (aqmlab_set_timer)"
        if info["sets_timer"]
        else f"every {plugin.bound_text('time', info['timer_ns'])} (aqmlab_timer)"
        if info["timer_ns"]
        else "none"
    )
    enqueue = "aqmlab_enqueue" if info["has_enqueue"] else "the host's (every arrival to queue 0, within aqmlab_set_limit)"
    dequeue = "aqmlab_dequeue" if info["has_dequeue"] else "the host's (queue 0's head)"
    limit = (
        "the plugin enforces the buffer limit itself (AQMLAB_OWNS_LIMIT)"
        if info["owns_limit"]
        else "the physical buffer drops before the plugin sees an arrival"
    )
    values = "; reads packet values (AQMLAB_READS_VALUES: the flows get a [marker])" if info["reads_packet_values"] else ""
    lines = [
        f"{file}: {info['kind']} — {info['summary']} (ABI v{info['abi_version']})",
        f"source: {info['source']}",
        f"queues: {info['n_queues']}; enqueue: {enqueue}; dequeue: {dequeue}; timer: {timer}; {limit}{values}",
        f"delay target: {info['delay_target_option'] or 'none'}; module: {target or module.wasm} ({module.ref})",
    ]
    for line in lines:
        out.print(line, highlight=False, markup=False, soft_wrap=True)
    out.print(aqm_table([(f"plugin {file}", about)]))
    example = ", ".join(f"{o['name']} = {_toml(o['default'])}" for o in about["options"] if o["default"] is not None)
    out.print(
        f'in a scenario: aqm = {{ kind = "plugin", module = "{file}"{", " + example if example else ""} }}', highlight=False, markup=False, soft_wrap=True
    )


def cc_lines(file: Path, module: "CcModule") -> list[str]:
    """What a CC module declares, as `plugin build` and `list ccs --plugin` print it."""
    info = module.info
    flags = int(info["flags"])
    named = [n for bit, n in TCP_CONG_FLAGS.items() if flags & bit]
    unknown = flags & ~sum(TCP_CONG_FLAGS)
    flag_text = f"{flags:#x} ({', '.join(named + ([f'{unknown:#x} unknown'] if unknown else []))})" if flags else "0"
    ops = ", ".join(f"{op} (not called: {NOT_CALLED[op]})" if op in NOT_CALLED else op for op in info["ops"])
    return [
        f"{file}: congestion control {info['name']} (struct tcp_congestion_ops .name)",
        f"ops: {ops}",
        f"flags: {flag_text}; ECN: {ECN_USE.get(info['ecn'], info['ecn'])}",
        f"tunables (cc_params): {tunables_text(info) or 'none (no const volatile global that it reads)'}",
    ]


def tunables_text(info: dict[str, Any]) -> str:
    """A CC module's tunables as `name = default (type)`, comma-separated."""
    return ", ".join(f"{t['name']} = {_toml(bool(t['default']) if t['kind'] == 'bool' else t['default'])} ({t['type']})" for t in info.get("tunables", []))


def build_cc(file: Path, output: Path | None) -> None:
    """`plugin build` of a congestion control: compile, check, write FILE's two artifacts —
    the simulator's module (default: beside it, `x.bpf.c` → `x.wasm`) and the kernel's object
    beside that (`x.bpf.o`, as `aqmlab emulate` builds it) — and print what it declares. The
    kernel's object needs `make build`'s vmlinux.h and clang; without them only the module is
    written, and a line says why."""
    import tempfile

    from aqmlab.emu import bpfcc
    from aqmlab.inputs.errors import ScenarioError
    from aqmlab.scenario import plugin  # start-up time: as in `build`
    from aqmlab.store.atomic import replacing

    try:
        module = plugin.resolve_cc(str(file))
    except ValueError as e:
        fail(ScenarioError(str(e)))
    target = output if output is not None else file.with_name(plugin.cc_stem(file) + ".wasm")
    kernel_target = target.with_suffix(".bpf.o")
    for t, what in ((target, "module"), (kernel_target, "kernel object")):
        if t.exists() and t.resolve() == file.resolve():
            fail(ScenarioError(f"{t}: the {what} would overwrite its own source; give another -o"))
    missing = bpfcc.kernel_build_missing()
    with tempfile.TemporaryDirectory(prefix="aqmlab-cc-") as d:
        kernel_obj = Path(d) / "cc.bpf.o"
        if missing is None:
            try:
                bpfcc.compile_kernel_object(file, kernel_obj)
            except bpfcc.CompileError as e:
                fail(ScenarioError(str(e)))
        try:
            with replacing(target) as tmp:
                tmp.write_bytes(module.wasm.read_bytes())
            if missing is None:
                with replacing(kernel_target) as tmp:
                    tmp.write_bytes(kernel_obj.read_bytes())
        except OSError as e:
            fail(ScenarioError(f"cannot write {e.filename} ({e.strerror})"))
    kernel = f"kernel object: {kernel_target}" if missing is None else f"kernel object: not built ({missing})"
    lines = [*cc_lines(file, module), f"module: {target} ({module.ref}: the module and its source)", kernel, f'in a scenario: cc = {{ plugin = "{file}" }}']
    for line in lines:
        out.print(line, highlight=False, markup=False, soft_wrap=True)


def _toml(v: object) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    return f'"{v}"' if isinstance(v, str) else str(v)
