//! The FIFO every single-queue discipline keeps its packets in: a ring buffer of packets
//! stored by value (no boxing, no per-packet allocation) with its byte backlog.

use std::collections::VecDeque;

use crate::{Nanos, Packet};

#[derive(Clone, Debug)]
pub struct Fifo<P> {
    q: VecDeque<P>,
    bytes: u64,
}

impl<P> Default for Fifo<P> {
    fn default() -> Self {
        Fifo {
            q: VecDeque::new(),
            bytes: 0,
        }
    }
}

impl<P: Packet> Fifo<P> {
    #[inline]
    pub fn push(&mut self, pkt: P) {
        self.bytes += pkt.wire_len() as u64;
        self.q.push_back(pkt);
    }
    #[inline]
    pub fn pop(&mut self) -> Option<P> {
        let p = self.q.pop_front()?;
        self.bytes -= p.wire_len() as u64;
        Some(p)
    }
    #[inline]
    pub fn len(&self) -> usize {
        self.q.len()
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }
    #[inline]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
    #[inline]
    pub fn head_enqueue_ns(&self) -> Option<Nanos> {
        self.q.front().map(|p| p.enqueue_ns())
    }
    /// The queued packets, head first.
    pub fn iter(&self) -> impl Iterator<Item = &P> {
        self.q.iter()
    }
    pub fn drain(&mut self) -> Vec<P> {
        self.bytes = 0;
        self.q.drain(..).collect()
    }
}

/// The `Qdisc` methods a discipline that keeps its packets in one `queue: Fifo<P>` field
/// delegates unchanged: `len`, `backlog_bytes`, `head_enqueue_ns`.
macro_rules! fifo_accessors {
    () => {
        #[inline]
        fn len(&self) -> usize {
            self.queue.len()
        }
        #[inline]
        fn backlog_bytes(&self) -> u64 {
            self.queue.bytes()
        }
        fn head_enqueue_ns(&self) -> Option<$crate::Nanos> {
            self.queue.head_enqueue_ns()
        }
    };
}

/// `dequeue` and `reset` for a single-FIFO discipline with no dequeue-side logic and no
/// control state to clear.
macro_rules! fifo_dequeue_and_reset {
    () => {
        #[inline]
        fn dequeue(
            &mut self,
            _now: $crate::Nanos,
            _out: &mut impl $crate::Verdicts<P>,
        ) -> Option<P> {
            self.queue.pop()
        }
        fn reset(&mut self) -> Vec<P> {
            self.queue.drain()
        }
    };
}

pub(crate) use {fifo_accessors, fifo_dequeue_and_reset};
