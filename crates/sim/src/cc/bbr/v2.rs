//! BBRv2 as google/bbr's v2alpha branch has it: net/ipv4/tcp_bbr2.c (google/bbr commit
//! 0487ade55081; Cardwell et al., IETF 104–106 ICCRG "BBR v2"), ported function by function
//! with its fixed-point arithmetic. The functions it shares with v1 are in [`super`], those v3
//! kept in [`super::bounds`]; this file has v2's parameters and the functions only v2 has.
//!
//! Beside BBRv1's max-bandwidth and min-RTT estimates, v2 keeps bounds learned from loss and
//! ECN: `inflight_hi`/`bw_hi` (long-term, cut when a bandwidth probe sees more than 2 % loss —
//! at the very packet where the loss rate crossed it, through the `skb_marked_lost` hook — or
//! ECN marks on more than half the packets) and `inflight_lo`/`bw_lo` (short-term, cut once per
//! round by β = 0.3 on loss and by ecn_factor·α on ECN while not probing). PROBE_BW is a
//! four-phase machine DOWN → CRUISE → REFILL → UP, probing every 2–3 s (randomized) or after a
//! Reno-coexistence number of rounds; the max-bw filter keeps the last two probe cycles;
//! PROBE_RTT comes every 5 s at max(4, BDP/2); STARTUP also ends on persistent loss or ECN.
//!
//! ECN (v2alpha's experimental support): with the module parameter `ecn_enable` (off by
//! default, as in the source) and a negotiated ECN flow (`ecn = true` in the scenario), a flow
//! whose min_rtt is at most `ecn_max_rtt_us` (5 ms) becomes "ECN eligible" and reacts to
//! DCTCP-style marks: α ← (1 − 1/16)·α + F/16 per round, inflight_lo (and bw_lo) cut to
//! (1 − α·ecn_factor) per round with marks. The receiver echoes CE with the DCTCP state
//! machine (`precise_ece_ack`, the flag `TCP_CONG_WANTS_CE_EVENTS`).
//!
//! Deviations, each deliberate:
//! - The receiver-side `fast_ack_mode` (quick ACKs on CE) is not modelled: the simulated
//!   receiver runs the DCTCP ECE state machine, which already ACKs at every CE change.
//! - `undo_cwnd` is ported but the core never undoes (no DSACK/F-RTO in the simulator).
//! - `rs.is_ack_delayed` is the core's approximation of `FLAG_ACK_MAYBE_DELAYED`.
//! - Debug/ftrace output (`bbr_debug`) is replaced by the time-series probe.

use serde::{Deserialize, Serialize};

use super::bounds::{Bounded, Ctx, UNSET};
use super::{forward, min_tso_segs_by_rate, Mode, Version, BBR_UNIT};
use crate::cc::{
    CaEvent, CaState, CcProbe, CongestionControl, EcnUse, RateSample, TcpState, TxSnapshot,
};

pub const SOURCE: &str = "google/bbr v2alpha net/ipv4/tcp_bbr2.c (commit 0487ade55081)";

/// BBRv2's connection state.
pub type Bbr2 = super::Bbr<Params>;

const CYCLE_LEN: usize = 8;
/// `bbr_pacing_margin_percent` (a constant in tcp_bbr2.c).
const PACING_MARGIN_PERCENT: u32 = 1;

