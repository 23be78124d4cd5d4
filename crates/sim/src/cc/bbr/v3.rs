//! BBRv3 as google/bbr implements it: branch `v3`, `net/ipv4/tcp_bbr.c` (`#define BBR_VERSION
//! 3`, the 6.x-era port with `bbr_param()`, BTF kfuncs and `GSO_LEGACY_MAX_SIZE`), ported
//! function by function; draft-ietf-ccwg-bbr for orientation. The source is the authority
//! where they differ (e.g. PROBE_DOWN paces at `BBR_UNIT * 91 / 100` = 232/256 ≈ 0.906 in the
//! code, 0.90 in the draft). The google/bbr fork Ardentwheel/bbr@cfb5dbe has the same functions
//! plus a sysctl "LFN guard" (`bbr_lfn_eligible`, `sysctl_tcp_bbr_lfn_*`) that is not google's
//! and is not ported. BBRv2 means google/bbr v2alpha `net/ipv4/tcp_bbr2.c` (commit 0487ade55081).
//!
//! The functions v3 shares with v1 are in [`super`], those it kept of v2 in [`super::bounds`]
//! (where the two differ, by the [`Bounded`] parameters below); this file has v3's parameters
//! and the functions only v3 has.
//!
//! # Differences from BBRv2 (google/bbr v2alpha tcp_bbr2.c)
//!
//! 1. **Gains** (`bbr_update_gains`, `bbr_pacing_gain[]`): STARTUP paces at
//!    `startup_pacing_gain` 4·ln 2 ≈ 2.77 (710/256, v2 2.885) with cwnd gain 2.0 (v2 2.885),
//!    which DRAIN keeps; DOWN paces at 0.91 (232/256, v2 0.75); in UP the cwnd gain is
//!    `cwnd_gain + bw_probe_cwnd_gain·¼` = 2.25 (v2 2.0). The pacing gains are four (one per
//!    phase) instead of v1's 8-entry array.
//! 2. **Bandwidth** (`bbr_bw`, `bbr_adapt_upper_bounds`): v3 renames the two-slot max filter
//!    `bw_hi[2]` and drops v2's separate bound `bw_hi` and `got_ok_bw_probe_sample`:
//!    `bw = min(max_bw, bw_lo)` (v2 `min(max_bw, bw_lo, bw_hi)`).
//! 3. **Full-bandwidth detection** (`bbr_check_full_bw_reached`, `bbr_reset_full_bw`): every
//!    sample ≥ 1.25·full_bw re-arms the detector (v2: max_bw once per round); rounds count on
//!    round starts; the plateau flag `full_bw_now` is re-armable (reset by
//!    `bbr_start_bw_probe_up`, `bbr_set_state(Loss)` and `bbr_undo_cwnd`).
//! 4. **PROBE_UP exit** (`bbr_update_cycle_phase`): on a bw plateau since UP began, unless
//!    inflight_hi is what limits growth (then the detector re-arms); v2 left UP once inflight
//!    reached `bw_probe_pif_gain`·BDP after a min_rtt.
//! 5. **ECN gating** (`bbr_can_use_ecn`, `bbr_update_ecn_alpha`, `bbr_main`): ECN needs the
//!    negotiated ECN **and** the route feature `ecn_low` (`TCP_ECN_LOW`) **and** `ecn_factor`
//!    ≠ 0 **and** min_rtt ≤ ecn_max_rtt_us (v2: the module parameter `ecn_enable`); α and
//!    `ecn_in_round` are updated only while eligible; `TCP_ECN_ECT_PERMANENT` is set.
//! 6. **ECN responses** (`bbr_adapt_lower_bounds`, `bbr_handle_inflight_too_high`,
//!    `bbr_is_inflight_too_high`): only inflight_lo is cut, by (1 − ecn_factor·α) (v2 also
//!    bw_lo and bw_hi); the CE-ratio test is strict (`>`, v2 `>=`); `ecn_reprobe_gain`
//!    defaults to 0.5 (v2 0, disabled).
//! 7. **STARTUP loss exit**: `full_loss_cnt` 6 (v2 8); inflight_hi becomes max(BDP,
//!    inflight_latest) (v2 the BDP).
//! 8. **Latest-delivery signals and TLP** (`bbr_update_latest_delivery_signals`,
//!    `bbr_advance_latest_delivery_signals`, `bbr_run_loss_probe_recovery`): updated before
//!    the fast path and restarted at the end of `bbr_main`, not on an ACK of a TLP
//!    retransmission; a loss repaired by a TLP counts as a loss (v2: both inside
//!    `bbr2_update_congestion_signals`, no TLP handling).
//! 9. **Fixed choices** (the [`Bounded`] parameters): Reno-coexistence rounds =
//!    min(bw_probe_max_rounds, target_inflight); cwnd floored at max(3·tso_segs_goal, 4) with
//!    the aggregation allowance also in STARTUP and DOWN draining to target; no
//!    `usage_based_cwnd` or `refill_add_inc`; TSO floor `sysctl_tcp_min_tso_segs` (2, v2 1 or 2
//!    by rate); inflight_hi growth keeps its ACK count while not cwnd-limited and leaves the
//!    fast path; probe_rtt_min refreshed only by a strictly lower RTT (v2 `<=`); bw_lo ≥ 1.
//! 10. **Loss/undo hooks** (`bbr_set_state`, `bbr_undo_cwnd`): on RTO the whole full-bw
//!     detector resets and inflight_lo is seeded with max(cwnd, prior_cwnd) (v2 prior_cwnd);
//!     undo always reverts (v2 `undo` parameter). `bbr_init` starts the round counter at
//!     `tp->delivered` (v2 0). PLB (`bbr_plb`) is new (not ported, see below).
//!
//! # Deviations
//!
//! - **PLB** (`bbr_plb`, `tcp_plb_update_state`, `tcp_plb_check_rehash`,
//!   `tcp_plb_update_state_upon_rto`) is not implemented: the simulator has no multipath
//!   fabric to rehash onto, and PLB is off by default (`sysctl_tcp_plb_enabled` = 0).
//! - **TLP recovery event.** The core raises no `CA_EVENT_TLP_RECOVERY`. Linux raises it in
//!   `tcp_process_tlp_ack` just before the one-shot CWR (`tcp_init_cwnd_reduction` →
//!   `set_state(CWR)` → `tcp_end_cwnd_reduction` → `tcp_try_keep_open`). The simulator's
//!   core runs the same sequence, and that is the only place where CWR is entered and
//!   completed within one ACK, so `bbr_run_loss_probe_recovery` runs when
//!   `cwnd_event(CompleteCwr)` follows a `set_state(Cwr)` of the same ACK (i.e. slightly
//!   after `ssthresh()`, which only affects the undo snapshot; undo is not modelled by the
//!   core). `tp->tlp_orig_data_app_limited` is approximated by `tp.app_limited != 0`.
//!   A core `CaEvent::TlpRecovery` raised before `init_cwnd_reduction` would remove
//!   the inference.
//! - **Receiver-side hooks and codepoints.** `CA_EVENT_ECN_IS_CE/NO_CE` with
//!   `dctcp_ece_ack_update` and `bbr_precise_ece_ack`, and `tp->fast_ack_mode`, act on the
//!   *receiving* socket; the simulator's receiver runs the DCTCP echo when
//!   [`EcnUse::WantsCeEvents`] is returned. `ecn_use()` returns it when `ecn_low` is set (then
//!   `bbr_can_use_ecn` makes the Linux receiver use `dctcp_ece_ack_update`), and
//!   [`EcnUse::Classic`] otherwise (a default route: the Linux receiver's classic RFC 3168
//!   echo). `TCP_ECN_ECT_PERMANENT` (ECT also on retransmissions when `bbr_can_use_ecn`) is
//!   left to the core's codepoint rule for the returned [`EcnUse`]. `fast_ack_mode` is not
//!   modelled.
//! - `skb_marked_lost` skips Linux's `!scb->tx.delivered_mstamp` test ("skb was SACKed"):
//!   the core never passes a SACKed segment, and a simulated send at t = 0 legitimately has a
//!   zero stamp (`tcp_mstamp` is never 0 in Linux). `tcp_skb_pcount` is 1 (no TSO skbs).
//! - `sk_max_pacing_rate` and `snd_cwnd_clamp` are unlimited; `sk_pacing_shift` is 10;
//!   `sk_gso_max_size` = `GSO_LEGACY_MAX_SIZE` = 65 536 and `MAX_TCP_HEADER` = 320 (x86-64
//!   distribution config), so `bbr_tso_segs` and `bbr_tso_segs_goal` coincide.
//! - `get_random_u32_below(n)` is `reciprocal_scale(next_u32(), n)` on the flow's seeded
//!   PCG (Linux rejects a sliver of draws to remove the bias of order n/2³²).
//! - `bbr_get_info` (inet_diag) is replaced by [`CongestionControl::probe`];
//!   `bbr_sndbuf_expand` has no simulator counterpart (send buffers are unlimited).

use serde::{Deserialize, Serialize};

