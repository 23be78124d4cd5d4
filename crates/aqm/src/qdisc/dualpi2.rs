//! DualPI2 — the DualQ Coupled AQM (RFC 9332; Linux net/sched/sch_dualpi2.c).
//!
//! Two FIFOs share the link: the L queue for scalable (L4S) traffic, classified by
//! `ecn_mask` as tc dualpi2 does (`l4s_ect`: ECT(1)/CE, the default; `any_ect`: every ECN
//! packet, as De Schepper et al. (DualQ)'s demo classified DCTCP), and the C queue for everything else. One PI
//! controller (the PI2 law of [`crate::pi2`]: α, β every `tupdate`, on the larger of the two
//! head-of-queue ages, as dualpi2's `get_queue_delays`) produces the base probability p′. At
//! dequeue, a C packet is signalled with p′² (drop, or CE for ECN packets unless overloaded);
//! an L packet is CE-marked with the coupled probability min(k·p′, 1), and when k·p′ ≥ 1
//! (overload) dropped with p′² first, every survivor marked; no signal while less than two
//! MTUs are queued in all. Then (sch_dualpi2.c `dualpi2_qdisc_dequeue`: `must_drop` before
//! `do_step_aqm`) an L packet not yet marked is CE-marked if its sojourn reaches the step
//! threshold (`step`, 1 ms, applied once the L queue holds `min_qlen_step` packets).
//! The scheduler is dualpi2's
//! credit-based WRR: L has priority while the credit is ≤ 0; serving L while C waits adds
//! `wc`·len, serving C while L waits subtracts (100 − `wc`)·len, so a backlogged C queue gets
//! at least `wc` % (10 %) of the link.
//!
//! Deviations: f64 probabilities instead of 32-bit fixed point; the controller runs lazily
//! from `now`, first at t = tupdate; the step threshold is time-based only (dualpi2 also offers
//! a packet-count threshold); drops are decided at dequeue (dualpi2's default).

use crate::fifo::Fifo;
use crate::options::{About, Link, Lowered, Opt, OptionError, Range, ScenarioOptions, Unit};
use crate::pi2::{ClassStats, EcnMask, Gains, Vars, PI2_OPTIONS};
use crate::{DropReason, Ecn, MarkReason, Nanos, Packet, Qdisc, Rng, Verdicts};

#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields, default)
)]
pub struct Params {
    /// PI target on the queue delay, ns (15 ms).
    pub target_ns: Nanos,
    /// Controller period, ns (16 ms).
    pub tupdate_ns: Nanos,
    /// Integral gain, Hz (41/256).
    pub alpha: f64,
    /// Proportional gain, Hz (819/256).
    pub beta: f64,
    /// Coupling factor k (2).
    pub k: f64,
    /// L-queue step threshold on sojourn, ns (1 ms).
    pub step_ns: Nanos,
    /// The step applies once the L queue holds at least this many packets (0).
    pub min_qlen_step: u64,
    /// C-queue weight of the WRR scheduler, % (10).
    pub wc: u32,
    pub ecn_mask: EcnMask,
    /// Packet limit of both queues together (10 000).
    pub limit: u64,
    /// The 2-MTU guard's MTU, bytes (1514).
    pub mtu_bytes: u64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            target_ns: 15_000_000,
            tupdate_ns: 16_000_000,
            alpha: 41.0 / 256.0,
            beta: 819.0 / 256.0,
            k: 2.0,
            step_ns: 1_000_000,
            min_qlen_step: 0,
            wc: 10,
            ecn_mask: EcnMask::L4sEct,
            limit: 10_000,
            mtu_bytes: 1514,
        }
    }
}

impl Params {
    pub(crate) fn gains(&self) -> Gains {
        Gains {
            target_ns: self.target_ns,
            tupdate_ns: self.tupdate_ns,
            alpha: self.alpha,
            beta: self.beta,
        }
    }