/// The module parameters of tcp_bbr2.c with their defaults. Gains and fractions in 1/256
/// (`BBR_UNIT`), times as named.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Params {
    /// `bbr_high_gain`: STARTUP pacing gain (739 = 2.885).
    pub high_gain: u32,
    /// `bbr_drain_gain`: DRAIN pacing gain (88 = 1/2.885).
    pub drain_gain: u32,
    /// `bbr_startup_cwnd_gain` (739).
    pub startup_cwnd_gain: u32,
    /// `bbr_cwnd_gain`: PROBE_BW cwnd gain (512 = 2).
    pub cwnd_gain: u32,
    /// `bbr_pacing_gain[]`: PROBE_BW pacing gains by phase UP, DOWN, CRUISE, REFILL (then unused).
    pub pacing_gain: [u32; CYCLE_LEN],
    /// `bbr_cwnd_min_target`, packets.
    pub cwnd_min_target: u32,
    /// `bbr_probe_rtt_cwnd_gain`: PROBE_RTT cwnd as a fraction of BDP (128 = 0.5; 0 = 4 packets).
    pub probe_rtt_cwnd_gain: u32,
    /// `bbr_min_rtt_win_sec`, s.
    pub min_rtt_win_sec: u32,
    /// `bbr_probe_rtt_mode_ms`, ms.
    pub probe_rtt_mode_ms: u32,
    /// `bbr_probe_rtt_win_ms`: PROBE_RTT interval, ms.
    pub probe_rtt_win_ms: u32,
    /// `bbr_full_bw_thresh` (320 = 1.25).
    pub full_bw_thresh: u32,
    /// `bbr_full_bw_cnt`, rounds.
    pub full_bw_cnt: u32,
    /// `bbr_cwnd_tso_budget`: 1 = floor cwnd at 3 TSO skbs; 0 = v1's padding.
    pub cwnd_tso_budget: u32,
    /// `bbr_extra_acked_gain` (256 = 1).
    pub extra_acked_gain: u32,
    /// `bbr_extra_acked_win_rtts`, rounds.
    pub extra_acked_win_rtts: u32,
    /// `bbr_extra_acked_max_us`, µs.
    pub extra_acked_max_us: u32,
    /// `bbr_extra_acked_in_startup`.
    pub extra_acked_in_startup: bool,
    /// `bbr_drain_to_target`: hold DOWN until inflight ≤ BDP.
    pub drain_to_target: bool,
    /// `bbr_precise_ece_ack`: the receiver echoes CE with the DCTCP state machine.
    pub precise_ece_ack: bool,
    /// `bbr_usage_based_cwnd`: never grow cwnd beyond twice what was used.
    pub usage_based_cwnd: bool,
    /// `bbr_ecn_enable`: use DCTCP/L4S-style ECN marks (off by default in v2alpha).
    pub ecn_enable: bool,
    /// `bbr_tso_rtt_shift`: the TSO allowance halves per 2^shift µs of min_rtt.
    pub tso_rtt_shift: u32,
    /// `bbr_min_tso_rate`, bit/s.
    pub min_tso_rate: u64,
    /// `bbr_beta`: multiplicative cut on loss (77 ≈ 0.3).
    pub beta: u32,
    /// `bbr_ecn_alpha_gain` (16 = 1/16).
    pub ecn_alpha_gain: u32,
    /// `bbr_ecn_alpha_init` (256 = 1.0).
    pub ecn_alpha_init: u32,
    /// `bbr_ecn_factor` (85 ≈ 1/3).
    pub ecn_factor: u32,
    /// `bbr_ecn_thresh` (128 = 0.5).
    pub ecn_thresh: u32,
    /// `bbr_ecn_max_rtt_us`: ECN only while min_rtt ≤ this, µs (0 = any RTT).
    pub ecn_max_rtt_us: u32,
    /// `bbr_ecn_reprobe_gain` (0 = disabled).
    pub ecn_reprobe_gain: u32,
    /// `bbr_ecn_bw_lo`: cut bw_lo too on ECN.
    pub ecn_bw_lo: bool,
    /// `bbr_ecn_bw_hi`: cut bw_hi too on ECN while probing.
    pub ecn_bw_hi: bool,
    /// `bbr_loss_thresh` (5 ≈ 2 %).
    pub loss_thresh: u32,
    /// `bbr_full_loss_cnt`: loss events in a recovery round that end STARTUP.
    pub full_loss_cnt: u32,
    /// `bbr_full_ecn_cnt`: rounds of high ECN that end STARTUP.
    pub full_ecn_cnt: u32,
    /// `bbr_inflight_headroom` (38 ≈ 15 %).
    pub inflight_headroom: u32,
    /// `bbr_bw_probe_pif_gain` (320 = 1.25).
    pub bw_probe_pif_gain: u32,
    /// `bbr_bw_probe_reno_gain` (256 = 1).
    pub bw_probe_reno_gain: u32,
    /// `bbr_bw_probe_max_rounds`.
    pub bw_probe_max_rounds: u32,
    /// `bbr_bw_probe_rand_rounds`.
    pub bw_probe_rand_rounds: u32,
    /// `bbr_bw_probe_base_us`, µs.
    pub bw_probe_base_us: u32,
    /// `bbr_bw_probe_rand_us`, µs.
    pub bw_probe_rand_us: u32,
    /// `bbr_undo`.
    pub undo: bool,
    /// `bbr_fast_path`.
    pub fast_path: bool,
    /// `bbr_refill_add_inc`.
    pub refill_add_inc: u32,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            high_gain: BBR_UNIT * 2885 / 1000 + 1,
            drain_gain: BBR_UNIT * 1000 / 2885,
            startup_cwnd_gain: BBR_UNIT * 2885 / 1000 + 1,
            cwnd_gain: BBR_UNIT * 2,
            pacing_gain: [
                BBR_UNIT * 5 / 4,
                BBR_UNIT * 3 / 4,
                BBR_UNIT,
                BBR_UNIT,
                BBR_UNIT,
                BBR_UNIT,
                BBR_UNIT,
                BBR_UNIT,
            ],
            cwnd_min_target: 4,
            probe_rtt_cwnd_gain: BBR_UNIT / 2,
            min_rtt_win_sec: 10,
            probe_rtt_mode_ms: 200,
            probe_rtt_win_ms: 5000,
            full_bw_thresh: BBR_UNIT * 5 / 4,
            full_bw_cnt: 3,
            cwnd_tso_budget: 1,
            extra_acked_gain: 256,
            extra_acked_win_rtts: 5,
            extra_acked_max_us: 100_000,
            extra_acked_in_startup: true,
            drain_to_target: true,
            precise_ece_ack: true,
            usage_based_cwnd: false,
            ecn_enable: false,
            tso_rtt_shift: 9,
            min_tso_rate: 1_200_000,
            beta: BBR_UNIT * 30 / 100,
            ecn_alpha_gain: BBR_UNIT / 16,
            ecn_alpha_init: BBR_UNIT,
            ecn_factor: BBR_UNIT / 3,
            ecn_thresh: BBR_UNIT / 2,
            ecn_max_rtt_us: 5000,
            ecn_reprobe_gain: 0,
            ecn_bw_lo: true,
            ecn_bw_hi: true,
            loss_thresh: BBR_UNIT * 2 / 100,
            full_loss_cnt: 8,
            full_ecn_cnt: 2,
            inflight_headroom: BBR_UNIT * 15 / 100,
            bw_probe_pif_gain: BBR_UNIT * 5 / 4,
            bw_probe_reno_gain: BBR_UNIT,
            bw_probe_max_rounds: 63,
            bw_probe_rand_rounds: 2,
            bw_probe_base_us: 2_000_000,
            bw_probe_rand_us: 1_000_000,
            undo: true,
            fast_path: true,
            refill_add_inc: 0,
        }
    }
}

