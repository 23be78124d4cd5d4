//! BBRv2 as google/bbr's v2alpha branch has it: net/ipv4/tcp_bbr2.c (google/bbr commit
//! 0487ade55081; ../shared/reference/cc.md §6; Cardwell et al., IETF 104–106 ICCRG "BBR v2"),
//! ported function by function with its fixed-point arithmetic (bw in packets/µs ≪ 24, gains
//! and fractions in 1/256).
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
//! - `tcp_jiffies32` is a 1 ms clock (HZ = 1000); `sk_max_pacing_rate` and `snd_cwnd_clamp`
//!   are unlimited; the random probe timing (`prandom_u32_max`) comes from the flow's seeded
//!   stream.
//! - The receiver-side `fast_ack_mode` (quick ACKs on CE) is not modelled: the simulated
//!   receiver runs the DCTCP ECE state machine, which already ACKs at every CE change.
//! - `undo_cwnd` is ported but the core never undoes (no DSACK/F-RTO in the simulator).
//! - `rs.is_ack_delayed` is the core's approximation of `FLAG_ACK_MAYBE_DELAYED`.
//! - Debug/ftrace output (`bbr_debug`) is replaced by the time-series probe.

use rand_core::Rng as _;
use serde::{Deserialize, Serialize};

use super::{CaEvent, CaState, CcProbe, CongestionControl, EcnUse, RateSample, TcpState, TxSnapshot};

pub const SOURCE: &str = "google/bbr v2alpha net/ipv4/tcp_bbr2.c (commit 0487ade55081)";

use super::bbr::{after, bdp_packets, before, BBR_SCALE, BBR_UNIT, BW_SCALE, BW_UNIT};

const CYCLE_LEN: usize = 8;
/// `GSO_MAX_SIZE` (64 KB) and `MAX_TCP_HEADER` (320 on x86-64) of `bbr_tso_segs_generic`.
const GSO_MAX_SIZE: u64 = 65_536;
const MAX_TCP_HEADER: u64 = 320;
/// `sk_pacing_shift` default.
const PACING_SHIFT: u32 = 10;
/// `bbr_pacing_margin_percent`.
const PACING_MARGIN_PERCENT: u64 = 1;
/// `bbr_ack_epoch_acked_reset_thresh`.
const ACK_EPOCH_ACKED_RESET_THRESH: u32 = 1 << 20;
/// Unset bounds (`~0U`).
const UNSET: u32 = u32::MAX;

/// `enum bbr_pacing_gain_phase`: the PROBE_BW phases (indices into `pacing_gain`).
const BW_PROBE_UP: usize = 0;
const BW_PROBE_DOWN: usize = 1;
const BW_PROBE_CRUISE: usize = 2;
const BW_PROBE_REFILL: usize = 3;

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
            pacing_gain: [BBR_UNIT * 5 / 4, BBR_UNIT * 3 / 4, BBR_UNIT, BBR_UNIT, BBR_UNIT, BBR_UNIT, BBR_UNIT, BBR_UNIT],
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
        let max = |name: &str, v: u64, hi: u64| if v > hi { Err(format!("{name}: {v} must be at most {hi} (the field width of struct bbr_params)")) } else { Ok(()) };
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
        max("probe_rtt_win_ms", self.probe_rtt_win_ms as u64, (self.min_rtt_win_sec as u64 * 1000).min(0x3FFF))?;
        max("full_bw_thresh", self.full_bw_thresh as u64, 0x3FF)?;
        max("full_bw_cnt", self.full_bw_cnt as u64, 7)?;
        max("cwnd_tso_budget", self.cwnd_tso_budget as u64, 1)?;
        max("extra_acked_gain", self.extra_acked_gain as u64, 0x7FF)?;
        max("extra_acked_win_rtts", self.extra_acked_win_rtts as u64, 0x1F)?;
        max("tso_rtt_shift", self.tso_rtt_shift as u64, 0xF)?;
        for (name, v) in [("beta", self.beta), ("ecn_alpha_gain", self.ecn_alpha_gain), ("ecn_factor", self.ecn_factor), ("ecn_thresh", self.ecn_thresh), ("loss_thresh", self.loss_thresh), ("inflight_headroom", self.inflight_headroom), ("bw_probe_max_rounds", self.bw_probe_max_rounds)] {
            max(name, v as u64, 0xFF)?;
        }
        max("ecn_alpha_init", self.ecn_alpha_init as u64, BBR_UNIT as u64)?;
        max("ecn_max_rtt_us", self.ecn_max_rtt_us as u64, 0x7FFFF)?;
        max("ecn_reprobe_gain", self.ecn_reprobe_gain as u64, 0x1FF)?;
        max("full_loss_cnt", self.full_loss_cnt as u64, 0xF)?;
        max("full_ecn_cnt", self.full_ecn_cnt as u64, 3)?;
        max("bw_probe_pif_gain", self.bw_probe_pif_gain as u64, 0x1FF)?;
        max("bw_probe_reno_gain", self.bw_probe_reno_gain as u64, 0x1FF)?;
        max("bw_probe_rand_rounds", self.bw_probe_rand_rounds as u64, 0xF)?;
        max("bw_probe_base_us", self.bw_probe_base_us as u64, (1 << 26) - 1)?;
        max("bw_probe_rand_us", self.bw_probe_rand_us as u64, (1 << 26) - 1)?;
        max("refill_add_inc", self.refill_add_inc as u64, 3)?;
        if self.cwnd_min_target == 0 {
            return Err("cwnd_min_target: must be at least 1".into());
        }
        Ok(())
    }
}

/// `enum bbr_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Startup,
    Drain,
    ProbeBw,
    ProbeRtt,
}

/// `enum bbr_ack_phase`: how the incoming ACKs relate to bandwidth probing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AckPhase {
    Init,
    Refilling,
    ProbeStarting,
    ProbeFeedback,
    ProbeStopping,
}

/// `struct bbr` (the v2 fields).
#[derive(Clone, Debug)]
pub struct Bbr2 {
    pub params: Params,
    rng: aqm::Rng,
    pub min_rtt_us: u32,
    min_rtt_stamp: u32,
    probe_rtt_done_stamp: u32,
    probe_rtt_min_us: u32,
    probe_rtt_min_stamp: u32,
    next_rtt_delivered: u32,
    cycle_mstamp: u64,
    pub mode: Mode,
    prev_ca_state: CaState,
    round_start: bool,
    bw_probe_up_rounds: u32,
    try_fast_path: bool,
    got_ok_bw_probe_sample: bool,
    idle_restart: bool,
    probe_rtt_round_done: bool,
    pub cycle_idx: usize,
    has_seen_rtt: bool,
    pub pacing_gain: u32,
    pub cwnd_gain: u32,
    pub full_bw_reached: bool,
    full_bw_cnt: u32,
    init_cwnd: u32,
    prior_cwnd: u32,
    full_bw: u32,
    ack_epoch_mstamp: u64,
    extra_acked: [u16; 2],
    ack_epoch_acked: u32,
    extra_acked_win_rtts: u32,
    extra_acked_win_idx: usize,
    startup_ecn_rounds: u32,
    loss_in_cycle: bool,
    ecn_in_cycle: bool,
    loss_round_delivered: u32,
    undo_bw_lo: u32,
    undo_inflight_lo: u32,
    undo_inflight_hi: u32,
    bw_latest: u32,
    pub bw_lo: u32,
    pub bw_hi: u32,
    max_bw: [u32; 2],
    inflight_latest: u32,
    pub inflight_lo: u32,
    pub inflight_hi: u32,
    bw_probe_up_cnt: u32,
    bw_probe_up_acks: u32,
    probe_wait_us: u32,
    pub ecn_eligible: bool,
    /// EWMA of delivered_ce/delivered, 0..256.
    pub ecn_alpha: u32,
    bw_probe_samples: bool,
    prev_probe_too_high: bool,
    stopped_risky_probe: bool,
    rounds_since_probe: u32,
    loss_round_start: bool,
    loss_in_round: bool,
    ecn_in_round: bool,
    ack_phase: AckPhase,
    loss_events_in_round: u32,
    alpha_last_delivered: u32,
    alpha_last_delivered_ce: u32,
}

