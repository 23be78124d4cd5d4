//! Exp(1) variates by the ziggurat method, without a logarithm on the common path: for the
//! packet-value marker (crates/link/src/marker.rs), whose V(u·R) for u ~ U(0, 1) is
//! V(e^(ln R − E)) with E = −ln u ~ Exp(1), and which values every packet of a run.
//!
//! Source: Marsaglia & Tsang, "The Ziggurat Method for Generating Random Variables", Journal of
//! Statistical Software 5(8), 2000, with 256 layers of equal area v and the base strip's
//! right end r of their exponential generator; the draw is laid out as in rand_distr 0.6
//! (`utils::ziggurat`, `Exp1`): the low 8 bits of one 64-bit draw pick the layer, its top 52
//! bits the position. 97.8 % of draws are accepted at the first comparison (the mean of x_(i+1)/x_i over the
//! layers); the rest take
//! [`exp_neg`] once (the layer's wedge) or [`ln`] once (the tail beyond r), both ours, so the
//! variates are the same on every machine. The tables are computed at compile time.

use crate::math::{exp_neg, exp_neg_series, ln, ln_series};
use crate::Rng;
use rand_core::Rng as _;

/// r: the base strip's right end, beyond which lies the tail (Marsaglia & Tsang 2000, §4, the
/// exponential generator with 256 layers: r = 7.69711747013104972).
const R: f64 = 7.697_117_470_131_05;
/// v: the area of every layer, r·f(r) + ∫_r^∞ f = (r + 1)·e^(−r) for f(x) = e^(−x).
const V: f64 = (R + 1.0) * exp_neg_series(R);

/// x_0 = v / f(r) (the base strip's width, tail included), x_1 = r, x_(i+1) = f⁻¹(v / x_i +
/// f(x_i)), x_256 = 0: layer i is the box [0, x_i] × [f(x_i), f(x_(i+1))].
static X: [f64; 257] = {
    let mut x = [0.0; 257];
    x[0] = V / exp_neg_series(R);
    x[1] = R;
    let mut i = 1;
    while i < 255 {
        x[i + 1] = -ln_const(V / x[i] + exp_neg_series(x[i]));
        i += 1;
    }
    x
};

/// f(x_i) = e^(−x_i).
static F: [f64; 257] = {
    let mut f = [0.0; 257];
    let mut i = 0;
    while i < 257 {
        f[i] = exp_neg_series(X[i]);
        i += 1;
    }
    f
};

/// A draw of E ~ Exp(1).
#[inline]
pub fn exp1(rng: &mut Rng) -> f64 {
    loop {
        let bits = rng.next_u64();
        let i = (bits & 0xff) as usize;
        // The top 52 bits as a float in [1, 2), less (1 − 2⁻⁵³): u in (0, 1], never 0.
        let u = f64::from_bits((bits >> 12) | 0x3ff0_0000_0000_0000) - (1.0 - f64::EPSILON / 2.0);
        let x = u * X[i];
        if x < X[i + 1] {
            return x;
        }
        if i == 0 {
            // The tail beyond r: r + Exp(1), by memorylessness; 1 − u' is in (0, 1].
            return R - ln(1.0 - crate::uniform01(rng));
        }
        if F[i] + (F[i + 1] - F[i]) * crate::uniform01(rng) < exp_neg(x) {
            return x;
        }
    }
}

/// ln w for w > 0 at compile time: w = 2^e·m with m in [0.75, 1.5), inside the domain of
/// [`ln_series`].
const fn ln_const(w: f64) -> f64 {
    let (mut m, mut e) = (w, 0i32);
    while m < 0.75 {
        m *= 2.0;
        e -= 1;
    }
    while m >= 1.5 {
        m *= 0.5;
        e += 1;
    }
    ln_series(m) + e as f64 * std::f64::consts::LN_2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layers_have_equal_area_and_meet_at_zero() {
        // Every box i ≥ 1 has area x_i·(f(x_(i+1)) − f(x_i)) = v, and the base strip v too:
        // x_0·f(r) = v. With r exact the recursion lands on x_256 = 0 (f = 1); r to 16 digits
        // leaves the last box's area within 1e−9 of v (it is set, not computed).
        assert_eq!(X[1], R);
        assert!((X[0] * F[1] - V).abs() < 1e-15);
        for i in 1..255 {
            let area = X[i] * (F[i + 1] - F[i]);
            assert!((area / V - 1.0).abs() < 1e-12, "layer {i}: {area} vs {V}");
            assert!(X[i + 1] < X[i]);
        }
        assert!(
            (X[255] * (1.0 - F[255]) / V - 1.0).abs() < 1e-9,
            "last layer {}",
            X[255] * (1.0 - F[255])
        );
        assert_eq!((X[256], F[256]), (0.0, 1.0));
        // The share of draws accepted at the first comparison, as the module comment says:
        // mean of x_(i+1)/x_i = 0.97778 (the same recursion in Python with libm's exp and log).
        let fast = (0..256).map(|i| X[i + 1] / X[i]).sum::<f64>() / 256.0;
        assert!((fast - 0.97778).abs() < 1e-5, "{fast}");
        // The reference's table (rand_distr 0.6, ZIG_EXP_X), two entries: 6.941033629377212577 and
        // 6.478378493832569696 for x_2 and x_3.
        assert!((X[2] - 6.941_033_629_377_212).abs() < 1e-13);
        assert!((X[3] - 6.478_378_493_832_57).abs() < 1e-13);
    }

    #[test]
    fn draws_follow_the_exponential_distribution() {
        // Kolmogorov–Smirnov against 1 − e^−x on 10⁶ draws: D < 1.95/√n is the 0.1 % level.
        // The tail beyond r has probability e^−r ≈ 4.54e−4: 454 expected, σ ≈ 21; allow ±5σ.
        let n = 1_000_000;
        let mut rng = crate::rng_from_seed(11);
        let mut xs: Vec<f64> = (0..n).map(|_| exp1(&mut rng)).collect();
        xs.sort_by(f64::total_cmp);
        let mut d = 0f64;
        for (k, &x) in xs.iter().enumerate() {
            let cdf = 1.0 - (-x).exp();
            d = d
                .max((cdf - k as f64 / n as f64).abs())
                .max(((k + 1) as f64 / n as f64 - cdf).abs());
        }
        assert!(d < 1.95 / (n as f64).sqrt(), "KS distance {d}");
        let mean = xs.iter().sum::<f64>() / n as f64;
        assert!((mean - 1.0).abs() < 0.005, "mean {mean}");
        let tail = xs.iter().filter(|&&x| x > R).count() as f64;
        assert!((tail - 454.0).abs() < 105.0, "tail count {tail}");
        assert!(xs[0] >= 0.0 && xs.iter().all(|x| x.is_finite()));
    }
}
