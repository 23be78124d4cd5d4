//! The CoDel control law shared by CoDel and FQ-CoDel (RFC 8289 §5), as Linux factors it
//! into include/net/codel.h and include/net/codel_impl.h.
//!
//! Sources: K. Nichols, V. Jacobson, "Controlling Queue Delay", ACM Queue 10(5), 2012;
//! RFC 8289 §3, §5; Linux include/net/codel.h (`struct codel_params`, `codel_vars`,
//! `codel_stats`, `codel_control_law`), include/net/codel_impl.h (`codel_params_init`,
//! `codel_should_drop`, `codel_dequeue`).
//!
//! [`dequeue`] is `codel_dequeue` line for line (the path of a packet that leaves with the
//! queue neither dropping nor starting to, nearly every packet, is [`dequeue`] itself, the
//! rest is out of line in `dequeue_dropping`): it pops the head of the queue it drains
//! ([`CodelQueue`]), and [`should_drop`] says whether the packet's sojourn has stayed at or
//! above `target` for more than `interval` while more than one MTU stays queued behind it. On
//! entering the dropping state the head is dropped (or CE-marked with `ecn`) and the count
//! restarts at 1 — or at `count − lastcount` if that is > 1 and the last drop time is less than
//! 16 intervals ago (the previous episode's rate is a good start); while dropping, a packet is
//! dropped every time `now ≥ drop_next`, `drop_next` advancing by `interval/√count`, several per
//! call if the schedule has fallen behind. `ce_threshold` sets CE on every ECT packet whose
//! sojourn exceeds it, whatever the state. Drops go to the sink as [`DropReason::HeadDrop`],
//! law marks as [`MarkReason::Delay`], `ce_threshold` marks as [`MarkReason::Step`].
//!
//! One [`Vars`] per queue, [`Params`] shared, [`Stats`] per qdisc: sch_codel has one of each;
//! sch_fq_codel has one `Vars` per flow queue and one `Params`/`Stats` for the qdisc, and passes
//! the *qdisc's* byte backlog to the MTU guard ([`CodelQueue::backlog`]).
//!
//! Deviations from Linux, each deliberate:
//! - Time is u64 ns since the start of the run, never wrapping, instead of the u32
//!   1024-ns `codel_time_t` with wrap-safe compares. The comparisons keep Linux's strictness:
//!   sojourn `<` target is below; drop when `now >` first_above_time; next drop when
//!   `now ≥ drop_next`; `now − drop_next < 16·interval` taken as a signed difference.
//! - `interval/√count` uses the exact f64 square root, not Linux's Q0.16 `rec_inv_sqrt`
//!   refined by one Newton step per count increment (`codel_Newton_step`). Linux's first steps
//!   are coarse — from 1/√1 one step gives 0.5 for count 2 (exact 0.707), then 0.5625 (0.577),
//!   0.488 (0.5) — so Linux's second and third drop come somewhat sooner than here; the
//!   iteration converges within a few drops.
//! - A CE packet counts as "marked" (Linux `INET_ECN_set_ce` returns true for CE) and is
//!   reported to the sink like any other mark.
//! - No per-call cap on the number of drops (mainline `codel_dequeue` has none).

use crate::fifo::Fifo;
use crate::{DropReason, Ecn, MarkReason, Nanos, Packet, Verdicts};

/// `struct codel_params` (defaults of `codel_params_init`, sch_codel's `mtu`).
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// Acceptable standing sojourn, ns (5 ms).
    pub target_ns: Nanos,
    /// Sliding-window width and control-law base, ns (100 ms).
    pub interval_ns: Nanos,
    /// No drop while at most this many bytes stay queued after the pop, bytes (Linux
    /// `psched_mtu(dev)`: 1514 for Ethernet).
    pub mtu_bytes: u64,
    /// CE-mark ECT packets instead of dropping them (off: sch_codel's default).
    pub ecn: bool,
    /// CE-mark every ECT packet whose sojourn exceeds this, ns (None: Linux's
    /// `CODEL_DISABLED_THRESHOLD`).
    pub ce_threshold_ns: Option<Nanos>,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            target_ns: 5_000_000,
            interval_ns: 100_000_000,
            mtu_bytes: 1514,
            ecn: false,
            ce_threshold_ns: None,
        }
    }
}

