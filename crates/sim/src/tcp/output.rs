//! Transmission: what leaves when (Linux net/ipv4/tcp_output.c `tcp_write_xmit`,
//! `tcp_xmit_retransmit_queue`, `tcp_tso_autosize`, `tcp_update_skb_after_send`,
//! `tcp_cwnd_validate`; tcp_input.c `tcp_update_pacing_rate`). Lost segments go first, then
//! new data, while the window allows; a paced socket sends TSO-sized bursts no earlier than
//! its earliest departure time (`tcp_wstamp_ns`), as the fq qdisc or TCP's internal pacing
//! enforces it. Segments carry the ECN codepoint and CWR flag of RFC 3168 §6.1
//! (tcp_output.c `tcp_ecn_send`).

use aqm::Ecn;

use crate::cc::{CaEvent, CaState, CongestionControl, EcnUse, TxSnapshot};
use crate::engine::{Event, Nanos, Scheduler};
use crate::packet::{flags, DataPkt, TCP_IP_HEADER_BYTES};
use crate::tcp::scoreboard::{sb, Seg, NONE};
use crate::tcp::timers::XmitTimer;
use crate::tcp::{rate, Sender};

/// `tcp_pacing_ss_ratio` = 200 % and `tcp_pacing_ca_ratio` = 120 % (`tcp_update_pacing_rate`).
const PACING_SS_RATIO: u64 = 200;
const PACING_CA_RATIO: u64 = 120;
/// `sk_gso_max_size` = 64 KB without BIG TCP (`tcp_tso_autosize`).
const GSO_MAX_SIZE: u64 = 65_536;
/// `sk_pacing_shift` = 10: TSO bursts of ≈1 ms at the pacing rate.
const PACING_SHIFT: u32 = 10;
/// `sysctl_tcp_tso_rtt_log` = 9: the RTT allowance halves per 512 µs of min_rtt.
const TSO_RTT_LOG: u32 = 9;
/// `sysctl_tcp_limit_output_bytes` = 4 MB (net/ipv4/tcp_ipv4.c, since Linux 6.16, "tcp:
/// increase tcp_limit_output_bytes default value to 4MB"): TSQ's cap, paced or not.
const TSQ_LIMIT_OUTPUT_BYTES: u64 = 4 << 20;
/// `sysctl_tcp_tso_win_divisor` = 3: a deferring sender sends once a third of cwnd is open.
const TSO_WIN_DIVISOR: u64 = 3;
/// "Original sch_fq does not pace first 10 MSS" (`tcp_update_skb_after_send`).
const UNPACED_INITIAL_SEGS: u64 = 10;

/// The TSval of a segment sent at `now` (RFC 7323 §3): a ms clock, +1 so that 0 means "no
/// timestamp".
pub(crate) fn tsval(now: Nanos) -> u32 {
    (now / 1_000_000) as u32 + 1
}

impl Sender {
    /// `tcp_tso_segs`: the CC's `tso_segs` hook, else `tcp_tso_autosize` with its
    /// `min_tso_segs`: segments per skb, for a paced socket and for every socket of a host with
    /// TSO (the host's knobs; Linux's constants on an ideal host).
    pub(super) fn tso_segs(&self) -> u32 {
        if let Some(n) = self.cc.tso_segs(&self.tp) {
            return n.max(1);
        }
        let (gso_max, shift, min_segs) = match self.tso {
            Some(t) => (t.gso_max_bytes, t.pacing_shift, t.min_tso_segs),
            None => (GSO_MAX_SIZE, PACING_SHIFT, 2),
        };
        let mut bytes = self.tp.pacing_rate.checked_shr(shift).unwrap_or(0);
        let r = (self.tp.min_rtt_us as u64) >> TSO_RTT_LOG;
        if r < 32 {
            bytes += gso_max >> r;
        }
        bytes = bytes.min(gso_max);
        ((bytes / self.tp.mss as u64) as u32)
            .max(self.cc.min_tso_segs(&self.tp).unwrap_or(min_segs))
    }

