//! What a run will cost, from its config alone, before anything is built: simulated packets
//! and events, peak memory and wall time. The front prints it (`aqmlab validate`), warns
//! about runs of hours and refuses runs that cannot fit in memory before they start.
//!
//! Packets: a link that a bulk TCP flow keeps busy carries C·T / (8 · 1500) packets while such
//! a flow is active; CBR flows offer their rate whatever the link does (the packets beyond C
//! are dropped at the bottleneck, each an arrival the engine still handles); finite flows
//! and a workload's arrivals offer their bytes in MSS-sized segments. Events per bottleneck
//! packet follow what the engine does with it ([`crate::world`]): the link's transmission
//! end, the forward delay line's head, and one ACK every second segment (Linux
//! `__tcp_ack_snd_check`: a delayed ACK covers two full-sized segments) crossing the reverse
//! delay line — 2.5 per packet, the figure bench/README.md measures.
//!
//! Memory is the sum of what grows with the config, each term a count times the size of the
//! real struct (`size_of`): per flow (its `Flow`, measurement, plan entry, marker and
//! record, and its row of the flows table), the scoreboards and the packets in the network
//! (buffer and delay lines, at most twice their peak because ring buffers double), the event
//! heap, and the per-interval tables (time series and queue rows, held three times on their way
//! out: the engine's columns, the Python lists the FFI builds from them, the DataFrame).
//! The fixed cost of the process (the interpreter and its libraries) is the front's, which
//! adds it.

use std::mem::size_of;

use crate::config::{ClassConfig, EngineConfig, SizeDist, StartConfig};
use crate::host::{Gro, Nic};
use crate::marker::FlowMarker;
use crate::measure::FlowMeasure;
use crate::packet::{AckPkt, DataPkt, MSS_BYTES, MTU_BYTES};
use crate::results::{QueueRow, SampleRow};
use crate::world::{Flow, PlannedFlow};
use results::record::{FlowRecord, SampleRecord};

/// Columns of the result tables that grow with the run (`results::tables::collect`): the time
/// series (one row per flow and interval), the queue table (one row per interval), the flows
/// table (one row per flow) and the fct table (one row per finite flow). A test checks them
/// against a real run's tables.
pub const TIMESERIES_COLUMNS: u64 = 14;
pub const QUEUE_COLUMNS: u64 = 8;
pub const FLOWS_COLUMNS: u64 = 41;
pub const FCT_COLUMNS: u64 = 7;

/// Bytes of one table cell in each of its three forms: the engine's column
/// (`results::tables::Column::OptF64`, the widest numeric kind), the Python list the FFI makes
/// (an 8-byte list slot and a 24-byte CPython float object, `sys.getsizeof(1.0)`), and the
/// DataFrame column (8 bytes per cell).
pub const CELL_BYTES: u64 = size_of::<Option<f64>>() as u64 + 8 + 24 + 8;

/// Events the engine runs per bottleneck packet (see the module header): link transmission
/// end + forward delay-line head + half an ACK's reverse delay-line head.
pub const EVENTS_PER_PACKET: f64 = 2.5;

/// Bottleneck packets the simulator handles per wall-clock second on one core: bench/README.md
/// §Simulator speed, scenario (a) (20 CUBIC flows, 1 Gbit/s, TailDrop), median of
/// `bench/perf/side_by_side.sh OLD NEW 7` on the EPYC VM, 2026-11-24: 4.71 M packets/s.
pub const PACKETS_PER_S: f64 = 4.71e6;

/// Cost per packet of Linux hosts with offloads relative to ideal ones: every packet also
/// passes its sender's NIC and a NAPI (GRO) poll. bench/README.md §The host model,
/// instructions per bottleneck packet (`bench/perf/icount.sh`), the larger of its two
/// scenarios: (a) 2723 / 2138 = 1.27.
pub const OFFLOADS_COST: f64 = 1.27;
/// The same for Linux hosts without offloads: no GRO, so an ACK decision per packet and twice
/// the ACKs. Same table: (a) 3013 / 2138 = 1.41.
pub const NO_OFFLOADS_COST: f64 = 1.41;

/// Events per bottleneck packet that Linux hosts add: the NIC's transmission end, and a GRO
/// poll per about four packets (one per 50 µs poll at 1 Gbit/s, 12 µs per packet).
pub const OFFLOADS_EVENTS_PER_PACKET: f64 = 1.25;

