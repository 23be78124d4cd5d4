//! Queue measurement at the bottleneck, shared by the simulator and the emulator's router: the
//! drop and mark reasons in their column order, the sojourn-time histogram with its quantile
//! rule, the link's transmitted bytes within the measurement window [warmup, duration), and the
//! per-interval queue time series. Definitions: docs/model.md §Metrics.

use aqm::{DropReason, MarkReason, Nanos};

/// Drop reasons in a fixed order (the `drops_<reason>` columns of the flows table, the keys of
/// the router's `drops`).
pub const DROP_REASONS: [(DropReason, &str); 8] = [
    (DropReason::Overflow, "overflow"),
    (DropReason::Early, "early"),
    (DropReason::Forced, "forced"),
    (DropReason::HeadDrop, "head"),
    (DropReason::FlowMatch, "flow_match"),
    (DropReason::Value, "value"),
    (DropReason::Overload, "overload"),
    (DropReason::Random, "random"),
];

/// Mark reasons in a fixed order (the `marks_<reason>` columns).
pub const MARK_REASONS: [(MarkReason, &str); 7] = [
    (MarkReason::Prob, "prob"),
    (MarkReason::Forced, "forced"),
    (MarkReason::Step, "step"),
    (MarkReason::Coupled, "coupled"),
    (MarkReason::Ctv, "ctv"),
    (MarkReason::Random, "random"),
    (MarkReason::Delay, "delay"),
];

#[inline]
pub fn drop_index(r: DropReason) -> usize {
    DROP_REASONS
        .iter()
        .position(|(x, _)| *x == r)
        .expect("every reason is listed")
}

#[inline]
pub fn mark_index(r: MarkReason) -> usize {
    MARK_REASONS
        .iter()
        .position(|(x, _)| *x == r)
        .expect("every reason is listed")
}

/// Bottleneck-wide counters.
#[derive(Clone, Debug)]
pub struct QueueMeasure {
    /// 1 µs bins for sojourns below 1 s.
    fine: Vec<u32>,
    /// 1 ms bins from 1 s up.
    coarse: Vec<u64>,
    pub sojourn_count: u64,
    pub sojourn_sum_ns: u128,
    pub sojourn_max_ns: u64,
    /// Wire bytes transmitted on the bottleneck link within the window; a transmission that
    /// straddles a window edge counts in proportion to its serialization time inside.
    pub link_bytes: f64,
    // Per-interval accumulators for the queue time series.
    pub iv_sojourn_sum_ns: u128,
    pub iv_sojourn_count: u64,
    pub iv_sojourn_max_ns: u64,
    /// Wire bytes transmitted since the last sample (a transmission spanning a sample time
    /// is split between the two intervals in proportion to its time in each).
    pub iv_link_bytes: f64,
    /// Time of the last sample.
    pub iv_start: Nanos,
    pub iv_drops: u64,
    pub iv_marks: u64,
}

const FINE_BIN_NS: u64 = 1_000;
const FINE_BINS: usize = 1_000_000; // 1 µs × 10^6 = 1 s
const COARSE_BIN_NS: u64 = 1_000_000;

impl Default for QueueMeasure {
    fn default() -> Self {
        QueueMeasure {
            fine: vec![0; FINE_BINS],
            coarse: Vec::new(),
            sojourn_count: 0,
            sojourn_sum_ns: 0,
            sojourn_max_ns: 0,
            link_bytes: 0.0,
            iv_sojourn_sum_ns: 0,
            iv_sojourn_count: 0,
            iv_sojourn_max_ns: 0,
            iv_link_bytes: 0.0,
            iv_start: 0,
            iv_drops: 0,
            iv_marks: 0,
        }
    }
}

