//! TCP Prague as the L4STeam Linux tree implements it: net/ipv4/tcp_prague.c of
//! github.com/L4STeam/linux at commit 893e1479793e4cd975adf062fab3ff44206f76b1
//! (`MODULE_VERSION("0.7")`), ported function by function (`prague_init`,
//! `prague_cong_control` → `prague_update_cwnd` / `prague_update_alpha` /
//! `prague_update_pacing_rate`, `prague_new_round`, `prague_ai_ack_increase`,
//! `prague_enter_cwr`, `prague_enter_loss`, `prague_ca_open`, `prague_state`,
//! `prague_cwnd_event`, `prague_cwnd_undo`, `prague_ssthresh`, `prague_tso_segs`, and the
//! conversion helpers); draft-briscoe-iccrg-prague-congestion-control; RFC 9331 App. A.
//!
//! The CC owns cwnd and the pacing rate (`.cong_control`, no `.cong_avoid`): per ACK it adds
//! to a fractional window (`frac_cwnd`, 1/2^20 segment) for the *non*-CE-marked deliveries
//! only — also while in CWR — and steps the integer cwnd by ±1 toward ⌈frac_cwnd⌉ (≥ 2).
//! Once per round (snd_una passing the round's snd_nxt; when RTT-independent also ≥ 25 ms
//! after the previous update) α ← α − α/16 + F/16 in 2^-24 fixed point, stored ×16. Entering
//! CWR (the core does so on any AccECN CE increase) cuts frac_cwnd by α/2, at most once per
//! 25 ms when RTT-independent; entering Recovery or an RTO halves it and stops the increase
//! until Open. After `rtt_transition` rounds out of slow start the per-ACK increase is scaled
//! by (srtt/25 ms)² below 25 ms, so the rate grows by MSS/(25 ms)² per second whatever the
//! RTT. The pacing rate is 100 % of mtu·max(⌊frac_cwnd⌋, inflight)/srtt, ×2 while
//! cwnd < ssthresh/2, ≥ 100 kbit/s; TSO bursts are ≈ 2^-12 s worth of it. With
//! `cwnd_mode = 2` the flow switches to rate mode (`rate_bytes` is the controlled variable,
//! ±3 % pacing modulation per half virtual RTT) while cwnd·MTU ≤ `cwnd_transit`·1500 B.
//!
//! Fixed point as in the source: `tp->srtt_us` is Linux's 8·SRTT, so every use of it here
//! goes through `srtt8`; `RTT2SEC_SHIFT` (2^23 ≈ 8·10^6) is the source's approximation of
//! µs·8 → s, kept as is.
//!
//! Deviations (the simulator lacks what the source uses):
//! - MSS reduction in rate mode (`prague_update_alpha` → `tcp_sync_mss` with
//!   `mss_cache_set_by_cca`, down to `MIN_MSS` = 150 B below ≈ 1 Mbit/s): the simulator's MSS
//!   is fixed at 1448 B (MTU 1500). The MTU the source would pick is computed; when it differs
//!   from 1500 nothing is changed and [`Prague::mss_reductions_skipped`] is incremented.
//!   Rate mode otherwise runs as in the source.
//! - `tp->srtt_us` (8·SRTT with 3 fractional bits) is rebuilt as 8·⌊SRTT⌋ from the core's
//!   unscaled µs value: the three fractional bits are lost (≤ 0.9 µs of SRTT).
//! - The prague-reno fallback (`prague_init` with AccECN not negotiated) is ported, but the
//!   core forces ECN negotiation for `EcnUse::L4s` senders, so it never triggers here; if it
//!   did, the core would still send ECT(1) (the core reads `ecn_use()` once).
//! - `prague_cwnd_undo` is ported, but the core models no undo (no DSACK/F-RTO), so it is
//!   never called.
//! - `snd_cwnd_clamp` and `sk_max_pacing_rate` are unlimited (Linux defaults); `snd_cwnd_stamp`
//!   (written by `prague_cwnd_changed`) does not exist in the core and is not kept.
//! - `prague_get_info`/`prague_release` (diagnostics, ECT bit bookkeeping) are represented by
//!   [`CongestionControl::probe`] only; the LOG of `ece_delta > acked` is dropped.

use serde::{Deserialize, Serialize};

use super::{reno, CaEvent, CaState, CcProbe, CongestionControl, EcnUse, RateSample, TcpState};
use crate::packet::TCP_IP_HEADER_BYTES;

pub const SOURCE: &str = "L4STeam/linux 893e1479793e4cd975adf062fab3ff44206f76b1 net/ipv4/tcp_prague.c (TCP Prague v0.7)";

/// `MIN_CWND_RTT`: floor of the integer cwnd.
pub const MIN_CWND_RTT: u32 = 2;
/// `MIN_CWND_VIRT`: packets per virtual RTT the MSS reduction keeps.
pub const MIN_CWND_VIRT: u64 = 2;
/// `MIN_MSS` (bytes).
pub const MIN_MSS: u32 = 150;
/// `MINIMUM_RATE`: 100 kbit/s in bytes/s.
pub const MINIMUM_RATE: u64 = 12_500;
/// `PRAGUE_ALPHA_BITS`: α in 1/2^24.
pub const PRAGUE_ALPHA_BITS: u32 = 24;
/// `PRAGUE_MAX_ALPHA` = α of 1.0.
pub const PRAGUE_MAX_ALPHA: u64 = 1 << PRAGUE_ALPHA_BITS;
/// `CWND_UNIT`: `frac_cwnd` in 1/2^20 segment.
pub const CWND_UNIT: u32 = 20;
/// `ONE_CWND`.
pub const ONE_CWND: u64 = 1 << CWND_UNIT;
/// `PRAGUE_SHIFT_G`: EWMA gain g = 1/2^4.
pub const PRAGUE_SHIFT_G: u32 = 4;
/// `DEFAULT_RTT_TRANSITION` (rounds).
pub const DEFAULT_RTT_TRANSITION: u32 = 4;
/// `RTT_TARGET` = 25 · USEC_PER_MSEC (µs).
pub const RTT_TARGET: u32 = 25_000;
/// `MAX_SCALED_RTT` = 100 ms (µs): above it the increase is not scaled.
pub const MAX_SCALED_RTT: u32 = 100_000;
/// `MTU_SYS` (bytes).
pub const MTU_SYS: u64 = 1500;
/// `RATE_OFFSET`: 4/128 ≈ 3 % pacing modulation (rate mode).
pub const RATE_OFFSET: u64 = 4;
/// `OFFSET_UNIT`.
pub const OFFSET_UNIT: u32 = 7;
/// `HSRTT_SHIFT`: `hsrtt_us` holds 128 × (8·srtt) averaged with gain 1/128.
pub const HSRTT_SHIFT: u32 = 7;
/// `RTT2SEC_SHIFT`: (8·µs) → s approximated as >> 23.
pub const RTT2SEC_SHIFT: u32 = 23;
/// `USEC_PER_SEC`.
const USEC_PER_SEC: u64 = 1_000_000;

