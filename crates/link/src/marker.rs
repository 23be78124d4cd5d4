//! The packet-value marker at the network's edge, for the disciplines that read packet values
//! (PPV, CSAQM). The simulator puts one on each flow's route before the bottleneck; the
//! emulator's router runs the same marker on each flow it sees.
//!
//! Sources: Nádas, Turányi, Rácz, "Per Packet Value: A Practical Concept for Network Resource
//! Sharing", IEEE GLOBECOM 2016, and the project page ppv.elte.hu (the concept and the marker
//! requirement); Fejes et al. 2019 and Fejes et al. 2020 ("packets are marked with a packet
//! value before the bottleneck (e.g. at the edge of the network) where the value is derived
//! from the per connection resource sharing policy"; "We configured equal resource sharing for
//! all flows").
//!
//! Policy is a throughput-value function (TVF) V_c(x) per flow class, strictly decreasing in
//! the throughput x. The marker requirement: if a node drops (or marks) every packet valued
//! below a threshold v, each flow keeps throughput V_c⁻¹(v) — equal TVFs give equal shares,
//! and V_c(x) = V(x / w_c) gives shares ∝ w_c.
//!
//! Which marker (aqmlab's choice; the papers above do not say which their testbeds used): the
//! random marker from the measured rate. Per packet of a flow measured at rate R (bit/s), draw
//! u ~ U(0, 1) and give the packet PV = V_c(u·R): the packets valued at least v then carry
//! exactly V_c⁻¹(v) of the flow's R (for v ≥ V_c(R)), which is the requirement. The
//! token-bucket marker sketched on ppv.elte.hu is not implemented; under equal sharing the
//! choice does not change the shares.
//!
//! Rate estimator (aqmlab's choice): an exponentially weighted average, time constant `T_m`
//! (100 ms by default), of the flow's wire bytes per slot of T_m/64, updated when a slot ends
//! ([`aqm::rate`], shared with CKCD), rather than an EWMA updated per packet: one update per
//! slot instead of an exponential per packet. A packet is valued with the estimate at the end
//! of the last slot that ended; during a flow's first slot R = 0, and its packets get PV_MAX.
//! Every packet the sender puts on the wire counts, retransmissions included.
//!
//! Every packet of a valued run is valued, so the common path takes no logarithm:
//! - Within a slot, R and so ln R are fixed: one ln per slot, not per packet.
//! - ln(u·8R) = ln 8R − E with E = −ln u ~ Exp(1), drawn by the ziggurat method
//!   ([`aqm::ziggurat`]): values have the same distribution as V_c(u·8R) with u drawn
//!   uniformly, without a logarithm of u.
//!
//! TVF (aqmlab's choice; any strictly decreasing V gives equal shares): log-linear,
//! V(x) = round(PV_MAX · (ln X_MAX − ln x) / (ln X_MAX − ln X_MIN)) clamped to [1, PV_MAX],
//! with x in bit/s: constant relative resolution (≈ 0.025 % per code) over the seven decades
//! from 10 kbit/s to 100 Gbit/s.
//!
//! Determinism: each flow's draws come from its own PCG stream, seeded from the run seed and
//! the flow number ([`crate::seed`], `SEED_MARKER`).

use aqm::math::ln;
use aqm::rate::{SlotClock, SlotRate};
use aqm::ziggurat::exp1;
use aqm::{Nanos, Rng};

/// Largest packet value: PVs fit a u16 on the packet (aqmlab's encoding); 0 = unmarked.
pub const PV_MAX: u32 = 65_535;
/// Throughput (bit/s) at and below which the TVF gives PV_MAX.
pub const X_MIN_BPS: f64 = 10e3;
/// Throughput (bit/s) at and above which the TVF gives 1.
pub const X_MAX_BPS: f64 = 100e9;
/// T_m, the rate estimator's time constant.
pub const DEFAULT_RATE_WINDOW_NS: Nanos = 100_000_000;

