//! DCTCP as Linux implements it: net/ipv4/tcp_dctcp.c (`dctcp_init`, `dctcp_update_alpha`,
//! `dctcp_ssthresh`, `dctcp_react_to_loss`, `dctcp_state`, `dctcp_cwnd_event`,
//! `dctcp_cwnd_undo`), RFC 8257 §3.
//!
//! Once per window of data (snd_una passing the snd_nxt of the window's start) the marked
//! fraction F = delivered_ce/delivered updates α ← (1 − g)·α + g·F, in Linux's 1/1024 fixed
//! point with its `min_not_zero` quirk (α below 16 decays to 0 in one step). An ECE ACK
//! enters CWR with ssthresh = cwnd·(1 − α/2); a loss (Recovery, Linux ≥ 5.1) or an RTO halves
//! like Reno; growth is Reno's. The receiver side (the ECE state machine of RFC 8257 §3.2) is
//! in `crate::tcp::receiver` (`EcnFeedback::Dctcp`), chosen through `ecn_use()`.

use serde::{Deserialize, Serialize};

use super::{reno, AckEvent, CaEvent, CaState, CcProbe, CongestionControl, EcnUse, TcpState};

/// `DCTCP_MAX_ALPHA` = 1024 (α = 1.0).
pub const DCTCP_MAX_ALPHA: u32 = 1024;

/// Module parameters of tcp_dctcp.c with their Linux defaults.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Params {
    /// `dctcp_shift_g`: g = 1/2^shift_g (4 ⇒ 1/16), 0..=10.
    pub shift_g: u32,
    /// `dctcp_alpha_on_init`: α₀ in 1/1024 (1024 ⇒ the first reduction halves cwnd).
    pub alpha_on_init: u32,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            shift_g: 4,
            alpha_on_init: DCTCP_MAX_ALPHA,
        }
    }
}

impl Params {
    pub fn validate(&self) -> Result<(), String> {
        if self.shift_g > 10 {
            return Err(format!(
                "shift_g: {} must be 0..=10 (as the Linux module parameter)",
                self.shift_g
            ));
        }
        if self.alpha_on_init > DCTCP_MAX_ALPHA {
            return Err(format!(
                "alpha_on_init: {} must be 0..=1024",
                self.alpha_on_init
            ));
        }
        Ok(())
    }
}

/// `struct dctcp` (sender side).
#[derive(Clone, Debug)]
pub struct Dctcp {
    pub params: Params,
    /// α in 1/1024.
    pub alpha: u32,
    next_seq: u32,
    old_delivered: u64,
    old_delivered_ce: u64,
    loss_cwnd: u32,
}

impl Dctcp {
    pub fn new(params: Params) -> Self {
        let alpha = params.alpha_on_init.min(DCTCP_MAX_ALPHA);
        Dctcp {
            params,
            alpha,
            next_seq: 0,
            old_delivered: 0,
            old_delivered_ce: 0,
            loss_cwnd: 0,
        }
    }

    /// `dctcp_reset`: start a new observation window.
    fn reset_window(&mut self, tp: &TcpState) {
        self.next_seq = tp.snd_nxt;
        self.old_delivered = tp.delivered;
        self.old_delivered_ce = tp.delivered_ce;
    }

    /// `dctcp_update_alpha`.
    fn update_alpha(&mut self, tp: &TcpState) {
        if tp.snd_una < self.next_seq {
            return;
        }
        let delivered = (tp.delivered - self.old_delivered) as u32;
        let mut delivered_ce = (tp.delivered_ce - self.old_delivered_ce) as u32;
        let mut alpha = self.alpha;
        // alpha = (1 − g)·alpha + g·F, with min_not_zero(alpha, alpha >> g).
        let decay = alpha >> self.params.shift_g;
        alpha -= if decay == 0 { alpha } else { decay.min(alpha) };
        if delivered_ce > 0 {
            // g·F = (delivered_ce << (10 − shift_g)) / delivered.
            delivered_ce <<= 10 - self.params.shift_g;
            delivered_ce /= delivered.max(1);
            alpha = (alpha + delivered_ce).min(DCTCP_MAX_ALPHA);
        }
        self.alpha = alpha;
        self.reset_window(tp);
    }

    /// `dctcp_react_to_loss`: halve like Reno.
    fn react_to_loss(&mut self, tp: &mut TcpState) {
        self.loss_cwnd = tp.cwnd;
        tp.ssthresh = (tp.cwnd >> 1).max(2);
    }
}

