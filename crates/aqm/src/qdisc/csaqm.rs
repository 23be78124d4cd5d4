//! CSAQM — the ECN-marking core-stateless AQM with a Congestion Threshold Value.
//!
//! Sources: Nádas, Gombos, Hudoba, Laki, "Towards a Congestion Control-Independent
//! Core-Stateless AQM", ANRW '18 (only its abstract was available); Fejes et al. 2020 §III,
//! the description this file implements: "When the queue length exceeds the delay target,
//! packets with the lowest PVs are ECN CE marked until the amount of non-CE marked packets is
//! less than the delay target. This behavior is approximated by calculating a Congestion
//! Threshold Value (CTV) periodically (every 5 ms), and marking all outgoing packets, which
//! have PV < CTV"; delay target D_target = K·RTT, L_target = D_target·C.
//!
//! Packets carry packet values (PVs, [`Packet::value`]) from a per-flow marker before the
//! bottleneck (the simulator's `crates/link/src/marker.rs`). The node keeps a histogram of the
//! queued bytes by PV. Every `interval` (5 ms) the CTV becomes the smallest value v such that
//! the queued bytes with PV ≥ v fit in L_target (0 while the whole queue fits): the packets
//! left unmarked then fit the delay target, which is Fejes et al. 2020's invariant. At dequeue
//! ("outgoing packets") a packet with PV < CTV is CE-marked.
//!
//! Choices the sources leave open, each aqmlab's:
//! - The CTV formula above is derived from Fejes et al. 2020's wording (the ANRW '18
//!   algorithm itself, a histogram of queued bytes against an arrival eCDF with a PI
//!   controller, could not be checked).
//! - Exact u16 resolution (a value above 65 535 counts as 65 535), in 4 KB: exact queued
//!   bytes per coarse bin of 256 values, and per value only inside the coarse bin the last CTV
//!   fell in. An update walks the coarse sums from the top to the bin where the target is
//!   crossed and resolves it per value; if that is not the tracked bin, one pass over the
//!   queued packets tracks it first (the CTV moves slowly, so passes are rare). A full table
//!   of 65 536 byte counts (512 KB) answers the same, but its random updates, two per
//!   packet, miss the cache and evict the simulator's own state from L2.
//! - The controller runs lazily from `now` (no timer), first at t = interval, CTV 0 before. The queue
//!   is constant between calls, so every tick missed since the last call computes the same
//!   CTV: one update stands for them all.
//! - A Not-ECT packet below the CTV is dropped (`DropReason::Value`) since it cannot be
//!   marked (Fejes et al. 2020 has only ECN flows); an already-CE packet counts as marked.
//! - No limit of its own: the physical buffer beneath (Fejes et al. 2020: 500 ms, or 1.33 × target)
//!   tail-drops as `Overflow`.

use crate::fifo::{fifo_accessors, Fifo};
use crate::options::{About, Link, Lowered, Opt, OptionError, Range, ScenarioOptions, Unit};
use crate::{DropReason, MarkReason, Nanos, Packet, Qdisc, Verdicts};

/// Fejes et al. 2020 §III: "calculating a Congestion Threshold Value (CTV) periodically (every 5 ms)".
pub const DEFAULT_INTERVAL_NS: Nanos = 5_000_000;

/// Packet values are u16 (aqmlab's choice: the simulator's marker assigns 1..=65535).
const PV_BINS: usize = 1 << 16;
/// Values per coarse bin, and coarse bins.
const FINE: usize = 256;
const COARSE: usize = PV_BINS / FINE;

#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields)
)]
pub struct Params {
    /// L_target = D_target · C, bytes (Fejes et al. 2020: D_target = K·RTT).
    pub target_bytes: u64,
    /// CTV recomputation period, ns (Fejes et al. 2020: 5 ms).
    #[cfg_attr(feature = "serde", serde(default = "default_interval"))]
    pub interval_ns: Nanos,
}

#[cfg(feature = "serde")]
fn default_interval() -> Nanos {
    DEFAULT_INTERVAL_NS
}