/// `struct codel_vars`: the control state of one queue (zero = `codel_vars_init`).
///
/// In C layout, the fields every dequeue touches first, those used only around drops after
/// them: FQ-CoDel embeds one `Vars` per flow in a cache-line record and keeps the first ones in
/// the line it reads anyway.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Vars {
    /// When the sojourn will have been above target for an interval, ns; 0 = not above.
    pub first_above_time: Nanos,
    /// Sojourn of the last packet `should_drop` looked at, ns.
    pub ldelay: Nanos,
    pub dropping: bool,
    /// Drops (or marks) in the current dropping episode, plus the reused part.
    pub count: u32,
    /// `count` when the last dropping episode started.
    pub lastcount: u32,
    /// Time of the next drop while dropping, ns.
    pub drop_next: Nanos,
}

/// `struct codel_stats` (tc -s names).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Largest packet seen at dequeue, bytes.
    pub maxpacket: u32,
    /// Packets dropped by the law.
    pub drop_count: u64,
    /// Bytes dropped by the law.
    pub drop_len: u64,
    /// Packets CE-marked instead of dropped.
    pub ecn_mark: u64,
    /// Packets CE-marked by `ce_threshold`.
    pub ce_mark: u64,
}

/// The queue the law drains (Linux's `dequeue_func` and `backlog` arguments).
pub trait CodelQueue<P> {
    /// Remove and return the head packet.
    fn pop_head(&mut self) -> Option<P>;
    /// Bytes still queued after the pops so far, as the MTU guard must see them (the whole
    /// qdisc's backlog in FQ-CoDel).
    fn backlog(&self) -> u64;
}

impl<P: Packet> CodelQueue<P> for Fifo<P> {
    #[inline]
    fn pop_head(&mut self) -> Option<P> {
        self.pop()
    }
    #[inline]
    fn backlog(&self) -> u64 {
        self.bytes()
    }
}

/// `codel_control_law`: `t + interval/√count` (count 0 is treated as 1).
#[inline]
pub fn control_law(t: Nanos, interval_ns: Nanos, count: u32) -> Nanos {
    t + (interval_ns as f64 / (count.max(1) as f64).sqrt()) as Nanos
}

/// `codel_should_drop`, for `pkt` just popped with `backlog` bytes left queued.
pub fn should_drop<P: Packet>(
    pkt: Option<&P>,
    backlog: u64,
    now: Nanos,
    p: &Params,
    vars: &mut Vars,
    stats: &mut Stats,
) -> bool {
    let Some(pkt) = pkt else {
        vars.first_above_time = 0;
        return false;
    };
    vars.ldelay = now.saturating_sub(pkt.enqueue_ns());
    stats.maxpacket = stats.maxpacket.max(pkt.wire_len());
    if vars.ldelay < p.target_ns || backlog <= p.mtu_bytes {
        // Went below: stay below for at least an interval.
        vars.first_above_time = 0;
        return false;
    }
    if vars.first_above_time == 0 {
        // Just went above from below: if it stays above for an interval, it is ok to drop.
        vars.first_above_time = now + p.interval_ns;
        false
    } else {
        now > vars.first_above_time
    }
}

/// `INET_ECN_set_ce`: set CE on an ECT packet; true for ECT and CE packets.
#[inline]
fn set_ce<P: Packet>(pkt: &mut P) -> bool {
    if pkt.ecn().is_ect_or_ce() {
        pkt.set_ce();
        true
    } else {
        false
    }
}

/// `codel_dequeue`: the next packet to send from `q`, after the drops and marks the law
/// decides.
#[inline]
pub fn dequeue<P: Packet, Q: CodelQueue<P>>(
    q: &mut Q,
    now: Nanos,
    p: &Params,
    vars: &mut Vars,
    stats: &mut Stats,
    out: &mut impl Verdicts<P>,
) -> Option<P> {
    let Some(mut pkt) = q.pop_head() else {
        vars.dropping = false;
        return None;
    };
    let drop = should_drop(Some(&pkt), q.backlog(), now, p, vars, stats);
    if vars.dropping || drop {
        return dequeue_dropping(q, pkt, drop, now, p, vars, stats, out);
    }
    // Neither dropping nor a reason to start: the packet leaves (the path of nearly every
    // packet, kept apart so that it holds the packet itself, not an `Option` of it).
    ce_threshold(&mut pkt, now, p, vars, stats, out);
    Some(pkt)
}

