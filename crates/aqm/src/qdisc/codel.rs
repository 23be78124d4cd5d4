//! CoDel — Controlled Delay, single queue, with Linux sch_codel semantics.
//!
//! Sources: K. Nichols, V. Jacobson, "Controlling Queue Delay", ACM Queue 10(5), 2012;
//! RFC 8289 §3, §5; Linux net/sched/sch_codel.c (`codel_qdisc_enqueue`,
//! `codel_qdisc_dequeue`, `codel_init`), include/net/codel_impl.h; tc-codel(8) for the option
//! names, so `tc qdisc add dev eth0 root codel limit 1000 target 5ms interval 100ms noecn`
//! transcribes field for field.
//!
//! Enqueue appends and timestamps the packet while fewer than `limit` packets are queued,
//! else drops it (`Overflow`, tc's `drop_overlimit`). Dequeue runs the shared control law
//! ([`crate::codel_law::dequeue`], `codel_dequeue`) over the one FIFO, with the FIFO's byte
//! backlog as the MTU guard: drops at the head (`HeadDrop`) or, with `ecn`, CE marks
//! (`MarkReason::Delay`); `ce_threshold` marks (`MarkReason::Step`).
//!
//! Deviations from Linux: those of [`crate::codel_law`] (u64 ns time; exact f64 √count
//! instead of the Newton-iterated `rec_inv_sqrt`). `mtu_bytes` is not a tc option: Linux takes
//! it from the device (`psched_mtu`, 1514 on Ethernet).

use crate::codel_law::{self, Vars};
use crate::fifo::{fifo_accessors, Fifo};
use crate::options::{About, Link, Lowered, Opt, OptionError, Range, ScenarioOptions, Unit};
use crate::{DropReason, Nanos, Packet, Qdisc, Verdicts};

/// sch_codel's options (tc-codel(8)); defaults of `codel_init`/`codel_params_init`.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields, default)
)]
pub struct Params {
    /// `target`: acceptable standing sojourn, ns (5 ms).
    pub target_ns: Nanos,
    /// `interval`: sliding window and control-law base, ns (100 ms).
    pub interval_ns: Nanos,
    /// No drop while at most this many bytes stay queued, bytes (Linux `psched_mtu`: 1514).
    pub mtu_bytes: u64,
    /// `ecn`: mark ECT packets instead of dropping them (off).
    pub ecn: bool,
    /// `ce_threshold`: mark every ECT packet whose sojourn exceeds this, ns (None: off).
    pub ce_threshold_ns: Option<Nanos>,
    /// `limit`: packet limit of the queue (1000).
    pub limit: u64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            target_ns: 5_000_000,
            interval_ns: 100_000_000,
            mtu_bytes: 1514,
            ecn: false,
            ce_threshold_ns: None,
            limit: 1000,
        }
    }
}

impl Params {
    pub fn validate(&self) -> Result<(), OptionError> {
        if self.target_ns == 0 {
            return Err(OptionError::new("target", "must be positive"));
        }
        if self.interval_ns == 0 {
            return Err(OptionError::new("interval", "must be positive"));
        }
        if self.limit == 0 {
            return Err(OptionError::new("limit", "must be positive"));
        }
        Ok(())
    }
}

/// The scenario's options (tc-codel(8)'s names; times in ns).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields, default)
)]
pub struct Options {
    pub target: Nanos,
    pub interval: Nanos,
    pub limit: u64,
    pub ecn: bool,
    pub ce_threshold: Option<Nanos>,
}

impl Default for Options {
    fn default() -> Self {
        let p = Params::default();
        Options {
            target: p.target_ns,
            interval: p.interval_ns,
            limit: p.limit,
            ecn: p.ecn,
            ce_threshold: p.ce_threshold_ns,
        }
    }
}

/// CoDel's law options, shared with FQ-CoDel.
pub(crate) const CODEL_OPTIONS: [Opt; 3] = [
    Opt::new(
        "target",
        Unit::DelayTarget,
        Range::POSITIVE,
        "acceptable standing sojourn (also the summary's delay target)",
        "RFC 8289 §4.4 TARGET; tc-codel(8) target",
    ),
    Opt::new(
        "interval",
        Unit::Time,
        Range::POSITIVE,
        "window the sojourn must stay above target in, and the control law's base",
        "RFC 8289 §4.3 INTERVAL; tc-codel(8) interval",
    ),
    Opt::new(
        "ce_threshold",
        Unit::Time,
        Range::POSITIVE,
        "CE-mark every ECT packet whose sojourn exceeds this (none: off)",
        "tc-codel(8) ce_threshold; include/net/codel_impl.h codel_dequeue",
    ),
];

