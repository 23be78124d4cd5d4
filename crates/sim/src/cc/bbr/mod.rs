//! The BBR family: BBRv1 ([`v1`], mainline Linux `net/ipv4/tcp_bbr.c`), BBRv2 ([`v2`], google/bbr
//! v2alpha `net/ipv4/tcp_bbr2.c`) and BBRv3 ([`v3`], google/bbr v3 `net/ipv4/tcp_bbr.c`).
//!
//! The three sources are one lineage: v2 and v3 keep most of v1's functions verbatim and
//! change a few. This module holds what they share — `struct bbr`'s common fields ([`Bbr`]),
//! the pacing-rate and cwnd arithmetic, round-trip and ACK-aggregation bookkeeping, STARTUP's
//! full-pipe test, DRAIN and PROBE_RTT — each method named after the Linux function it ports.
//! [`bounds`] holds what v3 kept of v2 (the loss/ECN bounds and the four-phase PROBE_BW). A
//! version is its params struct: it implements [`Version`] (and [`bounds::Bounded`] for v2/v3),
//! which gives the shared code its tunables and the few functions the version's source
//! rewrote; `P::State` holds the fields the version added to `struct bbr`.
//!
//! Fixed point as in the C: bandwidth in packets/µs << 24 (`BW_SCALE`), gains and fractions in
//! 1/256 (`BBR_SCALE`), u32 wrapping sequence arithmetic with `before()`/`after()`. Jiffies
//! are ms (HZ = 1000); `sk_max_pacing_rate` and `snd_cwnd_clamp` are unlimited; the random
//! choices (`prandom_u32_max`, `get_random_u32_below`) are `reciprocal_scale` of the flow's
//! seeded stream, so runs are reproducible.

use rand_core::Rng as _;

use super::{CaEvent, CaState, RateSample, TcpState, TCP_INFINITE_SSTHRESH};

pub mod bounds;
pub mod v1;
pub mod v2;
pub mod v3;

/// BBRv1 is Linux's module `bbr`: its params and source are the registry's `bbr::Params` and
/// `bbr::SOURCE`, and [`Bbr`] without a type parameter is BBRv1.
pub use v1::{Params, SOURCE};

/// `BW_SCALE`: bandwidth is packets per µs << 24 (≈ 715 bit/s per unit at 1500 B).
pub const BW_SCALE: u32 = 24;
pub const BW_UNIT: u64 = 1 << BW_SCALE;
/// `BBR_SCALE`: gains and fractions in 1/256.
pub const BBR_SCALE: u32 = 8;
pub const BBR_UNIT: u32 = 1 << BBR_SCALE;
/// `GSO_MAX_SIZE` (v1: `GSO_LEGACY_MAX_SIZE`) = 64 KB, the device's burst limit.
const GSO_MAX_SIZE: u64 = 65_536;
/// `MAX_TCP_HEADER` = L1_CACHE_ALIGN(128 + MAX_HEADER) = 320 on x86-64 distribution configs.
const MAX_TCP_HEADER: u64 = 320;
/// `sk_pacing_shift` default (10: ≈ 1 ms of data per TSO skb).
const PACING_SHIFT: u32 = 10;
/// `bbr_ack_epoch_acked_reset_thresh` = 2^20 (and the 20-bit width of `ack_epoch_acked`).
const ACK_EPOCH_ACKED_RESET_THRESH: u32 = 1 << 20;

/// `before(seq1, seq2)` (include/net/tcp.h) on u32 sequence-like counters.
#[inline]
pub(crate) fn before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// `after(a, b)`: a is later than b (`before(b, a)`).
#[inline]
pub(crate) fn after(a: u32, b: u32) -> bool {
    before(b, a)
}

/// `bbr_rate_bytes_per_sec`: a rate in packets/µs << 24 with a gain and a pacing margin, in
/// bytes/s; the order of operations avoids u64 overflow up to 2.9 Tbit/s.
pub(crate) fn rate_bytes_per_sec(mss: u32, rate: u64, gain: u32, margin_percent: u64) -> u64 {
    let mut rate = rate.wrapping_mul(mss as u64);
    rate = rate.wrapping_mul(gain as u64);
    rate >>= BBR_SCALE;
    rate = rate.wrapping_mul(1_000_000 / 100 * (100 - margin_percent));
    rate >> BW_SCALE
}

