//! The simulator's results: its per-flow time-series sample, and the tables and summary types,
//! which `crates/results` computes from the run's records (`World::into_record`) for both
//! backends.

use crate::cc::CaState;

pub use ::results::tables::{collect, Column, RunResult, Table};
pub use link::measure::QueueRow;

/// A per-flow time-series sample.
#[derive(Clone, Debug)]
pub struct SampleRow {
    pub t_ns: u64,
    pub flow: u32,
    pub class: u32,
    pub throughput_bps: f64,
    pub cwnd: u32,
    pub ssthresh: u32,
    pub inflight: u32,
    pub srtt_us: u64,
    pub pacing_rate_bps: f64,
    pub ca_state: CaState,
    /// The CC's own state (BBR mode and bw estimate, inflight_hi, α).
    pub cc: crate::cc::CcProbe,
}