impl Params {
    /// The bit widths of `struct bbr_params` (bbr_init clamps to them; we refuse instead).
    pub fn validate(&self) -> Result<(), String> {
        let max = |name: &str, v: u64, hi: u64| {
            if v > hi {
                Err(format!(
                    "{name}: {v} must be at most {hi} (the field width of struct bbr_params)"
                ))
            } else {
                Ok(())
            }
        };
        max("high_gain", self.high_gain as u64, 0x7FF)?;
        max("drain_gain", self.drain_gain as u64, 0x3FF)?;
        max("startup_cwnd_gain", self.startup_cwnd_gain as u64, 0x7FF)?;
        max("cwnd_gain", self.cwnd_gain as u64, 0x7FF)?;
        for (i, &g) in self.pacing_gain.iter().enumerate() {
            max(&format!("pacing_gain[{i}]"), g as u64, 0x3FF)?;
        }
        max("cwnd_min_target", self.cwnd_min_target as u64, 0xF)?;
        max("probe_rtt_cwnd_gain", self.probe_rtt_cwnd_gain as u64, 0xFF)?;
        max("min_rtt_win_sec", self.min_rtt_win_sec as u64, 0x1F)?;
        max("probe_rtt_mode_ms", self.probe_rtt_mode_ms as u64, 0x1FF)?;
        max(
            "probe_rtt_win_ms",
            self.probe_rtt_win_ms as u64,
            (self.min_rtt_win_sec as u64 * 1000).min(0x3FFF),
        )?;
        max("full_bw_thresh", self.full_bw_thresh as u64, 0x3FF)?;
        max("full_bw_cnt", self.full_bw_cnt as u64, 7)?;
        max("cwnd_tso_budget", self.cwnd_tso_budget as u64, 1)?;
        max("extra_acked_gain", self.extra_acked_gain as u64, 0x7FF)?;
        max(
            "extra_acked_win_rtts",
            self.extra_acked_win_rtts as u64,
            0x1F,
        )?;
        max("tso_rtt_shift", self.tso_rtt_shift as u64, 0xF)?;
        for (name, v) in [
            ("beta", self.beta),
            ("ecn_alpha_gain", self.ecn_alpha_gain),
            ("ecn_factor", self.ecn_factor),
            ("ecn_thresh", self.ecn_thresh),
            ("loss_thresh", self.loss_thresh),
            ("inflight_headroom", self.inflight_headroom),
            ("bw_probe_max_rounds", self.bw_probe_max_rounds),
        ] {
            max(name, v as u64, 0xFF)?;
        }
        max(
            "ecn_alpha_init",
            self.ecn_alpha_init as u64,
            BBR_UNIT as u64,
        )?;
        max("ecn_max_rtt_us", self.ecn_max_rtt_us as u64, 0x7FFFF)?;
        max("ecn_reprobe_gain", self.ecn_reprobe_gain as u64, 0x1FF)?;
        max("full_loss_cnt", self.full_loss_cnt as u64, 0xF)?;
        max("full_ecn_cnt", self.full_ecn_cnt as u64, 3)?;
        max("bw_probe_pif_gain", self.bw_probe_pif_gain as u64, 0x1FF)?;
        max("bw_probe_reno_gain", self.bw_probe_reno_gain as u64, 0x1FF)?;
        max(
            "bw_probe_rand_rounds",
            self.bw_probe_rand_rounds as u64,
            0xF,
        )?;
        max(
            "bw_probe_base_us",
            self.bw_probe_base_us as u64,
            (1 << 26) - 1,
        )?;
        max(
            "bw_probe_rand_us",
            self.bw_probe_rand_us as u64,
            (1 << 26) - 1,
        )?;
        max("refill_add_inc", self.refill_add_inc as u64, 3)?;
        if self.cwnd_min_target == 0 {
            return Err("cwnd_min_target: must be at least 1".into());
        }
        Ok(())
    }
}

