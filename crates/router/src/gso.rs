//! TCP/IPv4 super-packets: the virtio-net header a TUN device with `IFF_VNET_HDR` puts before
//! every packet, the segmenter that cuts a GSO super-packet into the MTU-sized segments a wire
//! would carry, and the coalescer that writes consecutive segments of one flow back as one
//! super-packet (what the receiver's GRO would have made of them).
//!
//! Sources: include/uapi/linux/virtio_net.h (`struct virtio_net_hdr`, its flags and GSO
//! types; native byte order for a TUN device without `TUNSETVNETLE/BE`,
//! Documentation/networking/tuntap.rst), net/ipv4/tcp_offload.c `tcp_gso_segment` (segment k
//! carries sequence number seq + k·mss; FIN and PSH only on the last segment, CWR only on the
//! first), net/ipv4/af_inet.c `inet_gso_segment` (every segment gets the IP header with its own
//! total length and IP ID id + k, and a fresh header checksum; the TOS byte, ECN included, is
//! copied to every segment), net/ipv4/tcp_offload.c `tcp_gro_receive` and af_inet.c
//! `inet_gro_receive` (which segments GRO merges: the rules of [`Coalescer`]), RFC 9293 §3.1
//! and RFC 1071 (the TCP checksum over the pseudo-header).
//!
//! The segmenter computes each segment's TCP checksum in full (where the kernel adjusts the
//! super-packet's incrementally): the result is the same for a correct input, and a segment
//! leaves the router with a complete checksum whether its super-packet's was complete or
//! partial (`VIRTIO_NET_HDR_F_NEEDS_CSUM`).

use crate::ipv4::{header_checksum, ones_sum, MIN_HEADER_BYTES, PROTO_TCP};

/// `sizeof(struct virtio_net_hdr)`: the header a TUN device with `IFF_VNET_HDR` reads and
/// writes before every packet (the default `TUNSETVNETHDRSZ`).
pub const VNET_HDR_LEN: usize = 10;
/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the checksum at `csum_start + csum_offset` holds only the
/// pseudo-header sum; the rest is to be summed from `csum_start` to the end.
pub const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_F_DATA_VALID`: the checksum is known good (the kernel's CHECKSUM_UNNECESSARY).
pub const F_DATA_VALID: u8 = 2;
pub const GSO_NONE: u8 = 0;
pub const GSO_TCPV4: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_ECN`: the super-packet's first segment carries CWR (SKB_GSO_TCP_ECN).
pub const GSO_ECN: u8 = 0x80;

/// TCP flag bits (byte 13 of the header, RFC 9293 §3.1; CWR/ECE RFC 3168 §6.1).
pub const TCP_FIN: u8 = 0x01;
pub const TCP_SYN: u8 = 0x02;
pub const TCP_RST: u8 = 0x04;
pub const TCP_PSH: u8 = 0x08;
pub const TCP_URG: u8 = 0x20;
pub const TCP_CWR: u8 = 0x80;

/// Largest IPv4 packet (the 16-bit total length).
pub const MAX_IP_LEN: usize = 65_535;

/// `struct virtio_net_hdr`, fields in native byte order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VnetHdr {
    pub flags: u8,
    pub gso_type: u8,
    pub hdr_len: u16,
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

impl VnetHdr {
    pub fn parse(b: &[u8]) -> Option<VnetHdr> {
        let b: &[u8; VNET_HDR_LEN] = b.get(..VNET_HDR_LEN)?.try_into().ok()?;
        let u = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        Some(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        })
    }

    pub fn bytes(&self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0u8; VNET_HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_ne_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_ne_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_ne_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_ne_bytes());
        b
    }
}

/// Why a super-packet cannot be segmented (the router drops it and counts `gso_refused`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// A GSO type other than TCPV4 (the router does not offer TSO6 or UFO to the kernel).
    GsoType(u8),
    /// `gso_size` 0.
    ZeroGsoSize,
    /// Not a valid, unfragmented IPv4 packet carrying a whole TCP header.
    NotTcpIpv4,
}