impl Params {
    pub fn validate(&self) -> Result<(), OptionError> {
        if self.target_bytes == 0 {
            return Err(OptionError::new("target", "must be positive"));
        }
        if self.interval_ns == 0 {
            return Err(OptionError::new("interval", "must be positive"));
        }
        Ok(())
    }
}

/// The scenario's options: D_target and the CTV period.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields, default)
)]
pub struct Options {
    /// D_target, ns; required.
    pub target: Option<Nanos>,
    pub interval: Nanos,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            target: None,
            interval: DEFAULT_INTERVAL_NS,
        }
    }
}

impl ScenarioOptions for Options {
    type Config = Params;
    const ABOUT: About = About {
        kind: "csaqm",
        summary: "every `interval` a congestion threshold value keeps the unmarked queued bytes within target × C; packets valued below it are CE-marked at dequeue (Not-ECT ones dropped)",
        source: "Nádas, Gombos, Hudoba, Laki, ANRW '18; Fejes et al. 2020 §III",
        one_of: &[],
        reads_packet_values: true,
        options: &[
            Opt::new("target", Unit::DelayTarget, Range::POSITIVE, "D_target: the unmarked bytes must fit in target × link rate (no published default)", "Fejes et al. 2020 §III: D_target = K·RTT, L_target = D_target·C").required(),
            Opt::new("interval", Unit::Time, Range::POSITIVE, "CTV recomputation period", "Fejes et al. 2020 §III: every 5 ms"),
        ],
    };

    fn lower(&self, link: &Link) -> Result<Lowered<Self::Config>, OptionError> {
        let target = self
            .target
            .ok_or_else(|| OptionError::new("target", "required key is missing"))?;
        let params = Params {
            target_bytes: link.bytes_in(target),
            interval_ns: self.interval,
        };
        params.validate()?;
        Ok(Lowered {
            config: params,
            delay_target_ns: Some(target),
        })
    }
}

#[derive(Clone, Debug)]
pub struct Vars {
    /// Congestion Threshold Value: packets with PV < ctv are marked (0 = none).
    pub ctv: u32,
    pub next_update_ns: Nanos,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// ECN-capable packets CE-marked below the CTV.
    pub marked: u64,
    /// Not-ECT packets dropped below the CTV.
    pub dropped: u64,
}

/// Queued bytes per coarse bin of values, and per value within one tracked coarse bin.
#[derive(Clone, Debug)]
pub struct ValueHistogram {
    coarse: Box<[u64; COARSE]>,
    /// The coarse bin whose values `fine` holds, if any.
    tracked: Option<usize>,
    fine: Box<[u64; FINE]>,
}

impl Default for ValueHistogram {
    fn default() -> Self {
        ValueHistogram {
            coarse: Box::new([0; COARSE]),
            tracked: None,
            fine: Box::new([0; FINE]),
        }
    }
}

impl ValueHistogram {
    #[inline]
    fn bin(value: u32) -> usize {
        value.min(PV_BINS as u32 - 1) as usize
    }

    #[inline]
    pub fn add(&mut self, value: u32, bytes: u64) {
        let b = Self::bin(value);
        self.coarse[b / FINE] += bytes;
        if self.tracked == Some(b / FINE) {
            self.fine[b % FINE] += bytes;
        }
    }

    #[inline]
    pub fn remove(&mut self, value: u32, bytes: u64) {
        let b = Self::bin(value);
        self.coarse[b / FINE] -= bytes;
        if self.tracked == Some(b / FINE) {
            self.fine[b % FINE] -= bytes;
        }
    }

    pub fn clear(&mut self) {
        self.coarse.fill(0);
        self.fine.fill(0);
        self.tracked = None;
    }

    /// Track coarse bin `c` per value, from the (value, bytes) of every queued packet.
    fn track(&mut self, c: usize, queued: impl Iterator<Item = (u32, u64)>) {
        self.fine.fill(0);
        for (value, bytes) in queued {
            let b = Self::bin(value);
            if b / FINE == c {
                self.fine[b % FINE] += bytes;
            }
        }
        self.tracked = Some(c);
    }

