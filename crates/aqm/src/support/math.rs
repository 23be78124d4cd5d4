//! ln and e^−y without libm (and a one-instruction u64 → f64 for spans): for the slotted rate
//! average ([`crate::rate`]: a decay per run of empty slots), the packet-value marker (one ln
//! of the rate per slot, crates/link/src/marker.rs), the ziggurat's wedges and tail
//! ([`crate::ziggurat`]), and CKCD's spans. libm's results may differ in the last bit between
//! platforms, while these use only IEEE +, −, × and tables computed at compile time, so results
//! are the same on every machine. Their error (≈ 1e−15 relative, checked against libm in the
//! tests) is ten orders of magnitude below a value code's width. Polynomials are in Estrin's
//! form (depth, not length, is what costs) on small arguments; ln's table is kept small (see
//! `LN_BITS`) at the price of a longer polynomial, so that it stays in L1.

/// Table bits of [`ln`]: the mantissa's top 4 bits pick one of 16 intervals of [1, 2). The
/// table is 256 B, four cache lines that stay in L1 under the simulation's own traffic; a
/// larger table with a shorter polynomial misses the cache instead.
const LN_BITS: u32 = 4;
const LN_N: usize = 1 << LN_BITS;

/// ln y for y in (1/2, 2), for the tables: 2·atanh(s), s = (y − 1)/(y + 1), |s| < 1/3, summed
/// until the terms vanish (|s|^(2k+1)/(2k+1) < 2⁻⁶⁰ by k = 19).
pub(crate) const fn ln_series(y: f64) -> f64 {
    let s = (y - 1.0) / (y + 1.0);
    let s2 = s * s;
    let mut term = s;
    let mut sum = 0.0;
    let mut k = 0;
    while k < 30 {
        sum += term / (2 * k + 1) as f64;
        term *= s2;
        k += 1;
    }
    2.0 * sum
}

/// (1/c_j, ln c_j) with c_j the centre of interval j, ln c_j taken as −ln of the reciprocal
/// actually stored, so that ln m = ln(m·(1/c_j)) − ln(1/c_j) holds for the rounded table entry.
const LN_TABLE: [(f64, f64); LN_N] = {
    let mut t = [(0.0, 0.0); LN_N];
    let mut j = 0;
    while j < LN_N {
        let inv_c = 1.0 / (1.0 + (j as f64 + 0.5) / LN_N as f64);
        t[j] = (inv_c, -ln_series(inv_c));
        j += 1;
    }
    t
};

/// ln x for finite x > 0 (normal numbers; the callers pass throughputs far from the limits):
/// x = 2^e·m, m in [1, 2); m·(1/c_j) = 1 + r with |r| ≤ 2⁻⁵; ln(1 + r) to r¹⁰ (the next term
/// is < 2⁻⁵⁸).
pub fn ln(x: f64) -> f64 {
    debug_assert!(x.is_finite() && x >= f64::MIN_POSITIVE, "ln of {x}");
    let bits = x.to_bits();
    let e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let j = ((bits >> (52 - LN_BITS)) & (LN_N as u64 - 1)) as usize;
    let m = f64::from_bits((bits & ((1u64 << 52) - 1)) | (1023u64 << 52));
    let (inv_c, ln_c) = LN_TABLE[j];
    let r = m * inv_c - 1.0;
    let r2 = r * r;
    let r4 = r2 * r2;
    // Σ_{k=1..10} (−1)^(k+1) r^k / k in Estrin's form.
    let p = (r + r2 * (-0.5 + r * (1.0 / 3.0)))
        + r4 * (((-0.25 + r * 0.2) + r2 * (-1.0 / 6.0 + r * (1.0 / 7.0)))
            + r4 * ((-0.125 + r * (1.0 / 9.0)) + r2 * -0.1));
    (e as f64 * std::f64::consts::LN_2 + ln_c) + p
}

/// e^−y = e^−q · e^−a/64 · e^−b/4096 · e^−f for y = q + a/64 + b/4096 + f, f in [0, 2⁻¹²).
const EXP_INT: [f64; 64] = exp_table(1.0);
const EXP_64: [f64; 64] = exp_table(1.0 / 64.0);
const EXP_4096: [f64; 64] = exp_table(1.0 / 4096.0);