/// `struct bbr_context`: per-ACK scratch.
#[derive(Clone, Copy, Debug, Default)]
struct Ctx {
    sample_bw: u32,
}

impl Bbr2 {
    pub fn new(params: Params, seed: u64) -> Self {
        let ecn_alpha = params.ecn_alpha_init;
        Bbr2 {
            params,
            rng: aqm::rng_from_seed(seed),
            min_rtt_us: u32::MAX,
            min_rtt_stamp: 0,
            probe_rtt_done_stamp: 0,
            probe_rtt_min_us: u32::MAX,
            probe_rtt_min_stamp: 0,
            next_rtt_delivered: 0,
            cycle_mstamp: 0,
            mode: Mode::Startup,
            prev_ca_state: CaState::Open,
            round_start: false,
            bw_probe_up_rounds: 0,
            try_fast_path: false,
            got_ok_bw_probe_sample: false,
            idle_restart: false,
            probe_rtt_round_done: false,
            cycle_idx: 0,
            has_seen_rtt: false,
            pacing_gain: BBR_UNIT,
            cwnd_gain: BBR_UNIT,
            full_bw_reached: false,
            full_bw_cnt: 0,
            init_cwnd: 10,
            prior_cwnd: 0,
            full_bw: 0,
            ack_epoch_mstamp: 0,
            extra_acked: [0; 2],
            ack_epoch_acked: 0,
            extra_acked_win_rtts: 0,
            extra_acked_win_idx: 0,
            startup_ecn_rounds: 0,
            loss_in_cycle: false,
            ecn_in_cycle: false,
            loss_round_delivered: 0,
            undo_bw_lo: 0,
            undo_inflight_lo: 0,
            undo_inflight_hi: 0,
            bw_latest: 0,
            bw_lo: UNSET,
            bw_hi: UNSET,
            max_bw: [0; 2],
            inflight_latest: 0,
            inflight_lo: UNSET,
            inflight_hi: UNSET,
            bw_probe_up_cnt: UNSET,
            bw_probe_up_acks: 0,
            probe_wait_us: 0,
            ecn_eligible: false,
            ecn_alpha,
            bw_probe_samples: false,
            prev_probe_too_high: false,
            stopped_risky_probe: false,
            rounds_since_probe: 0,
            loss_round_start: false,
            loss_in_round: false,
            ecn_in_round: false,
            ack_phase: AckPhase::Init,
            loss_events_in_round: 0,
            alpha_last_delivered: 0,
            alpha_last_delivered_ce: 0,
        }
    }

    /// `prandom_u32_max(n)`.
    fn random_below(&mut self, n: u32) -> u32 {
        ((self.rng.next_u32() as u64 * n as u64) >> 32) as u32
    }

    /// `bbr_max_bw`: max of the two filter slots.
    pub fn max_bw(&self) -> u32 {
        self.max_bw[0].max(self.max_bw[1])
    }

    /// `bbr_bw`: min(max_bw, bw_lo, bw_hi).
    pub fn bw(&self) -> u32 {
        self.max_bw().min(self.bw_lo.min(self.bw_hi))
    }

    fn extra_acked(&self) -> u32 {
        self.extra_acked[0].max(self.extra_acked[1]) as u32
    }

    /// `bbr_rate_bytes_per_sec`.
    fn rate_bytes_per_sec(tp: &TcpState, rate: u64, gain: u32, margin: u64) -> u64 {
        super::bbr::rate_bytes_per_sec(tp.mss, rate, gain, margin).max(1)
    }

    /// `bbr_init_pacing_rate_from_rtt`.
    fn init_pacing_rate_from_rtt(&mut self, tp: &mut TcpState) {
        let rtt_us = if tp.srtt_us > 0 {
            self.has_seen_rtt = true;
            tp.srtt_us.max(1)
        } else {
            1000
        };
        let bw = tp.cwnd as u64 * BW_UNIT / rtt_us as u64;
        tp.pacing_rate = Self::rate_bytes_per_sec(tp, bw, self.params.high_gain, PACING_MARGIN_PERCENT);
    }

    /// `bbr_set_pacing_rate`.
    fn set_pacing_rate(&mut self, tp: &mut TcpState, bw: u32, gain: u32) {
        let rate = Self::rate_bytes_per_sec(tp, bw as u64, gain, PACING_MARGIN_PERCENT);
        if !self.has_seen_rtt && tp.srtt_us > 0 {
            self.init_pacing_rate_from_rtt(tp);
        }
        if self.full_bw_reached || rate > tp.pacing_rate {
            tp.pacing_rate = rate;
        }
    }

    fn min_tso_segs_of(&self, tp: &TcpState) -> u32 {
        if tp.pacing_rate < self.params.min_tso_rate >> 3 {
            1
        } else {
            2
        }
    }

    /// `bbr_tso_segs_generic` with the device's 64 KB `gso_max_size`.
    fn tso_segs_goal(&self, tp: &TcpState) -> u32 {
        let mut bytes = tp.pacing_rate >> PACING_SHIFT;
        if self.params.tso_rtt_shift > 0 {
            let r = self.min_rtt_us >> self.params.tso_rtt_shift;
            if r < 32 {
                bytes += GSO_MAX_SIZE >> r;
            }
        }
        bytes = bytes.min(GSO_MAX_SIZE - 1 - MAX_TCP_HEADER);
        ((bytes / tp.mss as u64) as u32).max(self.min_tso_segs_of(tp))
    }

    /// `bbr_save_cwnd`.
    fn save_cwnd(&mut self, tp: &TcpState) {
        if self.prev_ca_state < CaState::Recovery && self.mode != Mode::ProbeRtt {
            self.prior_cwnd = tp.cwnd;
        } else {
            self.prior_cwnd = self.prior_cwnd.max(tp.cwnd);
        }
    }

    /// `bbr_bdp`.
    fn bdp(&self, bw: u32, gain: u32) -> u32 {
        if self.min_rtt_us == u32::MAX {
            return self.init_cwnd;
        }
        bdp_packets(bw, self.min_rtt_us, gain)
    }

    /// `bbr_quantization_budget`.
    fn quantization_budget(&self, tp: &TcpState, mut cwnd: u32) -> u32 {
        let tso_segs_goal = 3 * self.tso_segs_goal(tp);
        if self.params.cwnd_tso_budget == 1 {
            cwnd = cwnd.max(tso_segs_goal).max(self.params.cwnd_min_target);
        } else {
            cwnd += tso_segs_goal;
            cwnd = (cwnd + 1) & !1;
        }
        if self.mode == Mode::ProbeBw && self.cycle_idx == BW_PROBE_UP {
            cwnd += 2;
        }
        cwnd
    }

    /// `bbr_inflight`.
    fn inflight(&self, tp: &TcpState, bw: u32, gain: u32) -> u32 {
        self.quantization_budget(tp, self.bdp(bw, gain))
    }