/// A throughput-value function V_c(x): strictly decreasing in the throughput x (bit/s).
///
/// Two forms. The default is the log-linear V above with a class weight, V_c(x) = V(x / w_c)
/// (`weight` 1 for every class = equal sharing, as in Fejes et al. 2019 and 2020). A custom curve is given by
/// points (x_i, v_i), x increasing and v decreasing, interpolated linearly in ln x (the form of
/// V itself, so the two-point curve [(w·X_MIN, PV_MAX), (w·X_MAX, 1)] *is* V(x / w)), constant
/// beyond the ends; the points are the user's policy (ppv.elte.hu draws TVFs as such curves).
///
/// Every packet is valued, so the form is evaluated as V_c(x) = B·(ln(w·X_MAX) − ln x) with
/// B = PV_MAX / ln(X_MAX / X_MIN) and ln(w·X_MAX) computed once, the clamps as comparisons on
/// x, and [`ln`] below instead of the platform's libm.
#[derive(Clone, Debug, PartialEq)]
pub struct Tvf {
    /// The class's weight w_c, for the log-linear form.
    pub weight: f64,
    /// w·X_MIN and w·X_MAX (bit/s): at and below the first V is PV_MAX, at and above the second 1.
    lo_bps: f64,
    hi_bps: f64,
    /// ln(w·X_MAX).
    ln_hi: f64,
    /// The custom curve, (ln x_i, v_i); empty = the log-linear form.
    ln_points: Vec<(f64, f64)>,
}

/// B = PV_MAX / ln(X_MAX / X_MIN): codes per unit of ln x (≈ 4070, i.e. one code per 0.025 %).
const CODES_PER_LN: f64 = PV_MAX as f64 / (LN_10 * 7.0);
/// ln 10, correctly rounded (X_MAX / X_MIN = 10⁷).
const LN_10: f64 = std::f64::consts::LN_10;
/// ln 8 = 3·ln 2 (to an ulp): bytes to bits.
const LN_8: f64 = 3.0 * std::f64::consts::LN_2;

impl Tvf {
    /// The default log-linear TVF scaled by the class weight `weight`.
    pub fn log_linear(weight: f64) -> Tvf {
        let hi_bps = weight * X_MAX_BPS;
        Tvf {
            weight,
            lo_bps: weight * X_MIN_BPS,
            hi_bps,
            ln_hi: ln(hi_bps),
            ln_points: Vec::new(),
        }
    }

    /// A custom TVF through `points` (throughput bit/s, value); see [`Tvf::check_curve`].
    pub fn curve(points: &[(f64, f64)]) -> Tvf {
        let ln_points: Vec<(f64, f64)> = points.iter().map(|&(x, v)| (ln(x), v)).collect();
        let (lo_bps, hi_bps) = (points[0].0, points[points.len() - 1].0);
        Tvf {
            weight: 1.0,
            lo_bps,
            hi_bps,
            ln_hi: ln(hi_bps),
            ln_points,
        }
    }

    /// Why `points` is not a valid curve, if it is not: at least two points, throughputs
    /// positive and strictly increasing, values in [1, PV_MAX] and strictly decreasing (the
    /// marker requirement needs V_c invertible).
    pub fn check_curve(points: &[(f64, f64)]) -> Result<(), String> {
        if points.len() < 2 {
            return Err("needs at least two (throughput, value) points".into());
        }
        for &(x, v) in points {
            if !(x.is_finite() && x > 0.0) {
                return Err(format!("throughput {x} must be positive"));
            }
            if !(v.is_finite() && (1.0..=PV_MAX as f64).contains(&v)) {
                return Err(format!("value {v} must be in [1, {PV_MAX}]"));
            }
        }
        for w in points.windows(2) {
            if !(w[1].0 > w[0].0 && w[1].1 < w[0].1) {
                return Err(format!(
                    "throughputs must increase and values decrease ({:?} then {:?})",
                    w[0], w[1]
                ));
            }
        }
        Ok(())
    }

    /// The value of the packets sent at throughput `x_bps` (bit/s).
    pub fn value(&self, x_bps: f64) -> u32 {
        // Beyond the ends (x = 0 included) no logarithm is needed.
        if x_bps <= self.lo_bps || x_bps.is_nan() {
            return self.value_of_ln(f64::NEG_INFINITY);
        }
        if x_bps >= self.hi_bps {
            return self.value_of_ln(f64::INFINITY);
        }
        self.value_of_ln(ln(x_bps))
    }

