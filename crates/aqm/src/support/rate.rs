//! A flow's sending rate as an exponentially weighted average over slots: CKCD's μ_i
//! (Liu et al. leave its estimator open) and the packet-value marker's R
//! (crates/link/src/marker.rs).
//!
//! aqmlab's choice, for a cost per slot instead of per packet: the usual estimator is the
//! per-packet sum R ← R·e^(−Δt/T) + len/T, decayed to `now`
//! when read. Here the average is over the bytes per slot of T/64, updated when a slot ends:
//! R ← R·D + b·(1 − D)/τ for a slot of length τ holding b bytes, D = e^(−τ/T), and R·D per
//! empty slot. Same time constant T; the estimate lags by at most one slot (1/64 of T), and a
//! constant rate is estimated exactly (b/τ), where the per-packet sum reads half a packet per T
//! high (6 % for a flow of 8 packets per T). The point is cost: a decay per packet, and for
//! the marker a logarithm of R per packet, are paid once per slot instead, since within a
//! slot R is fixed.

use crate::math::exp_neg;
use crate::Nanos;

/// Slots per time constant (aqmlab's choice): short against T, so the estimate lags by at most 1/64 of
/// its own averaging time; long enough (1.5625 ms at T = 100 ms) that a flow at 8 Mbit/s or
/// more sends several 1500-byte packets per slot, which then cost an addition each.
pub const SLOTS_PER_WINDOW: u64 = 64;

/// The constants of an estimator with time constant T, shared by the flows it measures.
#[derive(Clone, Copy, Debug)]
pub struct SlotClock {
    slot_ns: Nanos,
    /// τ / T, and D = e^(−τ/T): a slot's weight in the average decays by D per slot.
    slot_over_window: f64,
    decay_per_slot: f64,
    /// (1 − D) / τ, in 1/s: the weight of a slot's bytes, so that b bytes in every slot give
    /// R = b·(1 − D)/τ · Σ Dᵏ = b/τ.
    gain_per_byte: f64,
}

impl SlotClock {
    pub fn new(window_ns: Nanos) -> Self {
        let slot_ns = (window_ns / SLOTS_PER_WINDOW).max(1);
        let slot_over_window = slot_ns as f64 / window_ns as f64;
        let decay_per_slot = exp_neg(slot_over_window);
        SlotClock {
            slot_ns,
            slot_over_window,
            decay_per_slot,
            gain_per_byte: (1.0 - decay_per_slot) * 1e9 / slot_ns as f64,
        }
    }
}

/// One flow's rate: the average as of the end of the last slot that ended, and the slot being
/// counted.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SlotRate {
    /// The end of the slot being counted (0 before the flow's first packet), and its bytes.
    slot_end_ns: Nanos,
    slot_bytes: u64,
    bytes_per_s: f64,
}

impl SlotRate {
    /// Count a packet of `len` bytes sent at `now` (not before the previous call's `now`);
    /// whether it began a slot (the flow's first packet, or the first after a slot ended, when
    /// the rate changed).
    #[inline]
    pub fn add(&mut self, clock: &SlotClock, len: u32, now: Nanos) -> bool {
        if now < self.slot_end_ns {
            self.slot_bytes += len as u64;
            return false;
        }
        self.end_slots(clock, now);
        self.slot_bytes = len as u64;
        true
    }

    /// The rate, bytes/s, at `now` (not before the previous call's `now`): the average as of
    /// the end of the last slot that ended by `now` (0 during the flow's first slot).
    #[inline]
    pub fn at(&mut self, clock: &SlotClock, now: Nanos) -> f64 {
        if now >= self.slot_end_ns && self.slot_end_ns != 0 {
            self.end_slots(clock, now);
            self.slot_bytes = 0;
        }
        self.bytes_per_s
    }

    /// The rate as of the last slot that ended before the last call, bytes/s.
    pub fn last(&self) -> f64 {
        self.bytes_per_s
    }

    /// Set the average (tests that need a flow at a given rate).
    #[cfg(test)]
    pub(crate) fn set_last(&mut self, bytes_per_s: f64) {
        self.bytes_per_s = bytes_per_s;
    }

