//! The event queue: integer-nanosecond time, a closed set of events, ties broken FIFO.
//!
//! Events are ordered by `(time, seq)` where `seq` increases with every `schedule` call, so
//! events scheduled for the same instant run in the order they were scheduled, and a run is
//! a pure function of the scenario and seed (dslab-core's `event.rs` ordering). Scheduling
//! into the past is a bug and panics.
//!
//! The queue stays small by construction: links and delay lines are FIFOs whose *head* alone
//! is scheduled (see [`crate::net`]), and each timer slot of a host keeps at most one live
//! entry ([`TimerSlot`]), so a heap of a few hundred entries serves millions of packets.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Nanoseconds since the start of the run.
pub type Nanos = u64;

/// Every kind of event the simulator knows (no `Box<dyn>`: the set is closed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Flow `u32` opens and starts sending.
    FlowStart(u32),
    /// Flow `u32`'s application stops writing (a scheduled stop; a CBR flow stops sending).
    FlowStop(u32),
    /// The bottleneck link finished serializing its current packet.
    LinkTxDone(u32),
    /// The head packet of delay line `u32` reaches the end of the line.
    DelayLineHead(u32),
    /// The sender of flow `u32`: retransmission-timer slot (RTO, tail-loss probe, RACK
    /// reordering timeout — one slot, as Linux's `icsk_retransmit_timer`).
    SenderTimer(u32),
    /// The sender of flow `u32` may send again (internal pacing, Linux's pacing hrtimer).
    PacingTimer(u32),
    /// The receiver of flow `u32`: delayed-ACK timer (Linux `icsk_delack_timer`).
    AckTimer(u32),
    /// The receiver of flow `u32`: compressed-SACK timer (Linux `compressed_ack_timer`).
    CompSackTimer(u32),
    /// Take a time-series sample.
    Sample,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    at: Nanos,
    seq: u64,
    event: Event,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at && self.seq == other.seq
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    // BinaryHeap is a max-heap: invert so the earliest (time, seq) pops first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// The scheduler: current time and pending events.
#[derive(Debug, Default)]
pub struct Scheduler {
    now: Nanos,
    next_seq: u64,
    heap: BinaryHeap<Entry>,
    /// Events popped so far (a benchmark figure).
    pub events_run: u64,
}

impl Scheduler {
    pub fn new() -> Self {
        Scheduler { now: 0, next_seq: 0, heap: BinaryHeap::with_capacity(1024), events_run: 0 }
    }

    #[inline]
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Schedule `event` at absolute time `at` (≥ now).
    #[inline]
    pub fn schedule(&mut self, at: Nanos, event: Event) {
        assert!(at >= self.now, "event {event:?} scheduled in the past ({at} < {})", self.now);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Entry { at, seq, event });
    }

    /// Pop the next event if it is due at or before `until`, advancing the clock to it.
    #[inline]
    pub fn pop_until(&mut self, until: Nanos) -> Option<(Nanos, Event)> {
        match self.heap.peek() {
            Some(e) if e.at <= until => {
                let e = self.heap.pop().expect("peeked");
                self.now = e.at;
                self.events_run += 1;
                Some((e.at, e.event))
            }
            _ => None,
        }
    }

    /// Move the clock forward to `t` (no event may be pending before it).
    pub fn advance_to(&mut self, t: Nanos) {
        debug_assert!(self.heap.peek().is_none_or(|e| e.at >= t));
        if t > self.now {
            self.now = t;
        }
    }

    pub fn pending(&self) -> usize {
        self.heap.len()
    }
}

/// A host timer that can be re-armed cheaply and often (the RTO is re-armed on nearly every
/// ACK). The slot keeps the wanted deadline; the heap holds at most one entry we track
/// (`queued_at`). Re-arming *later* pushes nothing: when the early entry fires, the owner sees
/// the deadline has moved ([`TimerSlot::on_fire`] returns false) and the entry is re-queued at
/// the new deadline. Re-arming *earlier* pushes a new entry; the older one goes stale and is
/// recognised by the same check. Every firing compares against the current deadline, so a
/// stale entry can never fire a timer.
#[derive(Clone, Copy, Debug, Default)]
pub struct TimerSlot {
    deadline: Option<Nanos>,
    queued_at: Option<Nanos>,
}

