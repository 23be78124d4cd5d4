//! PI2 — a linearized PI controller for classic and scalable traffic in one queue.
//!
//! Sources: De Schepper, Bondarenko, Tsang, Briscoe, "PI²: A Linearized AQM for both Classic
//! and Scalable TCP", ACM CoNEXT 2016; RFC 9332 §2.1 and Appendix A (the same controller in the
//! DualQ); Linux net/sched/sch_dualpi2.c (`calculate_probability`, the classic/scalable
//! marking); De Schepper et al. (DualQ) ("think once to mark, twice to drop"); Fejes et al. 2020 §III (tupdate 10 ms,
//! α 0.16, β 3.2, target K·RTT).
//!
//! Every `tupdate` the base probability p′ moves by α·(qdelay − target) + β·(qdelay −
//! prev_qdelay), qdelay being the head packet's age at the tick (as dualpi2's
//! `get_queue_delays`). At dequeue, a classic packet is signalled with probability p′²
//! (two uniforms, signal iff both are below p′); a scalable one with min(k·p′, 1). A signal is
//! CE for ECN-capable packets, a drop otherwise; when k·p′ ≥ 1 (overload) classic ECN packets
//! are dropped rather than marked and scalable packets are dropped with p′² before the rest are
//! marked (dualpi2's `drop_overload`). No signal while less than two MTUs are queued (dualpi2's
//! guard). Which packets are scalable is `ecn_mask`, valued as tc dualpi2's option:
//! `l4s_ect` (ECT(1) and CE) or `any_ect` (every ECN-capable packet — what Fejes et al. 2020 needed,
//! since Linux's DCTCP and BBRv2 send ECT(0)).
//!
//! Deviations: the decision is taken at dequeue (Linux dualpi2; the CoNEXT qdisc decided at
//! enqueue like PIE); f64 probabilities instead of dualpi2's 32-bit fixed point; the
//! controller runs lazily from `now`, first at t = tupdate.

use crate::fifo::{fifo_accessors, Fifo};
use crate::options::{About, Link, Lowered, Opt, OptionError, Range, ScenarioOptions, Unit};
use crate::{uniform01, DropReason, Ecn, MarkReason, Nanos, Packet, Qdisc, Rng, Verdicts};

/// At most this many missed updates are replayed per call: with an empty queue each tick
/// lowers p′ by α·target at least, so p′ reaches 0 long before.
const MAX_CATCHUP: u32 = 10_000;

/// Which packets the scalable (L4S) law applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(rename_all = "snake_case")
)]
pub enum EcnMask {
    /// ECT(1) and CE (RFC 9331 classification; dualpi2's default).
    L4sEct,
    /// Every ECT(0), ECT(1) or CE packet.
    AnyEct,
}

#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields, default)
)]
pub struct Params {
    /// Queue-delay target, ns (15 ms; Fejes et al. 2020: K·RTT).
    pub target_ns: Nanos,
    /// Controller period, ns (dualpi2: 16 ms; Fejes et al. 2020: 10 ms).
    pub tupdate_ns: Nanos,
    /// Integral gain, Hz (dualpi2: 41/256 ≈ 0.16).
    pub alpha: f64,
    /// Proportional gain, Hz (dualpi2: 819/256 ≈ 3.2).
    pub beta: f64,
    /// Coupling factor k (2).
    pub k: f64,
    pub ecn_mask: EcnMask,
    /// Packet limit (dualpi2: 10 000).
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
            ecn_mask: p.ecn_mask,
            limit: p.limit,
        }
    }
}

/// The controller's and the classifier's options, shared with DualPI2.
pub(crate) const PI2_OPTIONS: [Opt; 6] = [
    Opt::new("target", Unit::DelayTarget, Range::POSITIVE, "queue-delay target of the PI controller (also the summary's delay target)", "net/sched/sch_dualpi2.c dualpi2_reset_default (15 ms); Fejes et al. 2020 §III: K·RTT"),
    Opt::new("tupdate", Unit::Time, Range::POSITIVE, "controller period", "net/sched/sch_dualpi2.c dualpi2_reset_default (16 ms); Fejes et al. 2020 §III: 10 ms"),
    Opt::new("alpha", Unit::Float, Range::NON_NEGATIVE, "integral gain, Hz", "net/sched/sch_dualpi2.c dualpi2_reset_default (41/256 Hz); RFC 9332 App. A.1 (0.16 Hz); Fejes et al. 2020 §III: 0.16"),
    Opt::new("beta", Unit::Float, Range::NON_NEGATIVE, "proportional gain, Hz", "net/sched/sch_dualpi2.c dualpi2_reset_default (819/256 Hz); RFC 9332 App. A.1 (3.2 Hz); Fejes et al. 2020 §III: 3.2"),
    Opt::new("k", Unit::Float, Range::at_least(1.0), "coupling factor: scalable packets are marked with min(k·p′, 1)", "RFC 9332 §2.4 (k = 2); net/sched/sch_dualpi2.c"),
    Opt::new("ecn_mask", Unit::Choice(&["l4s_ect", "any_ect"]), Range::ANY, "which packets are scalable: ECT(1) and CE, or every ECN-capable packet (Linux DCTCP sends ECT(0))", "tc-dualpi2 l4s_ect/any_ect; RFC 9331 §5.1"),
];