/// Offsets of a TCP/IPv4 packet's headers, checked against the buffer.
#[derive(Clone, Copy, Debug)]
struct TcpIpv4 {
    ihl: usize,
    thl: usize,
    total: usize,
}

fn tcp_ipv4(p: &[u8]) -> Option<TcpIpv4> {
    if p.len() < MIN_HEADER_BYTES || p[0] >> 4 != 4 || p[9] != PROTO_TCP {
        return None;
    }
    let ihl = (p[0] & 0x0f) as usize * 4;
    let total = u16::from_be_bytes([p[2], p[3]]) as usize;
    let frag = u16::from_be_bytes([p[6], p[7]]);
    if ihl < MIN_HEADER_BYTES || total > p.len() || frag & 0x3fff != 0 || ihl + 20 > total {
        return None;
    }
    let thl = (p[ihl + 12] >> 4) as usize * 4;
    if thl < 20 || ihl + thl > total {
        return None;
    }
    Some(TcpIpv4 { ihl, thl, total })
}

/// The ones'-complement sum of the TCP pseudo-header (RFC 9293 §3.1: source, destination,
/// zero + protocol, TCP length), folded, not complemented.
fn pseudo_sum(ip: &[u8], tcp_len: usize) -> u16 {
    let mut s = [0u8; 12];
    s[..8].copy_from_slice(&ip[12..20]);
    s[9] = PROTO_TCP;
    s[10..12].copy_from_slice(&(tcp_len as u16).to_be_bytes());
    ones_sum(&s)
}

fn add16(a: u16, b: u16) -> u16 {
    let s = a as u32 + b as u32;
    ((s & 0xffff) + (s >> 16)) as u16
}

/// Fill in the TCP checksum of a TCP/IPv4 packet whose headers are valid.
fn tcp_checksum_fill(p: &mut [u8], ihl: usize, total: usize) {
    p[ihl + 16] = 0;
    p[ihl + 17] = 0;
    let sum = add16(pseudo_sum(p, total - ihl), ones_sum(&p[ihl..total]));
    p[ihl + 16..ihl + 18].copy_from_slice(&(!sum).to_be_bytes());
}

