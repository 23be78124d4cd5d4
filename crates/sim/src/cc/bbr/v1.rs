//! BBRv1 as mainline Linux runs it: net/ipv4/tcp_bbr.c (torvalds/linux at commit
//! 02dc96ef6c25; Cardwell et al., "BBR: Congestion-Based Congestion Control", ACM Queue 14(5),
//! 2016; draft-cardwell-iccrg-bbr-congestion-control-00), ported function by function with its
//! fixed-point arithmetic. The functions v2 and v3 kept are in [`super`]; this file has v1's
//! parameters and the functions only v1 has.
//!
//! On every ACK (`bbr_main`) BBR updates its model of the path — the windowed maximum delivery
//! rate over 10 round trips (`bbr_update_bw`, fed by the core's tcp_rate.c samples) and the
//! minimum RTT over 10 s (`bbr_update_min_rtt`) — moves through its state machine
//! STARTUP → DRAIN → PROBE_BW (8-phase pacing-gain cycle 1.25, 0.75, 1 × 6) ⇄ PROBE_RTT, and
//! sets the pacing rate to gain·bw and cwnd to cwnd_gain·BDP plus the ACK-aggregation
//! allowance. It ignores loss except for packet conservation in the first round of recovery
//! (`bbr_set_cwnd_to_recover_or_restore`) and the long-term "policer" mode
//! (`bbr_lt_bw_sampling`). It owns cwnd and the pacing rate (`cong_control`); the core's PRR
//! and `ssthresh` reductions do not apply.
//!
//! Deviations, each deliberate: the random start phase of the gain cycle (`prandom_u32_max`)
//! comes from the flow's seeded stream; `rs.is_ack_delayed` is the core's approximation of
//! `FLAG_ACK_MAYBE_DELAYED`.
//!
//! This is the algorithm Linux 6.18 runs (the emulator's kernel; its module has v1's
//! `min_tso_segs` and `cwnd_event` hooks): its tcp_bbr.c differs from 02dc96ef6c25 by two
//! fixes, both applied here, and otherwise only by accessors (`tcp_snd_cwnd`, `READ_ONCE`)
//! and the `GSO_LEGACY_MAX_SIZE` name. The min-RTT filter takes only samples *below* the
//! minimum (`<`, upstream 1b9e2a8c99a5 "tcp: only postpone PROBE_RTT if RTT is < current
//! min_rtt estimate", 2020), so a flow on a flat path still enters PROBE_RTT every 10 s; and
//! `bbr_init` starts the round counter at `tp->delivered` (the u32-wrap fix of 2022).

use serde::{Deserialize, Serialize};

use super::{
    after, before, forward, min_tso_segs_by_rate, rate_bytes_per_sec, Mode, Version, BBR_SCALE,
    BBR_UNIT, BW_UNIT, GSO_MAX_SIZE, MAX_TCP_HEADER, PACING_SHIFT,
};
use crate::cc::{CaEvent, CaState, CcProbe, CongestionControl, RateSample, TcpState};
use crate::tcp::minmax::MinMax;

pub const SOURCE: &str =
    "Linux net/ipv4/tcp_bbr.c (mainline BBRv1, incl. 1b9e2a8c99a5 min_rtt '<' fix)";

/// BBRv1's connection state.
pub type Bbr = super::Bbr<Params>;

/// `CYCLE_LEN`: phases of the PROBE_BW pacing-gain cycle.
const CYCLE_LEN: usize = 8;
/// `TCP_INIT_CWND` (include/net/tcp.h).
const TCP_INIT_CWND: u32 = 10;

/// The module's tunables: the `static const` parameters of tcp_bbr.c with their values. Gains
/// and fractions are in 1/256 (`BBR_UNIT`) as in the source.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Params {
    /// `bbr_high_gain`: STARTUP pacing and cwnd gain, 1/256 (739 = 2.885: 2/ln 2).
    pub high_gain: u32,
    /// `bbr_drain_gain`: DRAIN pacing gain, 1/256 (88 = 1/2.885).
    pub drain_gain: u32,
    /// `bbr_cwnd_gain`: PROBE_BW cwnd gain, 1/256 (512 = 2.0).
    pub cwnd_gain: u32,
    /// `bbr_pacing_gain[]`: the PROBE_BW cycle, 1/256 (1.25, 0.75, then 1.0 six times).
    pub pacing_gain: [u32; CYCLE_LEN],
    /// `bbr_cycle_rand`: the cycle starts at a random one of this many phases (never the 0.75).
    pub cycle_rand: u32,
    /// `bbr_bw_rtts`: window of the max-bandwidth filter, round trips (CYCLE_LEN + 2).
    pub bw_rtts: u32,
    /// `bbr_min_rtt_win_sec`: window of the min-RTT filter, s.
    pub min_rtt_win_sec: u32,
    /// `bbr_probe_rtt_mode_ms`: minimum time at `cwnd_min_target` in PROBE_RTT, ms.
    pub probe_rtt_mode_ms: u32,
    /// `bbr_cwnd_min_target`: minimum cwnd and PROBE_RTT cwnd, packets.
    pub cwnd_min_target: u32,
    /// `bbr_min_tso_rate`: below this pacing rate TSO skbs carry one segment, bit/s.
    pub min_tso_rate: u64,
    /// `bbr_pacing_margin_percent`: pace this many percent below the estimate.
    pub pacing_margin_percent: u32,
    /// `bbr_full_bw_thresh`: STARTUP continues while bw grows by this factor per round, 1/256.
    pub full_bw_thresh: u32,
    /// `bbr_full_bw_cnt`: rounds without that growth before the pipe is deemed full.
    pub full_bw_cnt: u32,
    /// `bbr_lt_intvl_min_rtts`: minimum long-term sampling interval, round trips.
    pub lt_intvl_min_rtts: u32,
    /// `bbr_lt_loss_thresh`: lost/delivered above which an interval is lossy, 1/256 (≈ 20 %).
    pub lt_loss_thresh: u32,
    /// `bbr_lt_bw_ratio`: relative bw difference of two "consistent" intervals, 1/256 (1/8).
    pub lt_bw_ratio: u32,
    /// `bbr_lt_bw_diff`: absolute bw difference of two "consistent" intervals, bytes/s (4 kbit/s).
    pub lt_bw_diff: u64,
    /// `bbr_lt_bw_max_rtts`: round trips to pace at the policed rate before re-probing.
    pub lt_bw_max_rtts: u32,
    /// `bbr_extra_acked_gain`: gain on the ACK-aggregation allowance, 1/256 (0 disables it).
    pub extra_acked_gain: u32,
    /// `bbr_extra_acked_win_rtts`: half-window of the extra_acked max filter, round trips.
    pub extra_acked_win_rtts: u32,
    /// `bbr_extra_acked_max_us`: cap of the aggregation allowance, µs of data at bw.
    pub extra_acked_max_us: u32,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            high_gain: BBR_UNIT * 2885 / 1000 + 1,
            drain_gain: BBR_UNIT * 1000 / 2885,
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
            cycle_rand: 7,
            bw_rtts: CYCLE_LEN as u32 + 2,
            min_rtt_win_sec: 10,
            probe_rtt_mode_ms: 200,
            cwnd_min_target: 4,
            min_tso_rate: 1_200_000,
            pacing_margin_percent: 1,
            full_bw_thresh: BBR_UNIT * 5 / 4,
            full_bw_cnt: 3,
            lt_intvl_min_rtts: 4,
            lt_loss_thresh: 50,
            lt_bw_ratio: BBR_UNIT / 8,
            lt_bw_diff: 4000 / 8,
            lt_bw_max_rtts: 48,
            extra_acked_gain: BBR_UNIT,
            extra_acked_win_rtts: 5,
            extra_acked_max_us: 100 * 1000,
        }
    }
}