impl ScenarioOptions for Options {
    type Config = Params;
    const ABOUT: About = About {
        kind: "pi2",
        summary: "PI2 in one queue: p′ from a PI controller on the head packet's age; classic packets signalled with p′², scalable ones with min(k·p′, 1)",
        source: "De Schepper et al., CoNEXT 2016; RFC 9332 App. A; Linux net/sched/sch_dualpi2.c; Fejes et al. 2020 §III",
        one_of: &[],
        reads_packet_values: false,
        options: &[
            PI2_OPTIONS[0],
            PI2_OPTIONS[1],
            PI2_OPTIONS[2],
            PI2_OPTIONS[3],
            PI2_OPTIONS[4],
            PI2_OPTIONS[5],
            Opt::new("limit", Unit::Packets, Range::POSITIVE, "packet limit of the queue", "net/sched/sch_dualpi2.c dualpi2_reset_default (10000)"),
        ],
    };

    fn lower(&self, _link: &Link) -> Result<Lowered<Self::Config>, OptionError> {
        let params = Params {
            target_ns: self.target,
            tupdate_ns: self.tupdate,
            alpha: self.alpha,
            beta: self.beta,
            k: self.k,
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

/// The PI controller's state (RFC 9332 Appendix A.1; sch_dualpi2.c `struct dualpi2_sched_data`
/// `pi2_prob`, `last_qdelay`, the timer), shared by PI2 and DualPI2, which differ only in the
/// queue delay they feed it.
#[derive(Clone, Debug)]
pub struct Vars {
    /// The base probability p′.
    pub prob: f64,
    pub prev_qdelay_ns: Nanos,
    pub next_update_ns: Nanos,
}

/// The controller's parameters, as both disciplines' `Params` hold them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Gains {
    pub target_ns: Nanos,
    pub tupdate_ns: Nanos,
    pub alpha: f64,
    pub beta: f64,
}

impl Gains {
    /// The controller's own checks, and the coupling factor k ≥ 1 both disciplines take.
    pub(crate) fn validate(&self, k: f64) -> Result<(), OptionError> {
        if self.target_ns == 0 {
            return Err(OptionError::new("target", "must be positive"));
        }
        if self.tupdate_ns == 0 {
            return Err(OptionError::new("tupdate", "must be positive"));
        }
        if !(self.alpha.is_finite() && self.alpha >= 0.0) {
            return Err(OptionError::new(
                "alpha",
                format!("{} must be ≥ 0 (Hz)", self.alpha),
            ));
        }
        if !(self.beta.is_finite() && self.beta >= 0.0) {
            return Err(OptionError::new(
                "beta",
                format!("{} must be ≥ 0 (Hz)", self.beta),
            ));
        }
        if !(k.is_finite() && k >= 1.0) {
            return Err(OptionError::new("k", format!("{k} must be ≥ 1")));
        }
        Ok(())
    }
}

impl Vars {
    /// The state at t = 0: p′ = 0, first update at t = tupdate.
    pub(crate) fn new(tupdate_ns: Nanos) -> Self {
        Vars {
            prob: 0.0,
            prev_qdelay_ns: 0,
            next_update_ns: tupdate_ns,
        }
    }

    /// One update (`calculate_probability`): p′ += α·(qdelay − target) + β·(qdelay −
    /// prev_qdelay), clamped to [0, 1].
    pub(crate) fn update(&mut self, g: Gains, qd: Nanos) {
        let s = |ns: i64| ns as f64 / 1e9;
        let delta = g.alpha * s(qd as i64 - g.target_ns as i64)
            + g.beta * s(qd as i64 - self.prev_qdelay_ns as i64);
        self.prob = (self.prob + delta).clamp(0.0, 1.0);
        self.prev_qdelay_ns = qd;
    }

    /// Replay every update due by `now`, each at its own tick t with the queue delay
    /// `qdelay(t)` (the queue does not change between calls, so this is what the timer would
    /// have computed).
    pub(crate) fn catch_up(&mut self, g: Gains, now: Nanos, qdelay: impl Fn(Nanos) -> Nanos) {
        let mut n = 0;
        while self.next_update_ns <= now {
            if n < MAX_CATCHUP {
                let t = self.next_update_ns;
                self.update(g, qdelay(t));
            }
            n += 1;
            self.next_update_ns += g.tupdate_ns;
        }
    }

    /// Back to p′ = 0 (`dualpi2_reset`), keeping the timer.
    pub(crate) fn reset(&mut self) {
        self.prob = 0.0;
        self.prev_qdelay_ns = 0;
    }

    /// The signal for one dequeued packet (sch_dualpi2.c `dualpi2_classic_marking`,
    /// `dualpi2_scalable_marking`, `drop_overload`): a scalable packet is dropped with p′² when
    /// k·p′ ≥ 1 (overload), else CE-marked with min(k·p′, 1); a classic one is signalled with
    /// p′² ("think twice"), as CE if it is ECN-capable and the queue is not overloaded, as a
    /// drop otherwise.
    #[inline]
    pub(crate) fn signal(&self, rng: &mut Rng, k: f64, scalable: bool, ect: bool) -> Signal {
        let overloaded = k * self.prob >= 1.0;
        if scalable {
            if overloaded && self.think_twice(rng) {
                return Signal::Drop(DropReason::Overload);
            }
            if overloaded || uniform01(rng) < k * self.prob {
                return Signal::Mark(MarkReason::Coupled);
            }
            return Signal::None;
        }
        if self.think_twice(rng) {
            if ect && !overloaded {
                return Signal::Mark(MarkReason::Prob);
            }
            return Signal::Drop(if ect {
                DropReason::Overload
            } else {
                DropReason::Early
            });
        }
        Signal::None
    }

    /// The verdict on one dequeued packet past the 2-MTU guard (sch_dualpi2.c `must_drop`, with
    /// the CE marking of `dualpi2_classic_marking`/`dualpi2_scalable_marking` and the dequeue
    /// loop's `drop_and_retry`): the packet is signalled as [`Vars::signal`] decides, counted
    /// in `class`, and CE-marked and returned, returned untouched, or reported dropped
    /// (`None`: the caller dequeues the next packet).
    #[inline]
    pub(crate) fn mark_or_drop<P: Packet>(
        &self,
        rng: &mut Rng,
        k: f64,
        class: ClassStats<'_>,
        mut pkt: P,
        now: Nanos,
        out: &mut impl Verdicts<P>,
    ) -> Option<P> {
        match self.signal(rng, k, class.scalable, pkt.ecn().is_ect_or_ce()) {
            Signal::None => Some(pkt),
            Signal::Mark(why) => {
                pkt.set_ce();
                *class.marks += 1;
                out.marked(&pkt, why, now);
                Some(pkt)
            }
            Signal::Drop(why) => {
                *class.drops += 1;
                out.dropped(pkt, why, now);
                None
            }
        }
    }

    /// "Think once to mark, think twice to drop" (De Schepper et al., CoNEXT 2016 §3): both
    /// uniforms below p′, i.e. probability p′².
    #[inline]
    fn think_twice(&self, rng: &mut Rng) -> bool {
        let p = self.prob;
        uniform01(rng) < p && uniform01(rng) < p
    }
}

/// What [`Vars::signal`] decided for a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Signal {
    None,
    Mark(MarkReason),
    Drop(DropReason),
}

/// The class a dequeued packet is signalled in (scalable or classic) and that class's mark
/// and drop counters in the discipline's `Stats`, for [`Vars::mark_or_drop`].
pub(crate) struct ClassStats<'a> {
    pub scalable: bool,
    pub marks: &'a mut u64,
    pub drops: &'a mut u64,
}

