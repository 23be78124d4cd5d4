//! CUBIC as Linux implements it: net/ipv4/tcp_cubic.c "v2.3" (`cubictcp_cong_avoid`,
//! `bictcp_update`, `cubictcp_recalc_ssthresh`, `cubictcp_state`, `cubictcp_cwnd_event`,
//! `cubictcp_acked`), RFC 9438 for orientation.
//!
//! W(t) = C·(t − K)³ + W_max with C = 410/1024 ≈ 0.4 and β = 717/1024 ≈ 0.7, evaluated one
//! min-RTT ahead (`t + delay_min`), growth at most 1.5× per RTT (`cnt ≥ 2`), +5 % per RTT at
//! least before the first loss (`cnt ≤ 20`), never slower than the Reno-friendly estimate
//! (α = 3(1 − β)/(1 + β), Linux's integer `beta_scale` = 15 ⇒ 8/15 segments per RTT), fast
//! convergence, and HyStart ([`super::hystart`]). The arithmetic is Linux's integer
//! arithmetic in its units (jiffies at the kernel's `HZ`, time in 1/1024 s inside the cubic); the one
//! deviation is K = ∛(cube_factor·(W_max − cwnd)), computed with f64 `cbrt` and truncated,
//! where Linux uses a table and one Newton step (≈ 0.2 % apart).

use serde::{Deserialize, Serialize};

use super::hystart::{HyStart, HyStartParams};
use super::{CaEvent, CaState, CongestionControl, TcpState};

/// `BICTCP_BETA_SCALE`: β is in units of 1/1024.
const BICTCP_BETA_SCALE: u32 = 1024;
/// `BICTCP_HZ`: time inside the cubic is in units of 2^−10 s.
const BICTCP_HZ: u32 = 10;
/// The `HZ` values a kernel can be built with (`CONFIG_HZ`, kernel/Kconfig.hz).
const HZ_CHOICES: [u32; 4] = [100, 250, 300, 1000];

/// Module parameters of tcp_cubic.c with their Linux defaults.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Params {
    /// `beta`: multiplicative decrease factor, /1024 (717 ⇒ 0.7).
    pub beta: u32,
    /// `bic_scale`: C = bic_scale·10/1024 (41 ⇒ 0.4).
    pub bic_scale: u32,
    /// `fast_convergence`.
    pub fast_convergence: bool,
    /// `tcp_friendliness`.
    pub tcp_friendliness: bool,
    /// `hystart`.
    pub hystart: bool,
    /// `hystart_detect`: 1 ACK train, 2 delay, 3 both.
    pub hystart_detect: u32,
    /// `hystart_low_window`: HyStart is inactive below this cwnd, segments.
    pub hystart_low_window: u32,
    /// `hystart_ack_delta_us`: ACK-train spacing, µs.
    pub hystart_ack_delta_us: u32,
    /// The kernel's `CONFIG_HZ`: CUBIC's epoch, `last_time` and `delay_min` term count
    /// `tcp_jiffies32` ticks of 1/HZ s. 250 is Linux's default (kernel/Kconfig.hz, `default
    /// HZ_250`), which Debian's kernels and the emulator's keep; some distributions build 1000.
    pub hz: u32,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            beta: 717,
            bic_scale: 41,
            fast_convergence: true,
            tcp_friendliness: true,
            hystart: true,
            hystart_detect: 3,
            hystart_low_window: 16,
            hystart_ack_delta_us: 2000,
            hz: 250,
        }
    }
}

impl Params {
    pub fn validate(&self) -> Result<(), String> {
        if self.beta == 0 || self.beta >= BICTCP_BETA_SCALE {
            return Err(format!(
                "beta: {} must be in 1..=1023 (units of 1/1024)",
                self.beta
            ));
        }
        if self.bic_scale == 0 {
            return Err("bic_scale: must be positive".into());
        }
        if self.hystart_detect > 3 {
            return Err(format!(
                "hystart_detect: {} must be 0..=3",
                self.hystart_detect
            ));
        }
        if !HZ_CHOICES.contains(&self.hz) {
            return Err(format!(
                "hz: {} is not a CONFIG_HZ choice (100, 250, 300 or 1000)",
                self.hz
            ));
        }
        Ok(())
    }

    /// `cube_rtt_scale` = bic_scale·10.
    fn cube_rtt_scale(&self) -> u64 {
        self.bic_scale as u64 * 10
    }