impl Params {
    pub fn validate(&self) -> Result<(), String> {
        // The bit widths of `struct bbr` bound the gains (pacing_gain:10, cwnd_gain:10).
        let gain = |name: &str, v: u32| {
            if v == 0 || v > 1023 {
                Err(format!(
                    "{name}: {v} must be 1..=1023 (1/256 units, as the 10-bit field of struct bbr)"
                ))
            } else {
                Ok(())
            }
        };
        gain("high_gain", self.high_gain)?;
        gain("drain_gain", self.drain_gain)?;
        gain("cwnd_gain", self.cwnd_gain)?;
        for (i, &g) in self.pacing_gain.iter().enumerate() {
            gain(&format!("pacing_gain[{i}]"), g)?;
        }
        if self.cycle_rand == 0 || self.cycle_rand as usize > CYCLE_LEN - 1 {
            return Err(format!("cycle_rand: {} must be 1..=7", self.cycle_rand));
        }
        if self.bw_rtts == 0 {
            return Err("bw_rtts: must be > 0".into());
        }
        if self.min_rtt_win_sec == 0 {
            return Err("min_rtt_win_sec: must be > 0".into());
        }
        if self.cwnd_min_target == 0 {
            return Err("cwnd_min_target: must be > 0".into());
        }
        if self.pacing_margin_percent >= 100 {
            return Err(format!(
                "pacing_margin_percent: {} must be 0..=99",
                self.pacing_margin_percent
            ));
        }
        if self.full_bw_cnt == 0 || self.full_bw_cnt > 3 {
            return Err(format!(
                "full_bw_cnt: {} must be 1..=3 (the 2-bit field of struct bbr)",
                self.full_bw_cnt
            ));
        }
        if self.lt_intvl_min_rtts == 0 || 4 * self.lt_intvl_min_rtts > 127 {
            return Err(format!(
                "lt_intvl_min_rtts: {} must be 1..=31 (4× it must fit lt_rtt_cnt:7)",
                self.lt_intvl_min_rtts
            ));
        }
        if self.lt_bw_max_rtts == 0 || self.lt_bw_max_rtts > 127 {
            return Err(format!(
                "lt_bw_max_rtts: {} must be 1..=127 (lt_rtt_cnt:7)",
                self.lt_bw_max_rtts
            ));
        }
        if self.extra_acked_win_rtts == 0 || self.extra_acked_win_rtts > 31 {
            return Err(format!(
                "extra_acked_win_rtts: {} must be 1..=31 (extra_acked_win_rtts:5)",
                self.extra_acked_win_rtts
            ));
        }
        Ok(())
    }
}

/// The fields of `struct bbr` only v1 has.
#[derive(Clone, Debug, Default)]
pub struct State {
    /// Max recent delivery rate, packets/µs << 24, over `bw_rtts` rounds (`lib/win_minmax.c`).
    bw: MinMax,
    /// Packet-timed rounds elapsed.
    pub rtt_cnt: u32,
    packet_conservation: bool,
    lt_is_sampling: bool,
    lt_rtt_cnt: u32,
    lt_use_bw: bool,
    /// Long-term delivery rate, packets/µs << 24.
    lt_bw: u32,
    lt_last_delivered: u32,
    /// ms.
    lt_last_stamp: u32,
    lt_last_lost: u32,
}

impl Version for Params {
    type State = State;
    const PACING_RATE_FLOOR: u64 = 0;

    fn new_state(&self) -> State {
        State::default()
    }
    forward!(drain_gain: u32, cwnd_min_target: u32, pacing_margin_percent: u32, min_rtt_win_sec: u32, probe_rtt_mode_ms: u32, full_bw_thresh: u32, full_bw_cnt: u32, extra_acked_gain: u32, extra_acked_win_rtts: u32, extra_acked_max_us: u32);
    fn startup_pacing_gain(&self) -> u32 {
        self.high_gain
    }
    fn startup_cwnd_gain(&self) -> u32 {
        self.high_gain
    }
    fn extra_acked_in_startup(&self) -> bool {
        false
    }
    fn cwnd_tso_budget(&self) -> bool {
        false
    }
    fn probe_rtt_cwnd_gain(&self) -> Option<u32> {
        None
    }