impl TimerSlot {
    #[inline]
    pub fn deadline(&self) -> Option<Nanos> {
        self.deadline
    }

    #[inline]
    pub fn is_armed(&self) -> bool {
        self.deadline.is_some()
    }

    /// Arm (or re-arm) the timer for `at`.
    #[inline]
    pub fn arm(&mut self, sched: &mut Scheduler, at: Nanos, event: Event) {
        self.deadline = Some(at);
        if self.queued_at.is_none_or(|q| at < q) {
            sched.schedule(at, event);
            self.queued_at = Some(at);
        }
    }

    #[inline]
    pub fn disarm(&mut self) {
        self.deadline = None;
    }

    /// Called when a heap entry of this slot fires at `now`. Returns true if the timer is due
    /// (and disarms it); otherwise re-queues it at its deadline if needed.
    #[inline]
    pub fn on_fire(&mut self, sched: &mut Scheduler, now: Nanos, event: Event) -> bool {
        if self.queued_at == Some(now) {
            self.queued_at = None;
        }
        match self.deadline {
            Some(d) if d <= now => {
                self.deadline = None;
                true
            }
            Some(d) => {
                if self.queued_at.is_none_or(|q| d < q) {
                    sched.schedule(d, event);
                    self.queued_at = Some(d);
                }
                false
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simultaneous_events_run_in_scheduling_order() {
        let mut s = Scheduler::new();
        s.schedule(10, Event::Sample);
        s.schedule(5, Event::FlowStart(2));
        s.schedule(10, Event::FlowStart(0));
        s.schedule(10, Event::FlowStart(1));
        let order: Vec<_> = std::iter::from_fn(|| s.pop_until(u64::MAX)).collect();
        assert_eq!(
            order,
            vec![
                (5, Event::FlowStart(2)),
                (10, Event::Sample),
                (10, Event::FlowStart(0)),
                (10, Event::FlowStart(1))
            ]
        );
    }

    #[test]
    #[should_panic(expected = "in the past")]
    fn scheduling_into_the_past_panics() {
        let mut s = Scheduler::new();
        s.schedule(10, Event::Sample);
        s.pop_until(u64::MAX);
        s.schedule(9, Event::Sample);
    }

    #[test]
    fn pop_until_respects_the_horizon() {
        let mut s = Scheduler::new();
        s.schedule(10, Event::Sample);
        assert_eq!(s.pop_until(9), None);
        assert_eq!(s.pop_until(10), Some((10, Event::Sample)));
    }

    #[test]
    fn timer_slot_rearmed_later_fires_once_at_the_new_deadline() {
        let mut s = Scheduler::new();
        let mut t = TimerSlot::default();
        let ev = Event::SenderTimer(0);
        t.arm(&mut s, 100, ev);
        t.arm(&mut s, 300, ev); // later: no new heap entry
        assert_eq!(s.pending(), 1);
        let mut fired = vec![];
        while let Some((now, e)) = s.pop_until(u64::MAX) {
            if t.on_fire(&mut s, now, e) {
                fired.push(now);
            }
        }
        assert_eq!(fired, vec![300]);
    }

    #[test]
    fn timer_slot_rearmed_earlier_and_disarmed() {
        let mut s = Scheduler::new();
        let mut t = TimerSlot::default();
        let ev = Event::SenderTimer(0);
        t.arm(&mut s, 300, ev);
        t.arm(&mut s, 100, ev); // earlier: new entry, the 300 one goes stale
        let mut fired = vec![];
        while let Some((now, e)) = s.pop_until(u64::MAX) {
            if t.on_fire(&mut s, now, e) {
                fired.push(now);
            }
        }
        assert_eq!(fired, vec![100]);
        t.arm(&mut s, 400, ev);
        t.disarm();
        while let Some((now, e)) = s.pop_until(u64::MAX) {
            assert!(!t.on_fire(&mut s, now, e));
        }
    }
}