impl Version for Params {
    type State = super::bounds::State;
    const PACING_RATE_FLOOR: u64 = 1;

    fn new_state(&self) -> Self::State {
        Self::State::new(self.ecn_alpha_init)
    }
    forward!(startup_cwnd_gain: u32, drain_gain: u32, cwnd_min_target: u32, min_rtt_win_sec: u32, probe_rtt_mode_ms: u32, full_bw_thresh: u32, full_bw_cnt: u32, extra_acked_gain: u32, extra_acked_win_rtts: u32, extra_acked_max_us: u32, extra_acked_in_startup: bool);
    fn startup_pacing_gain(&self) -> u32 {
        self.high_gain
    }
    fn pacing_margin_percent(&self) -> u32 {
        PACING_MARGIN_PERCENT
    }
    fn cwnd_tso_budget(&self) -> bool {
        self.cwnd_tso_budget == 1
    }
    fn probe_rtt_cwnd_gain(&self) -> Option<u32> {
        (self.probe_rtt_cwnd_gain != 0).then_some(self.probe_rtt_cwnd_gain)
    }

    fn max_bw(b: &Bbr2) -> u32 {
        b.v.max_bw[0].max(b.v.max_bw[1])
    }
    /// `bbr_bw`: min(max_bw, bw_lo, bw_hi).
    fn bw(b: &Bbr2) -> u32 {
        b.max_bw().min(b.v.bw_lo.min(b.v.bw_hi))
    }
    fn tso_segs_goal(b: &Bbr2, tp: &TcpState) -> u32 {
        b.tso_segs_generic(tp)
    }
    fn probe_bw_gains(b: &Bbr2) -> (u32, u32) {
        (b.params.pacing_gain[b.cycle_idx], b.params.cwnd_gain)
    }
    fn enter_drain(b: &mut Bbr2) {
        b.reset_congestion_signals();
    }
    /// `bbr2_check_drain`.
    fn exit_drain(b: &mut Bbr2, tp: &TcpState) {
        b.mode = Mode::ProbeBw;
        b.start_bw_probe_down(tp);
    }
    fn enter_probe_rtt(b: &mut Bbr2, tp: &TcpState) {
        b.v.ack_phase = super::bounds::AckPhase::ProbeStopping;
        b.next_rtt_delivered = tp.delivered as u32;
    }
    fn probe_rtt_done(b: &mut Bbr2, tp: &TcpState) {
        b.v.probe_rtt_min_stamp = tp.jiffies();
        b.exit_probe_rtt(tp);
    }
}

impl Bounded for Params {
    const RTT_TIE_REFRESHES_PROBE_RTT_MIN: bool = true;
    const CE_RATIO_STRICT: bool = false;
    const BW_LO_FLOOR: u32 = 0;
    const STARTUP_EXIT_KEEPS_INFLIGHT_LATEST: bool = false;
    const UPWARD_RESETS_ACKS: bool = true;

    forward!(probe_rtt_win_ms: u32, tso_rtt_shift: u32, beta: u32, loss_thresh: u32, ecn_thresh: u32, ecn_factor: u32, ecn_alpha_gain: u32, ecn_alpha_init: u32, ecn_max_rtt_us: u32, ecn_reprobe_gain: u32, full_loss_cnt: u32, full_ecn_cnt: u32, inflight_headroom: u32, bw_probe_max_rounds: u32, bw_probe_rand_rounds: u32, bw_probe_base_us: u32, bw_probe_rand_us: u32, fast_path: bool, bw_probe_reno_gain: u32, usage_based_cwnd: bool, refill_add_inc: u32, ecn_bw_lo: bool, ecn_bw_hi: bool, drain_to_target: bool);
    fn min_tso_segs(&self, tp: &TcpState) -> u32 {
        min_tso_segs_by_rate(tp, self.min_tso_rate)
    }
    fn can_use_ecn(&self, tp: &TcpState) -> bool {
        self.ecn_enable && tp.ecn_ok
    }
    /// v2 leaves UP once a min_rtt has passed and inflight reached `bw_probe_pif_gain`·BDP: a
    /// queue was built.
    fn probe_up_done(b: &mut Bbr2, tp: &TcpState, inflight: u32, bw: u32, _ctx: &Ctx) -> bool {
        b.has_elapsed_in_phase(tp, b.min_rtt_us)
            && inflight >= b.inflight(tp, bw, b.params.bw_probe_pif_gain)
    }
}

impl Bbr2 {
    /// `bbr2_update_ecn_alpha` (at each round start): α is updated even before the flow is
    /// ECN eligible.
    fn update_ecn_alpha(&mut self, tp: &TcpState) {
        if self.params.ecn_factor == 0 {
            return;
        }
        let (delivered, delivered_ce) = self.delivered_since_alpha(tp);
        if delivered <= 0 || delivered_ce < 0 {
            return;
        }
        self.check_ecn_eligible(tp);
        self.fold_ecn_alpha(tp, delivered, delivered_ce);
    }

