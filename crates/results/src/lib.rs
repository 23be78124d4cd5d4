//! # results — a run's results, computed by one code for both backends
//!
//! The simulator and the emulator measure the same bottleneck (`crates/link`) in different
//! ways; their results compare because both hand their measurements over as the same records
//! and this crate computes the summary and the tables from those, once:
//! - [`record`]: a run's records, what a backend measured as plain data (the simulator fills
//!   them from its world at the end of a run, `sim::World::into_record`);
//! - [`metrics`]: the metrics defined once for both (Jain's index, fair shares, the
//!   nearest-rank quantile, completion times by size, harm);
//! - [`tables`]: the summary and the tables computed from the records ([`collect`]);
//! - [`emu`]: the emulator's records, built from the router's report and the traffic's
//!   measurements;
//! - [`convergence`]: the windowed Jain index over a run's time series and the convergence
//!   time after each join or leave.
//!
//! It depends on `crates/link` for the queue measurement's types (sojourn histogram, drop and
//! mark reasons); the emulator's router does not depend on it. It knows nothing of the TCP
//! model.

pub mod convergence;
pub mod emu;
pub mod metrics;
pub mod record;
pub mod tables;

pub use record::RunRecord;
pub use tables::{collect, Column, RunResult, Table};
