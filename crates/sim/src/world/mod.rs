//! The simulated world: flows, the dumbbell topology, the event loop and the results.
//!
//! Topology (docs/model.md): each flow class has its own base RTT R. A sender's packets reach
//! the bottleneck at once (no access delay), are queued and serialized at rate C, then travel
//! R/2 to the receiver; ACKs travel R − R/2 back, uncongested. Routes are lists of hops ([`Hop`]), so a reverse-path bottleneck or a second
//! bottleneck is a longer route, not a change to hosts or flows.
//!
//! This module holds the world's state; its three parts are the files beside it:
//! - `build`: the flow plan and the world built from the config ([`World::new`], [`flow_plan`],
//!   [`check`]);
//! - `dispatch`: the event loop ([`World::run`]) and how each event moves packets along their
//!   routes;
//! - `record`: the measurements taken while the run goes (the time series) and the run's
//!   records at its end ([`World::into_record`]).

mod build;
mod dispatch;
mod record;

use crate::config::EngineConfig;
use crate::engine::{Nanos, Scheduler};
use crate::host::{Gro, Nic, Stalls};
use crate::marker::FlowMarker;
use crate::measure::{FlowMeasure, QueueMeasure};
use crate::net::{Bottleneck, DelayLine, Hop};
use crate::packet::{AckPkt, DataPkt};
use crate::results::SampleRow;
use crate::tcp::{AnySender, Receiver};

pub use build::{check, flow_plan, PlannedFlow};

/// One connection.
pub struct Flow {
    pub class: usize,
    pub start_ns: Nanos,
    /// When the flow's application stops writing (a CBR flow stops sending); None = never.
    pub stop_ns: Option<Nanos>,
    /// Payload bytes of a finite flow; None = bulk.
    pub size_bytes: Option<u64>,
    pub sender: AnySender,
    pub receiver: Receiver,
}

/// Every flow's Linux hosts (`[host]` without `ideal`): flow i's sender NIC and receiver GRO
/// are `nics[i]` and `gros[i]`.
pub struct Offloads {
    pub nics: Vec<Nic>,
    pub gros: Vec<Gro>,
    /// The GRO packets of the current poll (ranges into its packets), reused.
    units: Vec<std::ops::Range<usize>>,
    /// GRO packets handed to the receivers.
    pub gro_packets: u64,
}

/// Why a run stopped early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunError {
    Config(String),
    Interrupted,
    /// A plugin's call failed (a trap, a runaway, a broken ABI rule), the discipline's or a
    /// CC's: the message names the module, the function and the simulated time.
    Plugin(String),
    /// A large allocation (flows, per-flow state, result tables) failed: what it was for.
    OutOfMemory(String),
}

/// Reserve room for `n` more elements, or say what the memory was for.
fn reserve<T>(v: &mut Vec<T>, n: usize, what: &str) -> Result<(), RunError> {
    v.try_reserve_exact(n).map_err(|_| {
        RunError::OutOfMemory(format!(
            "cannot allocate {} MB for {what}",
            (n as u128 * std::mem::size_of::<T>() as u128) >> 20
        ))
    })
}

/// `n` copies of `x` in a vector allocated with [`reserve`].
fn filled<T: Clone>(n: usize, x: T, what: &str) -> Result<Vec<T>, RunError> {
    let mut v = Vec::new();
    reserve(&mut v, n, what)?;
    v.resize(n, x);
    Ok(v)
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Config(m) => f.write_str(m),
            RunError::Interrupted => f.write_str("interrupted"),
            RunError::Plugin(m) => f.write_str(m),
            RunError::OutOfMemory(m) => write!(f, "out of memory: {m}"),
        }
    }
}

pub struct World {
    pub cfg: EngineConfig,
    pub sched: Scheduler,
    pub bottleneck: Bottleneck<DataPkt>,
    /// Forward (bottleneck → receiver) lines, one per class; line id = class index.
    pub fwd_lines: Vec<DelayLine<DataPkt>>,
    /// Reverse (receiver → sender) lines, one per class; line id = n_classes + class index.
    pub rev_lines: Vec<DelayLine<AckPkt>>,
    fwd_routes: Vec<Vec<Hop>>,
    rev_routes: Vec<Vec<Hop>>,
    pub flows: Vec<Flow>,
    /// One packet-value marker per flow when the discipline reads values (else empty).
    pub markers: Vec<FlowMarker>,
    pub fm: Vec<FlowMeasure>,
    pub qm: QueueMeasure,
    pub dropped_total: u64,
    pub samples: Vec<SampleRow>,
    pub queue_samples: Vec<crate::results::QueueRow>,
    data_buf: Vec<DataPkt>,
    ack_buf: Vec<AckPkt>,
    /// Packets the bottleneck has accepted for transmission (for benchmarks).
    pub bottleneck_pkts: u64,
    /// The Linux hosts' NICs and receive paths; None = ideal hosts.
    pub offloads: Option<Offloads>,
    /// When the hosts' CPU is away (none by default).
    pub stalls: Stalls,
    /// Flows in start order, and the next one to start.
    start_order: Vec<u32>,
    next_start: usize,
    /// Flows the time series may still show, in id order: those whose start time has come,
    /// less those done for good (`take_sample`'s skip test, once true, stays true), so a
    /// sample does not touch the cold state of a workload's thousands of finished flows.
    sampled: Vec<u32>,
    /// Every flow by (start time, id), and the next one to add to `sampled`.
    sample_order: Vec<u32>,
    next_sampled: usize,
    /// The plugin CCs' registrations, one per class that runs one (checked like the
    /// discipline: a failed op ends the run).
    cc_regs: Vec<crate::cc::Registration>,
}

