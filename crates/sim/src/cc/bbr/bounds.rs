//! What BBRv3 (google/bbr v3 `tcp_bbr.c`) kept of BBRv2 (google/bbr v2alpha `tcp_bbr2.c`):
//! the bounds learned from loss and ECN — `inflight_hi` (long-term, cut when a bandwidth probe
//! sees too much loss or ECN) and `inflight_lo`/`bw_lo` (short-term, cut once per round while
//! not probing) — the two-slot max-bw filter spanning the last two probe cycles, the ECN α,
//! and PROBE_BW as the four-phase machine DOWN → CRUISE → REFILL → UP (draft-ietf-ccwg-bbr,
//! "ProbeBW"). Methods carry the v3 function names (`bbr_*`; v2 spells the new ones `bbr2_*`);
//! where the two sources differ slightly the version's [`Bounded`] parameters say how.

use super::{
    after, before, Bbr, Mode, Version, BBR_SCALE, BBR_UNIT, BW_UNIT, GSO_MAX_SIZE, MAX_TCP_HEADER,
    PACING_SHIFT,
};
use crate::cc::{CaState, RateSample, TcpState, TxSnapshot};

/// Linux's `~0U`: an unset bound.
pub const UNSET: u32 = u32::MAX;

/// `enum bbr_pacing_gain_phase`: the PROBE_BW phases (values of `cycle_idx`).
pub const BW_PROBE_UP: usize = 0;
pub const BW_PROBE_DOWN: usize = 1;
pub const BW_PROBE_CRUISE: usize = 2;
pub const BW_PROBE_REFILL: usize = 3;

/// `enum bbr_ack_phase`: how the incoming ACKs relate to bandwidth probing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AckPhase {
    #[default]
    Init,
    Refilling,
    ProbeStarting,
    ProbeFeedback,
    ProbeStopping,
}

/// `struct bbr_context`: per-ACK scratch.
#[derive(Clone, Copy, Debug, Default)]
pub struct Ctx {
    pub sample_bw: u32,
}

/// A zeroed `struct rate_sample` (`struct rate_sample rs = {}`), as `bbr_skb_marked_lost` and
/// `bbr_run_loss_probe_recovery` build.
pub fn zero_rs() -> RateSample {
    RateSample {
        delivered: 0,
        interval_us: 0,
        snd_interval_us: 0,
        rcv_interval_us: 0,
        rtt_us: 0,
        ..RateSample::default()
    }
}

/// The fields v2 added to `struct bbr` (v3 kept them, and added the last three).
#[derive(Clone, Debug, Default)]
pub struct State {
    pub probe_rtt_min_us: u32,
    pub probe_rtt_min_stamp: u32,
    /// The two-slot max-bw filter (v3 calls it `bw_hi[2]`), packets/µs << 24.
    pub max_bw: [u32; 2],
    /// Lower bound on the sending rate (packets/µs << 24), `UNSET` if none.
    pub bw_lo: u32,
    /// v2's upper bound on bw, cut by ECN on a probe (`ecn_bw_hi`); v3 has none (always `UNSET`).
    pub bw_hi: u32,
    /// Lower bound of the inflight range, segments, `UNSET` if none.
    pub inflight_lo: u32,
    /// Upper bound of the inflight range, segments, `UNSET` if none.
    pub inflight_hi: u32,
    pub bw_latest: u32,
    pub inflight_latest: u32,
    pub undo_bw_lo: u32,
    pub undo_inflight_lo: u32,
    pub undo_inflight_hi: u32,
    /// cwnd-limited rounds in PROBE_UP (a 5-bit field).
    pub bw_probe_up_rounds: u32,
    pub bw_probe_up_cnt: u32,
    pub bw_probe_up_acks: u32,
    pub probe_wait_us: u32,
    /// Rounds since the last probe (an 8-bit field).
    pub rounds_since_probe: u32,
    pub try_fast_path: bool,
    /// v2 only: a probe sample was within the loss/ECN limits.
    pub got_ok_bw_probe_sample: bool,
    pub bw_probe_samples: bool,
    pub prev_probe_too_high: bool,
    pub stopped_risky_probe: bool,
    pub ack_phase: AckPhase,
    pub loss_round_delivered: u32,
    pub loss_round_start: bool,
    pub loss_in_round: bool,
    pub ecn_in_round: bool,
    pub loss_in_cycle: bool,
    pub ecn_in_cycle: bool,
    /// Loss-marking events in this round (a 4-bit counter).
    pub loss_events_in_round: u32,
    /// Rounds of high ECN in STARTUP (a 2-bit counter).
    pub startup_ecn_rounds: u32,
    pub ecn_eligible: bool,
    /// EWMA of delivered_ce/delivered, 1/256.
    pub ecn_alpha: u32,
    pub alpha_last_delivered: u32,
    pub alpha_last_delivered_ce: u32,
    /// v3: the bw plateau flag of the re-armable full-bw detector.
    pub full_bw_now: bool,
    /// v3: `bbr_init` ran.
    pub initialized: bool,
    /// v3 simulator glue: a `set_state(Cwr)` happened in the ACK being processed (see v3's
    /// deviations).
    pub cwr_entered_this_ack: bool,
}

impl State {
    /// v2's fields before `bbr_init`: bounds and probe counters unset, α at its initial value.
    pub fn new(ecn_alpha_init: u32) -> Self {
        State {
            probe_rtt_min_us: UNSET,
            bw_lo: UNSET,
            bw_hi: UNSET,
            inflight_lo: UNSET,
            inflight_hi: UNSET,
            bw_probe_up_cnt: UNSET,
            ecn_alpha: ecn_alpha_init,
            ..State::default()
        }
    }
}