    /// `bbr_packets_in_net_at_edt`.
    fn packets_in_net_at_edt(&self, tp: &TcpState, inflight_now: u32) -> u32 {
        let edt_ns = tp.wstamp_ns.max(tp.now_ns);
        let interval_us = (edt_ns - tp.now_ns) / 1000;
        let interval_delivered = ((self.bw() as u64 * interval_us) >> BW_SCALE) as u32;
        let mut inflight_at_edt = inflight_now;
        if self.pacing_gain > BBR_UNIT {
            inflight_at_edt += self.tso_segs_goal(tp);
        }
        inflight_at_edt.saturating_sub(interval_delivered)
    }

    /// `bbr_ack_aggregation_cwnd`.
    fn ack_aggregation_cwnd(&self) -> u32 {
        if self.params.extra_acked_gain == 0 || !(self.full_bw_reached || self.params.extra_acked_in_startup) {
            return 0;
        }
        let max_aggr_cwnd = (self.bw() as u64 * self.params.extra_acked_max_us as u64 / BW_UNIT) as u32;
        ((self.params.extra_acked_gain * self.extra_acked()) >> BBR_SCALE).min(max_aggr_cwnd)
    }

    /// `bbr_probe_rtt_cwnd`.
    fn probe_rtt_cwnd(&self) -> u32 {
        if self.params.probe_rtt_cwnd_gain == 0 {
            return self.params.cwnd_min_target;
        }
        self.params.cwnd_min_target.max(self.bdp(self.bw(), self.params.probe_rtt_cwnd_gain))
    }

    /// `bbr_set_cwnd` (v2: no packet conservation).
    fn set_cwnd(&mut self, tp: &mut TcpState, acked: u32, bw: u32, gain: u32) {
        let mut cwnd = tp.cwnd;
        if acked > 0 {
            let mut target_cwnd = self.bdp(bw, gain);
            target_cwnd += self.ack_aggregation_cwnd();
            target_cwnd = self.quantization_budget(tp, target_cwnd);
            self.try_fast_path = false;
            if self.full_bw_reached {
                cwnd += acked;
                if cwnd >= target_cwnd {
                    cwnd = target_cwnd;
                    self.try_fast_path = true;
                }
            } else if cwnd < target_cwnd || cwnd < 2 * self.init_cwnd {
                cwnd += acked;
            } else {
                self.try_fast_path = true;
            }
            if self.params.usage_based_cwnd {
                let max_probe = (2 * tp.max_packets_out).max(tp.cwnd);
                cwnd = cwnd.min(max_probe);
            }
            cwnd = cwnd.max(self.params.cwnd_min_target);
        }
        tp.cwnd = cwnd;
        if self.mode == Mode::ProbeRtt {
            tp.cwnd = tp.cwnd.min(self.probe_rtt_cwnd());
        }
    }

    /// `bbr_update_round_start`.
    fn update_round_start(&mut self, tp: &TcpState, rs: &RateSample) {
        self.round_start = false;
        if rs.interval_us > 0 && !before(rs.prior_delivered, self.next_rtt_delivered) {
            self.next_rtt_delivered = tp.delivered as u32;
            self.round_start = true;
        }
    }

    /// `bbr_calculate_bw_sample`: rounded up, to allow growth at low rates.
    fn calculate_bw_sample(rs: &RateSample, ctx: &mut Ctx) {
        if rs.interval_us > 0 && rs.delivered >= 0 {
            ctx.sample_bw = (rs.delivered as u64 * BW_UNIT).div_ceil(rs.interval_us as u64) as u32;
        }
    }

    /// `bbr_update_ack_aggregation` (window of 1 round in STARTUP with extra_acked_in_startup).
    fn update_ack_aggregation(&mut self, tp: &TcpState, rs: &RateSample) {
        if self.params.extra_acked_gain == 0 || rs.acked_sacked == 0 || rs.delivered < 0 || rs.interval_us <= 0 {
            return;
        }
        let mut thresh = self.params.extra_acked_win_rtts;
        if self.round_start {
            self.extra_acked_win_rtts = (self.extra_acked_win_rtts + 1).min(0x1F);
            if self.params.extra_acked_in_startup && !self.full_bw_reached {
                thresh = 1;
            }
            if self.extra_acked_win_rtts >= thresh {
                self.extra_acked_win_rtts = 0;
                self.extra_acked_win_idx ^= 1;
                self.extra_acked[self.extra_acked_win_idx] = 0;
            }
        }
        let epoch_us = (tp.delivered_mstamp_us as i64 - self.ack_epoch_mstamp as i64).max(0) as u64;
        let mut expected_acked = (self.bw() as u64 * epoch_us / BW_UNIT) as u32;
        if self.ack_epoch_acked <= expected_acked || self.ack_epoch_acked + rs.acked_sacked >= ACK_EPOCH_ACKED_RESET_THRESH {
            self.ack_epoch_acked = 0;
            self.ack_epoch_mstamp = tp.delivered_mstamp_us;
            expected_acked = 0;
        }
        self.ack_epoch_acked = (self.ack_epoch_acked + rs.acked_sacked).min(0xFFFFF);
        let extra = (self.ack_epoch_acked - expected_acked).min(tp.cwnd);
        if extra > self.extra_acked[self.extra_acked_win_idx] as u32 {
            self.extra_acked[self.extra_acked_win_idx] = extra.min(u16::MAX as u32) as u16;
        }
    }

    /// `bbr_check_full_bw_reached`.
    fn check_full_bw_reached(&mut self, rs: &RateSample) {
        if self.full_bw_reached || !self.round_start || rs.is_app_limited {
            return;
        }
        let bw_thresh = ((self.full_bw as u64 * self.params.full_bw_thresh as u64) >> BBR_SCALE) as u32;
        if self.max_bw() >= bw_thresh {
            self.full_bw = self.max_bw();
            self.full_bw_cnt = 0;
            return;
        }
        self.full_bw_cnt += 1;
        self.full_bw_reached = self.full_bw_cnt >= self.params.full_bw_cnt;
    }

    /// `bbr_check_drain` (shared part): true when DRAIN should end now.
    fn check_drain_v1(&mut self, tp: &mut TcpState) -> bool {
        if self.mode == Mode::Startup && self.full_bw_reached {
            self.mode = Mode::Drain;
            tp.ssthresh = self.inflight(tp, self.max_bw(), BBR_UNIT);
            self.reset_congestion_signals();
        }
        self.mode == Mode::Drain && self.packets_in_net_at_edt(tp, tp.inflight) <= self.inflight(tp, self.max_bw(), BBR_UNIT)
    }

    /// `bbr_check_probe_rtt_done`.
    fn check_probe_rtt_done(&mut self, tp: &mut TcpState) {
        if !(self.probe_rtt_done_stamp != 0 && after(tp.jiffies(), self.probe_rtt_done_stamp)) {
            return;
        }
        self.probe_rtt_min_stamp = tp.jiffies();
        tp.cwnd = tp.cwnd.max(self.prior_cwnd);
        self.exit_probe_rtt(tp);
    }