use super::bounds::{zero_rs, Bounded, Ctx, BW_PROBE_CRUISE, BW_PROBE_DOWN, BW_PROBE_UP, UNSET};
use super::{before, forward, rate_bytes_per_sec, Mode, Version, BBR_UNIT};
use crate::cc::{
    CaEvent, CaState, CcProbe, CongestionControl, EcnUse, RateSample, TcpState, TxSnapshot,
};

/// The source this module ports, for `aqmlab list ccs`.
pub const SOURCE: &str = "google/bbr branch v3, net/ipv4/tcp_bbr.c (BBR_VERSION 3; PLB not ported)";

/// BBRv3's connection state.
pub type Bbr3 = super::Bbr<Params>;

/// `USEC_PER_SEC`.
const USEC_PER_SEC: u64 = 1_000_000;
/// `sysctl_tcp_min_tso_segs` default = 2.
const SYSCTL_TCP_MIN_TSO_SEGS: u32 = 2;

/// Module parameters (the v3 `bbr_param(sk, name)` statics, plus the other constants papers
/// tune) with the source's defaults. Gains and fractions are in units of `BBR_UNIT` = 256
/// (256 = 1.0), exactly as in the C: e.g. `beta` = 76 is `BBR_UNIT * 30 / 100`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Params {
    /// `bbr_min_rtt_win_sec` = 10: window of the min_rtt filter, s.
    pub min_rtt_win_sec: u32,
    /// `bbr_probe_rtt_mode_ms` = 200: minimum time at the PROBE_RTT cwnd, ms (0 disables
    /// PROBE_RTT).
    pub probe_rtt_mode_ms: u32,
    /// `bbr_probe_rtt_win_ms` = 5000: window of `probe_rtt_min_us`, i.e. the PROBE_RTT period,
    /// ms. Must be ≤ min_rtt_win_sec·1000.
    pub probe_rtt_win_ms: u32,
    /// `bbr_probe_rtt_cwnd_gain` = 128 (0.5): PROBE_RTT cwnd as a fraction of the BDP, /256.
    pub probe_rtt_cwnd_gain: u32,
    /// `bbr_tso_rtt_shift` = 9: the min_rtt-based TSO allowance halves per 2^9 µs of min_rtt
    /// (0 disables the allowance).
    pub tso_rtt_shift: u32,
    /// `bbr_pacing_margin_percent` = 1: pace this many percent below the bw estimate.
    pub pacing_margin_percent: u32,
    /// `bbr_startup_pacing_gain` = 256·277/100 + 1 = 710 (≈ 2.77 = 4·ln 2), /256.
    pub startup_pacing_gain: u32,
    /// `bbr_startup_cwnd_gain` = 512 (2.0), /256; also DRAIN's cwnd gain.
    pub startup_cwnd_gain: u32,
    /// `bbr_drain_gain` = 256·1000/2885 = 88 (≈ 0.344), /256.
    pub drain_gain: u32,
    /// `bbr_cwnd_gain` = 512 (2.0): PROBE_BW cwnd gain, /256.
    pub cwnd_gain: u32,
    /// `bbr_pacing_gain[BBR_BW_PROBE_UP]` = 256·5/4 = 320 (1.25), /256.
    pub pacing_gain_up: u32,
    /// `bbr_pacing_gain[BBR_BW_PROBE_DOWN]` = 256·91/100 = 232 (≈ 0.906), /256.
    pub pacing_gain_down: u32,
    /// `bbr_pacing_gain[BBR_BW_PROBE_CRUISE]` = 256 (1.0), /256.
    pub pacing_gain_cruise: u32,
    /// `bbr_pacing_gain[BBR_BW_PROBE_REFILL]` = 256 (1.0), /256.
    pub pacing_gain_refill: u32,
    /// `bbr_cwnd_min_target` = 4 segments.
    pub cwnd_min_target: u32,
    /// `bbr_full_bw_thresh` = 320 (1.25): growth that counts as "more bw", /256.
    pub full_bw_thresh: u32,
    /// `bbr_full_bw_cnt` = 3: rounds without that growth before the pipe counts as full
    /// (1..=3: `full_bw_cnt` is a 2-bit field).
    pub full_bw_cnt: u32,
    /// `bbr_extra_acked_gain` = 256 (1.0): gain on the ACK-aggregation cwnd allowance, /256.
    pub extra_acked_gain: u32,
    /// `bbr_extra_acked_win_rtts` = 5: window of the extra_acked filter, rounds (5-bit).
    pub extra_acked_win_rtts: u32,
    /// `bbr_extra_acked_max_us` = 100 000: cap of the aggregation allowance, µs of bw.
    pub extra_acked_max_us: u32,
    /// The route feature `ecn_low` (`TCP_ECN_LOW`, `ip route ... features ecn_low`): ECN marks
    /// are shallow-threshold (DCTCP/L4S-style). Default false, as on a default route; with
    /// false BBRv3 ignores ECN entirely.
    pub ecn_low: bool,
    /// `bbr_ecn_max_rtt_us` = 5000: ECN logic only if min_rtt ≤ this (0 = any RTT).
    pub ecn_max_rtt_us: u32,
    /// `bbr_beta` = 256·30/100 = 76: multiplicative cut of bw_lo/inflight_lo on loss, /256
    /// (×(1 − 76/256) ≈ ×0.70).
    pub beta: u32,
    /// `bbr_ecn_alpha_gain` = 16 (1/16): EWMA gain of ecn_alpha, /256.
    pub ecn_alpha_gain: u32,
    /// `bbr_ecn_alpha_init` = 256 (1.0): initial ecn_alpha, /256.
    pub ecn_alpha_init: u32,
    /// `bbr_ecn_factor` = 85 (1/3): inflight_lo ×(1 − ecn_factor·α) on ECN, /256 (0 = no ECN
    /// response).
    pub ecn_factor: u32,
    /// `bbr_ecn_thresh` = 128 (0.5): CE ratio that means "inflight too high", /256 (0 =
    /// disabled).
    pub ecn_thresh: u32,
    /// `bbr_ecn_reprobe_gain` = 128 (0.5): after an ECN-only cycle, reprobe starting at
    /// inflight_hi·gain of growth per round, /256 (0 = disabled).
    pub ecn_reprobe_gain: u32,
    /// `bbr_loss_thresh` = 256·2/100 = 5 (≈ 2 %): loss rate that means "inflight too high",
    /// /256.
    pub loss_thresh: u32,
    /// `bbr_loss_probe_recovery` = true: treat a loss repaired by a TLP as a loss sample.
    pub loss_probe_recovery: bool,
    /// `bbr_full_loss_cnt` = 6: STARTUP exits after this many loss-marking events in a
    /// Recovery round with loss rate > loss_thresh (0 disables; 4-bit counter, ≤ 15).
    pub full_loss_cnt: u32,
    /// `bbr_full_ecn_cnt` = 2: STARTUP exits after this many consecutive rounds with CE ratio
    /// ≥ ecn_thresh (0 disables; 2-bit counter, ≤ 3).
    pub full_ecn_cnt: u32,
    /// `bbr_inflight_headroom` = 256·15/100 = 38 (≈ 15 %): headroom left below inflight_hi in
    /// CRUISE and PROBE_RTT, /256.
    pub inflight_headroom: u32,
    /// `bbr_bw_probe_cwnd_gain` = 1: extra cwnd gain in PROBE_UP in units of BBR_UNIT/4
    /// (1 ⇒ +0.25 ⇒ 2.25), 0..=3.
    pub bw_probe_cwnd_gain: u32,
    /// `bbr_bw_probe_max_rounds` = 63: at most this many rounds between bw probes.
    pub bw_probe_max_rounds: u32,
    /// `bbr_bw_probe_rand_rounds` = 2: rounds_since_probe starts at U{0..n−1}.
    pub bw_probe_rand_rounds: u32,
    /// `bbr_bw_probe_base_us` = 2 000 000: wall-clock wait before a bw probe, µs.
    pub bw_probe_base_us: u32,
    /// `bbr_bw_probe_rand_us` = 1 000 000: plus U[0, this) µs.
    pub bw_probe_rand_us: u32,
    /// `bbr_fast_path` = true: skip model updates on app-limited ACKs without news.
    pub fast_path: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            min_rtt_win_sec: 10,
            probe_rtt_mode_ms: 200,
            probe_rtt_win_ms: 5000,
            probe_rtt_cwnd_gain: BBR_UNIT / 2,
            tso_rtt_shift: 9,
            pacing_margin_percent: 1,
            startup_pacing_gain: BBR_UNIT * 277 / 100 + 1,
            startup_cwnd_gain: BBR_UNIT * 2,
            drain_gain: BBR_UNIT * 1000 / 2885,
            cwnd_gain: BBR_UNIT * 2,
            pacing_gain_up: BBR_UNIT * 5 / 4,
            pacing_gain_down: BBR_UNIT * 91 / 100,
            pacing_gain_cruise: BBR_UNIT,
            pacing_gain_refill: BBR_UNIT,
            cwnd_min_target: 4,
            full_bw_thresh: BBR_UNIT * 5 / 4,
            full_bw_cnt: 3,
            extra_acked_gain: BBR_UNIT,
            extra_acked_win_rtts: 5,
            extra_acked_max_us: 100 * 1000,
            ecn_low: false,
            ecn_max_rtt_us: 5000,
            beta: BBR_UNIT * 30 / 100,
            ecn_alpha_gain: BBR_UNIT / 16,
            ecn_alpha_init: BBR_UNIT,
            ecn_factor: BBR_UNIT / 3,
            ecn_thresh: BBR_UNIT / 2,
            ecn_reprobe_gain: BBR_UNIT / 2,
            loss_thresh: BBR_UNIT * 2 / 100,
            loss_probe_recovery: true,
            full_loss_cnt: 6,
            full_ecn_cnt: 2,
            inflight_headroom: BBR_UNIT * 15 / 100,
            bw_probe_cwnd_gain: 1,
            bw_probe_max_rounds: 63,
            bw_probe_rand_rounds: 2,
            bw_probe_base_us: 2 * USEC_PER_SEC as u32,
            bw_probe_rand_us: USEC_PER_SEC as u32,
            fast_path: true,
        }
    }
}