    fn max_bw(b: &Bbr) -> u32 {
        b.v.bw.get() as u32
    }
    fn bw(b: &Bbr) -> u32 {
        if b.v.lt_use_bw {
            b.v.lt_bw
        } else {
            b.max_bw()
        }
    }
    /// `bbr_tso_segs_goal`: `tcp_tso_autosize` without the device limit.
    fn tso_segs_goal(b: &Bbr, tp: &TcpState) -> u32 {
        let bytes = (tp.pacing_rate >> PACING_SHIFT).min(GSO_MAX_SIZE - 1 - MAX_TCP_HEADER);
        let segs =
            ((bytes / tp.mss as u64) as u32).max(min_tso_segs_by_rate(tp, b.params.min_tso_rate));
        segs.min(0x7f)
    }
    fn probe_bw_gains(b: &Bbr) -> (u32, u32) {
        (
            if b.v.lt_use_bw {
                BBR_UNIT
            } else {
                b.params.pacing_gain[b.cycle_idx]
            },
            b.params.cwnd_gain,
        )
    }
    fn exit_drain(b: &mut Bbr, tp: &TcpState) {
        b.reset_probe_bw_mode(tp);
    }
    fn probe_rtt_done(b: &mut Bbr, tp: &TcpState) {
        b.min_rtt_stamp = tp.jiffies();
        b.reset_mode(tp);
    }
}

impl Bbr {
    /// `bbr_set_cwnd_to_recover_or_restore`: packet conservation in the first round of
    /// recovery; restore the pre-recovery cwnd on exit. Returns the cwnd and whether packet
    /// conservation decided it.
    fn set_cwnd_to_recover_or_restore(
        &mut self,
        tp: &TcpState,
        rs: &RateSample,
        acked: u32,
    ) -> (u32, bool) {
        let prev_state = self.prev_ca_state;
        let state = tp.ca_state;
        let mut cwnd = tp.cwnd;
        // An ACK for P packets should release at most 2·P packets: first deduct the lost.
        if rs.losses > 0 {
            cwnd = (cwnd as i64 - rs.losses as i64).max(1) as u32;
        }
        if state == CaState::Recovery && prev_state != CaState::Recovery {
            // Starting the first round of Recovery: packet conservation.
            self.v.packet_conservation = true;
            self.next_rtt_delivered = tp.delivered as u32;
            // Cut unused cwnd from app behaviour, TSQ or TSO deferral.
            cwnd = tp.inflight + acked;
        } else if prev_state >= CaState::Recovery && state < CaState::Recovery {
            // Exiting loss recovery: restore the cwnd saved before it.
            cwnd = cwnd.max(self.prior_cwnd);
            self.v.packet_conservation = false;
        }
        self.prev_ca_state = state;
        if self.v.packet_conservation {
            return (cwnd.max(tp.inflight + acked), true);
        }
        (cwnd, false)
    }

    /// `bbr_set_cwnd`: slow-start toward the target (if bw grows, or loss drew cwnd below it),
    /// or snap down to it.
    fn set_cwnd(&mut self, tp: &mut TcpState, rs: &RateSample, acked: u32, bw: u32, gain: u32) {
        let mut cwnd = tp.cwnd;
        if acked > 0 {
            let (c, conserving) = self.set_cwnd_to_recover_or_restore(tp, rs, acked);
            cwnd = c;
            if !conserving {
                let mut target_cwnd = self.bdp(bw, gain);
                // Extra for ACK aggregation seen in the ACK stream.
                target_cwnd += self.ack_aggregation_cwnd();
                target_cwnd = self.quantization_budget(tp, target_cwnd);
                if self.full_bw_reached {
                    cwnd = (cwnd + acked).min(target_cwnd);
                } else if cwnd < target_cwnd || tp.delivered < TCP_INIT_CWND as u64 {
                    cwnd += acked;
                }
                cwnd = cwnd.max(self.params.cwnd_min_target);
            }
        }
        tp.cwnd = cwnd;
        if self.mode == Mode::ProbeRtt {
            tp.cwnd = tp.cwnd.min(self.params.cwnd_min_target);
        }
    }

    /// `bbr_is_next_cycle_phase`: end the phase when its time is up and/or inflight hit its
    /// target.
    fn is_next_cycle_phase(&self, tp: &TcpState, rs: &RateSample) -> bool {
        let is_full_length = (tp.delivered_mstamp_us as i64 - self.cycle_mstamp as i64).max(0)
            > self.min_rtt_us as i64;
        if self.pacing_gain == BBR_UNIT {
            return is_full_length;
        }
        let inflight = self.packets_in_net_at_edt(tp, rs.prior_in_flight);
        let bw = self.max_bw();
        if self.pacing_gain > BBR_UNIT {
            // Probing: persist until inflight reaches gain·BDP, unless packets are lost.
            return is_full_length
                && (rs.losses > 0 || inflight >= self.inflight(tp, bw, self.pacing_gain));
        }
        // Draining: stop early once inflight is back to the BDP.
        is_full_length || inflight <= self.inflight(tp, bw, BBR_UNIT)
    }

    /// `bbr_advance_cycle_phase`.
    fn advance_cycle_phase(&mut self, tp: &TcpState) {
        self.cycle_idx = (self.cycle_idx + 1) & (CYCLE_LEN - 1);
        self.cycle_mstamp = tp.delivered_mstamp_us;
    }

    /// `bbr_update_cycle_phase`.
    fn update_cycle_phase(&mut self, tp: &TcpState, rs: &RateSample) {
        if self.mode == Mode::ProbeBw && self.is_next_cycle_phase(tp, rs) {
            self.advance_cycle_phase(tp);
        }
    }

    /// `bbr_reset_probe_bw_mode`: start the cycle at a random phase other than the 0.75 one.
    fn reset_probe_bw_mode(&mut self, tp: &TcpState) {
        self.mode = Mode::ProbeBw;
        self.cycle_idx = CYCLE_LEN - 1 - self.random_below(self.params.cycle_rand) as usize;
        self.advance_cycle_phase(tp);
    }

    /// `bbr_reset_mode`.
    fn reset_mode(&mut self, tp: &TcpState) {
        if !self.full_bw_reached {
            self.mode = Mode::Startup;
        } else {
            self.reset_probe_bw_mode(tp);
        }
    }