    /// `tcp_small_queue_check` before an skb of `segs` segments: whether the bytes this flow
    /// already has at the NIC exceed max(2 skbs, pacing_rate >> pacing_shift), capped at
    /// `tcp_limit_output_bytes`. An skb is always sent when it would be the only one out
    /// (`tcp_rtx_queue_empty_or_single_skb`).
    fn tsq_throttles(&self, segs: u32, shift: u32) -> bool {
        let skb_bytes = segs as u64 * crate::packet::MTU_BYTES as u64;
        let limit = (2 * skb_bytes)
            .max(self.tp.pacing_rate.checked_shr(shift).unwrap_or(0))
            .min(TSQ_LIMIT_OUTPUT_BYTES);
        self.nic_bytes > limit && self.tp.packets_out > segs
    }

    /// `tcp_xmit_size_goal`: the segments of each skb `tcp_sendmsg` queues, the GSO limit in
    /// MSS (Linux's `sk_gso_max_size` is 321 B below the device's, `sk_dst_gso_max_size`
    /// in net/core/sock.c; at 64 KiB both give 45 segments of 1448 B). The peer's window never
    /// limits here (`tcp_bound_to_half_wnd`), as in the rest of the model.
    pub(super) fn size_goal(&self, gso_max: u64) -> u32 {
        ((gso_max / self.tp.mss as u64) as u32).max(1)
    }

    /// The head skb of the write queue, grown first as `tcp_write_xmit` does since Linux
    /// 6.10 ("tcp: try to send bigger TSO packets", `tcp_grow_skb`): a head smaller than
    /// `quota` segments takes up to the difference from the front of the next skb (one skb
    /// only; an emptied one is freed and the one after becomes the next). Returns the head's
    /// segments and whether it is the queue's tail (the last data a finite flow has).
    pub(super) fn write_queue_head(&mut self, goal: u32, quota: u32) -> (u32, bool) {
        let end = self.total_segs.unwrap_or(u32::MAX);
        let nxt = self.tp.snd_nxt;
        if self.wq_head_end <= nxt {
            // The head was sent whole: the next skb (or a fresh one) is the head.
            self.wq_head_end = if self.wq_next_end > nxt {
                self.wq_next_end
            } else {
                nxt.saturating_add(goal)
            };
            self.wq_next_end = self.wq_head_end;
        }
        if self.wq_next_end <= self.wq_head_end {
            self.wq_next_end = self.wq_head_end.saturating_add(goal);
        }
        self.wq_head_end = self.wq_head_end.min(end);
        self.wq_next_end = self.wq_next_end.min(end);
        let head = self.wq_head_end - nxt;
        let next = self.wq_next_end - self.wq_head_end;
        if head < quota && next > 0 {
            self.wq_head_end += (quota - head).min(next);
            if self.wq_head_end == self.wq_next_end {
                self.wq_next_end = self.wq_head_end.saturating_add(goal).min(end);
            }
        }
        (self.wq_head_end - nxt, self.wq_next_end == self.wq_head_end)
    }

