//! # sim — a deterministic packet-level simulator of TCP flows through an AQM bottleneck
//!
//! Layers, bottom up: [`engine`] (integer-ns event queue, ties broken FIFO), the dumbbell
//! topology (delay lines and the bottleneck link with its queue discipline from `crates/aqm`),
//! the Linux-faithful TCP model ([`tcp`]) with its congestion controls ([`cc`]), the
//! packet-value marker at the flows' edge ([`marker`], for PPV and CSAQM), and measurement
//! ([`measure`]). What the bottleneck shares with the emulator's router — its config types,
//! link serialization, the marker, queue measurement and seed derivation — is `crates/link`;
//! the summary and tables computed from a run's records, for both backends, are
//! `crates/results`. The simulator knows nothing of files or Python: it takes an
//! [`config::EngineConfig`] and returns a [`results::RunResult`].

pub mod cc;
pub mod config;
pub mod engine;
pub mod estimate;
pub mod host;
pub mod measure;
pub mod net;
pub mod packet;
pub mod results;
pub mod tcp;
pub mod world;

/// The packet-value marker (shared with the emulator's router).
pub use link::marker;

pub use config::EngineConfig;
pub use results::RunResult;
pub use world::{RunError, World};

/// Parse an engine config and run it to the end.
pub fn run_json(
    config_json: &str,
    progress: &mut dyn FnMut(f64) -> bool,
) -> Result<RunResult, RunError> {
    let cfg = EngineConfig::from_json(config_json).map_err(RunError::Config)?;
    World::new(cfg)?.run(progress)
}