/// The module parameters of tcp_prague.c (without the `prague_` prefix), with its defaults.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Params {
    /// `prague_burst_shift`: maximal GSO burst duration as a base-2 negative exponent of a
    /// second (12 ⇒ 1/4096 s ≈ 244 µs). 0..=63.
    pub burst_shift: u32,
    /// `prague_max_tso_segs`: extra cap on the TSO/GSO burst, segments; 0 = none.
    pub max_tso_segs: u32,
    /// `prague_rtt_transition`: rounds after slow-start exit before the flow becomes RTT
    /// independent.
    pub rtt_transition: u32,
    /// `prague_rtt_target`: the RTT-independence target ("virtual RTT"), µs. 1..=536870911
    /// (the source shifts it left by 3 in a u32).
    pub rtt_target: u32,
    /// `prague_alpha_mode`: 0 = α starts at 0 and cwnd is halved at the first CE; 1 = α starts
    /// at 1.0.
    pub alpha_mode: u32,
    /// `prague_cwnd_mode`: 0 = fractional window; 1 = rate based; 2 = switch between them at
    /// `cwnd_transit`.
    pub cwnd_mode: u32,
    /// `prague_cwnd_transit`: the switching point of `cwnd_mode` 2, in units of MTU_SYS
    /// (1500 B): rate mode while cwnd·MTU ≤ cwnd_transit·1500 B.
    pub cwnd_transit: u32,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            burst_shift: 12,
            max_tso_segs: 0,
            rtt_transition: DEFAULT_RTT_TRANSITION,
            rtt_target: RTT_TARGET,
            alpha_mode: 0,
            cwnd_mode: 2,
            cwnd_transit: 4,
        }
    }
}

impl Params {
    pub fn validate(&self) -> Result<(), String> {
        if self.burst_shift > 63 {
            return Err(format!(
                "burst_shift: {} must be 0..=63 (a shift of a 64-bit rate)",
                self.burst_shift
            ));
        }
        if self.rtt_target == 0 {
            return Err("rtt_target: 0 must be > 0 (µs)".into());
        }
        if self.rtt_target > u32::MAX >> 3 {
            return Err(format!(
                "rtt_target: {} must be <= {} µs (the source keeps it ×8 in a u32)",
                self.rtt_target,
                u32::MAX >> 3
            ));
        }
        if self.alpha_mode > 1 {
            return Err(format!(
                "alpha_mode: {} must be 0 (half cwnd at the first mark) or 1 (α starts at 1)",
                self.alpha_mode
            ));
        }
        if self.cwnd_mode > 2 {
            return Err(format!(
                "cwnd_mode: {} must be 0 (fractional window), 1 (rate based) or 2 (switch)",
                self.cwnd_mode
            ));
        }
        Ok(())
    }
}

/// `struct prague`.
#[derive(Clone, Debug)]
pub struct Prague {
    pub params: Params,
    /// µs (`tcp_mstamp`) of the last reduction on CE.
    cwr_stamp: u64,
    /// µs of the last α update (EWMA timestamp).
    alpha_stamp: u64,
    /// α × 16 in 1/2^24 (congestion-estimate EWMA).
    upscaled_alpha: u64,
    /// AI increase per non-CE acked MSS, 1/2^20 segment per cwnd.
    ai_ack_increase: u64,
    mtu_cache: u32,
    /// 128 × (8·srtt) EWMA.
    hsrtt_us: u64,
    /// Internal fractional cwnd, 1/2^20 segment.
    frac_cwnd: u64,
    /// Internal pacing rate, bytes/s.
    rate_bytes: u64,
    loss_rate_bytes: u64,
    loss_cwnd: u32,
    max_tso_burst: u32,
    /// `tp->delivered` at round start.
    old_delivered: u32,
    /// `tp->delivered_ce` at round start.
    old_delivered_ce: u32,
    /// `tp->snd_nxt` at round start.
    next_seq: u32,
    /// Rounds since the last slow-start exit.
    round: u32,
    /// An AQM is on the path (a CE mark was seen).
    saw_ce: bool,
    alpha_mode: bool,
    cwnd_mode_transit: bool,
    /// 0 = fractional window, 1 = rate mode (a 1-bit field in the source).
    cwnd_mode: u8,
    /// In a cwnd reduction caused by loss.
    in_loss: bool,
    /// AccECN was not negotiated at init: running `prague_reno` (never in this simulator).
    reno_fallback: bool,
    /// Times the source would have reduced the MSS (rate mode at very low rates) and the
    /// simulator could not (see Deviations).
    pub mss_reductions_skipped: u64,
}

/// `tp->srtt_us` as Linux keeps it: 8·SRTT (the core hands over unscaled µs).
#[inline]
fn srtt8(tp: &TcpState) -> u32 {
    tp.srtt_us.saturating_mul(8)
}

/// `tcp_mss_to_mtu(sk, tp->mss_cache)`: 1448 + 32 (TCP with timestamps) + 20 (IPv4) = 1500.
#[inline]
fn mss_to_mtu(mss: u32) -> u64 {
    (mss + TCP_IP_HEADER_BYTES) as u64
}

/// `mul_u64_u64_shr`.
#[inline]
fn mul_u64_u64_shr(a: u64, b: u64, shift: u32) -> u64 {
    ((a as u128 * b as u128) >> shift) as u64
}

/// `DIV_U64_ROUND_UP` / `DIV64_U64_ROUND_UP`.
#[inline]
fn div_round_up(n: u64, d: u64) -> u64 {
    n.wrapping_add(d - 1) / d
}

/// `DIV_U64_ROUND_CLOSEST` / `DIV64_U64_ROUND_CLOSEST`.
#[inline]
fn div_round_closest(n: u64, d: u64) -> u64 {
    n.wrapping_add(d / 2) / d
}

/// `tcp_stamp_us_delta`: max(t1 − t0, 0).
#[inline]
fn stamp_us_delta(t1: u64, t0: u64) -> u64 {
    t1.saturating_sub(t0)
}

impl Prague {
    pub fn new(params: Params, _seed: u64) -> Self {
        // Prague draws no random numbers; the seed is unused. The state is zeroed as
        // `tcp_assign_congestion_control` zeroes icsk_ca_priv.
        Prague {
            params,
            cwr_stamp: 0,
            alpha_stamp: 0,
            upscaled_alpha: 0,
            ai_ack_increase: 0,
            mtu_cache: 0,
            hsrtt_us: 0,
            frac_cwnd: 0,
            rate_bytes: 0,
            loss_rate_bytes: 0,
            loss_cwnd: 0,
            max_tso_burst: 0,
            old_delivered: 0,
            old_delivered_ce: 0,
            next_seq: 0,
            round: 0,
            saw_ce: false,
            alpha_mode: false,
            cwnd_mode_transit: false,
            cwnd_mode: 0,
            in_loss: false,
            reno_fallback: false,
            mss_reductions_skipped: 0,
        }
    }

    /// α in [0, 1] (`upscaled_alpha >> PRAGUE_SHIFT_G` in 1/2^24).
    pub fn alpha(&self) -> f64 {
        (self.upscaled_alpha >> PRAGUE_SHIFT_G) as f64 / PRAGUE_MAX_ALPHA as f64
    }

    /// The fractional cwnd in segments.
    pub fn frac_cwnd_segs(&self) -> f64 {
        self.frac_cwnd as f64 / ONE_CWND as f64
    }

