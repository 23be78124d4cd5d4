//! The IPv4 wire format, as much of it as the router needs: a parser that never panics, the
//! header checksum, and the ECN rewrite with an incremental checksum update.
//!
//! Sources: RFC 791 §3.1 (header layout, IHL, total length, flags and fragment offset, header
//! checksum), RFC 1071 (the ones'-complement checksum), RFC 1624 §3 eqn. 3 (incremental
//! update `HC' = ~(~HC + ~m + m')`), RFC 3168 §5 (the ECN field: the two low bits of the
//! TOS byte), RFC 768 / RFC 9293 §3.1 (UDP and TCP ports: the first four bytes of either
//! header).
//!
//! # What the parser does with each kind of input (the router's documented outcome)
//!
//! | input | [`Parse`] | the router |
//! |---|---|---|
//! | empty buffer, or version ≠ 4 (IPv6 included) | `NotIpv4` | forwards unchanged, unqueued, counts `non_ipv4` |
//! | fewer than 20 bytes | `Malformed(TooShort)` | forwards unchanged, unqueued, counts `malformed` |
//! | IHL < 5 | `Malformed(BadIhl)` | same |
//! | IHL·4 beyond the buffer | `Malformed(HeaderBeyondBuffer)` | same |
//! | total length < IHL·4 | `Malformed(TotalLengthTooSmall)` | same |
//! | total length beyond the buffer | `Malformed(TotalLengthBeyondBuffer)` | same |
//! | header checksum wrong | `Malformed(BadChecksum)` | same (the kernel's `ip_rcv` drops it anyway) |
//! | TCP/UDP, unfragmented, < 4 bytes after the header | `Malformed(TruncatedPorts)` | same |
//! | a fragment (MF set or offset ≠ 0) | `Ipv4`, ports 0 | queued; every fragment of a datagram is one flow (ports exist only in the first) |
//! | another protocol (ICMP, ...) | `Ipv4`, ports 0 | queued like any packet of its class |
//! | TCP or UDP | `Ipv4` with ports | queued |
//!
//! Bytes after `total length` (link padding) are tolerated: the packet's length for the queue
//! and link is the IP total length, and the buffer is forwarded as read.

use aqm::Ecn;

/// Smallest IPv4 header, bytes (RFC 791: IHL ≥ 5 words).
pub const MIN_HEADER_BYTES: usize = 20;
/// IP protocol numbers (IANA): TCP 6, UDP 17.
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;

/// Why a buffer is not a usable IPv4 packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformed {
    TooShort,
    BadIhl,
    HeaderBeyondBuffer,
    TotalLengthTooSmall,
    TotalLengthBeyondBuffer,
    BadChecksum,
    TruncatedPorts,
}

/// The 5-tuple that keys a flow (ports 0 for protocols without them and for fragments).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FiveTuple {
    pub proto: u8,
    pub src: [u8; 4],
    pub sport: u16,
    pub dst: [u8; 4],
    pub dport: u16,
}

impl FiveTuple {
    /// The tuple packed into 104 bits (proto 8 | src 32 | dst 32 | sport 16 | dport 16).
    #[inline]
    pub fn packed(&self) -> u128 {
        ((self.proto as u128) << 96)
            | ((u32::from_be_bytes(self.src) as u128) << 64)
            | ((u32::from_be_bytes(self.dst) as u128) << 32)
            | ((self.sport as u128) << 16)
            | self.dport as u128
    }

    /// A deterministic 64-bit hash of the tuple (the SplitMix64 finalizer over both halves;
    /// the same function as `link::seed::derive_seed`'s mixer), so flow keys — and hence
    /// FQ-CoDel's bucket choice — are the same from run to run and machine to machine.
    #[inline]
    pub fn hash(&self) -> u64 {
        let p = self.packed();
        mix64(mix64(p as u64) ^ (p >> 64) as u64)
    }
}

#[inline]
fn mix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// What the router needs from a valid IPv4 header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub tuple: FiveTuple,
    /// RFC 791 total length: the packet's length in the queue and on the link.
    pub total_len: u16,
    pub ecn: Ecn,
    /// MF set or fragment offset ≠ 0.
    pub fragment: bool,
}

/// The parser's verdict on a buffer (see the module table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parse {
    Ipv4(Header),
    NotIpv4,
    Malformed(Malformed),
}

/// The ECN codepoint of a TOS byte (RFC 3168 §5).
#[inline]
pub fn ecn_of(tos: u8) -> Ecn {
    match tos & 0b11 {
        0b00 => Ecn::NotEct,
        0b01 => Ecn::Ect1,
        0b10 => Ecn::Ect0,
        _ => Ecn::Ce,
    }
}

