//! A FIFO from which a random queued packet can be removed in O(1): removed packets leave a
//! hole that dequeue skips (Linux sch_choke's ring, `choke_peek_random`/`choke_drop_by_idx`).
//! Used by CHOKe and CKCD.
//!
//! The ring is its own power-of-two buffer rather than a `VecDeque<Option<P>>`, and looks for
//! holes to trim only when it has any, since every packet of CHOKe and CKCD passes through
//! `pop`. Which slots exist (holes included) matters, because the random draw is uniform over
//! them: holes at the front are trimmed after every removal, trailing holes stay.

use crate::{Nanos, Packet, Rng};

/// Retries of the random draw when it hits a hole before settling for the head
/// (`choke_peek_random`).
const PEEK_RETRIES: u32 = 3;

/// Slots of the first buffer (it doubles when full).
const MIN_CAPACITY: usize = 16;

/// Invariants: `buf.len()` is 0 or a power of two; slot k (k < `slots`) of the ring is
/// `buf[(head + k) & (buf.len() − 1)]`; slot 0 is never a hole, so `len == 0` iff `slots == 0`.
#[derive(Clone, Debug)]
pub struct HoleRing<P> {
    buf: Vec<Option<P>>,
    /// Index in `buf` of slot 0.
    head: usize,
    /// Slots in use, holes included (what a random draw is uniform over).
    slots: usize,
    /// Packets queued (slots that are not holes).
    len: usize,
    bytes: u64,
}

impl<P> Default for HoleRing<P> {
    fn default() -> Self {
        HoleRing {
            buf: Vec::new(),
            head: 0,
            slots: 0,
            len: 0,
            bytes: 0,
        }
    }
}

impl<P: Packet> HoleRing<P> {
    /// Index in `buf` of slot `k` (`k < slots`, so `buf` is not empty).
    #[inline]
    fn at(&self, k: usize) -> usize {
        (self.head + k) & (self.buf.len() - 1)
    }

    #[inline]
    pub fn push(&mut self, pkt: P) {
        if self.slots == self.buf.len() {
            self.grow();
        }
        self.len += 1;
        self.bytes += pkt.wire_len() as u64;
        let i = self.at(self.slots);
        self.buf[i] = Some(pkt);
        self.slots += 1;
    }

    /// Double the buffer, slot 0 moving to index 0.
    #[cold]
    fn grow(&mut self) {
        let cap = (2 * self.buf.len()).max(MIN_CAPACITY);
        let mut buf = Vec::with_capacity(cap);
        for k in 0..self.slots {
            let i = self.at(k);
            buf.push(self.buf[i].take());
        }
        buf.resize_with(cap, || None);
        self.buf = buf;
        self.head = 0;
    }

    /// Drop the holes at the front (sch_choke's `choke_zap_head_holes`). Only needed while
    /// the ring has holes at all: without one, the front is the next packet.
    #[inline]
    fn trim_front(&mut self) {
        if self.slots == self.len {
            return;
        }
        while self.slots > 0 && self.buf[self.head].is_none() {
            self.head = self.at(1);
            self.slots -= 1;
        }
    }

    #[inline]
    pub fn pop(&mut self) -> Option<P> {
        if self.slots == 0 {
            return None;
        }
        let p = self.buf[self.head].take().expect("slot 0 is never a hole");
        self.head = self.at(1);
        self.slots -= 1;
        self.len -= 1;
        self.bytes -= p.wire_len() as u64;
        self.trim_front();
        Some(p)
    }

    /// A random occupied slot: uniform over slots, retried on holes, else the head
    /// (`choke_peek_random`). None if the ring is empty.
    pub fn random_slot(&mut self, rng: &mut Rng) -> Option<usize> {
        use rand_core::Rng as _;
        if self.len == 0 {
            return None;
        }
        for _ in 0..PEEK_RETRIES {
            let k = (rng.next_u64() % self.slots as u64) as usize;
            if self.buf[self.at(k)].is_some() {
                return Some(k);
            }
        }
        Some(0)
    }

    pub fn get(&self, k: usize) -> Option<&P> {
        if k >= self.slots {
            return None;
        }
        self.buf[self.at(k)].as_ref()
    }

