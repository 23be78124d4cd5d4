//! Links: constant-delay lines and the bottleneck (a queue discipline feeding a link of rate C).
//!
//! Both are FIFOs, so only their head needs a place in the event queue: a delay line schedules
//! `DelayLineHead` for its oldest packet only, and the bottleneck schedules one `LinkTxDone`
//! per packet it serializes. Serialization is exact ([`link::Serializer`], shared with the
//! emulator's router): a busy period of n packets lasts exactly `Σbits / C`.
//!
//! Routes: a packet carries the index of its current hop; the world looks up the next hop in
//! the flow's route ([`Hop`]). The dumbbell of this version is
//! `sender → Bottleneck(0) → Line(fwd) → receiver` (with a `Marker` first when the discipline
//! reads packet values) and `receiver → Line(rev) → sender`; a
//! reverse-path bottleneck or a second bottleneck is a longer route, not a change to hosts.

use std::collections::VecDeque;

use aqm::{PhysicalLimit, Qdisc, Verdicts};
use link::discipline::Discipline;
use link::Serializer;

use crate::engine::{Event, Nanos, Scheduler};
use crate::host::Stalls;

/// One step of a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hop {
    /// The edge's packet-value marker (PPV/CSAQM): sets the packet's value, no delay.
    Marker,
    /// Queue discipline + link of rate C.
    Bottleneck(u32),
    /// Propagation delay only.
    Line(u32),
    /// The sender host's NIC (offloads): back-to-back packets at its line rate.
    Nic,
    /// The receiver host's GRO (offloads): held until the next poll, then the host.
    Gro,
    /// The end host (receiver for data, sender for ACKs).
    Host,
}

/// A constant propagation delay: a FIFO whose head alone is scheduled.
#[derive(Debug)]
pub struct DelayLine<P> {
    pub id: u32,
    pub delay_ns: Nanos,
    queue: VecDeque<(Nanos, P)>,
    head_scheduled: bool,
}

impl<P: Copy> DelayLine<P> {
    pub fn new(id: u32, delay_ns: Nanos) -> Self {
        DelayLine {
            id,
            delay_ns,
            queue: VecDeque::new(),
            head_scheduled: false,
        }
    }

    /// Put `pkt` on the line; it comes out after the line's delay, or at the end of the host
    /// stall that delay ends in (`stalls`: none for lines that end at no host).
    #[inline]
    pub fn push(&mut self, sched: &mut Scheduler, pkt: P, stalls: &Stalls) {
        let at = stalls.release(sched.now() + self.delay_ns);
        self.queue.push_back((at, pkt));
        if !self.head_scheduled {
            sched.schedule_head(at, Event::DelayLineHead(self.id));
            self.head_scheduled = true;
        }
    }

    /// Called when this line's head event fires: mark it consumed. Then pop due packets with
    /// [`DelayLine::pop_due`] and finally call [`DelayLine::reschedule`].
    #[inline]
    pub fn on_head_event(&mut self) {
        self.head_scheduled = false;
    }

    #[inline]
    pub fn pop_due(&mut self, now: Nanos) -> Option<P> {
        match self.queue.front() {
            Some(&(at, _)) if at <= now => self.queue.pop_front().map(|(_, p)| p),
            _ => None,
        }
    }

    #[inline]
    pub fn reschedule(&mut self, sched: &mut Scheduler) {
        if !self.head_scheduled {
            if let Some(&(at, _)) = self.queue.front() {
                sched.schedule_head(at, Event::DelayLineHead(self.id));
                self.head_scheduled = true;
            }
        }
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &P> {
        self.queue.iter().map(|(_, p)| p)
    }
}

/// The bottleneck: physical buffer limit, queue discipline, and a link of rate C.
pub struct Bottleneck<P: aqm::Packet + 'static> {
    pub id: u32,
    pub rate_bps: u64,
    pub limit: PhysicalLimit,
    pub qdisc: Discipline<P>,
    /// The packet being serialized, if any.
    in_tx: Option<P>,
    serializer: Serializer,
    /// Start and end of the current transmission.
    pub tx_start_ns: Nanos,
    pub tx_end_ns: Nanos,
}

