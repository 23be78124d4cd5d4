//! PPV — Per Packet Value core-stateless resource sharing, drop-based.
//!
//! Sources: Nádas, Turányi, Rácz, "Per Packet Value: A Practical Concept for Network Resource
//! Sharing", IEEE GLOBECOM 2016 (the concept); Fejes et al. 2019 §3, the node
//! rule this file implements: "If the queue is full, the node drops packets with minimum packet
//! value considering the packets stored in the queue and the newly arrived one. This is
//! repeated until either the new packet can fit into the queue and then it is stored or it is
//! dropped since all the packets in the queue have at least the same value as the new packet."
//!
//! Every packet carries a packet value (PV, [`Packet::value`]) set before the bottleneck by a
//! per-flow marker from the flow's throughput-value function (in the simulator,
//! `crates/link/src/marker.rs`). The node keeps no flow state: one FIFO, served in order; only
//! when the buffer is full do values matter. Drop-based, no ECN (Fejes et al. 2019: "We apply these for
//! packet dropping").
//!
//! Choices the sources leave open, each aqmlab's:
//! - Ties: an arrival never evicts a queued packet of *equal* value (Fejes et al.'s "at least the
//!   same value"), so it is the arrival that is dropped.
//! - Which of several queued minimum-value packets is evicted: the most recently enqueued one
//!   (deterministic, and it has invested least queueing time).
//! - Reasons: evicted packets and arrivals that lose the comparison are `DropReason::Value`;
//!   an arrival larger than the whole buffer (it could never fit, so nothing is evicted for
//!   it) is `Overflow`.
//! - Exact eviction, not the histogram approximation a line-rate implementation would use:
//!   a FIFO of slots with tombstones plus a binary heap of (value, slot) with
//!   the minimum value (newest first among equals) on top, so an eviction costs O(log n).
//!   Dequeues leave their heap entry behind (recognised as stale by its slot number being
//!   below the FIFO's head, and skipped when it surfaces) and the heap is rebuilt from the
//!   slots when stale entries outnumber live ones: the per-packet cost is a heap push (an
//!   ordered set would cost an insert and a remove). The heap is kept only while the buffer
//!   overflows: when stale entries outnumber live ones it is dropped instead of rebuilt, and
//!   the next overflow builds it from the slots (the same O(n) as the periodic rebuild), so
//!   between congestion episodes arrivals push nothing. One heap rather than one per
//!   generation of arrivals keeps an eviction from a full small buffer cheap, the regime of
//!   Fejes et al. 2019 where PPV works hardest.
//!
//! PPV owns its limit ([`Qdisc::owns_limit`]): the physical buffer is handed to it as
//! `limit_packets`/`limit_bytes`, since it must see the overflowing arrival to choose a victim.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::options::{About, Link, Lowered, OptionError, ScenarioOptions};
use crate::{DropReason, Nanos, Packet, PhysicalLimit, Qdisc, Verdicts};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields)
)]
pub struct Params {
    /// Buffer limit, packets (the scenario's buffer; Fejes et al. 2019: factor · RTT · C).
    #[cfg_attr(feature = "serde", serde(default))]
    pub limit_packets: Option<u64>,
    /// Buffer limit, bytes.
    #[cfg_attr(feature = "serde", serde(default))]
    pub limit_bytes: Option<u64>,
}

impl Params {
    pub fn validate(&self) -> Result<(), OptionError> {
        if self.limit_packets.is_none() && self.limit_bytes.is_none() {
            return Err(OptionError::new(
                "limit",
                "PPV acts only when its buffer is full; give it a limit (the scenario's buffer)",
            ));
        }
        if self.limit_packets == Some(0) || self.limit_bytes == Some(0) {
            return Err(OptionError::new("limit", "must be positive"));
        }
        Ok(())
    }

    fn limit(&self) -> PhysicalLimit {
        PhysicalLimit {
            packets: self.limit_packets,
            bytes: self.limit_bytes,
        }
    }
}