/// The rest of `codel_dequeue` for `pkt`, just popped, whose `should_drop` verdict was `drop`,
/// while the queue is in the dropping state or `drop` is true. Out of line: most packets never
/// come here, and [`dequeue`] stays small where it is inlined.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub fn dequeue_dropping<P: Packet, Q: CodelQueue<P>>(
    q: &mut Q,
    pkt: P,
    drop: bool,
    now: Nanos,
    p: &Params,
    vars: &mut Vars,
    stats: &mut Stats,
    out: &mut impl Verdicts<P>,
) -> Option<P> {
    let mut pkt = Some(pkt);
    if vars.dropping {
        if !drop {
            // Sojourn below target: leave the dropping state.
            vars.dropping = false;
        } else if now >= vars.drop_next {
            // Time for the next drop. Drop the current packet and pop the next, which may take
            // us out of the dropping state; a large backlog may call for several drops now.
            while vars.dropping && now >= vars.drop_next {
                vars.count = vars.count.wrapping_add(1);
                let cur = pkt.as_mut().expect("should_drop saw a packet");
                if p.ecn && set_ce(cur) {
                    stats.ecn_mark += 1;
                    out.marked(cur, MarkReason::Delay, now);
                    vars.drop_next = control_law(vars.drop_next, p.interval_ns, vars.count);
                    ce_threshold(cur, now, p, vars, stats, out);
                    return pkt;
                }
                let victim = pkt.take().expect("present");
                stats.drop_len += victim.wire_len() as u64;
                stats.drop_count += 1;
                out.dropped(victim, DropReason::HeadDrop, now);
                pkt = q.pop_head();
                if !should_drop(pkt.as_ref(), q.backlog(), now, p, vars, stats) {
                    vars.dropping = false;
                } else {
                    vars.drop_next = control_law(vars.drop_next, p.interval_ns, vars.count);
                }
            }
        }
    } else if drop {
        let cur = pkt.as_mut().expect("should_drop saw a packet");
        if p.ecn && set_ce(cur) {
            stats.ecn_mark += 1;
            out.marked(cur, MarkReason::Delay, now);
        } else {
            let victim = pkt.take().expect("present");
            stats.drop_len += victim.wire_len() as u64;
            stats.drop_count += 1;
            out.dropped(victim, DropReason::HeadDrop, now);
            pkt = q.pop_head();
            // Linux re-evaluates (for first_above_time/ldelay) and ignores the result.
            should_drop(pkt.as_ref(), q.backlog(), now, p, vars, stats);
        }
        vars.dropping = true;
        // If the sojourn went above target soon after the last episode, its drop rate is a
        // good starting point now.
        let delta = vars.count.wrapping_sub(vars.lastcount);
        if delta > 1 && (now as i128 - vars.drop_next as i128) < 16 * p.interval_ns as i128 {
            vars.count = delta;
        } else {
            vars.count = 1;
        }
        vars.lastcount = vars.count;
        vars.drop_next = control_law(now, p.interval_ns, vars.count);
    }
    if let Some(cur) = pkt.as_mut() {
        ce_threshold(cur, now, p, vars, stats, out);
    }
    pkt
}