    pub fn validate(&self) -> Result<(), OptionError> {
        self.gains().validate(self.k)?;
        if self.wc > 100 {
            return Err(OptionError::new(
                "wc",
                format!("{} must be a percentage", self.wc),
            ));
        }
        if self.limit == 0 {
            return Err(OptionError::new("limit", "must be positive"));
        }
        Ok(())
    }
}

/// The scenario's options (tc-dualpi2's names; times in ns).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields, default)
)]
pub struct Options {
    pub target: Nanos,
    pub tupdate: Nanos,
    pub alpha: f64,
    pub beta: f64,
    pub k: f64,
    pub step: Nanos,
    pub min_qlen_step: u64,
    pub wc: u32,
    pub ecn_mask: EcnMask,
    pub limit: u64,
}

impl Default for Options {
    fn default() -> Self {
        let p = Params::default();
        Options {
            target: p.target_ns,
            tupdate: p.tupdate_ns,
            alpha: p.alpha,
            beta: p.beta,
            k: p.k,
            step: p.step_ns,
            min_qlen_step: p.min_qlen_step,
            wc: p.wc,
            ecn_mask: p.ecn_mask,
            limit: p.limit,
        }
    }
}

impl ScenarioOptions for Options {
    type Config = Params;
    const ABOUT: About = About {
        kind: "dualpi2",
        summary: "DualQ Coupled AQM: an L queue with a step AQM and the coupled k·p′, a C queue with p′², one PI controller, WRR giving C at least wc %",
        source: "RFC 9332; Linux net/sched/sch_dualpi2.c; De Schepper et al. (DualQ)",
        one_of: &[],
        reads_packet_values: false,
        options: &[
            PI2_OPTIONS[0],
            PI2_OPTIONS[1],
            PI2_OPTIONS[2],
            PI2_OPTIONS[3],
            PI2_OPTIONS[4],
            Opt::new("step", Unit::Time, Range::POSITIVE, "L-queue step threshold on the sojourn", "net/sched/sch_dualpi2.c dualpi2_reset_default (1 ms); RFC 9332 §4.2"),
            Opt::new("min_qlen_step", Unit::Int, Range::NON_NEGATIVE, "the step applies once the L queue holds this many packets", "tc-dualpi2 min_qlen_step; sch_dualpi2.c (0)"),
            Opt::new("wc", Unit::Int, Range::closed(0.0, 100.0), "C-queue weight of the WRR scheduler, %", "tc-dualpi2 c_protection; sch_dualpi2.c dualpi2_reset_default (10)"),
            PI2_OPTIONS[5],
            Opt::new("limit", Unit::Packets, Range::POSITIVE, "packet limit of both queues together", "net/sched/sch_dualpi2.c dualpi2_reset_default (10000)"),
        ],
    };

    fn lower(&self, _link: &Link) -> Result<Lowered<Self::Config>, OptionError> {
        let params = Params {
            target_ns: self.target,
            tupdate_ns: self.tupdate,
            alpha: self.alpha,
            beta: self.beta,
            k: self.k,
            step_ns: self.step,
            min_qlen_step: self.min_qlen_step,
            wc: self.wc,
            ecn_mask: self.ecn_mask,
            limit: self.limit,
            ..Params::default()
        };
        params.validate()?;
        Ok(Lowered {
            config: params,
            delay_target_ns: Some(self.target),
        })
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub c_drop: u64,
    pub c_mark: u64,
    pub l_step_mark: u64,
    pub l_coupled_mark: u64,
    pub l_drop: u64,
    pub overlimit: u64,
}

impl Stats {
    /// The PI2 signal's counters of the L or the C queue (the step marks are counted apart).
    fn class(&mut self, from_l: bool) -> ClassStats<'_> {
        if from_l {
            ClassStats {
                scalable: true,
                marks: &mut self.l_coupled_mark,
                drops: &mut self.l_drop,
            }
        } else {
            ClassStats {
                scalable: false,
                marks: &mut self.c_mark,
                drops: &mut self.c_drop,
            }
        }
    }
}