/// A run's estimated cost.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Estimate {
    /// Flows the run creates (a workload's: its expected arrivals).
    pub flows: u64,
    /// Packets the bottleneck transmits, and those it receives beyond its capacity (CBR
    /// overload: dropped, but each one handled).
    pub bottleneck_packets: u64,
    pub excess_packets: u64,
    pub events: u64,
    /// Time-series rows (flows × sampling intervals while each flow is under way).
    pub timeseries_rows: u64,
    /// Simulated run's wall time on one core, seconds (engine only).
    pub wall_s: f64,
    /// Peak memory of the engine and its result tables, bytes, with its parts.
    pub peak_bytes: u64,
    pub flow_bytes: u64,
    pub network_bytes: u64,
    pub table_bytes: u64,
}

/// Mean of a flow-size distribution, bytes (the sizes a workload draws, `SizeDist::sample`).
pub fn mean_size(d: &SizeDist) -> f64 {
    match *d {
        SizeDist::Fixed { bytes } => bytes as f64,
        // `lo + u·(hi − lo + 1)`, u uniform in [0, 1): mean lo + (hi − lo + 1)/2.
        SizeDist::Uniform { lo, hi } => lo as f64 + (hi - lo + 1) as f64 / 2.0,
        SizeDist::Exponential { mean } => mean,
        SizeDist::Pareto { alpha, lo, hi } => {
            // Bounded Pareto on [L, H]: E[X] = L^α/(1 − (L/H)^α) · α/(α − 1) · (L^(1−α) − H^(1−α)),
            // and for α = 1: L·H/(H − L) · ln(H/L).
            let (l, h) = (lo as f64, hi as f64);
            if (alpha - 1.0).abs() < 1e-12 {
                l * h / (h - l) * (h / l).ln()
            } else {
                l.powf(alpha) / (1.0 - (l / h).powf(alpha)) * alpha / (alpha - 1.0)
                    * (l.powf(1.0 - alpha) - h.powf(1.0 - alpha))
            }
        }
        // E[exp(N(μ, σ²))] = exp(μ + σ²/2).
        SizeDist::Lognormal { mu, sigma } => (mu + sigma * sigma / 2.0).exp(),
        // Linear interpolation between CDF points: each segment contributes its midpoint
        // times its probability; the first point's mass sits at the first size.
        SizeDist::Empirical { ref points } => {
            let mut m = points[0].0 * points[0].1;
            for w in points.windows(2) {
                m += (w[0].0 + w[1].0) / 2.0 * (w[1].1 - w[0].1);
            }
            m
        }
    }
    .max(1.0)
}

/// The middle of a start or stop schedule for a class of `count` flows, ns.
fn schedule_mid(s: &StartConfig, count: u64) -> f64 {
    match *s {
        StartConfig::Fixed { at_ns } => at_ns as f64,
        StartConfig::Uniform { lo_ns, hi_ns } => (lo_ns as f64 + hi_ns as f64) / 2.0,
        StartConfig::Staggered {
            first_ns,
            spacing_ns,
        } => first_ns as f64 + spacing_ns as f64 * count.saturating_sub(1) as f64 / 2.0,
    }
}

/// How long a finite flow of `bytes` is under way, ns: slow start from the initial window of
/// 10 segments (RFC 6928) doubles each RTT, then the payload at the link's rate.
fn finite_flow_ns(bytes: f64, rtt_ns: f64, rate_bps: f64) -> f64 {
    let segs = bytes / MSS_BYTES as f64;
    rtt_ns * (1.0 + (1.0 + segs / 10.0).log2()) + bytes * 8.0 / rate_bps * 1e9
}

/// Per class: (flows, mean active span of one flow in ns, offered packets, whether it keeps
/// the link busy while active, the bulk span (start, end) in ns).
struct ClassLoad {
    flows: f64,
    active_ns: f64,
    offered_pkts: f64,
    bulk_span: Option<(f64, f64)>,
}