    /// `bbr_reset_lt_bw_sampling_interval`.
    fn reset_lt_bw_sampling_interval(&mut self, tp: &TcpState) {
        self.v.lt_last_stamp = (tp.delivered_mstamp_us / 1000) as u32;
        self.v.lt_last_delivered = tp.delivered as u32;
        self.v.lt_last_lost = tp.lost as u32;
        self.v.lt_rtt_cnt = 0;
    }

    /// `bbr_reset_lt_bw_sampling`.
    fn reset_lt_bw_sampling(&mut self, tp: &TcpState) {
        self.v.lt_bw = 0;
        self.v.lt_use_bw = false;
        self.v.lt_is_sampling = false;
        self.reset_lt_bw_sampling_interval(tp);
    }

    /// `bbr_lt_bw_interval_done`: two consistent lossy intervals ⇒ policed.
    fn lt_bw_interval_done(&mut self, tp: &TcpState, bw: u32) {
        if self.v.lt_bw != 0 {
            let diff = (bw as i64 - self.v.lt_bw as i64).unsigned_abs() as u32;
            if (diff as u64 * BBR_UNIT as u64
                <= self.params.lt_bw_ratio as u64 * self.v.lt_bw as u64)
                || rate_bytes_per_sec(
                    tp.mss,
                    diff as u64,
                    BBR_UNIT,
                    self.params.pacing_margin_percent as u64,
                ) <= self.params.lt_bw_diff
            {
                self.v.lt_bw = ((bw as u64 + self.v.lt_bw as u64) >> 1) as u32;
                self.v.lt_use_bw = true;
                self.pacing_gain = BBR_UNIT;
                self.v.lt_rtt_cnt = 0;
                return;
            }
        }
        self.v.lt_bw = bw;
        self.reset_lt_bw_sampling_interval(tp);
    }

    /// `bbr_lt_bw_sampling`: detect a token-bucket policer from two consecutive sampling
    /// intervals with consistent throughput and high loss.
    fn lt_bw_sampling(&mut self, tp: &TcpState, rs: &RateSample) {
        if self.v.lt_use_bw {
            if self.mode == Mode::ProbeBw && self.round_start {
                self.v.lt_rtt_cnt += 1;
                if self.v.lt_rtt_cnt >= self.params.lt_bw_max_rtts {
                    self.reset_lt_bw_sampling(tp);
                    self.reset_probe_bw_mode(tp);
                }
            }
            return;
        }
        // Wait for the first loss, so the policer has exhausted its tokens.
        if !self.v.lt_is_sampling {
            if rs.losses == 0 {
                return;
            }
            self.reset_lt_bw_sampling_interval(tp);
            self.v.lt_is_sampling = true;
        }
        if rs.is_app_limited {
            self.reset_lt_bw_sampling(tp);
            return;
        }
        if self.round_start {
            self.v.lt_rtt_cnt += 1;
        }
        if self.v.lt_rtt_cnt < self.params.lt_intvl_min_rtts {
            return;
        }
        if self.v.lt_rtt_cnt > 4 * self.params.lt_intvl_min_rtts {
            self.reset_lt_bw_sampling(tp);
            return;
        }
        // End the interval on a loss.
        if rs.losses == 0 {
            return;
        }
        let lost = (tp.lost as u32).wrapping_sub(self.v.lt_last_lost);
        let delivered = (tp.delivered as u32).wrapping_sub(self.v.lt_last_delivered);
        if delivered == 0
            || ((lost as u64) << BBR_SCALE) < self.params.lt_loss_thresh as u64 * delivered as u64
        {
            return;
        }
        let t = ((tp.delivered_mstamp_us / 1000) as u32).wrapping_sub(self.v.lt_last_stamp);
        if (t as i32) < 1 {
            return;
        }
        if t >= u32::MAX / 1000 {
            self.reset_lt_bw_sampling(tp);
            return;
        }
        let t_us = t as u64 * 1000;
        let bw = (delivered as u64 * BW_UNIT / t_us) as u32;
        self.lt_bw_interval_done(tp, bw);
    }

    /// `bbr_update_bw`: round counting and the max-bw filter.
    fn update_bw(&mut self, tp: &TcpState, rs: &RateSample) {
        self.round_start = false;
        if rs.delivered < 0 || rs.interval_us <= 0 {
            return;
        }
        if !before(rs.prior_delivered, self.next_rtt_delivered) {
            self.next_rtt_delivered = tp.delivered as u32;
            self.v.rtt_cnt = self.v.rtt_cnt.wrapping_add(1);
            self.round_start = true;
            self.v.packet_conservation = false;
        }
        self.lt_bw_sampling(tp, rs);
        let bw = (rs.delivered as u64 * BW_UNIT / rs.interval_us as u64) as u32;
        // App-limited samples enter only if they are at least as high as the model.
        if !rs.is_app_limited || bw >= self.max_bw() {
            self.v
                .bw
                .running_max(self.params.bw_rtts as u64, self.v.rtt_cnt as u64, bw as u64);
        }
    }

    /// `bbr_update_min_rtt`: the 10 s min-RTT filter, which also times PROBE_RTT.
    fn update_min_rtt(&mut self, tp: &mut TcpState, rs: &RateSample) {
        let now = tp.jiffies();
        let filter_expired = after(
            now,
            self.min_rtt_stamp
                .wrapping_add(self.params.min_rtt_win_sec * 1000),
        );
        if rs.rtt_us >= 0
            && (rs.rtt_us < self.min_rtt_us as i64 || (filter_expired && !rs.is_ack_delayed))
        {
            self.min_rtt_us = rs.rtt_us as u32;
            self.min_rtt_stamp = now;
        }
        self.update_probe_rtt(tp, rs, filter_expired);
    }

    /// `bbr_update_model`.
    fn update_model(&mut self, tp: &mut TcpState, rs: &RateSample) {
        self.update_bw(tp, rs);
        self.update_ack_aggregation(tp, rs);
        self.update_cycle_phase(tp, rs);
        self.check_full_bw_reached(rs);
        self.check_drain(tp);
        self.update_min_rtt(tp, rs);
        self.update_gains();
    }

