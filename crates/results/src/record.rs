//! A run's records: what a backend measured, as plain data, from which [`crate::tables`]
//! computes the summary and the tables. The simulator fills one from its world at the end of
//! a run (`sim::World::into_record`); the emulator from the router's report and the senders'
//! and receiver's measurements ([`crate::emu`]). Optional fields are those one backend cannot
//! know (the kernel reports no TLP count, for one); the simulator fills them all.

use link::measure::{QueueRow, SojournHist, DROP_REASONS, MARK_REASONS};

/// Everything the summary and the tables are computed from.
#[derive(Clone, Debug, Default)]
pub struct RunRecord {
    /// The measurement window [warmup_ns, duration_ns).
    pub warmup_ns: u64,
    pub duration_ns: u64,
    /// Link rate C, bit/s.
    pub rate_bps: u64,
    /// The discipline's delay target, ns, where it has one.
    pub delay_target_ns: Option<u64>,
    /// Time-series interval, sojourn-histogram bin (ns) and FCT size-bin edges (bytes), as
    /// configured (`measure`).
    pub interval_ns: u64,
    pub hist_bin_ns: u64,
    pub fct_bins_bytes: Vec<u64>,
    pub classes: Vec<ClassRecord>,
    /// Every flow, in flow-id order.
    pub flows: Vec<FlowRecord>,
    /// Per-flow time-series samples.
    pub samples: Vec<SampleRecord>,
    /// The bottleneck's time series.
    pub queue_samples: Vec<QueueRow>,
    /// Sojourns of the packets dequeued in the window.
    pub sojourn: SojournHist,
    /// Their sum (ns) and number, for the exact mean.
    pub sojourn_sum_ns: u128,
    pub sojourn_count: u64,
    /// Wire bytes transmitted on the link within the window (pro rata at the edges).
    pub link_bytes: f64,
    /// The backend's own counters, passed through to the summary's `counters`.
    pub counters: serde_json::Map<String, serde_json::Value>,
}

/// A flow class.
#[derive(Clone, Debug, Default)]
pub struct ClassRecord {
    pub name: String,
    /// Its congestion control's name ("cbr" for an unresponsive class).
    pub cc: String,
    /// Base RTT, ns.
    pub rtt_ns: u64,
    /// A workload class (Poisson arrivals of finite flows): no fair share, no Jain's index.
    pub workload: bool,
    /// Sum (ns) and number of the bottleneck sojourns of its packets in the window.
    pub sojourn_sum_ns: u128,
    pub sojourn_count: u64,
}

/// One flow. Byte and packet counts cover the window unless named "total".
#[derive(Clone, Debug, Default)]
pub struct FlowRecord {
    pub class: usize,
    pub cc: String,
    pub start_ns: u64,
    /// When the flow's application stops writing, if it has a stop.
    pub stop_ns: Option<u64>,
    /// Payload bytes of a finite flow; None = bulk.
    pub size_bytes: Option<u64>,
    /// In-order payload bytes delivered to the receiver.
    pub delivered_bytes: u64,
    /// Wire bytes arriving at the bottleneck, dropped and CE-marked there.
    pub arrived_bytes: u64,
    pub dropped_bytes: u64,
    pub marked_bytes: u64,
    /// Packets dropped and marked, by reason ([`DROP_REASONS`], [`MARK_REASONS`] order).
    pub drops: [u64; DROP_REASONS.len()],
    pub marks: [u64; MARK_REASONS.len()],
    /// Whole-run sender and receiver counts.
    pub segs_sent: Option<u64>,
    pub wire_bytes_sent: Option<u64>,
    pub retrans_segs: Option<u64>,
    pub rto_count: Option<u64>,
    pub tlp_count: Option<u64>,
    pub recoveries: Option<u64>,
    pub cwr_count: Option<u64>,
    pub segs_received: Option<u64>,
    /// Whole-run bottleneck totals and packets still in the network at the end, for
    /// conservation checks.
    pub total_dropped_pkts: Option<u64>,
    pub total_marked_pkts: Option<u64>,
    pub end_in_network_pkts: Option<u64>,
    /// Completion time, s, once the flow is done.
    pub fct_s: Option<f64>,
}

/// One per-flow time-series sample.
#[derive(Clone, Debug, Default)]
pub struct SampleRecord {
    pub t_ns: u64,
    pub flow: u64,
    pub class: usize,
    pub throughput_bps: Option<f64>,
    pub cwnd: Option<u64>,
    pub ssthresh: Option<u64>,
    pub inflight: Option<u64>,
    pub srtt_ms: Option<f64>,
    pub pacing_rate_bps: Option<f64>,
    /// Linux's congestion-avoidance state name (`open`, `disorder`, `cwr`, `recovery`, `loss`).
    pub ca_state: Option<String>,
    /// The CC's own state: phase, bandwidth estimate (bit/s), inflight_hi, α.
    pub cc_phase: Option<String>,
    pub cc_bw_bps: Option<f64>,
    pub inflight_hi: Option<f64>,
    pub cc_alpha: Option<f64>,
}