    /// Remove the packet in slot `k`, leaving a hole.
    pub fn take(&mut self, k: usize) -> Option<P> {
        if k >= self.slots {
            return None;
        }
        let i = self.at(k);
        let p = self.buf[i].take()?;
        self.len -= 1;
        self.bytes -= p.wire_len() as u64;
        self.trim_front();
        Some(p)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn head_enqueue_ns(&self) -> Option<Nanos> {
        (0..self.slots)
            .find_map(|k| self.buf[self.at(k)].as_ref())
            .map(|p| p.enqueue_ns())
    }

    pub fn drain(&mut self) -> Vec<P> {
        let (head, mask) = (self.head, self.buf.len().wrapping_sub(1));
        let out = (0..self.slots)
            .filter_map(|k| self.buf[(head + k) & mask].take())
            .collect();
        self.head = 0;
        self.slots = 0;
        self.len = 0;
        self.bytes = 0;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{pkt, TestPkt};
    use crate::Ecn;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    /// The ring this one replaced, kept as the reference: a deque of slots, leading holes
    /// trimmed after every removal.
    #[derive(Default)]
    struct Reference {
        slots: VecDeque<Option<TestPkt>>,
    }

    impl Reference {
        fn trim_front(&mut self) {
            while matches!(self.slots.front(), Some(None)) {
                self.slots.pop_front();
            }
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Push(u64, u32),
        Pop,
        /// Draw a slot with a fresh generator of this seed and take its packet.
        TakeRandom(u64),
        /// Take slot `k mod (slots + 2)` (also past the end).
        TakeAt(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u64..4, 40u32..1600).prop_map(|(f, l)| Op::Push(f, l)),
            2 => Just(Op::Pop),
            1 => any::<u64>().prop_map(Op::TakeRandom),
            1 => (0usize..64).prop_map(Op::TakeAt),
        ]
    }

    proptest! {
        /// Same packets out in the same order, same slot count (which the random draw is
        /// uniform over), same draws, across buffer growth and wrap-around.
        #[test]
        fn behaves_as_the_deque_of_slots(ops in proptest::collection::vec(op(), 1..400)) {
            let mut ring: HoleRing<TestPkt> = HoleRing::default();
            let mut reference = Reference::default();
            for (n, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Push(f, l) => {
                        let mut p = pkt(f, l, Ecn::NotEct);
                        p.enqueued = n as u64;
                        ring.push(p);
                        reference.slots.push_back(Some(p));
                    }
                    Op::Pop => {
                        reference.trim_front();
                        let want = reference.slots.pop_front().flatten();
                        reference.trim_front();
                        let got = ring.pop();
                        prop_assert_eq!(got.map(|p| p.enqueued), want.map(|p| p.enqueued));
                    }
                    Op::TakeRandom(seed) => {
                        let k = ring.random_slot(&mut crate::rng_from_seed(seed));
                        let want_k = if reference.slots.is_empty() {
                            None
                        } else {
                            use rand_core::Rng as _;
                            let mut rng = crate::rng_from_seed(seed);
                            let mut k = 0;
                            for _ in 0..PEEK_RETRIES {
                                let i = (rng.next_u64() % reference.slots.len() as u64) as usize;
                                if reference.slots[i].is_some() {
                                    k = i;
                                    break;
                                }
                            }
                            Some(k)
                        };
                        prop_assert_eq!(k, want_k);
                        if let Some(k) = k {
                            prop_assert_eq!(ring.get(k).map(|p| p.enqueued), reference.slots[k].as_ref().map(|p| p.enqueued));
                            let got = ring.take(k);
                            let want = reference.slots[k].take();
                            reference.trim_front();
                            prop_assert_eq!(got.map(|p| p.enqueued), want.map(|p| p.enqueued));
                        }
                    }
                    Op::TakeAt(k) => {
                        let k = k % (reference.slots.len() + 2);
                        let got = ring.take(k);
                        let want = reference.slots.get_mut(k).and_then(Option::take);
                        reference.trim_front();
                        prop_assert_eq!(got.map(|p| p.enqueued), want.map(|p| p.enqueued));
                    }
                }
                let queued: Vec<u64> = reference.slots.iter().flatten().map(|p| p.enqueued).collect();
                prop_assert_eq!(ring.slots, reference.slots.len());
                prop_assert_eq!(ring.len(), queued.len());
                prop_assert_eq!(ring.bytes(), reference.slots.iter().flatten().map(|p| p.len as u64).sum::<u64>());
                prop_assert_eq!(ring.head_enqueue_ns(), queued.first().copied());
            }
            let queued: Vec<u64> = reference.slots.iter().flatten().map(|p| p.enqueued).collect();
            prop_assert_eq!(ring.drain().into_iter().map(|p| p.enqueued).collect::<Vec<_>>(), queued);
            prop_assert!(ring.is_empty() && ring.pop().is_none());
        }
    }
}