impl EcnMask {
    /// Whether a packet with this codepoint is scalable (L4S) under the mask.
    #[inline]
    pub fn is_scalable(self, ecn: Ecn) -> bool {
        match self {
            EcnMask::L4sEct => matches!(ecn, Ecn::Ect1 | Ecn::Ce),
            EcnMask::AnyEct => ecn.is_ect_or_ce(),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub classic_drop: u64,
    pub classic_mark: u64,
    pub l4s_mark: u64,
    pub l4s_drop: u64,
    pub overlimit: u64,
}

impl Stats {
    /// The counters of the scalable or the classic class.
    fn class(&mut self, scalable: bool) -> ClassStats<'_> {
        if scalable {
            ClassStats {
                scalable,
                marks: &mut self.l4s_mark,
                drops: &mut self.l4s_drop,
            }
        } else {
            ClassStats {
                scalable,
                marks: &mut self.classic_mark,
                drops: &mut self.classic_drop,
            }
        }
    }
}

#[derive(Clone, Debug)]
pub struct Pi2<P> {
    pub params: Params,
    pub vars: Vars,
    pub stats: Stats,
    rng: Rng,
    queue: Fifo<P>,
}

impl<P: Packet> Pi2<P> {
    /// The discipline for engine parameters `params`, checked; `seed` seeds its random stream.
    pub fn build(params: &Params, seed: u64) -> Result<Self, OptionError> {
        params.validate()?;
        Ok(Self::new(params.clone(), crate::rng_from_seed(seed)))
    }