fn ip_checksum_fill(p: &mut [u8], ihl: usize) {
    let c = header_checksum(&p[..ihl]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
}

/// Complete a partial checksum (`VIRTIO_NET_HDR_F_NEEDS_CSUM`): the ones'-complement sum from
/// `start` to the packet's end — the field already holds the pseudo-header sum — stored
/// complemented at `start + offset`; 0 is sent as 0xFFFF (net/core/dev.c `skb_checksum_help`,
/// CSUM_MANGLED_0, which UDP needs: RFC 768 reserves 0 for "no checksum"). The packet ends at
/// its IP total length. False, nothing changed, if the offsets lie outside it.
pub fn complete_checksum(p: &mut [u8], start: usize, offset: usize) -> bool {
    let end = if p.len() >= 4 && p[0] >> 4 == 4 {
        (u16::from_be_bytes([p[2], p[3]]) as usize).min(p.len())
    } else {
        p.len()
    };
    if start >= end || start + offset + 2 > end {
        return false;
    }
    let sum = ones_sum(&p[start..end]);
    let c = match !sum {
        0 => 0xffff,
        c => c,
    };
    p[start + offset..start + offset + 2].copy_from_slice(&c.to_be_bytes());
    true
}

/// Cut the TCP/IPv4 super-packet `p` into segments of at most `mss` payload bytes, as the
/// kernel's GSO would before a wire: each segment is written into a buffer from `take` and
/// handed to `emit`, in sequence order. Returns the number of segments. A packet that already
/// fits is one segment (its checksums completed).
pub fn segment(
    p: &[u8],
    mss: u16,
    mut take: impl FnMut() -> Vec<u8>,
    mut emit: impl FnMut(Vec<u8>),
) -> Result<usize, Refused> {
    if mss == 0 {
        return Err(Refused::ZeroGsoSize);
    }
    let h = tcp_ipv4(p).ok_or(Refused::NotTcpIpv4)?;
    if ones_sum(&p[..h.ihl]) != 0xffff {
        return Err(Refused::NotTcpIpv4);
    }
    let hl = h.ihl + h.thl;
    let payload = &p[hl..h.total];
    let id0 = u16::from_be_bytes([p[4], p[5]]);
    let seq0 = u32::from_be_bytes([p[h.ihl + 4], p[h.ihl + 5], p[h.ihl + 6], p[h.ihl + 7]]);
    let flags = p[h.ihl + 13];
    let n = payload.len().div_ceil(mss as usize).max(1);
    for k in 0..n {
        let chunk = payload
            .get(k * mss as usize..((k + 1) * mss as usize).min(payload.len()))
            .unwrap_or(&[]);
        let total = hl + chunk.len();
        let mut s = take();
        s.clear();
        s.extend_from_slice(&p[..hl]);
        s.extend_from_slice(chunk);
        s[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        s[4..6].copy_from_slice(&id0.wrapping_add(k as u16).to_be_bytes());
        ip_checksum_fill(&mut s, h.ihl);
        let t = h.ihl;
        s[t + 4..t + 8]
            .copy_from_slice(&seq0.wrapping_add((k * mss as usize) as u32).to_be_bytes());
        let mut f = flags;
        if k + 1 < n {
            f &= !(TCP_FIN | TCP_PSH);
        }
        if k > 0 {
            f &= !TCP_CWR;
        }
        s[t + 13] = f;
        tcp_checksum_fill(&mut s, h.ihl, total);
        emit(s);
    }
    Ok(n)
}

/// Groups consecutive departures into super-packets by the rules the receiver's GRO applies
/// (`inet_gro_receive`, `tcp_gro_receive`): same flow; a 20-byte IP header with the same TOS
/// (so a CE-marked segment never joins unmarked ones), TTL and flags, the IP ID one more;
/// identical TCP header apart from sequence number, checksum and the flags GRO lets differ;
/// the sequence contiguous; every segment but the last exactly as long as the first, the last
/// no longer and not empty; nothing after a segment with FIN, PSH, URG, RST or SYN; no CWR
/// but on the first; the whole below the receiver's `gro_max_size` (`skb_gro_receive` stops
/// at `len >= gro_max_size`, net/core/gro.c) and within an IPv4 total length.
#[derive(Debug)]
pub struct Coalescer {
    /// IP length of the group so far.
    total: usize,
    mss: usize,
    count: usize,
    /// A group's IP length stays below this.
    limit: usize,
}

impl Default for Coalescer {
    /// GRO's default limit (`GRO_LEGACY_MAX_SIZE`, 65 536, include/linux/netdevice.h).
    fn default() -> Self {
        Coalescer::new(65_536)
    }
}

fn u32_at(p: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]])
}

impl Coalescer {
    /// Groups stay below `gro_max_bytes` of IP packet (and within 65 535, IPv4's limit).
    pub fn new(gro_max_bytes: usize) -> Coalescer {
        Coalescer {
            total: 0,
            mss: 0,
            count: 0,
            limit: gro_max_bytes.min(MAX_IP_LEN + 1),
        }
    }

    /// Start a group with `first`; false if it can head no group (not TCP/IPv4 with a 20-byte
    /// IP header, or no payload), in which case it is written alone.
    pub fn start(&mut self, first: &[u8]) -> bool {
        self.count = 0;
        let Some(h) = tcp_ipv4(first) else {
            return false;
        };
        let len = h.total - h.ihl - h.thl;
        if h.ihl != MIN_HEADER_BYTES
            || len == 0
            || first[h.ihl + 13] & (TCP_SYN | TCP_RST | TCP_URG) != 0
        {
            return false;
        }
        self.total = h.total;
        self.mss = len;
        self.count = 1;
        true
    }