/// `bbr_min_tso_segs` (v1, v2): one segment per TSO skb below `min_tso_rate` (bit/s), else two.
pub(crate) fn min_tso_segs_by_rate(tp: &TcpState, min_tso_rate: u64) -> u32 {
    if tp.pacing_rate < min_tso_rate >> 3 {
        1
    } else {
        2
    }
}

/// `enum bbr_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Ramp up the sending rate rapidly to fill the pipe.
    Startup,
    /// Drain any queue created during startup.
    Drain,
    /// Discover and share bandwidth: pace around the estimated bw.
    ProbeBw,
    /// Cut inflight to the minimum to probe min_rtt.
    ProbeRtt,
}

/// A BBR version: its params struct, with the tunables the shared code reads and the functions
/// its source rewrote (called from the shared ones with the whole connection state).
pub trait Version: Clone + std::fmt::Debug + Sized {
    /// The fields the version added to `struct bbr`.
    type State: Clone + std::fmt::Debug;
    /// `PACING_RATE_FLOOR`: v2 and v3 floor `bbr_rate_bytes_per_sec` at 1 byte/s, v1 does not.
    const PACING_RATE_FLOOR: u64;

    fn new_state(&self) -> Self::State;
    /// STARTUP pacing gain (`bbr_high_gain`; v3 `bbr_startup_pacing_gain`).
    fn startup_pacing_gain(&self) -> u32;
    /// STARTUP and DRAIN cwnd gain (v1 `bbr_high_gain`; v2/v3 `bbr_startup_cwnd_gain`).
    fn startup_cwnd_gain(&self) -> u32;
    fn drain_gain(&self) -> u32;
    fn cwnd_min_target(&self) -> u32;
    fn pacing_margin_percent(&self) -> u32;
    fn min_rtt_win_sec(&self) -> u32;
    fn probe_rtt_mode_ms(&self) -> u32;
    fn full_bw_thresh(&self) -> u32;
    fn full_bw_cnt(&self) -> u32;
    fn extra_acked_gain(&self) -> u32;
    fn extra_acked_win_rtts(&self) -> u32;
    fn extra_acked_max_us(&self) -> u32;
    /// `bbr_extra_acked_in_startup` (v1: no allowance before the pipe is full; v3: always).
    fn extra_acked_in_startup(&self) -> bool;
    /// `bbr_cwnd_tso_budget` (v2): floor cwnd at 3 TSO skbs (v3) rather than pad it by them (v1).
    fn cwnd_tso_budget(&self) -> bool;
    /// `bbr_probe_rtt_cwnd_gain`: PROBE_RTT cwnd as a fraction of the BDP; None = v1's (and v2's
    /// gain 0) fixed `cwnd_min_target`.
    fn probe_rtt_cwnd_gain(&self) -> Option<u32>;

    /// `bbr_max_bw`.
    fn max_bw(b: &Bbr<Self>) -> u32;
    /// `bbr_bw`: the bandwidth pacing and cwnd use.
    fn bw(b: &Bbr<Self>) -> u32;
    /// `bbr_tso_segs_goal`.
    fn tso_segs_goal(b: &Bbr<Self>, tp: &TcpState) -> u32;
    /// PROBE_BW's (pacing_gain, cwnd_gain) in `bbr_update_gains`.
    fn probe_bw_gains(b: &Bbr<Self>) -> (u32, u32);
    /// What `bbr_check_drain` does besides entering DRAIN (v2/v3 reset the congestion signals).
    fn enter_drain(_b: &mut Bbr<Self>) {}
    /// `bbr_check_drain`'s way out of DRAIN into PROBE_BW.
    fn exit_drain(b: &mut Bbr<Self>, tp: &TcpState);
    /// What `bbr_update_min_rtt` does besides entering PROBE_RTT (v2/v3 end the bw probe's
    /// ACK phase and start a round).
    fn enter_probe_rtt(_b: &mut Bbr<Self>, _tp: &TcpState) {}
    /// `bbr_check_probe_rtt_done` once PROBE_RTT is over: schedule the next one and leave.
    fn probe_rtt_done(b: &mut Bbr<Self>, tp: &TcpState);
}