impl QueueMeasure {
    /// Account a transmission of `bytes` serialized over [start, end) against the window
    /// [lo, hi).
    #[inline]
    pub fn record_tx(&mut self, bytes: u32, start: Nanos, end: Nanos, lo: Nanos, hi: Nanos) {
        let a = start.max(lo);
        let b = end.min(hi);
        if b > a {
            self.link_bytes += part(bytes, b - a, end - start);
        } else if end == start && start >= lo && start < hi {
            self.link_bytes += bytes as f64;
        }
    }

    /// A packet left the queue after `sojourn_ns`. `in_window` selects summary statistics.
    #[inline]
    pub fn record_sojourn(&mut self, sojourn_ns: u64, in_window: bool) {
        self.iv_sojourn_sum_ns += sojourn_ns as u128;
        self.iv_sojourn_count += 1;
        self.iv_sojourn_max_ns = self.iv_sojourn_max_ns.max(sojourn_ns);
        if !in_window {
            return;
        }
        self.sojourn_count += 1;
        self.sojourn_sum_ns += sojourn_ns as u128;
        self.sojourn_max_ns = self.sojourn_max_ns.max(sojourn_ns);
        let i = (sojourn_ns / FINE_BIN_NS) as usize;
        if i < FINE_BINS {
            self.fine[i] += 1;
        } else {
            let j = ((sojourn_ns - FINE_BINS as u64 * FINE_BIN_NS) / COARSE_BIN_NS) as usize;
            if j >= self.coarse.len() {
                self.coarse.resize(j + 1, 0);
            }
            self.coarse[j] += 1;
        }
    }

    /// Iterate non-empty bins as (lower edge ns, width ns, count).
    fn bins(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        // Bins above the one holding the maximum are empty: skip them (there are 10^6 fine bins).
        let fine_end = if self.sojourn_count == 0 {
            0
        } else {
            ((self.sojourn_max_ns / FINE_BIN_NS) as usize + 1).min(FINE_BINS)
        };
        let fine = self.fine[..fine_end]
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| (i as u64 * FINE_BIN_NS, FINE_BIN_NS, c as u64));
        let base = FINE_BINS as u64 * FINE_BIN_NS;
        let coarse = self
            .coarse
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(move |(j, &c)| (base + j as u64 * COARSE_BIN_NS, COARSE_BIN_NS, c));
        fine.chain(coarse)
    }

    /// The histogram of the window's sojourns (non-empty bins), with the quantile rule.
    pub fn hist(&self) -> SojournHist {
        SojournHist {
            bins: self.bins().collect(),
            count: self.sojourn_count,
            max_ns: self.sojourn_max_ns,
        }
    }

    /// The q-quantile of the sojourn distribution, ns ([`SojournHist::quantile_ns`]: exact to
    /// ±0.5 µs below 1 s, ±0.5 ms above).
    pub fn quantile_ns(&self, q: f64) -> Option<f64> {
        self.hist().quantile_ns(q)
    }

    pub fn mean_ns(&self) -> Option<f64> {
        (self.sojourn_count > 0).then(|| self.sojourn_sum_ns as f64 / self.sojourn_count as f64)
    }

    /// The histogram re-binned at `bin_ns` ([`SojournHist::rebinned`]).
    pub fn rebinned(&self, bin_ns: u64) -> Vec<(u64, u64)> {
        self.hist().rebinned(bin_ns)
    }

    /// A transmission of `bytes` over [start, end) completed: credit the part after the last
    /// sample to the current interval.
    #[inline]
    pub fn record_tx_interval(&mut self, bytes: u32, start: Nanos, end: Nanos) {
        let from = start.max(self.iv_start);
        if end > from {
            self.iv_link_bytes += part(bytes, end - from, end - start);
        } else if end == start {
            self.iv_link_bytes += bytes as f64;
        }
    }

    /// Close the interval at `now`, crediting the elapsed part of a transmission in progress.
    pub fn take_interval(
        &mut self,
        now: Nanos,
        in_tx: Option<(u32, Nanos, Nanos)>,
    ) -> (u128, u64, u64, f64, u64, u64) {
        if let Some((bytes, start, end)) = in_tx {
            let from = start.max(self.iv_start);
            if now > from && end > start {
                self.iv_link_bytes += bytes as f64 * (now - from) as f64 / (end - start) as f64;
            }
        }
        self.iv_start = now;
        let r = (
            self.iv_sojourn_sum_ns,
            self.iv_sojourn_count,
            self.iv_sojourn_max_ns,
            self.iv_link_bytes,
            self.iv_drops,
            self.iv_marks,
        );
        self.iv_sojourn_sum_ns = 0;
        self.iv_sojourn_count = 0;
        self.iv_sojourn_max_ns = 0;
        self.iv_link_bytes = 0.0;
        self.iv_drops = 0;
        self.iv_marks = 0;
        r
    }
}