/// Parse `buf` as an IPv4 packet. Never panics: every index is checked against `buf.len()`.
pub fn parse(buf: &[u8]) -> Parse {
    let Some(&b0) = buf.first() else {
        return Parse::NotIpv4;
    };
    if b0 >> 4 != 4 {
        return Parse::NotIpv4;
    }
    if buf.len() < MIN_HEADER_BYTES {
        return Parse::Malformed(Malformed::TooShort);
    }
    let ihl = (b0 & 0x0f) as usize * 4;
    if ihl < MIN_HEADER_BYTES {
        return Parse::Malformed(Malformed::BadIhl);
    }
    if ihl > buf.len() {
        return Parse::Malformed(Malformed::HeaderBeyondBuffer);
    }
    let total_len = u16::from_be_bytes([buf[2], buf[3]]);
    if (total_len as usize) < ihl {
        return Parse::Malformed(Malformed::TotalLengthTooSmall);
    }
    if total_len as usize > buf.len() {
        return Parse::Malformed(Malformed::TotalLengthBeyondBuffer);
    }
    // A header whose checksum verifies sums to 0xFFFF (RFC 1071 §1 (3)).
    if ones_sum(&buf[..ihl]) != 0xFFFF {
        return Parse::Malformed(Malformed::BadChecksum);
    }
    let frag = u16::from_be_bytes([buf[6], buf[7]]);
    // RFC 791: flags are the top 3 bits (MF = 0x2000), the offset the low 13.
    let fragment = frag & 0x2000 != 0 || frag & 0x1fff != 0;
    let proto = buf[9];
    let (mut sport, mut dport) = (0, 0);
    if (proto == PROTO_TCP || proto == PROTO_UDP) && !fragment {
        if (total_len as usize) < ihl + 4 {
            return Parse::Malformed(Malformed::TruncatedPorts);
        }
        sport = u16::from_be_bytes([buf[ihl], buf[ihl + 1]]);
        dport = u16::from_be_bytes([buf[ihl + 2], buf[ihl + 3]]);
    }
    Parse::Ipv4(Header {
        tuple: FiveTuple {
            proto,
            src: [buf[12], buf[13], buf[14], buf[15]],
            sport,
            dst: [buf[16], buf[17], buf[18], buf[19]],
            dport,
        },
        total_len,
        ecn: ecn_of(buf[1]),
        fragment,
    })
}