/// `struct bbr`: the fields every version has; the version's own are in `v`.
#[derive(Clone, Debug)]
pub struct Bbr<P: Version = v1::Params> {
    pub params: P,
    rng: aqm::Rng,
    /// Min RTT in the `min_rtt_win_sec` window, µs.
    pub min_rtt_us: u32,
    /// When min_rtt_us was taken, jiffies.
    min_rtt_stamp: u32,
    /// End time of PROBE_RTT, jiffies (0: not yet at the PROBE_RTT inflight).
    probe_rtt_done_stamp: u32,
    /// `tx.delivered` at the end of the current round.
    next_rtt_delivered: u32,
    /// Start of the current gain-cycle phase, µs.
    cycle_mstamp: u64,
    pub mode: Mode,
    prev_ca_state: CaState,
    round_start: bool,
    idle_restart: bool,
    probe_rtt_round_done: bool,
    has_seen_rtt: bool,
    /// PROBE_BW phase: v1's index into its 8-gain cycle; v2/v3's `enum bbr_pacing_gain_phase`.
    pub cycle_idx: usize,
    pub pacing_gain: u32,
    pub cwnd_gain: u32,
    pub full_bw_reached: bool,
    full_bw_cnt: u32,
    /// cwnd without an RTT sample (v1 `TCP_INIT_CWND`; v2/v3 the initial cwnd, ≤ 127).
    init_cwnd: u32,
    /// cwnd before loss recovery or PROBE_RTT.
    prior_cwnd: u32,
    /// Recent bw, to estimate whether the pipe is full.
    full_bw: u32,
    // ACK aggregation.
    ack_epoch_mstamp: u64,
    extra_acked: [u16; 2],
    ack_epoch_acked: u32,
    extra_acked_win_rtts: u32,
    extra_acked_win_idx: usize,
    /// The version's own fields.
    pub v: P::State,
}

impl<P: Version> Bbr<P> {
    pub fn new(params: P, seed: u64) -> Self {
        Bbr {
            v: params.new_state(),
            params,
            rng: aqm::rng_from_seed(seed),
            min_rtt_us: u32::MAX,
            min_rtt_stamp: 0,
            probe_rtt_done_stamp: 0,
            next_rtt_delivered: 0,
            cycle_mstamp: 0,
            mode: Mode::Startup,
            prev_ca_state: CaState::Open,
            round_start: false,
            idle_restart: false,
            probe_rtt_round_done: false,
            has_seen_rtt: false,
            cycle_idx: 0,
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
        }
    }

    /// The part of `bbr_init` every version has (each sets `prior_cwnd`, `next_rtt_delivered`
    /// and its own fields around it).
    fn init_common(&mut self, tp: &mut TcpState) {
        tp.ssthresh = TCP_INFINITE_SSTHRESH;
        self.prev_ca_state = CaState::Open;
        self.probe_rtt_done_stamp = 0;
        self.probe_rtt_round_done = false;
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
    }

    /// `prandom_u32_max(n)` / `get_random_u32_below(n)`: uniform in 0..n (`reciprocal_scale` of
    /// a 32-bit draw).
    fn random_below(&mut self, n: u32) -> u32 {
        ((self.rng.next_u32() as u64 * n as u64) >> 32) as u32
    }

    /// `bbr_max_bw`: the windowed max recent bandwidth, packets/µs << 24.
    pub fn max_bw(&self) -> u32 {
        P::max_bw(self)
    }

    /// `bbr_bw`: the estimated bandwidth of the path.
    pub fn bw(&self) -> u32 {
        P::bw(self)
    }

    /// `bbr_extra_acked`: max extra acked in the past k–2k round trips.
    fn extra_acked(&self) -> u32 {
        self.extra_acked[0].max(self.extra_acked[1]) as u32
    }