impl ScenarioOptions for Options {
    type Config = Params;
    const ABOUT: About = About {
        kind: "codel",
        summary: "CoDel: drops (or marks) at dequeue once the sojourn has stayed above target for an interval, then at interval/√count spacing",
        source: "Nichols & Jacobson, ACM Queue 2012; RFC 8289; Linux include/net/codel_impl.h, net/sched/sch_codel.c",
        one_of: &[],
        reads_packet_values: false,
        options: &[
            CODEL_OPTIONS[0],
            CODEL_OPTIONS[1],
            Opt::new("limit", Unit::Packets, Range::POSITIVE, "packet limit of the queue", "tc-codel(8) limit; sch_codel.c codel_init (1000)"),
            Opt::new("ecn", Unit::Bool, Range::ANY, "CE-mark ECT packets instead of dropping them", "tc-codel(8) ecn; sch_codel.c codel_init (off)"),
            CODEL_OPTIONS[2],
        ],
    };

    fn lower(&self, _link: &Link) -> Result<Lowered<Self::Config>, OptionError> {
        let params = Params {
            target_ns: self.target,
            interval_ns: self.interval,
            limit: self.limit,
            ecn: self.ecn,
            ce_threshold_ns: self.ce_threshold,
            ..Params::default()
        };
        params.validate()?;
        Ok(Lowered {
            config: params,
            delay_target_ns: Some(self.target),
        })
    }
}

impl Params {
    /// The control-law parameters.
    pub fn law(&self) -> codel_law::Params {
        codel_law::Params {
            target_ns: self.target_ns,
            interval_ns: self.interval_ns,
            mtu_bytes: self.mtu_bytes,
            ecn: self.ecn,
            ce_threshold_ns: self.ce_threshold_ns,
        }
    }
}

/// tc -s codel names: the law's counters plus the enqueue overflows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// `maxpacket`, `drop_count`, `ecn_mark`, `ce_mark`, ...
    pub law: codel_law::Stats,
    /// Arrivals dropped because `limit` packets were queued.
    pub drop_overlimit: u64,
}

#[derive(Clone, Debug)]
pub struct Codel<P> {
    pub params: Params,
    law_params: codel_law::Params,
    pub vars: Vars,
    pub stats: Stats,
    queue: Fifo<P>,
}

impl<P: Packet> Codel<P> {
    /// The discipline for engine parameters `params`, checked; `seed` seeds its random stream.
    pub fn build(params: &Params, seed: u64) -> Result<Self, OptionError> {
        let _ = seed;
        params.validate()?;
        Ok(Self::new(params.clone()))
    }

    pub fn new(params: Params) -> Self {
        Codel {
            law_params: params.law(),
            params,
            vars: Vars::default(),
            stats: Stats::default(),
            queue: Fifo::default(),
        }
    }
}

impl<P: Packet> Qdisc<P> for Codel<P> {
    fn enqueue(&mut self, mut pkt: P, now: Nanos, out: &mut impl Verdicts<P>) {
        if (self.queue.len() as u64) < self.params.limit {
            pkt.set_enqueue_ns(now);
            self.queue.push(pkt);
            return;
        }
        self.stats.drop_overlimit += 1;
        out.dropped(pkt, DropReason::Overflow, now);
    }

    fn dequeue(&mut self, now: Nanos, out: &mut impl Verdicts<P>) -> Option<P> {
        codel_law::dequeue(
            &mut self.queue,
            now,
            &self.law_params,
            &mut self.vars,
            &mut self.stats.law,
            out,
        )
    }

    fifo_accessors!();

