//! Link serialization: how long a packet occupies a link of rate C.
//!
//! Exact in integer nanoseconds: a packet of `b` bytes takes `b·8·1e9 / C` ns, and the
//! remainder of that division is carried to the next packet while the link stays busy, so a
//! busy period of n packets lasts exactly `Σbits / C` (rounded once, not n times). An idle
//! link keeps no phase: the carry is dropped when the queue empties.

use aqm::Nanos;

/// The serialization clock of one link.
#[derive(Clone, Copy, Debug)]
pub struct Serializer {
    pub rate_bps: u64,
    /// Remainder (in bit·ns units, < rate) carried between back-to-back transmissions.
    carry: u64,
}

impl Serializer {
    pub fn new(rate_bps: u64) -> Self {
        Serializer { rate_bps, carry: 0 }
    }

    /// Serialization time of the next packet, `wire_len` bytes, ns.
    #[inline]
    pub fn tx_ns(&mut self, wire_len: u32) -> Nanos {
        let num = wire_len as u64 * 8 * 1_000_000_000 + self.carry;
        self.carry = num % self.rate_bps;
        num / self.rate_bps
    }

    /// The link went idle (its queue is empty after a transmission): forget the phase.
    #[inline]
    pub fn idle(&mut self) {
        self.carry = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_period_lasts_its_bits_over_the_rate_rounded_once() {
        // 1500 B at 7 Mbit/s: 12 000 bits / 7e6 = 1 714 285.714… ns each. Seven back to back
        // take exactly 84 000 bits / 7e6 = 12 ms, though each alone rounds down.
        let mut s = Serializer::new(7_000_000);
        let t: Vec<Nanos> = (0..7).map(|_| s.tx_ns(1500)).collect();
        assert_eq!(t[0], 1_714_285);
        assert_eq!(t.iter().sum::<Nanos>(), 12_000_000);
        // After idling the phase is gone: the next packet rounds down afresh.
        s.idle();
        assert_eq!(s.tx_ns(1500), 1_714_285);
    }
}