    /// The value of the packets sent at throughput e^`ln_x_bps` (bit/s; −∞ for 0).
    #[inline]
    pub fn value_of_ln(&self, ln_x_bps: f64) -> u32 {
        let p = &self.ln_points;
        if p.is_empty() {
            // Beyond the ends the code is below 0 or above PV_MAX, and `round_code` clamps it:
            // no comparison is needed (∞ − ∞ cannot occur: ln_hi is finite).
            return round_code(CODES_PER_LN * (self.ln_hi - ln_x_bps));
        }
        if ln_x_bps <= p[0].0 {
            return round_code(p[0].1);
        }
        if ln_x_bps >= p[p.len() - 1].0 {
            return round_code(p[p.len() - 1].1);
        }
        let i = p.partition_point(|q| q.0 <= ln_x_bps).clamp(1, p.len() - 1);
        let (a, b) = (p[i - 1], p[i]);
        round_code(a.1 + (b.1 - a.1) * (ln_x_bps - a.0) / (b.0 - a.0))
    }
}

/// round(v) clamped to [1, PV_MAX] (ties up, as `f64::round` for v ≥ 0; the cast saturates:
/// below 0 to 0, +∞ to u32::MAX, NaN to 0).
#[inline]
fn round_code(v: f64) -> u32 {
    ((v + 0.5) as u32).clamp(1, PV_MAX)
}

/// One flow's marker: its class's TVF, its rate estimate and its random stream.
#[derive(Clone, Debug)]
pub struct FlowMarker {
    pub tvf: Tvf,
    clock: SlotClock,
    rate: SlotRate,
    rng: Rng,
    /// ln(8R), R the estimate in bytes/s (8R in bit/s); −∞ while R = 0.
    ln_8r: f64,
}

impl FlowMarker {
    pub fn new(tvf: Tvf, window_ns: Nanos, rng: Rng) -> Self {
        FlowMarker {
            tvf,
            clock: SlotClock::new(window_ns),
            rate: SlotRate::default(),
            rng,
            ln_8r: f64::NEG_INFINITY,
        }
    }