/// `bytes · inside / whole` (the share of a transmission inside an interval), computed as
/// `bytes as f64 * inside as f64 / whole as f64`. A transmission wholly inside (nearly every
/// one) gives exactly `bytes` that way — `bytes · whole` is an integer below 2^53, so the
/// product is exact and the division returns `bytes` — so that case skips the floating
/// division, which sits on the per-packet path, with a bit-identical result.
#[inline]
fn part(bytes: u32, inside: Nanos, whole: Nanos) -> f64 {
    if inside == whole && whole < 1 << 21 {
        bytes as f64
    } else {
        bytes as f64 * inside as f64 / whole as f64
    }
}

/// A bottleneck time-series sample (one row of the `queue` table).
#[derive(Clone, Debug)]
pub struct QueueRow {
    pub t_ns: u64,
    pub qlen_pkts: u64,
    pub backlog_bytes: u64,
    pub sojourn_mean_ns: Option<f64>,
    pub sojourn_max_ns: Option<u64>,
    pub link_bytes: f64,
    pub drops: u64,
    pub marks: u64,
}

/// A sojourn-time histogram: non-empty bins in increasing order, the number of samples and
/// their maximum.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SojournHist {
    /// (lower edge ns, width ns, count).
    pub bins: Vec<(u64, u64, u64)>,
    pub count: u64,
    pub max_ns: u64,
}

impl SojournHist {
    /// From bins of one width given as (index, count), in any order (the router's report):
    /// empty ones are skipped. Without the exact maximum, the top of the highest non-empty bin
    /// bounds it (to within a bin).
    pub fn from_indexed(bin_ns: u64, bins: &[(u64, u64)], max_ns: Option<u64>) -> SojournHist {
        let mut b: Vec<(u64, u64)> = bins.iter().copied().filter(|&(_, c)| c > 0).collect();
        b.sort_unstable();
        let count = b.iter().map(|&(_, c)| c).sum();
        let max_ns = max_ns.unwrap_or_else(|| b.last().map_or(0, |&(i, _)| (i + 1) * bin_ns - 1));
        SojournHist {
            bins: b
                .into_iter()
                .map(|(i, c)| (i * bin_ns, bin_ns, c))
                .collect(),
            count,
            max_ns,
        }
    }

    /// The q-quantile, ns: the midpoint of the bin holding the ⌈q·n⌉-th smallest sample, never
    /// above the maximum.
    pub fn quantile_ns(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut cum = 0;
        for &(lo, w, c) in &self.bins {
            cum += c;
            if cum >= rank {
                return Some((lo as f64 + w as f64 / 2.0).min(self.max_ns as f64));
            }
        }
        Some(self.max_ns as f64)
    }