impl CongestionControl for Dctcp {
    fn name(&self) -> &'static str {
        "dctcp"
    }

    /// `dctcp_init` (ECN is always negotiated: the CC forces it).
    fn init(&mut self, tp: &mut TcpState) {
        self.alpha = self.params.alpha_on_init.min(DCTCP_MAX_ALPHA);
        self.loss_cwnd = 0;
        self.reset_window(tp);
    }

    /// `dctcp_ssthresh`: cwnd·(1 − α/2).
    fn ssthresh(&mut self, tp: &mut TcpState) -> u32 {
        self.loss_cwnd = tp.cwnd;
        let cut = ((tp.cwnd as u64 * self.alpha as u64) >> 11) as u32;
        (tp.cwnd - cut).max(2)
    }

    fn cong_avoid(&mut self, tp: &mut TcpState, acked: u32) {
        reno::Reno.cong_avoid(tp, acked)
    }

    /// `dctcp_state`: entering Recovery halves (this overrides the α-based ssthresh).
    fn set_state(&mut self, tp: &mut TcpState, new_state: CaState) {
        if new_state == CaState::Recovery && new_state != tp.ca_state {
            self.react_to_loss(tp);
        }
    }

    /// `dctcp_cwnd_event(CA_EVENT_LOSS)`: an RTO halves too.
    fn cwnd_event(&mut self, tp: &mut TcpState, ev: CaEvent) {
        if ev == CaEvent::Loss {
            self.react_to_loss(tp);
        }
    }

    fn in_ack_event(&mut self, tp: &mut TcpState, _ev: &AckEvent) {
        self.update_alpha(tp);
    }

    /// `dctcp_cwnd_undo`.
    fn undo_cwnd(&mut self, tp: &TcpState) -> u32 {
        tp.cwnd.max(self.loss_cwnd)
    }

    fn ecn_use(&self) -> EcnUse {
        EcnUse::Dctcp
    }

    /// α as `dctcp_get_info` reports it (`ss -ti`'s `dctcp:(…,alpha:…)`, in 1/1024), here as a
    /// fraction.
    fn probe(&self, _tp: &TcpState) -> CcProbe {
        CcProbe {
            alpha: Some(self.alpha as f64 / DCTCP_MAX_ALPHA as f64),
            ..CcProbe::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(cwnd: u32) -> TcpState {
        let mut t = TcpState::new(1448, 0);
        t.cwnd = cwnd;
        t
    }

    /// Deliver one window of `n` segments of which `ce` were CE and close it.
    fn window(d: &mut Dctcp, t: &mut TcpState, n: u32, ce: u32) {
        t.snd_nxt += n;
        t.delivered += n as u64;
        t.delivered_ce += ce as u64;
        t.snd_una = d.next_seq.max(t.snd_una);
        d.in_ack_event(t, &AckEvent::default());
        t.snd_una = t.snd_nxt;
    }

    #[test]
    fn alpha_decays_by_one_sixteenth_per_unmarked_window() {
        // α₀ = 1024: after a window with F = 0, α = 1024 − 1024/16 = 960; then 900.
        let mut d = Dctcp::new(Params::default());
        let mut t = tp(10);
        d.init(&mut t);
        window(&mut d, &mut t, 10, 0);
        assert_eq!(d.alpha, 960);
        window(&mut d, &mut t, 10, 0);
        assert_eq!(d.alpha, 900);
    }

    #[test]
    fn alpha_below_16_drops_to_zero() {
        // min_not_zero quirk: 15 >> 4 = 0, so the whole α is subtracted.
        let mut d = Dctcp::new(Params {
            alpha_on_init: 15,
            ..Params::default()
        });
        let mut t = tp(10);
        d.init(&mut t);
        window(&mut d, &mut t, 10, 0);
        assert_eq!(d.alpha, 0);
    }

    #[test]
    fn fully_marked_window_adds_g() {
        // α = 512, F = 1: 512 − 32 + (10 << 6)/10 = 480 + 64 = 544.
        let mut d = Dctcp::new(Params {
            alpha_on_init: 512,
            ..Params::default()
        });
        let mut t = tp(10);
        d.init(&mut t);
        window(&mut d, &mut t, 10, 10);
        assert_eq!(d.alpha, 544);
    }

    #[test]
    fn alpha_converges_to_the_marked_fraction() {
        // F = 1/4 every window: α ← α − ⌊α/16⌋ + (25 << 6)/100 = α − ⌊α/16⌋ + 16. The real
        // fixed point is 256 (= 1024/4); with the integer decay every α with ⌊α/16⌋ = 16,
        // i.e. 256..=271, is a fixed point, and α falling from 1024 stops at the first one.
        let mut d = Dctcp::new(Params::default());
        let mut t = tp(100);
        d.init(&mut t);
        for _ in 0..300 {
            window(&mut d, &mut t, 100, 25);
        }
        assert!((256..=271).contains(&d.alpha), "α = {}", d.alpha);
    }

    #[test]
    fn ssthresh_scales_with_alpha() {
        let mut d = Dctcp::new(Params::default());
        // α = 1024: cwnd − cwnd·1024/2048 = half.
        assert_eq!(d.ssthresh(&mut tp(100)), 50);
        // α = 512: 100 − 100·512/2048 = 75 = cwnd·(1 − 1/4).
        d.alpha = 512;
        assert_eq!(d.ssthresh(&mut tp(100)), 75);
        d.alpha = 0;
        assert_eq!(d.ssthresh(&mut tp(100)), 100);
        assert_eq!(d.ssthresh(&mut tp(2)), 2);
    }

    #[test]
    fn entering_recovery_halves_whatever_alpha_says() {
        let mut d = Dctcp::new(Params {
            alpha_on_init: 0,
            ..Params::default()
        });
        let mut t = tp(100);
        t.ssthresh = d.ssthresh(&mut t);
        assert_eq!(t.ssthresh, 100);
        d.set_state(&mut t, CaState::Recovery);
        assert_eq!(t.ssthresh, 50);
        // RTO: the same halving.
        let mut t = tp(64);
        d.cwnd_event(&mut t, CaEvent::Loss);
        assert_eq!(t.ssthresh, 32);
    }

    #[test]
    fn params_are_range_checked() {
        assert!(Params {
            shift_g: 11,
            ..Params::default()
        }
        .validate()
        .unwrap_err()
        .starts_with("shift_g:"));
        assert!(Params {
            alpha_on_init: 2000,
            ..Params::default()
        }
        .validate()
        .unwrap_err()
        .starts_with("alpha_on_init:"));
    }
}