#[derive(Clone, Debug)]
pub struct DualPi2<P> {
    pub params: Params,
    /// The PI2 controller ([`crate::pi2::Vars`]).
    pub vars: Vars,
    /// WRR credit: L is served while ≤ 0.
    pub credit: i64,
    pub stats: Stats,
    rng: Rng,
    l: Fifo<P>,
    c: Fifo<P>,
}

impl<P: Packet> DualPi2<P> {
    /// The discipline for engine parameters `params`, checked; `seed` seeds its random stream.
    pub fn build(params: &Params, seed: u64) -> Result<Self, OptionError> {
        params.validate()?;
        Ok(Self::new(params.clone(), crate::rng_from_seed(seed)))
    }

    pub fn new(params: Params, rng: Rng) -> Self {
        let (vars, credit) = (Vars::new(params.tupdate_ns), Self::credit_init(&params));
        DualPi2 {
            params,
            vars,
            credit,
            stats: Stats::default(),
            rng,
            l: Fifo::default(),
            c: Fifo::default(),
        }
    }

    /// `c_protection_init` = MTU·(wc − wl), wl = 100 − wc.
    fn credit_init(p: &Params) -> i64 {
        p.mtu_bytes as i64 * (p.wc as i64 - (100 - p.wc as i64))
    }

    pub fn is_l4s(&self, ecn: Ecn) -> bool {
        self.params.ecn_mask.is_scalable(ecn)
    }

    pub fn l_len(&self) -> usize {
        self.l.len()
    }

    /// Run the PI updates due by `now`, each on the larger head age of the two queues at its
    /// tick (dualpi2's `get_queue_delays`).
    fn catch_up(&mut self, now: Nanos) {
        let g = self.params.gains();
        let (c_head, l_head) = (self.c.head_enqueue_ns(), self.l.head_enqueue_ns());
        self.vars.catch_up(g, now, |t| {
            let age = |h: Option<Nanos>| h.map_or(0, |h| t.saturating_sub(h));
            age(c_head).max(age(l_head))
        });
    }

    /// Take the next packet by the WRR credit; returns (packet, from L).
    fn pick(&mut self) -> Option<(P, bool)> {
        let (l_len, c_len) = (self.l.len(), self.c.len());
        let wc = self.params.wc as i64;
        if l_len > 0 && (c_len == 0 || self.credit <= 0) {
            let p = self.l.pop()?;
            if c_len > 0 {
                self.credit += wc * p.wire_len() as i64;
            }
            Some((p, true))
        } else if c_len > 0 {
            let p = self.c.pop()?;
            if l_len > 0 {
                self.credit -= (100 - wc) * p.wire_len() as i64;
            }
            Some((p, false))
        } else {
            // Both empty: reset the protection credit (dualpi2_reset_c_protection).
            self.credit = Self::credit_init(&self.params);
            None
        }
    }
}

impl<P: Packet> Qdisc<P> for DualPi2<P> {
    fn enqueue(&mut self, mut pkt: P, now: Nanos, out: &mut impl Verdicts<P>) {
        self.catch_up(now);
        if (self.l.len() + self.c.len()) as u64 >= self.params.limit {
            self.stats.overlimit += 1;
            out.dropped(pkt, DropReason::Overflow, now);
            return;
        }
        pkt.set_enqueue_ns(now);
        if self.is_l4s(pkt.ecn()) {
            self.l.push(pkt);
        } else {
            self.c.push(pkt);
        }
    }