    fn reset(&mut self) -> Vec<P> {
        // codel_reset: codel_vars_init; the statistics survive, as in Linux.
        self.vars = Vars::default();
        self.queue.drain()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{pkt, Recorder, TestPkt};
    use crate::{Ecn, MarkReason};

    const MS: Nanos = 1_000_000;

    /// A standing queue: 400 packets enqueued at t = 0, dequeued one per ms afterwards.
    fn standing(ecn: bool) -> (Codel<TestPkt>, Recorder) {
        let mut q = Codel::new(Params {
            ecn,
            ..Params::default()
        });
        let mut r = Recorder::default();
        for i in 0..400 {
            q.enqueue(
                pkt(i, 1500, if ecn { Ecn::Ect0 } else { Ecn::NotEct }),
                0,
                &mut r,
            );
        }
        (q, r)
    }

    #[test]
    fn defaults_are_sch_codel_s() {
        let p = Params::default();
        assert_eq!(
            (
                p.target_ns,
                p.interval_ns,
                p.mtu_bytes,
                p.ecn,
                p.ce_threshold_ns,
                p.limit
            ),
            (5 * MS, 100 * MS, 1514, false, None, 1000)
        );
    }

    #[test]
    fn drop_schedule_is_interval_over_sqrt_count() {
        // Sojourns are ≥ 5 ms from t = 5 ms. The first dequeue at/after 5 ms sets
        // first_above = 5 + 100 = 105 ms; the first drop happens at the first dequeue strictly
        // after 105 ms (t = 106 ms, count 1, drop_next = 106 + 100 = 206 ms); then drops at
        // 206 (count 2 ⇒ next 206 + 100/√2 = 276.71), 277 (count 3 ⇒ 276.71 + 57.74 = 334.45),
        // 335 (count 4 ⇒ 334.45 + 50 = 384.45), 385 ms.
        let (mut q, mut r) = standing(false);
        let mut drop_times = vec![];
        for t in 1..=390u64 {
            let before = r.drops.len();
            q.dequeue(t * MS, &mut r);
            if r.drops.len() > before {
                drop_times.push(t);
            }
        }
        assert_eq!(drop_times, vec![106, 206, 277, 335, 385]);
        assert!(r.drops.iter().all(|(_, w)| *w == DropReason::HeadDrop));
        assert_eq!(q.stats.law.drop_count, 5);
        // 400 − 390 sent − 5 dropped.
        assert_eq!(q.len(), 5);
        assert_eq!(q.backlog_bytes(), 5 * 1500);
    }

    #[test]
    fn no_drops_below_target_or_with_one_mtu_queued() {
        let mut q = Codel::new(Params::default());
        let mut r = Recorder::default();
        // Sojourn 4 ms < 5 ms target, forever.
        for t in 0..1000u64 {
            q.enqueue(pkt(t, 1500, Ecn::NotEct), t * MS, &mut r);
            q.enqueue(pkt(t, 1500, Ecn::NotEct), t * MS, &mut r);
            q.dequeue(t * MS + 4 * MS, &mut r);
            q.dequeue(t * MS + 4 * MS, &mut r);
        }
        assert!(r.drops.is_empty());
        // A single old packet (backlog after the pop 0 ≤ MTU) is never dropped.
        let mut q = Codel::new(Params::default());
        for t in 0..20u64 {
            q.enqueue(pkt(t, 1500, Ecn::NotEct), t * 100 * MS, &mut r);
            q.dequeue(t * 100 * MS + 50 * MS, &mut r);
        }
        assert!(r.drops.is_empty());
    }

    #[test]
    fn ecn_marks_instead_of_dropping() {
        // Same schedule as the drop test, with marks.
        let (mut q, mut r) = standing(true);
        for t in 1..=390u64 {
            q.dequeue(t * MS, &mut r);
        }
        assert!(r.drops.is_empty());
        assert_eq!(r.marks.len(), 5);
        assert_eq!(q.stats.law.ecn_mark, 5);
        assert!(r
            .marks
            .iter()
            .all(|(p, w)| p.ecn == Ecn::Ce && *w == MarkReason::Delay));
    }

    #[test]
    fn limit_overflows_at_enqueue() {
        // limit 3: the 4th and 5th arrivals are dropped as Overflow; the queue keeps 3.
        let mut q = Codel::new(Params {
            limit: 3,
            ..Params::default()
        });
        let mut r = Recorder::default();
        for i in 0..5 {
            q.enqueue(pkt(i, 1000, Ecn::NotEct), 0, &mut r);
        }
        assert_eq!(q.len(), 3);
        assert_eq!(
            r.drops
                .iter()
                .map(|(p, w)| (p.flow, *w))
                .collect::<Vec<_>>(),
            vec![(3, DropReason::Overflow), (4, DropReason::Overflow)]
        );
        assert_eq!(q.stats.drop_overlimit, 2);
    }

    #[test]
    fn reset_returns_packets_and_clears_the_state() {
        let (mut q, mut r) = standing(false);
        for t in 1..=210u64 {
            q.dequeue(t * MS, &mut r);
        }
        assert!(q.vars.dropping);
        // 400 − 210 sent − 2 dropped (106, 206).
        assert_eq!(q.reset().len(), 188);
        assert_eq!(q.vars, Vars::default());
        assert!(q.is_empty() && q.backlog_bytes() == 0 && q.head_enqueue_ns().is_none());
    }
}