    /// The mode name for the time series.
    pub fn phase_name(&self) -> &'static str {
        match self.mode {
            Mode::Startup => "startup",
            Mode::Drain => "drain",
            Mode::ProbeBw => match self.pacing_gain.cmp(&BBR_UNIT) {
                std::cmp::Ordering::Greater => "probe_bw:up",
                std::cmp::Ordering::Less => "probe_bw:down",
                std::cmp::Ordering::Equal => "probe_bw:cruise",
            },
            Mode::ProbeRtt => "probe_rtt",
        }
    }
}

impl CongestionControl for Bbr {
    fn name(&self) -> &'static str {
        "bbr"
    }

    /// `bbr_init`.
    fn init(&mut self, tp: &mut TcpState) {
        self.prior_cwnd = 0;
        self.v.rtt_cnt = 0;
        self.next_rtt_delivered = tp.delivered as u32;
        self.v.packet_conservation = false;
        self.v.bw.reset(self.v.rtt_cnt as u64, 0);
        self.init_common(tp);
        self.reset_lt_bw_sampling(tp);
        self.update_gains();
    }

    /// `bbr_ssthresh`: entering loss recovery — save cwnd, leave ssthresh alone.
    fn ssthresh(&mut self, tp: &mut TcpState) -> u32 {
        self.save_cwnd(tp);
        tp.ssthresh
    }

    /// Never called: BBR has `cong_control`.
    fn cong_avoid(&mut self, _tp: &mut TcpState, _acked: u32) {}

    /// `bbr_set_state`: an RTO is treated as the end of a round, and as a lossy sample for the
    /// policer detector.
    fn set_state(&mut self, tp: &mut TcpState, new_state: CaState) {
        if new_state == CaState::Loss {
            let rs = RateSample {
                losses: 1,
                ..RateSample::default()
            };
            self.prev_ca_state = CaState::Loss;
            self.full_bw = 0;
            self.round_start = true;
            self.lt_bw_sampling(tp, &rs);
        }
    }

    /// `bbr_cwnd_event`: restart from idle while application-limited.
    fn cwnd_event(&mut self, tp: &mut TcpState, ev: CaEvent) {
        self.restart_from_idle(tp, ev);
    }

    /// `bbr_undo_cwnd`: a spurious slow-down — reset full-pipe detection.
    fn undo_cwnd(&mut self, tp: &TcpState) -> u32 {
        self.full_bw = 0;
        self.full_bw_cnt = 0;
        self.reset_lt_bw_sampling(tp);
        tp.cwnd
    }

    fn has_cong_control(&self) -> bool {
        true
    }

    /// `bbr_main`.
    fn cong_control(&mut self, tp: &mut TcpState, rs: &RateSample) {
        self.update_model(tp, rs);
        let bw = self.bw();
        self.set_pacing_rate(tp, bw, self.pacing_gain);
        self.set_cwnd(tp, rs, rs.acked_sacked, bw, self.cwnd_gain);
    }

    fn wants_pacing(&self) -> bool {
        true
    }

    fn min_tso_segs(&self, tp: &TcpState) -> Option<u32> {
        Some(min_tso_segs_by_rate(tp, self.params.min_tso_rate))
    }

    fn probe(&self, tp: &TcpState) -> CcProbe {
        CcProbe {
            phase: Some(self.phase_name()),
            bw_bps: Some(self.bw_bps(tp)),
            inflight_hi: None,
            alpha: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path of `bw_pkts_per_ms` packets/ms and `rtt_ms`, fed one ACK per `acked` packets with
    /// rate samples exactly as tcp_rate.c would produce on an unloaded pipe.
    struct Path {
        tp: TcpState,
        bbr: Bbr,
    }

    impl Path {
        fn new(rtt_us: u32, seed: u64) -> Self {
            let mut tp = TcpState::new(1448, 1_000_000_000);
            tp.srtt_us = rtt_us;
            tp.min_rtt_us = rtt_us;
            let mut bbr = Bbr::new(Params::default(), seed);
            bbr.init(&mut tp);
            Path { tp, bbr }
        }

        /// One ACK delivering `acked` packets, with a sample of `delivered` packets over
        /// `interval_us`, arriving `dt_us` after the previous one.
        fn ack(&mut self, dt_us: u64, acked: u32, delivered: i64, interval_us: i64, rtt_us: i64) {
            self.tp.now_ns += dt_us * 1000;
            let prior_delivered =
                (self.tp.delivered as i64 - delivered + acked as i64).max(0) as u32;
            self.tp.delivered += acked as u64;
            self.tp.delivered_mstamp_us = self.tp.now_us();
            let rs = RateSample {
                prior_mstamp_us: Some(0),
                prior_delivered,
                delivered,
                interval_us,
                rtt_us,
                acked_sacked: acked,
                prior_in_flight: self.tp.inflight,
                ..RateSample::default()
            };
            self.bbr.cong_control(&mut self.tp, &rs);
        }

        /// A whole round: one ACK whose sample starts a new round, at `bw` packets per ms.
        fn round(&mut self, rtt_us: u64, bw_pkts_per_ms: u64) {
            let delivered = (bw_pkts_per_ms * rtt_us / 1000) as i64;
            // The sample's prior_delivered is at the round boundary.
            self.tp.now_ns += rtt_us * 1000;
            let prior = self.tp.delivered as u32;
            self.tp.delivered += delivered as u64;
            self.tp.delivered_mstamp_us = self.tp.now_us();
            let rs = RateSample {
                prior_mstamp_us: Some(0),
                prior_delivered: prior.max(self.bbr.next_rtt_delivered),
                delivered,
                interval_us: rtt_us as i64,
                rtt_us: rtt_us as i64,
                acked_sacked: delivered as u32,
                prior_in_flight: self.tp.inflight,
                // tcp_rate.c flags samples of data sent while app_limited was set.
                is_app_limited: self.tp.app_limited != 0,
                ..RateSample::default()
            };
            self.bbr.cong_control(&mut self.tp, &rs);
        }
    }

    #[test]
    fn gains_are_the_sources_fixed_point_values() {
        let p = Params::default();
        // 256·2885/1000 + 1 = 738 + 1; 256·1000/2885 = 88 (integer division).
        assert_eq!(p.high_gain, 739);
        assert_eq!(p.drain_gain, 88);
        assert_eq!(p.pacing_gain, [320, 192, 256, 256, 256, 256, 256, 256]);
        assert_eq!(p.full_bw_thresh, 320);
        assert_eq!(p.lt_bw_diff, 500);
    }

    #[test]
    fn bdp_rounds_up_and_pacing_keeps_a_one_percent_margin() {
        let mut p = Path::new(20_000, 1);
        // bw = 8.5 packets/ms = 0.0085 packets/µs → 0.0085·2^24 = 142606.3 → 142606 (truncated).
        let bw = (85 * BW_UNIT / 10_000) as u32;
        assert_eq!(bw, 142_606);
        p.bbr.min_rtt_us = 20_000;
        // ceil(142606 · 20000 · 256/256 / 2^24) = ceil(169.99…) = 170.
        assert_eq!(p.bbr.bdp(bw, BBR_UNIT), 170);
        // 2·BDP: ceil(339.99…) = 340.
        assert_eq!(p.bbr.bdp(bw, 2 * BBR_UNIT), 340);
        // rate = bw·1448·gain/256·990000/2^24 bytes/s ≈ 0.0085·1448·1e6·0.99 = 12 185 kB/s.
        let r = p.bbr.bw_to_pacing_rate(&p.tp, bw, BBR_UNIT);
        assert!(
            (r as f64 - 0.0085 * 1448.0 * 1e6 * 0.99).abs() < 100.0,
            "{r}"
        );
    }

    #[test]
    fn startup_paces_at_high_gain_from_the_initial_window() {
        let p = Path::new(10_000, 1);
        // 2.885 · 10 packets · 1448 B / 10 ms · 0.99 = 4 135 kB/s (739/256 = 2.88672).
        let want = 739.0 / 256.0 * 10.0 * 1448.0 / 0.010 * 0.99;
        assert!(
            (p.tp.pacing_rate as f64 - want).abs() / want < 1e-3,
            "{} vs {want}",
            p.tp.pacing_rate
        );
        assert_eq!(p.bbr.mode, Mode::Startup);
        assert_eq!(p.bbr.pacing_gain, 739);
    }

    #[test]
    fn startup_exits_after_three_rounds_without_25_percent_growth() {
        let mut p = Path::new(10_000, 1);
        // Growing rounds: each doubles bw, so full_bw keeps resetting.
        for bw in [2, 4, 8, 16] {
            p.round(10_000, bw);
            assert!(!p.bbr.full_bw_reached);
        }
        // Plateau at 16 packets/ms: rounds 1 and 2 without growth keep STARTUP…
        p.tp.inflight = 1000; // a queue: DRAIN will not end at once
        p.round(10_000, 16);
        p.round(10_000, 16);
        assert_eq!(p.bbr.mode, Mode::Startup);
        // 19 < 1.25·16 = 20 is no growth either: the third round ends STARTUP.
        p.round(10_000, 19);
        assert!(p.bbr.full_bw_reached);
        assert_eq!(p.bbr.mode, Mode::Drain);
        assert_eq!(p.bbr.pacing_gain, 88);
        assert_eq!(p.bbr.cwnd_gain, 739, "DRAIN keeps the high cwnd gain");
    }

    #[test]
    fn growth_of_25_percent_restarts_the_plateau_count() {
        let mut p = Path::new(10_000, 1);
        p.round(10_000, 16);
        p.round(10_000, 16);
        p.round(10_000, 16);
        // 20 ≥ 1.25·16: growth, count back to 0.
        p.round(10_000, 20);
        p.round(10_000, 20);
        p.round(10_000, 20);
        assert!(
            !p.bbr.full_bw_reached,
            "two flat rounds after growth are not enough"
        );
        p.round(10_000, 20);
        assert!(p.bbr.full_bw_reached);
    }

    fn in_probe_bw(seed: u64) -> Path {
        let mut p = Path::new(10_000, seed);
        // A standing queue keeps DRAIN going until the last round.
        p.tp.inflight = 1000;
        for _ in 0..5 {
            p.round(10_000, 10);
        }
        assert!(p.bbr.full_bw_reached);
        assert_eq!(p.bbr.mode, Mode::Drain);
        // Inflight at the BDP (10 packets/ms · 10 ms = 100): DRAIN ends at once.
        p.tp.inflight = 100;
        p.round(10_000, 10);
        assert_eq!(p.bbr.mode, Mode::ProbeBw);
        p
    }

    #[test]
    fn probe_bw_never_starts_in_the_draining_phase_and_phases_last_one_min_rtt() {
        let mut starts = std::collections::BTreeSet::new();
        for seed in 0..64 {
            let p = in_probe_bw(seed);
            starts.insert(p.bbr.cycle_idx);
        }

        // cycle_idx = 7 − U{0..6}, then advanced: {2..7, 0}, never 1 (the 0.75 phase).
        assert!(!starts.contains(&1));
        assert_eq!(starts.len(), 7, "{starts:?}");

        // Walk a whole cycle at steady bw with inflight at 1.25·BDP when probing: each phase
        // ends once more than min_rtt (10 ms) has passed since it began.
        let mut p = in_probe_bw(3);
        let mut seen = Vec::new();
        for _ in 0..16 {
            let idx = p.bbr.cycle_idx;
            seen.push(p.bbr.pacing_gain);
            // Above 1.25·BDP: the probing phase may end, the draining one may not end early.
            p.tp.inflight = 300;
            // 10 ms exactly is not "more than min_rtt": the phase persists.
            p.ack(10_000, 1, 100, 10_000, 10_000);
            assert_eq!(p.bbr.cycle_idx, idx, "phase ended at exactly min_rtt");
            p.ack(1, 1, 100, 10_000, 10_000);
            assert_eq!(p.bbr.cycle_idx, (idx + 1) % 8);
        }
        assert_eq!(seen.iter().filter(|&&g| g == 320).count(), 2);
        assert_eq!(seen.iter().filter(|&&g| g == 192).count(), 2);
    }

    #[test]
    fn draining_phase_ends_early_once_inflight_is_back_to_the_bdp() {
        let mut p = in_probe_bw(3);
        while p.bbr.cycle_idx != 1 {
            p.tp.inflight = 300;
            p.ack(10_001, 1, 100, 10_000, 10_000);
        }
        // inflight(bw, 1.0) = bdp 100 + 3·tso_goal, rounded up to even.
        let target = p.bbr.inflight(&p.tp, p.bbr.max_bw(), BBR_UNIT);
        p.tp.inflight = target + 1;
        p.ack(100, 1, 100, 10_000, 10_000);
        assert_eq!(p.bbr.cycle_idx, 1, "still above the BDP");
        p.tp.inflight = target;
        p.ack(100, 1, 100, 10_000, 10_000);
        assert_eq!(
            p.bbr.cycle_idx, 2,
            "ended after 0.2 ms, long before min_rtt"
        );
    }

    #[test]
    fn cwnd_is_twice_the_bdp_plus_quantization_in_probe_bw() {
        let mut p = in_probe_bw(5);
        for _ in 0..50 {
            p.tp.inflight = 100;
            p.ack(1000, 10, 100, 10_000, 10_000);
        }
        // bw = 10 packets/ms exactly: 10/1000·2^24 = 167772.16 → 167772; bdp·2 =
        // ceil(167772·10000·512/256/2^24) = ceil(199.99…) = 200. Quantization: + 3 TSO goals
        // (pacing rate >> 10 bytes / 1448, ≥ 2), rounded up to even, +2 in the 1.25 phase;
        // plus the aggregation allowance (ACKs arrive at bw here, so it is at most 1).
        let goal = Params::tso_segs_goal(&p.bbr, &p.tp);
        assert!(goal >= 2);
        // The allowance: `round()` delivered 100 packets in single ACKs, an aggregation of
        // ≈ 100 packets beyond bw·interval, still within the 5–10-round window.
        let aggr = p.bbr.ack_aggregation_cwnd();
        assert!((99..=101).contains(&aggr), "{aggr}");
        let want = ((200 + aggr + 3 * goal + 1) & !1) + if p.bbr.cycle_idx == 0 { 2 } else { 0 };
        assert_eq!(p.tp.cwnd, want, "tso goal {goal}");
    }

    /// ACKs of `per_ack` packets every `per_ack`/10 ms (the path's 10 packets/ms) until
    /// `rounds` packet-timed rounds have started; each sample spans one 10 ms round trip.
    fn ack_steadily(p: &mut Path, per_ack: u32, rounds: u32) {
        let mut started = 0;
        while started < rounds {
            p.tp.inflight = 100;
            p.ack(per_ack as u64 * 100, per_ack, 100, 10_000, 10_000);
            started += p.bbr.round_start as u32;
        }
    }

    /// 20 ms without an ACK, then one for 2 packets: fewer packets ACKed than bw·epoch
    /// expects, so bbr_update_ack_aggregation starts a new epoch (2 packets, 2 extra).
    fn ack_after_silence(p: &mut Path) {
        p.tp.inflight = 100;
        p.ack(20_000, 2, 100, 10_000, 10_000);
    }

    #[test]
    fn stretch_acks_of_k_packets_add_about_k_packets_to_the_target_cwnd() {
        // bbr_update_ack_aggregation with bw = 167772 (10 packets/ms, truncated: 1 ms at bw is
        // 167772·1000/2^24 = 9.99999 packets, floored to 9).
        let mut p = in_probe_bw(5);
        // STARTUP's rounds ACKed 100 packets at once. An epoch goes on while ACKs keep up
        // with bw, so a silence ends it; then ACKs of 2 at the bottleneck rate: k ACKs into
        // the epoch 2(k+1) packets were ACKed against ⌊1.99999·k⌋ = 2k − 1 expected, 3
        // extra; after ≥ 10 rounds (two 5-round halves of the max filter) the 100 is gone.
        ack_after_silence(&mut p);
        ack_steadily(&mut p, 2, 11);
        assert_eq!(p.bbr.extra_acked(), 3);
        assert_eq!(p.bbr.ack_aggregation_cwnd(), 3);
        // A receiver that ACKs every 20 segments (GRO's stretch ACKs), 2 ms apart: the first
        // finds the 2k + 2 ACKed so far below the ⌊1.99999·(k + 10)⌋ = 2k + 19 expected and
        // starts a new epoch with its 20; the next ones find 20(m+1) ACKed against
        // ⌊19.99995·m⌋ = 20m − 1 expected: 21 extra.
        ack_steadily(&mut p, 20, 2);
        assert_eq!(p.bbr.ack_aggregation_cwnd(), 21);
        // bbr_set_cwnd: 2·BDP = ceil(167772·10 000·2/2^24) = 200, + 21, + 3 TSO goals, up to
        // even, + 2 in the probing phase.
        let goal = Params::tso_segs_goal(&p.bbr, &p.tp);
        let want = ((200 + 21 + 3 * goal + 1) & !1) + if p.bbr.cycle_idx == 0 { 2 } else { 0 };
        assert_eq!(p.tp.cwnd, want, "tso goal {goal}");
    }

    #[test]
    fn the_aggregation_allowance_lasts_five_to_ten_rounds() {
        let mut p = in_probe_bw(6);
        ack_after_silence(&mut p);
        ack_steadily(&mut p, 2, 11);
        ack_steadily(&mut p, 20, 2);
        assert_eq!(p.bbr.ack_aggregation_cwnd(), 21);
        // A new epoch of ACKs of 2 writes 3 extra. The max filter keeps two halves of
        // bbr_extra_acked_win_rtts = 5 rounds and clears the older one when a half is over:
        // the 21, written in the current half, survives the next rotation and goes at the one
        // after, 6 to 10 round starts from now.
        ack_after_silence(&mut p);
        ack_steadily(&mut p, 2, 5);
        assert_eq!(
            p.bbr.ack_aggregation_cwnd(),
            21,
            "forgotten within 5 rounds"
        );
        ack_steadily(&mut p, 2, 5);
        assert_eq!(p.bbr.ack_aggregation_cwnd(), 3, "kept beyond 10 rounds");
    }

    #[test]
    fn the_allowance_stays_while_acks_keep_up_with_bw() {
        // bbr_update_ack_aggregation ends an epoch only when the ACKs fall behind bw·epoch
        // (or after 2^20 packets). A stretch ACK of 20 starts an epoch; m ACKs of 2 later
        // 20 + 2m packets were ACKed against ⌊1.99999·m⌋ = 2m − 1 expected: 21 extra,
        // written again on every ACK, however many rounds pass.
        let mut p = in_probe_bw(7);
        ack_after_silence(&mut p);
        ack_steadily(&mut p, 2, 11);
        ack_steadily(&mut p, 20, 1);
        ack_steadily(&mut p, 2, 30);
        assert_eq!(p.bbr.ack_aggregation_cwnd(), 21);
    }

    #[test]
    fn probe_rtt_after_ten_seconds_without_a_new_min_rtt_holds_four_packets_for_200_ms() {
        let mut p = in_probe_bw(2);
        // The rounds of `in_probe_bw` had RTT samples equal to min_rtt: with the `<` rule they
        // did not postpone PROBE_RTT, so the 10 s count from bbr_init (60 ms ago).
        let start_ms = p.bbr.min_rtt_stamp;
        assert_eq!(start_ms + 60, p.tp.jiffies());
        // RTT samples above the 10 ms minimum for 10 s.
        let mut t_ms = 0;
        while p.bbr.mode != Mode::ProbeRtt {
            p.tp.inflight = 100;
            p.ack(10_000, 10, 100, 12_000, 12_000);
            t_ms += 10;
            assert!(t_ms <= 10_020, "no PROBE_RTT after {t_ms} ms");
        }
        // "after(jiffies, stamp + 10 s)": strictly more than 10 000 ms.
        assert!(p.tp.jiffies() - start_ms > 10_000);
        assert!(p.tp.jiffies() - start_ms <= 10_010);
        assert_eq!(p.tp.cwnd, 4);
        let prior = p.bbr.prior_cwnd;
        assert!(prior > 100);
        // Inflight drains to 4: the 200 ms timer starts.
        p.tp.inflight = 4;
        p.ack(1000, 1, 4, 12_000, 10_500);
        let t0 = p.tp.jiffies();
        assert_eq!(p.bbr.probe_rtt_done_stamp, t0 + 200);
        // A round passes, but 200 ms have not: still PROBE_RTT, cwnd 4, flow marked app-limited.
        assert!(
            p.tp.app_limited != 0,
            "PROBE_RTT marks the flow app-limited"
        );
        let mut t = 0;
        while p.bbr.mode == Mode::ProbeRtt {
            p.round(10_000, 1);
            t += 10;
            if p.bbr.mode == Mode::ProbeRtt {
                assert_eq!(p.tp.cwnd, 4);
            }
            assert!(t <= 220, "PROBE_RTT did not end");
        }
        // after(jiffies, t0 + 200): the first 10 ms step beyond 200 ms.
        let held = p.tp.jiffies() - t0;
        assert!(held > 200 && held <= 210, "held {held} ms");
        assert_eq!(p.bbr.mode, Mode::ProbeBw);
        // cwnd restored to prior_cwnd, then capped by the target: the 12 ms samples made
        // bw = 100/12 000 µs = 8.33 packets/ms and min_rtt is now 10.5 ms, so 2·BDP ≈ 175.
        assert!(
            p.tp.cwnd >= 175 && p.tp.cwnd <= prior,
            "prior {prior}, got {}",
            p.tp.cwnd
        );
    }

    #[test]
    fn first_recovery_round_conserves_packets_and_exit_restores_cwnd() {
        let mut p = in_probe_bw(4);
        for _ in 0..20 {
            p.tp.inflight = 100;
            p.ack(500, 10, 100, 10_000, 10_000);
        }
        let before = p.tp.cwnd;
        // The core enters Recovery: ssthresh() saves cwnd, then the state changes.
        let _ = p.bbr.ssthresh(&mut p.tp);
        p.tp.ca_state = CaState::Recovery;
        p.tp.inflight = 60;
        p.tp.lost += 5;
        let rs = RateSample {
            prior_mstamp_us: Some(0),
            prior_delivered: 0,
            delivered: 100,
            interval_us: 10_000,
            rtt_us: 10_000,
            acked_sacked: 2,
            losses: 5,
            prior_in_flight: 67,
            ..RateSample::default()
        };
        p.bbr.cong_control(&mut p.tp, &rs);
        // Packet conservation: cwnd = inflight + acked = 62.
        assert_eq!(p.tp.cwnd, 62);
        p.tp.ca_state = CaState::Open;
        p.ack(500, 2, 100, 10_000, 10_000);
        // Restored to prior_cwnd, capped by the target (±2 of the probing phase's budget).
        assert!(p.tp.cwnd + 2 >= before, "restored {} ≥ {before}", p.tp.cwnd);
    }

    #[test]
    fn same_seed_same_cycle_start() {
        let a: Vec<usize> = (0..20).map(|s| in_probe_bw(s).bbr.cycle_idx).collect();
        let b: Vec<usize> = (0..20).map(|s| in_probe_bw(s).bbr.cycle_idx).collect();
        assert_eq!(a, b);
    }

    #[test]
    fn params_are_range_checked_with_the_name_first() {
        let mut p = Params::default();
        assert!(p.validate().is_ok());
        p.cwnd_gain = 2000;
        assert!(p.validate().unwrap_err().starts_with("cwnd_gain:"));
        let p = Params {
            cycle_rand: 8,
            ..Params::default()
        };
        assert!(p.validate().unwrap_err().starts_with("cycle_rand:"));
    }
}
