//! CoDel — Controlled Delay (aqm.md §6.1).
//!
//! Sources: K. Nichols, V. Jacobson, "Controlling Queue Delay", ACM Queue 10(5), 2012;
//! RFC 8289 §3, §5; Linux include/net/codel.h, include/net/codel_impl.h (`codel_should_drop`,
//! `codel_dequeue`, `codel_control_law`), net/sched/sch_codel.c.
//!
//! At dequeue: once every packet's sojourn has stayed at or above `target` for `interval`
//! (and more than one MTU is queued), CoDel enters the dropping state and drops (or, with
//! `ecn`, marks) a packet, then the next ones at `interval/√count` spacing until the sojourn
//! falls below target. Re-entering soon after leaving reuses the previous drop rate
//! (`count = count − lastcount` if that is > 1 and the last drop was < 16 intervals ago), as
//! Linux and RFC 8289 §5 do. `ce_threshold` marks every ECT packet whose sojourn exceeds it.
//!
//! [`CodelLaw`] is the control law alone, generic over the queue it drains
//! ([`CodelQueue`]), so FQ-CoDel can run one per flow queue with shared parameters (as
//! `codel_impl.h` serves sch_codel and sch_fq_codel). Deviations from Linux: u64 ns time
//! instead of 1024-ns `codel_time_t`; the exact 1/√count instead of Newton-iterated
//! `rec_inv_sqrt` (which Linux refines by one step per drop, so the two agree within a few
//! percent on the first drops and converge quickly).

use crate::fifo::{fifo_accessors, Fifo};
use crate::{DropReason, MarkReason, Nanos, Packet, Qdisc, Verdicts};

/// The CoDel parameters (`struct codel_params`; defaults of `codel_params_init`).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(deny_unknown_fields, default))]
pub struct Params {
    /// Acceptable standing sojourn, ns (5 ms).
    pub target_ns: Nanos,
    /// Sliding window and control-law base, ns (100 ms).
    pub interval_ns: Nanos,
    /// No drop while at most this many bytes stay queued (Linux `psched_mtu`: 1514).
    pub mtu_bytes: u64,
    /// Mark ECT packets instead of dropping them.
    pub ecn: bool,
    /// Mark every ECT packet whose sojourn exceeds this, ns (None: off).
    pub ce_threshold_ns: Option<Nanos>,
    /// Packet limit of the queue (sch_codel: 1000).
    pub limit: u64,
}

impl Default for Params {
    fn default() -> Self {
        Params { target_ns: 5_000_000, interval_ns: 100_000_000, mtu_bytes: 1514, ecn: false, ce_threshold_ns: None, limit: 1000 }
    }
}

impl Params {
    pub fn validate(&self) -> Result<(), String> {
        if self.target_ns == 0 {
            return Err("target: must be positive".into());
        }
        if self.interval_ns == 0 {
            return Err("interval: must be positive".into());
        }
        if self.limit == 0 {
            return Err("limit: must be positive".into());
        }
        Ok(())
    }
}

/// `struct codel_vars`.
#[derive(Clone, Debug, Default)]
pub struct Vars {
    pub count: u32,
    pub lastcount: u32,
    pub dropping: bool,
    /// 0 = the sojourn is not above target.
    pub first_above_time: Nanos,
    pub drop_next: Nanos,
    /// Sojourn of the last dequeued packet.
    pub ldelay: Nanos,
}

/// `struct codel_stats` (tc -s names).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub drop_count: u64,
    pub ecn_mark: u64,
    pub ce_mark: u64,
    pub drop_overlimit: u64,
}

/// What the control law drains.
pub trait CodelQueue<P> {
    fn pop_head(&mut self) -> Option<P>;
    /// Bytes still queued (after the pops so far).
    fn backlog(&self) -> u64;
}

impl<P: Packet> CodelQueue<P> for Fifo<P> {
    fn pop_head(&mut self) -> Option<P> {
        self.pop()
    }
    fn backlog(&self) -> u64 {
        self.bytes()
    }
}

