//! The simulator's packets. Data segments cross the bottleneck; ACKs return on the reverse
//! path. Both are small `Copy` structs stored by value in FIFOs (no boxing, no per-packet
//! allocation) and both implement `aqm::Packet`, so either can sit behind a queue discipline
//! (a reverse-path bottleneck needs no new packet type).

use aqm::{Ecn, Nanos};

/// Linux's header accounting on a 1500-byte MTU with TCP timestamps (the 10-byte option of
/// RFC 7323 §3 behind two NOPs, `tcp_options_write`):
/// 20 B IPv4 + 20 B TCP + 12 B timestamp option.
pub const TCP_IP_HEADER_BYTES: u32 = 52;
/// IP MTU of every host interface (Ethernet).
pub const MTU_BYTES: u32 = 1500;
/// MSS with timestamps: 1500 − 52 = 1448 payload bytes per full segment (Linux
/// `tcp_current_mss`, which subtracts the options' length from the MSS).
pub const MSS_BYTES: u32 = MTU_BYTES - TCP_IP_HEADER_BYTES;
/// Payload of an unresponsive CBR (UDP-like) datagram: 1500 − 20 B IP − 8 B UDP.
pub const CBR_PAYLOAD_BYTES: u32 = MTU_BYTES - 28;
/// Ethernet header: the `fq` qdisc paces on `qdisc_pkt_len`, which at a device's egress
/// covers the MAC header too (`fq_dequeue`; for a GSO packet `qdisc_pkt_len_init` counts every
/// segment's headers): 1448 + 52 + 14 = 1514 bytes per full segment.
pub const ETH_HEADER_BYTES: u32 = 14;

pub mod flags {
    /// Congestion Window Reduced (RFC 3168 §6.1.2), on the first new data segment after a
    /// reduction.
    pub const CWR: u8 = 1 << 0;
    /// The segment is a retransmission.
    pub const RETRANS: u8 = 1 << 1;
    /// PSH, on the last segment of every skb of two or more segments: Linux forces it on
    /// GSO packets "to expedite GRO flush at receiver" (net/ipv4/tcp_output.c
    /// `__tcp_transmit_skb`, commit 051ba67447de "tcp: force a PSH flag on TSO packets").
    pub const PSH: u8 = 1 << 2;
}

/// A data segment.
#[derive(Clone, Copy, Debug)]
pub struct DataPkt {
    pub flow: u32,
    /// Segment number (the simulator numbers segments, not bytes).
    pub seq: u32,
    /// Payload bytes (MSS except for the last segment of a finite flow).
    pub payload: u32,
    /// IP packet length: payload + 52.
    pub wire_len: u32,
    pub ecn: Ecn,
    pub flags: u8,
    /// Index of the hop the packet is at on its route.
    pub hop: u8,
    /// Time the packet entered the current queue.
    pub enqueue_ns: Nanos,
    /// PPV/CSAQM packet value (0 = none).
    pub value: u32,
    /// TCP timestamp option TSval: the sender's clock in ms (RFC 7323).
    pub tsval: u32,
}

/// Maximum SACK blocks per ACK: 3 with the timestamp option (RFC 2018 §3, 40 B of options).
pub const MAX_SACK_BLOCKS: usize = 3;

/// An acknowledgment.
#[derive(Clone, Copy, Debug)]
pub struct AckPkt {
    pub flow: u32,
    /// Cumulative ACK: the next segment the receiver expects (rcv_nxt).
    pub ack: u32,
    /// SACK blocks `[start, end)` in segments, most recent first (RFC 2018 §4).
    pub sack: [(u32, u32); MAX_SACK_BLOCKS],
    pub n_sack: u8,
    /// ECN-Echo flag (classic RFC 3168 or DCTCP-style state machine).
    pub ece: bool,
    /// Accurate ECN: running count of CE-marked segments received (AccECN ACE, unwrapped).
    pub ce_count: u32,
    /// TCP timestamp option TSecr: the TS.Recent echoed (RFC 7323 §4.3), ms.
    pub tsecr: u32,
    pub wire_len: u32,
    pub hop: u8,
    pub enqueue_ns: Nanos,
}

impl AckPkt {
    pub fn sack_blocks(&self) -> &[(u32, u32)] {
        &self.sack[..self.n_sack as usize]
    }
}

impl aqm::Packet for DataPkt {
    #[inline]
    fn wire_len(&self) -> u32 {
        self.wire_len
    }
    #[inline]
    fn ecn(&self) -> Ecn {
        self.ecn
    }
    #[inline]
    fn set_ce(&mut self) {
        self.ecn = Ecn::Ce;
    }
    #[inline]
    fn flow_key(&self) -> u64 {
        self.flow as u64
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

impl aqm::Packet for AckPkt {
    fn wire_len(&self) -> u32 {
        self.wire_len
    }
    fn ecn(&self) -> Ecn {
        Ecn::NotEct
    }
    fn set_ce(&mut self) {}
    fn flow_key(&self) -> u64 {
        self.flow as u64
    }
    fn enqueue_ns(&self) -> Nanos {
        self.enqueue_ns
    }
    fn set_enqueue_ns(&mut self, now: Nanos) {
        self.enqueue_ns = now;
    }
}

/// Wire length of an ACK: 52 B of headers plus the SACK option (2 B kind/length + 8 B per
/// block, padded to 4 B with NOPs as Linux does: `tcp_options_write`).
pub fn ack_wire_len(n_sack: usize) -> u32 {
    if n_sack == 0 {
        TCP_IP_HEADER_BYTES
    } else {
        TCP_IP_HEADER_BYTES + 4 + 8 * n_sack as u32
    }
}
