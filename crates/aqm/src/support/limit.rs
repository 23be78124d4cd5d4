//! The physical buffer beneath every discipline: a packet limit (Linux pfifo's
//! rule, `qlen < limit`) and/or a byte limit (bfifo's rule, `backlog + len ≤ limit`;
//! net/sched/sch_fifo.c `pfifo_enqueue`, `bfifo_enqueue`). A time-sized buffer arrives here
//! as bytes at line rate (Fejes et al. 2019 and 2020: buffer = factor × RTT × C).

use crate::{DropReason, Nanos, Packet, Qdisc, Verdicts};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhysicalLimit {
    /// At most this many packets queued.
    pub packets: Option<u64>,
    /// At most this many bytes queued.
    pub bytes: Option<u64>,
}

impl PhysicalLimit {
    /// Whether a packet of `pkt_len` bytes fits beside `qlen` packets and `backlog_bytes`.
    #[inline]
    pub fn admits(&self, qlen: usize, backlog_bytes: u64, pkt_len: u32) -> bool {
        self.packets.map_or(true, |n| (qlen as u64) < n)
            && self
                .bytes
                .map_or(true, |b| backlog_bytes + pkt_len as u64 <= b)
    }

    /// Offer `pkt` to `q` through the limit: refused arrivals are dropped as `Overflow` before
    /// the discipline sees them, unless the discipline owns its limit.
    #[inline]
    pub fn offer<P: Packet, Q: Qdisc<P>>(
        &self,
        q: &mut Q,
        pkt: P,
        now: Nanos,
        out: &mut impl Verdicts<P>,
    ) {
        if !q.owns_limit() && !self.admits(q.len(), q.backlog_bytes(), pkt.wire_len()) {
            out.dropped(pkt, DropReason::Overflow, now);
            return;
        }
        q.enqueue(pkt, now, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packet_limit_is_strict_and_byte_limit_inclusive() {
        // pfifo admits while qlen < N: with N = 80 the 81st packet is refused.
        let l = PhysicalLimit {
            packets: Some(80),
            bytes: None,
        };
        assert!(l.admits(79, 0, 1500));
        assert!(!l.admits(80, 0, 1500));
        // bfifo admits while backlog + len <= B: exactly full is allowed.
        let b = PhysicalLimit {
            packets: None,
            bytes: Some(3000),
        };
        assert!(b.admits(1, 1500, 1500));
        assert!(!b.admits(2, 1501, 1500));
        assert!(PhysicalLimit::default().admits(1 << 30, u64::MAX / 2, 1500));
    }
}