impl Params {
    /// Range checks: the widths of the `struct bbr` bit fields the values land in (gains are
    /// 10-bit `pacing_gain`/`cwnd_gain`, counters 2–8 bits) and what keeps the arithmetic
    /// meaningful (fractions ≤ 1.0, a non-zero divisor in `bbr_inflight_hi_from_lost_skb`).
    pub fn validate(&self) -> Result<(), String> {
        let range = |name: &str, v: u32, lo: u32, hi: u32, why: &str| -> Result<(), String> {
            if v < lo || v > hi {
                Err(format!("{name}: {v} must be {lo}..={hi} ({why})"))
            } else {
                Ok(())
            }
        };
        range("min_rtt_win_sec", self.min_rtt_win_sec, 1, 31, "s")?;
        if self.probe_rtt_win_ms > self.min_rtt_win_sec * 1000 {
            return Err(format!(
                "probe_rtt_win_ms: {} must be <= min_rtt_win_sec*1000 = {} (as the source requires)",
                self.probe_rtt_win_ms,
                self.min_rtt_win_sec * 1000
            ));
        }
        range(
            "probe_rtt_cwnd_gain",
            self.probe_rtt_cwnd_gain,
            0,
            1023,
            "units of 1/256",
        )?;
        range("tso_rtt_shift", self.tso_rtt_shift, 0, 31, "bits")?;
        range(
            "pacing_margin_percent",
            self.pacing_margin_percent,
            0,
            99,
            "percent",
        )?;
        range(
            "startup_pacing_gain",
            self.startup_pacing_gain,
            1,
            1023,
            "10-bit pacing_gain field, units of 1/256",
        )?;
        range(
            "startup_cwnd_gain",
            self.startup_cwnd_gain,
            1,
            1023,
            "10-bit cwnd_gain field, units of 1/256",
        )?;
        range(
            "drain_gain",
            self.drain_gain,
            1,
            1023,
            "10-bit pacing_gain field, units of 1/256",
        )?;
        range(
            "pacing_gain_up",
            self.pacing_gain_up,
            1,
            1023,
            "10-bit pacing_gain field, units of 1/256",
        )?;
        range(
            "pacing_gain_down",
            self.pacing_gain_down,
            1,
            1023,
            "10-bit pacing_gain field, units of 1/256",
        )?;
        range(
            "pacing_gain_cruise",
            self.pacing_gain_cruise,
            1,
            1023,
            "10-bit pacing_gain field, units of 1/256",
        )?;
        range(
            "pacing_gain_refill",
            self.pacing_gain_refill,
            1,
            1023,
            "10-bit pacing_gain field, units of 1/256",
        )?;
        range(
            "bw_probe_cwnd_gain",
            self.bw_probe_cwnd_gain,
            0,
            3,
            "units of 1/4",
        )?;
        range(
            "cwnd_gain",
            self.cwnd_gain,
            1,
            1023 - BBR_UNIT * self.bw_probe_cwnd_gain / 4,
            "10-bit cwnd_gain field incl. the PROBE_UP increment, units of 1/256",
        )?;
        range("cwnd_min_target", self.cwnd_min_target, 1, 127, "segments")?;
        range(
            "full_bw_thresh",
            self.full_bw_thresh,
            0,
            1023,
            "units of 1/256",
        )?;
        range(
            "full_bw_cnt",
            self.full_bw_cnt,
            1,
            3,
            "2-bit full_bw_cnt field",
        )?;
        range(
            "extra_acked_gain",
            self.extra_acked_gain,
            0,
            2047,
            "units of 1/256",
        )?;
        range(
            "extra_acked_win_rtts",
            self.extra_acked_win_rtts,
            1,
            31,
            "5-bit field",
        )?;
        range("beta", self.beta, 0, 256, "units of 1/256")?;
        range(
            "ecn_alpha_gain",
            self.ecn_alpha_gain,
            0,
            256,
            "units of 1/256",
        )?;
        range(
            "ecn_alpha_init",
            self.ecn_alpha_init,
            0,
            256,
            "units of 1/256",
        )?;
        range("ecn_factor", self.ecn_factor, 0, 256, "units of 1/256")?;
        range("ecn_thresh", self.ecn_thresh, 0, 256, "units of 1/256")?;
        range(
            "ecn_reprobe_gain",
            self.ecn_reprobe_gain,
            0,
            511,
            "units of 1/256",
        )?;
        range(
            "loss_thresh",
            self.loss_thresh,
            0,
            255,
            "units of 1/256; 256 would divide by zero",
        )?;
        range(
            "full_loss_cnt",
            self.full_loss_cnt,
            0,
            15,
            "4-bit loss_events_in_round counter",
        )?;
        range(
            "full_ecn_cnt",
            self.full_ecn_cnt,
            0,
            3,
            "2-bit startup_ecn_rounds counter",
        )?;
        range(
            "inflight_headroom",
            self.inflight_headroom,
            0,
            255,
            "units of 1/256",
        )?;
        range(
            "bw_probe_max_rounds",
            self.bw_probe_max_rounds,
            0,
            255,
            "8-bit rounds_since_probe",
        )?;
        range(
            "bw_probe_rand_rounds",
            self.bw_probe_rand_rounds,
            0,
            255,
            "8-bit rounds_since_probe",
        )?;
        Ok(())
    }
}

impl Version for Params {
    type State = super::bounds::State;
    const PACING_RATE_FLOOR: u64 = 1;

    fn new_state(&self) -> Self::State {
        Self::State::new(self.ecn_alpha_init)
    }
    forward!(startup_pacing_gain: u32, startup_cwnd_gain: u32, drain_gain: u32, cwnd_min_target: u32, pacing_margin_percent: u32, min_rtt_win_sec: u32, probe_rtt_mode_ms: u32, full_bw_thresh: u32, full_bw_cnt: u32, extra_acked_gain: u32, extra_acked_win_rtts: u32, extra_acked_max_us: u32);
    fn extra_acked_in_startup(&self) -> bool {
        true
    }
    fn cwnd_tso_budget(&self) -> bool {
        true
    }
    fn probe_rtt_cwnd_gain(&self) -> Option<u32> {
        Some(self.probe_rtt_cwnd_gain)
    }

    /// `bbr_max_bw`: max of the two-slot filter (`bw_hi[2]` in v3).
    fn max_bw(b: &Bbr3) -> u32 {
        b.v.max_bw[0].max(b.v.max_bw[1])
    }
    /// `bbr_bw`: min(max_bw, bw_lo).
    fn bw(b: &Bbr3) -> u32 {
        b.max_bw().min(b.v.bw_lo)
    }
    /// `bbr_tso_segs_goal` (= `bbr_tso_segs` here: sk_gso_max_size is the legacy 64 KB).
    fn tso_segs_goal(b: &Bbr3, tp: &TcpState) -> u32 {
        b.tso_segs_generic(tp)
    }
    /// `bbr_pacing_gain[cycle_idx]`, and in UP the cwnd gain raised by `bw_probe_cwnd_gain`/4.
    fn probe_bw_gains(b: &Bbr3) -> (u32, u32) {
        let p = &b.params;
        let pacing_gain = match b.cycle_idx {
            BW_PROBE_UP => p.pacing_gain_up,
            BW_PROBE_DOWN => p.pacing_gain_down,
            BW_PROBE_CRUISE => p.pacing_gain_cruise,
            _ => p.pacing_gain_refill,
        };
        let mut cwnd_gain = p.cwnd_gain;
        if p.bw_probe_cwnd_gain != 0 && b.cycle_idx == BW_PROBE_UP {
            cwnd_gain += BBR_UNIT * p.bw_probe_cwnd_gain / 4;
        }
        (pacing_gain, cwnd_gain)
    }
    fn enter_drain(b: &mut Bbr3) {
        b.reset_congestion_signals();
    }
    fn exit_drain(b: &mut Bbr3, tp: &TcpState) {
        b.mode = Mode::ProbeBw;
        b.start_bw_probe_down(tp);
    }
    fn enter_probe_rtt(b: &mut Bbr3, tp: &TcpState) {
        b.v.ack_phase = super::bounds::AckPhase::ProbeStopping;
        b.next_rtt_delivered = tp.delivered as u32;
    }
    fn probe_rtt_done(b: &mut Bbr3, tp: &TcpState) {
        b.v.probe_rtt_min_stamp = tp.jiffies(); // schedule the next PROBE_RTT
        b.exit_probe_rtt(tp);
    }
}

