//! What the router measures, and the results file (the contract's output JSON).
//!
//! The quantities are the simulator's: per flow the bytes and packets arriving at the
//! bottleneck, leaving on the link, marked and dropped (by reason), and the sum of the flow's
//! sojourns; the sojourn histogram and the per-interval queue series come from the
//! simulator's own [`QueueMeasure`] (`crates/link`). Counts cover the measurement window
//! [warmup_ns, duration_ns) of *scenario* time; an event belongs to the window by the virtual
//! time at which it happens (arrival, mark/drop, dequeue, end of transmission). The `queue`
//! series and the `counters` cover the whole run.

use std::io::Write;

use aqm::{DropReason, MarkReason, Nanos};
use link::measure::{drop_index, mark_index, QueueMeasure, DROP_REASONS, MARK_REASONS};
use serde_json::{json, Value};

use crate::ipv4::FiveTuple;

/// Bin width of the reported sojourn histogram, ns: the simulator's fine bins (1 µs).
pub const SOJOURN_BIN_NS: u64 = 1_000;

/// One flow's counters (window) and its identity.
#[derive(Clone, Debug)]
pub struct FlowStats {
    pub tuple: FiveTuple,
    pub class: u16,
    /// Scenario time of the flow's first packet (whole run).
    pub first_seen_ns: Nanos,
    pub arrived_pkts: u64,
    pub arrived_bytes: u64,
    pub link_pkts: u64,
    pub link_bytes: u64,
    pub marked_pkts: u64,
    pub marked_bytes: u64,
    pub dropped_pkts: u64,
    pub dropped_bytes: u64,
    pub drops: [u64; DROP_REASONS.len()],
    pub marks: [u64; MARK_REASONS.len()],
    pub sojourn_sum_ns: u64,
    pub sojourn_count: u64,
}

impl FlowStats {
    pub fn new(tuple: FiveTuple, class: u16, first_seen_ns: Nanos) -> Self {
        FlowStats {
            tuple,
            class,
            first_seen_ns,
            arrived_pkts: 0,
            arrived_bytes: 0,
            link_pkts: 0,
            link_bytes: 0,
            marked_pkts: 0,
            marked_bytes: 0,
            dropped_pkts: 0,
            dropped_bytes: 0,
            drops: [0; DROP_REASONS.len()],
            marks: [0; MARK_REASONS.len()],
            sojourn_sum_ns: 0,
            sojourn_count: 0,
        }
    }

    pub fn count_drop(&mut self, len: u32, reason: DropReason) {
        self.dropped_pkts += 1;
        self.dropped_bytes += len as u64;
        self.drops[drop_index(reason)] += 1;
    }

    pub fn count_mark(&mut self, len: u32, reason: MarkReason) {
        self.marked_pkts += 1;
        self.marked_bytes += len as u64;
        self.marks[mark_index(reason)] += 1;
    }

    fn to_json(&self) -> Value {
        let t = &self.tuple;
        let ip = |a: [u8; 4]| std::net::Ipv4Addr::from(a).to_string();
        let drops: serde_json::Map<String, Value> = DROP_REASONS
            .iter()
            .zip(self.drops)
            .map(|((_, n), c)| (n.to_string(), json!(c)))
            .collect();
        let marks: serde_json::Map<String, Value> = MARK_REASONS
            .iter()
            .zip(self.marks)
            .map(|((_, n), c)| (n.to_string(), json!(c)))
            .collect();
        json!({
            "class": self.class, "proto": t.proto, "src": ip(t.src), "sport": t.sport, "dst": ip(t.dst), "dport": t.dport,
            "first_seen_ns": self.first_seen_ns,
            "arrived_pkts": self.arrived_pkts, "arrived_bytes": self.arrived_bytes,
            "link_pkts": self.link_pkts, "link_bytes": self.link_bytes,
            "marked_pkts": self.marked_pkts, "marked_bytes": self.marked_bytes,
            "dropped_pkts": self.dropped_pkts, "dropped_bytes": self.dropped_bytes,
            "drops": drops, "marks": marks,
            "sojourn_sum_ns": self.sojourn_sum_ns, "sojourn_count": self.sojourn_count,
        })
    }
}