    /// `prague_is_rtt_indep`.
    fn is_rtt_indep(&self, tp: &TcpState) -> bool {
        !tp.in_slow_start() && self.round >= self.params.rtt_transition
    }

    /// `prague_e2e_rtt_elapsed`: `!before(snd_una, next_seq)`.
    fn e2e_rtt_elapsed(&self, tp: &TcpState) -> bool {
        (tp.snd_una.wrapping_sub(self.next_seq) as i32) >= 0
    }

    /// `prague_target_rtt`: the target in Linux's 8·µs srtt scale.
    fn target_rtt(&self) -> u32 {
        self.params.rtt_target << 3
    }

    /// `prague_elapsed_since_alpha_update` (µs; u32 as the source returns).
    fn elapsed_since_alpha_update(&self, tp: &TcpState) -> u32 {
        stamp_us_delta(tp.now_us(), self.alpha_stamp) as u32
    }

    /// `prague_target_rtt_elapsed`.
    fn target_rtt_elapsed(&self, tp: &TcpState) -> bool {
        (self.target_rtt() >> 3) <= self.elapsed_since_alpha_update(tp)
    }

    /// `prague_should_update_ewma`: once per round, and when RTT-independent no more often
    /// than once per target RTT.
    fn should_update_ewma(&self, tp: &TcpState) -> bool {
        self.e2e_rtt_elapsed(tp) && (!self.is_rtt_indep(tp) || self.target_rtt_elapsed(tp))
    }

    /// `prague_unscaled_ai_ack_increase`.
    fn unscaled_ai_ack_increase() -> u64 {
        1 << CWND_UNIT
    }

    /// `prague_rate_scaled_ai_ack_increase`: 2^20·(rtt/target)², rtt in 8·µs.
    fn rate_scaled_ai_ack_increase(&self, rtt: u32) -> u64 {
        let target = self.target_rtt() as u64;
        if rtt as u64 >= target {
            return Self::unscaled_ai_ack_increase();
        }
        let mut increase = (rtt as u64) << CWND_UNIT;
        increase *= rtt as u64;
        let divisor = target * target;
        div_round_closest(increase, divisor)
    }

    /// `prague_frac_cwnd_to_snd_cwnd`: ⌈frac_cwnd⌉ ≥ 2 (≤ snd_cwnd_clamp, unlimited).
    fn frac_cwnd_to_snd_cwnd(&self) -> u32 {
        (((self.frac_cwnd + (ONE_CWND - 1)) >> CWND_UNIT) as u32).max(MIN_CWND_RTT)
    }

    /// `prague_virtual_rtt`: max(target, srtt), 8·µs.
    fn virtual_rtt(&self, tp: &TcpState) -> u64 {
        self.target_rtt().max(srtt8(tp)) as u64
    }

    /// `prague_pacing_rate_to_max_mtu`: the MTU that still sends MIN_CWND_VIRT packets per
    /// virtual RTT.
    fn pacing_rate_to_max_mtu(&self, tp: &TcpState) -> u64 {
        let cwnd_bytes = if self.is_rtt_indep(tp) && self.cwnd_mode == 1 {
            mul_u64_u64_shr(self.rate_bytes, self.virtual_rtt(tp), RTT2SEC_SHIFT)
        } else {
            let target = self.target_rtt() as u64;
            let mut scaled_cwnd = self.frac_cwnd;
            let rtt = srtt8(tp) as u64;
            if rtt < target {
                // div64_u64 by srtt (> 0 whenever rtt < target ≥ 8).
                scaled_cwnd = scaled_cwnd * target / rtt.max(1);
            }
            mul_u64_u64_shr(scaled_cwnd, mss_to_mtu(tp.mss), CWND_UNIT)
        };
        div_round_up(cwnd_bytes, MIN_CWND_VIRT)
    }

    /// `prague_half_virtual_rtt_elapsed`.
    fn half_virtual_rtt_elapsed(&self, tp: &TcpState) -> bool {
        (self.virtual_rtt(tp) >> (3 + 1)) <= self.elapsed_since_alpha_update(tp) as u64
    }

    /// `prague_pacing_rate_to_frac_cwnd`: rate·rtt/mtu with rtt the 1/128 EWMA of srtt.
    fn pacing_rate_to_frac_cwnd(&self, tp: &TcpState) -> u64 {
        let mtu = mss_to_mtu(tp.mss);
        let h = self.hsrtt_us >> HSRTT_SHIFT;
        let rtt = if h != 0 { h } else { srtt8(tp) as u64 };
        div_round_up(
            mul_u64_u64_shr(self.rate_bytes, rtt, RTT2SEC_SHIFT - CWND_UNIT),
            mtu,
        )
    }

    /// `prague_frac_cwnd_to_pacing_rate`: mtu·frac_cwnd/srtt, ≥ MINIMUM_RATE.
    fn frac_cwnd_to_pacing_rate(&self, tp: &TcpState) -> u64 {
        let mut rate = (USEC_PER_SEC << 3) * mss_to_mtu(tp.mss);
        let s = srtt8(tp);
        if s != 0 {
            rate /= s as u64;
        }
        mul_u64_u64_shr(rate, self.frac_cwnd, CWND_UNIT).max(MINIMUM_RATE)
    }

    /// `prague_valid_mtu`.
    fn valid_mtu(&self, mtu: u64) -> u64 {
        (self.mtu_cache as u64).min(mtu).max(mss_to_mtu(MIN_MSS))
    }

    /// `prague_ai_ack_increase`: RTT independence scales the classical 1/W per ACK increase.
    fn ai_ack_increase(&mut self, tp: &TcpState) {
        let rtt = srtt8(tp);
        let increase =
            if self.round < self.params.rtt_transition || rtt == 0 || rtt > (MAX_SCALED_RTT << 3) {
                Self::unscaled_ai_ack_increase()
            } else {
                self.rate_scaled_ai_ack_increase(rtt)
            };
        self.ai_ack_increase = increase;
    }

    /// `prague_update_pacing_rate`.
    fn update_pacing_rate(&mut self, tp: &mut TcpState) {
        let mut rate;
        if self.is_rtt_indep(tp) && self.cwnd_mode == 1 {
            let offset = mul_u64_u64_shr(RATE_OFFSET, self.rate_bytes, OFFSET_UNIT);
            if self.half_virtual_rtt_elapsed(tp) {
                rate = self.rate_bytes - offset;
            } else {
                rate = self.rate_bytes + offset;
            }
        } else {
            let mtu = mss_to_mtu(tp.mss);
            let max_inflight = ((self.frac_cwnd >> CWND_UNIT) as u32).max(tp.inflight) as u64;
            rate = (USEC_PER_SEC << 3) * mtu;
            let s = srtt8(tp);
            if s != 0 {
                rate /= s as u64;
            }
            rate = (rate * max_inflight).max(MINIMUM_RATE);
            self.rate_bytes = rate;
        }
        if tp.cwnd < tp.ssthresh / 2 {
            rate <<= 1;
        }
        // sk_max_pacing_rate is unlimited.
        let burst = rate / mss_to_mtu(tp.mss);
        let shifted = burst.checked_shr(self.params.burst_shift).unwrap_or(0);
        self.max_tso_burst = (shifted as u32).max(1);
        tp.pacing_rate = rate;
    }