    /// `tcp_tso_should_defer` for the write queue's head skb of `skb_segs` segments (`tail`:
    /// the queue's last): whether to hold it back because an ACK that opens more of the window
    /// is due within min(srtt/2, 1 ms). Sent at once when the flow is recovering or last sent
    /// more than 1 ms ago, when a full autosized skb (`max_segs`) fits the open window, when
    /// the whole head fits and more data follow it ("middle in queue won't get any more
    /// data"), when a third of cwnd is open (`tcp_tso_win_divisor`), or when the tail fits
    /// (the FIN-carrying skb of a finite flow). The receive window never limits
    /// (docs/model.md), so a deferral is always cwnd-limited (`*is_cwnd_limited = true`).
    pub(super) fn tso_should_defer(
        &self,
        now: Nanos,
        max_segs: u32,
        skb_segs: u32,
        tail: bool,
    ) -> bool {
        if self.tp.ca_state >= CaState::Recovery {
            return false;
        }
        // Linux compares with tcp_wstamp_ns, the last departure (or the next, when paced).
        let last = self.wstamp_ns.max(self.tp.lsndtime_ns);
        if now > last + 1_000_000 {
            return false;
        }
        let open = self.tp.cwnd.saturating_sub(self.inflight()) as u64;
        if open >= max_segs as u64 || (!tail && open >= skb_segs as u64) {
            return false;
        }
        let mss = self.tp.mss as u64;
        if open * mss >= self.tp.cwnd as u64 * mss / TSO_WIN_DIVISOR {
            return false;
        }
        let Some(head) = self.segs.front() else {
            return false;
        };
        let srtt_ns = self.rtt.srtt() * 1000;
        let expected_ack = head.sent_ns + srtt_ns;
        let threshold = (srtt_ns / 2).min(1_000_000);
        if expected_ack > now + threshold {
            return false;
        }
        // Deferring: cwnd-limited while the open window is no larger than the skb; a tail
        // that fits carries the FIN of a finite flow and goes now.
        let skb_bytes =
            (skb_segs as u64 - 1) * mss + self.payload_of(self.tp.snd_nxt + skb_segs - 1) as u64;
        !(tail && open * mss > skb_bytes)
    }

    /// One of this flow's packets left the NIC (`tcp_wfree`): TSQ's count drops, and a
    /// throttled flow transmits again (`tcp_tsq_handler`).
    pub fn on_nic_departure(
        &mut self,
        wire_len: u32,
        sched: &mut Scheduler,
        out: &mut Vec<DataPkt>,
    ) {
        self.nic_bytes -= wire_len as u64;
        if self.tsq_throttled {
            self.tsq_throttled = false;
            self.transmit(sched, out);
        }
    }

    /// `tcp_write_xmit` preceded by `tcp_xmit_retransmit_queue`: lost segments first, then new
    /// data, while inflight < cwnd and pacing allows.
    pub(super) fn transmit(&mut self, sched: &mut Scheduler, out: &mut Vec<DataPkt>) {
        if self.report.finished_at.is_some() || self.report.started_at.is_none() {
            return;
        }
        let now = sched.now();
        self.sync_tp(now);
        let mut sent_new = false;
        let mut sent_any = false;
        let mut retransmitted_head = false;
        let mut deferred = false;
        loop {
            if self.tp.paced && self.data_segs_out >= UNPACED_INITIAL_SEGS && self.wstamp_ns > now {
                self.pacing_timer
                    .arm(sched, self.wstamp_ns, Event::PacingTimer(self.flow));
                break;
            }
            // With TSO every skb is autosized, paced or not; an ideal host sends an unpaced
            // window at once.
            let max_segs = if self.tp.paced || self.tso.is_some() {
                self.tso_segs()
            } else {
                u32::MAX
            };
            let mut burst = max_segs;
            if let Some(t) = self.tso {
                if self.next_lost().is_none() && self.has_new_data() {
                    // New data leave as tcp_write_xmit cuts the write queue: the window's
                    // quota (`tcp_cwnd_test`: at most half of cwnd, "at least 2 GSO packets
                    // in flight"; at most max_segs), the head skb grown to it, then deferred
                    // or sent up to the quota (`tcp_mss_split_point`, `tso_fragment`).
                    let inflight = self.inflight();
                    if inflight >= self.tp.cwnd {
                        break;
                    }
                    let quota = (self.tp.cwnd - inflight)
                        .min((self.tp.cwnd >> 1).max(1))
                        .min(max_segs);
                    let (head, tail) =
                        self.write_queue_head(self.size_goal(t.gso_max_bytes), quota);
                    if head > 1 && self.tso_should_defer(now, max_segs, head, tail) {
                        deferred = true;
                        break;
                    }
                    burst = head.min(quota);
                }
                if self.tsq_throttles(burst, t.pacing_shift) {
                    self.tsq_throttled = true;
                    break;
                }
            }
            let mut n = 0u32;
            let mut burst_bytes = 0u64;
            while n < burst {
                if self.inflight() >= self.tp.cwnd {
                    break;
                }
                let pkt = if let Some(seq) = self.next_lost() {
                    retransmitted_head |= seq == self.tp.snd_una;
                    self.retransmit(seq, now)
                } else if self.has_new_data() {
                    sent_new = true;
                    self.send_new(now, sched)
                } else {
                    break;
                };
                // TCP paces the write-queue skb, whose len is its payload: the headers go on
                // the clone it transmits (net/ipv4/tcp_output.c `__tcp_transmit_skb` calls
                // `tcp_update_skb_after_send(sk, oskb, ...)`); fq paces the whole frame.
                burst_bytes += (pkt.payload + self.pacing_overhead_bytes) as u64;
                out.push(pkt);
                n += 1;
            }
            if n == 0 {
                break;
            }
            // The skb's segments go out as one GSO packet, PSH on its last (`flags::PSH`).
            if n >= 2 && self.tso.is_some() {
                if let Some(last) = out.last_mut() {
                    last.flags |= flags::PSH;
                }
            }
            sent_any = true;
            if self.tso.is_some() {
                self.report.stats.tso_skbs += 1;
            }
            if !self.tp.paced {
                if self.tso.is_some() && n == burst {
                    continue;
                }
                break;
            }
            self.advance_pacing(now, burst_bytes, n);
        }
        let is_cwnd_limited = self.inflight() >= self.tp.cwnd || deferred;
        if sent_any || is_cwnd_limited {
            self.cwnd_validate(is_cwnd_limited);
        }
        if retransmitted_head && self.xmit_kind != XmitTimer::ReoTimeout {
            self.rearm_rto(sched);
        }
        if sent_new {
            // Send one loss probe per tail loss episode.
            self.schedule_loss_probe(sched, false);
        }
        self.tp.inflight = self.inflight();
    }