/// The scenario's options: none; its limit is the physical buffer.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields, default)
)]
pub struct Options {}

impl ScenarioOptions for Options {
    type Config = Params;
    const ABOUT: About = About {
        kind: "ppv",
        summary: "one FIFO; when full, the lowest-valued packet (the arrival's if lowest) is dropped; limit = the physical buffer, packet values from the [marker]",
        source: "Nádas, Turányi, Rácz, GLOBECOM 2016 (Per Packet Value); Fejes et al. 2019 §3",
        one_of: &[],
        reads_packet_values: true,
        options: &[],
    };

    /// PPV owns its limit: it must see the overflowing arrival to choose the lowest-value
    /// victim, so the physical buffer is handed to it.
    fn lower(&self, link: &Link) -> Result<Lowered<Self::Config>, OptionError> {
        let params = Params {
            limit_packets: link.buffer_packets,
            limit_bytes: link.buffer_bytes,
        };
        params.validate()?;
        Ok(Lowered {
            config: params,
            delay_target_ns: None,
        })
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Queued packets evicted for a higher-value arrival.
    pub evicted: u64,
    /// Arrivals dropped because every queued packet had at least their value.
    pub dropped: u64,
    /// Arrivals larger than the whole buffer.
    pub overlimit: u64,
}

#[derive(Clone, Debug)]
pub struct Ppv<P> {
    pub params: Params,
    pub stats: Stats,
    /// Slots in arrival order; `None` = an evicted packet's tombstone. Never starts or ends
    /// with a tombstone.
    slots: VecDeque<Option<P>>,
    /// Sequence number of `slots[0]`; slot i holds sequence number `head_seq + i`.
    head_seq: u64,
    /// (value, sequence number) of every queued packet, as a max-heap of (−value, seq): the
    /// minimum value, and among equal values the newest, on top. Also holds stale entries of
    /// dequeued packets (seq < `head_seq`); evicted packets' entries are popped at eviction,
    /// so every entry with seq ≥ `head_seq` is a queued packet. Empty and not maintained while
    /// `indexed` is false.
    by_value: BinaryHeap<(Reverse<u32>, u64)>,
    /// Whether `by_value` holds every queued packet (arrivals push only then).
    indexed: bool,
    len: usize,
    bytes: u64,
}

impl<P: Packet> Ppv<P> {
    pub fn build(params: &Params, _seed: u64) -> Result<Self, OptionError> {
        params.validate()?;
        Ok(Self::new(params.clone()))
    }

    pub fn new(params: Params) -> Self {
        Ppv {
            params,
            stats: Stats::default(),
            slots: VecDeque::new(),
            head_seq: 0,
            by_value: BinaryHeap::new(),
            indexed: false,
            len: 0,
            bytes: 0,
        }
    }

    /// The lowest value queued, and the newest packet holding it (stale entries on top are
    /// discarded on the way).
    fn min_victim(&mut self) -> Option<(u32, u64)> {
        if !self.indexed {
            self.rebuild();
            self.indexed = true;
        }
        while let Some(&(Reverse(v), seq)) = self.by_value.peek() {
            if seq >= self.head_seq {
                return Some((v, seq));
            }
            self.by_value.pop();
        }
        None
    }

    /// Remove the packet with sequence number `seq`, which [`Ppv::min_victim`] just returned
    /// (so its entry is on top of the heap).
    fn take(&mut self, value: u32, seq: u64) -> P {
        let top = self.by_value.pop();
        debug_assert_eq!(top, Some((Reverse(value), seq)));
        let pkt = self.slots[(seq - self.head_seq) as usize]
            .take()
            .expect("queued slot");
        self.len -= 1;
        self.bytes -= pkt.wire_len() as u64;
        self.trim();
        pkt
    }

