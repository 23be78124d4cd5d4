//! RACK loss detection (RFC 8985 §6; Linux net/ipv4/tcp_recovery.c `tcp_rack_advance`,
//! `tcp_rack_reo_wnd`, `tcp_rack_detect_loss`, `tcp_rack_mark_lost`,
//! `tcp_rack_reo_timeout`): a segment is lost once a segment sent after it has been delivered
//! and it has waited that segment's RTT plus a reordering window. Linux uses RACK in place of
//! RFC 6675's three-duplicate-ACK rule for SACK connections.
//!
//! The simulated network never reorders, so `reord_seen` stays 0: the reordering window is
//! min_rtt/4 until recovery or three SACKed segments, then 0 (`tcp_rack_reo_wnd`).

use crate::cc::{CaState, CongestionControl};
use crate::engine::{Nanos, Scheduler};
use crate::packet::DataPkt;
use crate::tcp::rtt::TCP_TIMEOUT_MIN_US;
use crate::tcp::scoreboard::NONE;
use crate::tcp::timers::XmitTimer;
use crate::tcp::Sender;

/// The most recently sent segment delivered so far (Linux `tp->rack`).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Rack {
    /// Its last transmission time (`rack.mstamp`).
    pub mstamp_ns: Nanos,
    /// Its end sequence (`rack.end_seq`), ordering segments sent at the same time.
    pub end_seq: u32,
    /// Its RTT, µs (`rack.rtt_us`).
    pub rtt_us: u64,
    /// An ACK moved it since the last loss detection (`rack.advanced`).
    pub advanced: bool,
}

impl Rack {
    /// `tcp_rack_advance`: the segment ending at `end_seq`, last sent at `xmit_ns`, was
    /// delivered at `now`.
    #[inline]
    pub fn advance(
        &mut self,
        ever_retrans: bool,
        end_seq: u32,
        xmit_ns: Nanos,
        now: Nanos,
        min_rtt_us: u32,
    ) {
        let rtt_us = (now - xmit_ns) / 1000;
        if ever_retrans && rtt_us < min_rtt_us as u64 {
            // Ambiguous: probably the original, not the retransmission, was delivered.
            return;
        }
        self.advanced = true;
        self.rtt_us = rtt_us;
        if xmit_ns > self.mstamp_ns || (xmit_ns == self.mstamp_ns && end_seq > self.end_seq) {
            self.mstamp_ns = xmit_ns;
            self.end_seq = end_seq;
        }
    }

    /// Whether the segment ending at `end_seq`, sent at `sent_ns`, was sent before the RACK
    /// segment (time, then sequence: `tcp_skb_sent_after`).
    #[inline]
    pub fn sent_before_it(&self, sent_ns: Nanos, end_seq: u32) -> bool {
        self.mstamp_ns > sent_ns || (self.mstamp_ns == sent_ns && self.end_seq > end_seq)
    }

    /// `tcp_rack_reo_wnd` without observed reordering, µs: 0 once in recovery or with ≥ 3
    /// segments SACKed, else min_rtt/4, at most srtt.
    #[inline]
    pub fn reo_wnd_us(ca_state: CaState, sacked_out: u32, min_rtt_us: u32, srtt_us: u64) -> u64 {
        if ca_state >= CaState::Recovery || sacked_out >= 3 {
            return 0;
        }
        ((min_rtt_us as u64) >> 2).min(srtt_us)
    }
}

impl Sender {
    /// `tcp_rack_detect_loss`: walk transmissions in send order; those sent before the RACK
    /// segment and older than its RTT plus the reordering window are lost. Returns the
    /// longest remaining wait for the others (µs), 0 if none.
    pub(super) fn rack_detect_loss(&mut self, now: Nanos) -> u64 {
        let reo_wnd = Rack::reo_wnd_us(
            self.tp.ca_state,
            self.sacked_out,
            self.tp.min_rtt_us,
            self.rtt.srtt(),
        ) as i64;
        let mut timeout: i64 = 0;
        let mut seq = self.ts_head;
        while seq != NONE {
            let s = *self.seg(seq);
            let next = s.next;
            if !self.rack.sent_before_it(s.sent_ns, seq + 1) {
                break;
            }
            let remaining = self.rack.rtt_us as i64 + reo_wnd - ((now - s.sent_ns) / 1000) as i64;
            if remaining <= 0 {
                self.mark_lost(seq);
                self.ts_remove(seq);
            } else {
                timeout = timeout.max(remaining);
            }
            seq = next;
        }
        timeout as u64
    }