/// The tunables and differences of a version with v2's model (v2, v3).
pub trait Bounded: Version<State = State> {
    /// v2's `<=` in `bbr_update_min_rtt`: an RTT sample equal to probe_rtt_min refreshes it, so
    /// a flat RTT postpones PROBE_RTT (v3: `<`).
    const RTT_TIE_REFRESHES_PROBE_RTT_MIN: bool;
    /// v3's strict `delivered_ce > delivered·ecn_thresh` in `bbr_is_inflight_too_high` (v2 `>=`).
    const CE_RATIO_STRICT: bool;
    /// v3 floors bw_lo at 1 in `bbr_adapt_lower_bounds` (v2: no floor).
    const BW_LO_FLOOR: u32;
    /// v3's `bbr_handle_queue_too_high_in_startup` sets inflight_hi to max(BDP,
    /// inflight_latest) (v2: the BDP).
    const STARTUP_EXIT_KEEPS_INFLIGHT_LATEST: bool;
    /// v2's `bbr2_probe_inflight_hi_upward` forgets the ACKs counted toward growth while
    /// inflight_hi is not what limits the flow; v3 keeps them and, when inflight_hi grows,
    /// leaves the fast path.
    const UPWARD_RESETS_ACKS: bool;

    fn probe_rtt_win_ms(&self) -> u32;
    fn tso_rtt_shift(&self) -> u32;
    /// The floor of `bbr_tso_segs_generic` (v2 `bbr_min_tso_segs`; v3 `sysctl_tcp_min_tso_segs`).
    fn min_tso_segs(&self, tp: &TcpState) -> u32;
    fn beta(&self) -> u32;
    fn loss_thresh(&self) -> u32;
    fn ecn_thresh(&self) -> u32;
    fn ecn_factor(&self) -> u32;
    fn ecn_alpha_gain(&self) -> u32;
    fn ecn_alpha_init(&self) -> u32;
    fn ecn_max_rtt_us(&self) -> u32;
    fn ecn_reprobe_gain(&self) -> u32;
    fn full_loss_cnt(&self) -> u32;
    fn full_ecn_cnt(&self) -> u32;
    fn inflight_headroom(&self) -> u32;
    fn bw_probe_max_rounds(&self) -> u32;
    fn bw_probe_rand_rounds(&self) -> u32;
    fn bw_probe_base_us(&self) -> u32;
    fn bw_probe_rand_us(&self) -> u32;
    fn fast_path(&self) -> bool;
    /// `bbr_bw_probe_reno_gain` (v3: fixed at 1.0).
    fn bw_probe_reno_gain(&self) -> u32;
    /// v2's `bbr_usage_based_cwnd`, `bbr_refill_add_inc`, `bbr_ecn_bw_lo`, `bbr_ecn_bw_hi` and
    /// `bbr_drain_to_target` (v3: false, 0, false, false, true).
    fn usage_based_cwnd(&self) -> bool;
    fn refill_add_inc(&self) -> u32;
    fn ecn_bw_lo(&self) -> bool;
    fn ecn_bw_hi(&self) -> bool;
    fn drain_to_target(&self) -> bool;
    /// `bbr_can_use_ecn` (v2: `bbr_ecn_enable` and ECN negotiated).
    fn can_use_ecn(&self, tp: &TcpState) -> bool;
    /// The PROBE_UP exit of `bbr_update_cycle_phase` when the probe was not risky: v2 once
    /// inflight reached `bw_probe_pif_gain`·BDP after a min_rtt; v3 on a bw plateau.
    fn probe_up_done(b: &mut Bbr<Self>, tp: &TcpState, inflight: u32, bw: u32, ctx: &Ctx) -> bool;
    /// What `bbr_start_bw_probe_up` does besides (v3: restart the full-bw detector).
    fn start_probe_up(_b: &mut Bbr<Self>, _ctx: &Ctx) {}
}

impl<P: Bounded> Bbr<P> {
    /// `bbr_init` for v2's model: the common part, then v2's fields (v3's `initialized` set).
    pub(super) fn init_bounds(&mut self, tp: &mut TcpState) {
        self.init_cwnd = tp.cwnd.min(0x7F);
        self.prior_cwnd = tp.prior_cwnd;
        self.init_common(tp);
        self.v = State {
            probe_rtt_min_us: tp.min_rtt_us,
            probe_rtt_min_stamp: tp.jiffies(),
            // Start sampling ECN mark rate after the first full flight is ACKed.
            loss_round_delivered: (tp.delivered as u32).wrapping_add(1),
            initialized: true,
            ..State::new(self.params.ecn_alpha_init())
        };
    }

    /// `bbr_tso_segs_generic` with the 64 KB `gso_max_size`: ~1 ms of data at the pacing rate
    /// plus a min_rtt allowance of 64 KB >> (min_rtt / 2^tso_rtt_shift µs).
    pub(super) fn tso_segs_generic(&self, tp: &TcpState) -> u32 {
        let mut bytes = tp.pacing_rate >> PACING_SHIFT;
        if self.params.tso_rtt_shift() != 0 {
            let r = self.min_rtt_us >> self.params.tso_rtt_shift();
            if r < 32 {
                bytes += GSO_MAX_SIZE >> r;
            }
        }
        // min_t(u32, ...): the u64 is truncated to u32 first, as in the C.
        let bytes = (bytes as u32).min((GSO_MAX_SIZE - 1 - MAX_TCP_HEADER) as u32);
        (bytes / tp.mss).max(self.params.min_tso_segs(tp))
    }