/// The `end:` label of `codel_dequeue`: CE above `ce_threshold` (no selector: every packet).
#[inline]
pub fn ce_threshold<P: Packet>(
    cur: &mut P,
    now: Nanos,
    p: &Params,
    vars: &Vars,
    stats: &mut Stats,
    out: &mut impl Verdicts<P>,
) {
    if let Some(th) = p.ce_threshold_ns {
        if vars.ldelay > th && set_ce(cur) {
            stats.ce_mark += 1;
            debug_assert_eq!(cur.ecn(), Ecn::Ce);
            out.marked(cur, MarkReason::Step, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{pkt, Recorder, TestPkt};

    const MS: Nanos = 1_000_000;

    fn push(q: &mut Fifo<TestPkt>, n: usize, at: Nanos, ecn: Ecn) {
        for i in 0..n {
            let mut x = pkt(i as u64, 1500, ecn);
            x.enqueued = at;
            q.push(x);
        }
    }

    /// Dequeue once per ms over `ms` (inclusive), returning the ms of every drop.
    fn drain(
        q: &mut Fifo<TestPkt>,
        ms: std::ops::RangeInclusive<u64>,
        p: &Params,
        v: &mut Vars,
        s: &mut Stats,
        r: &mut Recorder,
    ) -> Vec<u64> {
        let mut at = vec![];
        for t in ms {
            let before = r.drops.len();
            dequeue(q, t * MS, p, v, s, r);
            if r.drops.len() > before {
                at.push(t);
            }
        }
        at
    }

    #[test]
    fn control_law_values() {
        // 100/√1 = 100 ms, 100/√4 = 50 ms, 100/√2 = 70.710678… ms (truncated to ns).
        assert_eq!(control_law(0, 100 * MS, 1), 100 * MS);
        assert_eq!(control_law(7, 100 * MS, 4), 7 + 50 * MS);
        assert_eq!(control_law(0, 100 * MS, 2), 70_710_678);
        assert_eq!(control_law(0, 100 * MS, 0), 100 * MS);
    }

    #[test]
    fn standing_queue_drop_schedule() {
        // 400 packets of 1500 B queued at t = 0, one dequeue per ms from 1 ms. Sojourn reaches
        // target (5 ms) at the 5 ms dequeue: first_above = 105 ms. First drop at the first
        // dequeue strictly after 105 ms: 106 ms (count 1, drop_next = 206). Then:
        // 206 (count 2, next 206 + 100/√2 = 276.71), 277 (count 3, next 276.71 + 57.74 =
        // 334.45), 335 (count 4, next 334.45 + 50 = 384.45), 385 (count 5, next 384.45 +
        // 44.72 = 429.17).
        let p = Params::default();
        let (mut v, mut s, mut r) = (Vars::default(), Stats::default(), Recorder::default());
        let mut q = Fifo::default();
        push(&mut q, 400, 0, Ecn::NotEct);
        let at = drain(&mut q, 1..=385, &p, &mut v, &mut s, &mut r);
        assert_eq!(at, vec![106, 206, 277, 335, 385]);
        assert_eq!((v.count, v.lastcount), (5, 1));
        assert!(v.dropping);
        // 384.4457 + 100/√5 = 384.4457 + 44.7214 = 429.167 ms.
        assert!(
            (429_160_000..429_175_000).contains(&v.drop_next),
            "{}",
            v.drop_next
        );
        assert_eq!(s.drop_count, 5);
        assert_eq!(s.drop_len, 7500);
        assert_eq!(s.maxpacket, 1500);
        assert!(r.drops.iter().all(|(_, w)| *w == DropReason::HeadDrop));
        // 385 dequeues + 5 drops used 390 packets; the last 10 leave at 386..=395 (no drop is
        // due before 429 ms), and the last pop leaves 0 B ≤ one MTU: the episode ends.
        assert!(drain(&mut q, 386..=395, &p, &mut v, &mut s, &mut r).is_empty());
        assert!(q.is_empty());
        assert!(!v.dropping);
    }

    /// The first episode of `standing_queue_drop_schedule` (count 5, lastcount 1, drop_next
    /// 429.17 ms), then fresh packets queued at `at` ms dequeued one per ms.
    fn reenter(at: u64) -> Vec<u64> {
        let p = Params::default();
        let (mut v, mut s, mut r) = (Vars::default(), Stats::default(), Recorder::default());
        let mut q = Fifo::default();
        push(&mut q, 400, 0, Ecn::NotEct);
        assert_eq!(
            drain(&mut q, 1..=385, &p, &mut v, &mut s, &mut r),
            vec![106, 206, 277, 335, 385]
        );
        q.drain();
        push(&mut q, 300, at * MS, Ecn::NotEct);
        drain(&mut q, at + 1..=at + 250, &p, &mut v, &mut s, &mut r)
    }

    #[test]
    fn count_is_reused_when_dropping_resumes_soon() {
        // New packets at 386 ms: the 387 ms dequeue sees sojourn 1 ms < target and leaves the
        // dropping state. Sojourn reaches 5 ms at 391 ms: first_above = 491; first drop at
        // 492 ms. delta = count − lastcount = 5 − 1 = 4 > 1 and 492 − 429.17 < 1600 ms, so
        // count = 4 and drop_next = 492 + 100/√4 = 542; then count 5: 542 + 44.72 = 586.72 →
        // drop at 587; count 6: 586.72 + 40.82 = 627.54 → drop at 628 (window ends at 636).
        assert_eq!(reenter(386), vec![492, 542, 587, 628]);
    }

    #[test]
    fn count_restarts_at_one_after_a_long_pause() {
        // New packets at 2100 ms: first drop at 2100 + 5 + 100 + 1 = 2206 ms; 2206 − 429.17 ≥
        // 16·100 ms, so count = 1 (drop_next 2306, not the reused rate's 2206 + 50); count 2
        // at 2306 → next 2306 + 70.71 = 2376.71, beyond the window (2101..=2350).
        assert_eq!(reenter(2100), vec![2206, 2306]);
    }

    #[test]
    fn no_drops_below_target() {
        // Sojourn 4 ms < 5 ms forever, with a large backlog.
        let p = Params::default();
        let (mut v, mut s, mut r) = (Vars::default(), Stats::default(), Recorder::default());
        let mut q = Fifo::default();
        for t in 0..2000u64 {
            push(&mut q, 1, t * MS, Ecn::NotEct);
            if t >= 4 {
                let x = dequeue(&mut q, t * MS, &p, &mut v, &mut s, &mut r).unwrap();
                assert_eq!(t * MS - x.enqueued, 4 * MS);
            }
        }
        assert!(r.drops.is_empty());
        assert_eq!(v.first_above_time, 0);
    }

    #[test]
    fn no_drops_while_at_most_one_mtu_stays_queued() {
        // One arrival and one dequeue every 100 ms around a standing queue of 2 packets:
        // sojourn ≥ 100 ms ≫ target, but after each pop 1500 B ≤ 1514 B stay queued, so CoDel
        // never drops. With 3 packets (3000 B left) it does: the dequeue at 100 ms sets
        // first_above = 200 ms, the one at 200 ms is not strictly after it, the one at 300 ms
        // drops.
        for (standing, expect_drops) in [(2usize, false), (3, true)] {
            let p = Params::default();
            let (mut v, mut s, mut r) = (Vars::default(), Stats::default(), Recorder::default());
            let mut q = Fifo::default();
            push(&mut q, standing - 1, 0, Ecn::NotEct);
            for t in 1..=20u64 {
                push(&mut q, 1, t * 100 * MS, Ecn::NotEct);
                dequeue(&mut q, t * 100 * MS, &p, &mut v, &mut s, &mut r);
            }
            assert_eq!(
                !r.drops.is_empty(),
                expect_drops,
                "standing queue of {standing}"
            );
        }
    }

    #[test]
    fn ecn_marks_ect_packets_and_drops_not_ect() {
        // Same schedule as the drop test: marks at 106, 206, 277, 335, 385 ms, no drops; the
        // marked packet is the one sent (5 marks, 385 packets sent by 385 ms).
        let p = Params {
            ecn: true,
            ..Params::default()
        };
        let (mut v, mut s, mut r) = (Vars::default(), Stats::default(), Recorder::default());
        let mut q = Fifo::default();
        push(&mut q, 400, 0, Ecn::Ect0);
        let mut marked_at = vec![];
        for t in 1..=390u64 {
            let x = dequeue(&mut q, t * MS, &p, &mut v, &mut s, &mut r).unwrap();
            if x.ecn == Ecn::Ce {
                marked_at.push(t);
            }
        }
        assert!(r.drops.is_empty());
        assert_eq!(marked_at, vec![106, 206, 277, 335, 385]);
        assert_eq!(s.ecn_mark, 5);
        assert!(r
            .marks
            .iter()
            .all(|(x, w)| x.ecn == Ecn::Ce && *w == MarkReason::Delay));
        // With ecn on, Not-ECT packets are still dropped.
        let (mut v, mut s, mut r) = (Vars::default(), Stats::default(), Recorder::default());
        let mut q = Fifo::default();
        push(&mut q, 400, 0, Ecn::NotEct);
        assert_eq!(
            drain(&mut q, 1..=390, &p, &mut v, &mut s, &mut r),
            vec![106, 206, 277, 335, 385]
        );
        assert!(r.marks.is_empty());
    }

    #[test]
    fn ce_threshold_marks_every_ect_packet_above_it() {
        // ce_threshold 2 ms, target 5 ms: packets with sojourn 1, 2, 3, 4 ms → only 3 and 4
        // (strictly above 2) are marked, Not-ECT never; no law drop (sojourn < target).
        let p = Params {
            ce_threshold_ns: Some(2 * MS),
            ..Params::default()
        };
        let (mut v, mut s, mut r) = (Vars::default(), Stats::default(), Recorder::default());
        let mut ce = vec![];
        for (i, ecn) in [Ecn::Ect1, Ecn::Ect1, Ecn::Ect1, Ecn::Ect1, Ecn::NotEct]
            .into_iter()
            .enumerate()
        {
            let mut q = Fifo::default();
            push(&mut q, 3, 0, ecn);
            let x = dequeue(&mut q, (i as u64 + 1) * MS, &p, &mut v, &mut s, &mut r).unwrap();
            ce.push(x.ecn == Ecn::Ce);
        }
        assert_eq!(ce, vec![false, false, true, true, false]);
        assert_eq!(s.ce_mark, 2);
        assert!(r.marks.iter().all(|(_, w)| *w == MarkReason::Step));
        assert!(r.drops.is_empty());
    }
}
