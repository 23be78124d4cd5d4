//! Reno / NewReno as Linux runs it: the core machinery of `crate::tcp` plus three hooks of
//! net/ipv4/tcp_cong.c — `tcp_reno_cong_avoid`, `tcp_reno_ssthresh`, `tcp_reno_undo_cwnd`
//! (RFC 5681 §3.1). Differences from the RFC that matter:
//! ssthresh halves *cwnd* (not FlightSize), slow start and AI count segments delivered, so
//! delayed ACKs do not halve the growth rate.

use serde::{Deserialize, Serialize};

use super::{CongestionControl, TcpState};

/// Reno has no tunables.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Params {}

#[derive(Clone, Debug, Default)]
pub struct Reno;

impl Reno {
    pub fn new(_params: Params) -> Self {
        Reno
    }
}

impl CongestionControl for Reno {
    fn name(&self) -> &'static str {
        "reno"
    }

    /// `tcp_reno_ssthresh`: max(cwnd/2, 2).
    fn ssthresh(&mut self, tp: &mut TcpState) -> u32 {
        (tp.cwnd >> 1).max(2)
    }

    /// `tcp_reno_cong_avoid`.
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
        // In "safe" area, increase by 1 per cwnd segments acked.
        let w = tp.cwnd;
        tp.cong_avoid_ai(w, acked);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(cwnd: u32, ssthresh: u32) -> TcpState {
        let mut t = TcpState::new(1448, 0);
        t.cwnd = cwnd;
        t.ssthresh = ssthresh;
        t.is_cwnd_limited = true;
        t.max_packets_out = cwnd;
        t
    }

    #[test]
    fn slow_start_leftover_goes_to_additive_increase() {
        // cwnd 9, ssthresh 10, an ACK for 4 segments: slow start takes cwnd to 10 and leaves
        // 3 for AI (snd_cwnd_cnt = 3 of the 10 needed for the next +1).
        let mut r = Reno;
        let mut t = tp(9, 10);
        r.cong_avoid(&mut t, 4);
        assert_eq!((t.cwnd, t.snd_cwnd_cnt), (10, 3));
    }

    #[test]
    fn one_segment_per_cwnd_acked_whatever_the_ack_size() {
        // cwnd 20 in CA: 20 segments acked in ACKs of 1, 2 or 4 each add exactly one segment.
        for step in [1u32, 2, 4] {
            let mut r = Reno;
            let mut t = tp(20, 10);
            for _ in 0..(20 / step) {
                r.cong_avoid(&mut t, step);
            }
            assert_eq!(t.cwnd, 21, "ACKs of {step}");
        }
    }

    #[test]
    fn ssthresh_halves_cwnd_with_a_floor_of_two() {
        let mut r = Reno;
        assert_eq!(r.ssthresh(&mut tp(101, 0)), 50);
        assert_eq!(r.ssthresh(&mut tp(3, 0)), 2);
    }

    #[test]
    fn no_growth_when_not_cwnd_limited() {
        let mut r = Reno;
        let mut t = tp(20, 10);
        t.is_cwnd_limited = false;
        r.cong_avoid(&mut t, 20);
        assert_eq!(t.cwnd, 20);
    }
}
