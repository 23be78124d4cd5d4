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
//!
//! Those FIFO heads are most of the events (≈ 2.5 per bottleneck packet: the link's
//! `LinkTxDone`, the forward and reverse lines' `DelayLineHead`s), so they do not go through
//! the heap at all: each FIFO channel has one slot beside it ([`Scheduler::schedule_head`]),
//! and a pop takes the earlier of the heap's top and the earliest slot. The heap is left with
//! the hosts' timers, which are re-armed far less often than packets move. Heads take their
//! `seq` from the same counter as heap entries, so the order of events — `(time, seq)`, one
//! total order over both — is exactly what one heap would give.
//!
//! Linux hosts (`[host]` without `ideal`) add an event per packet (its NIC's `NicTxDone`) and
//! one per GRO poll, each microseconds ahead. In the timers' heap — a few entries per flow,
//! mostly RTOs and delayed ACKs far ahead — each would pay a sift through all its levels, the
//! largest part of what Linux hosts add (bench/README.md, "The host model"). They have a heap
//! of their own ([`Scheduler::schedule`] sorts by kind), which holds one entry per busy NIC or
//! pending poll, a few at a time; a pop takes the earliest of the three stores by the same
//! `(time, seq)`, so the order of events is still the one heap's.

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
    /// The NIC of flow `u32`'s sender host finished putting a packet on the wire.
    NicTxDone(u32),
    /// The receiver host of flow `u32` polls its NIC (GRO).
    GroPoll(u32),
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
impl Entry {
    /// The entry's `(time, seq)` as one number, as the FIFO heads' ([`key`]).
    #[inline]
    fn key(&self) -> u128 {
        key(self.at, self.seq)
    }

    /// Whether `self` runs before `other`.
    #[inline]
    fn before(&self, other: &Entry) -> bool {
        self.key() < other.key()
    }
}
/// Bytes of one event-heap entry (for the run's memory estimate, [`crate::estimate`]).
pub const ENTRY_BYTES: usize = std::mem::size_of::<Entry>();

// BinaryHeap is a max-heap: invert so the earliest (time, seq) pops first. The comparison
// operators are spelled out because the heap's sift loops use them directly (the default
// ones go through `partial_cmp` and an `Option<Ordering>`).
impl PartialOrd for Entry {
    #[inline]
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
    #[inline]
    fn lt(&self, other: &Self) -> bool {
        other.before(self)
    }
    #[inline]
    fn le(&self, other: &Self) -> bool {
        !self.before(other)
    }
    #[inline]
    fn gt(&self, other: &Self) -> bool {
        self.before(other)
    }
    #[inline]
    fn ge(&self, other: &Self) -> bool {
        !other.before(self)
    }
}
impl Ord for Entry {
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        other.key().cmp(&self.key())
    }
}

/// The scheduler: current time and pending events.
#[derive(Debug, Default)]
pub struct Scheduler {
    now: Nanos,
    next_seq: u64,
    /// The hosts' timers, and the runs' starts, stops and samples.
    heap: BinaryHeap<Entry>,
    /// The Linux hosts' NIC completions and GRO polls (see the module's doc).
    host_heap: BinaryHeap<Entry>,
    /// Dense slot of each FIFO channel (`u32::MAX` until the channel is first used), indexed
    /// by [`Scheduler::channel`].
    slot_of: Vec<u32>,
    /// Per slot, the pending head's `(time, seq)` as one number (`key`), `EMPTY` if none,
    /// and its event. Dense and keyed so that finding the earliest is a branch-free scan of
    /// a few words (the slot count is the number of links and lines in use).
    head_key: Vec<u128>,
    head_event: Vec<Event>,
    /// The slot holding the earliest head (meaningless while `first_key` is `EMPTY`).
    first: usize,
    first_key: u128,
    /// Events popped so far (a benchmark figure).
    pub events_run: u64,
}

/// `(time, seq)` as one number, ordered as the pair: time in the high 64 bits.
#[inline]
fn key(at: Nanos, seq: u64) -> u128 {
    ((at as u128) << 64) | seq as u128
}

/// No pending head (no real key reaches it: seq never reaches u64::MAX).
const EMPTY: u128 = u128::MAX;

impl Scheduler {
    pub fn new() -> Self {
        Scheduler {
            now: 0,
            next_seq: 0,
            heap: BinaryHeap::with_capacity(1024),
            host_heap: BinaryHeap::new(),
            slot_of: Vec::new(),
            head_key: Vec::new(),
            head_event: Vec::new(),
            first: 0,
            first_key: EMPTY,
            events_run: 0,
        }
    }