    /// Drop tombstones at both ends, keeping the invariant.
    fn trim(&mut self) {
        while matches!(self.slots.front(), Some(None)) {
            self.slots.pop_front();
            self.head_seq += 1;
        }
        while matches!(self.slots.back(), Some(None)) {
            self.slots.pop_back();
        }
    }

    /// Build the heap from the slots: it then holds exactly the queued packets (O(n), at the
    /// first overflow after the heap was dropped, which is at most once every n + 64 dequeues).
    fn rebuild(&mut self) {
        let mut v = std::mem::take(&mut self.by_value).into_vec();
        v.clear();
        let head = self.head_seq;
        v.extend(
            self.slots
                .iter()
                .enumerate()
                .filter_map(|(i, p)| p.as_ref().map(|p| (Reverse(p.value()), head + i as u64))),
        );
        self.by_value = BinaryHeap::from(v);
    }
}

impl<P: Packet> Qdisc<P> for Ppv<P> {
    fn enqueue(&mut self, mut pkt: P, now: Nanos, out: &mut impl Verdicts<P>) {
        let limit = self.params.limit();
        let len = pkt.wire_len();
        if !limit.admits(0, 0, len) {
            self.stats.overlimit += 1;
            out.dropped(pkt, DropReason::Overflow, now);
            return;
        }
        // Fejes et al. 2019: evict minimum-value packets while the arrival does not fit, unless every
        // queued packet is worth at least as much as the arrival.
        while !limit.admits(self.len, self.bytes, len) {
            let (v_min, seq) = self.min_victim().expect("a full buffer holds packets");
            if v_min >= pkt.value() {
                self.stats.dropped += 1;
                out.dropped(pkt, DropReason::Value, now);
                return;
            }
            let victim = self.take(v_min, seq);
            self.stats.evicted += 1;
            out.dropped(victim, DropReason::Value, now);
        }
        pkt.set_enqueue_ns(now);
        let seq = self.head_seq + self.slots.len() as u64;
        if self.indexed {
            self.by_value.push((Reverse(pkt.value()), seq));
        }
        self.len += 1;
        self.bytes += len as u64;
        self.slots.push_back(Some(pkt));
    }

    fn dequeue(&mut self, _now: Nanos, _out: &mut impl Verdicts<P>) -> Option<P> {
        let pkt = self
            .slots
            .pop_front()?
            .expect("the head is never a tombstone");
        // The packet's heap entry goes stale (its seq is now below head_seq).
        self.head_seq += 1;
        self.len -= 1;
        self.bytes -= pkt.wire_len() as u64;
        self.trim();
        if self.by_value.len() > 2 * self.len + 64 {
            self.by_value.clear();
            self.indexed = false;
        }
        Some(pkt)
    }

    fn len(&self) -> usize {
        self.len
    }

    fn backlog_bytes(&self) -> u64 {
        self.bytes
    }

    fn head_enqueue_ns(&self) -> Option<Nanos> {
        self.slots.front().map(|p| {
            p.as_ref()
                .expect("the head is never a tombstone")
                .enqueue_ns()
        })
    }

    fn owns_limit(&self) -> bool {
        true
    }

    fn reset(&mut self) -> Vec<P> {
        self.by_value.clear();
        self.indexed = false;
        self.head_seq += self.slots.len() as u64;
        self.len = 0;
        self.bytes = 0;
        self.slots.drain(..).flatten().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Recorder, TestPkt};
    use crate::Ecn;

    fn vpkt(flow: u64, len: u32, value: u32) -> TestPkt {
        TestPkt {
            flow,
            len,
            ecn: Ecn::NotEct,
            enqueued: 0,
            value,
        }
    }

    fn ppv(packets: Option<u64>, bytes: Option<u64>) -> Ppv<TestPkt> {
        Ppv::new(Params {
            limit_packets: packets,
            limit_bytes: bytes,
        })
    }

    fn flows_in_order(q: &mut Ppv<TestPkt>, r: &mut Recorder) -> Vec<u64> {
        std::iter::from_fn(|| q.dequeue(0, r))
            .map(|p| p.flow)
            .collect()
    }