    pub fn new(params: Params, rng: Rng) -> Self {
        let vars = Vars::new(params.tupdate_ns);
        Pi2 {
            params,
            vars,
            stats: Stats::default(),
            rng,
            queue: Fifo::default(),
        }
    }

    pub fn is_scalable(&self, ecn: Ecn) -> bool {
        self.params.ecn_mask.is_scalable(ecn)
    }

    fn gains(&self) -> Gains {
        self.params.gains()
    }

    /// Run the updates due by `now` on the head packet's age at each tick.
    fn catch_up(&mut self, now: Nanos) {
        let g = self.gains();
        let head = self.queue.head_enqueue_ns();
        self.vars
            .catch_up(g, now, |t| head.map_or(0, |h| t.saturating_sub(h)));
    }
}

impl<P: Packet> Qdisc<P> for Pi2<P> {
    fn enqueue(&mut self, mut pkt: P, now: Nanos, out: &mut impl Verdicts<P>) {
        self.catch_up(now);
        if self.queue.len() as u64 >= self.params.limit {
            self.stats.overlimit += 1;
            out.dropped(pkt, DropReason::Overflow, now);
            return;
        }
        pkt.set_enqueue_ns(now);
        self.queue.push(pkt);
    }

    fn dequeue(&mut self, now: Nanos, out: &mut impl Verdicts<P>) -> Option<P> {
        self.catch_up(now);
        loop {
            let backlog_before = self.queue.bytes();
            let pkt = self.queue.pop()?;
            if backlog_before < 2 * self.params.mtu_bytes {
                return Some(pkt);
            }
            let scalable = self.is_scalable(pkt.ecn());
            if let Some(pkt) = self.vars.mark_or_drop(
                &mut self.rng,
                self.params.k,
                self.stats.class(scalable),
                pkt,
                now,
                out,
            ) {
                return Some(pkt);
            }
        }
    }

    fifo_accessors!();