    /// `bbr_update_min_rtt` (v2: the probe_rtt_min filter times PROBE_RTT).
    fn update_min_rtt(&mut self, tp: &mut TcpState, rs: &RateSample) {
        let now = tp.jiffies();
        let probe_rtt_expired = after(now, self.probe_rtt_min_stamp.wrapping_add(self.params.probe_rtt_win_ms));
        if rs.rtt_us >= 0 && (rs.rtt_us <= self.probe_rtt_min_us as i64 || (probe_rtt_expired && !rs.is_ack_delayed)) {
            self.probe_rtt_min_us = rs.rtt_us as u32;
            self.probe_rtt_min_stamp = now;
        }
        let min_rtt_expired = after(now, self.min_rtt_stamp.wrapping_add(self.params.min_rtt_win_sec * 1000));
        if self.probe_rtt_min_us <= self.min_rtt_us || min_rtt_expired {
            self.min_rtt_us = self.probe_rtt_min_us;
            self.min_rtt_stamp = self.probe_rtt_min_stamp;
        }
        if self.params.probe_rtt_mode_ms > 0 && probe_rtt_expired && !self.idle_restart && self.mode != Mode::ProbeRtt {
            self.mode = Mode::ProbeRtt;
            self.save_cwnd(tp);
            self.probe_rtt_done_stamp = 0;
            self.ack_phase = AckPhase::ProbeStopping;
            self.next_rtt_delivered = tp.delivered as u32;
        }
        if self.mode == Mode::ProbeRtt {
            tp.app_limited = (tp.delivered + tp.inflight as u64).max(1);
            if self.probe_rtt_done_stamp == 0 && tp.inflight <= self.probe_rtt_cwnd() {
                self.probe_rtt_done_stamp = now.wrapping_add(self.params.probe_rtt_mode_ms).max(1);
                self.probe_rtt_round_done = false;
                self.next_rtt_delivered = tp.delivered as u32;
            } else if self.probe_rtt_done_stamp != 0 {
                if self.round_start {
                    self.probe_rtt_round_done = true;
                }
                if self.probe_rtt_round_done {
                    self.check_probe_rtt_done(tp);
                }
            }
        }
        if rs.delivered > 0 {
            self.idle_restart = false;
        }
    }

    /// `bbr_update_gains`.
    fn update_gains(&mut self) {
        let p = &self.params;
        (self.pacing_gain, self.cwnd_gain) = match self.mode {
            Mode::Startup => (p.high_gain, p.startup_cwnd_gain),
            Mode::Drain => (p.drain_gain, p.startup_cwnd_gain),
            Mode::ProbeBw => (p.pacing_gain[self.cycle_idx], p.cwnd_gain),
            Mode::ProbeRtt => (BBR_UNIT, BBR_UNIT),
        };
    }

    // --- functions new to v2 -------------------------------------------------------------

    /// `bbr2_take_max_bw_sample`.
    fn take_max_bw_sample(&mut self, bw: u32) {
        self.max_bw[1] = self.max_bw[1].max(bw);
    }

    /// `bbr2_advance_max_bw_filter`: keep the max of the last 1–2 cycles.
    fn advance_max_bw_filter(&mut self) {
        if self.max_bw[1] == 0 {
            return;
        }
        self.max_bw[0] = self.max_bw[1];
        self.max_bw[1] = 0;
    }

    /// `bbr2_target_inflight`.
    fn target_inflight(&self, tp: &TcpState) -> u32 {
        self.inflight(tp, self.bw(), BBR_UNIT).min(tp.cwnd)
    }

    /// `bbr2_is_probing_bandwidth`.
    fn is_probing_bandwidth(&self) -> bool {
        self.mode == Mode::Startup || (self.mode == Mode::ProbeBw && (self.cycle_idx == BW_PROBE_REFILL || self.cycle_idx == BW_PROBE_UP))
    }

    /// `bbr2_has_elapsed_in_phase`.
    fn has_elapsed_in_phase(&self, tp: &TcpState, interval_us: u32) -> bool {
        tp.now_us() as i64 - (self.cycle_mstamp + interval_us as u64) as i64 > 0
    }

    /// `bbr2_handle_queue_too_high_in_startup`.
    fn handle_queue_too_high_in_startup(&mut self, tp: &TcpState) {
        self.full_bw_reached = true;
        self.inflight_hi = self.inflight(tp, self.max_bw(), BBR_UNIT);
    }

    /// `bbr2_check_ecn_too_high_in_startup`.
    fn check_ecn_too_high_in_startup(&mut self, tp: &TcpState, ce_ratio: u32) {
        if self.full_bw_reached || !self.ecn_eligible || self.params.full_ecn_cnt == 0 || self.params.ecn_thresh == 0 {
            return;
        }
        if ce_ratio >= self.params.ecn_thresh {
            self.startup_ecn_rounds = (self.startup_ecn_rounds + 1).min(3);
        } else {
            self.startup_ecn_rounds = 0;
        }
        if self.startup_ecn_rounds >= self.params.full_ecn_cnt {
            self.handle_queue_too_high_in_startup(tp);
        }
    }

    /// `bbr2_update_ecn_alpha` (at each round start).
    fn update_ecn_alpha(&mut self, tp: &TcpState) {
        if self.params.ecn_factor == 0 {
            return;
        }
        let delivered = (tp.delivered as u32).wrapping_sub(self.alpha_last_delivered) as i32;
        let delivered_ce = (tp.delivered_ce as u32).wrapping_sub(self.alpha_last_delivered_ce) as i32;
        if delivered <= 0 || delivered_ce < 0 {
            return;
        }
        if !self.ecn_eligible && self.params.ecn_enable && tp.ecn_ok && (self.min_rtt_us <= self.params.ecn_max_rtt_us || self.params.ecn_max_rtt_us == 0) {
            self.ecn_eligible = true;
        }
        let ce_ratio = ((delivered_ce as u64) << BBR_SCALE) / delivered as u64;
        let gain = self.params.ecn_alpha_gain as u64;
        let mut alpha = ((BBR_UNIT as u64 - gain) * self.ecn_alpha as u64) >> BBR_SCALE;
        alpha += (gain * ce_ratio) >> BBR_SCALE;
        self.ecn_alpha = alpha.min(BBR_UNIT as u64) as u32;
        self.alpha_last_delivered = tp.delivered as u32;
        self.alpha_last_delivered_ce = tp.delivered_ce as u32;
        self.check_ecn_too_high_in_startup(tp, ce_ratio.min(u32::MAX as u64) as u32);
    }

    /// `bbr2_raise_inflight_hi_slope`: double the probing volume each round of UP.
    fn raise_inflight_hi_slope(&mut self, tp: &TcpState) {
        let growth_this_round = 1u32 << self.bw_probe_up_rounds;
        self.bw_probe_up_rounds = (self.bw_probe_up_rounds + 1).min(30);
        self.bw_probe_up_cnt = (tp.cwnd / growth_this_round).max(1);
    }

    /// `bbr2_probe_inflight_hi_upward`.
    fn probe_inflight_hi_upward(&mut self, tp: &TcpState, rs: &RateSample) {
        if !tp.is_cwnd_limited || tp.cwnd < self.inflight_hi {
            self.bw_probe_up_acks = 0;
            return;
        }
        self.bw_probe_up_acks += rs.acked_sacked;
        if self.bw_probe_up_acks >= self.bw_probe_up_cnt {
            let delta = self.bw_probe_up_acks / self.bw_probe_up_cnt;
            self.bw_probe_up_acks -= delta * self.bw_probe_up_cnt;
            self.inflight_hi = self.inflight_hi.saturating_add(delta);
        }
        if self.round_start {
            self.raise_inflight_hi_slope(tp);
        }
    }

    /// `bbr2_is_inflight_too_high`: loss > loss_thresh of tx_in_flight, or CE ≥ ecn_thresh of
    /// delivered (when ECN eligible).
    pub fn is_inflight_too_high(&self, rs: &RateSample) -> bool {
        if rs.lost > 0 && rs.tx_in_flight > 0 {
            let loss_thresh = ((rs.tx_in_flight as u64 * self.params.loss_thresh as u64) >> BBR_SCALE) as u32;
            if rs.lost > loss_thresh {
                return true;
            }
        }
        if rs.delivered_ce > 0 && rs.delivered > 0 && self.ecn_eligible && self.params.ecn_thresh > 0 {
            let ecn_thresh = ((rs.delivered as u64 * self.params.ecn_thresh as u64) >> BBR_SCALE) as i64;
            if rs.delivered_ce >= ecn_thresh {
                return true;
            }
        }
        false
    }