    /// `bbr2_update_congestion_signals`: the max-bw sample, and once per loss round the lower
    /// bounds, from this round's loss, ECN and latest delivery.
    fn update_congestion_signals(&mut self, tp: &TcpState, rs: &RateSample, ctx: &Ctx) {
        self.v.loss_round_start = false;
        if rs.interval_us <= 0 || rs.acked_sacked == 0 {
            return;
        }
        let bw = ctx.sample_bw;
        if !rs.is_app_limited || bw >= self.max_bw() {
            self.take_max_bw_sample(bw);
        }
        self.v.loss_in_round |= rs.losses > 0;
        self.v.bw_latest = self.v.bw_latest.max(ctx.sample_bw);
        self.v.inflight_latest = self.v.inflight_latest.max(rs.delivered.max(0) as u32);
        if super::before(rs.prior_delivered, self.v.loss_round_delivered) {
            return;
        }
        self.v.loss_round_delivered = tp.delivered as u32;
        self.v.loss_round_start = true;
        self.adapt_lower_bounds(tp);
        self.v.loss_in_round = false;
        self.v.ecn_in_round = false;
        self.v.bw_latest = ctx.sample_bw;
        self.v.inflight_latest = rs.delivered.max(0) as u32;
    }

    /// `bbr2_update_model`.
    fn update_model(&mut self, tp: &mut TcpState, rs: &RateSample, ctx: &Ctx) {
        self.update_congestion_signals(tp, rs, ctx);
        self.update_ack_aggregation(tp, rs);
        self.check_loss_too_high_in_startup(tp, rs);
        self.check_full_bw_reached(rs);
        self.check_drain(tp);
        self.update_cycle_phase(tp, rs, ctx);
        self.update_min_rtt(tp, rs);
    }
}

