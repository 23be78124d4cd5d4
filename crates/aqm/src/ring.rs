//! A FIFO from which a random queued packet can be removed in O(1): removed packets leave a
//! hole that dequeue skips (Linux sch_choke's ring, `choke_peek_random`/`choke_drop_by_idx`).
//! Used by CHOKe and CKCD.

use std::collections::VecDeque;

use crate::{Nanos, Packet, Rng};

/// Retries of the random draw when it hits a hole before settling for the head
/// (`choke_peek_random`).
const PEEK_RETRIES: u32 = 3;

#[derive(Clone, Debug)]
pub struct HoleRing<P> {
    slots: VecDeque<Option<P>>,
    len: usize,
    bytes: u64,
}

impl<P> Default for HoleRing<P> {
    fn default() -> Self {
        HoleRing { slots: VecDeque::new(), len: 0, bytes: 0 }
    }
}

impl<P: Packet> HoleRing<P> {
    pub fn push(&mut self, pkt: P) {
        self.len += 1;
        self.bytes += pkt.wire_len() as u64;
        self.slots.push_back(Some(pkt));
    }

    fn trim_front(&mut self) {
        while matches!(self.slots.front(), Some(None)) {
            self.slots.pop_front();
        }
    }

    pub fn pop(&mut self) -> Option<P> {
        self.trim_front();
        let p = self.slots.pop_front()??;
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
            let i = (rng.next_u64() % self.slots.len() as u64) as usize;
            if self.slots[i].is_some() {
                return Some(i);
            }
        }
        Some(0)
    }

    pub fn get(&self, i: usize) -> Option<&P> {
        self.slots.get(i)?.as_ref()
    }

    /// Remove the packet in slot `i`, leaving a hole.
    pub fn take(&mut self, i: usize) -> Option<P> {
        let p = self.slots.get_mut(i)?.take()?;
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
        self.slots.iter().flatten().next().map(|p| p.enqueue_ns())
    }

    pub fn drain(&mut self) -> Vec<P> {
        self.len = 0;
        self.bytes = 0;
        self.slots.drain(..).flatten().collect()
    }
}