    fn dequeue(&mut self, now: Nanos, out: &mut impl Verdicts<P>) -> Option<P> {
        self.catch_up(now);
        loop {
            let backlog_before = self.l.bytes() + self.c.bytes();
            let l_qlen_before = self.l.len() as u64;
            let (pkt, from_l) = self.pick()?;
            // dualpi2_qdisc_dequeue: must_drop (the PI2 law, overload drops included) first,
            // then the L queue's step; a packet the law has marked is not marked again.
            let mut pkt = if backlog_before < 2 * self.params.mtu_bytes {
                pkt
            } else {
                match self.vars.mark_or_drop(
                    &mut self.rng,
                    self.params.k,
                    self.stats.class(from_l),
                    pkt,
                    now,
                    out,
                ) {
                    Some(pkt) => pkt,
                    None => continue,
                }
            };
            if from_l
                && pkt.ecn() != Ecn::Ce
                && l_qlen_before >= self.params.min_qlen_step
                && now - pkt.enqueue_ns() >= self.params.step_ns
            {
                // The native L4S step AQM.
                pkt.set_ce();
                self.stats.l_step_mark += 1;
                out.marked(&pkt, MarkReason::Step, now);
            }
            return Some(pkt);
        }
    }

    fn len(&self) -> usize {
        self.l.len() + self.c.len()
    }

    fn backlog_bytes(&self) -> u64 {
        self.l.bytes() + self.c.bytes()
    }