    /// `bbr_bw_to_pacing_rate`: bw · gain less the pacing margin, bytes/s.
    fn bw_to_pacing_rate(&self, tp: &TcpState, bw: u32, gain: u32) -> u64 {
        rate_bytes_per_sec(
            tp.mss,
            bw as u64,
            gain,
            self.params.pacing_margin_percent() as u64,
        )
        .max(P::PACING_RATE_FLOOR)
    }

    /// `bbr_init_pacing_rate_from_rtt`: startup gain · init cwnd / RTT (1 ms without a sample).
    fn init_pacing_rate_from_rtt(&mut self, tp: &mut TcpState) {
        let rtt_us = if tp.srtt_us > 0 {
            // Linux: max(srtt_us >> 3, 1); tp.srtt_us is already unscaled.
            self.has_seen_rtt = true;
            tp.srtt_us.max(1)
        } else {
            1000
        };
        let bw = tp.cwnd as u64 * BW_UNIT / rtt_us as u64;
        tp.pacing_rate = self.bw_to_pacing_rate(tp, bw as u32, self.params.startup_pacing_gain());
    }

    /// `bbr_set_pacing_rate`: never lowered before the pipe is full.
    fn set_pacing_rate(&mut self, tp: &mut TcpState, bw: u32, gain: u32) {
        let rate = self.bw_to_pacing_rate(tp, bw, gain);
        if !self.has_seen_rtt && tp.srtt_us > 0 {
            self.init_pacing_rate_from_rtt(tp);
        }
        if self.full_bw_reached || rate > tp.pacing_rate {
            tp.pacing_rate = rate;
        }
    }

    /// `bbr_save_cwnd`: remember the last known good cwnd.
    fn save_cwnd(&mut self, tp: &TcpState) {
        if self.prev_ca_state < CaState::Recovery && self.mode != Mode::ProbeRtt {
            self.prior_cwnd = tp.cwnd;
        } else {
            self.prior_cwnd = self.prior_cwnd.max(tp.cwnd);
        }
    }

    /// `bbr_bdp`: ceil(bw · min_rtt · gain) in packets, rounded up "to avoid a negative feedback
    /// loop"; the initial cwnd without an RTT sample.
    fn bdp(&self, bw: u32, gain: u32) -> u32 {
        if self.min_rtt_us == u32::MAX {
            return self.init_cwnd;
        }
        let w = bw as u64 * self.min_rtt_us as u64;
        (w.wrapping_mul(gain as u64) >> BBR_SCALE).div_ceil(BW_UNIT) as u32
    }

    /// `bbr_quantization_budget`: room for 3 TSO skbs — v1 adds it and rounds up to even, v3
    /// floors cwnd at it and at `cwnd_min_target` (v2 either, by `cwnd_tso_budget`) — plus 2 in
    /// the probing phase (v1 cycle_idx 0, v2/v3 `BBR_BW_PROBE_UP`).
    fn quantization_budget(&self, tp: &TcpState, mut cwnd: u32) -> u32 {
        let tso_segs_goal = 3 * P::tso_segs_goal(self, tp);
        if self.params.cwnd_tso_budget() {
            cwnd = cwnd.max(tso_segs_goal).max(self.params.cwnd_min_target());
        } else {
            cwnd += tso_segs_goal;
            cwnd = (cwnd + 1) & !1;
        }
        if self.mode == Mode::ProbeBw && self.cycle_idx == 0 {
            cwnd += 2;
        }
        cwnd
    }

    /// `bbr_inflight`: BDP·gain with the quantization budget.
    fn inflight(&self, tp: &TcpState, bw: u32, gain: u32) -> u32 {
        self.quantization_budget(tp, self.bdp(bw, gain))
    }

    /// `bbr_packets_in_net_at_edt`: packets still in the network when the next skb departs
    /// (those already scheduled in the pacing layer have not left yet).
    fn packets_in_net_at_edt(&self, tp: &TcpState, inflight_now: u32) -> u32 {
        let now_ns = tp.now_ns;
        let edt_ns = tp.wstamp_ns.max(now_ns);
        let interval_us = (edt_ns - now_ns) / 1000;
        let interval_delivered = ((self.bw() as u64 * interval_us) >> BW_SCALE) as u32;
        let mut inflight_at_edt = inflight_now;
        if self.pacing_gain > BBR_UNIT {
            inflight_at_edt += P::tso_segs_goal(self, tp);
        }
        inflight_at_edt.saturating_sub(interval_delivered)
    }