    /// `tcp_update_skb_after_send` for a burst (one TSO skb) of `bytes` (TCP payload, plus the
    /// headers when the fq qdisc paces):
    /// the earliest departure time advances by bytes/rate, less a credit of at most half of
    /// that for lateness. The first 10 data segments are not paced.
    fn advance_pacing(&mut self, now: Nanos, bytes: u64, segs: u32) {
        let prior = self.wstamp_ns;
        self.wstamp_ns = self.wstamp_ns.max(now);
        let rate = self.tp.pacing_rate;
        if rate > 0 && self.data_segs_out >= UNPACED_INITIAL_SEGS + segs as u64 {
            let mut len_ns = bytes * 1_000_000_000 / rate;
            let credit = self.wstamp_ns - prior;
            len_ns -= (len_ns / 2).min(credit);
            self.wstamp_ns += len_ns;
        }
    }

    /// Send new segment `snd_nxt` (`tcp_transmit_skb`, `tcp_event_new_data_sent`).
    pub(super) fn send_new(&mut self, now: Nanos, sched: &mut Scheduler) -> DataPkt {
        let seq = self.tp.snd_nxt;
        if self.tp.packets_out == 0 {
            // tcp_event_data_sent: (re)start after idle.
            self.cc.cwnd_event(&mut self.tp, CaEvent::TxStart);
        }
        let prior_packets = self.tp.packets_out;
        let tx = if self.rate_sampling {
            let inflight = self.inflight();
            rate::skb_sent(&mut self.tp, inflight, now)
        } else {
            TxSnapshot::default()
        };
        self.segs.push_back(Seg {
            sent_ns: now,
            flags: 0,
            prev: NONE,
            next: NONE,
            tx,
        });
        self.tp.snd_nxt += 1;
        self.tp.packets_out += 1;
        self.ts_push_tail(seq);
        if self.in_cwnd_reduction() {
            self.prr_out += 1;
        }
        self.data_segs_out += 1;
        // tcp_event_new_data_sent: arm the RTO when nothing was outstanding (or a probe was
        // pending); the loss probe is scheduled after the burst.
        if prior_packets == 0 || self.xmit_kind == XmitTimer::LossProbe {
            self.rearm_rto(sched);
        }
        let mut f = 0;
        let ecn = if self.ecn_ok {
            if self.queue_cwr {
                self.queue_cwr = false;
                f |= flags::CWR;
            }
            self.ect()
        } else {
            Ecn::NotEct
        };
        self.make_pkt(seq, ecn, f, now)
    }