    fn reset(&mut self) -> Vec<P> {
        self.vars.reset();
        self.queue.drain()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng_from_seed;
    use crate::testing::{pkt, Recorder, TestPkt};

    const MS: Nanos = 1_000_000;

    fn pi2(mask: EcnMask) -> Pi2<TestPkt> {
        Pi2::new(
            Params {
                tupdate_ns: 10 * MS,
                alpha: 0.16,
                beta: 3.2,
                ecn_mask: mask,
                ..Params::default()
            },
            rng_from_seed(11),
        )
    }

    #[test]
    fn controller_steps_for_a_given_delay_sequence() {
        // Fejes et al. 2020's gains (α 0.16, β 3.2 Hz), target 15 ms, a head packet enqueued at t = 0:
        // tick at 10 ms: qd 10 ms ⇒ Δ = 0.16·(−0.005) + 3.2·0.010 = −0.0008 + 0.032 = 0.0312;
        // tick at 20 ms: qd 20 ms ⇒ Δ = 0.16·0.005 + 3.2·0.010 = 0.0008 + 0.032 = 0.0328 ⇒
        // p′ = 0.064.
        let mut q = pi2(EcnMask::L4sEct);
        let mut r = Recorder::default();
        q.enqueue(pkt(0, 1500, Ecn::NotEct), 0, &mut r);
        q.catch_up(10 * MS);
        assert!((q.vars.prob - 0.0312).abs() < 1e-12, "p′ = {}", q.vars.prob);
        q.catch_up(20 * MS);
        assert!((q.vars.prob - 0.064).abs() < 1e-12, "p′ = {}", q.vars.prob);
        // Queue empties: qd = 0 at 30 ms ⇒ Δ = 0.16·(−0.015) + 3.2·(−0.020) = −0.0664 ⇒ 0.
        q.queue.pop();
        q.catch_up(30 * MS);
        assert_eq!(q.vars.prob, 0.0);
    }

    /// Signal fractions at a pinned p′ over many packets of one kind.
    fn fractions(ecn: Ecn, mask: EcnMask, p: f64) -> (f64, f64) {
        let mut q = pi2(mask);
        q.vars.next_update_ns = u64::MAX;
        q.vars.prob = p;
        let mut r = Recorder::default();
        let n = 100_000;
        for i in 0..n {
            // Keep 30 packets queued so the 2-MTU guard never applies, even after a run of
            // drops inside one dequeue.
            while q.len() < 30 {
                q.enqueue(pkt(i, 1500, ecn), 0, &mut r);
            }
            q.dequeue(0, &mut r);
        }
        (r.marks.len() as f64, r.drops.len() as f64)
    }

    #[test]
    fn classic_is_dropped_with_p_squared_and_scalable_marked_with_k_p() {
        // p′ = 0.2: classic Not-ECT packets are dropped with 0.04 of dequeue attempts, ECT(1)
        // packets marked with k·p′ = 0.4. Counts over ~100 000 decisions: σ(0.04) ≈ 0.0006,
        // σ(0.4) ≈ 0.0015; allow ±0.003 / ±0.006. (Each drop is followed by another decision, so
        // the drop fraction is drops / (dequeues + drops).)
        let (_, drops) = fractions(Ecn::NotEct, EcnMask::L4sEct, 0.2);
        let f = drops / (100_000.0 + drops);
        assert!((f - 0.04).abs() < 0.003, "classic drop fraction {f}");
        let (marks, drops) = fractions(Ecn::Ect1, EcnMask::L4sEct, 0.2);
        assert_eq!(drops, 0.0);
        assert!(
            (marks / 100_000.0 - 0.4).abs() < 0.006,
            "scalable mark fraction {}",
            marks / 100_000.0
        );
    }

    #[test]
    fn ecn_mask_decides_what_is_scalable() {
        // ECT(0) is classic under l4s_ect (marked with p′² = 0.04) and scalable under any_ect
        // (marked with 2·p′ = 0.4).
        let (m_classic, _) = fractions(Ecn::Ect0, EcnMask::L4sEct, 0.2);
        let (m_any, _) = fractions(Ecn::Ect0, EcnMask::AnyEct, 0.2);
        assert!((m_classic / 100_000.0 - 0.04).abs() < 0.003);
        assert!((m_any / 100_000.0 - 0.4).abs() < 0.006);
    }

    #[test]
    fn overload_drops_classic_ecn_and_marks_every_surviving_scalable_packet() {
        // p′ = 0.6 ⇒ k·p′ = 1.2 ≥ 1: scalable packets are dropped with p′² = 0.36, every
        // survivor is marked; classic ECT(0) packets are dropped, never marked.
        let (marks, drops) = fractions(Ecn::Ect1, EcnMask::L4sEct, 0.6);
        assert_eq!(marks, 100_000.0);
        let f = drops / (100_000.0 + drops);
        assert!((f - 0.36).abs() < 0.006, "overload drop fraction {f}");
        let (marks, drops) = fractions(Ecn::Ect0, EcnMask::L4sEct, 0.6);
        assert_eq!(marks, 0.0);
        assert!(drops > 0.0);
    }

    #[test]
    fn no_signal_below_two_mtus() {
        let mut q = pi2(EcnMask::L4sEct);
        q.vars.next_update_ns = u64::MAX;
        q.vars.prob = 1.0;
        let mut r = Recorder::default();
        q.enqueue(pkt(0, 1500, Ecn::NotEct), 0, &mut r);
        q.enqueue(pkt(1, 1500, Ecn::NotEct), 0, &mut r);
        // 3000 B < 2·1514: both leave untouched even at p′ = 1.
        assert!(q.dequeue(0, &mut r).is_some() && q.dequeue(0, &mut r).is_some());
        assert!(r.drops.is_empty());
    }
}
