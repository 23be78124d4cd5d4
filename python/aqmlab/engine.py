"""The one door to the Rust engine (`aqmlab._native`, built from crates/py): every call from
Python into the simulator, its checks and its descriptions goes through this module.

The engine speaks JSON strings and plain Python values (crates/py/src/lib.rs); the functions
here are its own, re-exported under the names the rest of the package uses, plus the
descriptions cached by kind (they never change within a process).
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

from aqmlab import _native

__all__ = [
    "MSS_BYTES",
    "PACKET_BYTES",
    "VERSION",
    "build_id",
    "cc_plugin_info",
    "ccs",
    "check",
    "check_cc",
    "compile_cc_plugin",
    "compile_plugin",
    "convergence",
    "describe_aqms",
    "describe_ccs",
    "estimate",
    "events",
    "flow_plan",
    "harm",
    "host_defaults",
    "plugin_info",
    "qdiscs",
    "run",
    "tables_from_records",
    "windowed_jain",
]

#: The wire size of a full-sized packet, bytes (the engine's own constant, crates/sim).
PACKET_BYTES: int = _native.PACKET_BYTES
#: Payload bytes of a full-sized TCP segment: the MTU less IP and TCP headers with timestamps
#: (the simulator's `sim::packet::MSS_BYTES`).
MSS_BYTES: int = _native.MSS_BYTES
#: The engine's version (the crate's, as built).
VERSION: str = _native.__version__

check = _native.check
check_cc = _native.check_cc
estimate = _native.estimate
flow_plan = _native.flow_plan
run = _native.run
tables_from_records = _native.tables_from_records
ccs = _native.ccs
qdiscs = _native.qdiscs
describe_ccs = _native.describe_ccs
windowed_jain = _native.windowed_jain
events = _native.events
convergence = _native.convergence
harm = _native.harm
host_defaults = _native.host_defaults


@functools.cache
def describe_aqms() -> dict[str, dict[str, Any]]:
    """Every discipline's description (kind, summary, source, one_of, options), by kind: the
    engine's own, from which validation and lowering are built."""
    return {d["kind"]: d for d in _native.describe_aqms()}


def compile_plugin(source: str, output: str, include_dir: str) -> None:
    """Compile a plugin's C file into the WebAssembly module `output` with Debian's clang,
    against the ABI header in `include_dir` (crates/plugin, `compile.rs`). Raises ValueError
    with clang's messages, or naming the Debian packages to install when the toolchain is
    missing."""
    _native.compile_plugin(source, output, include_dir)


def plugin_info(wasm_path: str) -> dict[str, Any]:
    """What a plugin module declares: kind, summary, source, n_queues, owns_limit, timer_ns,
    has_dequeue, delay_target_option and its options (name, unit, doc, default, min, max, in
    the unit's terms: ns, bytes, packets, bit/s; None: unset or unbounded). Raises ValueError
    naming the module and what is wrong with it."""
    return _native.plugin_info(wasm_path)


def compile_cc_plugin(source: str, output: str, include_dir: str) -> None:
    """Compile a congestion control's struct_ops BPF C file into the WebAssembly module
    `output` with Debian's clang, against the simulator's kernel headers in
    `include_dir`/bpfcc (crates/plugin, `compile.rs` `cc_clang_args`). Raises ValueError as
    `compile_plugin` does (a function the simulator does not provide: wasm-ld's "undefined
    symbol")."""
    _native.compile_cc_plugin(source, output, include_dir)


def cc_plugin_info(wasm_path: str) -> dict[str, Any]:
    """What a congestion-control module's `struct tcp_congestion_ops` declares: name, flags
    (TCP_CONG_*), ops (the member names it sets) and ecn ("classic", "dctcp" for
    TCP_CONG_NEEDS_ECN, "l4s" for AccECN or ECT(1) negotiation). Raises ValueError naming the
    module and what is wrong with it (no struct_ops, a required op missing, an import the
    simulator does not provide)."""
    return _native.cc_plugin_info(wasm_path)


def build_id() -> str:
    """First 16 hex digits of the SHA-256 of the engine's shared library: which build ran."""
    return hashlib.sha256(Path(_native.__file__).read_bytes()).hexdigest()[:16]
