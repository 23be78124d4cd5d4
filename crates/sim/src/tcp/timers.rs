//! The retransmission-timer slot and what it runs (Linux's `icsk_retransmit_timer`, shared
//! by the RTO, the tail-loss probe and RACK's reordering timeout): the RTO (RFC 6298;
//! net/ipv4/tcp_timer.c `tcp_retransmit_timer`, tcp_input.c `tcp_enter_loss`,
//! `tcp_timeout_mark_lost`; tcp_output.c `tcp_rearm_rto`) and the tail-loss probe (RFC 8985
//! §7; tcp_output.c `tcp_schedule_loss_probe`, `tcp_send_loss_probe`; tcp_input.c
//! `tcp_process_tlp_ack`). The reordering timeout is RACK's (`rack.rs`).

use crate::cc::{CaEvent, CaState, CongestionControl};
use crate::engine::{Event, Nanos, Scheduler};
use crate::packet::DataPkt;
use crate::tcp::rtt::{TCP_RTO_MAX_US, TCP_RTO_MIN_US, TCP_TIMEOUT_INIT_US, TCP_TIMEOUT_MIN_US};
use crate::tcp::scoreboard::sb;
use crate::tcp::Sender;

/// What occupies the retransmission-timer slot (Linux `icsk_pending`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum XmitTimer {
    Rto,
    LossProbe,
    ReoTimeout,
}

impl Sender {
    /// Give the slot to `kind`, due at `at`.
    pub(super) fn arm_xmit(&mut self, sched: &mut Scheduler, kind: XmitTimer, at: Nanos) {
        self.xmit_kind = kind;
        self.xmit_timer
            .arm(sched, at, Event::SenderTimer(self.flow));
    }

    /// `tcp_rearm_rto`: the RTO counts from now, or — if a probe or reordering timer held the
    /// slot — from the head segment's transmission.
    pub(super) fn rearm_rto(&mut self, sched: &mut Scheduler) {
        if self.tp.packets_out == 0 {
            self.xmit_timer.disarm();
            return;
        }
        let now = sched.now();
        let mut rto_us = self.cur_rto_us;
        if self.xmit_timer.is_armed() && self.xmit_kind != XmitTimer::Rto {
            let head_sent = self.segs.front().map_or(now, |s| s.sent_ns);
            let at = head_sent + self.cur_rto_us * 1000;
            rto_us = (at.saturating_sub(now) / 1000).max(1);
        }
        self.arm_xmit(
            sched,
            XmitTimer::Rto,
            now + rto_us.min(TCP_RTO_MAX_US) * 1000,
        );
    }

    /// `tcp_schedule_loss_probe`: PTO = 2·SRTT + (1 segment out ? rto_min : 2 ms), no later
    /// than the RTO. Only in Open and CWR.
    pub(super) fn schedule_loss_probe(
        &mut self,
        sched: &mut Scheduler,
        advancing_rto: bool,
    ) -> bool {
        if self.tp.packets_out == 0 || !matches!(self.tp.ca_state, CaState::Open | CaState::Cwr) {
            return false;
        }
        let now = sched.now();
        let srtt = self.rtt.srtt();
        let mut timeout_us = if srtt > 0 {
            2 * srtt
                + if self.tp.packets_out == 1 {
                    TCP_RTO_MIN_US
                } else {
                    TCP_TIMEOUT_MIN_US
                }
        } else {
            TCP_TIMEOUT_INIT_US
        };
        let rto_delta_us: i64 = if advancing_rto {
            self.cur_rto_us as i64
        } else {
            let head_sent = self.segs.front().map_or(now, |s| s.sent_ns);
            (head_sent + self.cur_rto_us * 1000) as i64 / 1000 - (now / 1000) as i64
        };
        if rto_delta_us > 0 {
            timeout_us = timeout_us.min(rto_delta_us as u64);
        }
        self.arm_xmit(sched, XmitTimer::LossProbe, now + timeout_us * 1000);
        true
    }

    /// `tcp_set_xmit_timer`.
    pub(super) fn set_xmit_timer(&mut self, sched: &mut Scheduler) {
        if !self.schedule_loss_probe(sched, true) {
            self.rearm_rto(sched);
        }
    }

    /// The retransmission-timer slot fired.
    pub fn on_xmit_timer(&mut self, sched: &mut Scheduler, out: &mut Vec<DataPkt>) {
        let now = sched.now();
        if !self
            .xmit_timer
            .on_fire(sched, now, Event::SenderTimer(self.flow))
            || self.report.finished_at.is_some()
        {
            return;
        }
        self.sync_tp(now);
        match self.xmit_kind {
            XmitTimer::Rto => self.retransmit_timer(sched, out),
            XmitTimer::LossProbe => self.send_loss_probe(sched, out),
            XmitTimer::ReoTimeout => self.rack_reo_timeout(sched, out),
        }
    }

    /// `tcp_retransmit_timer` → `tcp_enter_loss`.
    fn retransmit_timer(&mut self, sched: &mut Scheduler, out: &mut Vec<DataPkt>) {
        if self.tp.packets_out == 0 {
            return;
        }
        self.report.stats.rto_count += 1;
        self.enter_loss(sched.now());
        self.transmit(sched, out);
        self.retransmits += 1;
        // Exponential backoff, capped at TCP_RTO_MAX.
        self.cur_rto_us = (self.cur_rto_us << 1).min(TCP_RTO_MAX_US);
        let now = sched.now();
        self.arm_xmit(sched, XmitTimer::Rto, now + self.cur_rto_us * 1000);
    }