    /// The smallest value v such that the bytes with PV ≥ v are at most `budget`, given that
    /// `total` (the sum of all bins) exceeds it: walk from the highest value down and stop at
    /// the first value that no longer fits; it and every lower value are marked. `queued`
    /// lists the queued packets' (value, bytes), read only if the walk stops in a coarse bin
    /// not tracked yet.
    pub fn threshold(
        &mut self,
        total: u64,
        budget: u64,
        queued: impl Iterator<Item = (u32, u64)>,
    ) -> u32 {
        if total <= budget {
            return 0;
        }
        let mut kept = 0u64;
        for c in (0..COARSE).rev() {
            if kept + self.coarse[c] <= budget {
                kept += self.coarse[c];
                continue;
            }
            if self.tracked != Some(c) {
                self.track(c, queued);
            }
            for v in (0..FINE).rev() {
                if kept + self.fine[v] > budget {
                    return (c * FINE + v) as u32 + 1;
                }
                kept += self.fine[v];
            }
            unreachable!("coarse bin {c} holds the sum of its values");
        }
        unreachable!("total > budget, so some bin overflows it")
    }
}

#[derive(Clone, Debug)]
pub struct Csaqm<P> {
    pub params: Params,
    pub vars: Vars,
    pub stats: Stats,
    hist: ValueHistogram,
    queue: Fifo<P>,
}

impl<P: Packet> Csaqm<P> {
    pub fn build(params: &Params, _seed: u64) -> Result<Self, OptionError> {
        params.validate()?;
        Ok(Self::new(params.clone()))
    }

    pub fn new(params: Params) -> Self {
        let vars = Vars {
            ctv: 0,
            next_update_ns: params.interval_ns,
        };
        Csaqm {
            params,
            vars,
            stats: Stats::default(),
            hist: ValueHistogram::default(),
            queue: Fifo::default(),
        }
    }

    /// Recompute the CTV from the queued packets' values (Fejes et al. 2020 §III).
    pub fn update(&mut self) {
        let queued = self.queue.iter().map(|p| (p.value(), p.wire_len() as u64));
        self.vars.ctv = self
            .hist
            .threshold(self.queue.bytes(), self.params.target_bytes, queued);
    }

    /// Run the ticks due by `now`. The queue has not changed since the previous call, so the
    /// last tick's result is every missed tick's result.
    #[inline]
    fn catch_up(&mut self, now: Nanos) {
        if self.vars.next_update_ns <= now {
            self.tick(now);
        }
    }

    /// Once per interval, out of the per-packet path.
    #[cold]
    #[inline(never)]
    fn tick(&mut self, now: Nanos) {
        self.update();
        let missed = (now - self.vars.next_update_ns) / self.params.interval_ns;
        self.vars.next_update_ns += (missed + 1) * self.params.interval_ns;
    }

    #[inline]
    fn below_ctv(&self, value: u32) -> bool {
        (ValueHistogram::bin(value) as u32) < self.vars.ctv
    }
}

impl<P: Packet> Qdisc<P> for Csaqm<P> {
    fn enqueue(&mut self, mut pkt: P, now: Nanos, _out: &mut impl Verdicts<P>) {
        self.catch_up(now);
        pkt.set_enqueue_ns(now);
        self.hist.add(pkt.value(), pkt.wire_len() as u64);
        self.queue.push(pkt);
    }

    fn dequeue(&mut self, now: Nanos, out: &mut impl Verdicts<P>) -> Option<P> {
        self.catch_up(now);
        loop {
            let mut pkt = self.queue.pop()?;
            self.hist.remove(pkt.value(), pkt.wire_len() as u64);
            if !self.below_ctv(pkt.value()) {
                return Some(pkt);
            }
            if pkt.ecn().is_ect_or_ce() {
                pkt.set_ce();
                self.stats.marked += 1;
                out.marked(&pkt, MarkReason::Ctv, now);
                return Some(pkt);
            }
            self.stats.dropped += 1;
            out.dropped(pkt, DropReason::Value, now);
        }
    }

    fifo_accessors!();

    fn reset(&mut self) -> Vec<P> {
        self.vars.ctv = 0;
        self.hist.clear();
        self.queue.drain()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Recorder, TestPkt};
    use crate::Ecn;

    const MS: Nanos = 1_000_000;

