//! # link — what the simulator and the emulator's router share about the bottleneck
//!
//! Both backends put the same bottleneck in front of their flows: a link of rate C behind a
//! buffer and a queue discipline from `crates/aqm`, with a packet-value marker at the flows'
//! edge for the disciplines that read values. This crate holds what must be the same code in
//! both so that their results compare, and only that: the router links it and nothing of
//! the results pipeline.
//! - [`config`]: the bottleneck's part of the engine config (`sim::EngineConfig` embeds these
//!   types; the router reads the same JSON as [`config::LinkConfig`]);
//! - [`serializer`]: exact link serialization timing;
//! - [`marker`]: the packet-value marker;
//! - [`measure`]: queue measurement (sojourn histogram, link bytes, drop and mark reasons);
//! - [`seed`]: seed derivation, and every component's stream number.
//!
//! A run's records and the summary and tables computed from them, for both backends, are
//! `crates/results`. It knows nothing of the TCP model.

pub mod config;
pub mod discipline;
pub mod marker;
pub mod measure;
pub mod seed;
pub mod serializer;

pub use config::LinkConfig;
pub use seed::derive_seed;
pub use serializer::Serializer;