/// e^−k·step for k = 0 … 63.
const fn exp_table(step: f64) -> [f64; 64] {
    let mut t = [0.0; 64];
    let mut k = 0;
    while k < 64 {
        t[k] = exp_neg_series(k as f64 * step);
        k += 1;
    }
    t
}

/// e^−y for y in [0, 64), for the tables: 1/Σ yᵏ/k! (all terms positive, so no cancellation;
/// 250 terms leave less than 2⁻⁶⁰ of the sum at y = 63).
pub(crate) const fn exp_neg_series(y: f64) -> f64 {
    let mut term = 1.0;
    let mut sum = 0.0;
    let mut k = 1;
    while k < 250 {
        sum += term;
        term *= y / k as f64;
        k += 1;
    }
    1.0 / sum
}

/// e^−y for y ≥ 0: 0 from y = 64 on (e^−64 ≈ 1.6e−28, below what a rate sum can hold beside
/// a packet's own term); e^−f to f³ (the next term is < 2⁻⁵²).
#[inline]
pub fn exp_neg(y: f64) -> f64 {
    debug_assert!(y >= 0.0, "exp_neg of {y}");
    if y >= 64.0 || y.is_nan() {
        return 0.0;
    }
    let n = (y * 4096.0) as u32;
    let f = y - n as f64 * (1.0 / 4096.0);
    let p = (1.0 - f) + (f * f) * (0.5 - f * (1.0 / 6.0));
    (EXP_INT[(n >> 12) as usize] * EXP_64[((n >> 6) & 63) as usize])
        * (EXP_4096[(n & 63) as usize] * p)
}

/// `n as f64` for CKCD's per-packet nanosecond spans and packet counts, all far below 2⁶³: the
/// same value (a correctly rounded conversion of the same integer), through i64, which x86-64
/// converts in one instruction where `u64 as f64` takes six.
#[inline]
pub fn to_f64(n: u64) -> f64 {
    debug_assert!(n < 1 << 63, "to_f64 of {n}");
    n as i64 as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln_and_exp_neg_agree_with_libm_far_below_a_code() {
        // Reference: the platform's libm (correct to an ulp or so). 10⁵ arguments spread over
        // the TVF's range and beyond (1 bit/s … 1 Tbit/s) and over the estimator's decays
        // (Δt/T_m from 0 to 80). A value code is 1/B ≈ 2.5e-4 of ln x; the bound is 1e-14.
        let mut worst_ln = 0f64;
        let mut worst_exp = 0f64;
        for k in 0..100_000u32 {
            let x = 10f64.powf(12.0 * k as f64 / 100_000.0) * (1.0 + (k % 7) as f64 * 1e-3);
            worst_ln = worst_ln.max((ln(x) - x.ln()).abs() / x.ln().abs().max(1.0));
            let y = 80.0 * (k as f64 / 100_000.0).powi(3);
            let e = y.exp().recip();
            let err = if y < 64.0 {
                (exp_neg(y) - e).abs() / e
            } else {
                (exp_neg(y) - e).abs()
            };
            worst_exp = worst_exp.max(err);
        }
        eprintln!("worst relative error: ln {worst_ln:e}, exp_neg {worst_exp:e}");
        assert!(worst_ln < 1e-14, "ln: worst error {worst_ln:e}");
        assert!(worst_exp < 1e-14, "exp_neg: worst error {worst_exp:e}");
        // e^0 = 1 exactly (the tables' first entries); ln 1 = 0 and ln 2ᵏ = k·ln 2 to an ulp.
        assert_eq!(exp_neg(0.0), 1.0);
        assert!(ln(1.0).abs() < 1e-17);
        assert!((ln(1024.0) - 10.0 * std::f64::consts::LN_2).abs() < 1e-14);
    }

    #[test]
    fn to_f64_is_the_unsigned_conversion() {
        // Exact below 2⁵³, the same rounding above (ties to even included).
        for n in [
            0u64,
            1,
            12_000,
            (1 << 53) - 1,
            1 << 53,
            (1 << 53) + 1,
            (1 << 53) + 3,
            (1 << 62) + 1025,
            (1 << 63) - 1,
        ] {
            assert_eq!(to_f64(n).to_bits(), (n as f64).to_bits(), "{n}");
        }
    }
}