    /// `bbr_set_cwnd`: slow-start up toward the target, or snap down to it once the pipe was
    /// filled (v1's packet conservation is gone).
    pub(super) fn set_cwnd_bounded(&mut self, tp: &mut TcpState, acked: u32, bw: u32, gain: u32) {
        let mut cwnd = tp.cwnd;
        if acked > 0 {
            let mut target_cwnd = self.bdp(bw, gain);
            // Aggregation allowance, then the quantization budget.
            target_cwnd += self.ack_aggregation_cwnd();
            target_cwnd = self.quantization_budget(tp, target_cwnd);
            self.v.try_fast_path = false;
            if self.full_bw_reached {
                cwnd += acked;
                if cwnd >= target_cwnd {
                    cwnd = target_cwnd;
                    self.v.try_fast_path = true;
                }
            } else if cwnd < target_cwnd || cwnd < 2 * self.init_cwnd {
                cwnd += acked;
            } else {
                self.v.try_fast_path = true;
            }
            if self.params.usage_based_cwnd() {
                let max_probe = (2 * tp.max_packets_out).max(tp.cwnd);
                cwnd = cwnd.min(max_probe);
            }
            cwnd = cwnd.max(self.params.cwnd_min_target());
        }
        tp.cwnd = cwnd;
        if self.mode == Mode::ProbeRtt {
            tp.cwnd = tp.cwnd.min(self.probe_rtt_cwnd());
        }
    }

    /// `bbr_update_round_start`: a packet-timed round ends when a segment sent after the
    /// previous round's end is delivered.
    pub(super) fn update_round_start(&mut self, tp: &TcpState, rs: &RateSample) {
        self.round_start = false;
        if rs.interval_us > 0 && !before(rs.prior_delivered, self.next_rtt_delivered) {
            self.next_rtt_delivered = tp.delivered as u32;
            self.round_start = true;
        }
    }

    /// `bbr_calculate_bw_sample`: delivered / interval, rounded up to allow growth at low rates.
    pub(super) fn calculate_bw_sample(rs: &RateSample, ctx: &mut Ctx) {
        if rs.interval_us > 0 && rs.delivered >= 0 {
            ctx.sample_bw = (rs.delivered as u64 * BW_UNIT).div_ceil(rs.interval_us as u64) as u32;
        }
    }

    /// `bbr_update_min_rtt`: the probe_rtt_min filter (window `probe_rtt_win_ms`) times
    /// PROBE_RTT; min_rtt keeps its `min_rtt_win_sec` window.
    pub(super) fn update_min_rtt(&mut self, tp: &mut TcpState, rs: &RateSample) {
        let now = tp.jiffies();
        let probe_rtt_expired = after(
            now,
            self.v
                .probe_rtt_min_stamp
                .wrapping_add(self.params.probe_rtt_win_ms()),
        );
        let lower = if P::RTT_TIE_REFRESHES_PROBE_RTT_MIN {
            rs.rtt_us <= self.v.probe_rtt_min_us as i64
        } else {
            rs.rtt_us < self.v.probe_rtt_min_us as i64
        };
        if rs.rtt_us >= 0 && (lower || (probe_rtt_expired && !rs.is_ack_delayed)) {
            self.v.probe_rtt_min_us = rs.rtt_us as u32;
            self.v.probe_rtt_min_stamp = now;
        }
        let min_rtt_expired = after(
            now,
            self.min_rtt_stamp
                .wrapping_add(self.params.min_rtt_win_sec() * 1000),
        );
        if self.v.probe_rtt_min_us <= self.min_rtt_us || min_rtt_expired {
            self.min_rtt_us = self.v.probe_rtt_min_us;
            self.min_rtt_stamp = self.v.probe_rtt_min_stamp;
        }
        self.update_probe_rtt(tp, rs, probe_rtt_expired);
    }

    /// `bbr_take_max_bw_sample`: into the current slot of the max filter.
    pub(super) fn take_max_bw_sample(&mut self, bw: u32) {
        self.v.max_bw[1] = self.v.max_bw[1].max(bw);
    }

    /// `bbr_advance_max_bw_filter`: keep the max of the last 1–2 cycles.
    fn advance_max_bw_filter(&mut self) {
        if self.v.max_bw[1] == 0 {
            return; // no samples in this window; remember the old window
        }
        self.v.max_bw[0] = self.v.max_bw[1];
        self.v.max_bw[1] = 0;
    }

    /// `bbr_target_inflight`: our BDP, unless congestion cut cwnd.
    pub(super) fn target_inflight(&self, tp: &TcpState) -> u32 {
        self.inflight(tp, self.bw(), BBR_UNIT).min(tp.cwnd)
    }

    /// `bbr_is_probing_bandwidth`.
    pub(super) fn is_probing_bandwidth(&self) -> bool {
        self.mode == Mode::Startup
            || (self.mode == Mode::ProbeBw
                && (self.cycle_idx == BW_PROBE_REFILL || self.cycle_idx == BW_PROBE_UP))
    }

    /// `bbr_has_elapsed_in_phase`.
    pub(super) fn has_elapsed_in_phase(&self, tp: &TcpState, interval_us: u32) -> bool {
        tp.now_us() as i64 - (self.cycle_mstamp + interval_us as u64) as i64 > 0
    }