    /// `bbr2_inflight_hi_from_lost_skb`: the inflight at which the loss rate crossed
    /// loss_thresh within this (one-segment) skb.
    fn inflight_hi_from_lost_skb(&self, rs: &RateSample) -> u32 {
        let loss_thresh = self.params.loss_thresh as u64;
        let pcount = 1i64;
        let inflight_prev = rs.tx_in_flight as i64 - pcount;
        if inflight_prev < 0 {
            return UNSET;
        }
        let lost_prev = rs.lost as i64 - pcount;
        if lost_prev < 0 {
            return UNSET;
        }
        let loss_budget = ((inflight_prev as u64 * loss_thresh + BBR_UNIT as u64 - 1) >> BBR_SCALE) as i64;
        let lost_prefix = if lost_prev >= loss_budget {
            0
        } else {
            (((loss_budget - lost_prev) as u64) << BBR_SCALE) / (BBR_UNIT as u64 - loss_thresh)
        };
        (inflight_prev as u64 + lost_prefix) as u32
    }

    /// `bbr2_inflight_with_headroom`.
    fn inflight_with_headroom(&self) -> u32 {
        if self.inflight_hi == UNSET {
            return UNSET;
        }
        let headroom = (((self.inflight_hi as u64 * self.params.inflight_headroom as u64) >> BBR_SCALE) as u32).max(1);
        ((self.inflight_hi as i64 - headroom as i64).max(self.params.cwnd_min_target as i64)) as u32
    }

    /// `bbr2_bound_cwnd_for_inflight_model`.
    fn bound_cwnd_for_inflight_model(&self, tp: &mut TcpState) {
        let mut cap = UNSET;
        if self.mode == Mode::ProbeBw && self.cycle_idx != BW_PROBE_CRUISE {
            cap = self.inflight_hi;
        } else if self.mode == Mode::ProbeRtt || (self.mode == Mode::ProbeBw && self.cycle_idx == BW_PROBE_CRUISE) {
            cap = self.inflight_with_headroom();
        }
        cap = cap.min(self.inflight_lo);
        cap = cap.max(self.params.cwnd_min_target);
        tp.cwnd = tp.cwnd.min(cap);
    }

    /// `bbr2_ecn_cut`: 1 − α·ecn_factor, in 1/256.
    fn ecn_cut(&self) -> u32 {
        BBR_UNIT - ((self.ecn_alpha * self.params.ecn_factor) >> BBR_SCALE)
    }

    /// `bbr2_adapt_lower_bounds`: once per round while not probing.
    fn adapt_lower_bounds(&mut self, tp: &TcpState) {
        if self.is_probing_bandwidth() {
            return;
        }
        let mut ecn_inflight_lo = UNSET;
        let mut ecn_bw_lo = UNSET;
        if self.ecn_in_round && self.ecn_eligible && self.params.ecn_factor > 0 {
            let ecn_cut = self.ecn_cut() as u64;
            if self.params.ecn_bw_lo && self.bw_lo == UNSET {
                self.bw_lo = self.max_bw();
            }
            if self.inflight_lo == UNSET {
                self.inflight_lo = tp.cwnd;
            }
            ecn_inflight_lo = ((self.inflight_lo as u64 * ecn_cut) >> BBR_SCALE) as u32;
            if self.params.ecn_bw_lo {
                ecn_bw_lo = ((self.bw_lo as u64 * ecn_cut) >> BBR_SCALE) as u32;
            }
        }
        if self.loss_in_round {
            if self.bw_lo == UNSET {
                self.bw_lo = self.max_bw();
            }
            if self.inflight_lo == UNSET {
                self.inflight_lo = tp.cwnd;
            }
            let keep = (BBR_UNIT - self.params.beta) as u64;
            self.bw_lo = self.bw_latest.max(((self.bw_lo as u64 * keep) >> BBR_SCALE) as u32);
            self.inflight_lo = self.inflight_latest.max(((self.inflight_lo as u64 * keep) >> BBR_SCALE) as u32);
        }
        self.inflight_lo = self.inflight_lo.min(ecn_inflight_lo);
        if self.params.ecn_bw_lo {
            self.bw_lo = self.bw_lo.min(ecn_bw_lo);
        }
    }

    /// `bbr2_reset_lower_bounds`.
    fn reset_lower_bounds(&mut self) {
        self.bw_lo = UNSET;
        self.inflight_lo = UNSET;
    }

    /// `bbr2_reset_congestion_signals`.
    fn reset_congestion_signals(&mut self) {
        self.loss_in_round = false;
        self.ecn_in_round = false;
        self.loss_in_cycle = false;
        self.ecn_in_cycle = false;
        self.bw_latest = 0;
        self.inflight_latest = 0;
    }

    /// `bbr2_update_congestion_signals`.
    fn update_congestion_signals(&mut self, tp: &TcpState, rs: &RateSample, ctx: &Ctx) {
        self.loss_round_start = false;
        if rs.interval_us <= 0 || rs.acked_sacked == 0 {
            return;
        }
        let bw = ctx.sample_bw;
        if !rs.is_app_limited || bw >= self.max_bw() {
            self.take_max_bw_sample(bw);
        }
        self.loss_in_round |= rs.losses > 0;
        self.bw_latest = self.bw_latest.max(ctx.sample_bw);
        self.inflight_latest = self.inflight_latest.max(rs.delivered.max(0) as u32);
        if before(rs.prior_delivered, self.loss_round_delivered) {
            return;
        }
        self.loss_round_delivered = tp.delivered as u32;
        self.loss_round_start = true;
        self.adapt_lower_bounds(tp);
        self.loss_in_round = false;
        self.ecn_in_round = false;
        self.bw_latest = ctx.sample_bw;
        self.inflight_latest = rs.delivered.max(0) as u32;
    }

    /// `bbr2_is_reno_coexistence_probe_time`.
    fn is_reno_coexistence_probe_time(&self, tp: &TcpState) -> bool {
        let mut rounds = self.params.bw_probe_max_rounds;
        if self.params.bw_probe_reno_gain > 0 {
            let inflight = self.target_inflight(tp);
            let reno_rounds = ((inflight as u64 * self.params.bw_probe_reno_gain as u64) >> BBR_SCALE) as u32;
            rounds = rounds.min(reno_rounds);
        }
        self.rounds_since_probe >= rounds
    }

    /// `bbr2_pick_probe_wait`.
    fn pick_probe_wait(&mut self) {
        self.rounds_since_probe = self.random_below(self.params.bw_probe_rand_rounds);
        self.probe_wait_us = self.params.bw_probe_base_us + self.random_below(self.params.bw_probe_rand_us);
    }

    fn set_cycle_idx(&mut self, idx: usize) {
        self.cycle_idx = idx;
        self.try_fast_path = false;
    }

    /// `bbr2_start_bw_probe_refill`.
    fn start_bw_probe_refill(&mut self, tp: &TcpState, bw_probe_up_rounds: u32) {
        self.reset_lower_bounds();
        if self.inflight_hi != UNSET {
            self.inflight_hi = self.inflight_hi.saturating_add(self.params.refill_add_inc);
        }
        self.bw_probe_up_rounds = bw_probe_up_rounds;
        self.bw_probe_up_acks = 0;
        self.stopped_risky_probe = false;
        self.got_ok_bw_probe_sample = false;
        self.ack_phase = AckPhase::Refilling;
        self.next_rtt_delivered = tp.delivered as u32;
        self.set_cycle_idx(BW_PROBE_REFILL);
    }

    /// `bbr2_start_bw_probe_up`.
    fn start_bw_probe_up(&mut self, tp: &TcpState) {
        self.ack_phase = AckPhase::ProbeStarting;
        self.next_rtt_delivered = tp.delivered as u32;
        self.cycle_mstamp = tp.now_us();
        self.set_cycle_idx(BW_PROBE_UP);
        self.raise_inflight_hi_slope(tp);
    }