    fn vpkt(flow: u64, value: u32, ecn: Ecn) -> TestPkt {
        TestPkt {
            flow,
            len: 1500,
            ecn,
            enqueued: 0,
            value,
        }
    }

    fn csaqm(target_bytes: u64) -> Csaqm<TestPkt> {
        Csaqm::new(Params {
            target_bytes,
            interval_ns: 5 * MS,
        })
    }

    #[test]
    fn ctv_keeps_the_highest_values_that_fit_the_byte_target() {
        // Six 1500-byte packets with values 100, 900, 300, 40_000, 300, 7 (9000 B) and
        // L_target = 4000 B. From the top: 40 000 (1500 kept), 900 (3000), then the 300 bin
        // holds 3000 B and 3000 + 3000 > 4000, so it is marked with everything below:
        // CTV = 301. The unmarked bytes, 3000, fit the target; adding the next bin would not.
        let mut q = csaqm(4000);
        let mut r = Recorder::default();
        for (f, v) in [100, 900, 300, 40_000, 300, 7].into_iter().enumerate() {
            q.enqueue(vpkt(f as u64, v, Ecn::Ect0), 0, &mut r);
        }
        q.update();
        assert_eq!(q.vars.ctv, 301);
        // Exactly on the budget: L_target = 3000 keeps 40 000 and 900; the 300 bin is marked.
        q.params.target_bytes = 3000;
        q.update();
        assert_eq!(q.vars.ctv, 301);
        // L_target = 2999: only 40 000 fits; CTV = 901.
        q.params.target_bytes = 2999;
        q.update();
        assert_eq!(q.vars.ctv, 901);
        // L_target = 9000: the whole queue fits, nothing is marked.
        q.params.target_bytes = 9000;
        q.update();
        assert_eq!(q.vars.ctv, 0);
        // L_target = 1: even the top value's packet does not fit: CTV = 40 001, all marked.
        q.params.target_bytes = 1;
        q.update();
        assert_eq!(q.vars.ctv, 40_001);
    }

    #[test]
    fn outgoing_packets_below_the_ctv_are_marked_and_not_ect_ones_dropped() {
        // The queue of the previous test with L_target = 4000 B; the first tick is at 5 ms.
        // Before it (CTV 0) nothing is marked; after it values < 301 are: 100 and 7 are
        // ECT(0) → CE, the two 300s are one Not-ECT (dropped) and one already CE (a mark).
        let mut q = csaqm(4000);
        let mut r = Recorder::default();
        let ecns = [
            Ecn::Ect0,
            Ecn::Ect0,
            Ecn::NotEct,
            Ecn::Ect1,
            Ecn::Ce,
            Ecn::Ect0,
        ];
        for (f, (v, e)) in [100, 900, 300, 40_000, 300, 7]
            .into_iter()
            .zip(ecns)
            .enumerate()
        {
            q.enqueue(vpkt(f as u64, v, e), 0, &mut r);
        }
        q.enqueue(vpkt(9, 1, Ecn::Ect0), 0, &mut r);
        let first = q.dequeue(4 * MS, &mut r).unwrap();
        assert_eq!((first.flow, first.ecn, q.vars.ctv), (0, Ecn::Ect0, 0));
        // Now at 5 ms the CTV is computed on the queue without flow 0: values 900, 300,
        // 40 000, 300, 7, 1 (9000 B) ⇒ still 301.
        let mut out = vec![];
        while let Some(p) = q.dequeue(5 * MS, &mut r) {
            out.push((p.flow, p.ecn));
        }
        assert_eq!(q.vars.ctv, 301);
        assert_eq!(
            out,
            vec![
                (1, Ecn::Ect0),
                (3, Ecn::Ect1),
                (4, Ecn::Ce),
                (5, Ecn::Ce),
                (9, Ecn::Ce)
            ]
        );
        assert_eq!(
            r.drops
                .iter()
                .map(|(p, why)| (p.flow, *why))
                .collect::<Vec<_>>(),
            vec![(2, DropReason::Value)]
        );
        assert_eq!(
            r.marks
                .iter()
                .map(|(p, why)| (p.flow, *why))
                .collect::<Vec<_>>(),
            vec![
                (4, MarkReason::Ctv),
                (5, MarkReason::Ctv),
                (9, MarkReason::Ctv)
            ]
        );
        assert_eq!(
            q.stats,
            Stats {
                marked: 3,
                dropped: 1
            }
        );
    }