    /// `bbr_handle_queue_too_high_in_startup`.
    fn handle_queue_too_high_in_startup(&mut self, tp: &TcpState) {
        self.full_bw_reached = true;
        let bdp = self.inflight(tp, self.max_bw(), BBR_UNIT);
        self.v.inflight_hi = if P::STARTUP_EXIT_KEEPS_INFLIGHT_LATEST {
            bdp.max(self.v.inflight_latest)
        } else {
            bdp
        };
    }

    /// `bbr_check_ecn_too_high_in_startup`: exit STARTUP after full_ecn_cnt consecutive rounds
    /// with a CE ratio ≥ ecn_thresh.
    fn check_ecn_too_high_in_startup(&mut self, tp: &TcpState, ce_ratio: u64) {
        let p = &self.params;
        if self.full_bw_reached
            || !self.v.ecn_eligible
            || p.full_ecn_cnt() == 0
            || p.ecn_thresh() == 0
        {
            return;
        }
        if ce_ratio >= p.ecn_thresh() as u64 {
            // A 2-bit field; it never wraps, as full_ecn_cnt ≤ 3 ends STARTUP first.
            self.v.startup_ecn_rounds = (self.v.startup_ecn_rounds + 1).min(3);
        } else {
            self.v.startup_ecn_rounds = 0;
        }
        if self.v.startup_ecn_rounds >= p.full_ecn_cnt() {
            self.handle_queue_too_high_in_startup(tp);
        }
    }

    /// The first half of `bbr_update_ecn_alpha`: the flow becomes ECN eligible once ECN is
    /// usable and min_rtt ≤ `ecn_max_rtt_us` (0: any RTT).
    pub(super) fn check_ecn_eligible(&mut self, tp: &TcpState) {
        let max_rtt = self.params.ecn_max_rtt_us();
        if !self.v.ecn_eligible
            && self.params.can_use_ecn(tp)
            && (self.min_rtt_us <= max_rtt || max_rtt == 0)
        {
            self.v.ecn_eligible = true;
        }
    }

    /// The EWMA of `bbr_update_ecn_alpha`, at a round start with `delivered` packets of which
    /// `delivered_ce` CE-marked since the last one: α ← (1 − g)·α + g·ce_ratio; then STARTUP's
    /// ECN exit test. Returns ce_ratio (1/256).
    pub(super) fn fold_ecn_alpha(
        &mut self,
        tp: &TcpState,
        delivered: i32,
        delivered_ce: i32,
    ) -> u64 {
        let ce_ratio = ((delivered_ce as u64) << BBR_SCALE) / delivered as u64;
        let gain = self.params.ecn_alpha_gain() as u64;
        let mut alpha = ((BBR_UNIT as u64 - gain) * self.v.ecn_alpha as u64) >> BBR_SCALE;
        alpha += (gain * ce_ratio) >> BBR_SCALE;
        self.v.ecn_alpha = alpha.min(BBR_UNIT as u64) as u32;
        self.v.alpha_last_delivered = tp.delivered as u32;
        self.v.alpha_last_delivered_ce = tp.delivered_ce as u32;
        self.check_ecn_too_high_in_startup(tp, ce_ratio);
        ce_ratio
    }

    /// Packets delivered and CE-marked since the last α update (`bbr_update_ecn_alpha`).
    pub(super) fn delivered_since_alpha(&self, tp: &TcpState) -> (i32, i32) {
        let delivered = (tp.delivered as u32).wrapping_sub(self.v.alpha_last_delivered) as i32;
        let delivered_ce =
            (tp.delivered_ce as u32).wrapping_sub(self.v.alpha_last_delivered_ce) as i32;
        (delivered, delivered_ce)
    }

    /// `bbr_raise_inflight_hi_slope`: each round of PROBE_UP doubles the probing volume.
    fn raise_inflight_hi_slope(&mut self, tp: &TcpState) {
        let growth_this_round = 1u32 << self.v.bw_probe_up_rounds;
        self.v.bw_probe_up_rounds = (self.v.bw_probe_up_rounds + 1).min(30);
        self.v.bw_probe_up_cnt = (tp.cwnd / growth_this_round).max(1);
    }

    /// `bbr_probe_inflight_hi_upward`: no high loss/ECN in UP, so raise inflight_hi by 1 per
    /// `bw_probe_up_cnt` packets acked while it limits the flow.
    fn probe_inflight_hi_upward(&mut self, tp: &TcpState, rs: &RateSample) {
        if !tp.is_cwnd_limited || tp.cwnd < self.v.inflight_hi {
            if P::UPWARD_RESETS_ACKS {
                self.v.bw_probe_up_acks = 0;
            }
            return; // not fully using inflight_hi, so don't grow it
        }
        self.v.bw_probe_up_acks += rs.acked_sacked;
        if self.v.bw_probe_up_acks >= self.v.bw_probe_up_cnt {
            let delta = self.v.bw_probe_up_acks / self.v.bw_probe_up_cnt;
            self.v.bw_probe_up_acks -= delta * self.v.bw_probe_up_cnt;
            self.v.inflight_hi = self.v.inflight_hi.wrapping_add(delta);
            if !P::UPWARD_RESETS_ACKS {
                self.v.try_fast_path = false; // need to update cwnd
            }
        }
        if self.round_start {
            self.raise_inflight_hi_slope(tp);
        }
    }