/// `t + interval/√count` (`codel_control_law`).
pub fn control_law(t: Nanos, interval_ns: Nanos, count: u32) -> Nanos {
    t + (interval_ns as f64 / (count.max(1) as f64).sqrt()) as Nanos
}

/// The CoDel control law state for one queue.
#[derive(Clone, Debug, Default)]
pub struct CodelLaw {
    pub vars: Vars,
    pub stats: Stats,
}

impl CodelLaw {
    /// `codel_should_drop`, for `pkt` just popped with `backlog` bytes left behind it.
    fn should_drop<P: Packet>(&mut self, pkt: Option<&P>, backlog: u64, now: Nanos, p: &Params) -> bool {
        let Some(pkt) = pkt else {
            self.vars.first_above_time = 0;
            return false;
        };
        self.vars.ldelay = now - pkt.enqueue_ns();
        if self.vars.ldelay < p.target_ns || backlog <= p.mtu_bytes {
            // Went below: stay below for at least an interval.
            self.vars.first_above_time = 0;
            return false;
        }
        if self.vars.first_above_time == 0 {
            // Just went above: if it stays above for an interval, it is ok to drop.
            self.vars.first_above_time = now + p.interval_ns;
            false
        } else {
            now > self.vars.first_above_time
        }
    }

    fn mark<P: Packet>(pkt: &mut P) -> bool {
        if pkt.ecn().is_ect_or_ce() {
            pkt.set_ce();
            true
        } else {
            false
        }
    }

    /// `codel_dequeue`: the next packet to send from `q`, after the drops the law decides.
    pub fn dequeue<P: Packet, Q: CodelQueue<P>>(&mut self, q: &mut Q, now: Nanos, p: &Params, out: &mut impl Verdicts<P>) -> Option<P> {
        let mut pkt = q.pop_head();
        if pkt.is_none() {
            self.vars.dropping = false;
            return None;
        }
        let mut drop = self.should_drop(pkt.as_ref(), q.backlog(), now, p);
        if self.vars.dropping {
            if !drop {
                // Sojourn below target: leave the dropping state.
                self.vars.dropping = false;
            } else if now >= self.vars.drop_next {
                // Time for the next drop; a large backlog may call for several now.
                while self.vars.dropping && now >= self.vars.drop_next {
                    self.vars.count += 1;
                    let cur = pkt.as_mut().expect("should_drop saw a packet");
                    if p.ecn && Self::mark(cur) {
                        self.stats.ecn_mark += 1;
                        out.marked(cur, MarkReason::Delay, now);
                        self.vars.drop_next = control_law(self.vars.drop_next, p.interval_ns, self.vars.count);
                        return self.ce_threshold(pkt, now, p, out);
                    }
                    self.stats.drop_count += 1;
                    out.dropped(pkt.take().expect("present"), DropReason::HeadDrop, now);
                    pkt = q.pop_head();
                    if !self.should_drop(pkt.as_ref(), q.backlog(), now, p) {
                        self.vars.dropping = false;
                    } else {
                        self.vars.drop_next = control_law(self.vars.drop_next, p.interval_ns, self.vars.count);
                    }
                }
            }
        } else if drop {
            let cur = pkt.as_mut().expect("should_drop saw a packet");
            if p.ecn && Self::mark(cur) {
                self.stats.ecn_mark += 1;
                out.marked(cur, MarkReason::Delay, now);
            } else {
                self.stats.drop_count += 1;
                out.dropped(pkt.take().expect("present"), DropReason::HeadDrop, now);
                pkt = q.pop_head();
                drop = self.should_drop(pkt.as_ref(), q.backlog(), now, p);
                let _ = drop;
            }
            self.vars.dropping = true;
            // Re-entering soon after the last cycle: start near its drop rate.
            let delta = self.vars.count.wrapping_sub(self.vars.lastcount);
            if delta > 1 && (now as i128 - self.vars.drop_next as i128) < 16 * p.interval_ns as i128 {
                self.vars.count = delta;
            } else {
                self.vars.count = 1;
            }
            self.vars.lastcount = self.vars.count;
            self.vars.drop_next = control_law(now, p.interval_ns, self.vars.count);
        }
        self.ce_threshold(pkt, now, p, out)
    }