    /// Fold the slot that ended into the average, decay it over the empty slots since, and
    /// start the slot holding `now` (its bytes are the caller's to set).
    #[cold]
    fn end_slots(&mut self, clock: &SlotClock, now: Nanos) {
        if self.slot_end_ns == 0 {
            self.slot_end_ns = now + clock.slot_ns;
            return;
        }
        let empty = (now - self.slot_end_ns) / clock.slot_ns;
        let r =
            self.bytes_per_s * clock.decay_per_slot + self.slot_bytes as f64 * clock.gain_per_byte;
        self.bytes_per_s = if empty == 0 {
            r
        } else {
            r * exp_neg(empty as f64 * clock.slot_over_window)
        };
        self.slot_end_ns += (empty + 1) * clock.slot_ns;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T_NS: Nanos = 100_000_000;

    #[test]
    fn a_constant_rate_is_estimated_exactly_after_the_first_slot() {
        // 1500-byte packets every 120 µs = 12.5 MB/s; slots of 100 ms / 64 = 1.5625 ms.
        let clock = SlotClock::new(T_NS);
        let mut r = SlotRate::default();
        let d = (-1.0f64 / 64.0).exp();
        // The first slot, [0, 1.5625 ms), holds the packets at 0, 0.12, …, 1.56 ms: 14 of them,
        // and R = 0 until it ends; then R = 14·1500·(1 − D)/1.5625 ms.
        let mut k = 0u64;
        while k * 120_000 < 1_562_500 {
            assert_eq!(r.add(&clock, 1500, k * 120_000), k == 0, "packet {k}");
            assert_eq!(r.last(), 0.0);
            k += 1;
        }
        assert_eq!(k, 14);
        assert!(r.add(&clock, 1500, k * 120_000));
        let first = 21_000.0 * (1.0 - d) / 1.5625e-3;
        assert!(
            (r.last() / first - 1.0).abs() < 1e-12,
            "{} vs {first}",
            r.last()
        );
        // After 10 T the first slot's excess has decayed by e^−10; each slot holds 13 or 14
        // packets (13.02 on average), and the estimate is their weighted mean: 12.5 MB/s within
        // (1 − D)·1500 B per slot ≈ 15 kB/s per recent 14-packet slot; allow 0.3 %.
        for k in 15..=8334u64 {
            r.add(&clock, 1500, k * 120_000);
        }
        assert!((r.last() / 12.5e6 - 1.0).abs() < 3e-3, "{}", r.last());
    }

    #[test]
    fn reading_decays_over_the_slots_that_ended_empty() {
        // A flow at 12.5 MB/s stops; read T = 64 slots after its last packet, R has the last
        // slot folded in and decays over the 63 or 64 empty slots after it: between e^(−65/64)
        // and e^(−63/64) of its value. Reading again at the same time changes nothing, and a
        // packet then starts a fresh slot without counting twice.
        let clock = SlotClock::new(T_NS);
        let mut r = SlotRate::default();
        for k in 0..=8334u64 {
            r.add(&clock, 1500, k * 120_000);
        }
        let steady = r.last();
        let t = 8334 * 120_000 + T_NS;
        let f = r.at(&clock, t) / steady;
        assert!(
            f > (-65.0f64 / 64.0).exp() && f < (-63.0f64 / 64.0).exp(),
            "decayed to {f}"
        );
        assert_eq!(r.at(&clock, t), f * steady);
        assert!(!r.add(&clock, 1500, t));
        // One slot later the lone packet is folded in: R·D + 1500·(1 − D)/τ.
        let d = clock.decay_per_slot;
        let want = f * steady * d + 1500.0 * (1.0 - d) / 1.5625e-3;
        assert!((r.at(&clock, t + 1_562_500) / want - 1.0).abs() < 1e-12);
        // Before a flow's first packet there is no slot to end: R stays 0.
        let mut fresh = SlotRate::default();
        assert_eq!(fresh.at(&clock, 5 * T_NS), 0.0);
        assert!(fresh.add(&clock, 1500, 5 * T_NS));
    }
}