    /// Whether `next` may follow `prev` (the group's last packet) in the group headed by
    /// `first`; if so it is counted in.
    pub fn push(&mut self, first: &[u8], prev: &[u8], next: &[u8]) -> bool {
        if self.count == 0 {
            return false;
        }
        let Some(h) = tcp_ipv4(next) else {
            return false;
        };
        let hl = h.ihl + h.thl;
        let len = h.total - hl;
        let ok = h.ihl == MIN_HEADER_BYTES
            && hl <= first.len()
            && len > 0
            && len <= self.mss
            && prev.len() >= hl
            && (u16::from_be_bytes([prev[2], prev[3]]) as usize).saturating_sub(hl) == self.mss
            && self.total + len < self.limit
            // IP: TOS, flags and offset, TTL, protocol, addresses as the first's; ID one more.
            && next[1] == first[1]
            && next[6..10] == first[6..10]
            && next[12..20] == first[12..20]
            && u16::from_be_bytes([next[4], next[5]]) == u16::from_be_bytes([prev[4], prev[5]]).wrapping_add(1)
            // TCP: ports, ack, header length, window, urgent pointer, options as the first's.
            && next[20..24] == first[20..24]
            && next[28..33] == first[28..33]
            && next[34..36] == first[34..36]
            && next[38..hl] == first[38..hl]
            && u32_at(next, 24) == u32_at(prev, 24).wrapping_add(self.mss as u32)
            && prev[33] & (TCP_FIN | TCP_PSH | TCP_URG | TCP_RST | TCP_SYN) == 0
            && next[33] & TCP_CWR == 0
            && (next[33] ^ first[33]) & !(TCP_CWR | TCP_FIN | TCP_PSH) == 0;
        if ok {
            self.total += len;
            self.count += 1;
        }
        ok
    }