    /// `bbr2_start_bw_probe_down`.
    fn start_bw_probe_down(&mut self, tp: &TcpState) {
        self.reset_congestion_signals();
        self.bw_probe_up_cnt = UNSET;
        self.pick_probe_wait();
        self.cycle_mstamp = tp.now_us();
        self.ack_phase = AckPhase::ProbeStopping;
        self.next_rtt_delivered = tp.delivered as u32;
        self.set_cycle_idx(BW_PROBE_DOWN);
    }

    /// `bbr2_start_bw_probe_cruise`.
    fn start_bw_probe_cruise(&mut self) {
        if self.inflight_lo != UNSET {
            self.inflight_lo = self.inflight_lo.min(self.inflight_hi);
        }
        self.set_cycle_idx(BW_PROBE_CRUISE);
    }

    /// `bbr2_handle_inflight_too_high_via_ecn`.
    fn handle_inflight_too_high_via_ecn(&mut self) {
        if self.params.ecn_bw_hi && self.ecn_eligible && !self.got_ok_bw_probe_sample {
            let ecn_cut = self.ecn_cut() as u64;
            if self.bw_hi == UNSET {
                self.bw_hi = self.max_bw();
            }
            self.bw_hi = ((self.bw_hi as u64 * ecn_cut) >> BBR_SCALE) as u32;
        }
    }

    /// `bbr2_handle_inflight_too_high`: once per probe, cut inflight_hi and go DOWN.
    fn handle_inflight_too_high(&mut self, tp: &TcpState, rs: &RateSample) {
        self.prev_probe_too_high = true;
        self.bw_probe_samples = false;
        if !rs.is_app_limited {
            let floor = ((self.target_inflight(tp) as u64 * (BBR_UNIT - self.params.beta) as u64) >> BBR_SCALE) as u32;
            self.inflight_hi = rs.tx_in_flight.max(floor);
            self.handle_inflight_too_high_via_ecn();
        }
        if self.mode == Mode::ProbeBw && self.cycle_idx == BW_PROBE_UP {
            self.start_bw_probe_down(tp);
        }
    }

    /// `bbr2_adapt_upper_bounds`: returns whether it decided a state transition.
    fn adapt_upper_bounds(&mut self, tp: &TcpState, rs: &RateSample, ctx: &Ctx) -> bool {
        if self.ack_phase == AckPhase::ProbeStarting && self.round_start {
            self.ack_phase = AckPhase::ProbeFeedback;
        }
        if self.ack_phase == AckPhase::ProbeStopping && self.round_start {
            self.bw_probe_samples = false;
            self.ack_phase = AckPhase::Init;
            if self.mode == Mode::ProbeBw && !rs.is_app_limited {
                self.advance_max_bw_filter();
            }
            if self.mode == Mode::ProbeBw && self.stopped_risky_probe && !self.prev_probe_too_high {
                self.start_bw_probe_refill(tp, 0);
                return true;
            }
        }
        if self.is_inflight_too_high(rs) {
            if self.bw_probe_samples {
                self.handle_inflight_too_high(tp, rs);
            }
        } else {
            self.got_ok_bw_probe_sample |= self.bw_probe_samples;
            if self.inflight_hi == UNSET && self.bw_hi == UNSET {
                return false;
            }
            if rs.tx_in_flight > self.inflight_hi {
                self.inflight_hi = rs.tx_in_flight;
            }
            if ctx.sample_bw > self.bw_hi {
                self.bw_hi = ctx.sample_bw;
            }
            if self.mode == Mode::ProbeBw && self.cycle_idx == BW_PROBE_UP {
                self.probe_inflight_hi_upward(tp, rs);
            }
        }
        false
    }

    /// `bbr2_check_time_to_probe_bw`.
    fn check_time_to_probe_bw(&mut self, tp: &TcpState) -> bool {
        if self.params.ecn_reprobe_gain > 0 && self.ecn_eligible && self.ecn_in_cycle && !self.loss_in_cycle && tp.ca_state == CaState::Open {
            let x = (self.inflight_hi as u64 * self.params.ecn_reprobe_gain as u64) >> BBR_SCALE;
            let n = if x == 0 { 0 } else { 63 - x.leading_zeros() };
            self.start_bw_probe_refill(tp, n);
            return true;
        }
        if self.has_elapsed_in_phase(tp, self.probe_wait_us) || self.is_reno_coexistence_probe_time(tp) {
            self.start_bw_probe_refill(tp, 0);
            return true;
        }
        false
    }

    /// `bbr2_check_time_to_cruise`.
    fn check_time_to_cruise(&self, tp: &TcpState, inflight: u32, bw: u32) -> bool {
        if inflight > self.inflight_with_headroom() {
            return false;
        }
        let is_under_bdp = inflight <= self.inflight(tp, bw, BBR_UNIT);
        if self.params.drain_to_target {
            return is_under_bdp;
        }
        is_under_bdp || self.has_elapsed_in_phase(tp, self.min_rtt_us)
    }

    /// `bbr2_update_cycle_phase`: the PROBE_BW state machine.
    fn update_cycle_phase(&mut self, tp: &TcpState, rs: &RateSample, ctx: &Ctx) {
        if !self.full_bw_reached {
            return;
        }
        if self.adapt_upper_bounds(tp, rs, ctx) {
            return;
        }
        if self.mode != Mode::ProbeBw {
            return;
        }
        let inflight = self.packets_in_net_at_edt(tp, rs.prior_in_flight);
        let bw = self.max_bw();
        match self.cycle_idx {
            BW_PROBE_CRUISE => {
                self.check_time_to_probe_bw(tp);
            }
            BW_PROBE_REFILL => {
                if self.round_start {
                    self.bw_probe_samples = true;
                    self.start_bw_probe_up(tp);
                }
            }
            BW_PROBE_UP => {
                let mut is_risky = false;
                let mut is_queuing = false;
                if self.prev_probe_too_high && inflight >= self.inflight_hi {
                    self.stopped_risky_probe = true;
                    is_risky = true;
                } else if self.has_elapsed_in_phase(tp, self.min_rtt_us) && inflight >= self.inflight(tp, bw, self.params.bw_probe_pif_gain) {
                    is_queuing = true;
                }
                if is_risky || is_queuing {
                    self.prev_probe_too_high = false;
                    self.start_bw_probe_down(tp);
                }
            }
            BW_PROBE_DOWN => {
                if self.check_time_to_probe_bw(tp) {
                    return;
                }
                if self.check_time_to_cruise(tp, inflight, bw) {
                    self.start_bw_probe_cruise();
                }
            }
            _ => unreachable!("cycle_idx is one of the four phases"),
        }
    }

    /// `bbr2_exit_probe_rtt`.
    fn exit_probe_rtt(&mut self, tp: &TcpState) {
        self.reset_lower_bounds();
        if self.full_bw_reached {
            self.mode = Mode::ProbeBw;
            self.start_bw_probe_down(tp);
            self.start_bw_probe_cruise();
        } else {
            self.mode = Mode::Startup;
        }
    }

    /// `bbr2_check_loss_too_high_in_startup`.
    fn check_loss_too_high_in_startup(&mut self, tp: &TcpState, rs: &RateSample) {
        if self.full_bw_reached {
            return;
        }
        if rs.losses > 0 && self.loss_events_in_round < 0xF {
            self.loss_events_in_round += 1;
        }
        if self.params.full_loss_cnt > 0
            && self.loss_round_start
            && tp.ca_state == CaState::Recovery
            && self.loss_events_in_round >= self.params.full_loss_cnt
            && self.is_inflight_too_high(rs)
        {
            self.handle_queue_too_high_in_startup(tp);
            return;
        }
        if self.loss_round_start {
            self.loss_events_in_round = 0;
        }
    }

