//! RTT estimation and the retransmission timeout, as Linux computes them
//! (net/ipv4/tcp_input.c `tcp_rtt_estimator`, `tcp_set_rto`), in Linux's fixed
//! point: `srtt_us` holds 8·SRTT, `mdev_us` 4·mean deviation. Because `rttvar` never falls
//! below `rto_min`, the RTO is ≈ SRTT + max(200 ms, ~4·RTTVAR), not RFC 6298 §2.4's
//! max(200 ms, SRTT + 4·RTTVAR).

/// `TCP_RTO_MIN` = HZ/5 = 200 ms (include/net/tcp.h), µs.
pub const TCP_RTO_MIN_US: u64 = 200_000;
/// `TCP_RTO_MAX` = 120 s (include/net/tcp.h), µs.
pub const TCP_RTO_MAX_US: u64 = 120_000_000;
/// `TCP_TIMEOUT_INIT` = 1 s, the RTO before any RTT sample (RFC 6298 §2.1), µs.
pub const TCP_TIMEOUT_INIT_US: u64 = 1_000_000;
/// `TCP_TIMEOUT_MIN` = 2 jiffies = 2 ms (include/net/tcp.h), µs: added to the loss-probe and
/// RACK reordering timeouts.
pub const TCP_TIMEOUT_MIN_US: u64 = 2_000;

#[derive(Clone, Debug)]
pub struct RttEstimator {
    /// 8 × smoothed RTT, µs (0 = no sample yet).
    pub srtt_us: u64,
    /// 4 × mean deviation, µs.
    mdev_us: u64,
    /// Maximal mdev over the last window, µs.
    mdev_max_us: u64,
    /// Smoothed mdev_max: the RTTVAR used for the RTO, µs.
    pub rttvar_us: u64,
    /// snd_nxt when the current mdev window started (`rtt_seq`).
    rtt_seq: u32,
    /// Current RTO before backoff, µs (`icsk_rto` after `tcp_set_rto`).
    pub rto_us: u64,
}

impl Default for RttEstimator {
    fn default() -> Self {
        RttEstimator {
            srtt_us: 0,
            mdev_us: 0,
            mdev_max_us: 0,
            rttvar_us: 0,
            rtt_seq: 0,
            rto_us: TCP_TIMEOUT_INIT_US,
        }
    }
}

impl RttEstimator {
    /// Smoothed RTT, µs (0 before the first sample).
    pub fn srtt(&self) -> u64 {
        self.srtt_us >> 3
    }

    /// `tcp_rtt_estimator(sk, mrtt_us)` then `tcp_set_rto`. `snd_una`/`snd_nxt` drive the
    /// once-per-window decay of rttvar.
    pub fn sample(&mut self, mrtt_us: u64, snd_una: u32, snd_nxt: u32) {
        let mut m = mrtt_us as i64;
        let mut srtt = self.srtt_us as i64;
        if srtt != 0 {
            m -= srtt >> 3; // m is now the error in the RTT estimate
            srtt += m; // rtt = 7/8 rtt + 1/8 new
            if m < 0 {
                m = -m; // m is now abs(error)
                m -= (self.mdev_us >> 2) as i64; // similar update on mdev
                                                 // Eifel-like damping: when the RTT falls, mdev grows 8× more slowly
                                                 // (comment of tcp_rtt_estimator).
                if m > 0 {
                    m >>= 3;
                }
            } else {
                m -= (self.mdev_us >> 2) as i64;
            }
            self.mdev_us = (self.mdev_us as i64 + m) as u64; // mdev = 3/4 mdev + 1/4 new
            if self.mdev_us > self.mdev_max_us {
                self.mdev_max_us = self.mdev_us;
                if self.mdev_max_us > self.rttvar_us {
                    self.rttvar_us = self.mdev_max_us;
                }
            }
            if snd_una.wrapping_sub(self.rtt_seq) as i32 > 0 {
                if self.mdev_max_us < self.rttvar_us {
                    self.rttvar_us -= (self.rttvar_us - self.mdev_max_us) >> 2;
                }
                self.rtt_seq = snd_nxt;
                self.mdev_max_us = TCP_RTO_MIN_US;
            }
        } else {
            // First measurement: srtt = m, mdev = m/2 (stored ×4 ⇒ 2m).
            srtt = m << 3;
            self.mdev_us = (m << 1) as u64;
            self.rttvar_us = self.mdev_us.max(TCP_RTO_MIN_US);
            self.mdev_max_us = self.rttvar_us;
            self.rtt_seq = snd_nxt;
        }
        self.srtt_us = srtt.max(1) as u64;
        // __tcp_set_rto: srtt + rttvar; tcp_bound_rto caps it at TCP_RTO_MAX.
        self.rto_us = ((self.srtt_us >> 3) + self.rttvar_us).min(TCP_RTO_MAX_US);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_sample_gives_srtt_plus_rto_min() {
        // A 10 ms path: RTO = 10 ms + rto_min = 210 ms.
        let mut e = RttEstimator::default();
        assert_eq!(e.rto_us, 1_000_000); // TCP_TIMEOUT_INIT before any sample
        e.sample(10_000, 0, 10);
        assert_eq!(e.srtt(), 10_000);
        // mdev = 2·10 ms = 20 ms < 200 ms ⇒ rttvar = 200 ms.
        assert_eq!(e.rto_us, 210_000);
    }

    #[test]
    fn constant_rtt_keeps_rto_at_srtt_plus_200ms() {
        // With a constant 100 ms RTT the deviation decays to 0 and rttvar stays at its floor
        // rto_min: RTO = 100 + 200 = 300 ms.
        let mut e = RttEstimator::default();
        let mut una = 0;
        for i in 0..200 {
            una += 10;
            e.sample(100_000, una, una + 10 + i);
        }
        assert_eq!(e.srtt(), 100_000);
        assert_eq!(e.rto_us, 300_000);
    }

    #[test]
    fn large_variation_raises_rttvar_above_the_floor() {
        // Alternating 50 ms / 450 ms samples: |error| ≈ 200 ms, so 4·mdev ≈ 800 ms dominates the
        // 200 ms floor and the RTO lands well above srtt + 200 ms.
        let mut e = RttEstimator::default();
        let mut una = 0;
        for i in 0..100 {
            una += 10;
            e.sample(if i % 2 == 0 { 50_000 } else { 450_000 }, una, una + 10);
        }
        assert!(
            e.rto_us > e.srtt() + 400_000,
            "rto {} srtt {}",
            e.rto_us,
            e.srtt()
        );
    }

    #[test]
    fn rto_is_capped_at_120s() {
        let mut e = RttEstimator::default();
        e.sample(200_000_000, 0, 1);
        assert_eq!(e.rto_us, TCP_RTO_MAX_US);
    }
}