/// The ones'-complement sum of `bytes` as big-endian 16-bit words (RFC 1071 §4.1; an odd
/// last byte is padded with zero), folded to 16 bits.
pub fn ones_sum(bytes: &[u8]) -> u16 {
    let mut sum: u64 = 0;
    let mut chunks = bytes.chunks_exact(2);
    for w in &mut chunks {
        sum += u16::from_be_bytes([w[0], w[1]]) as u64;
    }
    if let [last] = chunks.remainder() {
        sum += (*last as u64) << 8;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    sum as u16
}

/// The header checksum computed from scratch (RFC 791: the complement of the ones'-complement
/// sum of the header with the checksum field taken as zero). `header` is IHL·4 bytes.
pub fn header_checksum(header: &[u8]) -> u16 {
    let mut sum = ones_sum(header) as u32;
    // Remove the stored checksum from the sum: adding its complement subtracts it.
    sum += !u16::from_be_bytes([header[10], header[11]]) as u32;
    sum = (sum & 0xFFFF) + (sum >> 16);
    sum = (sum & 0xFFFF) + (sum >> 16);
    !(sum as u16)
}

/// RFC 1624 §3 eqn. 3: the new checksum after the 16-bit word `old` became `new`,
/// `HC' = ~(~HC + ~m + m')`.
#[inline]
pub fn checksum_update(hc: u16, old: u16, new: u16) -> u16 {
    let mut sum = (!hc) as u32 + (!old) as u32 + new as u32;
    sum = (sum & 0xFFFF) + (sum >> 16);
    sum = (sum & 0xFFFF) + (sum >> 16);
    !(sum as u16)
}

/// Set CE in a valid IPv4 header in place, updating the checksum incrementally (the word
/// holding the TOS byte is bytes 0–1). Returns false (and changes nothing) if the buffer is
/// shorter than a header.
#[inline]
pub fn set_ce(buf: &mut [u8]) -> bool {
    if buf.len() < MIN_HEADER_BYTES {
        return false;
    }
    let old = u16::from_be_bytes([buf[0], buf[1]]);
    buf[1] |= Ecn::Ce as u8;
    let new = u16::from_be_bytes([buf[0], buf[1]]);
    let hc = u16::from_be_bytes([buf[10], buf[11]]);
    let hc = checksum_update(hc, old, new);
    buf[10..12].copy_from_slice(&hc.to_be_bytes());
    true
}

/// Turn ECT(0) into ECT(1) in a valid IPv4 header in place, updating the checksum
/// incrementally; any other codepoint is left alone. Returns whether it changed the packet.
#[inline]
pub fn ect0_to_ect1(buf: &mut [u8]) -> bool {
    if buf.len() < MIN_HEADER_BYTES || ecn_of(buf[1]) != Ecn::Ect0 {
        return false;
    }
    let old = u16::from_be_bytes([buf[0], buf[1]]);
    buf[1] = (buf[1] & !0b11) | Ecn::Ect1 as u8;
    let new = u16::from_be_bytes([buf[0], buf[1]]);
    let hc = u16::from_be_bytes([buf[10], buf[11]]);
    buf[10..12].copy_from_slice(&checksum_update(hc, old, new).to_be_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ect0_becomes_ect1_and_the_checksum_stays_valid() {
        for (ecn, changed) in [(0b10u8, true), (0b01, false), (0b11, false), (0b00, false)] {
            // DSCP CS1 (8 << 2) must survive.
            let mut buf = packet(
                (8 << 2) | ecn,
                6,
                [10, 77, 1, 2],
                [10, 77, 1, 3],
                &[0; 20],
                0,
            );
            assert_eq!(ect0_to_ect1(&mut buf), changed);
            // RFC 3168 §5: ECT(0) = 10, ECT(1) = 01.
            assert_eq!(buf[1] & 0b11, if changed { 0b01 } else { ecn });
            assert_eq!(buf[1] >> 2, 8);
            // A valid header sums to 0xffff with its checksum in place (RFC 1071).
            assert_eq!(ones_sum(&buf[..20]), 0xffff);
        }
    }

    /// A valid 20-byte IPv4 + `l4` header with its checksum filled in.
    pub(crate) fn packet(
        tos: u8,
        proto: u8,
        src: [u8; 4],
        dst: [u8; 4],
        l4: &[u8],
        frag: u16,
    ) -> Vec<u8> {
        let total = 20 + l4.len();
        let mut b = vec![
            0x45,
            tos,
            (total >> 8) as u8,
            total as u8,
            0x12,
            0x34,
            (frag >> 8) as u8,
            frag as u8,
            64,
            proto,
            0,
            0,
        ];
        b.extend_from_slice(&src);
        b.extend_from_slice(&dst);
        b.extend_from_slice(l4);
        let c = header_checksum(&b[..20]);
        b[10..12].copy_from_slice(&c.to_be_bytes());
        b
    }

    #[test]
    fn the_rfc1071_example_header_checksum() {
        // The classic worked example (a 20-byte header of a 60-byte packet from
        // 172.16.10.99 to 172.16.10.12, TTL 128, TCP): checksum 0xB1E6, by hand from the
        // ones'-complement sum 0x4E19 of the other nine words.
        let h = [
            0x45, 0x00, 0x00, 0x3c, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0xb1, 0xe6, 0xac, 0x10,
            0x0a, 0x63, 0xac, 0x10, 0x0a, 0x0c,
        ];
        assert_eq!(header_checksum(&h), 0xB1E6);
        assert_eq!(ones_sum(&h), 0xFFFF);
    }

    #[test]
    fn each_documented_outcome() {
        let tcp = packet(
            0x02,
            PROTO_TCP,
            [10, 77, 1, 2],
            [10, 77, 200, 2],
            &[0x9c, 0x41, 0x14, 0x51, 0, 0, 0, 0],
            0x4000,
        );
        match parse(&tcp) {
            Parse::Ipv4(h) => {
                assert_eq!(
                    h.tuple,
                    FiveTuple {
                        proto: 6,
                        src: [10, 77, 1, 2],
                        sport: 40001,
                        dst: [10, 77, 200, 2],
                        dport: 5201
                    }
                );
                assert_eq!(h.total_len, 28);
                assert_eq!(h.ecn, Ecn::Ect0);
                assert!(!h.fragment, "DF alone is not a fragment");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(parse(&[]), Parse::NotIpv4);
        assert_eq!(parse(&[0x60, 0, 0, 0]), Parse::NotIpv4, "IPv6");
        assert_eq!(parse(&tcp[..19]), Parse::Malformed(Malformed::TooShort));
        let mut b = tcp.clone();
        b[0] = 0x44;
        assert_eq!(parse(&b), Parse::Malformed(Malformed::BadIhl));
        b[0] = 0x4f; // 60-byte header in a 28-byte buffer
        assert_eq!(parse(&b), Parse::Malformed(Malformed::HeaderBeyondBuffer));
        let mut b = tcp.clone();
        b[3] = 19;
        assert_eq!(parse(&b), Parse::Malformed(Malformed::TotalLengthTooSmall));
        b[3] = 29;
        assert_eq!(
            parse(&b),
            Parse::Malformed(Malformed::TotalLengthBeyondBuffer)
        );
        let mut b = tcp.clone();
        b[8] = 63; // TTL changed without a checksum update
        assert_eq!(parse(&b), Parse::Malformed(Malformed::BadChecksum));
        let short = packet(0, PROTO_UDP, [1, 2, 3, 4], [5, 6, 7, 8], &[0, 1], 0);
        assert_eq!(parse(&short), Parse::Malformed(Malformed::TruncatedPorts));
        // A non-first fragment carries no ports: ports 0, queued as IPv4.
        let frag = packet(
            0,
            PROTO_UDP,
            [1, 2, 3, 4],
            [5, 6, 7, 8],
            &[0xAA, 0xBB, 0xCC, 0xDD],
            185,
        );
        match parse(&frag) {
            Parse::Ipv4(h) => assert!(h.fragment && h.tuple.sport == 0 && h.tuple.dport == 0),
            other => panic!("{other:?}"),
        }
        let icmp = packet(0, 1, [1, 2, 3, 4], [5, 6, 7, 8], &[8, 0, 0, 0], 0);
        assert!(matches!(parse(&icmp), Parse::Ipv4(h) if h.tuple.sport == 0 && h.tuple.proto == 1));
        // Trailing padding is tolerated; the length is the total length.
        let mut padded = tcp.clone();
        padded.extend_from_slice(&[0; 6]);
        assert!(matches!(parse(&padded), Parse::Ipv4(h) if h.total_len == 28));
    }

    #[test]
    fn set_ce_on_a_known_header() {
        // The RFC 1071 example header with TOS 0x02 (ECT(0)): the TOS word goes 0x4502 → 0x4503,
        // one more in the sum, so the checksum goes one less: by hand 0xB1E6 − 2 (TOS 0x02) −
        // 1 (CE) = 0xB1E3.
        let mut h = vec![
            0x45, 0x02, 0x00, 0x3c, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0, 0, 0xac, 0x10, 0x0a,
            0x63, 0xac, 0x10, 0x0a, 0x0c,
        ];
        let c = header_checksum(&h);
        assert_eq!(c, 0xB1E4);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        assert!(set_ce(&mut h));
        assert_eq!(h[1], 0x03);
        assert_eq!(u16::from_be_bytes([h[10], h[11]]), 0xB1E3);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// RFC 1624's incremental update agrees with a full recomputation (RFC 791) on random
        /// headers, options included, and the result verifies.
        #[test]
        fn incremental_checksum_equals_recomputation(
            words in proptest::collection::vec(any::<u8>(), 60),
            ihl in 5u8..=15,
            ect in 1u8..=3,
        ) {
            let n = ihl as usize * 4;
            let mut h = words[..n].to_vec();
            h[0] = 0x40 | ihl;
            h[1] = (h[1] & !0b11) | ect;
            let c = header_checksum(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            prop_assert_eq!(ones_sum(&h), 0xFFFF);
            let mut inc = h.clone();
            prop_assert!(set_ce(&mut inc));
            prop_assert_eq!(inc[1] & 0b11, 0b11);
            prop_assert_eq!(&inc[..10], &{ let mut x = h.clone(); x[1] |= 3; x }[..10]);
            let full = header_checksum(&inc);
            prop_assert_eq!(u16::from_be_bytes([inc[10], inc[11]]), full);
            prop_assert_eq!(ones_sum(&inc), 0xFFFF);
        }

        /// Any bytes: the parser returns, and an `Ipv4` verdict is consistent with the buffer.
        #[test]
        fn parser_never_panics_on_raw_bytes(buf in proptest::collection::vec(any::<u8>(), 0..120)) {
            match parse(&buf) {
                Parse::Ipv4(h) => {
                    prop_assert!(h.total_len as usize <= buf.len());
                    prop_assert!(h.total_len as usize >= MIN_HEADER_BYTES);
                    prop_assert_eq!(buf[0] >> 4, 4);
                }
                Parse::NotIpv4 => prop_assert!(buf.is_empty() || buf[0] >> 4 != 4),
                Parse::Malformed(_) => prop_assert_eq!(buf[0] >> 4, 4),
            }
        }

        /// Mostly-valid headers with one field corrupted hit the malformed paths, never a panic.
        #[test]
        fn parser_never_panics_on_corrupted_headers(
            l4 in proptest::collection::vec(any::<u8>(), 0..40),
            proto in prop_oneof![Just(PROTO_TCP), Just(PROTO_UDP), any::<u8>()],
            frag in any::<u16>(),
            at in 0usize..24,
            byte in any::<u8>(),
            cut in 0usize..64,
        ) {
            let mut b = packet(0x01, proto, [10, 77, 1, 2], [10, 77, 200, 2], &l4, frag);
            if at < b.len() { b[at] = byte; }
            b.truncate(cut.max(1).min(b.len()));
            let _ = parse(&b);
        }
    }
}