    fn ce_threshold<P: Packet>(&mut self, mut pkt: Option<P>, now: Nanos, p: &Params, out: &mut impl Verdicts<P>) -> Option<P> {
        if let (Some(cur), Some(th)) = (pkt.as_mut(), p.ce_threshold_ns) {
            if self.vars.ldelay > th && cur.ecn() != crate::Ecn::Ce && Self::mark(cur) {
                self.stats.ce_mark += 1;
                out.marked(cur, MarkReason::Step, now);
            }
        }
        pkt
    }
}

#[derive(Clone, Debug)]
pub struct Codel<P> {
    pub params: Params,
    pub law: CodelLaw,
    queue: Fifo<P>,
}

impl<P: Packet> Codel<P> {
    pub fn new(params: Params) -> Self {
        Codel { params, law: CodelLaw::default(), queue: Fifo::default() }
    }
}

impl<P: Packet> Qdisc<P> for Codel<P> {
    fn enqueue(&mut self, mut pkt: P, now: Nanos, out: &mut impl Verdicts<P>) {
        if (self.queue.len() as u64) < self.params.limit {
            pkt.set_enqueue_ns(now);
            self.queue.push(pkt);
            return;
        }
        self.law.stats.drop_overlimit += 1;
        out.dropped(pkt, DropReason::Overflow, now);
    }

    fn dequeue(&mut self, now: Nanos, out: &mut impl Verdicts<P>) -> Option<P> {
        let params = self.params.clone();
        self.law.dequeue(&mut self.queue, now, &params, out)
    }

    fifo_accessors!();

    fn reset(&mut self) -> Vec<P> {
        self.law = CodelLaw::default();
        self.queue.drain()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{pkt, Recorder, TestPkt};
    use crate::Ecn;

    const MS: Nanos = 1_000_000;

    /// A standing queue: 400 packets enqueued at t = 0, dequeued one per ms afterwards.
    fn standing(ecn: bool) -> (Codel<TestPkt>, Recorder) {
        let mut q = Codel::new(Params { ecn, ..Params::default() });
        let mut r = Recorder::default();
        for i in 0..400 {
            q.enqueue(pkt(i, 1500, if ecn { Ecn::Ect0 } else { Ecn::NotEct }), 0, &mut r);
        }
        (q, r)
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
        assert!(r.marks.iter().all(|(p, w)| p.ecn == Ecn::Ce && *w == MarkReason::Delay));
    }

    #[test]
    fn count_is_reused_when_dropping_resumes_soon() {
        // A dropping episode reaches count 5; the queue drains below target, then builds up
        // again within 16 intervals: the new episode starts at count − lastcount = 5 − 1 = 4
        // (its first spacing is 100/√4 = 50 ms, not 100 ms).
        let mut law = CodelLaw::default();
        law.vars.count = 5;
        law.vars.lastcount = 1;
        law.vars.drop_next = 300 * MS;
        law.vars.first_above_time = 1;
        let p = Params::default();
        let mut fifo: Fifo<TestPkt> = Fifo::default();
        let mut r = Recorder::default();
        for i in 0..10 {
            let mut x = pkt(i, 1500, Ecn::NotEct);
            x.enqueued = 0;
            fifo.push(x);
        }
        law.dequeue(&mut fifo, 400 * MS, &p, &mut r);
        assert_eq!(law.vars.count, 4);
        assert_eq!(law.vars.drop_next, 450 * MS);
        assert_eq!(r.drops.len(), 1);
    }

    #[test]
    fn control_law_values() {
        assert_eq!(control_law(0, 100 * MS, 1), 100 * MS);
        assert_eq!(control_law(0, 100 * MS, 4), 50 * MS);
        assert_eq!(control_law(0, 100 * MS, 2), 70_710_678);
    }
}