    /// `prague_new_round`.
    fn new_round(&mut self, tp: &TcpState) {
        self.next_seq = tp.snd_nxt;
        self.old_delivered_ce = tp.delivered_ce as u32;
        self.old_delivered = tp.delivered as u32;
        if !tp.in_slow_start() {
            self.round = self.round.wrapping_add(1);
            if self.round == 0 {
                self.round = self.params.rtt_transition;
            }
        }
        self.ai_ack_increase(tp);
    }

    /// `prague_cwnd_changed` (`snd_cwnd_stamp` is not kept by the core).
    fn cwnd_changed(&mut self, tp: &TcpState) {
        self.ai_ack_increase(tp);
    }

    /// `prague_update_alpha`.
    fn update_alpha(&mut self, tp: &mut TcpState) {
        // Do not update alpha before we have proof that there's an AQM on the path.
        if self.saw_ce {
            let mut alpha = self.upscaled_alpha;
            let mut ecn_segs = (tp.delivered_ce as u32).wrapping_sub(self.old_delivered_ce) as u64;
            // upscaled_alpha = α/g: F is added unscaled, α/16 decays.
            if ecn_segs != 0 {
                let acked_segs = (tp.delivered as u32).wrapping_sub(self.old_delivered);
                ecn_segs <<= PRAGUE_ALPHA_BITS;
                ecn_segs /= acked_segs.max(1) as u64;
            }
            alpha = alpha - (alpha >> PRAGUE_SHIFT_G) + ecn_segs;
            self.alpha_stamp = tp.now_us();
            self.upscaled_alpha = (PRAGUE_MAX_ALPHA << PRAGUE_SHIFT_G).min(alpha);

            if self.is_rtt_indep(tp) && !self.in_loss {
                let mtu_used = mss_to_mtu(tp.mss);
                let mtu = self.valid_mtu(self.pacing_rate_to_max_mtu(tp));
                if mtu_used != mtu {
                    // The source rescales frac_cwnd and ssthresh by mtu_used/mtu and calls
                    // tcp_sync_mss(sk, mtu). The simulator's MSS is fixed: skipped.
                    self.mss_reductions_skipped += 1;
                }
            }
        }
        self.hsrtt_us = self.hsrtt_us + srtt8(tp) as u64 - (self.hsrtt_us >> HSRTT_SHIFT);
        self.new_round(tp);
    }

    /// `prague_update_cwnd`.
    fn update_cwnd(&mut self, tp: &mut TcpState, rs: &RateSample) {
        let mut acked: i64 = rs.acked_sacked as i64;
        if rs.ece_delta != 0 {
            if !self.saw_ce && !self.alpha_mode {
                self.frac_cwnd = (self.frac_cwnd + 1) >> 1;
            }
            self.saw_ce = true;
            acked -= rs.ece_delta as i64;
        }

        if !(acked <= 0 || self.in_loss || !tp.is_cwnd_limited()) {
            if tp.in_slow_start() {
                acked = tp.slow_start(acked as u32) as i64;
                self.frac_cwnd = (tp.cwnd as u64) << CWND_UNIT;
                if acked == 0 {
                    self.cwnd_changed(tp);
                    return;
                }
            }
            let acked = acked as u64;
            if self.is_rtt_indep(tp) && self.cwnd_mode == 1 {
                let mtu_used = mss_to_mtu(tp.mss);
                let vrtt = self.virtual_rtt(tp);
                let increase = ((acked * MTU_SYS) << RTT2SEC_SHIFT) / vrtt;
                let divisor = mtu_used << RTT2SEC_SHIFT;
                let new_cwnd = div_round_up(self.rate_bytes.wrapping_mul(vrtt), divisor);
                if new_cwnd != 0 {
                    self.rate_bytes += div_round_closest(increase, new_cwnd);
                }
                self.frac_cwnd = (self.frac_cwnd + acked).max(self.pacing_rate_to_frac_cwnd(tp));
            } else {
                let mut increase = acked * self.ai_ack_increase;
                let new_cwnd = self.frac_cwnd;
                if new_cwnd != 0 {
                    increase <<= CWND_UNIT;
                    increase = div_round_closest(increase, new_cwnd);
                }
                increase = increase * MTU_SYS / mss_to_mtu(tp.mss);
                self.frac_cwnd += acked.max(increase);

                let rate = self.frac_cwnd_to_pacing_rate(tp);
                self.rate_bytes = (self.rate_bytes + acked).max(rate);
            }
        }

        // adjust:
        let new_cwnd = self.frac_cwnd_to_snd_cwnd();
        if tp.cwnd > new_cwnd {
            // Step-wise cwnd decrement.
            tp.cwnd -= 1;
            tp.ssthresh = tp.cwnd;
            self.cwnd_changed(tp);
        } else if tp.cwnd < new_cwnd {
            // Step-wise cwnd increment.
            tp.cwnd += 1;
            self.cwnd_changed(tp);
        }
    }

    /// `prague_ca_open`.
    fn ca_open(&mut self) {
        self.in_loss = false;
    }

    /// `prague_enter_loss`: halve frac_cwnd (or the rate in rate mode).
    fn enter_loss(&mut self, tp: &TcpState) {
        self.loss_cwnd = tp.cwnd;
        self.loss_rate_bytes = self.rate_bytes;
        if self.is_rtt_indep(tp) && self.cwnd_mode == 1 {
            self.rate_bytes -= self.rate_bytes >> 1;
            self.frac_cwnd = self.pacing_rate_to_frac_cwnd(tp);
        } else {
            self.frac_cwnd -= self.frac_cwnd >> 1;
            self.rate_bytes = self.frac_cwnd_to_pacing_rate(tp);
        }
        self.in_loss = true;
    }

    /// `prague_enter_cwr`: frac_cwnd·(1 − α/2), at most once per target RTT when
    /// RTT-independent.
    fn enter_cwr(&mut self, tp: &TcpState) {
        if self.is_rtt_indep(tp)
            && (self.target_rtt() >> 3) as u64 > stamp_us_delta(tp.now_us(), self.cwr_stamp)
        {
            return;
        }
        self.cwr_stamp = tp.now_us();
        let alpha = self.upscaled_alpha >> PRAGUE_SHIFT_G;

        if self.is_rtt_indep(tp) && self.cwnd_mode == 1 {
            let reduction = mul_u64_u64_shr(self.rate_bytes, alpha, PRAGUE_ALPHA_BITS + 1);
            self.rate_bytes = self.rate_bytes.saturating_sub(reduction).max(MINIMUM_RATE);
            self.frac_cwnd = self.pacing_rate_to_frac_cwnd(tp);
        } else {
            // Unbias the rounding by adding 1/2 (u64 arithmetic as the source).
            let reduction = alpha
                .wrapping_mul(self.frac_cwnd)
                .wrapping_add(PRAGUE_MAX_ALPHA)
                >> (PRAGUE_ALPHA_BITS + 1);
            self.frac_cwnd -= reduction;
            self.rate_bytes = self.frac_cwnd_to_pacing_rate(tp);
        }
    }