impl CongestionControl for Bbr2 {
    fn name(&self) -> &'static str {
        "bbr2"
    }

    /// `bbr2_init` (with the shared `bbr_init`).
    fn init(&mut self, tp: &mut TcpState) {
        self.next_rtt_delivered = 0;
        self.init_bounds(tp);
        self.update_gains();
    }

    /// `bbr2_ssthresh`: save cwnd and the bounds for undo.
    fn ssthresh(&mut self, tp: &mut TcpState) -> u32 {
        self.save_for_undo(tp);
        tp.ssthresh
    }

    /// Never called: BBRv2 has `cong_control`.
    fn cong_avoid(&mut self, _tp: &mut TcpState, _acked: u32) {}

    /// `bbr2_set_state`.
    fn set_state(&mut self, tp: &mut TcpState, new_state: CaState) {
        if new_state == CaState::Loss {
            self.prev_ca_state = CaState::Loss;
            self.full_bw = 0;
            if !self.is_probing_bandwidth() && self.v.inflight_lo == UNSET {
                self.v.inflight_lo = self.prior_cwnd;
            }
        } else if self.prev_ca_state == CaState::Loss && new_state != CaState::Loss {
            tp.cwnd = tp.cwnd.max(self.prior_cwnd);
            self.v.try_fast_path = false;
        }
    }

    /// `bbr_cwnd_event` (the ECN events are the receiver's, handled by the simulated receiver).
    fn cwnd_event(&mut self, tp: &mut TcpState, ev: CaEvent) {
        self.restart_from_idle(tp, ev);
    }

    /// `bbr2_undo_cwnd`.
    fn undo_cwnd(&mut self, tp: &TcpState) -> u32 {
        self.full_bw = 0;
        self.full_bw_cnt = 0;
        self.v.loss_in_round = false;
        if !self.params.undo {
            return tp.cwnd;
        }
        self.undo_bounds();
        self.prior_cwnd
    }

    fn has_cong_control(&self) -> bool {
        true
    }

    /// `bbr2_main`.
    fn cong_control(&mut self, tp: &mut TcpState, rs: &RateSample) {
        let mut ctx = Ctx::default();
        let mut update_model = true;
        self.update_round_start(tp, rs);
        if self.round_start {
            self.v.rounds_since_probe = (self.v.rounds_since_probe + 1).min(0xFF);
            self.update_ecn_alpha(tp);
        }
        self.v.ecn_in_round |= rs.is_ece;
        Self::calculate_bw_sample(rs, &mut ctx);
        if !self.run_fast_path(tp, &mut update_model, rs, &ctx) {
            if update_model {
                self.update_model(tp, rs, &ctx);
            }
            self.update_control(tp, rs);
        }
        self.prev_ca_state = tp.ca_state;
        self.v.loss_in_cycle |= rs.lost > 0;
        self.v.ecn_in_cycle |= rs.delivered_ce > 0;
    }

    /// Classic ECN codepoints; the receiver echoes CE precisely when ECN is enabled
    /// (`TCP_CONG_WANTS_CE_EVENTS` with `precise_ece_ack`).
    fn ecn_use(&self) -> EcnUse {
        if self.params.ecn_enable && self.params.precise_ece_ack {
            EcnUse::WantsCeEvents
        } else {
            EcnUse::Classic
        }
    }

    fn wants_pacing(&self) -> bool {
        true
    }

    fn min_tso_segs(&self, tp: &TcpState) -> Option<u32> {
        Some(min_tso_segs_by_rate(tp, self.params.min_tso_rate))
    }

    /// `bbr_tso_segs`.
    fn tso_segs(&self, tp: &TcpState) -> Option<u32> {
        Some(self.tso_segs_generic(tp))
    }

    /// `bbr2_skb_marked_lost`: react at the first lost packet that pushes a probe's loss rate
    /// over loss_thresh.
    fn skb_marked_lost(&mut self, tp: &mut TcpState, tx: &TxSnapshot) {
        self.skb_marked_lost_bounded(tp, tx);
    }

    fn probe(&self, tp: &TcpState) -> CcProbe {
        CcProbe {
            phase: Some(self.phase_name()),
            bw_bps: Some(self.bw_bps(tp)),
            inflight_hi: (self.v.inflight_hi != UNSET).then_some(self.v.inflight_hi),
            alpha: self
                .v
                .ecn_eligible
                .then_some(self.v.ecn_alpha as f64 / BBR_UNIT as f64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Path {
        tp: TcpState,
        bbr: Bbr2,
        /// Overrides the sample's prior_in_flight (else tp.inflight).
        pif: Option<u32>,
    }

    impl Path {
        fn new(params: Params, seed: u64) -> Self {
            let mut tp = TcpState::new(1448, 1_000_000_000);
            tp.srtt_us = 10_000;
            tp.min_rtt_us = 10_000;
            let mut bbr = Bbr2::new(params, seed);
            bbr.init(&mut tp);
            Path { tp, bbr, pif: None }
        }

        /// One ACK `dt_us` after the previous one delivering `acked` packets, with a rate
        /// sample of `delivered` packets over `interval_us`; `round` makes it start a round.
        fn ack(
            &mut self,
            dt_us: u64,
            acked: u32,
            delivered: i64,
            interval_us: i64,
            rtt_us: i64,
            round: bool,
        ) {
            self.tp.now_ns += dt_us * 1000;
            // A round-starting sample was sent at or after the round's end mark; any other one
            // before it.
            let prior = if round {
                (self.tp.delivered as u32).max(self.bbr.next_rtt_delivered)
            } else {
                self.bbr.next_rtt_delivered.wrapping_sub(1)
            };
            self.tp.delivered += acked as u64;
            self.tp.delivered_mstamp_us = self.tp.now_us();
            let rs = RateSample {
                prior_mstamp_us: Some(0),
                prior_delivered: prior,
                delivered,
                interval_us,
                rtt_us,
                acked_sacked: acked,
                prior_in_flight: self.pif.unwrap_or(self.tp.inflight),
                tx_in_flight: self.tp.inflight,
                is_app_limited: self.tp.app_limited != 0,
                ..RateSample::default()
            };
            self.bbr.cong_control(&mut self.tp, &rs);
        }

        /// A round at `bw` packets per ms over a 10 ms RTT, as one ACK.
        fn round(&mut self, bw_pkts_per_ms: i64) {
            let d = bw_pkts_per_ms * 10;
            self.ack(10_000, d as u32, d, 10_000, 10_000, true);
        }
    }

    fn in_probe_bw(seed: u64) -> Path {
        let mut p = Path::new(Params::default(), seed);
        p.tp.inflight = 1000;
        for _ in 0..5 {
            p.round(10);
        }
        assert!(p.bbr.full_bw_reached);
        assert_eq!(p.bbr.mode, Mode::Drain);
        p.tp.inflight = 80;
        p.round(10);
        assert_eq!(p.bbr.mode, Mode::ProbeBw);
        p
    }

    #[test]
    fn startup_ends_after_three_rounds_without_25_percent_growth_then_drains_into_probe_bw_down() {
        let mut p = Path::new(Params::default(), 1);
        p.tp.inflight = 1000;
        for bw in [2, 4, 8, 16] {
            p.round(bw);
            assert!(!p.bbr.full_bw_reached);
        }
        p.round(16);
        p.round(19); // 19 < 1.25·16 = 20: still no growth
        assert_eq!(p.bbr.mode, Mode::Startup);
        p.round(16);
        assert!(p.bbr.full_bw_reached);
        assert_eq!(p.bbr.mode, Mode::Drain);
        assert_eq!((p.bbr.pacing_gain, p.bbr.cwnd_gain), (88, 739));
        // DRAIN ends once inflight is at the BDP; PROBE_BW starts in DOWN (0.75), and stays
        // there while the packets in the network (from the sample's prior_in_flight) exceed it.
        p.tp.inflight = 100;
        p.pif = Some(400);
        p.round(16);
        assert_eq!(p.bbr.mode, Mode::ProbeBw);
        assert_eq!(p.bbr.phase_name(), "probe_bw:down");
        assert_eq!(p.bbr.pacing_gain, 192);
    }

    #[test]
    fn probe_bw_cycles_down_cruise_refill_up_with_a_randomized_2_to_3_second_wait() {
        let mut p = in_probe_bw(7);
        let t0 = p.tp.now_us();
        // bw 10 packets/ms, min_rtt 10 ms: BDP = 100 packets. Inflight below the BDP ends DOWN.
        p.tp.inflight = 90;
        p.ack(1000, 10, 100, 10_000, 10_000, false);
        assert_eq!(p.bbr.phase_name(), "probe_bw:cruise");
        // CRUISE until the wall-clock wait (2 s + U[0, 1 s)) elapses — or the Reno-coexistence
        // round count min(63, BDP rounds) is reached; keep rounds off to test the clock.
        let wait = p.bbr.v.probe_wait_us as u64;
        assert!((2_000_000..3_000_000).contains(&wait), "{wait}");
        let mut t = p.tp.now_us();
        while p.bbr.phase_name() == "probe_bw:cruise" {
            p.ack(1000, 10, 100, 10_000, 10_000, false);
            t = p.tp.now_us();
            assert!(t - t0 <= wait + 2000);
        }
        assert_eq!(p.bbr.phase_name(), "probe_bw:refill");
        assert!(t - t0 > wait, "probed after {} µs, wait {wait}", t - t0);
        // REFILL lasts one round (pacing 1.0), then UP (1.25) with inflight_hi growth armed.
        assert_eq!(p.bbr.pacing_gain, 256);
        p.ack(1000, 10, 100, 10_000, 10_000, false);
        assert_eq!(p.bbr.phase_name(), "probe_bw:refill");
        p.round(10);
        assert_eq!(p.bbr.phase_name(), "probe_bw:up");
        assert_eq!(p.bbr.pacing_gain, 320);
        // UP ends once min_rtt has elapsed and inflight ≥ 1.25·BDP + budget (queue built).
        p.tp.inflight = 200;
        p.ack(5000, 10, 100, 10_000, 10_000, false);
        assert_eq!(p.bbr.phase_name(), "probe_bw:up", "only 5 ms into UP");
        p.ack(5001, 10, 100, 10_000, 10_000, false);
        assert_eq!(p.bbr.phase_name(), "probe_bw:down");
    }

    #[test]
    fn a_probe_with_more_than_2_percent_loss_cuts_inflight_hi_at_the_crossing_packet() {
        let mut p = in_probe_bw(3);
        // Go to UP: bw_probe_samples is set when REFILL ends.
        p.bbr.start_bw_probe_refill(&p.tp, 0);
        p.round(10);
        assert_eq!(p.bbr.phase_name(), "probe_bw:up");
        assert!(p.bbr.v.bw_probe_samples);
        assert_eq!(p.bbr.v.inflight_hi, UNSET);
        // A packet sent with 150 in flight is marked lost; since it was sent, 4 packets were
        // lost (3 before it). loss_thresh = 5/256: 150·5/256 = 2.93 < 4: too high.
        // inflight_hi_from_lost_skb: inflight_prev = 149, lost_prev = 3,
        // loss_budget = ceil(149·5/256) = ceil(2.91) = 3 ≤ lost_prev ⇒ prefix 0 ⇒ 149.
        // The cut: max(149, target_inflight·(1 − 77/256)); target = min(BDP + budget, cwnd).
        let target = p.bbr.target_inflight(&p.tp);
        let tx = TxSnapshot {
            in_flight: 150,
            lost: p.tp.lost as u32,
            ..TxSnapshot::default()
        };
        p.tp.lost += 4;
        p.bbr.skb_marked_lost(&mut p.tp, &tx);
        let floor = ((target as u64 * (256 - 77) as u64) >> 8) as u32;
        assert_eq!(p.bbr.v.inflight_hi, 149.max(floor), "target {target}");
        assert_eq!(p.bbr.phase_name(), "probe_bw:down", "UP ends at once");
        assert!(!p.bbr.v.bw_probe_samples, "one reaction per probe");
        // Below the threshold (2 lost of 150: 2 ≤ 2.93) nothing is cut.
        let mut q = in_probe_bw(3);
        q.bbr.start_bw_probe_refill(&q.tp, 0);
        q.round(10);
        let tx = TxSnapshot {
            in_flight: 150,
            lost: q.tp.lost as u32,
            ..TxSnapshot::default()
        };
        q.tp.lost += 2;
        q.bbr.skb_marked_lost(&mut q.tp, &tx);
        assert_eq!(q.bbr.v.inflight_hi, UNSET);
        assert_eq!(q.bbr.phase_name(), "probe_bw:up");
    }

    #[test]
    fn ecn_cuts_inflight_lo_by_ecn_factor_times_alpha_once_per_round() {
        // ecn_max_rtt_us = 0: ECN at any RTT (the path's 10 ms would exceed the 5 ms default).
        let params = Params {
            ecn_enable: true,
            ecn_max_rtt_us: 0,
            ..Params::default()
        };
        let mut p = Path::new(params, 5);
        p.tp.ecn_ok = true;
        p.tp.inflight = 1000;
        for _ in 0..5 {
            p.round(10);
        }
        p.tp.inflight = 80;
        p.round(10);
        assert!(p.bbr.v.ecn_eligible);
        // α started at 1.0 and decays by (1 − 1/16) per round without marks; read it now.
        p.tp.inflight = 90;
        p.ack(1000, 10, 100, 10_000, 10_000, false);
        assert_eq!(p.bbr.phase_name(), "probe_bw:cruise");
        let cwnd = p.tp.cwnd;
        let alpha = p.bbr.v.ecn_alpha;
        // A marked ACK, then the next round's start applies the ECN cut (alpha first updated
        // with this round's CE fraction: 10 of 100 delivered ⇒ ce_ratio = 25/256).
        p.tp.delivered_ce += 10;
        let rs = RateSample {
            prior_mstamp_us: Some(0),
            prior_delivered: 0,
            delivered: 100,
            interval_us: 10_000,
            rtt_us: 10_000,
            acked_sacked: 10,
            is_ece: true,
            prior_in_flight: 90,
            ..RateSample::default()
        };
        p.tp.now_ns += 1_000_000;
        p.tp.delivered += 10;
        p.bbr.cong_control(&mut p.tp, &rs);
        assert_eq!(p.bbr.v.inflight_lo, UNSET, "no cut before the round ends");
        let _ = cwnd;
        // At the round start α is first updated with the round's CE fraction, then the lower
        // bounds: inflight_lo starts from the cwnd before this ACK and is cut to
        // cwnd·(256 − α·85/256)/256 (bbr2_ecn_cut, ecn_factor 85 ≈ 1/3).
        let cwnd_before = p.tp.cwnd;
        p.round(10);
        let a = p.bbr.v.ecn_alpha;
        assert!(
            a <= alpha,
            "α decays without marks and rises only by 16/256 of the CE ratio"
        );
        let cut = 256 - ((a * 85) >> 8);
        assert_eq!(
            p.bbr.v.inflight_lo,
            ((cwnd_before as u64 * cut as u64) >> 8) as u32,
            "α {a}"
        );
        assert!(p.bbr.v.inflight_lo < cwnd_before);
    }

    #[test]
    fn probe_rtt_every_five_seconds_at_half_the_bdp_for_200_ms() {
        let mut p = in_probe_bw(11);
        let start = p.bbr.v.probe_rtt_min_stamp;
        let mut t_ms = 0;
        while p.bbr.mode != Mode::ProbeRtt {
            p.tp.inflight = 100;
            p.ack(10_000, 100, 100, 12_000, 12_000, true);
            t_ms += 10;
            assert!(t_ms <= 5_100);
        }
        let since = p.tp.jiffies() - start;
        assert!(since > 5_000 && since <= 5_010, "{since} ms");
        // cwnd = max(4, BDP/2): the two-slot filter still holds the 10 packets/ms of the last
        // cycle (sampled rounding up: ceil(10/1000·2^24) = 167 773) and min_rtt is still 10 ms
        // (its own window is 10 s): ceil(167 773·10 000·128/256 / 2^24) = ceil(50.0001) = 51.
        let want = p.bbr.probe_rtt_cwnd();
        assert_eq!(want, 51);
        assert_eq!(p.tp.cwnd, want);
        p.tp.inflight = want;
        p.ack(1000, 1, 1, 12_000, 12_000, false);
        let t0 = p.tp.jiffies();
        while p.bbr.mode == Mode::ProbeRtt {
            p.ack(10_000, 5, 50, 10_000, 10_000, true);
            assert!(p.tp.jiffies() - t0 <= 220);
        }
        let held = p.tp.jiffies() - t0;
        assert!(held > 200 && held <= 210, "{held}");
        assert_eq!(
            p.bbr.phase_name(),
            "probe_bw:cruise",
            "PROBE_RTT exits to CRUISE"
        );
    }

    #[test]
    fn params_validate_and_runs_are_deterministic() {
        assert!(Params::default().validate().is_ok());
        let p = Params {
            beta: 300,
            ..Params::default()
        };
        assert!(p.validate().unwrap_err().starts_with("beta:"));
        let waits: Vec<u32> = (0..5).map(|s| in_probe_bw(s).bbr.v.probe_wait_us).collect();
        let again: Vec<u32> = (0..5).map(|s| in_probe_bw(s).bbr.v.probe_wait_us).collect();
        assert_eq!(waits, again);
        assert!(
            waits.windows(2).any(|w| w[0] != w[1]),
            "the seed moves the probe wait"
        );
    }
}