    /// Segments in the group.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The group's super-packet header (IP + TCP, into `hdr`) and its virtio-net header, for
    /// a group of more than one segment: the first segment's headers with the whole length,
    /// FIN and PSH of the last segment, a partial checksum (the pseudo-header sum, as
    /// `__tcp_v4_send_check` leaves it for CHECKSUM_PARTIAL) and GSO type TCPV4 with
    /// `gso_size` the first segment's payload (plus `GSO_ECN` if it carries CWR). The payloads
    /// follow the header in the write.
    pub fn super_header(&self, first: &[u8], last: &[u8], hdr: &mut Vec<u8>) -> VnetHdr {
        let thl = (first[32] >> 4) as usize * 4;
        let hl = MIN_HEADER_BYTES + thl;
        hdr.clear();
        hdr.extend_from_slice(&first[..hl]);
        hdr[2..4].copy_from_slice(&(self.total as u16).to_be_bytes());
        ip_checksum_fill(hdr, MIN_HEADER_BYTES);
        hdr[33] = first[33] | (last[33] & (TCP_FIN | TCP_PSH));
        let ps = pseudo_sum(hdr, self.total - MIN_HEADER_BYTES);
        hdr[36..38].copy_from_slice(&ps.to_be_bytes());
        VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4 | if first[33] & TCP_CWR != 0 { GSO_ECN } else { 0 },
            hdr_len: hl as u16,
            gso_size: self.mss as u16,
            csum_start: MIN_HEADER_BYTES as u16,
            csum_offset: 16,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The RFC 1071 checksum written out independently of the module: 32-bit accumulation of
    /// big-endian 16-bit words, odd byte padded, carries folded, complemented.
    fn rfc1071(data: &[u8]) -> u16 {
        let mut sum: u32 = 0;
        let mut i = 0;
        while i + 1 < data.len() {
            sum += ((data[i] as u32) << 8) | data[i + 1] as u32;
            i += 2;
        }
        if i < data.len() {
            sum += (data[i] as u32) << 8;
        }
        while sum > 0xffff {
            sum = (sum >> 16) + (sum & 0xffff);
        }
        !(sum as u16)
    }

    /// TCP checksum check by RFC 9293 §3.1: the pseudo-header (src, dst, 0, 6, TCP length)
    /// followed by the segment sums to 0 complemented if the stored checksum is right.
    fn tcp_ok(p: &[u8]) -> bool {
        let total = u16::from_be_bytes([p[2], p[3]]) as usize;
        let mut v = Vec::new();
        v.extend_from_slice(&p[12..20]);
        v.extend_from_slice(&[0, 6]);
        v.extend_from_slice(&((total - 20) as u16).to_be_bytes());
        v.extend_from_slice(&p[20..total]);
        rfc1071(&v) == 0
    }

    fn ip_ok(p: &[u8]) -> bool {
        rfc1071(&p[..20]) == 0
    }

    /// A TCP/IPv4 packet from 10.77.1.2:40000 to 10.77.200.2:5201 with a 12-byte timestamp
    /// option, IP ID `id`, sequence `seq`, `flags`, TOS `tos`, the payload bytes `0, 1, 2, …`
    /// (mod 251) of length `len`, both checksums filled by the test's own routine.
    fn tcp_packet(tos: u8, id: u16, seq: u32, flags: u8, len: usize) -> Vec<u8> {
        let total = 20 + 32 + len;
        let mut p = vec![
            0x45,
            tos,
            (total >> 8) as u8,
            total as u8,
            (id >> 8) as u8,
            id as u8,
            0x40,
            0,
            63,
            6,
            0,
            0,
            10,
            77,
            1,
            2,
            10,
            77,
            200,
            2,
        ];
        p.extend_from_slice(&40000u16.to_be_bytes());
        p.extend_from_slice(&5201u16.to_be_bytes());
        p.extend_from_slice(&seq.to_be_bytes());
        p.extend_from_slice(&0x1122_3344u32.to_be_bytes()); // ack
        p.extend_from_slice(&[0x80, flags, 0x01, 0xf5, 0, 0, 0, 0]); // doff 8, flags, window 501, csum, urg
        p.extend_from_slice(&[1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9]); // NOP NOP TS(7, 9)
        p.extend((0..len).map(|i| (i % 251) as u8));
        let c = rfc1071(&p[..20]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        let mut v = Vec::new();
        v.extend_from_slice(&p[12..20]);
        v.extend_from_slice(&[0, 6]);
        v.extend_from_slice(&((total - 20) as u16).to_be_bytes());
        v.extend_from_slice(&p[20..]);
        let c = rfc1071(&v);
        p[36..38].copy_from_slice(&c.to_be_bytes());
        p
    }

    fn split(p: &[u8], mss: u16) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        segment(p, mss, Vec::new, |s| out.push(s)).unwrap();
        out
    }

    #[test]
    fn a_three_segment_super_packet() {
        // 1448 + 1448 + 104 payload bytes, mss 1448, seq 1000, IP ID 0xfffe (wraps), flags
        // CWR|ACK|PSH|FIN: by tcp_gso_segment, seq 1000, 2448, 3896; lengths 52 + 1448, 1500,
        // 156; CWR only on the first, PSH and FIN only on the last, ACK on all; IDs fffe, ffff, 0.
        let flags = TCP_CWR | 0x10 | TCP_PSH | TCP_FIN;
        let sup = tcp_packet(0x02, 0xfffe, 1000, flags, 3000);
        let segs = split(&sup, 1448);
        assert_eq!(segs.len(), 3);
        let seqs: Vec<u32> = segs.iter().map(|s| u32_at(s, 24)).collect();
        assert_eq!(seqs, [1000, 2448, 3896]);
        let lens: Vec<usize> = segs
            .iter()
            .map(|s| u16::from_be_bytes([s[2], s[3]]) as usize)
            .collect();
        assert_eq!(lens, [1500, 1500, 156]);
        assert_eq!(segs.iter().map(Vec::len).collect::<Vec<_>>(), lens);
        let ids: Vec<u16> = segs
            .iter()
            .map(|s| u16::from_be_bytes([s[4], s[5]]))
            .collect();
        assert_eq!(ids, [0xfffe, 0xffff, 0]);
        assert_eq!(segs[0][33], TCP_CWR | 0x10);
        assert_eq!(segs[1][33], 0x10);
        assert_eq!(segs[2][33], 0x10 | TCP_PSH | TCP_FIN);
        for (k, s) in segs.iter().enumerate() {
            assert!(ip_ok(s), "IP header checksum of segment {k}");
            assert!(tcp_ok(s), "TCP checksum of segment {k}");
            assert_eq!(s[1], 0x02, "TOS copied");
            assert_eq!(&s[20..24], &sup[20..24], "ports");
            assert_eq!(&s[28..33], &sup[28..33], "ack and header length");
            assert_eq!(&s[40..52], &sup[40..52], "options copied");
            // The payload is the super-packet's, cut at k·1448.
            let want: Vec<u8> = (k * 1448..(k * 1448 + s.len() - 52))
                .map(|i| (i % 251) as u8)
                .collect();
            assert_eq!(&s[52..], &want[..]);
        }
    }

    #[test]
    fn ce_on_a_super_packet_lands_on_every_segment() {
        let sup = tcp_packet(0x03, 1, 5, 0x10, 4000);
        let segs = split(&sup, 1448);
        assert_eq!(segs.len(), 3);
        assert!(segs.iter().all(|s| s[1] & 3 == 3 && ip_ok(s) && tcp_ok(s)));
    }

    #[test]
    fn a_partial_checksum_is_completed() {
        // NEEDS_CSUM: the field holds the folded pseudo-header sum (__tcp_v4_send_check for
        // CHECKSUM_PARTIAL); completing it must give the checksum the test computes in full.
        let full = tcp_packet(0, 9, 77, 0x18, 700);
        let mut partial = full.clone();
        let mut ph = Vec::new();
        ph.extend_from_slice(&full[12..20]);
        ph.extend_from_slice(&[0, 6]);
        ph.extend_from_slice(&((full.len() - 20) as u16).to_be_bytes());
        partial[36..38].copy_from_slice(&(!rfc1071(&ph)).to_be_bytes());
        assert!(complete_checksum(&mut partial, 20, 16));
        assert_eq!(partial, full);
        // Offsets outside the packet change nothing.
        let mut p = full.clone();
        assert!(!complete_checksum(&mut p, 20, full.len()));
        assert_eq!(p, full);
    }

    #[test]
    fn refusals() {
        let sup = tcp_packet(0, 1, 1, 0x10, 3000);
        assert_eq!(
            segment(&sup, 0, Vec::new, |_| {}),
            Err(Refused::ZeroGsoSize)
        );
        let mut udp = sup.clone();
        udp[9] = 17;
        assert_eq!(
            segment(&udp, 1448, Vec::new, |_| {}),
            Err(Refused::NotTcpIpv4)
        );
        let mut bad = sup.clone();
        bad[8] = 1; // TTL changed without the header checksum
        assert_eq!(
            segment(&bad, 1448, Vec::new, |_| {}),
            Err(Refused::NotTcpIpv4)
        );
        assert_eq!(
            segment(&sup[..30], 1448, Vec::new, |_| {}),
            Err(Refused::NotTcpIpv4)
        );
    }

    #[test]
    fn the_virtio_header_round_trips_in_native_order() {
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4 | GSO_ECN,
            hdr_len: 52,
            gso_size: 1448,
            csum_start: 20,
            csum_offset: 16,
        };
        let b = h.bytes();
        assert_eq!(b[0], 1);
        assert_eq!(b[1], 0x81);
        assert_eq!(u16::from_ne_bytes([b[4], b[5]]), 1448);
        assert_eq!(VnetHdr::parse(&b), Some(h));
        assert_eq!(VnetHdr::parse(&b[..9]), None);
    }