    /// `bbr2_check_drain`.
    fn check_drain(&mut self, tp: &mut TcpState) {
        if self.check_drain_v1(tp) {
            self.mode = Mode::ProbeBw;
            self.start_bw_probe_down(tp);
        }
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

    /// `bbr2_fast_path`: skip the model while app-limited and quiet.
    fn fast_path(&mut self, tp: &mut TcpState, rs: &RateSample, ctx: &Ctx, update_model: &mut bool) -> bool {
        if self.params.fast_path && self.try_fast_path && rs.is_app_limited && ctx.sample_bw < self.max_bw() && !self.loss_in_round && !self.ecn_in_round {
            let prev_mode = self.mode;
            let prev_min_rtt_us = self.min_rtt_us;
            self.check_drain(tp);
            self.update_cycle_phase(tp, rs, ctx);
            self.update_min_rtt(tp, rs);
            if self.mode == prev_mode && self.min_rtt_us == prev_min_rtt_us && self.try_fast_path {
                return true;
            }
            *update_model = false;
        }
        false
    }

    /// The phase name for the time series (`bbr2_get_phase`).
    pub fn phase_name(&self) -> &'static str {
        match self.mode {
            Mode::Startup => "startup",
            Mode::Drain => "drain",
            Mode::ProbeRtt => "probe_rtt",
            Mode::ProbeBw => match self.cycle_idx {
                BW_PROBE_UP => "probe_bw:up",
                BW_PROBE_DOWN => "probe_bw:down",
                BW_PROBE_CRUISE => "probe_bw:cruise",
                _ => "probe_bw:refill",
            },
        }
    }
}

