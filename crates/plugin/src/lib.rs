//! # plugin — queue disciplines written as one C file, run in a WebAssembly sandbox
//!
//! A user writes a discipline against `plugins/include/aqmlab_qdisc.h` (ABI v2), compiles it
//! with clang to a `.wasm` module ([`compile_c`]), and aqmlab runs it like a built-in: a
//! [`Plugin`] is the compiled and checked module, [`Plugin::build`] makes a [`PluginQdisc`]
//! for one run, and `PluginQdisc` implements [`aqm::Qdisc`], so the simulator and the
//! emulator's router drive it through the same calls as `aqm::AnyQdisc`.
//!
//! The split of work (see the header for the C side):
//! - The host holds the packets, in `n_queues` FIFOs, and keeps a record of each queue
//!   (length, backlog, the head packet's fields) in the module's memory. The module decides:
//!   at enqueue, the queue an arrival joins, or a mark, or a drop; at dequeue, the queue to
//!   serve; on the way, drops and marks of queue heads (`aqmlab_drop_head`,
//!   `aqmlab_mark_head`). The host hands each drop and mark, with its reason, to the caller's
//!   [`aqm::Verdicts`] sink in the order the module made them.
//! - `now` is an argument of every call; the only other input is `aqmlab_random_u64`, a PCG
//!   stream seeded from the run's seed ([`aqm::rng_from_seed`]). A plugin run is as
//!   reproducible as a built-in one.
//! - A periodic timer (`aqmlab_timer`, PIE-style) runs lazily, every tick at its own time,
//!   before the first call at or after it.
//!
//! The sandbox is wasmtime (Cranelift compiles the module to native code once, at load),
//! chosen over the wasmi interpreter by measurement (`examples/perpacket.rs`; the numbers are
//! in its header): a module may import only the ABI's four host functions; its exports must
//! have the ABI's signatures; its memory is capped ([`Limits::memory_bytes`]; growing past it
//! traps); every call runs on a fuel budget ([`Limits::fuel_per_call`]; fuel, not epochs, so
//! that where a runaway stops is deterministic too).
//! Whatever fails — a refused module, a trap, a runaway or a broken ABI rule — is a
//! [`PluginError`] naming the module, and for a call the function and the simulated time.

pub mod abi;
mod cc;
pub mod cc_abi;
mod cc_tunables;
mod compile;
mod error;
mod plugin;
mod qdisc;

pub use cc::{CcInfo, CcInstance, CcPlugin, OpArgs};
pub use cc_tunables::{Kind as TunableKind, Tunable};
pub use compile::{
    cc_clang_args, clang_args, compile_c, compile_c_with, compile_cc, explain_clang_failure,
    find_clang, include_dir, DEBIAN_PACKAGES,
};
pub use error::PluginError;
pub use plugin::{Limits, Plugin, PluginInfo, PluginOption};
pub use qdisc::PluginQdisc;