    /// `bbr_is_inflight_too_high`: loss > loss_thresh of tx_in_flight, or (ECN eligible) a CE
    /// ratio over ecn_thresh.
    pub fn is_inflight_too_high(&self, rs: &RateSample) -> bool {
        if rs.lost > 0 && rs.tx_in_flight > 0 {
            let loss_thresh =
                ((rs.tx_in_flight as u64 * self.params.loss_thresh() as u64) >> BBR_SCALE) as u32;
            if rs.lost > loss_thresh {
                return true;
            }
        }
        if rs.delivered_ce > 0
            && rs.delivered > 0
            && self.v.ecn_eligible
            && self.params.ecn_thresh() > 0
        {
            let ecn_thresh =
                ((rs.delivered as u64 * self.params.ecn_thresh() as u64) >> BBR_SCALE) as i64;
            let too_high = if P::CE_RATIO_STRICT {
                rs.delivered_ce > ecn_thresh
            } else {
                rs.delivered_ce >= ecn_thresh
            };
            if too_high {
                return true;
            }
        }
        false
    }

    /// `bbr_inflight_hi_from_lost_skb`: the tx_in_flight at which the loss rate crossed
    /// loss_thresh within the lost skb (pcount = 1 here).
    pub(super) fn inflight_hi_from_lost_skb(&self, rs: &RateSample) -> u32 {
        let loss_thresh = self.params.loss_thresh();
        let pcount: i32 = 1;
        // How much data was in flight before this skb?
        let inflight_prev = rs.tx_in_flight as i32 - pcount;
        if inflight_prev < 0 {
            return UNSET; // WARN_ONCE(tcp_skb_tx_in_flight_is_suspicious(...))
        }
        // How much inflight data was marked lost before this skb?
        let lost_prev = rs.lost as i32 - pcount;
        if lost_prev < 0 {
            return UNSET; // WARN_ONCE
        }
        // At what prefix of this lost skb did the loss rate exceed loss_thresh?
        let loss_budget =
            (inflight_prev as u64 * loss_thresh as u64 + BBR_UNIT as u64 - 1) >> BBR_SCALE;
        let lost_prefix = if lost_prev as u64 >= loss_budget {
            0 // previous losses crossed loss_thresh
        } else {
            let divisor = BBR_UNIT - loss_thresh;
            if divisor == 0 {
                return UNSET;
            }
            ((loss_budget - lost_prev as u64) << BBR_SCALE) / divisor as u64
        };
        (inflight_prev as u64 + lost_prefix) as u32
    }

    /// `bbr_inflight_with_headroom`: inflight_hi less `inflight_headroom`, ≥ cwnd_min_target.
    fn inflight_with_headroom(&self) -> u32 {
        if self.v.inflight_hi == UNSET {
            return UNSET;
        }
        let headroom = (((self.v.inflight_hi as u64 * self.params.inflight_headroom() as u64)
            >> BBR_SCALE) as u32)
            .max(1);
        // max_t(s32, ...)
        (self.v.inflight_hi.wrapping_sub(headroom) as i32).max(self.params.cwnd_min_target() as i32)
            as u32
    }

    /// `bbr_bound_cwnd_for_inflight_model`.
    pub(super) fn bound_cwnd_for_inflight_model(&mut self, tp: &mut TcpState) {
        if !self.v.initialized {
            return;
        }
        let mut cap = UNSET;
        if self.mode == Mode::ProbeBw && self.cycle_idx != BW_PROBE_CRUISE {
            // Probe to see if more packets fit in the path.
            cap = self.v.inflight_hi;
        } else if self.mode == Mode::ProbeRtt
            || (self.mode == Mode::ProbeBw && self.cycle_idx == BW_PROBE_CRUISE)
        {
            cap = self.inflight_with_headroom();
        }
        // Adapt to any loss/ECN since our last bw probe.
        cap = cap.min(self.v.inflight_lo);
        cap = cap.max(self.params.cwnd_min_target());
        tp.cwnd = tp.cwnd.min(cap);
    }

    /// `bbr_ecn_cut`: 1 − α·ecn_factor, in 1/256.
    fn ecn_cut(&self) -> u32 {
        BBR_UNIT - ((self.v.ecn_alpha * self.params.ecn_factor()) >> BBR_SCALE)
    }

    /// `bbr_init_lower_bounds`.
    fn init_lower_bounds(&mut self, tp: &TcpState, init_bw: bool) {
        if init_bw && self.v.bw_lo == UNSET {
            self.v.bw_lo = self.max_bw();
        }
        if self.v.inflight_lo == UNSET {
            self.v.inflight_lo = tp.cwnd;
        }
    }

    /// `bbr_adapt_lower_bounds`: once per round while not probing, cut the short-term bounds
    /// on loss (by β, not below the latest round's delivery: `bbr_loss_lower_bounds`) and on
    /// ECN (by 1 − α·ecn_factor: `bbr_ecn_lower_bounds`; v2 also bw_lo with `ecn_bw_lo`).
    pub(super) fn adapt_lower_bounds(&mut self, tp: &TcpState) {
        if self.is_probing_bandwidth() {
            return;
        }
        let mut ecn_inflight_lo = UNSET;
        let mut ecn_bw_lo = UNSET;
        if self.v.ecn_in_round && self.v.ecn_eligible && self.params.ecn_factor() > 0 {
            let ecn_cut = self.ecn_cut() as u64;
            self.init_lower_bounds(tp, self.params.ecn_bw_lo());
            ecn_inflight_lo = ((self.v.inflight_lo as u64 * ecn_cut) >> BBR_SCALE) as u32;
            if self.params.ecn_bw_lo() {
                ecn_bw_lo = ((self.v.bw_lo as u64 * ecn_cut) >> BBR_SCALE) as u32;
            }
        }
        if self.v.loss_in_round {
            self.init_lower_bounds(tp, true);
            let keep = (BBR_UNIT - self.params.beta()) as u64;
            self.v.bw_lo = self
                .v
                .bw_latest
                .max(((self.v.bw_lo as u64 * keep) >> BBR_SCALE) as u32);
            self.v.inflight_lo = self
                .v
                .inflight_latest
                .max(((self.v.inflight_lo as u64 * keep) >> BBR_SCALE) as u32);
        }
        // Adjust to the lower of the levels implied by loss and ECN.
        self.v.inflight_lo = self.v.inflight_lo.min(ecn_inflight_lo);
        if self.params.ecn_bw_lo() {
            self.v.bw_lo = self.v.bw_lo.min(ecn_bw_lo);
        }
        self.v.bw_lo = self.v.bw_lo.max(P::BW_LO_FLOOR);
    }