    /// `beta_scale` = 8·(1024 + β)/3/(1024 − β): the Reno-friendly estimate grows by one per
    /// cwnd·beta_scale/8 segments acked (15 with β = 717 ⇒ α ≈ 8/15 per RTT).
    fn beta_scale(&self) -> u32 {
        8 * (BICTCP_BETA_SCALE + self.beta) / 3 / (BICTCP_BETA_SCALE - self.beta)
    }

    /// `cube_factor` = 2^(10 + 3·BICTCP_HZ) / cube_rtt_scale.
    fn cube_factor(&self) -> u64 {
        (1u64 << (10 + 3 * BICTCP_HZ)) / self.cube_rtt_scale()
    }
}

/// `struct bictcp`.
#[derive(Clone, Debug)]
pub struct Cubic {
    pub params: Params,
    /// Segments acked per cwnd increment.
    pub cnt: u32,
    /// W_max, segments.
    pub last_max_cwnd: u32,
    last_cwnd: u32,
    /// Jiffies of the last `cnt` update.
    last_time: u64,
    /// W at the plateau of the current curve.
    pub origin_point: u32,
    /// K in units of 1/1024 s.
    pub k: u64,
    /// Minimum RTT seen by CUBIC, µs (0 = none).
    pub delay_min_us: u32,
    /// Jiffies at which the current epoch started (None = no epoch: after a reduction).
    pub epoch_start: Option<u64>,
    ack_cnt: u32,
    /// The Reno-friendly window estimate W_est.
    pub tcp_cwnd: u32,
    pub hystart: HyStart,
}

impl Cubic {
    pub fn new(params: Params) -> Self {
        Cubic {
            params,
            cnt: 0,
            last_max_cwnd: 0,
            last_cwnd: 0,
            last_time: 0,
            origin_point: 0,
            k: 0,
            delay_min_us: 0,
            epoch_start: None,
            ack_cnt: 0,
            tcp_cwnd: 0,
            hystart: HyStart::default(),
        }
    }

    /// `bictcp_reset`.
    fn reset(&mut self) {
        let params = self.params.clone();
        *self = Cubic::new(params);
    }

    /// `jiffies` at time `ns`: ticks of 1/HZ s.
    fn jiffies(&self, ns: u64) -> u64 {
        (ns as u128 * self.params.hz as u128 / 1_000_000_000) as u64
    }

    /// `bictcp_update`: recompute `cnt` from the cubic curve and the Reno-friendly estimate.
    pub fn update(&mut self, tp: &TcpState, cwnd: u32, acked: u32) {
        let hz = self.params.hz as u64;
        let now = self.jiffies(tp.now_ns);
        self.ack_cnt += acked;
        // At most one update per HZ/32 jiffies (28 ms at HZ = 250) while cwnd is unchanged.
        if self.last_cwnd == cwnd && now.saturating_sub(self.last_time) <= hz / 32 {
            return;
        }
        // The cubic part updates `cnt` at most once per jiffy.
        if !(self.epoch_start.is_some() && now == self.last_time) {
            self.last_cwnd = cwnd;
            self.last_time = now;
            if self.epoch_start.is_none() {
                self.epoch_start = Some(now);
                self.ack_cnt = acked;
                self.tcp_cwnd = cwnd;
                if self.last_max_cwnd <= cwnd {
                    self.k = 0;
                    self.origin_point = cwnd;
                } else {
                    // K = ∛(cube_factor·(W_max − cwnd)), in 1/1024 s.
                    let x = self.params.cube_factor() as f64 * (self.last_max_cwnd - cwnd) as f64;
                    self.k = x.cbrt() as u64;
                    self.origin_point = self.last_max_cwnd;
                }
            }
            // t = now − epoch_start + delay_min, in 1/1024 s (usecs_to_jiffies rounds up).
            let delay_min_j = (self.delay_min_us as u64 * hz).div_ceil(1_000_000);
            let t = ((now - self.epoch_start.unwrap() + delay_min_j) << BICTCP_HZ) / hz;
            let offs = t.abs_diff(self.k);
            // delta = C·(t − K)³ in segments: cube_rtt_scale·offs³ >> (10 + 3·BICTCP_HZ).
            let delta = (self.params.cube_rtt_scale() as u128 * (offs as u128).pow(3))
                >> (10 + 3 * BICTCP_HZ);
            let delta = delta.min(u32::MAX as u128) as u64;
            let target = if t < self.k {
                (self.origin_point as u64).saturating_sub(delta)
            } else {
                self.origin_point as u64 + delta
            };
            self.cnt = if target > cwnd as u64 {
                (cwnd as u64 / (target - cwnd as u64)) as u32
            } else {
                // Very small increment.
                100 * cwnd
            };
            // Before the first loss the bandwidth is unknown: at least +5 % per RTT.
            if self.last_max_cwnd == 0 && self.cnt > 20 {
                self.cnt = 20;
            }
        }
        // TCP friendliness: never grow slower than Reno would.
        if self.params.tcp_friendliness {
            let delta = (cwnd * self.params.beta_scale()) >> 3;
            if delta > 0 {
                while self.ack_cnt > delta {
                    self.ack_cnt -= delta;
                    self.tcp_cwnd += 1;
                }
            }
            if self.tcp_cwnd > cwnd {
                let max_cnt = cwnd / (self.tcp_cwnd - cwnd);
                self.cnt = self.cnt.min(max_cnt);
            }
        }
        // At most 1 segment per 2 acked: growth ≤ 1.5× per RTT.
        self.cnt = self.cnt.max(2);
    }
}