    /// Segment then coalesce: the group re-forms the super-packet — the whole length, the
    /// last segment's FIN/PSH, the first's CWR (GSO_ECN) — and its partial checksum completes
    /// to the full checksum the test computes over the rebuilt packet.
    #[test]
    fn coalescing_the_segments_rebuilds_the_super_packet() {
        let flags = TCP_CWR | 0x10 | TCP_PSH;
        let sup = tcp_packet(0x02, 100, 1000, flags, 3000);
        let segs = split(&sup, 1448);
        let mut c = Coalescer::default();
        assert!(c.start(&segs[0]));
        assert!(c.push(&segs[0], &segs[0], &segs[1]));
        assert!(c.push(&segs[0], &segs[1], &segs[2]));
        assert_eq!(c.count(), 3);
        let mut hdr = Vec::new();
        let v = c.super_header(&segs[0], &segs[2], &mut hdr);
        assert_eq!(
            v,
            VnetHdr {
                flags: F_NEEDS_CSUM,
                gso_type: GSO_TCPV4 | GSO_ECN,
                hdr_len: 52,
                gso_size: 1448,
                csum_start: 20,
                csum_offset: 16
            }
        );
        let mut rebuilt = hdr.clone();
        for s in &segs {
            rebuilt.extend_from_slice(&s[52..]);
        }
        assert_eq!(rebuilt.len(), sup.len());
        assert!(ip_ok(&rebuilt));
        assert_eq!(rebuilt[33], flags);
        assert!(complete_checksum(&mut rebuilt, 20, 16));
        assert_eq!(rebuilt, sup);
    }

