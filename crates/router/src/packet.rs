//! The router's queued packet: the bytes read from the TUN device plus what the pipeline
//! learned about them, as an [`aqm::Packet`] so every discipline of `crates/aqm` can hold it.
//!
//! The bytes are owned (`Vec<u8>`) because a discipline may set CE on a packet it holds; the
//! pipeline recycles the vectors, so steady-state operation allocates nothing per packet.

use aqm::{Ecn, Nanos, Packet};

use crate::ipv4;

#[derive(Debug)]
pub struct RouterPkt {
    /// The IP packet exactly as read (possibly with link padding after `total length`).
    pub buf: Vec<u8>,
    /// IP total length (RFC 791): the length in the queue and on the link.
    pub wire_len: u32,
    /// Index of the packet's flow in the router's flow table.
    pub flow: u32,
    /// Flow class (index into `engine.classes`).
    pub class: u16,
    /// Hash of the 5-tuple ([`ipv4::FiveTuple::hash`]).
    pub key: u64,
    /// Packet value from the marker (PPV/CSAQM), 0 otherwise.
    pub value: u32,
    /// Arrival order within the flow (0, 1, 2, ...), to detect reordering at emission.
    pub seq: u64,
    pub enqueue_ns: Nanos,
}

impl Packet for RouterPkt {
    #[inline]
    fn wire_len(&self) -> u32 {
        self.wire_len
    }
    #[inline]
    fn ecn(&self) -> Ecn {
        // A queued packet parsed as IPv4, so byte 1 (TOS) exists.
        ipv4::ecn_of(self.buf[1])
    }
    /// Sets CE and updates the header checksum incrementally (RFC 1624 §3 eqn. 3).
    #[inline]
    fn set_ce(&mut self) {
        ipv4::set_ce(&mut self.buf);
    }
    #[inline]
    fn flow_key(&self) -> u64 {
        self.key
    }
    #[inline]
    fn value(&self) -> u32 {
        self.value
    }
    #[inline]
    fn enqueue_ns(&self) -> Nanos {
        self.enqueue_ns
    }
    #[inline]
    fn set_enqueue_ns(&mut self, now: Nanos) {
        self.enqueue_ns = now;
    }
}