    /// `bbr_reset_lower_bounds`.
    fn reset_lower_bounds(&mut self) {
        self.v.bw_lo = UNSET;
        self.v.inflight_lo = UNSET;
    }

    /// `bbr_reset_congestion_signals`.
    pub(super) fn reset_congestion_signals(&mut self) {
        self.v.loss_in_round = false;
        self.v.ecn_in_round = false;
        self.v.loss_in_cycle = false;
        self.v.ecn_in_cycle = false;
        self.v.bw_latest = 0;
        self.v.inflight_latest = 0;
    }

    /// `bbr_is_reno_coexistence_probe_time`: probe after min(bw_probe_max_rounds,
    /// reno_gain·target_inflight) rounds, as a Reno flow would have grown by then.
    fn is_reno_coexistence_probe_time(&self, tp: &TcpState) -> bool {
        let mut rounds = self.params.bw_probe_max_rounds();
        if self.params.bw_probe_reno_gain() > 0 {
            let reno_rounds = ((self.target_inflight(tp) as u64
                * self.params.bw_probe_reno_gain() as u64)
                >> BBR_SCALE) as u32;
            rounds = rounds.min(reno_rounds);
        }
        self.v.rounds_since_probe >= rounds
    }

    /// `bbr_pick_probe_wait`: randomized round and wall-clock bounds for the next probe.
    fn pick_probe_wait(&mut self) {
        self.v.rounds_since_probe = self.random_below(self.params.bw_probe_rand_rounds());
        self.v.probe_wait_us = self
            .params
            .bw_probe_base_us()
            .wrapping_add(self.random_below(self.params.bw_probe_rand_us()));
    }

    /// `bbr_set_cycle_idx`.
    fn set_cycle_idx(&mut self, idx: usize) {
        self.cycle_idx = idx;
        self.v.try_fast_path = false; // new phase: update cwnd and pacing rate
    }

    /// `bbr_start_bw_probe_refill`.
    pub(super) fn start_bw_probe_refill(&mut self, tp: &TcpState, bw_probe_up_rounds: u32) {
        self.reset_lower_bounds();
        if self.v.inflight_hi != UNSET {
            self.v.inflight_hi = self
                .v
                .inflight_hi
                .saturating_add(self.params.refill_add_inc());
        }
        self.v.bw_probe_up_rounds = bw_probe_up_rounds & 0x1F; // 5-bit field
        self.v.bw_probe_up_acks = 0;
        self.v.stopped_risky_probe = false;
        self.v.got_ok_bw_probe_sample = false;
        self.v.ack_phase = AckPhase::Refilling;
        self.next_rtt_delivered = tp.delivered as u32;
        self.set_cycle_idx(BW_PROBE_REFILL);
    }

    /// `bbr_start_bw_probe_up`.
    fn start_bw_probe_up(&mut self, tp: &TcpState, ctx: &Ctx) {
        self.v.ack_phase = AckPhase::ProbeStarting;
        self.next_rtt_delivered = tp.delivered as u32;
        self.cycle_mstamp = tp.now_us();
        P::start_probe_up(self, ctx);
        self.set_cycle_idx(BW_PROBE_UP);
        self.raise_inflight_hi_slope(tp);
    }

    /// `bbr_start_bw_probe_down`.
    pub(super) fn start_bw_probe_down(&mut self, tp: &TcpState) {
        self.reset_congestion_signals();
        self.v.bw_probe_up_cnt = UNSET; // not growing inflight_hi any more
        self.pick_probe_wait();
        self.cycle_mstamp = tp.now_us(); // start wall clock
        self.v.ack_phase = AckPhase::ProbeStopping;
        self.next_rtt_delivered = tp.delivered as u32;
        self.set_cycle_idx(BW_PROBE_DOWN);
    }

    /// `bbr_start_bw_probe_cruise`.
    fn start_bw_probe_cruise(&mut self) {
        if self.v.inflight_lo != UNSET {
            self.v.inflight_lo = self.v.inflight_lo.min(self.v.inflight_hi);
        }
        self.set_cycle_idx(BW_PROBE_CRUISE);
    }