/// One row of the queue time series: the simulator's own `QueueRow`, so both backends sample
/// the same quantities.
pub use link::measure::QueueRow as QueueSample;

/// Whole-run counters of the router itself.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    /// Packets read from the TUN / written back.
    pub rx_pkts: u64,
    pub tx_pkts: u64,
    /// IPv4 packets whose source matched no class prefix (forwarded unqueued).
    pub unclassified: u64,
    pub non_ipv4: u64,
    pub malformed: u64,
    /// Packets emitted before a packet of the same flow that arrived earlier (must stay 0).
    pub reordered: u64,
    /// Drops and marks by the discipline and the physical limit (whole run).
    pub qdisc_drops: u64,
    pub qdisc_marks: u64,
    /// Classified packets offered to the bottleneck (whole run), for conservation checks.
    pub offered: u64,
    /// With offloads: super-packets read (a virtio-net GSO type other than none), the
    /// segments cut from them, and those refused (not TCP/IPv4; dropped).
    pub gso_packets_in: u64,
    pub gso_segments_in: u64,
    pub gso_refused: u64,
    /// Writes to the TUN device, and those that carried a super-packet of several segments.
    pub writes: u64,
    pub gso_packets_out: u64,
    /// Packets of an `ect1_classes` class whose ECT(0) became ECT(1) on arrival.
    pub ect1_set: u64,
}

/// How late packets were written, as a histogram of 1 µs bins up to 100 ms (later ones in
/// one overflow bin), the maximum and when it happened: a stall of a millisecond or more
/// releases that much of the delay line at once, which the receivers see as a burst and
/// acknowledge as one (BBR's bandwidth filter keeps the rate it measures then). The binary
/// keeps a second one for how long after its arrival each packet was read.
#[derive(Clone, Debug)]
pub struct Lateness {
    bins: Vec<u64>,
    over: u64,
    pub max_ns: u64,
    /// Scenario time at which the latest packet was due.
    pub max_due_ns: u64,
    pub count: u64,
}

const LATE_BIN_NS: u64 = 1_000;
const LATE_BINS: usize = 100_000;

impl Default for Lateness {
    fn default() -> Self {
        Lateness {
            bins: vec![0; LATE_BINS],
            over: 0,
            max_ns: 0,
            max_due_ns: 0,
            count: 0,
        }
    }
}

impl Lateness {
    /// A packet due at `due_ns` (scenario time) written `late_ns` after it.
    pub fn record(&mut self, late_ns: u64, due_ns: u64) {
        self.count += 1;
        if late_ns > self.max_ns {
            self.max_ns = late_ns;
            self.max_due_ns = due_ns;
        }
        match self.bins.get_mut((late_ns / LATE_BIN_NS) as usize) {
            Some(b) => *b += 1,
            None => self.over += 1,
        }
    }

    /// Packets written at least `ns` late (`ns` a multiple of the 1 µs bin).
    pub fn at_least(&self, ns: u64) -> u64 {
        self.over
            + self
                .bins
                .iter()
                .skip((ns / LATE_BIN_NS) as usize)
                .sum::<u64>()
    }

    /// The q-quantile as the upper edge of the bin holding the ⌈q·n⌉-th sample, capped at the
    /// maximum (so it never understates).
    pub fn quantile_ns(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut cum = 0;
        for (i, c) in self.bins.iter().enumerate() {
            cum += c;
            if cum >= rank {
                return ((i as u64 + 1) * LATE_BIN_NS).min(self.max_ns);
            }
        }
        self.max_ns
    }
}

/// Everything the results file needs, gathered by the pipeline.
pub struct Report<'a> {
    pub complete: bool,
    pub window: (Nanos, Nanos),
    pub rate_bps: u64,
    pub flows: &'a [FlowStats],
    pub qm: &'a QueueMeasure,
    pub class_sojourn: &'a [(u64, u64)],
    pub queue: &'a [QueueSample],
    pub counters: &'a Counters,
    pub lateness: &'a Lateness,
}