fn class_load(c: &ClassConfig, cfg: &EngineConfig) -> ClassLoad {
    let dur = cfg.duration_ns as f64;
    let rate = cfg.bottleneck.rate_bps as f64;
    if let Some(wl) = &c.workload {
        let stop = wl.stop_ns.unwrap_or(cfg.duration_ns).min(cfg.duration_ns) as f64;
        let span_s = (stop - wl.start_ns as f64).max(0.0) / 1e9;
        let flows = wl.rate_per_s * span_s;
        let size = mean_size(&wl.size);
        let active = finite_flow_ns(size, c.rtt_ns as f64, rate).min(dur);
        return ClassLoad {
            flows,
            active_ns: active,
            offered_pkts: flows * (size / MSS_BYTES as f64).ceil(),
            bulk_span: None,
        };
    }
    let n = c.count as f64;
    let start = schedule_mid(&c.start, c.count as u64).min(dur);
    let end = c
        .stop
        .as_ref()
        .map_or(dur, |s| schedule_mid(s, c.count as u64))
        .clamp(start, dur);
    match (c.cbr_rate_bps, c.size_bytes) {
        (Some(r), _) => ClassLoad {
            flows: n,
            active_ns: end - start,
            offered_pkts: n * r as f64 * (end - start) / 1e9 / (8.0 * MTU_BYTES as f64),
            bulk_span: None,
        },
        (None, Some(bytes)) => {
            let active =
                finite_flow_ns(bytes as f64, c.rtt_ns as f64, rate / n.max(1.0)).min(dur - start);
            ClassLoad {
                flows: n,
                active_ns: active,
                offered_pkts: n * (bytes as f64 / MSS_BYTES as f64).ceil(),
                bulk_span: None,
            }
        }
        (None, None) => ClassLoad {
            flows: n,
            active_ns: end - start,
            offered_pkts: 0.0,
            bulk_span: Some((start, end)),
        },
    }
}