/// A component's seed from the run seed ([`link::seed`], shared with the emulator's router).
pub use link::seed::derive_seed;

#[cfg(test)]
mod tests {
    //! The world's own checks, and the small scenarios the tests of its parts run.

    use serde_json::{json, Value};

    use super::*;

    /// A TCP class of `count` flows of `cc` starting at 0 (bulk unless `size_bytes`).
    pub fn tcp(cc: &str, count: u32, rtt_ns: u64, size_bytes: Option<u64>) -> Value {
        json!({"name": cc, "cc": {"name": cc}, "count": count, "rtt_ns": rtt_ns, "ecn": false,
               "start": {"kind": "fixed", "at_ns": 0}, "size_bytes": size_bytes, "fq_pacing": false})
    }

    /// A CBR class of `count` flows of `rate_bps` starting at 0.
    pub fn cbr(count: u32, rtt_ns: u64, rate_bps: u64) -> Value {
        json!({"name": "cbr", "cbr_rate_bps": rate_bps, "count": count, "rtt_ns": rtt_ns, "ecn": false,
               "start": {"kind": "fixed", "at_ns": 0}, "size_bytes": null, "fq_pacing": false})
    }

    /// A run of `classes` through a `rate_bps` bottleneck of `buffer_packets` under `aqm`, with
    /// ideal hosts and a 10 ms time series.
    pub fn config(
        rate_bps: u64,
        buffer_packets: u64,
        aqm: Value,
        classes: Vec<Value>,
        duration_ns: u64,
        warmup_ns: u64,
    ) -> Value {
        json!({
            "name": "world", "seed": 7, "duration_ns": duration_ns, "warmup_ns": warmup_ns,
            "bottleneck": {"rate_bps": rate_bps, "buffer_packets": buffer_packets, "buffer_bytes": null, "aqm": aqm, "rtt_ref_ns": 10000000},
            "classes": classes,
            "measure": {"interval_ns": 10_000_000u64, "hist_bin_ns": 1_000_000u64},
            "host": {"offloads": false, "ideal": true},
        })
    }

    /// `cfg` with Linux's hosts (offloads, NIC, GRO) instead of ideal ones.
    pub fn linux_hosts(mut cfg: Value) -> Value {
        cfg["host"] = serde_json::to_value(crate::config::HostConfig::linux()).unwrap();
        cfg
    }

    pub fn engine(cfg: &Value) -> EngineConfig {
        EngineConfig::from_json(&cfg.to_string()).unwrap()
    }

    /// The world of `cfg` after every event of its run, before its records are taken.
    pub fn ran(cfg: &Value) -> World {
        let mut w = World::new(engine(cfg)).unwrap();
        w.schedule_first_events().unwrap();
        w.run_events(&mut |_| true).unwrap();
        w
    }

    #[test]
    fn an_allocation_too_large_says_what_it_was_for_and_how_many_mb() {
        // 2^61 eight-byte elements are 2^64 bytes, 2^44 MB: more than any address space.
        let mut v: Vec<u64> = Vec::new();
        let e = reserve(&mut v, 1 << 61, "the test").unwrap_err();
        assert_eq!(
            e,
            RunError::OutOfMemory(format!("cannot allocate {} MB for the test", 1u64 << 44))
        );
        assert_eq!(
            e.to_string(),
            "out of memory: cannot allocate 17592186044416 MB for the test"
        );
        assert_eq!(filled(3, 9u8, "three").unwrap(), [9, 9, 9]);
    }

    #[test]
    fn an_interrupted_run_stops_at_the_first_progress_check() {
        // The loop asks every 2^16 events; one saying no ends the run with Interrupted, before
        // the end: a 120 Mbit/s CBR flow over 10 s is 10^5 datagrams, each sent, serialized and
        // delivered by an event of its own.
        let cfg = config(
            240_000_000,
            100,
            json!({"kind": "taildrop"}),
            vec![cbr(1, 20_000_000, 120_000_000)],
            10_000_000_000,
            0,
        );
        let mut w = World::new(engine(&cfg)).unwrap();
        w.schedule_first_events().unwrap();
        let mut asked = Vec::new();
        let r = w.run_events(&mut |f| {
            asked.push(f);
            false
        });
        assert_eq!(r, Err(RunError::Interrupted));
        assert_eq!(asked.len(), 1);
        assert!(asked[0] > 0.0 && asked[0] < 1.0, "asked at {}", asked[0]);
        assert_eq!(w.sched.events_run, 1 << 16);
    }
}