    /// `bbr_handle_inflight_too_high`: once per probe, cut inflight_hi (v2 with `ecn_bw_hi`
    /// also bw_hi: `bbr2_handle_inflight_too_high_via_ecn`) and go DOWN.
    pub(super) fn handle_inflight_too_high(&mut self, tp: &TcpState, rs: &RateSample) {
        self.v.prev_probe_too_high = true;
        self.v.bw_probe_samples = false; // only react once per probe
        if !rs.is_app_limited {
            let floor = ((self.target_inflight(tp) as u64 * (BBR_UNIT - self.params.beta()) as u64)
                >> BBR_SCALE) as u32;
            self.v.inflight_hi = rs.tx_in_flight.max(floor);
            if self.params.ecn_bw_hi() && self.v.ecn_eligible && !self.v.got_ok_bw_probe_sample {
                let ecn_cut = self.ecn_cut() as u64;
                if self.v.bw_hi == UNSET {
                    self.v.bw_hi = self.max_bw();
                }
                self.v.bw_hi = ((self.v.bw_hi as u64 * ecn_cut) >> BBR_SCALE) as u32;
            }
        }
        if self.mode == Mode::ProbeBw && self.cycle_idx == BW_PROBE_UP {
            self.start_bw_probe_down(tp);
        }
    }

    /// `bbr_adapt_upper_bounds`: returns whether it decided a state transition.
    fn adapt_upper_bounds(&mut self, tp: &TcpState, rs: &RateSample, ctx: &Ctx) -> bool {
        // Track when we'll see bw/loss samples resulting from our bw probes.
        if self.v.ack_phase == AckPhase::ProbeStarting && self.round_start {
            self.v.ack_phase = AckPhase::ProbeFeedback;
        }
        if self.v.ack_phase == AckPhase::ProbeStopping && self.round_start {
            // End of samples from the bw probing phase.
            self.v.bw_probe_samples = false;
            self.v.ack_phase = AckPhase::Init;
            // Now is the best time to forget the previous cycle's bw samples.
            if self.mode == Mode::ProbeBw && !rs.is_app_limited {
                self.advance_max_bw_filter();
            }
            // Hit inflight_hi without high loss/ECN: probe up again right away.
            if self.mode == Mode::ProbeBw
                && self.v.stopped_risky_probe
                && !self.v.prev_probe_too_high
            {
                self.start_bw_probe_refill(tp, 0);
                return true;
            }
        }
        if self.is_inflight_too_high(rs) {
            if self.v.bw_probe_samples {
                self.handle_inflight_too_high(tp, rs);
            }
        } else {
            // Loss/ECN rate is declared safe. Adjust the upper bounds upward.
            self.v.got_ok_bw_probe_sample |= self.v.bw_probe_samples;
            if self.v.inflight_hi == UNSET && self.v.bw_hi == UNSET {
                return false; // no excess queue signals yet
            }
            // To be resilient to random loss, raise the bounds if a higher level is safe.
            if rs.tx_in_flight > self.v.inflight_hi {
                self.v.inflight_hi = rs.tx_in_flight;
            }
            if ctx.sample_bw > self.v.bw_hi {
                self.v.bw_hi = ctx.sample_bw;
            }
            if self.mode == Mode::ProbeBw && self.cycle_idx == BW_PROBE_UP {
                self.probe_inflight_hi_upward(tp, rs);
            }
        }
        false
    }

    /// `bbr_check_time_to_probe_bw`: ECN reprobe, wall clock, or Reno-coexistence rounds.
    fn check_time_to_probe_bw(&mut self, tp: &TcpState) -> bool {
        // Loss-free but ECN-marked cycle: reprobe quickly once the marks cease.
        if self.params.ecn_reprobe_gain() > 0
            && self.v.ecn_eligible
            && self.v.ecn_in_cycle
            && !self.v.loss_in_cycle
            && tp.ca_state == CaState::Open
        {
            // n so that 2^n ≈ inflight_hi·ecn_reprobe_gain; ilog2(0) is −1 in Linux.
            let x =
                (self.v.inflight_hi as u64 * self.params.ecn_reprobe_gain() as u64) >> BBR_SCALE;
            let n = if x == 0 {
                u32::MAX
            } else {
                63 - x.leading_zeros()
            };
            self.start_bw_probe_refill(tp, n);
            return true;
        }
        if self.has_elapsed_in_phase(tp, self.v.probe_wait_us)
            || self.is_reno_coexistence_probe_time(tp)
        {
            self.start_bw_probe_refill(tp, 0);
            return true;
        }
        false
    }

    /// `bbr_check_time_to_cruise`: DOWN → CRUISE once inflight is at or below the headroom
    /// target and the BDP (v2 without `drain_to_target`: or after a min_rtt).
    fn check_time_to_cruise(&self, tp: &TcpState, inflight: u32, bw: u32) -> bool {
        if inflight > self.inflight_with_headroom() {
            return false;
        }
        let is_under_bdp = inflight <= self.inflight(tp, bw, BBR_UNIT);
        if self.params.drain_to_target() {
            return is_under_bdp;
        }
        is_under_bdp || self.has_elapsed_in_phase(tp, self.min_rtt_us)
    }