    /// The channel of a FIFO head event: links even, delay lines odd.
    #[inline]
    fn channel(event: Event) -> usize {
        match event {
            Event::LinkTxDone(id) => 2 * id as usize,
            Event::DelayLineHead(id) => 2 * id as usize + 1,
            other => panic!("{other:?} is not the head event of a FIFO channel"),
        }
    }

    /// Schedule the head event of a FIFO channel — `LinkTxDone(link)` or
    /// `DelayLineHead(line)` — at `at` (≥ now). A channel has at most one pending head (the
    /// link serializes one packet at a time; a delay line schedules its oldest packet only):
    /// scheduling a second is a bug and panics. Ordered with every other event by
    /// `(time, seq)`, as [`Scheduler::schedule`].
    #[inline]
    pub fn schedule_head(&mut self, at: Nanos, event: Event) {
        assert!(
            at >= self.now,
            "event {event:?} scheduled in the past ({at} < {})",
            self.now
        );
        let ch = Self::channel(event);
        let slot = match self.slot_of.get(ch) {
            Some(&s) if s != u32::MAX => s as usize,
            _ => self.new_slot(ch),
        };
        let k = key(at, self.next_seq);
        self.next_seq += 1;
        assert!(
            self.head_key[slot] == EMPTY,
            "{event:?}: its channel already has a pending head"
        );
        self.head_key[slot] = k;
        self.head_event[slot] = event;
        if k < self.first_key {
            self.first = slot;
            self.first_key = k;
        }
    }

    /// Give channel `ch` a slot (its first use).
    #[cold]
    fn new_slot(&mut self, ch: usize) -> usize {
        if ch >= self.slot_of.len() {
            self.slot_of.resize(ch + 1, u32::MAX);
        }
        let slot = self.head_key.len();
        self.slot_of[ch] = slot as u32;
        self.head_key.push(EMPTY);
        self.head_event.push(Event::Sample);
        slot
    }

    /// The earliest pending head, found again after one was taken.
    #[inline]
    fn find_first_head(&mut self) {
        let (mut best, mut first) = (EMPTY, 0);
        for (i, &k) in self.head_key.iter().enumerate() {
            let earlier = k < best;
            best = if earlier { k } else { best };
            first = if earlier { i } else { first };
        }
        self.first_key = best;
        self.first = first;
    }

    #[inline]
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Schedule `event` at absolute time `at` (≥ now).
    #[inline]
    pub fn schedule(&mut self, at: Nanos, event: Event) {
        assert!(
            at >= self.now,
            "event {event:?} scheduled in the past ({at} < {})",
            self.now
        );
        let seq = self.next_seq;
        self.next_seq += 1;
        let heap = match event {
            Event::NicTxDone(_) | Event::GroPoll(_) => &mut self.host_heap,
            _ => &mut self.heap,
        };
        heap.push(Entry { at, seq, event });
    }

    /// Pop the next event if it is due at or before `until`, advancing the clock to it.
    #[inline]
    pub fn pop_until(&mut self, until: Nanos) -> Option<(Nanos, Event)> {
        // The earlier of the two heaps' tops (with ideal hosts the hosts' heap stays empty).
        let timer_key = self.heap.peek().map_or(EMPTY, Entry::key);
        let (heap, heap_key) = match self.host_heap.peek().map(Entry::key) {
            Some(k) if k < timer_key => (&mut self.host_heap, k),
            _ => (&mut self.heap, timer_key),
        };
        let (at, event) = if self.first_key < heap_key {
            let at = (self.first_key >> 64) as Nanos;
            if at > until {
                return None;
            }
            let event = self.head_event[self.first];
            self.head_key[self.first] = EMPTY;
            self.find_first_head();
            (at, event)
        } else {
            match heap.peek() {
                Some(t) if t.at <= until => {
                    let e = heap.pop().expect("peeked");
                    (e.at, e.event)
                }
                _ => return None,
            }
        };
        self.now = at;
        self.events_run += 1;
        Some((at, event))
    }

    /// Move the clock forward to `t` (no event may be pending before it).
    pub fn advance_to(&mut self, t: Nanos) {
        debug_assert!(self
            .heap
            .peek()
            .into_iter()
            .chain(self.host_heap.peek())
            .all(|e| e.at >= t));
        debug_assert!(self
            .head_key
            .iter()
            .all(|&k| k == EMPTY || (k >> 64) as Nanos >= t));
        if t > self.now {
            self.now = t;
        }
    }