impl Bounded for Params {
    const RTT_TIE_REFRESHES_PROBE_RTT_MIN: bool = false;
    const CE_RATIO_STRICT: bool = true;
    const BW_LO_FLOOR: u32 = 1;
    const STARTUP_EXIT_KEEPS_INFLIGHT_LATEST: bool = true;
    const UPWARD_RESETS_ACKS: bool = false;

    forward!(probe_rtt_win_ms: u32, tso_rtt_shift: u32, beta: u32, loss_thresh: u32, ecn_thresh: u32, ecn_factor: u32, ecn_alpha_gain: u32, ecn_alpha_init: u32, ecn_max_rtt_us: u32, ecn_reprobe_gain: u32, full_loss_cnt: u32, full_ecn_cnt: u32, inflight_headroom: u32, bw_probe_max_rounds: u32, bw_probe_rand_rounds: u32, bw_probe_base_us: u32, bw_probe_rand_us: u32, fast_path: bool);
    fn min_tso_segs(&self, _tp: &TcpState) -> u32 {
        SYSCTL_TCP_MIN_TSO_SEGS
    }
    fn bw_probe_reno_gain(&self) -> u32 {
        BBR_UNIT
    }
    fn usage_based_cwnd(&self) -> bool {
        false
    }
    fn refill_add_inc(&self) -> u32 {
        0
    }
    fn ecn_bw_lo(&self) -> bool {
        false
    }
    fn ecn_bw_hi(&self) -> bool {
        false
    }
    fn drain_to_target(&self) -> bool {
        true
    }
    /// `bbr_can_use_ecn`: ECN negotiated (`TCP_ECN_OK`) and the route says marks are
    /// shallow-threshold (`TCP_ECN_LOW`); and an ECN response configured (`ecn_factor`).
    fn can_use_ecn(&self, tp: &TcpState) -> bool {
        tp.ecn_ok && self.ecn_low && self.ecn_factor != 0
    }
    /// v3 leaves UP on a bw plateau (`full_bw_now`), except while inflight_hi is what limits
    /// growth (cwnd-limited with cwnd ≥ inflight_hi), which re-arms the plateau detector.
    fn probe_up_done(b: &mut Bbr3, tp: &TcpState, _inflight: u32, _bw: u32, ctx: &Ctx) -> bool {
        if tp.is_cwnd_limited && tp.cwnd >= b.v.inflight_hi {
            b.reset_full_bw();
            b.full_bw = ctx.sample_bw;
            return false;
        }
        b.v.full_bw_now
    }
    fn start_probe_up(b: &mut Bbr3, ctx: &Ctx) {
        b.reset_full_bw();
        b.full_bw = ctx.sample_bw;
    }
}

impl Bbr3 {
    /// `bbr_reset_full_bw`.
    fn reset_full_bw(&mut self) {
        self.full_bw = 0;
        self.full_bw_cnt = 0;
        self.v.full_bw_now = false;
    }

    /// v3's `bbr_check_full_bw_reached`: per sample, any sample ≥ full_bw·1.25 re-arms; count
    /// rounds otherwise.
    fn check_full_bw_plateau(&mut self, rs: &RateSample, ctx: &Ctx) {
        if self.v.full_bw_now || rs.is_app_limited {
            return;
        }
        let bw_thresh =
            ((self.full_bw as u64 * self.params.full_bw_thresh as u64) >> super::BBR_SCALE) as u32;
        if ctx.sample_bw >= bw_thresh {
            self.reset_full_bw();
            self.full_bw = ctx.sample_bw;
            return;
        }
        if !self.round_start {
            return;
        }
        self.full_bw_cnt = (self.full_bw_cnt + 1) & 0x3; // 2-bit field
        self.v.full_bw_now = self.full_bw_cnt >= self.params.full_bw_cnt;
        self.full_bw_reached |= self.v.full_bw_now;
    }

    /// `bbr_update_ecn_alpha`: ECN eligibility first; α only while eligible (PLB, its other
    /// user, is not ported). Returns the round's CE ratio (1/256), or −1.
    fn update_ecn_alpha(&mut self, tp: &TcpState) -> i32 {
        self.check_ecn_eligible(tp);
        if !self.v.ecn_eligible {
            return -1;
        }
        let (delivered, delivered_ce) = self.delivered_since_alpha(tp);
        // delivered == 0 (avoid dividing by zero) || WARN_ON_ONCE(delivered < 0 || ce < 0)
        if delivered <= 0 || delivered_ce < 0 {
            return -1;
        }
        self.fold_ecn_alpha(tp, delivered, delivered_ce) as i32
    }

    /// `bbr_update_latest_delivery_signals`: max rate and volume delivered in this round.
    fn update_latest_delivery_signals(&mut self, tp: &TcpState, rs: &RateSample, ctx: &Ctx) {
        self.v.loss_round_start = false;
        if rs.interval_us <= 0 || rs.acked_sacked == 0 {
            return; // not a valid observation
        }
        self.v.bw_latest = self.v.bw_latest.max(ctx.sample_bw);
        self.v.inflight_latest = self.v.inflight_latest.max(rs.delivered as u32);
        if !before(rs.prior_delivered, self.v.loss_round_delivered) {
            self.v.loss_round_delivered = tp.delivered as u32;
            self.v.loss_round_start = true; // mark start of new round trip
        }
    }

    /// `bbr_advance_latest_delivery_signals`: restart the per-round filters, except on an ACK
    /// of a TLP retransmission (keep what the path delivered before the tail loss).
    fn advance_latest_delivery_signals(&mut self, rs: &RateSample, ctx: &Ctx) {
        if self.v.loss_round_start && !rs.is_acking_tlp_retrans_seq {
            self.v.bw_latest = ctx.sample_bw;
            self.v.inflight_latest = rs.delivered as u32;
        }
    }

    /// `bbr_update_congestion_signals`.
    fn update_congestion_signals(&mut self, tp: &TcpState, rs: &RateSample, ctx: &Ctx) {
        if rs.interval_us <= 0 || rs.acked_sacked == 0 {
            return; // not a valid observation
        }
        let bw = ctx.sample_bw;
        if !rs.is_app_limited || bw >= self.max_bw() {
            self.take_max_bw_sample(bw);
        }
        self.v.loss_in_round |= rs.losses > 0;
        if !self.v.loss_round_start {
            return; // skip the per-round-trip updates
        }
        self.adapt_lower_bounds(tp);
        self.v.loss_in_round = false;
        self.v.ecn_in_round = false;
    }

    /// `bbr_update_model`.
    fn update_model(&mut self, tp: &mut TcpState, rs: &RateSample, ctx: &Ctx) {
        self.update_congestion_signals(tp, rs, ctx);
        self.update_ack_aggregation(tp, rs);
        self.check_loss_too_high_in_startup(tp, rs);
        self.check_full_bw_plateau(rs, ctx);
        self.check_drain(tp);
        self.update_cycle_phase(tp, rs, ctx);
        self.update_min_rtt(tp, rs);
    }

    /// `bbr_run_loss_probe_recovery`: a TLP repaired the loss of one segment.
    fn run_loss_probe_recovery(&mut self, tp: &TcpState) {
        self.note_loss(tp);
        if !self.v.bw_probe_samples {
            return; // not sent while probing for bandwidth
        }
        let mut rs = zero_rs();
        rs.lost = 1; // TLP probe repaired loss of a single segment
        rs.tx_in_flight = self.v.inflight_latest.wrapping_add(rs.lost);
        rs.is_app_limited = tp.app_limited != 0; // ≈ tp->tlp_orig_data_app_limited
        if self.is_inflight_too_high(&rs) {
            self.handle_inflight_too_high(tp, &rs);
        }
    }
}