    #[test]
    fn what_breaks_a_group() {
        let a = tcp_packet(0x02, 10, 0, 0x10, 1448);
        let ok = tcp_packet(0x02, 11, 1448, 0x10, 1448);
        let mut c = Coalescer::default();
        let can = |next: &[u8]| {
            let mut c = Coalescer::default();
            c.start(&a) && c.push(&a, &a, next)
        };
        assert!(can(&ok));
        assert!(!can(&tcp_packet(0x03, 11, 1448, 0x10, 1448)), "CE differs");
        assert!(
            !can(&tcp_packet(0x02, 12, 1448, 0x10, 1448)),
            "IP ID not +1"
        );
        assert!(
            !can(&tcp_packet(0x02, 11, 1449, 0x10, 1448)),
            "sequence gap"
        );
        assert!(
            !can(&tcp_packet(0x02, 11, 1448, 0x10 | TCP_CWR, 1448)),
            "CWR after the first"
        );
        assert!(
            !can(&tcp_packet(0x02, 11, 1448, 0x10, 1449)),
            "longer than the first"
        );
        assert!(!can(&tcp_packet(0x02, 11, 1448, 0x10, 0)), "empty");
        let mut other_ts = ok.clone();
        other_ts[51] ^= 1;
        assert!(!can(&other_ts), "options differ");
        let mut other_port = ok.clone();
        other_port[21] ^= 1;
        assert!(!can(&other_port), "another flow");
        // After a PSH nothing joins; a short segment ends the group too.
        let psh = tcp_packet(0x02, 10, 0, 0x18, 1448);
        assert!(c.start(&psh) && !c.push(&psh, &psh, &ok));
        let short = tcp_packet(0x02, 11, 1448, 0x10, 1000);
        assert!(c.start(&a) && c.push(&a, &a, &short));
        let third = tcp_packet(0x02, 12, 2448, 0x10, 1000);
        assert!(
            !c.push(&a, &short, &third),
            "the previous segment was already the short last one"
        );
        assert_eq!(c.count(), 2);
        // The GRO limit: 1 000 + 52 + 1 000 bytes (or more) must stay below it.
        let s1 = tcp_packet(0x02, 10, 0, 0x10, 1000);
        let s2 = tcp_packet(0x02, 11, 1000, 0x10, 1000);
        let mut small = Coalescer::new(2052);
        assert!(
            small.start(&s1) && !small.push(&s1, &s1, &s2),
            "2052 B is not below 2052"
        );
        let mut fits = Coalescer::new(2053);
        assert!(fits.start(&s1) && fits.push(&s1, &s1, &s2));
        // A pure ACK heads no group.
        assert!(!c.start(&tcp_packet(0x02, 10, 0, 0x10, 0)));
    }
}