    pub fn pending(&self) -> usize {
        self.heap.len()
            + self.host_heap.len()
            + self.head_key.iter().filter(|&&k| k != EMPTY).count()
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
        if self.queued_at.map_or(true, |q| at < q) {
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
        // An entry fires at its time, or later when a host stall held it back (world::dispatch).
        if self.queued_at.is_some_and(|q| q <= now) {
            self.queued_at = None;
        }
        match self.deadline {
            Some(d) if d <= now => {
                self.deadline = None;
                true
            }
            Some(d) => {
                if self.queued_at.map_or(true, |q| d < q) {
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
    fn a_timer_held_back_by_a_stall_fires_late_and_can_be_armed_again() {
        // Armed for 10; the world holds its entry back to 25 (a host stall); it fires there,
        // and arming it again for 40 queues a new entry.
        let mut s = Scheduler::new();
        let mut t = TimerSlot::default();
        t.arm(&mut s, 10, Event::PacingTimer(0));
        assert_eq!(s.pop_until(u64::MAX), Some((10, Event::PacingTimer(0))));
        s.schedule(25, Event::PacingTimer(0));
        assert_eq!(s.pop_until(u64::MAX), Some((25, Event::PacingTimer(0))));
        assert!(t.on_fire(&mut s, 25, Event::PacingTimer(0)));
        t.arm(&mut s, 40, Event::PacingTimer(0));
        assert_eq!(s.pop_until(u64::MAX), Some((40, Event::PacingTimer(0))));
        assert!(t.on_fire(&mut s, 40, Event::PacingTimer(0)));
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
    fn fifo_heads_and_heap_entries_share_one_order() {
        // Same instant: a heap entry scheduled before a head runs before it, and after it
        // runs after it (FIFO ties across the two stores).
        let mut s = Scheduler::new();
        s.schedule(10, Event::Sample);
        s.schedule_head(10, Event::LinkTxDone(0));
        s.schedule(10, Event::FlowStart(1));
        s.schedule_head(5, Event::DelayLineHead(3));
        s.schedule_head(10, Event::DelayLineHead(0));
        assert_eq!(s.pending(), 5);
        let order: Vec<_> = std::iter::from_fn(|| s.pop_until(u64::MAX)).collect();
        assert_eq!(
            order,
            vec![
                (5, Event::DelayLineHead(3)),
                (10, Event::Sample),
                (10, Event::LinkTxDone(0)),
                (10, Event::FlowStart(1)),
                (10, Event::DelayLineHead(0)),
            ]
        );
    }

    #[test]
    #[should_panic(expected = "already has a pending head")]
    fn a_second_pending_head_on_one_channel_panics() {
        let mut s = Scheduler::new();
        s.schedule_head(10, Event::DelayLineHead(1));
        s.schedule_head(20, Event::DelayLineHead(1));
    }

    proptest::proptest! {
        /// Whatever mix of heap entries and FIFO heads is scheduled, events pop in the order
        /// of the definition — (time, scheduling order) — as a plain sorted list gives it.
        #[test]
        fn pops_follow_time_then_scheduling_order(ops in proptest::collection::vec((0u8..4, 0u64..50, 0u32..4), 1..300)) {
            let mut s = Scheduler::new();
            let mut reference: Vec<(Nanos, u64, Event)> = Vec::new();
            let mut n = 0u64;
            let mut busy = [false; 8];
            for (op, dt, id) in ops {
                let now = s.now();
                match op {
                    0 => {
                        s.schedule(now + dt, Event::SenderTimer(id));
                        reference.push((now + dt, n, Event::SenderTimer(id)));
                        n += 1;
                    }
                    1 | 2 => {
                        let ev = if op == 1 { Event::LinkTxDone(id) } else { Event::DelayLineHead(id) };
                        let ch = Scheduler::channel(ev);
                        if !busy[ch] {
                            busy[ch] = true;
                            s.schedule_head(now + dt, ev);
                            reference.push((now + dt, n, ev));
                            n += 1;
                        }
                    }
                    _ => {
                        reference.sort_by_key(|&(t, n, _)| (t, n));
                        let want = if reference.is_empty() { None } else { Some(reference.remove(0)) };
                        let got = s.pop_until(u64::MAX);
                        proptest::prop_assert_eq!(got, want.map(|(t, _, e)| (t, e)));
                        if let Some((_, Event::LinkTxDone(_) | Event::DelayLineHead(_))) = got {
                            busy[Scheduler::channel(got.unwrap().1)] = false;
                        }
                    }
                }
            }
            reference.sort_by_key(|&(t, n, _)| (t, n));
            let rest: Vec<_> = std::iter::from_fn(|| s.pop_until(u64::MAX)).collect();
            proptest::prop_assert_eq!(rest, reference.into_iter().map(|(t, _, e)| (t, e)).collect::<Vec<_>>());
        }
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