    #[test]
    fn a_full_buffer_evicts_the_minimum_value_packet_for_a_higher_value_arrival() {
        // 4-packet buffer holding values 50, 10, 70, 30 (flows 0..3). An arrival of value 40
        // evicts the 10 (flow 1); an arrival of value 20 then finds minimum 30 ≥ 20 and is
        // itself dropped. FIFO order of the survivors is kept.
        let mut q = ppv(Some(4), None);
        let mut r = Recorder::default();
        for (f, v) in [(0, 50), (1, 10), (2, 70), (3, 30)] {
            q.enqueue(vpkt(f, 1500, v), 0, &mut r);
        }
        assert!(r.drops.is_empty());
        q.enqueue(vpkt(4, 1500, 40), 1, &mut r);
        q.enqueue(vpkt(5, 1500, 20), 2, &mut r);
        assert_eq!(
            r.drops
                .iter()
                .map(|(p, why)| (p.flow, *why))
                .collect::<Vec<_>>(),
            vec![(1, DropReason::Value), (5, DropReason::Value)]
        );
        assert_eq!(
            q.stats,
            Stats {
                evicted: 1,
                dropped: 1,
                overlimit: 0
            }
        );
        assert_eq!((q.len(), q.backlog_bytes()), (4, 6000));
        assert_eq!(flows_in_order(&mut q, &mut r), vec![0, 2, 3, 4]);
        assert_eq!((q.len(), q.backlog_bytes()), (0, 0));
    }

    #[test]
    fn an_equal_value_arrival_is_dropped_and_the_newest_minimum_is_evicted() {
        // Values 10, 10, 90 in a 3-packet buffer: an arrival of 10 does not evict (ties keep
        // the queued packet); an arrival of 11 evicts the *newer* of the two 10s (flow 1).
        let mut q = ppv(Some(3), None);
        let mut r = Recorder::default();
        for (f, v) in [(0, 10), (1, 10), (2, 90)] {
            q.enqueue(vpkt(f, 1000, v), 0, &mut r);
        }
        q.enqueue(vpkt(3, 1000, 10), 0, &mut r);
        q.enqueue(vpkt(4, 1000, 11), 0, &mut r);
        assert_eq!(
            r.drops.iter().map(|(p, _)| p.flow).collect::<Vec<_>>(),
            vec![3, 1]
        );
        assert_eq!(flows_in_order(&mut q, &mut r), vec![0, 2, 4]);
    }

    #[test]
    fn a_byte_limit_evicts_as_many_packets_as_the_arrival_needs() {
        // 3000-byte buffer holding 1000 B at value 5, 1000 B at 6 and 1000 B at 90. A 1500-byte
        // arrival of value 50 needs 1500 B free: evicting the 5 frees 1000 (not enough), then
        // the 6 frees 2000. Evicting the head itself keeps the FIFO (and head stamp) right.
        let mut q = ppv(None, Some(3000));
        let mut r = Recorder::default();
        q.enqueue(vpkt(0, 1000, 5), 10, &mut r);
        q.enqueue(vpkt(1, 1000, 6), 20, &mut r);
        q.enqueue(vpkt(2, 1000, 90), 30, &mut r);
        q.enqueue(vpkt(3, 1500, 50), 40, &mut r);
        assert_eq!(
            r.drops.iter().map(|(p, _)| p.flow).collect::<Vec<_>>(),
            vec![0, 1]
        );
        assert_eq!(
            (q.len(), q.backlog_bytes(), q.head_enqueue_ns()),
            (2, 2500, Some(30))
        );
        // A packet larger than the whole buffer is refused without evicting anything.
        q.enqueue(vpkt(4, 3001, 1000), 50, &mut r);
        assert_eq!(
            r.drops.last().map(|(p, why)| (p.flow, *why)),
            Some((4, DropReason::Overflow))
        );
        assert_eq!(q.len(), 2);
        assert_eq!(flows_in_order(&mut q, &mut r), vec![2, 3]);
    }