    /// The histogram re-binned at `bin_ns`: (lower edge ns, count) for every bin from 0 up to
    /// the one holding the maximum (empty bins included, so the table plots directly). A
    /// source bin wider than `bin_ns` is placed by its lower edge.
    pub fn rebinned(&self, bin_ns: u64) -> Vec<(u64, u64)> {
        if self.count == 0 {
            return Vec::new();
        }
        let n = (self.max_ns / bin_ns + 1) as usize;
        let mut out = vec![0u64; n];
        for &(lo, _, c) in &self.bins {
            let k = ((lo / bin_ns) as usize).min(n - 1);
            out[k] += c;
        }
        out.into_iter()
            .enumerate()
            .map(|(k, c)| (k as u64 * bin_ns, c))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_of_a_uniform_sojourn_set() {
        // Sojourns 1, 2, ..., 100 ms: p50 is the 50th (50 ms), p99 the 99th (99 ms); each
        // reported as its 1 µs bin's midpoint.
        let mut q = QueueMeasure::default();
        for k in 1..=100u64 {
            q.record_sojourn(k * 1_000_000, true);
        }
        assert_eq!(q.quantile_ns(0.5), Some(50_000_500.0));
        assert_eq!(q.quantile_ns(0.99), Some(99_000_500.0));
        assert_eq!(q.mean_ns(), Some(50_500_000.0));
        assert_eq!(q.sojourn_max_ns, 100_000_000);
    }

    #[test]
    fn rebinning_at_1ms_counts_every_sample_once() {
        let mut q = QueueMeasure::default();
        for s in [0u64, 999_999, 1_000_000, 2_500_000, 1_500_000_000] {
            q.record_sojourn(s, true);
        }
        let h = q.rebinned(1_000_000);
        assert_eq!(h.iter().map(|(_, c)| c).sum::<u64>(), 5);
        assert_eq!(h[0], (0, 2));
        assert_eq!(h[1], (1_000_000, 1));
        assert_eq!(h[2], (2_000_000, 1));
        assert_eq!(h[1500], (1_500_000_000, 1));
        assert_eq!(h.len(), 1501);
    }

    proptest::proptest! {
        /// The shortcut for a transmission wholly inside gives the formula's exact bits.
        #[test]
        fn part_is_the_formula_bit_for_bit(bytes in 0u32..=u32::MAX, whole in 1u64..(1 << 22), cut in 0.0f64..=1.0) {
            let inside = ((whole as f64 * cut) as u64).min(whole);
            let formula = |i: u64| bytes as f64 * i as f64 / whole as f64;
            proptest::prop_assert_eq!(part(bytes, whole, whole).to_bits(), formula(whole).to_bits());
            proptest::prop_assert_eq!(part(bytes, inside, whole).to_bits(), formula(inside).to_bits());
        }
    }

    #[test]
    fn samples_outside_the_window_do_not_enter_the_summary() {
        let mut q = QueueMeasure::default();
        q.record_sojourn(5_000, false);
        assert_eq!(q.sojourn_count, 0);
        assert_eq!(q.iv_sojourn_count, 1);
    }

    #[test]
    fn the_routers_sparse_histogram_follows_the_simulators_quantile_rule() {
        // Sojourns 1, 2, ..., 100 ms in 1 µs bins: p50 is the 50th (its bin's midpoint
        // 50.0005 ms), p99 the 99th; p100 is the midpoint clamped to the maximum.
        let bins: Vec<(u64, u64)> = (1..=100).map(|k| (k * 1000, 1)).collect();
        let h = SojournHist::from_indexed(1000, &bins, Some(100_000_000));
        assert_eq!(h.quantile_ns(0.5), Some(50_000_500.0));
        assert_eq!(h.quantile_ns(0.99), Some(99_000_500.0));
        assert_eq!(h.quantile_ns(1.0), Some(100_000_000.0));
        // 10 ms bins: 1..9 ms in the first, 100 ms alone in the last.
        let r = h.rebinned(10_000_000);
        assert_eq!(
            (r[0], r[r.len() - 1], r.iter().map(|(_, c)| c).sum::<u64>()),
            ((0, 9), (100_000_000, 1), 100)
        );
        // Without the exact maximum, the top of the highest bin bounds it: bin 3 of 1 µs.
        assert_eq!(
            SojournHist::from_indexed(1000, &[(3, 2)], None).max_ns,
            3999
        );
        assert_eq!(
            SojournHist::from_indexed(1000, &[], None).quantile_ns(0.5),
            None
        );
    }
}