    /// The value of a packet of `wire_len` bytes sent at `now`: V_c(u·8R), u ~ U(0, 1).
    #[inline]
    pub fn value_for(&mut self, wire_len: u32, now: Nanos) -> u32 {
        if self.rate.add(&self.clock, wire_len, now) {
            let r = self.rate.last();
            self.ln_8r = if r > 0.0 {
                LN_8 + ln(r)
            } else {
                f64::NEG_INFINITY
            };
        }
        // ln(u·8R) = ln 8R − E with E = −ln u ~ Exp(1).
        self.tvf.value_of_ln(self.ln_8r - exp1(&mut self.rng))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tvf_is_log_linear_between_its_ends_and_weights_scale_throughput() {
        let eq = Tvf::log_linear(1.0);
        assert_eq!(eq.value(0.0), PV_MAX);
        assert_eq!(eq.value(X_MIN_BPS), PV_MAX);
        assert_eq!(eq.value(X_MAX_BPS), 1);
        assert_eq!(eq.value(1e12), 1);
        // 7 decades over 65 535 codes: 100 Mbit/s is 3 decades below X_MAX ⇒
        // round(65 535 · 3/7) = round(28 086.43) = 28 086; 1 Gbit/s ⇒ round(65 535 · 2/7) = 18 724.
        assert_eq!(eq.value(100e6), 28_086);
        assert_eq!(eq.value(1e9), 18_724);
        // Weight 2: V(x/2), so 200 Mbit/s of a gold flow is worth 100 Mbit/s of a silver one.
        let gold = Tvf::log_linear(2.0);
        assert_eq!(gold.value(200e6), eq.value(100e6));
        assert!(gold.value(100e6) > eq.value(100e6));
        // Strictly decreasing at the resolution of a code (≈ 0.025 % of throughput).
        assert!(eq.value(100e6) > eq.value(100.1e6));
    }

    #[test]
    fn a_custom_curve_interpolates_log_linearly_and_reproduces_a_weighted_tvf() {
        // Hand computation: between (1 Mbit/s, 60 000) and (100 Mbit/s, 20 000), 10 Mbit/s is
        // halfway in ln x ⇒ 40 000; 1 Gbit/s is beyond the last point ⇒ 20 000; 1 kbit/s before
        // the first ⇒ 60 000.
        let c = Tvf::curve(&[(1e6, 60_000.0), (100e6, 20_000.0)]);
        assert_eq!(c.value(10e6), 40_000);
        assert_eq!(c.value(1e9), 20_000);
        assert_eq!(c.value(1e3), 60_000);
        assert_eq!(c.value(0.0), 60_000);
        // V(x / 3) is log-linear in x from (3·X_MIN, PV_MAX) to (3·X_MAX, 1): the two-point curve
        // through those gives the weighted TVF's values (to rounding of the ln arithmetic).
        let w3 = Tvf::log_linear(3.0);
        let c3 = Tvf::curve(&[(3.0 * X_MIN_BPS, PV_MAX as f64), (3.0 * X_MAX_BPS, 1.0)]);
        for k in 0..200 {
            let x = 10f64.powf(3.0 + 9.0 * k as f64 / 200.0);
            assert!(
                w3.value(x).abs_diff(c3.value(x)) <= 1,
                "x = {x}: {} vs {}",
                w3.value(x),
                c3.value(x)
            );
        }
        assert!(Tvf::check_curve(&[(1e6, 100.0)]).is_err());
        assert!(Tvf::check_curve(&[(1e6, 100.0), (1e7, 200.0)])
            .unwrap_err()
            .contains("decrease"));
        assert!(Tvf::check_curve(&[(1e6, 100.0), (1e5, 50.0)]).is_err());
        assert!(Tvf::check_curve(&[(0.0, 100.0), (1e5, 50.0)])
            .unwrap_err()
            .contains("positive"));
        assert!(Tvf::check_curve(&[(1e6, 70_000.0), (1e7, 50.0)])
            .unwrap_err()
            .contains("[1, 65535]"));
    }

    #[test]
    fn a_flow_is_valued_at_pv_max_until_its_first_slot_ends() {
        // R = 0 during the first slot (100 ms / 64 = 1.5625 ms): 1500-byte packets every
        // 120 µs, the 14 sent in it get PV_MAX; then R ≈ 14 packets' worth over the slot
        // (≈ 208 kB/s, 1.7 Mbit/s), and most of the next packets get less.
        let mut m = FlowMarker::new(
            Tvf::log_linear(1.0),
            DEFAULT_RATE_WINDOW_NS,
            aqm::rng_from_seed(9),
        );
        let values: Vec<u32> = (0..40u64).map(|k| m.value_for(1500, k * 120_000)).collect();
        assert!(values[..14].iter().all(|&v| v == PV_MAX), "{values:?}");
        assert!(
            values[14..].iter().filter(|&&v| v < PV_MAX).count() > 20,
            "{values:?}"
        );
    }

    #[test]
    fn packets_valued_at_least_v_carry_v_inverse_of_the_flow_rate() {
        // The marker requirement (ppv.elte.hu): a flow at R = 100 Mbit/s, threshold at the value
        // of 25 Mbit/s: a quarter of its packets are worth at least that. 100 000 packets:
        // σ = √(0.25·0.75/1e5) ≈ 0.0014; allow ±0.006.
        let mut m = FlowMarker::new(
            Tvf::log_linear(1.0),
            DEFAULT_RATE_WINDOW_NS,
            aqm::rng_from_seed(3),
        );
        let ctv = m.tvf.value(25e6);
        let mut above = 0;
        let n = 100_000u64;
        for k in 0..n {
            let value = m.value_for(1500, k * 120_000);
            // Skip the estimator's first second (10 T_m) of warm-up.
            if k >= 8334 && value >= ctv {
                above += 1;
            }
        }
        let f = above as f64 / (n - 8334) as f64;
        assert!((f - 0.25).abs() < 0.006, "fraction {f}");
    }
}
