//! The simulator's per-flow measurement: exact counters of what the bottleneck did to each
//! flow's packets, and the verdict sink that accounts each drop and mark. The queue-wide
//! measurement (sojourn histogram, link bytes, time series) is [`link::measure`], shared with
//! the emulator's router. Counters marked "window" cover the measurement window
//! [warmup, duration) only.

use aqm::{DropReason, MarkReason, Nanos, Verdicts};
pub use link::measure::{drop_index, mark_index, QueueMeasure, DROP_REASONS, MARK_REASONS};

use crate::packet::DataPkt;

/// Per-flow bottleneck counters.
///
/// Laid out by hand (`repr(C)`, one cache line aligned): the fields every packet updates —
/// the sojourn sum and count at departure, the arrival counters — share the first line, so
/// a packet touches one line of its flow's record, not two (a workload's thousands of flows
/// keep these records out of cache).
#[derive(Clone, Debug, Default)]
#[repr(C, align(64))]
pub struct FlowMeasure {
    /// Sum and count of this flow's bottleneck sojourns (window), ns — per-class delays show
    /// what each class waits when disciplines keep separate queues (DualPI2's L and C, FQ).
    pub sojourn_sum_ns: u128,
    pub sojourn_count: u64,
    /// Wire bytes / packets arriving at the bottleneck (window).
    pub arrived_bytes: u64,
    pub arrived_pkts: u64,
    /// Dropped / marked wire bytes (window).
    pub dropped_bytes: u64,
    pub marked_bytes: u64,
    /// Whole-run totals, for conservation checks.
    pub total_dropped_pkts: u64,
    pub total_marked_pkts: u64,
    /// Packets dropped / marked per reason (window).
    pub drops: [u64; DROP_REASONS.len()],
    pub marks: [u64; MARK_REASONS.len()],
    /// In-order payload bytes delivered to the receiver at the start of the window.
    pub delivered_at_warmup: Option<u64>,
    /// Delivered bytes at the previous time-series sample.
    pub delivered_at_last_sample: u64,
}

/// The bottleneck's verdict sink: accounts every drop and mark to its flow and reason.
pub struct Sink<'a> {
    pub flows: &'a mut [FlowMeasure],
    pub queue: &'a mut QueueMeasure,
    pub in_window: bool,
    /// Packets dropped (whole run), handed back for end-of-run accounting.
    pub dropped_total: &'a mut u64,
}

impl Verdicts<DataPkt> for Sink<'_> {
    #[inline]
    fn dropped(&mut self, pkt: DataPkt, reason: DropReason, _now: Nanos) {
        let f = &mut self.flows[pkt.flow as usize];
        f.total_dropped_pkts += 1;
        *self.dropped_total += 1;
        self.queue.iv_drops += 1;
        if self.in_window {
            f.dropped_bytes += pkt.wire_len as u64;
            f.drops[drop_index(reason)] += 1;
        }
    }

    #[inline]
    fn marked(&mut self, pkt: &DataPkt, reason: MarkReason, _now: Nanos) {
        let f = &mut self.flows[pkt.flow as usize];
        f.total_marked_pkts += 1;
        self.queue.iv_marks += 1;
        if self.in_window {
            f.marked_bytes += pkt.wire_len as u64;
            f.marks[mark_index(reason)] += 1;
        }
    }
}