impl CongestionControl for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
    }

    /// `cubictcp_init`.
    fn init(&mut self, tp: &mut TcpState) {
        self.reset();
        if self.params.hystart {
            self.hystart.reset(tp);
        }
    }

    /// `cubictcp_recalc_ssthresh`: ends the epoch, sets W_max (with fast convergence).
    fn ssthresh(&mut self, tp: &mut TcpState) -> u32 {
        let cwnd = tp.cwnd;
        self.epoch_start = None;
        self.last_max_cwnd = if cwnd < self.last_max_cwnd && self.params.fast_convergence {
            // W_max = cwnd·(1 + β)/2.
            ((cwnd as u64 * (BICTCP_BETA_SCALE + self.params.beta) as u64)
                / (2 * BICTCP_BETA_SCALE) as u64) as u32
        } else {
            cwnd
        };
        ((cwnd as u64 * self.params.beta as u64 / BICTCP_BETA_SCALE as u64) as u32).max(2)
    }

    /// `cubictcp_cong_avoid`.
    fn cong_avoid(&mut self, tp: &mut TcpState, acked: u32) {
        if !tp.is_cwnd_limited() {
            return;
        }
        let mut acked = acked;
        if tp.in_slow_start() {
            acked = tp.slow_start(acked);
            if acked == 0 {
                return;
            }
        }
        let cwnd = tp.cwnd;
        self.update(tp, cwnd, acked);
        let cnt = self.cnt;
        tp.cong_avoid_ai(cnt, acked);
    }

    /// `cubictcp_state`: an RTO forgets everything (W_max included) and restarts HyStart.
    fn set_state(&mut self, tp: &mut TcpState, new_state: CaState) {
        if new_state == CaState::Loss {
            self.reset();
            self.hystart.reset(tp);
        }
    }

    /// `cubictcp_cwnd_event(CA_EVENT_TX_START)`: after an idle period, shift the epoch so the
    /// curve does not jump.
    fn cwnd_event(&mut self, tp: &mut TcpState, ev: CaEvent) {
        if ev == CaEvent::TxStart {
            let now = self.jiffies(tp.now_ns);
            let last_send = self.jiffies(tp.lsndtime_ns);
            if let Some(e) = self.epoch_start {
                if now > last_send {
                    self.epoch_start = Some((e + (now - last_send)).min(now));
                }
            }
        }
    }

    /// `cubictcp_acked`: track delay_min and run HyStart in slow start.
    fn pkts_acked(&mut self, tp: &mut TcpState, sample: &super::AckSample) {
        let Some(rtt) = sample.rtt_us else { return };
        // Discard delay samples right after a reduction (1 s).
        if let Some(e) = self.epoch_start {
            if self.jiffies(tp.now_ns).saturating_sub(e) < self.params.hz as u64 {
                return;
            }
        }
        let delay = rtt.max(1);
        if self.delay_min_us == 0 || self.delay_min_us > delay {
            self.delay_min_us = delay;
        }
        if self.params.hystart && !self.hystart.found && tp.in_slow_start() {
            let p = HyStartParams {
                detect: self.params.hystart_detect,
                low_window: self.params.hystart_low_window,
                ack_delta_us: self.params.hystart_ack_delta_us,
            };
            self.hystart.update(tp, delay, self.delay_min_us, &p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::{AckSample, TCP_INFINITE_SSTHRESH};

    fn tp_at(ms: u64, cwnd: u32) -> TcpState {
        let mut t = TcpState::new(1448, ms * 1_000_000);
        t.cwnd = cwnd;
        t.ssthresh = 1;
        t.is_cwnd_limited = true;
        t.max_packets_out = cwnd;
        t
    }

    #[test]
    fn constants_match_linux() {
        let p = Params::default();
        // cube_rtt_scale = 41·10 = 410 ⇒ C = 410/1024 = 0.4004; beta_scale = 8·1741/3/307 = 15.
        assert_eq!(p.cube_rtt_scale(), 410);
        assert_eq!(p.beta_scale(), 15);
        assert_eq!(p.cube_factor(), (1u64 << 40) / 410);
    }

    #[test]
    fn ssthresh_is_0_7_cwnd_and_fast_convergence_lowers_wmax() {
        let mut c = Cubic::new(Params::default());
        // First loss at cwnd 100: W_max = 100, ssthresh = 100·717/1024 = 70.
        assert_eq!(c.ssthresh(&mut tp_at(0, 100)), 70);
        assert_eq!(c.last_max_cwnd, 100);
        // Next loss below W_max (at 80): fast convergence, W_max = 80·1741/2048 = 68.
        assert_eq!(c.ssthresh(&mut tp_at(0, 80)), 56);
        assert_eq!(c.last_max_cwnd, 68);
        assert_eq!(c.ssthresh(&mut tp_at(0, 2)), 2);
    }

    #[test]
    fn k_and_the_window_follow_the_cubic_curve() {
        // W_max = 100, cwnd = 70 after the reduction: K = ∛(30/0.4004) s = 4.216 s
        // ≈ 4317/1024 s. The target one min-RTT (100 ms) ahead at t seconds into the epoch is
        // 100 + 0.4004·(t + 0.1 − 4.216)³.
        let mut c = Cubic::new(Params::default());
        c.last_max_cwnd = 100;
        c.delay_min_us = 100_000;
        let t0 = 10_000;
        c.update(&tp_at(t0, 70), 70, 1);
        assert_eq!(c.origin_point, 100);
        let k_s = c.k as f64 / 1024.0;
        assert!((k_s - (30.0f64 / 0.4004).cbrt()).abs() < 0.002, "K = {k_s}");
        // At t = 2 s with cwnd 90, in Linux's units: t = 2100 ms → 2150/1024 s, K = 4317/1024,
        // offs = 2167, delta = 410·2167³ >> 40 = ⌊3.79⌋ = 3 segments below the plateau, so
        // the target is 97 and cnt = ⌊90 / (97 − 90)⌋ = 12.
        c.update(&tp_at(t0 + 2000, 90), 90, 1);
        assert_eq!(c.cnt, 12);
        // At t = 6 s with cwnd 100: t = 6246, offs = 1929, delta = ⌊410·1929³/2^40⌋ = ⌊2.68⌋
        // = 2 ⇒ target 102 ⇒ cnt = 100/2 = 50.
        c.update(&tp_at(t0 + 6000, 100), 100, 1);
        assert_eq!(c.cnt, 50);
    }

    #[test]
    fn the_cubic_term_is_recomputed_at_most_once_per_jiffy() {
        // W_max = 100, cwnd 70, delay_min 100 ms, K = ⌊∛(⌊2^40/410⌋·30)⌋ = 4316/1024 s.
        // First update at 10 000 ms: t = 100 ms = 102/1024 s (⌊(25 << 10)/250⌋ at HZ = 250,
        // ⌊(100 << 10)/1000⌋ at HZ = 1000), offs = 4214, delta = ⌊410·4214³/2^40⌋ = 27, target
        // 73, cnt = ⌊70/3⌋ = 23. At 10 003 ms with cwnd 71: at HZ = 250 it is the same jiffy
        // (2500), so only the Reno-friendly part runs and cnt stays 23; at HZ = 1000 the cubic
        // term is recomputed: t = ⌊(103 << 10)/1000⌋ = 105, delta 27, cnt = ⌊71/2⌋ = 35.
        for (hz, cnt) in [(250, 23), (1000, 35)] {
            let mut c = Cubic::new(Params {
                hz,
                ..Params::default()
            });
            c.last_max_cwnd = 100;
            c.delay_min_us = 100_000;
            c.update(&tp_at(10_000, 70), 70, 1);
            assert_eq!(c.cnt, 23, "HZ = {hz}");
            c.update(&tp_at(10_003, 71), 71, 1);
            assert_eq!(c.cnt, cnt, "HZ = {hz}");
        }
    }

    #[test]
    fn hz_must_be_a_config_hz_choice() {
        assert!(Params::default().validate().is_ok());
        let e = Params {
            hz: 200,
            ..Params::default()
        }
        .validate()
        .unwrap_err();
        assert!(e.starts_with("hz: 200"), "{e}");
    }

    #[test]
    fn before_the_first_loss_growth_is_at_least_5_percent_per_rtt() {
        let mut c = Cubic::new(Params::default());
        c.update(&tp_at(5000, 100), 100, 1);
        assert_eq!(c.cnt, 20);
    }

    #[test]
    fn reno_friendly_region_grows_about_half_a_segment_per_rtt() {
        // A flat cubic (W_max = cwnd, t ≈ K) gives cnt = 100·cwnd; the Reno-friendly estimate
        // gains one segment per cwnd·15/8 acked. After acking 4·cwnd segments (≈4 RTTs) it is
        // 2 segments ahead: ⌊4·100 / 187⌋ = 2, so cnt is capped at cwnd/2 = 50.
        let mut c = Cubic::new(Params::default());
        c.last_max_cwnd = 100;
        c.update(&tp_at(1000, 100), 100, 1);
        for i in 1..=400 {
            c.update(&tp_at(1000 + i, 100), 100, 1);
        }
        assert_eq!(c.tcp_cwnd, 102);
        assert_eq!(c.cnt, 50);
    }

    #[test]
    fn growth_is_capped_at_one_segment_per_two_acked() {
        let mut c = Cubic::new(Params::default());
        c.last_max_cwnd = 1000;
        c.update(&tp_at(100_000, 10), 10, 1);
        // Far below W_max with K long past is impossible here; force a huge target instead.
        c.epoch_start = Some(0);
        c.last_time = 0;
        c.last_cwnd = 0;
        c.update(&tp_at(100_000, 10), 10, 1);
        assert_eq!(c.cnt, 2);
    }

    #[test]
    fn rto_resets_everything() {
        let mut c = Cubic::new(Params::default());
        c.last_max_cwnd = 500;
        c.delay_min_us = 1000;
        let mut t = tp_at(0, 10);
        c.set_state(&mut t, CaState::Loss);
        assert_eq!(
            (c.last_max_cwnd, c.delay_min_us, c.epoch_start),
            (0, 0, None)
        );
    }

    #[test]
    fn hystart_delay_detector_exits_slow_start() {
        // delay_min = 20 ms ⇒ threshold clamp(20/8 = 2.5 ms, 4, 16) = 4 ms. Eight samples
        // are taken first; the ninth sample's round minimum 25 ms > 24 ms ends slow start with
        // ssthresh = cwnd. No exit below cwnd 16 (hystart_low_window).
        let mut c = Cubic::new(Params {
            hystart_detect: 2,
            ..Params::default()
        });
        let mut t = tp_at(0, 10);
        t.ssthresh = u32::MAX / 2;
        c.init(&mut t);
        c.pkts_acked(
            &mut t,
            &AckSample {
                pkts_acked: 1,
                rtt_us: Some(20_000),
                in_flight: 0,
            },
        );
        for _ in 0..20 {
            c.pkts_acked(
                &mut t,
                &AckSample {
                    pkts_acked: 1,
                    rtt_us: Some(30_000),
                    in_flight: 0,
                },
            );
        }
        assert!(!c.hystart.found, "inactive below 16 segments");
        t.cwnd = 32;
        for i in 0..9 {
            c.pkts_acked(
                &mut t,
                &AckSample {
                    pkts_acked: 1,
                    rtt_us: Some(25_000),
                    in_flight: 0,
                },
            );
            assert_eq!(c.hystart.found, i == 8, "sample {i}");
        }
        assert_eq!(t.ssthresh, 32);
    }

    #[test]
    fn hystart_does_not_exit_while_the_rtt_stays_within_the_threshold() {
        let mut c = Cubic::new(Params {
            hystart_detect: 2,
            ..Params::default()
        });
        let mut t = tp_at(0, 32);
        t.ssthresh = u32::MAX / 2;
        c.init(&mut t);
        for _ in 0..50 {
            c.pkts_acked(
                &mut t,
                &AckSample {
                    pkts_acked: 1,
                    rtt_us: Some(20_000),
                    in_flight: 0,
                },
            );
            c.pkts_acked(
                &mut t,
                &AckSample {
                    pkts_acked: 1,
                    rtt_us: Some(23_900),
                    in_flight: 0,
                },
            );
        }
        assert!(!c.hystart.found);
    }

    #[test]
    fn hystart_rounds_start_at_the_first_ack_below_the_low_window() {
        // Linux ≥ 5.7 `hystart_update`: the round bookkeeping runs on every slow-start ACK,
        // the detectors only from cwnd 16 (`hystart_low_window`) up. ACK-train detector only;
        // unpaced; delay_min 20 ms; ack_delay = min(1 ms, 4·65536 B / 10⁹ B/s) = 262 µs, so the
        // train threshold is (20 000 + 262)/2 = 10 131 µs. IW 10 is out (snd_nxt 10); ACK k
        // (k = 0, 1, …) comes at 20 + 0.5·k ms, acks one segment (snd_una = k + 1), and the
        // window then sends two (cwnd = 10 + k, snd_nxt = 10 + 2k at the next ACK).
        // Rounds: k = 0 starts one ending past seq 10; k = 10 (25 ms) one ending past seq 30;
        // k = 30 (35 ms) one ending past seq 70. The first two are shorter than 10 131 µs, so
        // the third fires, on the first ACK more than 10 131 µs after 35 ms: k = 51 (45.5 ms),
        // cwnd 61. (Counting rounds only from cwnd 16, k = 6, gives rounds from 23 and 31 ms
        // and an exit at 41.5 ms, k = 43, cwnd 53.)
        let mut c = Cubic::new(Params {
            hystart_detect: 1,
            ..Params::default()
        });
        let mut t = tp_at(0, 10);
        t.ssthresh = TCP_INFINITE_SSTHRESH;
        t.pacing_rate = 1_000_000_000;
        t.snd_nxt = 0;
        c.init(&mut t);
        t.snd_nxt = 10;
        let mut exit = None;
        for k in 0..80u64 {
            t.now_ns = 20_000_000 + k * 500_000;
            t.snd_una = k as u32 + 1;
            t.cwnd = 10 + k as u32;
            c.pkts_acked(
                &mut t,
                &AckSample {
                    pkts_acked: 1,
                    rtt_us: Some(20_000),
                    in_flight: 0,
                },
            );
            if c.hystart.found {
                exit = Some((k, t.ssthresh));
                break;
            }
            t.snd_nxt = 10 + 2 * (k as u32 + 1);
        }
        assert_eq!(exit, Some((51, 61)));
    }

    #[test]
    fn hystart_ack_train_exits_when_a_round_lasts_half_the_min_delay() {
        // Unpaced: threshold = (delay_min + ack_delay)/2 with ack_delay = min(1 ms, 4·64 KB /
        // rate) = 1 ms at 100 MB/s ⇒ (20 + 1)/2 = 10.5 ms. ACKs 1 ms apart from the round
        // start: the first one past 10.5 ms (at 11 ms) ends slow start.
        let mut c = Cubic::new(Params {
            hystart_detect: 1,
            ..Params::default()
        });
        let mut t = tp_at(0, 32);
        t.ssthresh = u32::MAX / 2;
        t.pacing_rate = 100_000_000;
        t.snd_nxt = 1000;
        c.init(&mut t);
        c.delay_min_us = 20_000;
        for ms in 1..=11 {
            t.now_ns = ms * 1_000_000;
            c.hystart.update(
                &mut t,
                20_000,
                20_000,
                &HyStartParams {
                    detect: 1,
                    low_window: 16,
                    ack_delta_us: 2000,
                },
            );
            assert_eq!(c.hystart.found, ms == 11, "at {ms} ms");
        }
    }
}