impl Report<'_> {
    pub fn to_json(&self) -> Value {
        // Sparse 1 µs bins: (index, count) for the non-empty ones. Sojourns of 1 s and more
        // sit in the simulator's 1 ms bins and appear at their lower edge's index.
        let bins: Vec<Value> = self
            .qm
            .rebinned(SOJOURN_BIN_NS)
            .into_iter()
            .filter(|&(_, c)| c > 0)
            .map(|(lo, c)| json!([lo / SOJOURN_BIN_NS, c]))
            .collect();
        let c = self.counters;
        json!({
            "complete": self.complete,
            "window_ns": [self.window.0, self.window.1],
            "rate_bps": self.rate_bps,
            "flows": self.flows.iter().map(FlowStats::to_json).collect::<Vec<_>>(),
            "link_bytes": self.qm.link_bytes.round() as u64,
            "sojourn_hist": {"bin_ns": SOJOURN_BIN_NS, "bins": bins},
            "class_sojourn": self.class_sojourn.iter().map(|&(s, n)| json!({"sum_ns": s, "count": n})).collect::<Vec<_>>(),
            "queue": self.queue.iter().map(|q| json!({
                "t_ns": q.t_ns, "qlen_pkts": q.qlen_pkts, "backlog_bytes": q.backlog_bytes,
                "sojourn_mean_ns": q.sojourn_mean_ns, "sojourn_max_ns": q.sojourn_max_ns,
                "link_bytes": q.link_bytes, "drops": q.drops, "marks": q.marks,
            })).collect::<Vec<_>>(),
            "counters": {
                "rx_pkts": c.rx_pkts, "tx_pkts": c.tx_pkts, "unclassified": c.unclassified,
                "non_ipv4": c.non_ipv4, "malformed": c.malformed,
                "late_max_ns": self.lateness.max_ns, "late_p50_ns": self.lateness.quantile_ns(0.5), "late_p99_ns": self.lateness.quantile_ns(0.99),
                "late_max_due_ns": self.lateness.max_due_ns, "late_1ms_pkts": self.lateness.at_least(1_000_000),
                "reordered": c.reordered, "qdisc_drops": c.qdisc_drops, "qdisc_marks": c.qdisc_marks,
                "gso_packets_in": c.gso_packets_in, "gso_segments_in": c.gso_segments_in, "gso_refused": c.gso_refused,
                "writes": c.writes, "gso_packets_out": c.gso_packets_out, "ect1_set": c.ect1_set,
            },
        })
    }
}

/// Write `value` to `path` atomically: a temp file beside it, fsync'd, then renamed.
pub fn write_json_atomically(
    path: &std::path::Path,
    value: &serde_json::Value,
) -> std::io::Result<()> {
    let tmp = path.with_file_name(format!(
        ".{}.tmp{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("out"),
        std::process::id()
    ));
    {
        let mut f = std::fs::File::create(&tmp)?;
        serde_json::to_writer(&mut f, value)?;
        f.write_all(b"\n")?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lateness_quantiles_from_known_samples() {
        // 100 samples: 99 at 3.5 µs, one at 250 ms. p50 and p99 are the 50th and 99th smallest
        // (3.5 µs, bin [3, 4) µs ⇒ reported 4 µs); p100 the maximum.
        let mut l = Lateness::default();
        for k in 0..99 {
            l.record(3_500, k * 1_000);
        }
        l.record(250_000_000, 7_000_000);
        assert_eq!(l.quantile_ns(0.99), 4_000);
        assert_eq!(l.quantile_ns(0.5), 4_000);
        assert_eq!(l.quantile_ns(1.0), 250_000_000);
        assert_eq!((l.max_ns, l.max_due_ns), (250_000_000, 7_000_000));
        // At least 1 ms late: the one (in the overflow bin); at least 3 µs: all 100.
        assert_eq!(
            (l.at_least(1_000_000), l.at_least(3_000), l.at_least(4_000)),
            (1, 100, 1)
        );
        assert_eq!(Lateness::default().quantile_ns(0.99), 0);
    }
}