    /// `bbr_update_cycle_phase`: the PROBE_BW state machine.
    pub(super) fn update_cycle_phase(&mut self, tp: &TcpState, rs: &RateSample, ctx: &Ctx) {
        if !self.full_bw_reached {
            return;
        }
        // In DRAIN, PROBE_BW, or PROBE_RTT, adjust upper bounds.
        if self.adapt_upper_bounds(tp, rs, ctx) {
            return; // already decided state transition
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
                    // After one full round of REFILL, samples start to reflect it.
                    self.v.bw_probe_samples = true;
                    self.start_bw_probe_up(tp, ctx);
                }
            }
            BW_PROBE_UP => {
                let done = if self.v.prev_probe_too_high && inflight >= self.v.inflight_hi {
                    self.v.stopped_risky_probe = true;
                    true
                } else {
                    P::probe_up_done(self, tp, inflight, bw, ctx)
                };
                if done {
                    self.v.prev_probe_too_high = false; // no loss/ECN (yet)
                    self.start_bw_probe_down(tp); // restart w/ down
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

    /// `bbr_exit_probe_rtt`: back to STARTUP, or PROBE_BW via DOWN straight into CRUISE.
    pub(super) fn exit_probe_rtt(&mut self, tp: &TcpState) {
        self.reset_lower_bounds();
        if self.full_bw_reached {
            self.mode = Mode::ProbeBw;
            self.start_bw_probe_down(tp);
            self.start_bw_probe_cruise();
        } else {
            self.mode = Mode::Startup;
        }
    }

    /// `bbr_check_loss_too_high_in_startup`: exit STARTUP when a Recovery round had
    /// ≥ full_loss_cnt loss events and a loss rate above loss_thresh.
    pub(super) fn check_loss_too_high_in_startup(&mut self, tp: &TcpState, rs: &RateSample) {
        if self.full_bw_reached {
            return;
        }
        if rs.losses > 0 && self.v.loss_events_in_round < 0xF {
            self.v.loss_events_in_round += 1; // saturating 4-bit counter
        }
        if self.params.full_loss_cnt() > 0
            && self.v.loss_round_start
            && tp.ca_state == CaState::Recovery
            && self.v.loss_events_in_round >= self.params.full_loss_cnt()
            && self.is_inflight_too_high(rs)
        {
            self.handle_queue_too_high_in_startup(tp);
            return;
        }
        if self.v.loss_round_start {
            self.v.loss_events_in_round = 0;
        }
    }

    /// `bbr_run_fast_path`: app-limited ACKs with nothing new may skip the model update
    /// (`update_model` becomes false when they still need the control update).
    pub(super) fn run_fast_path(
        &mut self,
        tp: &mut TcpState,
        update_model: &mut bool,
        rs: &RateSample,
        ctx: &Ctx,
    ) -> bool {
        if self.params.fast_path()
            && self.v.try_fast_path
            && rs.is_app_limited
            && ctx.sample_bw < self.max_bw()
            && !self.v.loss_in_round
            && !self.v.ecn_in_round
        {
            let prev_mode = self.mode;
            let prev_min_rtt_us = self.min_rtt_us;
            self.check_drain(tp);
            self.update_cycle_phase(tp, rs, ctx);
            self.update_min_rtt(tp, rs);
            if self.mode == prev_mode && self.min_rtt_us == prev_min_rtt_us && self.v.try_fast_path
            {
                return true;
            }
            *update_model = false;
        }
        false
    }

    /// The control half of `bbr_main`: gains, pacing rate and cwnd, bounded by the model.
    pub(super) fn update_control(&mut self, tp: &mut TcpState, rs: &RateSample) {
        self.update_gains();
        let bw = self.bw();
        self.set_pacing_rate(tp, bw, self.pacing_gain);
        self.set_cwnd_bounded(tp, rs.acked_sacked, bw, self.cwnd_gain);
        self.bound_cwnd_for_inflight_model(tp);
    }

    /// `bbr_ssthresh`: entering loss recovery; save cwnd and the bounds for undo.
    pub(super) fn save_for_undo(&mut self, tp: &TcpState) {
        self.save_cwnd(tp);
        self.v.undo_bw_lo = self.v.bw_lo;
        self.v.undo_inflight_lo = self.v.inflight_lo;
        self.v.undo_inflight_hi = self.v.inflight_hi;
    }

    /// `bbr_undo_cwnd`'s bounds: the recovery was spurious, revert the short-term model.
    pub(super) fn undo_bounds(&mut self) {
        self.v.bw_lo = self.v.bw_lo.max(self.v.undo_bw_lo);
        self.v.inflight_lo = self.v.inflight_lo.max(self.v.undo_inflight_lo);
        self.v.inflight_hi = self.v.inflight_hi.max(self.v.undo_inflight_hi);
    }

    /// `bbr_note_loss`: mark the current round trip as a loss round.
    pub(super) fn note_loss(&mut self, tp: &TcpState) {
        if !self.v.loss_in_round {
            self.v.loss_round_delivered = tp.delivered as u32; // first loss in this round trip
        }
        self.v.loss_in_round = true;
        self.v.loss_in_cycle = true;
    }

    /// `bbr_skb_marked_lost`: while probing, check whether the loss rate went too high and at
    /// which packet. (Linux skips SACKed skbs, `!scb->tx.delivered_mstamp`; the core never
    /// passes one, and a simulated send at t = 0 has a zero stamp. `tcp_skb_pcount` is 1.)
    pub(super) fn skb_marked_lost_bounded(&mut self, tp: &TcpState, tx: &TxSnapshot) {
        self.note_loss(tp);
        if !self.v.bw_probe_samples {
            return; // not an skb sent while probing for bandwidth
        }
        let mut rs = zero_rs();
        rs.tx_in_flight = tx.in_flight;
        rs.lost = (tp.lost as u32).wrapping_sub(tx.lost);
        rs.is_app_limited = tx.is_app_limited;
        if self.is_inflight_too_high(&rs) {
            rs.tx_in_flight = self.inflight_hi_from_lost_skb(&rs);
            self.handle_inflight_too_high(tp, &rs);
        }
    }

    /// The phase name for the time series (`bbr_get_phase`).
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