    /// `bbr_ack_aggregation_cwnd`: the allowance for ACK aggregation, capped at
    /// `extra_acked_max_us` of data at bw.
    fn ack_aggregation_cwnd(&self) -> u32 {
        let p = &self.params;
        if p.extra_acked_gain() == 0 || !(self.full_bw_reached || p.extra_acked_in_startup()) {
            return 0;
        }
        let max_aggr_cwnd = (self.bw() as u64 * p.extra_acked_max_us() as u64 / BW_UNIT) as u32;
        ((p.extra_acked_gain() * self.extra_acked()) >> BBR_SCALE).min(max_aggr_cwnd)
    }

    /// `bbr_probe_rtt_cwnd`: v1's `cwnd_min_target`, v2/v3 max(cwnd_min_target, BDP·gain).
    fn probe_rtt_cwnd(&self) -> u32 {
        match self.params.probe_rtt_cwnd_gain() {
            None => self.params.cwnd_min_target(),
            Some(gain) => self.params.cwnd_min_target().max(self.bdp(self.bw(), gain)),
        }
    }

    /// `bbr_update_ack_aggregation`: the windowed max of data acked beyond bw · interval (with
    /// `extra_acked_in_startup` a one-round window before the pipe is full).
    fn update_ack_aggregation(&mut self, tp: &TcpState, rs: &RateSample) {
        let p = &self.params;
        if p.extra_acked_gain() == 0
            || rs.acked_sacked == 0
            || rs.delivered < 0
            || rs.interval_us <= 0
        {
            return;
        }
        let mut thresh = p.extra_acked_win_rtts();
        if self.round_start {
            self.extra_acked_win_rtts = (self.extra_acked_win_rtts + 1).min(0x1F);
            if p.extra_acked_in_startup() && !self.full_bw_reached {
                thresh = 1;
            }
            if self.extra_acked_win_rtts >= thresh {
                self.extra_acked_win_rtts = 0;
                self.extra_acked_win_idx ^= 1;
                self.extra_acked[self.extra_acked_win_idx] = 0;
            }
        }
        // tcp_stamp_us_delta: clamped at 0, returned as u32.
        let epoch_us =
            (tp.delivered_mstamp_us as i64 - self.ack_epoch_mstamp as i64).max(0) as u32 as u64;
        let mut expected_acked = (self.bw() as u64 * epoch_us / BW_UNIT) as u32;
        // Reset the epoch if the ACK rate is below the expected rate or the epoch is very old.
        if self.ack_epoch_acked <= expected_acked
            || self.ack_epoch_acked + rs.acked_sacked >= ACK_EPOCH_ACKED_RESET_THRESH
        {
            self.ack_epoch_acked = 0;
            self.ack_epoch_mstamp = tp.delivered_mstamp_us;
            expected_acked = 0;
        }
        self.ack_epoch_acked = (self.ack_epoch_acked + rs.acked_sacked).min(0xFFFFF);
        let extra_acked = (self.ack_epoch_acked - expected_acked).min(tp.cwnd);
        if extra_acked > self.extra_acked[self.extra_acked_win_idx] as u32 {
            // A u16 field in struct bbr.
            self.extra_acked[self.extra_acked_win_idx] = extra_acked as u16;
        }
    }

    /// `bbr_check_full_bw_reached` (v1, v2): the pipe is full after `full_bw_cnt`
    /// non-app-limited rounds without `full_bw_thresh` (25 %) growth of max_bw.
    fn check_full_bw_reached(&mut self, rs: &RateSample) {
        if self.full_bw_reached || !self.round_start || rs.is_app_limited {
            return;
        }
        let bw_thresh =
            ((self.full_bw as u64 * self.params.full_bw_thresh() as u64) >> BBR_SCALE) as u32;
        if self.max_bw() >= bw_thresh {
            self.full_bw = self.max_bw();
            self.full_bw_cnt = 0;
            return;
        }
        self.full_bw_cnt += 1;
        self.full_bw_reached = self.full_bw_cnt >= self.params.full_bw_cnt();
    }