    /// `tcp_rack_mark_lost`; returns whether the reordering timer was armed.
    pub(super) fn rack_mark_lost(&mut self, sched: &mut Scheduler) -> bool {
        if !self.rack.advanced {
            return false;
        }
        self.rack.advanced = false;
        let now = sched.now();
        let timeout = self.rack_detect_loss(now);
        if timeout > 0 {
            let t = (timeout + TCP_TIMEOUT_MIN_US).min(self.cur_rto_us);
            self.arm_xmit(sched, XmitTimer::ReoTimeout, now + t * 1000);
            return true;
        }
        false
    }

    /// `tcp_rack_reo_timeout`: the reordering timer fired.
    pub(super) fn rack_reo_timeout(&mut self, sched: &mut Scheduler, out: &mut Vec<DataPkt>) {
        let now = sched.now();
        let prior_inflight = self.inflight();
        let prior_lost = self.tp.lost;
        self.rack_detect_loss(now);
        if prior_inflight != self.inflight() {
            if self.tp.ca_state != CaState::Recovery {
                self.enter_recovery();
                if !self.cc.has_cong_control() {
                    let lost = (self.tp.lost - prior_lost) as u32;
                    self.cwnd_reduction(1, lost, false);
                }
            }
            self.transmit(sched, out);
        }
        if !(self.xmit_timer.is_armed() && self.xmit_kind == XmitTimer::Rto) {
            self.rearm_rto(sched);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::flags;
    use crate::tcp::tests::{ack, run_sender_timers, sender, skip_to, MS};

    #[test]
    fn rack_marks_a_hole_lost_once_three_segments_are_sacked() {
        // Segment 0 of the initial window is lost. With no reordering seen and sacked_out ≥ 3
        // the RACK reordering window is 0 (`tcp_rack_reo_wnd`), so on the ACK carrying SACK
        // [1, 4) segment 0, sent in the same burst but before segment 3 and a full RACK RTT
        // ago, is lost: Recovery starts with ssthresh = 10/2 = 5, and PRR forces the fast
        // retransmit at once.
        let mut sched = Scheduler::new();
        let mut s = sender("reno", 10 * MS, false);
        let mut out = vec![];
        s.start(&mut sched, &mut out);
        skip_to(&mut sched, 10 * MS);
        out.clear();
        s.on_ack(&ack(0, &[(1, 2)], false), &mut sched, &mut out);
        s.on_ack(&ack(0, &[(1, 3)], false), &mut sched, &mut out);
        assert_eq!(s.tp.ca_state, CaState::Disorder);
        assert!(out.is_empty() || out.iter().all(|p| p.flags & flags::RETRANS == 0));
        out.clear();
        s.on_ack(&ack(0, &[(1, 4)], false), &mut sched, &mut out);
        assert_eq!(s.tp.ca_state, CaState::Recovery);
        assert_eq!(s.tp.ssthresh, 5);
        assert_eq!(
            out.first().map(|p| (p.seq, p.flags & flags::RETRANS != 0)),
            Some((0, true))
        );
    }

    #[test]
    fn rack_reordering_timer_detects_a_loss_with_one_sack() {
        // Only one segment SACKed: the reordering window is min_rtt/4 = 2.5 ms, so segment 0 is
        // not lost on the ACK but when the RACK timer fires, at rtt + reo_wnd − elapsed + 2 ms
        // (TCP_TIMEOUT_MIN) after the ACK: 0 + 2.5 + 2 = 4.5 ms.
        let mut sched = Scheduler::new();
        let mut s = sender("reno", 10 * MS, false);
        let mut out = vec![];
        s.start(&mut sched, &mut out);
        skip_to(&mut sched, 10 * MS);
        out.clear();
        s.on_ack(&ack(0, &[(9, 10)], false), &mut sched, &mut out);
        assert_eq!(s.tp.ca_state, CaState::Disorder);
        let retrans: Vec<_> = out
            .iter()
            .filter(|p| p.flags & flags::RETRANS != 0)
            .collect();
        assert!(retrans.is_empty());
        out.clear();
        run_sender_timers(&mut s, &mut sched, 10 * MS + 4_499_000, &mut out);
        assert!(out.iter().all(|p| p.flags & flags::RETRANS == 0), "not yet");
        run_sender_timers(&mut s, &mut sched, 10 * MS + 4_500_000, &mut out);
        assert_eq!(s.tp.ca_state, CaState::Recovery);
        assert!(out
            .iter()
            .any(|p| p.seq == 0 && p.flags & flags::RETRANS != 0));
    }
}