    fn head_enqueue_ns(&self) -> Option<Nanos> {
        match (self.l.head_enqueue_ns(), self.c.head_enqueue_ns()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn reset(&mut self) -> Vec<P> {
        self.vars.reset();
        self.credit = Self::credit_init(&self.params);
        let mut all = self.l.drain();
        all.extend(self.c.drain());
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng_from_seed;
    use crate::testing::{pkt, Recorder, TestPkt};

    const MS: Nanos = 1_000_000;

    fn dq() -> DualPi2<TestPkt> {
        DualPi2::new(Params::default(), rng_from_seed(5))
    }

    #[test]
    fn classification_follows_ecn_mask() {
        let mut q = dq();
        let mut r = Recorder::default();
        q.enqueue(pkt(0, 1500, Ecn::Ect1), 0, &mut r);
        q.enqueue(pkt(1, 1500, Ecn::Ce), 0, &mut r);
        q.enqueue(pkt(2, 1500, Ecn::Ect0), 0, &mut r);
        q.enqueue(pkt(3, 1500, Ecn::NotEct), 0, &mut r);
        assert_eq!((q.l.len(), q.c.len()), (2, 2));
        let mut q = DualPi2::new(
            Params {
                ecn_mask: EcnMask::AnyEct,
                ..Params::default()
            },
            rng_from_seed(5),
        );
        q.enqueue(pkt(2, 1500, Ecn::Ect0), 0, &mut r);
        q.enqueue(pkt(3, 1500, Ecn::NotEct), 0, &mut r);
        assert_eq!((q.l.len(), q.c.len()), (1, 1));
    }

    #[test]
    fn wrr_gives_a_backlogged_c_queue_its_weight() {
        // Both queues backlogged with equal packets: credit starts at 1514·(10 − 90) < 0 (L
        // first); each L packet adds 10·1500, each C packet subtracts 90·1500, so in the long
        // run C gets 10 % of the packets (dualpi2's C protection, wc = 10).
        let mut q = DualPi2::new(
            Params {
                limit: 100_000,
                ..Params::default()
            },
            rng_from_seed(5),
        );
        q.vars.next_update_ns = u64::MAX;
        let mut r = Recorder::default();
        for i in 0..20_000 {
            q.enqueue(pkt(i, 1500, Ecn::Ect1), 0, &mut r);
            q.enqueue(pkt(i, 1500, Ecn::NotEct), 0, &mut r);
        }
        let mut from_c = 0;
        for _ in 0..10_000 {
            // No sojourn (now = 0): neither the step nor p′ (= 0) signals anything.
            if q.dequeue(0, &mut r).unwrap().ecn == Ecn::NotEct {
                from_c += 1;
            }
        }
        assert!(r.marks.is_empty() && r.drops.is_empty());
        assert!(
            (from_c as f64 / 10_000.0 - 0.10).abs() < 0.002,
            "C share {}",
            from_c as f64 / 10_000.0
        );
    }

    #[test]
    fn l_packets_above_the_step_are_marked_and_coupling_is_k_p() {
        // An L packet that waited 1 ms is step-marked whatever p′; below the step it is
        // marked with k·p′ = 2·0.1 = 0.2 (σ over 50 000 ≈ 0.002; ±0.006).
        let mut q = dq();
        q.vars.next_update_ns = u64::MAX;
        let mut r = Recorder::default();
        for i in 0..3 {
            q.enqueue(pkt(i, 1500, Ecn::Ect1), 0, &mut r);
        }
        q.dequeue(MS, &mut r);
        assert_eq!(r.marks.last().map(|(_, w)| *w), Some(MarkReason::Step));
        let mut q = dq();
        q.vars.next_update_ns = u64::MAX;
        q.vars.prob = 0.1;
        let mut r = Recorder::default();
        let n = 50_000;
        for i in 0..n {
            while q.len() < 30 {
                q.enqueue(pkt(i, 1500, Ecn::Ect1), 0, &mut r);
            }
            q.dequeue(0, &mut r);
        }
        let f = r.marks.len() as f64 / n as f64;
        assert!((f - 0.2).abs() < 0.006, "coupled mark fraction {f}");
        assert!(r.marks.iter().all(|(_, w)| *w == MarkReason::Coupled));
    }

    #[test]
    fn overload_drops_l_packets_before_the_step_can_mark_them() {
        // sch_dualpi2.c dualpi2_qdisc_dequeue calls must_drop before do_step_aqm: overloaded
        // (k·p′ = 1.2 ≥ 1), an L packet that waited 10 ms, far above the step, is dropped with
        // p′² = 0.36 and every survivor is marked by the law, not by the step (σ over 9000
        // ≈ 0.005; ±0.02).
        let mut q = dq();
        q.vars.next_update_ns = u64::MAX;
        q.vars.prob = 0.6;
        let mut r = Recorder::default();
        let n = 9_000;
        for i in 0..n {
            q.enqueue(pkt(i, 1500, Ecn::Ect1), 0, &mut r);
        }
        let mut delivered = 0;
        while let Some(p) = q.dequeue(10 * MS, &mut r) {
            assert_eq!(p.ecn, Ecn::Ce);
            delivered += 1;
        }
        let f = r.drops.len() as f64 / n as f64;
        assert_eq!(r.drops.len() + delivered, n as usize);
        assert!((f - 0.36).abs() < 0.02, "overload drop fraction {f}");
        assert!(r.drops.iter().all(|(_, w)| *w == DropReason::Overload));
        // The last two packets leave with less than two MTUs (2 · 1514 B, psched_mtu) queued,
        // where the law is silent: the step marks them.
        let step: Vec<u64> = r
            .marks
            .iter()
            .filter(|(_, w)| *w != MarkReason::Coupled)
            .map(|(p, w)| {
                assert_eq!(*w, MarkReason::Step);
                p.flow
            })
            .collect();
        assert_eq!(step, [n - 2, n - 1]);
        assert_eq!(q.stats.l_step_mark, 2);
    }

    #[test]
    fn the_controller_sees_the_older_head_of_the_two_queues() {
        // C head 20 ms old, L head 5 ms: the tick at 20 ms uses 20 ms ⇒ Δ = 0.16·0.005 +
        // 3.2·0.020 = 0.0648 (from p′ = 0, prev 0).
        let mut q = DualPi2::new(
            Params {
                tupdate_ns: 20 * MS,
                alpha: 0.16,
                beta: 3.2,
                ..Params::default()
            },
            rng_from_seed(1),
        );
        let mut r = Recorder::default();
        q.enqueue(pkt(0, 1500, Ecn::NotEct), 0, &mut r);
        q.enqueue(pkt(1, 1500, Ecn::Ect1), 15 * MS, &mut r);
        q.catch_up(20 * MS);
        assert!((q.vars.prob - 0.0648).abs() < 1e-12, "p′ = {}", q.vars.prob);
    }
}