/// The estimate of a config that has passed [`EngineConfig::check`].
pub fn estimate(cfg: &EngineConfig) -> Estimate {
    let dur = cfg.duration_ns as f64;
    let rate = cfg.bottleneck.rate_bps as f64;
    let pkt_bits = 8.0 * MTU_BYTES as f64;
    let capacity = rate * dur / 1e9 / pkt_bits;
    let loads: Vec<ClassLoad> = cfg.classes.iter().map(|c| class_load(c, cfg)).collect();

    // Packets: bulk TCP fills the link while any bulk class is active; the others add what
    // they offer; the link carries at most its capacity, and CBR's excess is still handled.
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for l in &loads {
        if let Some((s, e)) = l.bulk_span {
            lo = lo.min(s);
            hi = hi.max(e);
        }
    }
    let bulk = if hi > lo {
        capacity * (hi - lo) / dur
    } else {
        0.0
    };
    let offered: f64 = bulk + loads.iter().map(|l| l.offered_pkts).sum::<f64>();
    let carried = offered.min(capacity);
    let cbr_offered: f64 = cfg
        .classes
        .iter()
        .zip(&loads)
        .filter(|(c, _)| c.cbr_rate_bps.is_some())
        .map(|(_, l)| l.offered_pkts)
        .sum();
    let excess = (offered - capacity).max(0.0).min(cbr_offered);
    let offloads = !cfg.host.ideal;
    let host_cost = match (cfg.host.ideal, cfg.host.offloads) {
        (true, _) => 1.0,
        (false, true) => OFFLOADS_COST,
        (false, false) => NO_OFFLOADS_COST,
    };
    let events = (carried + excess)
        * (EVENTS_PER_PACKET
            + if offloads {
                OFFLOADS_EVENTS_PER_PACKET
            } else {
                0.0
            });

    // Flows and their state.
    let flows: f64 = loads.iter().map(|l| l.flows).sum();
    let marker = if cfg.bottleneck.aqm.reads_packet_values() {
        size_of::<FlowMarker>()
    } else {
        0
    };
    let per_flow = size_of::<Flow>()
        + size_of::<FlowMeasure>()
        + size_of::<PlannedFlow>()
        + marker
        // start_order, sample_order and the sampled list (u32 each); the flow's record with
        // its CC name, and the in-network count `into_record` keeps.
        + 3 * size_of::<u32>()
        + size_of::<FlowRecord>()
        + 16
        + size_of::<u64>()
        + if offloads { size_of::<Nic>() + size_of::<Gro>() } else { 0 };
    let finite: f64 = cfg
        .classes
        .iter()
        .zip(&loads)
        .filter(|(c, _)| c.workload.is_some() || c.size_bytes.is_some())
        .map(|(_, l)| l.flows)
        .sum();
    let flow_bytes = flows * (per_flow as f64 + (FLOWS_COLUMNS * CELL_BYTES) as f64)
        + finite * (FCT_COLUMNS * CELL_BYTES) as f64;

    // The network: the buffer, the forward delay lines (rate × one-way delay of the longest
    // class) and the reverse lines' ACKs (one per two segments), each ring at most twice its
    // peak; the senders' scoreboards hold every segment in flight (BDP + buffer), twice for
    // the same doubling; the event heap holds a few timers per flow.
    let buffer_pkts = match (cfg.bottleneck.buffer_packets, cfg.bottleneck.buffer_bytes) {
        (Some(p), Some(b)) => p.min(b.div_ceil(MTU_BYTES as u64)) as f64,
        (Some(p), None) => p as f64,
        (None, Some(b)) => (b as f64 / MTU_BYTES as f64).ceil(),
        (None, None) => 0.0,
    };
    let max_rtt = cfg.classes.iter().map(|c| c.rtt_ns).max().unwrap_or(0) as f64;
    let bdp_pkts = rate * max_rtt / 1e9 / pkt_bits;
    let in_flight = bdp_pkts + buffer_pkts;
    let network_bytes = 2.0
        * (buffer_pkts * size_of::<DataPkt>() as f64
            + bdp_pkts / 2.0 * size_of::<(u64, DataPkt)>() as f64
            + bdp_pkts / 4.0 * size_of::<(u64, AckPkt)>() as f64
            + in_flight * crate::tcp::SEG_BYTES as f64
            + (4.0 * flows + 2.0 * cfg.classes.len() as f64) * crate::engine::ENTRY_BYTES as f64);

    // Tables: a row per interval, and per flow under way in it.
    let iv = cfg.measure.interval_ns as f64;
    let (intervals, ts_rows) = if iv > 0.0 && cfg.measure.interval_ns <= cfg.duration_ns {
        let k = (dur / iv).floor();
        (
            k,
            loads
                .iter()
                .map(|l| l.flows * ((l.active_ns / iv).ceil() + 1.0).min(k))
                .sum::<f64>(),
        )
    } else {
        (0.0, 0.0)
    };
    let table_bytes = ts_rows * (size_of::<SampleRow>() + size_of::<SampleRecord>()) as f64
        + ts_rows * (TIMESERIES_COLUMNS * CELL_BYTES) as f64
        + intervals * (size_of::<QueueRow>() as u64 + QUEUE_COLUMNS * CELL_BYTES) as f64;

    let peak = flow_bytes + network_bytes + table_bytes;
    Estimate {
        flows: flows.round() as u64,
        bottleneck_packets: carried.round() as u64,
        excess_packets: excess.round() as u64,
        events: events.round() as u64,
        timeseries_rows: ts_rows.round() as u64,
        wall_s: (carried + excess) / PACKETS_PER_S * host_cost,
        peak_bytes: peak.round() as u64,
        flow_bytes: flow_bytes.round() as u64,
        network_bytes: network_bytes.round() as u64,
        table_bytes: table_bytes.round() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ∫ x f(x) dx by the midpoint rule on a log grid.
    fn integrate_mean(pdf: impl Fn(f64) -> f64, lo: f64, hi: f64) -> f64 {
        let n = 200_000;
        let (a, b) = (lo.ln(), hi.ln());
        let h = (b - a) / n as f64;
        (0..n)
            .map(|i| {
                let x = (a + (i as f64 + 0.5) * h).exp();
                x * pdf(x) * x * h
            })
            .sum()
    }

    #[test]
    fn bounded_pareto_mean_is_the_integral_of_its_density() {
        // f(x) = α L^α x^(−α−1) / (1 − (L/H)^α) on [L, H].
        for alpha in [0.5, 1.0, 1.2, 2.5] {
            let (l, h): (f64, f64) = (1000.0, 1_000_000.0);
            let pdf =
                |x: f64| alpha * l.powf(alpha) * x.powf(-alpha - 1.0) / (1.0 - (l / h).powf(alpha));
            let want = integrate_mean(pdf, l, h);
            let got = mean_size(&SizeDist::Pareto {
                alpha,
                lo: 1000,
                hi: 1_000_000,
            });
            assert!(
                (got / want - 1.0).abs() < 1e-6,
                "α {alpha}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn empirical_and_simple_means_by_hand() {
        // CDF (100, 0.5), (300, 1): half the mass at 100, half spread evenly on [100, 300]
        // (mean 200): 0.5·100 + 0.5·200 = 150.
        assert_eq!(
            mean_size(&SizeDist::Empirical {
                points: vec![(100.0, 0.5), (300.0, 1.0)]
            }),
            150.0
        );
        // Uniform lo + u(hi − lo + 1), u in [0, 1): mean 10 + 91/2.
        assert_eq!(mean_size(&SizeDist::Uniform { lo: 10, hi: 100 }), 55.5);
        // exp(μ + σ²/2) with μ = 0, σ = 2: e².
        assert!(
            (mean_size(&SizeDist::Lognormal {
                mu: 0.0,
                sigma: 2.0
            }) - 2f64.exp())
            .abs()
                < 1e-12
        );
    }
}