    fn phase(&self, tp: &TcpState) -> &'static str {
        if self.reno_fallback {
            "reno_fallback"
        } else if self.in_loss || tp.ca_state >= CaState::Recovery {
            "loss"
        } else if tp.in_slow_start() {
            "slow_start"
        } else if self.cwnd_mode == 1 {
            "rate_mode"
        } else if tp.ca_state == CaState::Cwr {
            "cwr"
        } else {
            "cong_avoid"
        }
    }
}

impl CongestionControl for Prague {
    fn name(&self) -> &'static str {
        "prague"
    }

    /// `prague_init`.
    fn init(&mut self, tp: &mut TcpState) {
        if !tp.ecn_ok {
            // "Switching to pure reno": never happens here (the core forces ECN for L4S).
            self.reno_fallback = true;
            return;
        }
        self.alpha_stamp = tp.now_us();
        self.alpha_mode = self.params.alpha_mode & 0x01 != 0;
        self.upscaled_alpha = if !self.alpha_mode {
            0
        } else {
            PRAGUE_MAX_ALPHA << PRAGUE_SHIFT_G
        };
        self.frac_cwnd = (tp.cwnd as u64) << CWND_UNIT;
        self.max_tso_burst = 1;

        // Rate initialization.
        let s = srtt8(tp);
        if s != 0 {
            self.rate_bytes = (USEC_PER_SEC << 3) * mss_to_mtu(tp.mss) / s as u64;
            self.rate_bytes = MINIMUM_RATE.max(self.rate_bytes * tp.cwnd.max(tp.inflight) as u64);
        } else {
            self.rate_bytes = MINIMUM_RATE;
        }
        self.update_pacing_rate(tp);
        self.loss_rate_bytes = 0;
        self.round = 0;
        self.saw_ce = tp.delivered_ce != 0;

        let mtu = mss_to_mtu(tp.mss) as u32;
        self.mtu_cache = if mtu != 0 { mtu } else { MTU_SYS as u32 };
        // Default as 1 µs.
        self.hsrtt_us = if s != 0 {
            (s as u64) << HSRTT_SHIFT
        } else {
            1 << (HSRTT_SHIFT + 3)
        };
        self.cwnd_mode_transit = (self.params.cwnd_mode & 0x02) >> 1 != 0;
        self.cwnd_mode = (self.params.cwnd_mode & 0x01) as u8;

        self.new_round(tp);
    }

    /// `prague_ssthresh`: unchanged (the reduction is done on frac_cwnd).
    fn ssthresh(&mut self, tp: &mut TcpState) -> u32 {
        if self.reno_fallback {
            return reno::Reno.ssthresh(tp);
        }
        tp.ssthresh
    }

    /// Prague has no `.cong_avoid`; only `prague_reno` (the fallback) does.
    fn cong_avoid(&mut self, tp: &mut TcpState, acked: u32) {
        if self.reno_fallback {
            reno::Reno.cong_avoid(tp, acked);
        }
    }

    /// `prague_state`.
    fn set_state(&mut self, tp: &mut TcpState, new_state: CaState) {
        if self.reno_fallback || new_state == tp.ca_state {
            return;
        }
        match new_state {
            CaState::Recovery => self.enter_loss(tp),
            CaState::Cwr => self.enter_cwr(tp),
            CaState::Open => self.ca_open(),
            _ => {}
        }
    }

    /// `prague_cwnd_event`: an RTO halves like a loss.
    fn cwnd_event(&mut self, tp: &mut TcpState, ev: CaEvent) {
        if !self.reno_fallback && ev == CaEvent::Loss {
            self.enter_loss(tp);
        }
    }

    /// `prague_cwnd_undo` (the core never undoes; see Deviations).
    fn undo_cwnd(&mut self, tp: &TcpState) -> u32 {
        if self.reno_fallback {
            return tp.cwnd.max(tp.prior_cwnd);
        }
        // We may have made some progress since then, account for it.
        self.in_loss = false;
        self.rate_bytes = self.rate_bytes.max(self.loss_rate_bytes);
        self.frac_cwnd = self.pacing_rate_to_frac_cwnd(tp);
        self.loss_cwnd.max(tp.cwnd)
    }

    fn has_cong_control(&self) -> bool {
        !self.reno_fallback
    }

    /// `prague_cong_control`.
    fn cong_control(&mut self, tp: &mut TcpState, rs: &RateSample) {
        if self.reno_fallback {
            return;
        }
        self.update_cwnd(tp, rs);
        if self.should_update_ewma(tp) {
            self.update_alpha(tp);
        }
        self.update_pacing_rate(tp);
        if self.cwnd_mode_transit {
            let cwnd_bytes = tp.cwnd as u64 * mss_to_mtu(tp.mss);
            let cwnd_bytes_transit = self.params.cwnd_transit as u64 * MTU_SYS;
            if self.saw_ce && cwnd_bytes <= cwnd_bytes_transit {
                self.cwnd_mode = 1;
                self.frac_cwnd = self.pacing_rate_to_frac_cwnd(tp);
            } else {
                // !saw_ce || cwnd_bytes > cwnd_bytes_transit
                self.cwnd_mode = 0;
                self.rate_bytes = self.frac_cwnd_to_pacing_rate(tp);
            }
        }
    }

    fn ecn_use(&self) -> EcnUse {
        EcnUse::L4s
    }

    fn wants_pacing(&self) -> bool {
        true
    }

    /// `prague_tso_segs`.
    fn tso_segs(&self, _tp: &TcpState) -> Option<u32> {
        if self.reno_fallback {
            return None;
        }
        let mut tso_segs = self.max_tso_burst;
        if self.params.max_tso_segs != 0 {
            tso_segs = tso_segs.min(self.params.max_tso_segs);
        }
        Some(tso_segs)
    }

    fn probe(&self, tp: &TcpState) -> CcProbe {
        CcProbe {
            phase: Some(self.phase(tp)),
            bw_bps: Some(tp.pacing_rate as f64 * 8.0),
            inflight_hi: None,
            alpha: if self.reno_fallback {
                None
            } else {
                Some(self.alpha())
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection in congestion avoidance (cwnd = ssthresh), cwnd-limited, ECN negotiated,
    /// at t = 1 s.
    fn tp(cwnd: u32, ssthresh: u32, srtt_us: u32) -> TcpState {
        let mut t = TcpState::new(1448, 1_000_000_000);
        t.cwnd = cwnd;
        t.ssthresh = ssthresh;
        t.srtt_us = srtt_us;
        t.min_rtt_us = srtt_us;
        t.ecn_ok = true;
        t.is_cwnd_limited = true;
        t.max_packets_out = cwnd;
        t
    }

    fn prague(params: Params, t: &mut TcpState) -> Prague {
        let mut p = Prague::new(params, 0);
        p.init(t);
        p
    }

    fn rs(acked: u32, ce: u32) -> RateSample {
        RateSample {
            acked_sacked: acked,
            ece_delta: ce,
            is_ece: ce > 0,
            ..RateSample::default()
        }
    }

    /// One ACK delivering `acked` segments of which `ce` CE, then the sender refills cwnd.
    fn ack(p: &mut Prague, t: &mut TcpState, acked: u32, ce: u32) {
        t.snd_una += acked;
        t.delivered += acked as u64;
        t.delivered_ce += ce as u64;
        p.cong_control(t, &rs(acked, ce));
        t.snd_nxt = t.snd_una + t.cwnd;
    }

    /// One whole round acked at once: `n` segments, `ce` CE, `dt_ms` later.
    fn round(p: &mut Prague, t: &mut TcpState, n: u32, ce: u32, dt_ms: u64) {
        t.now_ns += dt_ms * 1_000_000;
        t.snd_nxt = t.snd_una + n;
        ack(p, t, n, ce);
    }

    #[test]
    fn alpha_is_an_ewma_with_gain_one_sixteenth_converging_to_the_marked_fraction() {
        // F = 25/100 every round. ecn_segs = (25 << 24)/100 = 4194304 = 2^22.
        // upscaled: 0 → 0 − 0 + 2^22 = 4194304            (α = 2^18/2^24 = 1/64 = g·F)
        //           → 4194304 − 262144 + 4194304 = 8126464  (α = 507904/2^24 = 0.0302734375)
        //           → 8126464 − 507904 + 4194304 = 11812864 (α = 738304/2^24)
        // Fixed point: a = a − a/16 + 2^22 ⇔ a = 2^26; from below d_{n+1} = d_n − ⌊d_n/16⌋ < 0
        // shrinks to exactly 0 (d ∈ (−16, 0) steps by +1), reached after ≈ 26·ln2/ln(16/15)
        // ≈ 280 rounds: α = 2^22/2^24 = 0.25 exactly.
        let mut t = tp(100, 100, 20_000);
        let mut p = prague(Params::default(), &mut t);
        assert_eq!(p.upscaled_alpha, 0);
        let expect = [4_194_304u64, 8_126_464, 11_812_864];
        for e in expect {
            round(&mut p, &mut t, 100, 25, 30);
            assert_eq!(p.upscaled_alpha, e);
        }
        assert_eq!(p.alpha(), 1.0 / 64.0 * (1.0 + 15.0 / 16.0 + 225.0 / 256.0));
        for _ in 0..400 {
            round(&mut p, &mut t, 100, 25, 30);
        }
        assert_eq!(p.upscaled_alpha, 1 << 26);
        assert_eq!(p.alpha(), 0.25);
        // F = 0 afterwards: α decays by 1/16 per round: 2^26 − 2^22 = 62914560.
        round(&mut p, &mut t, 100, 0, 30);
        assert_eq!(p.upscaled_alpha, 62_914_560);
    }

    #[test]
    fn alpha_waits_for_the_first_mark_and_alpha_mode_1_starts_at_one() {
        let mut t = tp(100, 100, 20_000);
        let mut p = prague(Params::default(), &mut t);
        round(&mut p, &mut t, 100, 0, 30);
        assert!(!p.saw_ce);
        assert_eq!(p.upscaled_alpha, 0);
        let mut t = tp(100, 100, 20_000);
        let p = prague(
            Params {
                alpha_mode: 1,
                ..Params::default()
            },
            &mut t,
        );
        assert_eq!(p.upscaled_alpha, PRAGUE_MAX_ALPHA << 4);
        assert_eq!(p.alpha(), 1.0);
    }

    #[test]
    fn alpha_update_waits_25ms_once_rtt_independent() {
        // 5 ms RTT, rounds every 5 ms: while round < 4 α updates every round; afterwards only
        // when 25 ms have passed since the last update (prague_target_rtt_elapsed, `<=`).
        let mut t = tp(100, 100, 5_000);
        let mut p = prague(Params::default(), &mut t);
        round(&mut p, &mut t, 100, 100, 5); // saw_ce, α update 1 (round → 2)
        let a1 = p.upscaled_alpha;
        assert_eq!(a1, 1 << 24); // F = 1
        round(&mut p, &mut t, 100, 100, 5);
        round(&mut p, &mut t, 100, 100, 5); // round → 4: RTT independent from now
        assert_eq!(p.round, 4);
        let a3 = p.upscaled_alpha;
        for k in 1..5 {
            // 5, 10, 15, 20 ms since the last update: no update.
            round(&mut p, &mut t, 100, 100, 5);
            assert_eq!(p.upscaled_alpha, a3, "k = {k}");
        }
        round(&mut p, &mut t, 100, 100, 5); // 25 ms: update, F over the 5 rounds' 500 segs = 1.
        assert_eq!(p.upscaled_alpha, a3 - (a3 >> 4) + (1 << 24));
    }

    #[test]
    fn first_mark_halves_the_fractional_window_in_alpha_mode_0() {
        // All delivered segments CE ⇒ acked = 0 ⇒ no slow start; frac = (100·2^20 + 1) >> 1
        // = 50·2^20; the integer cwnd steps down by one and ssthresh follows (leaves SS).
        let mut t = tp(100, TCP_INFINITE, 20_000);
        t.max_packets_out = 100;
        let mut p = prague(Params::default(), &mut t);
        t.snd_nxt = 100;
        ack(&mut p, &mut t, 2, 2);
        assert_eq!(p.frac_cwnd, 50 << 20);
        assert_eq!((t.cwnd, t.ssthresh), (99, 99));
        // A second mark does not halve again.
        ack(&mut p, &mut t, 2, 2);
        assert_eq!(p.frac_cwnd, 50 << 20);
        assert_eq!((t.cwnd, t.ssthresh), (98, 98));
    }
    const TCP_INFINITE: u32 = super::super::TCP_INFINITE_SSTHRESH;

    #[test]
    fn cwr_reduces_by_alpha_over_two_at_most_once_per_25ms_when_rtt_independent() {
        // α = 1/2 (upscaled 2^27): reduction = (2^23·100·2^20 + 2^24) >> 25 = 100·2^18
        // = 25·2^20 ⇒ frac 100 → 75 segments = 100·(1 − α/2).
        let mut t = tp(100, 100, 5_000);
        let mut p = prague(Params::default(), &mut t);
        p.upscaled_alpha = 1 << 27;
        p.frac_cwnd = 100 << 20;
        p.round = 10; // RTT independent
        p.cwr_stamp = 0;
        p.set_state(&mut t, CaState::Cwr);
        assert_eq!(p.frac_cwnd, 75 << 20);
        // rate_bytes = (8e6·1500/40000 = 300000)·75 = 22.5 MB/s.
        assert_eq!(p.rate_bytes, 22_500_000);
        // 24.999 ms later: refused (25000 > 24999).
        t.now_ns += 24_999_000;
        p.set_state(&mut t, CaState::Cwr);
        assert_eq!(p.frac_cwnd, 75 << 20);
        // 25 ms after the first: reduced again; 75·2^20·2^23 = 75·2^43, +2^24, >> 25 =
        // 75·2^18 + ⌊0.5⌋ ⇒ frac = 75·2^20 − 75·2^18 = 225·2^18 (56.25 segments).
        t.now_ns += 1_000;
        p.set_state(&mut t, CaState::Cwr);
        assert_eq!(p.frac_cwnd, 225 << 18);
        // Not RTT independent (round < 4): every CWR entry reduces.
        p.round = 0;
        t.now_ns += 1_000;
        p.set_state(&mut t, CaState::Cwr);
        assert_eq!(p.frac_cwnd, (225 << 18) - (225 << 16));
        // Same state as now: no-op (prague_state).
        t.ca_state = CaState::Cwr;
        p.set_state(&mut t, CaState::Cwr);
        assert_eq!(p.frac_cwnd, (225 << 18) - (225 << 16));
    }

    #[test]
    fn cwr_reduction_rounds_half_up() {
        // α = 1, frac = 3 units: (2^24·3 + 2^24) >> 25 = 2 (1.5 rounded up) ⇒ 1.
        let mut t = tp(100, 100, 20_000);
        let mut p = prague(Params::default(), &mut t);
        p.upscaled_alpha = PRAGUE_MAX_ALPHA << 4;
        p.frac_cwnd = 3;
        p.set_state(&mut t, CaState::Cwr);
        assert_eq!(p.frac_cwnd, 1);
    }

    /// The frac_cwnd growth (segments) over one RTT's worth of single-segment ACKs.
    fn growth_per_rtt(srtt_us: u32, round: u32) -> f64 {
        let mut t = tp(100, 100, srtt_us);
        let mut p = prague(Params::default(), &mut t);
        p.round = round;
        p.ai_ack_increase(&t);
        let f0 = p.frac_cwnd;
        for _ in 0..100 {
            p.update_cwnd(&mut t, &rs(1, 0));
        }
        (p.frac_cwnd - f0) as f64 / ONE_CWND as f64
    }

    #[test]
    fn additive_increase_is_rtt_scaled_below_25ms_so_the_rate_grows_alike() {
        // ai = round((rtt8 << 20)·rtt8 / (200000²)): 5 ms → round(2^20·0.04) = 41943;
        // 20 ms → round(2^20·0.64) = 671089; ≥ 25 ms → 2^20.
        let mut t = tp(100, 100, 5_000);
        let mut p = prague(Params::default(), &mut t);
        p.round = 4;
        p.ai_ack_increase(&t);
        assert_eq!(p.ai_ack_increase, 41_943);
        // First ACK: round(41943·2^20/(100·2^20)) = round(419.43) = 419 units.
        let f0 = p.frac_cwnd;
        p.update_cwnd(&mut t, &rs(1, 0));
        assert_eq!(p.frac_cwnd - f0, 419);
        t.srtt_us = 20_000;
        p.ai_ack_increase(&t);
        assert_eq!(p.ai_ack_increase, 671_089);

        // Per RTT (cwnd = 100 segments acked one by one): (srtt/25 ms)² segments, a little
        // less as frac_cwnd grows during the RTT (Σ 1/W_i).
        let g5 = growth_per_rtt(5_000, 4);
        let g20 = growth_per_rtt(20_000, 4);
        let g25 = growth_per_rtt(25_000, 4);
        let g40 = growth_per_rtt(40_000, 4);
        assert!((g5 - 0.04).abs() < 0.0004, "{g5}");
        assert!((g20 - 0.64).abs() < 0.0064, "{g20}");
        assert!((g25 - 1.0).abs() < 0.01, "{g25}");
        assert!((g40 - 1.0).abs() < 0.01, "{g40}");
        // Before the transition rounds: unscaled, 1 segment per RTT even at 5 ms.
        assert!((growth_per_rtt(5_000, 3) - 1.0).abs() < 0.01);
        // RTT independence: rate growth per second = Δcwnd/RTT · MTU / RTT is the same for
        // 5 and 20 ms (MTU/(25 ms)² = 1500/625e-6 = 2.4 MB/s²).
        let r5 = g5 * 1500.0 / (0.005 * 0.005);
        let r20 = g20 * 1500.0 / (0.020 * 0.020);
        assert!((r5 / r20 - 1.0).abs() < 0.01, "{r5} vs {r20}");
        assert!((r5 / 2.4e6 - 1.0).abs() < 0.01, "{r5}");
        // While a 40 ms flow grows like Reno: 1 segment per RTT ⇒ 1500/0.04² < 2.4e6.
        assert!(g40 * 1500.0 / (0.04 * 0.04) < r5);
    }

    #[test]
    fn only_unmarked_deliveries_earn_increase_also_in_cwr() {
        let mut t = tp(100, 100, 30_000);
        let mut p = prague(Params::default(), &mut t);
        p.saw_ce = true;
        t.ca_state = CaState::Cwr;
        let f0 = p.frac_cwnd;
        // 2 acked, 1 CE: increase = round(1·2^20·2^20/(100·2^20)) = round(10485.76) = 10486.
        p.update_cwnd(&mut t, &rs(2, 1));
        assert_eq!(p.frac_cwnd - f0, 10_486);
        // All marked: nothing.
        let f1 = p.frac_cwnd;
        p.update_cwnd(&mut t, &rs(2, 2));
        assert_eq!(p.frac_cwnd, f1);
    }

    #[test]
    fn loss_halves_and_blocks_increase_until_open() {
        let mut t = tp(100, 100, 20_000);
        let mut p = prague(Params::default(), &mut t);
        p.set_state(&mut t, CaState::Recovery);
        assert_eq!(p.frac_cwnd, 50 << 20);
        assert_eq!(p.loss_cwnd, 100);
        assert!(p.in_loss);
        t.ca_state = CaState::Recovery;
        assert_eq!(p.probe(&t).phase, Some("loss"));
        // No increase; the integer cwnd steps down by one per ACK, ssthresh with it.
        for i in 1..=60u32 {
            ack(&mut p, &mut t, 1, 0);
            assert_eq!(p.frac_cwnd, 50 << 20);
            assert_eq!(t.cwnd, (100 - i).max(50));
        }
        assert_eq!(t.ssthresh, 50);
        // Back to Open: the increase resumes (ai = 2^20 at round < 4: 2^20/50 per segment).
        p.set_state(&mut t, CaState::Open);
        t.ca_state = CaState::Open;
        assert!(!p.in_loss);
        p.update_cwnd(&mut t, &rs(1, 0));
        assert_eq!(p.frac_cwnd, (50 << 20) + 20_972); // round(2^20/50 = 20971.52)
                                                      // An RTO halves too (CA_EVENT_LOSS), and undo restores (rate kept, cwnd = max).
        let rate = p.rate_bytes;
        p.cwnd_event(&mut t, CaEvent::Loss);
        assert!(p.in_loss);
        assert_eq!(p.frac_cwnd, ((50 << 20) + 20_972) / 2);
        // The one ACK in Open stepped cwnd to ⌈frac⌉ = 51, which loss_cwnd saved.
        assert_eq!(p.undo_cwnd(&t), 51);
        assert_eq!(p.rate_bytes, rate);
        assert!(!p.in_loss);
    }

    #[test]
    fn pacing_rate_is_mtu_cwnd_over_srtt_doubled_in_slow_start() {
        // (8e6·1500/160000 = 75000 B/s per segment)·100 = 7.5 MB/s = 1500·100/0.02.
        let mut t = tp(100, 100, 20_000);
        let mut p = prague(Params::default(), &mut t);
        p.update_pacing_rate(&mut t);
        assert_eq!(t.pacing_rate, 7_500_000);
        // max(⌊frac⌋, inflight): 120 in flight ⇒ 9 MB/s.
        t.inflight = 120;
        p.update_pacing_rate(&mut t);
        assert_eq!(t.pacing_rate, 9_000_000);
        t.inflight = 0;
        // cwnd < ssthresh/2 (slow start) ⇒ ×2.
        t.ssthresh = 202; // 100 < 101
        p.update_pacing_rate(&mut t);
        assert_eq!(t.pacing_rate, 15_000_000);
        t.ssthresh = 201; // 100 < 100 is false
        p.update_pacing_rate(&mut t);
        assert_eq!(t.pacing_rate, 7_500_000);
        // Floor: 100 kbit/s.
        p.frac_cwnd = 0;
        t.srtt_us = 1_000_000;
        p.update_pacing_rate(&mut t);
        assert_eq!(t.pacing_rate, MINIMUM_RATE);
        // TSO burst: rate/MTU >> 12. 10000 segments at 20 ms ⇒ 750 MB/s ⇒ 500000 >> 12 = 122.
        t.srtt_us = 20_000;
        p.frac_cwnd = 10_000 << 20;
        p.update_pacing_rate(&mut t);
        assert_eq!(p.tso_segs(&t), Some(122));
        p.params.max_tso_segs = 50;
        assert_eq!(p.tso_segs(&t), Some(50));
        p.params.max_tso_segs = 0;
        p.frac_cwnd = 100 << 20; // 5000 pkt/s >> 12 = 1
        p.update_pacing_rate(&mut t);
        assert_eq!(p.tso_segs(&t), Some(1));
    }

    #[test]
    fn init_sets_rate_window_and_round() {
        let mut t = tp(10, TCP_INFINITE, 20_000);
        t.snd_nxt = 7;
        let p = prague(Params::default(), &mut t);
        assert_eq!(p.frac_cwnd, 10 << 20);
        // 75000·10 = 750 kB/s, ×2 in slow start.
        assert_eq!(p.rate_bytes, 750_000);
        assert_eq!(t.pacing_rate, 1_500_000);
        assert_eq!(p.next_seq, 7);
        assert_eq!(p.round, 0); // slow start: no round counted
        assert_eq!(p.hsrtt_us, 160_000 << 7);
        assert_eq!(p.ai_ack_increase, 1 << 20);
        assert_eq!(p.probe(&t).phase, Some("slow_start"));
    }

    #[test]
    fn small_windows_switch_to_rate_mode_after_a_mark() {
        // cwnd 4 (6000 B ≤ 4·1500) and saw_ce ⇒ cwnd_mode 1 and frac_cwnd from the rate:
        // rate = 75000·4 = 300000 B/s; frac = ⌈300000·160000 >> 3 / 1500⌉ = 4000000 units
        // (3.81 segments: the source's 2^23 ≈ 8·10^6 shortcut).
        let mut t = tp(4, 4, 20_000);
        let mut p = prague(Params::default(), &mut t);
        p.saw_ce = true;
        t.snd_nxt = 100; // no round end
        p.cong_control(&mut t, &rs(0, 0));
        assert_eq!(p.cwnd_mode, 1);
        assert_eq!(p.frac_cwnd, 4_000_000);
        assert_eq!(p.probe(&t).phase, Some("rate_mode"));
        // Above the transit point it switches back.
        t.cwnd = 5;
        p.frac_cwnd = 5 << 20;
        p.cong_control(&mut t, &rs(0, 0));
        assert_eq!(p.cwnd_mode, 0);
        // Mode 0 never switches.
        let mut t = tp(4, 4, 20_000);
        let mut p = prague(
            Params {
                cwnd_mode: 0,
                ..Params::default()
            },
            &mut t,
        );
        p.saw_ce = true;
        p.cong_control(&mut t, &rs(0, 0));
        assert_eq!(p.cwnd_mode, 0);
    }

    #[test]
    fn deterministic_and_seed_independent() {
        let run = |seed: u64| {
            let mut t = tp(10, TCP_INFINITE, 8_000);
            let mut p = Prague::new(Params::default(), seed);
            p.init(&mut t);
            let mut x: u64 = 12345;
            let mut trace = Vec::new();
            for _ in 0..5000 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let acked = 1 + (x >> 60) as u32 % 3;
                let ce = u32::from((x >> 40) % 10 == 0);
                t.now_ns += 100_000;
                t.max_packets_out = t.cwnd;
                if ce > 0 && t.ca_state == CaState::Open {
                    p.set_state(&mut t, CaState::Cwr);
                    t.ca_state = CaState::Cwr;
                } else if t.ca_state == CaState::Cwr && (x >> 20) % 7 == 0 {
                    p.set_state(&mut t, CaState::Open);
                    t.ca_state = CaState::Open;
                }
                ack(&mut p, &mut t, acked, ce);
                trace.push((
                    t.cwnd,
                    t.ssthresh,
                    t.pacing_rate,
                    p.upscaled_alpha,
                    p.frac_cwnd,
                ));
            }
            trace
        };
        let a = run(1);
        assert_eq!(a, run(1));
        assert_eq!(a, run(99));
        // And it did something: α moved, cwnd left slow start.
        let last = a.last().unwrap();
        assert!(last.3 > 0 && last.1 < TCP_INFINITE);
    }

    #[test]
    fn without_ecn_it_falls_back_to_reno() {
        let mut t = tp(10, TCP_INFINITE, 20_000);
        t.ecn_ok = false;
        let mut p = prague(Params::default(), &mut t);
        assert!(!p.has_cong_control());
        assert_eq!(p.ssthresh(&mut tp(100, 100, 1)), 50);
        assert_eq!(p.tso_segs(&t), None);
    }

    #[test]
    fn params_defaults_serde_and_validation() {
        let d = Params::default();
        assert_eq!(
            (
                d.burst_shift,
                d.max_tso_segs,
                d.rtt_transition,
                d.rtt_target
            ),
            (12, 0, 4, 25_000)
        );
        assert_eq!((d.alpha_mode, d.cwnd_mode, d.cwnd_transit), (0, 2, 4));
        assert!(d.validate().is_ok());
        let p: Params = serde_json::from_str(r#"{"rtt_target": 15000}"#).unwrap();
        assert_eq!((p.rtt_target, p.cwnd_mode), (15_000, 2));
        assert!(serde_json::from_str::<Params>(r#"{"prague_rtt_target": 1}"#).is_err());
        let bad = |p: Params, name: &str| {
            let e = p.validate().unwrap_err();
            assert!(e.starts_with(name), "{e}");
        };
        bad(
            Params {
                rtt_target: 0,
                ..d.clone()
            },
            "rtt_target:",
        );
        bad(
            Params {
                rtt_target: u32::MAX,
                ..d.clone()
            },
            "rtt_target:",
        );
        bad(
            Params {
                burst_shift: 64,
                ..d.clone()
            },
            "burst_shift:",
        );
        bad(
            Params {
                alpha_mode: 2,
                ..d.clone()
            },
            "alpha_mode:",
        );
        bad(
            Params {
                cwnd_mode: 3,
                ..d.clone()
            },
            "cwnd_mode:",
        );
    }
}