impl<P: aqm::Packet + Copy + 'static> Bottleneck<P> {
    pub fn new(id: u32, rate_bps: u64, limit: PhysicalLimit, qdisc: Discipline<P>) -> Self {
        Bottleneck {
            id,
            rate_bps,
            limit,
            qdisc,
            in_tx: None,
            serializer: Serializer::new(rate_bps),
            tx_start_ns: 0,
            tx_end_ns: 0,
        }
    }

    /// Offer an arriving packet to the buffer and discipline.
    #[inline]
    pub fn arrive(&mut self, pkt: P, now: Nanos, out: &mut impl Verdicts<P>) {
        self.qdisc.offer(&self.limit, pkt, now, out);
    }

    #[inline]
    pub fn is_busy(&self) -> bool {
        self.in_tx.is_some()
    }

    /// If idle, dequeue the next packet and start serializing it. Returns the packet started
    /// (for sojourn measurement), scheduling its `LinkTxDone`.
    #[inline]
    pub fn try_start(&mut self, sched: &mut Scheduler, out: &mut impl Verdicts<P>) -> Option<P> {
        if self.in_tx.is_some() {
            return None;
        }
        let now = sched.now();
        let pkt = self.qdisc.dequeue(now, out)?;
        let tx_ns = self.serializer.tx_ns(pkt.wire_len());
        sched.schedule_head(now + tx_ns, Event::LinkTxDone(self.id));
        self.tx_start_ns = now;
        self.tx_end_ns = now + tx_ns;
        self.in_tx = Some(pkt);
        Some(pkt)
    }

    /// The current transmission completed: hand the packet on. The caller then calls
    /// [`Bottleneck::try_start`] again; if the queue is empty the carried remainder is dropped
    /// (an idle link has no phase to keep).
    #[inline]
    pub fn finish_tx(&mut self) -> P {
        let pkt = self
            .in_tx
            .take()
            .expect("LinkTxDone without a packet in transmission");
        if self.qdisc.is_empty() {
            self.serializer.idle();
        }
        pkt
    }

    /// The packet on the wire, if any (for end-of-run accounting).
    pub fn in_tx(&self) -> Option<&P> {
        self.in_tx.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_line_delivers_in_order_after_its_delay() {
        let mut s = Scheduler::new();
        let mut line: DelayLine<u32> = DelayLine::new(0, 1000);
        line.push(&mut s, 1, &Stalls::default());
        line.push(&mut s, 2, &Stalls::default());
        // Only the head is scheduled.
        assert_eq!(s.pending(), 1);
        let mut got = vec![];
        while let Some((now, Event::DelayLineHead(0))) = s.pop_until(u64::MAX) {
            line.on_head_event();
            while let Some(p) = line.pop_due(now) {
                got.push((now, p));
            }
            line.reschedule(&mut s);
        }
        assert_eq!(got, vec![(1000, 1), (1000, 2)]);
    }

    #[test]
    fn a_line_into_a_stalled_host_delivers_at_the_stalls_end() {
        // Due at 2000, inside the stall [1500, 2500): both packets come out at 2500, in order.
        // A line whose delay ends outside the stall delivers on time.
        let mut s = Scheduler::new();
        let mut stalled: DelayLine<u32> = DelayLine::new(0, 2_000);
        let mut clear: DelayLine<u32> = DelayLine::new(1, 1_000);
        let stalls = Stalls::from_windows(vec![(1_500, 2_500)]);
        stalled.push(&mut s, 1, &stalls);
        stalled.push(&mut s, 2, &stalls);
        clear.push(&mut s, 3, &stalls);
        let mut got = vec![];
        while let Some((now, Event::DelayLineHead(id))) = s.pop_until(u64::MAX) {
            let line = if id == 0 { &mut stalled } else { &mut clear };
            line.on_head_event();
            while let Some(p) = line.pop_due(now) {
                got.push((now, p));
            }
            line.reschedule(&mut s);
        }
        assert_eq!(got, vec![(1_000, 3), (2_500, 1), (2_500, 2)]);
    }
}