    #[test]
    fn below_the_limit_it_is_a_plain_fifo() {
        let mut q = ppv(Some(10), Some(100_000));
        let mut r = Recorder::default();
        for f in 0..10 {
            q.enqueue(vpkt(f, 1500, (10 - f) as u32), f * 5, &mut r);
        }
        assert!(r.drops.is_empty() && r.marks.is_empty());
        assert_eq!(
            q.dequeue(100, &mut r).map(|p| (p.flow, p.enqueued)),
            Some((0, 0))
        );
        let rest = q.reset();
        assert_eq!(
            rest.iter().map(|p| p.flow).collect::<Vec<_>>(),
            (1..10).collect::<Vec<_>>()
        );
        assert!(q.is_empty() && q.head_enqueue_ns().is_none());
    }

    /// Fejes et al. 2019's rule applied literally to a plain list (scan for the minimum, newest
    /// first among equals): the reference the heap-based queue must match verdict for verdict.
    fn reference_enqueue(
        q: &mut Vec<TestPkt>,
        limit: PhysicalLimit,
        p: TestPkt,
        drops: &mut Vec<u64>,
    ) {
        if !limit.admits(0, 0, p.len) {
            drops.push(p.flow);
            return;
        }
        loop {
            let bytes: u64 = q.iter().map(|x| x.len as u64).sum();
            if limit.admits(q.len(), bytes, p.len) {
                q.push(p);
                return;
            }
            let min = q.iter().map(|x| x.value).min().expect("full");
            if min >= p.value {
                drops.push(p.flow);
                return;
            }
            let i = q.iter().rposition(|x| x.value == min).expect("present");
            drops.push(q.remove(i).flow);
        }
    }

    proptest::proptest! {
        #[test]
        fn evictions_and_service_order_match_the_rule_applied_to_a_list(
            // Buffers up to 300 packets and runs of 2500 operations: evictions across many
            // drops and rebuilds of the heap.
            ops in proptest::collection::vec((0u8..3, 0u32..12, 500u32..1600), 1..2500),
            packets in proptest::option::of(2u64..300),
        ) {
            let bytes = if packets.is_none() { Some(12_000) } else { None };
            let mut q = ppv(packets, bytes);
            let limit = PhysicalLimit { packets, bytes };
            let mut r = Recorder::default();
            let (mut list, mut drops, mut served) = (Vec::new(), Vec::new(), Vec::new());
            for (i, (op, value, len)) in ops.into_iter().enumerate() {
                if op == 0 {
                    served.push(list.first().map(|p: &TestPkt| p.flow));
                    if !list.is_empty() {
                        list.remove(0);
                    }
                    proptest::prop_assert_eq!(q.dequeue(0, &mut r).map(|p| p.flow), *served.last().unwrap());
                } else {
                    let p = vpkt(i as u64, len, value);
                    reference_enqueue(&mut list, limit, p, &mut drops);
                    q.enqueue(p, 0, &mut r);
                }
                proptest::prop_assert_eq!(r.drops.last().map(|(p, _)| p.flow), drops.last().copied());
                proptest::prop_assert_eq!((r.drops.len(), q.len(), q.backlog_bytes()), (drops.len(), list.len(), list.iter().map(|x| x.len as u64).sum()));
            }
            proptest::prop_assert_eq!(r.drops.iter().map(|(p, _)| p.flow).collect::<Vec<_>>(), drops);
            proptest::prop_assert_eq!(flows_in_order(&mut q, &mut r), list.iter().map(|p| p.flow).collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_limit_is_required() {
        assert!(Params::default().validate().is_err());
        assert!(Params {
            limit_packets: Some(0),
            limit_bytes: None
        }
        .validate()
        .is_err());
        assert!(Params {
            limit_packets: None,
            limit_bytes: Some(1)
        }
        .validate()
        .is_ok());
    }
}