    /// `bbr_check_drain`: STARTUP → DRAIN once the pipe is full; DRAIN → PROBE_BW once inflight
    /// is down to the BDP.
    fn check_drain(&mut self, tp: &mut TcpState) {
        if self.mode == Mode::Startup && self.full_bw_reached {
            self.mode = Mode::Drain;
            // ssthresh exported purely for monitoring.
            tp.ssthresh = self.inflight(tp, self.max_bw(), BBR_UNIT);
            P::enter_drain(self);
        }
        if self.mode == Mode::Drain
            && self.packets_in_net_at_edt(tp, tp.inflight)
                <= self.inflight(tp, self.max_bw(), BBR_UNIT)
        {
            P::exit_drain(self, tp);
        }
    }

    /// `bbr_check_probe_rtt_done`: restore cwnd and leave PROBE_RTT once its time is up.
    fn check_probe_rtt_done(&mut self, tp: &mut TcpState) {
        if !(self.probe_rtt_done_stamp != 0 && after(tp.jiffies(), self.probe_rtt_done_stamp)) {
            return;
        }
        tp.cwnd = tp.cwnd.max(self.prior_cwnd);
        P::probe_rtt_done(self, tp);
    }

    /// The PROBE_RTT half of `bbr_update_min_rtt`, once the version's filter said whether the
    /// PROBE_RTT timer expired: enter PROBE_RTT, hold the PROBE_RTT inflight for max(200 ms,
    /// 1 round), then leave.
    fn update_probe_rtt(&mut self, tp: &mut TcpState, rs: &RateSample, probe_rtt_expired: bool) {
        let now = tp.jiffies();
        if self.params.probe_rtt_mode_ms() > 0
            && probe_rtt_expired
            && !self.idle_restart
            && self.mode != Mode::ProbeRtt
        {
            self.mode = Mode::ProbeRtt;
            self.save_cwnd(tp);
            self.probe_rtt_done_stamp = 0;
            P::enter_probe_rtt(self, tp);
        }
        if self.mode == Mode::ProbeRtt {
            // Ignore low-rate samples during this mode.
            tp.app_limited = (tp.delivered + tp.inflight as u64).max(1);
            if self.probe_rtt_done_stamp == 0 && tp.inflight <= self.probe_rtt_cwnd() {
                // Jiffies are never 0 here in Linux; keep 0 meaning "unset".
                self.probe_rtt_done_stamp =
                    now.wrapping_add(self.params.probe_rtt_mode_ms()).max(1);
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
        // Restart after idle ends only once a new S/ACK for data arrives.
        if rs.delivered > 0 {
            self.idle_restart = false;
        }
    }

    /// `bbr_update_gains`.
    fn update_gains(&mut self) {
        let p = &self.params;
        (self.pacing_gain, self.cwnd_gain) = match self.mode {
            Mode::Startup => (p.startup_pacing_gain(), p.startup_cwnd_gain()),
            Mode::Drain => (p.drain_gain(), p.startup_cwnd_gain()),
            Mode::ProbeBw => P::probe_bw_gains(self),
            Mode::ProbeRtt => (BBR_UNIT, BBR_UNIT),
        };
    }

    /// `bbr_cwnd_event(CA_EVENT_TX_START)`: restarting from idle while application-limited,
    /// pace at the estimated bw (PROBE_BW) or end a PROBE_RTT that is due.
    fn restart_from_idle(&mut self, tp: &mut TcpState, ev: CaEvent) {
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

    /// The bandwidth estimate in bit/s for the time series, as `ss -i` computes it.
    fn bw_bps(&self, tp: &TcpState) -> f64 {
        self.bw() as f64 * tp.mss as f64 * 8.0 * 1e6 / BW_UNIT as f64
    }
}

/// Forwards the version trait's tunable accessors to the params struct's fields of that name.
macro_rules! forward {
    ($($f:ident: $t:ty),* $(,)?) => { $(fn $f(&self) -> $t { self.$f })* };
}
pub(crate) use forward;