    /// `tcp_enter_loss` with `tcp_timeout_mark_lost`.
    fn enter_loss(&mut self, now: Nanos) {
        let new_episode = self.tp.ca_state <= CaState::Disorder
            || self.tp.snd_una >= self.high_seq
            || (self.tp.ca_state == CaState::Loss && self.retransmits == 0);
        // Mark every outstanding un-SACKed segment lost, except ones sent within the RACK RTT
        // (the head always).
        let una = self.tp.snd_una;
        for seq in una..self.tp.snd_nxt {
            let s = *self.seg(seq);
            if s.flags & sb::SACKED != 0 {
                continue;
            }
            let recent = (self.rack.rtt_us as i64 - ((now - s.sent_ns) / 1000) as i64) > 0;
            if seq != una && recent {
                continue;
            }
            self.mark_lost(seq);
            self.ts_remove(seq);
        }
        self.sync_tp(now);
        if new_episode {
            self.tp.prior_cwnd = self.tp.cwnd;
            self.tp.ssthresh = self.cc.ssthresh(&mut self.tp);
            self.cc.cwnd_event(&mut self.tp, CaEvent::Loss);
        }
        self.tp.cwnd = self.inflight() + 1;
        self.tp.snd_cwnd_cnt = 0;
        self.set_ca_state(CaState::Loss);
        self.high_seq = self.tp.snd_nxt;
        self.tlp_high_seq = None;
        if self.ecn_ok {
            self.queue_cwr = true;
        }
    }

    /// `tcp_send_loss_probe`: new data if any (even beyond cwnd), else the last segment again.
    fn send_loss_probe(&mut self, sched: &mut Scheduler, out: &mut Vec<DataPkt>) {
        let now = sched.now();
        if self.tlp_high_seq.is_none() && self.tp.packets_out > 0 {
            let probe = if self.has_new_data() {
                self.tlp_retrans = false;
                Some(self.send_new(now, sched))
            } else {
                let last = self.tp.snd_nxt - 1;
                if self.seg(last).flags & (sb::SACKED | sb::RETRANS_OUT) == 0 {
                    self.tlp_retrans = true;
                    Some(self.retransmit(last, now))
                } else {
                    None
                }
            };
            if let Some(p) = probe {
                self.report.stats.tlp_count += 1;
                out.push(p);
                self.tlp_high_seq = Some(self.tp.snd_nxt);
                // Reset so that the RTO restarts from now.
                self.xmit_timer.disarm();
            }
        }
        self.rearm_rto(sched);
    }

    /// `tcp_process_tlp_ack`.
    pub(super) fn process_tlp_ack(&mut self, ack: u32, snd_una_advanced: bool, sacked: bool) {
        let Some(high) = self.tlp_high_seq else {
            return;
        };
        if ack < high {
            return;
        }
        if !self.tlp_retrans {
            // The probe sent new data, and it was acknowledged.
            self.tlp_high_seq = None;
        } else if ack > high {
            // The probe repaired a loss: a one-shot reduction (CWR entered and left at once).
            self.init_cwnd_reduction();
            self.set_ca_state(CaState::Cwr);
            self.end_cwnd_reduction();
            self.try_to_open(false);
        } else if !snd_una_advanced && !sacked {
            // Both the original and the probe arrived: no loss.
            self.tlp_high_seq = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::cc::CaState;
    use crate::engine::Scheduler;
    use crate::packet::flags;
    use crate::tcp::tests::{run_sender_timers, sender, seqs, MS};

    #[test]
    fn rto_fires_at_srtt_plus_200ms_then_backs_off() {
        // With the handshake sample of 10 ms, RTO = 10 + max(200, 4·5) = 210 ms
        // (`tcp_rtt_estimator`, `tcp_set_rto`: rttvar is at least rto_min). The loss probe
        // fires first (PTO = 2·SRTT + 2 ms = 22 ms with 10 segments out) and sends new data
        // beyond cwnd; then the RTO, re-armed from the probe, fires 210 ms later: everything
        // outstanding is marked lost, cwnd = 1, ssthresh = 10/2 = 5, the head is
        // retransmitted, and the next RTO is doubled to 420 ms.
        let mut sched = Scheduler::new();
        let mut s = sender("reno", 10 * MS, false);
        let mut out = vec![];
        s.start(&mut sched, &mut out);
        out.clear();
        run_sender_timers(&mut s, &mut sched, 22 * MS, &mut out);
        assert_eq!(
            seqs(&out),
            vec![10],
            "the tail loss probe sends one new segment at 22 ms"
        );
        out.clear();
        run_sender_timers(&mut s, &mut sched, 22 * MS + 210 * MS - 1, &mut out);
        assert!(out.is_empty(), "nothing before the RTO");
        run_sender_timers(&mut s, &mut sched, 232 * MS, &mut out);
        assert_eq!(seqs(&out), vec![0]);
        assert!(out[0].flags & flags::RETRANS != 0);
        assert_eq!(s.tp.ca_state, CaState::Loss);
        assert_eq!(s.tp.cwnd, 1);
        assert_eq!(s.tp.ssthresh, 5);
        assert_eq!(s.rto_us(), 420_000);
        out.clear();
        run_sender_timers(&mut s, &mut sched, 232 * MS + 420 * MS, &mut out);
        assert_eq!(
            seqs(&out),
            vec![0],
            "second timeout retransmits the head again"
        );
        assert_eq!(s.rto_us(), 840_000);
    }
}