impl CongestionControl for Bbr2 {
    fn name(&self) -> &'static str {
        "bbr2"
    }

    /// `bbr2_init` (with the shared `bbr_init`).
    fn init(&mut self, tp: &mut TcpState) {
        self.init_cwnd = tp.cwnd.min(0x7F);
        self.prior_cwnd = tp.prior_cwnd;
        tp.ssthresh = super::TCP_INFINITE_SSTHRESH;
        self.next_rtt_delivered = 0;
        self.prev_ca_state = CaState::Open;
        self.probe_rtt_done_stamp = 0;
        self.probe_rtt_round_done = false;
        self.probe_rtt_min_us = tp.min_rtt_us;
        self.probe_rtt_min_stamp = tp.jiffies();
        self.min_rtt_us = tp.min_rtt_us;
        self.min_rtt_stamp = tp.jiffies();
        self.has_seen_rtt = false;
        self.init_pacing_rate_from_rtt(tp);
        self.round_start = false;
        self.idle_restart = false;
        self.full_bw_reached = false;
        self.full_bw = 0;
        self.full_bw_cnt = 0;
        self.cycle_mstamp = 0;
        self.cycle_idx = 0;
        self.mode = Mode::Startup;
        self.ack_epoch_mstamp = tp.now_us();
        self.ack_epoch_acked = 0;
        self.extra_acked_win_rtts = 0;
        self.extra_acked_win_idx = 0;
        self.extra_acked = [0; 2];
        self.try_fast_path = false;
        // v2 state.
        self.loss_round_delivered = (tp.delivered as u32).wrapping_add(1);
        self.loss_round_start = false;
        self.undo_bw_lo = 0;
        self.undo_inflight_lo = 0;
        self.undo_inflight_hi = 0;
        self.loss_events_in_round = 0;
        self.startup_ecn_rounds = 0;
        self.reset_congestion_signals();
        self.bw_lo = UNSET;
        self.bw_hi = UNSET;
        self.max_bw = [0; 2];
        self.inflight_lo = UNSET;
        self.inflight_hi = UNSET;
        self.bw_probe_up_cnt = UNSET;
        self.bw_probe_up_acks = 0;
        self.bw_probe_up_rounds = 0;
        self.probe_wait_us = 0;
        self.stopped_risky_probe = false;
        self.got_ok_bw_probe_sample = false;
        self.ack_phase = AckPhase::Init;
        self.rounds_since_probe = 0;
        self.bw_probe_samples = false;
        self.prev_probe_too_high = false;
        self.ecn_eligible = false;
        self.ecn_alpha = self.params.ecn_alpha_init;
        self.alpha_last_delivered = 0;
        self.alpha_last_delivered_ce = 0;
        self.update_gains();
    }

    /// `bbr2_ssthresh`: save cwnd and the bounds for undo.
    fn ssthresh(&mut self, tp: &TcpState) -> u32 {
        self.save_cwnd(tp);
        self.undo_bw_lo = self.bw_lo;
        self.undo_inflight_lo = self.inflight_lo;
        self.undo_inflight_hi = self.inflight_hi;
        tp.ssthresh
    }

    /// Never called: BBRv2 has `cong_control`.
    fn cong_avoid(&mut self, _tp: &mut TcpState, _acked: u32) {}

    /// `bbr2_set_state`.
    fn set_state(&mut self, tp: &mut TcpState, new_state: CaState) {
        if new_state == CaState::Loss {
            self.prev_ca_state = CaState::Loss;
            self.full_bw = 0;
            if !self.is_probing_bandwidth() && self.inflight_lo == UNSET {
                self.inflight_lo = self.prior_cwnd;
            }
        } else if self.prev_ca_state == CaState::Loss && new_state != CaState::Loss {
            tp.cwnd = tp.cwnd.max(self.prior_cwnd);
            self.try_fast_path = false;
        }
    }

    /// `bbr_cwnd_event` (the ECN events are the receiver's, handled by the simulated receiver).
    fn cwnd_event(&mut self, tp: &mut TcpState, ev: CaEvent) {
        if ev == CaEvent::TxStart && tp.app_limited != 0 {
            self.idle_restart = true;
            self.ack_epoch_mstamp = tp.now_us();
            self.ack_epoch_acked = 0;
            if self.mode == Mode::ProbeBw {
                let bw = self.bw();
                self.set_pacing_rate(tp, bw, BBR_UNIT);
            } else if self.mode == Mode::ProbeRtt {
                self.check_probe_rtt_done(tp);
            }
        }
    }

    /// `bbr2_undo_cwnd`.
    fn undo_cwnd(&mut self, tp: &TcpState) -> u32 {
        self.full_bw = 0;
        self.full_bw_cnt = 0;
        self.loss_in_round = false;
        if !self.params.undo {
            return tp.cwnd;
        }
        self.bw_lo = self.bw_lo.max(self.undo_bw_lo);
        self.inflight_lo = self.inflight_lo.max(self.undo_inflight_lo);
        self.inflight_hi = self.inflight_hi.max(self.undo_inflight_hi);
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
            self.rounds_since_probe = (self.rounds_since_probe + 1).min(0xFF);
            self.update_ecn_alpha(tp);
        }
        self.ecn_in_round |= rs.is_ece;
        Self::calculate_bw_sample(rs, &mut ctx);
        if !self.fast_path(tp, rs, &ctx, &mut update_model) {
            if update_model {
                self.update_model(tp, rs, &ctx);
            }
            self.update_gains();
            let bw = self.bw();
            self.set_pacing_rate(tp, bw, self.pacing_gain);
            self.set_cwnd(tp, rs.acked_sacked, bw, self.cwnd_gain);
            self.bound_cwnd_for_inflight_model(tp);
        }
        self.prev_ca_state = tp.ca_state;
        self.loss_in_cycle |= rs.lost > 0;
        self.ecn_in_cycle |= rs.delivered_ce > 0;
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

    fn min_tso_segs(&self, tp: &TcpState) -> u32 {
        self.min_tso_segs_of(tp)
    }

    /// `bbr_tso_segs`.
    fn tso_segs(&self, tp: &TcpState) -> Option<u32> {
        Some(self.tso_segs_goal(tp))
    }

    /// `bbr2_skb_marked_lost`: react at the first lost packet that pushes a probe's loss rate
    /// over loss_thresh.
    fn skb_marked_lost(&mut self, tp: &mut TcpState, tx: &TxSnapshot) {
        if !self.loss_in_round {
            self.loss_round_delivered = tp.delivered as u32;
        }
        self.loss_in_round = true;
        self.loss_in_cycle = true;
        if !self.bw_probe_samples {
            return;
        }
        let mut rs = RateSample {
            tx_in_flight: tx.in_flight,
            lost: (tp.lost as u32).wrapping_sub(tx.lost),
            delivered_ce: (tp.delivered_ce as u32).wrapping_sub(tx.delivered_ce) as i64,
            delivered: 0,
            is_app_limited: tx.is_app_limited,
            ..RateSample::default()
        };
        if self.is_inflight_too_high(&rs) {
            rs.tx_in_flight = self.inflight_hi_from_lost_skb(&rs);
            self.handle_inflight_too_high(tp, &rs);
        }
    }

    fn probe(&self, tp: &TcpState) -> CcProbe {
        let bw_bps = self.bw() as f64 * tp.mss as f64 * 8.0 * 1e6 / BW_UNIT as f64;
        CcProbe {
            phase: Some(self.phase_name()),
            bw_bps: Some(bw_bps),
            inflight_hi: (self.inflight_hi != UNSET).then_some(self.inflight_hi),
            alpha: self.ecn_eligible.then_some(self.ecn_alpha as f64 / BBR_UNIT as f64),
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
        fn ack(&mut self, dt_us: u64, acked: u32, delivered: i64, interval_us: i64, rtt_us: i64, round: bool) {
            self.tp.now_ns += dt_us * 1000;
            // A round-starting sample was sent at or after the round's end mark; any other one
            // before it.
            let prior = if round { (self.tp.delivered as u32).max(self.bbr.next_rtt_delivered) } else { self.bbr.next_rtt_delivered.wrapping_sub(1) };
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
        let wait = p.bbr.probe_wait_us as u64;
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
        assert!(p.bbr.bw_probe_samples);
        assert_eq!(p.bbr.inflight_hi, UNSET);
        // A packet sent with 150 in flight is marked lost; since it was sent, 4 packets were
        // lost (3 before it). loss_thresh = 5/256: 150·5/256 = 2.93 < 4: too high.
        // inflight_hi_from_lost_skb: inflight_prev = 149, lost_prev = 3,
        // loss_budget = ceil(149·5/256) = ceil(2.91) = 3 ≤ lost_prev ⇒ prefix 0 ⇒ 149.
        // The cut: max(149, target_inflight·(1 − 77/256)); target = min(BDP + budget, cwnd).
        let target = p.bbr.target_inflight(&p.tp);
        let tx = TxSnapshot { in_flight: 150, lost: p.tp.lost as u32, ..TxSnapshot::default() };
        p.tp.lost += 4;
        p.bbr.skb_marked_lost(&mut p.tp, &tx);
        let floor = (target as u64 * (256 - 77) as u64 >> 8) as u32;
        assert_eq!(p.bbr.inflight_hi, 149.max(floor), "target {target}");
        assert_eq!(p.bbr.phase_name(), "probe_bw:down", "UP ends at once");
        assert!(!p.bbr.bw_probe_samples, "one reaction per probe");
        // Below the threshold (2 lost of 150: 2 ≤ 2.93) nothing is cut.
        let mut q = in_probe_bw(3);
        q.bbr.start_bw_probe_refill(&q.tp, 0);
        q.round(10);
        let tx = TxSnapshot { in_flight: 150, lost: q.tp.lost as u32, ..TxSnapshot::default() };
        q.tp.lost += 2;
        q.bbr.skb_marked_lost(&mut q.tp, &tx);
        assert_eq!(q.bbr.inflight_hi, UNSET);
        assert_eq!(q.bbr.phase_name(), "probe_bw:up");
    }

    #[test]
    fn ecn_cuts_inflight_lo_by_ecn_factor_times_alpha_once_per_round() {
        // ecn_max_rtt_us = 0: ECN at any RTT (the path's 10 ms would exceed the 5 ms default).
        let params = Params { ecn_enable: true, ecn_max_rtt_us: 0, ..Params::default() };
        let mut p = Path::new(params, 5);
        p.tp.ecn_ok = true;
        p.tp.inflight = 1000;
        for _ in 0..5 {
            p.round(10);
        }
        p.tp.inflight = 80;
        p.round(10);
        assert!(p.bbr.ecn_eligible);
        // α started at 1.0 and decays by (1 − 1/16) per round without marks; read it now.
        p.tp.inflight = 90;
        p.ack(1000, 10, 100, 10_000, 10_000, false);
        assert_eq!(p.bbr.phase_name(), "probe_bw:cruise");
        let cwnd = p.tp.cwnd;
        let alpha = p.bbr.ecn_alpha;
        // A marked ACK, then the next round's start applies the ECN cut (alpha first updated
        // with this round's CE fraction: 10 of 100 delivered ⇒ ce_ratio = 25/256).
        p.tp.delivered_ce += 10;
        let rs = RateSample { prior_mstamp_us: Some(0), prior_delivered: 0, delivered: 100, interval_us: 10_000, rtt_us: 10_000, acked_sacked: 10, is_ece: true, prior_in_flight: 90, ..RateSample::default() };
        p.tp.now_ns += 1_000_000;
        p.tp.delivered += 10;
        p.bbr.cong_control(&mut p.tp, &rs);
        assert_eq!(p.bbr.inflight_lo, UNSET, "no cut before the round ends");
        let _ = cwnd;
        // At the round start α is first updated with the round's CE fraction, then the lower
        // bounds: inflight_lo starts from the cwnd before this ACK and is cut to
        // cwnd·(256 − α·85/256)/256 (bbr2_ecn_cut, ecn_factor 85 ≈ 1/3).
        let cwnd_before = p.tp.cwnd;
        p.round(10);
        let a = p.bbr.ecn_alpha;
        assert!(a <= alpha, "α decays without marks and rises only by 16/256 of the CE ratio");
        let cut = 256 - (a * 85 >> 8);
        assert_eq!(p.bbr.inflight_lo, (cwnd_before as u64 * cut as u64 >> 8) as u32, "α {a}");
        assert!(p.bbr.inflight_lo < cwnd_before);
    }

    #[test]
    fn probe_rtt_every_five_seconds_at_half_the_bdp_for_200_ms() {
        let mut p = in_probe_bw(11);
        let start = p.bbr.probe_rtt_min_stamp;
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
        assert_eq!(p.bbr.phase_name(), "probe_bw:cruise", "PROBE_RTT exits to CRUISE");
    }

    #[test]
    fn params_validate_and_runs_are_deterministic() {
        assert!(Params::default().validate().is_ok());
        let p = Params { beta: 300, ..Params::default() };
        assert!(p.validate().unwrap_err().starts_with("beta:"));
        let waits: Vec<u32> = (0..5).map(|s| in_probe_bw(s).bbr.probe_wait_us).collect();
        let again: Vec<u32> = (0..5).map(|s| in_probe_bw(s).bbr.probe_wait_us).collect();
        assert_eq!(waits, again);
        assert!(waits.windows(2).any(|w| w[0] != w[1]), "the seed moves the probe wait");
    }
}