    /// The ECT codepoint this sender uses.
    fn ect(&self) -> Ecn {
        if self.ecn_use == EcnUse::L4s {
            Ecn::Ect1
        } else {
            Ecn::Ect0
        }
    }

    /// Retransmit segment `seq` (`__tcp_retransmit_skb`).
    pub(super) fn retransmit(&mut self, seq: u32, now: Nanos) -> DataPkt {
        let tx = if self.rate_sampling {
            let inflight = self.inflight();
            rate::skb_sent(&mut self.tp, inflight, now)
        } else {
            TxSnapshot::default()
        };
        {
            let s = self.seg_mut(seq);
            s.tx = tx;
            s.flags |= sb::RETRANS_OUT | sb::EVER_RETRANS;
            s.sent_ns = now;
        }
        self.retrans_out += 1;
        self.ts_remove(seq);
        self.ts_push_tail(seq);
        if self.in_cwnd_reduction() {
            self.prr_out += 1;
        }
        self.report.stats.retrans_segs += 1;
        // tcp_ecn_send: retransmissions are Not-ECT unless the CC needs ECN
        // (TCP_CONG_NEEDS_ECN: DCTCP, Prague) — not for CE-event-only CCs such as BBRv2.
        let ecn = if self.ecn_ok && matches!(self.ecn_use, EcnUse::Dctcp | EcnUse::L4s) {
            self.ect()
        } else {
            Ecn::NotEct
        };
        self.make_pkt(seq, ecn, flags::RETRANS, now)
    }

    /// The packet for segment `seq`, counted as sent at `now`.
    fn make_pkt(&mut self, seq: u32, ecn: Ecn, f: u8, now: Nanos) -> DataPkt {
        let payload = self.payload_of(seq);
        let wire_len = payload + TCP_IP_HEADER_BYTES;
        self.report.stats.segs_sent += 1;
        self.report.stats.wire_bytes_sent += wire_len as u64;
        if self.tso.is_some() {
            self.nic_bytes += wire_len as u64;
        }
        self.tp.lsndtime_ns = now;
        DataPkt {
            flow: self.flow,
            seq,
            payload,
            wire_len,
            ecn,
            flags: f,
            hop: 0,
            enqueue_ns: 0,
            value: 0,
            tsval: tsval(now),
        }
    }

    /// `tcp_cwnd_validate`: remember whether the window was fully used in this window of data.
    fn cwnd_validate(&mut self, is_cwnd_limited: bool) {
        if self.tp.snd_una >= self.cwnd_usage_seq
            || is_cwnd_limited
            || (!self.tp.is_cwnd_limited && self.tp.packets_out > self.tp.max_packets_out)
        {
            self.tp.is_cwnd_limited = is_cwnd_limited;
            self.tp.max_packets_out = self.tp.packets_out;
            self.cwnd_usage_seq = self.tp.snd_nxt;
        }
    }

    /// `tcp_update_pacing_rate` (CCs without `cong_control`).
    pub(super) fn update_pacing_rate(&mut self) {
        let ratio = if self.tp.cwnd < self.tp.ssthresh / 2 {
            PACING_SS_RATIO
        } else {
            PACING_CA_RATIO
        };
        let w = self.tp.cwnd.max(self.tp.packets_out) as u64;
        let srtt_us = self.rtt.srtt().max(1);
        self.tp.pacing_rate = self.tp.mss as u64 * ratio * w * 1_000_000 / (100 * srtt_us);
    }

    /// The pacing timer fired (`tcp_pace_kick`).
    pub fn on_pacing_timer(&mut self, sched: &mut Scheduler, out: &mut Vec<DataPkt>) {
        let now = sched.now();
        if self
            .pacing_timer
            .on_fire(sched, now, Event::PacingTimer(self.flow))
        {
            self.transmit(sched, out);
        }
    }
}
