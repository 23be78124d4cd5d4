//! # router — the emulator's userspace bottleneck router
//!
//! Real IPv4 packets, read from a TUN device, go through the *same* queue disciplines as the
//! simulator (`crates/aqm`), a link with exact serialization timing at the scenario's rate,
//! and a per-class delay line that emulates the base RTT; then they are written back to the
//! TUN device for the kernel to route on to the receiver (the router ⇄ orchestrator contract
//! is in crates/router/README.md).
//!
//! Layers, bottom up:
//! - [`ipv4`]: the wire format — a parser that never panics, the header checksum, CE marking
//!   with an incremental checksum update (RFC 1624).
//! - [`gso`]: TCP/IPv4 super-packets from hosts with offloads — the virtio-net header, the
//!   segmenter that cuts them into MTU-sized segments before the queue, and the coalescer
//!   that writes runs of departures back as the receiver's GRO would merge them.
//! - [`packet`]: the queued packet, an [`aqm::Packet`].
//! - [`pipeline`]: the data path, sans-IO (the caller passes `now`), so it runs under a
//!   virtual clock in tests exactly as under the real clock in the binary.
//! - [`measure`]: per-flow, per-class and queue measurements and the results JSON.
//! - [`stall`]: the stall probe's logic (`aqmlab-stallprobe`): how late a real-time thread
//!   wakes on each CPU of the testbed, i.e. when the CPU ran nothing.
//! - [`config`]: `router.json`, with the simulator's engine config inside, read as
//!   [`link::LinkConfig`] (the bottleneck's part).
//! - [`tun`] (Linux only): the TUN device and the clock; used by the `aqmlab-router` binary.
//! - [`stop`] (Linux only): SIGTERM/SIGINT as a flag for the binaries' loops.
//! - [`tap`] (Linux only): when each packet reached the TUN, from a packet socket's ring on it.

pub mod config;
pub mod gso;
pub mod ipv4;
pub mod measure;
pub mod packet;
pub mod pipeline;
pub mod stall;
#[cfg(target_os = "linux")]
pub mod stop;
#[cfg(target_os = "linux")]
pub mod tap;
#[cfg(target_os = "linux")]
pub mod tun;

pub use config::RouterConfig;
pub use pipeline::Pipeline;