impl CongestionControl for Bbr3 {
    fn name(&self) -> &'static str {
        "bbr3"
    }

    /// `bbr_init`.
    fn init(&mut self, tp: &mut TcpState) {
        self.next_rtt_delivered = tp.delivered as u32;
        self.init_bounds(tp);
        self.reset_full_bw();
        // tp->fast_ack_mode and TCP_ECN_ECT_PERMANENT: receiver/codepoint side, see ecn_use().
    }

    /// `bbr_ssthresh`: entering loss recovery; save state for undo.
    fn ssthresh(&mut self, tp: &mut TcpState) -> u32 {
        self.save_for_undo(tp);
        tp.ssthresh
    }

    /// Never called: BBR has `cong_control`, so the core skips `cong_avoid` (as Linux does).
    fn cong_avoid(&mut self, _tp: &mut TcpState, _acked: u32) {}

    /// `bbr_set_state` (`tp.ca_state` still holds the old state).
    fn set_state(&mut self, tp: &mut TcpState, new_state: CaState) {
        if new_state == CaState::Cwr {
            // Simulator glue for CA_EVENT_TLP_RECOVERY (see Deviations).
            self.v.cwr_entered_this_ack = true;
        }
        if new_state == CaState::Loss {
            self.prev_ca_state = CaState::Loss;
            // tcp_plb_update_state_upon_rto: PLB not ported.
            // The RTO likely repathed the flow: re-learn the full bw.
            self.reset_full_bw();
            if !self.is_probing_bandwidth() && self.v.inflight_lo == UNSET {
                // bbr_adapt_lower_bounds() needs the cwnd from before the RTO.
                self.v.inflight_lo = tp.cwnd.max(self.prior_cwnd);
            }
        } else if self.prev_ca_state == CaState::Loss && new_state != CaState::Loss {
            // bbr_exit_loss_recovery
            tp.cwnd = tp.cwnd.max(self.prior_cwnd);
            self.v.try_fast_path = false; // bound cwnd using the latest model
        }
    }

    /// `bbr_cwnd_event`.
    fn cwnd_event(&mut self, tp: &mut TcpState, ev: CaEvent) {
        match ev {
            CaEvent::TxStart => self.restart_from_idle(tp, ev),
            // CA_EVENT_TLP_RECOVERY, inferred (see Deviations): CWR entered and completed within
            // one ACK happens only in tcp_process_tlp_ack.
            CaEvent::CompleteCwr if self.v.cwr_entered_this_ack && tp.ca_state == CaState::Cwr => {
                self.v.cwr_entered_this_ack = false;
                if self.params.loss_probe_recovery {
                    self.run_loss_probe_recovery(tp);
                }
            }
            // CA_EVENT_LOSS (and any other event): BBRv3 does nothing here
            // (bbr_set_state(TCP_CA_Loss) does the RTO work).
            _ => {}
        }
    }

    /// `bbr_undo_cwnd`: the recovery was spurious; revert the short-term model.
    fn undo_cwnd(&mut self, _tp: &TcpState) -> u32 {
        self.reset_full_bw(); // spurious slow-down; reset the full bw detector
        self.v.loss_in_round = false;
        self.undo_bounds();
        self.v.try_fast_path = false; // take the slow path to set the proper cwnd and pacing
        self.prior_cwnd
    }

    fn has_cong_control(&self) -> bool {
        true
    }

    /// `bbr_main`.
    fn cong_control(&mut self, tp: &mut TcpState, rs: &RateSample) {
        let mut ctx = Ctx::default();
        let mut update_model = true;
        self.update_round_start(tp, rs);
        if self.round_start {
            self.v.rounds_since_probe = (self.v.rounds_since_probe + 1).min(0xFF);
            let _ce_ratio = self.update_ecn_alpha(tp);
        }
        // bbr_plb(sk, rs, ce_ratio): not ported (see Deviations).
        self.v.ecn_in_round |= self.v.ecn_eligible && rs.is_ece;
        Self::calculate_bw_sample(rs, &mut ctx);
        self.update_latest_delivery_signals(tp, rs, &ctx);
        if !self.run_fast_path(tp, &mut update_model, rs, &ctx) {
            if update_model {
                self.update_model(tp, rs, &ctx);
            }
            self.update_control(tp, rs);
        }
        // out:
        self.advance_latest_delivery_signals(rs, &ctx);
        self.prev_ca_state = tp.ca_state;
        self.v.loss_in_cycle |= rs.lost > 0;
        self.v.ecn_in_cycle |= rs.delivered_ce > 0;
        self.v.cwr_entered_this_ack = false;
    }

    /// `TCP_CONG_WANTS_CE_EVENTS`; see Deviations for why a default route gives Classic.
    fn ecn_use(&self) -> EcnUse {
        if self.params.ecn_low {
            EcnUse::WantsCeEvents
        } else {
            EcnUse::Classic
        }
    }

    /// `cmpxchg(&sk->sk_pacing_status, SK_PACING_NONE, SK_PACING_NEEDED)` in `bbr_init`.
    fn wants_pacing(&self) -> bool {
        true
    }

    /// `bbr_tso_segs`.
    fn tso_segs(&self, tp: &TcpState) -> Option<u32> {
        Some(self.tso_segs_generic(tp))
    }

    /// `bbr_skb_marked_lost`.
    fn skb_marked_lost(&mut self, tp: &mut TcpState, tx: &TxSnapshot) {
        self.skb_marked_lost_bounded(tp, tx);
    }

    fn probe(&self, tp: &TcpState) -> CcProbe {
        // bbr_bw_bytes_per_sec, as ss -i shows it (0 before the first sample).
        let bw = self.bw();
        CcProbe {
            phase: Some(self.phase_name()),
            bw_bps: Some(if bw == 0 {
                0.0
            } else {
                rate_bytes_per_sec(tp.mss, bw as u64, BBR_UNIT, 0).max(1) as f64 * 8.0
            }),
            inflight_hi: (self.v.inflight_hi != UNSET).then_some(self.v.inflight_hi),
            alpha: self
                .v
                .ecn_eligible
                .then(|| self.v.ecn_alpha as f64 / BBR_UNIT as f64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::TCP_INFINITE_SSTHRESH;

    /// A fixed-bottleneck path driving the CC directly: every ACK delivers `n / acks`
    /// segments, ACKs are spaced evenly over one RTT, and each ACK's rate sample says "the
    /// bottleneck delivered `n` segments in the last `rtt_us`" (bw = n·2^24/rtt_us). The
    /// sampled segment was sent at the start of the round (`prior_delivered` = delivered at
    /// the round's start), so the first ACK of each round is a round start. After each ACK the
    /// sender refills: inflight = min(cwnd, cap).
    struct Path {
        b: Bbr3,
        tp: TcpState,
        rtt_us: u64,
        acks: u32,
        cap: u32,
        /// Phase transitions: (ACK index, time µs, new phase).
        log: Vec<(u64, u64, &'static str)>,
        n_acks: u64,
        /// Position in the current round, and delivered at its start.
        ack_i: u32,
        round_prior: u32,
    }

    impl Path {
        fn new(params: Params, seed: u64, rtt_us: u64) -> Self {
            let mut tp = TcpState::new(1448, 0);
            tp.srtt_us = rtt_us as u32;
            tp.min_rtt_us = rtt_us as u32;
            let mut b = Bbr3::new(params, seed);
            b.init(&mut tp);
            tp.inflight = tp.cwnd;
            Path {
                b,
                tp,
                rtt_us,
                acks: 8,
                cap: u32::MAX,
                log: vec![],
                n_acks: 0,
                ack_i: 0,
                round_prior: 0,
            }
        }

        fn phase(&self) -> &'static str {
            self.b.phase_name()
        }

        /// One ACK delivering `k` segments, sampled as `delivered` over `interval_us`.
        fn ack(
            &mut self,
            k: u32,
            prior: u32,
            delivered: i64,
            interval_us: i64,
            f: &mut dyn FnMut(&mut TcpState, &mut RateSample),
        ) {
            let tp = &mut self.tp;
            tp.now_ns += self.rtt_us * 1000 / self.acks as u64;
            // tcp_rate_gen: the app-limited mark clears once delivery passes it.
            if tp.app_limited != 0 && tp.delivered > tp.app_limited {
                tp.app_limited = 0;
            }
            tp.delivered += k as u64;
            tp.delivered_mstamp_us = tp.now_us();
            let mut rs = RateSample {
                prior_mstamp_us: Some(tp.now_us().saturating_sub(interval_us as u64)),
                prior_delivered: prior,
                delivered,
                interval_us,
                snd_interval_us: interval_us,
                rcv_interval_us: interval_us,
                rtt_us: self.rtt_us as i64,
                acked_sacked: k,
                prior_in_flight: tp.inflight,
                tx_in_flight: tp.inflight,
                is_app_limited: tp.app_limited != 0,
                ..RateSample::default()
            };
            f(tp, &mut rs);
            let before = self.b.phase_name();
            self.b.cong_control(tp, &rs);
            tp.inflight = tp.cwnd.min(self.cap);
            tp.is_cwnd_limited = tp.inflight >= tp.cwnd;
            self.n_acks += 1;
            if self.b.phase_name() != before {
                self.log
                    .push((self.n_acks, tp.now_us(), self.b.phase_name()));
            }
        }

        /// The next ACK of the current round of `n` segments (ACK i of `acks`).
        fn next_ack_with(
            &mut self,
            n: u32,
            f: &mut dyn FnMut(u32, &mut TcpState, &mut RateSample),
        ) {
            if self.ack_i == 0 {
                self.round_prior = self.tp.delivered as u32;
            }
            let (i, prior, rtt) = (self.ack_i, self.round_prior, self.rtt_us as i64);
            self.ack(n / self.acks, prior, n as i64, rtt, &mut |tp, rs| {
                f(i, tp, rs)
            });
            self.ack_i = (self.ack_i + 1) % self.acks;
        }

        fn next_ack(&mut self, n: u32) {
            self.next_ack_with(n, &mut |_, _, _| {});
        }

        /// The rest of the current round (a whole round if at a boundary) of `n` segments;
        /// `f(i, tp, rs)` may edit ACK i's sample.
        fn round_with(&mut self, n: u32, mut f: impl FnMut(u32, &mut TcpState, &mut RateSample)) {
            loop {
                self.next_ack_with(n, &mut f);
                if self.ack_i == 0 {
                    break;
                }
            }
        }

        fn round(&mut self, n: u32) {
            self.round_with(n, |_, _, _| {});
        }

        /// Rounds of `n` until `phase` is entered (at most `max` rounds); returns the rounds run.
        fn rounds_until(&mut self, n: u32, phase: &str, max: u32) -> u32 {
            for r in 1..=max {
                self.round(n);
                if self.phase() == phase {
                    return r;
                }
            }
            panic!("{phase} not reached in {max} rounds; now {}", self.phase());
        }
    }

    /// RTT 8192 µs and 128 segments per round: bw = 128·2^24/8192 = 262 144 exactly, BDP =
    /// 262 144·8192/2^24 = 128 segments exactly (chosen so the fixed point has no rounding).
    const RTT: u64 = 8192;
    const BW: u32 = 262_144;

    /// STARTUP through rounds of 16, 32, 64 and then 128 segments.
    fn startup_growth(p: &mut Path) {
        for n in [16, 32, 64, 128] {
            p.round(n);
        }
    }

    /// Into PROBE_BW CRUISE: plateau to DRAIN, then inflight at the BDP.
    fn to_cruise(p: &mut Path) {
        startup_growth(p);
        p.rounds_until(128, "drain", 5);
        p.cap = 128;
        p.rounds_until(128, "probe_bw:cruise", 3);
    }

    #[test]
    fn source_defaults() {
        // Values of the v3 statics computed by hand from their C expressions.
        let p = Params::default();
        assert_eq!(p.startup_pacing_gain, 710); // 256·277/100 = 709 (709.12), + 1
        assert_eq!(p.startup_cwnd_gain, 512);
        assert_eq!(p.drain_gain, 88); // 256000/2885 = 88.7
        assert_eq!(p.pacing_gain_up, 320);
        assert_eq!(p.pacing_gain_down, 232); // 256·91/100 = 232.96
        assert_eq!(p.beta, 76); // 7680/100
        assert_eq!(p.loss_thresh, 5); // 512/100
        assert_eq!(p.ecn_factor, 85);
        assert_eq!(p.ecn_thresh, 128);
        assert_eq!(p.ecn_alpha_gain, 16);
        assert_eq!(p.ecn_reprobe_gain, 128);
        assert_eq!(p.inflight_headroom, 38); // 3840/100
        assert_eq!(p.full_loss_cnt, 6);
        assert_eq!(p.full_ecn_cnt, 2);
        assert_eq!(p.probe_rtt_win_ms, 5000);
        assert!(!p.ecn_low);
        assert!(p.validate().is_ok());
        // init: startup gains and pacing = 2.77·cwnd/srtt·0.99. bw = 10·2^24/8192 = 20 480;
        // 20 480·1448 = 29 655 040, ·710 = 21 055 078 400, >> 8 = 82 246 400;
        // ·990 000 = 81 423 936 000 000, >> 24 = 4 853 244 B/s.
        let path = Path::new(Params::default(), 1, RTT);
        assert_eq!(path.tp.pacing_rate, 4_853_244);
        assert_eq!(path.tp.ssthresh, TCP_INFINITE_SSTHRESH);
        assert_eq!(path.phase(), "startup");
    }

    #[test]
    fn startup_exits_after_three_rounds_without_25_percent_growth() {
        let mut p = Path::new(Params::default(), 1, RTT);
        // Rounds of 16, 32, 64, 128: each sample ≥ 1.25·full_bw re-arms the detector.
        startup_growth(&mut p);
        assert_eq!(p.b.full_bw, BW);
        assert_eq!((p.b.pacing_gain, p.b.cwnd_gain), (710, 512));
        // Plateau: round starts 1 and 2 without growth count full_bw_cnt = 1, 2 ...
        p.round(128);
        p.round(128);
        assert_eq!(p.phase(), "startup");
        assert_eq!(p.b.full_bw_cnt, 2);
        // ... and the third round start sets full_bw_now: DRAIN on that very ACK.
        let acks = p.n_acks;
        p.round(128);
        assert_eq!(
            p.log.last().unwrap(),
            &(acks + 1, (acks + 1) * RTT / 8, "drain")
        );
        assert_eq!(p.b.pacing_gain, 88);
        // ssthresh is exported as bbr_inflight(max_bw, 1.0) = max(128, 3·tso_goal = 3·41) = 128
        // (tso_goal: 62 121 533 B/s >> 10 = 60 665 B = 41 segments).
        assert_eq!(p.tp.ssthresh, 128);
    }

    #[test]
    fn startup_growth_is_judged_per_sample_not_per_round() {
        let mut p = Path::new(Params::default(), 1, RTT);
        startup_growth(&mut p);
        p.round(128); // full_bw_cnt = 1
                      // Mid-round, one sample of 167 segments: 167·2048 = 342 016 ≥ 1.25·262 144 = 327 680,
                      // so v3 resets the count at once although it is not a round start.
        p.round_with(128, |i, _, rs| {
            if i == 3 {
                rs.delivered = 167;
            }
        });
        assert_eq!(p.b.full_bw, 342_016);
        assert_eq!(p.b.full_bw_cnt, 0);
        // 262 144 < 1.25·342 016: three more round starts are needed.
        p.round(128);
        p.round(128);
        assert_eq!(p.phase(), "startup");
        p.round(128);
        assert_eq!(p.phase(), "drain");
        // BDP of the new max: 342 016·8192/2^24 = 167 exactly.
        assert_eq!(p.tp.ssthresh, 167);
    }

    #[test]
    fn startup_exits_on_six_loss_events_in_a_lossy_recovery_round() {
        for (events, exits) in [(5u32, false), (6, true)] {
            let mut p = Path::new(Params::default(), 1, RTT);
            for n in [16, 32, 64] {
                p.round(n);
            }
            // Still growing (so no plateau exit); in Recovery, `events` ACKs each report a
            // newly marked loss. Samples: 150 segments in 9600 µs = the same 262 144 bw, so
            // inflight_latest = 150 > BDP = 128.
            p.tp.ca_state = CaState::Recovery;
            p.round_with(150, |i, _, rs| {
                rs.interval_us = 9600;
                rs.losses = (i >= 1 && i <= events) as u32;
            });
            assert_eq!(p.phase(), "startup");
            // Next loss-round start: loss rate lost/tx_in_flight = 5/200 > 2 % (5 > 200·5>>8 = 3).
            p.next_ack_with(150, &mut |_, _, rs| {
                rs.interval_us = 9600;
                rs.lost = 5;
                rs.tx_in_flight = 200;
            });
            if exits {
                assert_eq!(p.log.last().unwrap().2, "drain");
                // v3: inflight_hi = max(bbr_inflight(max_bw) = 128, inflight_latest = 150).
                // (Later ACKs raise it to any higher tx_in_flight seen without excess loss.)
                assert_eq!(p.b.v.inflight_hi, 150);
            } else {
                assert_eq!(
                    p.phase(),
                    "startup",
                    "{events} loss events must not end STARTUP"
                );
                assert_eq!(p.b.v.inflight_hi, UNSET);
            }
        }
    }

    #[test]
    fn probe_bw_cycles_down_cruise_refill_up_down() {
        let mut p = Path::new(Params::default(), 7, RTT);
        to_cruise(&mut p);
        assert_eq!(p.b.pacing_gain, 256);
        // CRUISE → REFILL when rounds_since_probe reaches min(63, target_inflight = 128) = 63
        // (the 2–3 s wall clock is 244+ rounds away).
        let left = 63 - p.b.v.rounds_since_probe;
        let r = p.rounds_until(128, "probe_bw:refill", 70);
        assert_eq!(r, left);
        assert!(
            p.b.v.inflight_lo == UNSET && p.b.v.bw_lo == UNSET,
            "REFILL resets the lower bounds"
        );
        assert_eq!(p.b.pacing_gain, 256);
        // REFILL lasts one round: the next round start begins UP.
        assert_eq!(p.rounds_until(128, "probe_bw:up", 1), 1);
        assert!(p.b.v.bw_probe_samples);
        assert_eq!(
            p.b.full_bw, BW,
            "UP starts the plateau detector from this ACK's sample"
        );
        assert_eq!((p.b.pacing_gain, p.b.cwnd_gain), (320, 512 + 64));
        // bbr_quantization_budget adds 2 in UP: max(128, 3·tso_goal = 3·18, 4) + 2 (tso_goal at
        // 1.25 pacing: 28.0 MB/s >> 10 = 27 385 B = 18 segments).
        assert_eq!(p.b.inflight(&p.tp, BW, BBR_UNIT), 130);
        // UP exits on the bw plateau after 3 round starts (no loss, inflight_hi unset); inflight
        // above the BDP keeps it in DOWN ...
        p.cap = 160;
        assert_eq!(p.rounds_until(128, "probe_bw:down", 5), 3);
        assert_eq!(p.b.pacing_gain, 232);
        assert!((2_000_000..3_000_000).contains(&p.b.v.probe_wait_us));
        assert!(p.b.v.rounds_since_probe <= 1);
        p.round(128);
        assert_eq!(p.phase(), "probe_bw:down");
        // ... until it is back at the BDP: CRUISE.
        p.cap = 128;
        p.rounds_until(128, "probe_bw:cruise", 2);
        let phases: Vec<_> = p.log.iter().map(|e| e.2).collect();
        assert_eq!(
            phases,
            [
                "drain",
                "probe_bw:cruise",
                "probe_bw:refill",
                "probe_bw:up",
                "probe_bw:down",
                "probe_bw:cruise"
            ]
        );
    }

    #[test]
    fn up_ends_on_a_bw_plateau_not_while_bw_grows() {
        let mut p = Path::new(Params::default(), 3, RTT);
        to_cruise(&mut p);
        p.rounds_until(128, "probe_bw:up", 70);
        // Round 1 of UP: the path delivers 25 % more (160·2048 = 327 680 ≥ 1.25·262 144):
        // the detector restarts from it.
        p.round(160);
        assert_eq!(p.b.full_bw, 327_680);
        assert_eq!(p.phase(), "probe_bw:up");
        // Now a plateau at 160: three round starts without growth end UP, on the third.
        p.round(160);
        p.round(160);
        assert_eq!(p.phase(), "probe_bw:up");
        p.next_ack(160);
        assert_eq!(p.phase(), "probe_bw:down");

        // While inflight_hi limits growth (cwnd-limited with cwnd ≥ inflight_hi at the check),
        // each such ACK re-arms the plateau detector (full_bw = this sample, count 0), so the
        // same flat samples do not end UP after 3 rounds. With 2-segment ACKs (64 per round)
        // inflight_hi grows (by 1, 2, 4, ... per round) on only a few ACKs; the ACKs where it
        // does not grow find cwnd ≥ inflight_hi and re-arm.
        let mut p = Path::new(Params::default(), 3, RTT);
        to_cruise(&mut p);
        p.rounds_until(128, "probe_bw:up", 70);
        p.cap = u32::MAX; // the sender fills cwnd: cwnd-limited
        p.b.v.inflight_hi = 100; // raised at once to the safe tx_in_flight, then grown in UP
        p.acks = 64;
        for r in 0..5 {
            p.round(128);
            assert_eq!(p.phase(), "probe_bw:up", "round {r}");
            assert!(p.tp.is_cwnd_limited && p.tp.cwnd == p.b.v.inflight_hi);
            assert!(p.b.full_bw_cnt < 3);
        }
    }

    #[test]
    fn inflight_hi_is_cut_when_a_probe_loses_more_than_2_percent() {
        let mut p = Path::new(Params::default(), 5, RTT);
        to_cruise(&mut p);
        p.rounds_until(128, "probe_bw:up", 70);
        assert!(p.b.v.bw_probe_samples);
        let tx = TxSnapshot {
            in_flight: 200,
            lost: 1000,
            ..TxSnapshot::default()
        };
        // 3 lost since that segment was sent, of 200 in flight: 3 > 200·5 >> 8 = 3 is false.
        p.tp.lost = 1003;
        p.b.skb_marked_lost(&mut p.tp, &tx);
        assert_eq!(p.b.v.inflight_hi, UNSET);
        assert_eq!(p.phase(), "probe_bw:up");
        assert!(p.b.v.loss_in_round, "every marked loss is noted");
        // The 4th: 4 > 3, too high. bbr_inflight_hi_from_lost_skb: inflight_prev = 199,
        // lost_prev = 3, loss_budget = (199·5 + 255) >> 8 = 4, lost_prefix = (1 << 8)/251 = 1,
        // so 200; the floor target_inflight·(1 − β) = 130·180 >> 8 = 91 is lower.
        p.tp.lost = 1004;
        p.b.skb_marked_lost(&mut p.tp, &tx);
        assert_eq!(p.b.v.inflight_hi, 200);
        assert_eq!(p.phase(), "probe_bw:down");
        assert!(p.b.v.prev_probe_too_high && !p.b.v.bw_probe_samples);
        // Only once per probe: further losses leave inflight_hi alone.
        p.tp.lost = 1010;
        p.b.skb_marked_lost(&mut p.tp, &tx);
        assert_eq!(p.b.v.inflight_hi, 200);
        // Loss outside a probe: lost_prev 5 ≥ budget 4 would give 199, but no probe, no cut.
        assert_eq!(
            p.b.inflight_hi_from_lost_skb(&RateSample {
                lost: 6,
                tx_in_flight: 200,
                ..zero_rs()
            }),
            199
        );
    }

    #[test]
    fn ecn_cuts_inflight_lo_by_one_minus_factor_times_alpha() {
        let params = Params {
            ecn_low: true,
            ..Params::default()
        };
        // RTT 4096 µs ≤ ecn_max_rtt_us = 5000: ECN-eligible; 64 segments per round keep
        // bw = 64·2^24/4096 = 262 144.
        let mut p = Path::new(params, 11, 4096);
        p.tp.ecn_ok = true;
        p.tp.min_rtt_us = 4096;
        for n in [8, 16, 32, 64] {
            p.round(n);
        }
        p.rounds_until(64, "drain", 5);
        p.cap = 64;
        p.rounds_until(64, "probe_bw:cruise", 3);
        assert!(p.b.v.ecn_eligible);
        // v3's CE test is strict: 32 CE of 64 is not above 64·128 >> 8 = 32; 33 is.
        let ce_rs = |ce: i64| RateSample {
            delivered: 64,
            delivered_ce: ce,
            ..zero_rs()
        };
        assert!(!p.b.is_inflight_too_high(&ce_rs(32)));
        assert!(p.b.is_inflight_too_high(&ce_rs(33)));
        // A round whose ACKs 2..8 and the next round's first ACK are CE-marked (the core is in
        // CWR, as after an ECE). α is set to 100/256 after the round's first ACK.
        let prior = p.tp.delivered as u32;
        p.ack(8, prior, 64, 4096, &mut |_, _| {});
        p.b.v.ecn_alpha = 100;
        p.tp.ca_state = CaState::Cwr;
        let ce = |tp: &mut TcpState, rs: &mut RateSample| {
            tp.delivered_ce += 8;
            rs.is_ece = true;
            rs.delivered_ce = 8;
        };
        for _ in 1..8 {
            p.ack(8, prior, 64, 4096, &mut { ce });
        }
        assert_eq!(p.b.v.inflight_lo, UNSET);
        // Next round start: ce_ratio = 64 CE of 64 delivered = 256/256; α = (240·100 >> 8) +
        // (16·256 >> 8) = 93 + 16 = 109; cut = 256 − (109·85 >> 8) = 256 − 36 = 220;
        // inflight_lo = cwnd·220 >> 8 (≈ cwnd·(1 − α/3)), and cwnd is bounded by it.
        let cwnd = p.tp.cwnd;
        let prior = p.tp.delivered as u32;
        p.ack(8, prior, 64, 4096, &mut { ce });
        assert_eq!(p.b.v.ecn_alpha, 109);
        assert_eq!(p.b.v.inflight_lo, (cwnd * 220) >> 8);
        assert_eq!(p.tp.cwnd, (cwnd * 220) >> 8);
        assert_eq!(p.b.probe(&p.tp).alpha, Some(109.0 / 256.0));
        assert_eq!(p.phase(), "probe_bw:cruise", "no reprobe while in CWR");
        // ecn_reprobe_gain: once the marks stop and the state is Open again, a CE-only cycle
        // reprobes at once, with 2^n ≈ inflight_hi·0.5 of growth (inflight_hi = 100 ⇒
        // n = ilog2(50) = 5).
        p.b.v.inflight_hi = 100;
        p.tp.ca_state = CaState::Open;
        p.round(64);
        assert_eq!(p.log.last().unwrap().2, "probe_bw:refill");
        assert_eq!(p.b.v.bw_probe_up_rounds, 5);
    }

    #[test]
    fn ecn_is_ignored_without_the_ecn_low_route_feature() {
        // Default route (ecn_low = false): same marks, no eligibility, no cut (v3's
        // bbr_can_use_ecn needs TCP_ECN_LOW as well as a negotiated ECN).
        let mut p = Path::new(Params::default(), 11, 4096);
        p.tp.ecn_ok = true;
        for n in [8, 16, 32, 64] {
            p.round(n);
        }
        p.rounds_until(64, "drain", 5);
        p.cap = 64;
        p.rounds_until(64, "probe_bw:cruise", 3);
        for _ in 0..3 {
            p.round_with(64, |_, tp, rs| {
                tp.delivered_ce += 8;
                rs.is_ece = true;
                rs.delivered_ce = 8;
            });
        }
        assert!(!p.b.v.ecn_eligible);
        assert_eq!(p.b.v.inflight_lo, UNSET);
        assert_eq!(p.b.probe(&p.tp).alpha, None);
        assert_eq!(p.b.ecn_use(), EcnUse::Classic);
        assert_eq!(
            Bbr3::new(
                Params {
                    ecn_low: true,
                    ..Params::default()
                },
                0
            )
            .ecn_use(),
            EcnUse::WantsCeEvents
        );
    }

    #[test]
    fn probe_rtt_after_5_s_for_200_ms_at_half_the_bdp() {
        let mut p = Path::new(Params::default(), 9, RTT);
        to_cruise(&mut p);
        // RTT samples never go below the initial min (8192 µs; v3 needs strictly lower), so
        // probe_rtt_min_stamp stays at init (jiffies 0): PROBE_RTT on the first ACK with
        // jiffies > 5000. ACKs are 1024 µs apart: 5000.192 ms is not after, 5001.216 ms is.
        p.cap = 140;
        let mut last_t = 0;
        while p.phase() != "probe_rtt" {
            assert!(p.tp.now_ns < 6_000_000_000, "no PROBE_RTT within 6 s");
            last_t = p.tp.now_us();
            p.next_ack(128);
        }
        let (_, t_enter, _) = *p.log.last().unwrap();
        assert_eq!(t_enter, 5_001_216);
        assert!(last_t <= 5_000_192);
        // cwnd = max(4, BDP·0.5) = max(4, 262 144·8192·128 >> 8 / 2^24) = 64.
        assert_eq!(p.tp.cwnd, 64);
        // Finish the round with inflight at the cap; the first ACK with inflight ≤ 64 starts
        // the 200 ms (jiffies 5002 + 200 = 5202); it ends on the first ACK after 5202 ms once a
        // round has passed.
        let mut done_stamp = 0;
        while p.phase() == "probe_rtt" {
            assert!(p.tp.now_ns < 6_000_000_000, "PROBE_RTT does not end");
            assert_eq!(p.tp.cwnd, 64);
            p.next_ack(64);
            if done_stamp == 0 {
                done_stamp = p.b.probe_rtt_done_stamp;
            }
        }
        assert_eq!(done_stamp, 5202);
        let (_, t_exit, phase) = *p.log.last().unwrap();
        assert_eq!(
            phase, "probe_bw:cruise",
            "PROBE_RTT exits through DOWN straight into CRUISE"
        );
        assert!(
            t_exit / 1000 > 5202 && t_exit - 1024 <= 5_202_999,
            "exit at {t_exit} µs"
        );
        assert!(p.tp.cwnd > 64, "cwnd restored from prior_cwnd");
        // The next PROBE_RTT is due 5 s after this one ended.
        assert_eq!(p.b.v.probe_rtt_min_stamp, (t_exit / 1000) as u32);
    }

    #[test]
    fn tlp_repaired_loss_counts_as_a_probe_loss() {
        // 40 segments per 8192 µs: bw = 81 920, BDP = 40; in UP bbr_inflight = 40 + 2 = 42
        // (3·tso_goal = 3·13 ≤ 40).
        let mut p = Path::new(Params::default(), 2, RTT);
        for n in [8, 16, 32, 40] {
            p.round(n);
        }
        p.rounds_until(40, "drain", 5);
        p.cap = 40;
        p.rounds_until(40, "probe_bw:cruise", 3);
        // Reno coexistence: a probe after min(63, target_inflight = 40) rounds, not 63
        // (target_inflight = min(max(40, 3·4, 4), cwnd)).
        let left = 40 - p.b.v.rounds_since_probe;
        assert_eq!(p.rounds_until(40, "probe_bw:refill", 70), left);
        p.rounds_until(40, "probe_bw:up", 1);
        // An ECE-driven CWR (entered in one ACK, completed in a later one) is not a TLP.
        p.b.ssthresh(&mut p.tp);
        p.b.set_state(&mut p.tp, CaState::Cwr);
        p.tp.ca_state = CaState::Cwr;
        p.round(40);
        p.b.cwnd_event(&mut p.tp, CaEvent::CompleteCwr);
        assert!(!p.b.v.loss_in_round && p.b.v.inflight_hi == UNSET);
        p.b.set_state(&mut p.tp, CaState::Open);
        p.tp.ca_state = CaState::Open;
        // tcp_process_tlp_ack's one-shot CWR: ssthresh, CWR, CompleteCwr, Open in one ACK.
        // bbr_run_loss_probe_recovery: lost = 1 of tx_in_flight = inflight_latest + 1 = 41:
        // 1 > 41·5 >> 8 = 0, too high: inflight_hi = max(41, 42·180 >> 8 = 29) = 41.
        assert_eq!(p.b.v.inflight_latest, 40);
        p.b.ssthresh(&mut p.tp);
        p.b.set_state(&mut p.tp, CaState::Cwr);
        p.tp.ca_state = CaState::Cwr;
        p.b.cwnd_event(&mut p.tp, CaEvent::CompleteCwr);
        // (bbr_note_loss's loss_in_round is then cleared again by bbr_start_bw_probe_down.)
        assert_eq!(p.b.v.inflight_hi, 41);
        assert_eq!(p.phase(), "probe_bw:down");
    }

    #[test]
    fn same_seed_same_trajectory() {
        let trace = |seed: u64| {
            let mut p = Path::new(Params::default(), seed, RTT);
            to_cruise(&mut p);
            // (The entry for the DOWN left before the trace has no fresh round count.)
            let mut waits = vec![(p.b.v.probe_wait_us, u32::MAX)];
            let mut out = vec![];
            for r in 0..600 {
                p.cap = if r % 7 < 3 { 150 } else { 128 };
                p.round(128);
                out.push((p.tp.cwnd, p.tp.pacing_rate, p.phase()));
                if waits.last().map(|w: &(u32, u32)| w.0) != Some(p.b.v.probe_wait_us) {
                    waits.push((p.b.v.probe_wait_us, p.b.v.rounds_since_probe));
                }
            }
            (out, waits, p.log)
        };
        let (a, wa, la) = trace(42);
        let (b, wb, lb) = trace(42);
        assert_eq!(a, b);
        assert_eq!(wa, wb);
        assert_eq!(la, lb);
        let wa = &wa[1..];
        assert!(wa.len() >= 6, "several probe cycles: {wa:?}");
        // probe_wait_us = 2 s + U[0, 1 s); rounds_since_probe starts at U{0, 1} (+1 if a round
        // started in the same ACK): both draws vary.
        assert!(wa.iter().all(|w| (2_000_000..3_000_000).contains(&w.0)));
        assert!(
            wa.iter().any(|w| w.1 == 0) && wa.iter().any(|w| w.1 == 1),
            "{wa:?}"
        );
        // Another seed draws other waits.
        let (_, wc, _) = trace(43);
        assert_ne!(wa, wc);
    }

    #[test]
    fn params_are_range_checked() {
        let bad = |p: Params, name: &str| {
            let e = p.validate().unwrap_err();
            assert!(e.starts_with(&format!("{name}:")), "{e}");
        };
        bad(
            Params {
                beta: 300,
                ..Params::default()
            },
            "beta",
        );
        bad(
            Params {
                loss_thresh: 256,
                ..Params::default()
            },
            "loss_thresh",
        );
        bad(
            Params {
                ecn_factor: 257,
                ..Params::default()
            },
            "ecn_factor",
        );
        bad(
            Params {
                full_bw_cnt: 4,
                ..Params::default()
            },
            "full_bw_cnt",
        );
        bad(
            Params {
                full_loss_cnt: 16,
                ..Params::default()
            },
            "full_loss_cnt",
        );
        bad(
            Params {
                full_ecn_cnt: 4,
                ..Params::default()
            },
            "full_ecn_cnt",
        );
        bad(
            Params {
                probe_rtt_win_ms: 10_001,
                ..Params::default()
            },
            "probe_rtt_win_ms",
        );
        bad(
            Params {
                pacing_gain_down: 0,
                ..Params::default()
            },
            "pacing_gain_down",
        );
        bad(
            Params {
                startup_pacing_gain: 1024,
                ..Params::default()
            },
            "startup_pacing_gain",
        );
        bad(
            Params {
                bw_probe_cwnd_gain: 4,
                ..Params::default()
            },
            "bw_probe_cwnd_gain",
        );
        bad(
            Params {
                cwnd_gain: 1000,
                ..Params::default()
            },
            "cwnd_gain",
        ); // 1000 + 64 > 1023
        bad(
            Params {
                inflight_headroom: 256,
                ..Params::default()
            },
            "inflight_headroom",
        );
        // serde: defaults fill in, unknown keys are refused.
        let p: Params = serde_json::from_str(r#"{"beta": 50, "ecn_low": true}"#).unwrap();
        assert_eq!((p.beta, p.ecn_low, p.loss_thresh), (50, true, 5));
        assert!(serde_json::from_str::<Params>(r#"{"bogus": 1}"#).is_err());
    }
}