    #[test]
    fn the_ctv_is_recomputed_every_interval_lazily() {
        // Ticks at 5, 10, 15 ms... A call at 23 ms runs the 20 ms tick (the queue has not
        // changed since the last call at 6 ms, so the missed 10 and 15 ms ticks give the same
        // CTV) and schedules the next at 25 ms. The CTV holds until the next tick even when
        // the queue empties; at that tick an empty queue gives CTV 0.
        let mut q = csaqm(1500);
        let mut r = Recorder::default();
        q.enqueue(vpkt(0, 10, Ecn::Ect0), 0, &mut r);
        q.enqueue(vpkt(1, 20, Ecn::Ect0), MS, &mut r);
        assert_eq!(q.vars.ctv, 0);
        q.enqueue(vpkt(2, 30, Ecn::Ect0), 6 * MS, &mut r);
        // Tick at 5 ms saw 10 and 20 (3000 B > 1500): keeps 20, CTV = 11.
        assert_eq!((q.vars.ctv, q.vars.next_update_ns), (11, 10 * MS));
        q.enqueue(vpkt(3, 40, Ecn::Ect0), 23 * MS, &mut r);
        // Tick at 20 ms saw 10, 20, 30: keeps 30 (1500 B), CTV = 21.
        assert_eq!((q.vars.ctv, q.vars.next_update_ns), (21, 25 * MS));
        while q.dequeue(24 * MS, &mut r).is_some() {}
        assert_eq!(q.vars.ctv, 21);
        assert!(q.dequeue(25 * MS, &mut r).is_none());
        assert_eq!((q.vars.ctv, q.vars.next_update_ns), (0, 30 * MS));
    }

    proptest::proptest! {
        /// Through arrivals, departures and CTV computations at varying budgets, the answer is
        /// the definition — the smallest v with bytes(PV ≥ v) ≤ budget (0 if everything
        /// fits) — brute-forced over the queued packets, whichever coarse bin is tracked.
        #[test]
        fn threshold_is_the_smallest_value_whose_upper_bytes_fit(
            ops in proptest::collection::vec((0u8..4, 0u32..66_000, 1u64..2000, 0u64..40_000), 1..200),
        ) {
            let mut h = ValueHistogram::default();
            let mut queued: std::collections::VecDeque<(u32, u64)> = Default::default();
            let bin = |v: u32| v.min(65_535);
            for (op, v, b, budget) in ops {
                match op {
                    // Values near each other as well as spread, so the walk often stops in a
                    // tracked bin that packets then enter and leave.
                    0 => {
                        let v = if v % 2 == 0 { 30_000 + v % 700 } else { v };
                        h.add(v, b);
                        queued.push_back((v, b));
                    }
                    1 => {
                        if let Some((v, b)) = queued.pop_front() {
                            h.remove(v, b);
                        }
                    }
                    _ => {
                        let total: u64 = queued.iter().map(|&(_, b)| b).sum();
                        let upper = |t: u32| queued.iter().filter(|&&(v, _)| bin(v) >= t).map(|&(_, b)| b).sum::<u64>();
                        let expected = if total <= budget { 0 } else { (0..=65_536u32).find(|&t| upper(t) <= budget).unwrap() };
                        proptest::prop_assert_eq!(h.threshold(total, budget, queued.iter().copied()), expected);
                    }
                }
            }
        }
    }

    #[test]
    fn values_above_u16_share_the_top_bin() {
        let mut h = ValueHistogram::default();
        let mut queued = vec![(70_000, 1500), (65_535, 1500), (3, 1500)];
        for &(v, b) in &queued {
            h.add(v, b);
        }
        assert_eq!(h.threshold(4500, 3000, queued.iter().copied()), 4);
        assert_eq!(h.threshold(4500, 2999, queued.iter().copied()), 65_536);
        h.remove(70_000, 1500);
        queued.remove(0);
        assert_eq!(h.threshold(3000, 1500, queued.iter().copied()), 4);
    }
}
