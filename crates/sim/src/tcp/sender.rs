//! The TCP sender, following Linux's ACK processing (net/ipv4/tcp_input.c `tcp_ack`,
//! `tcp_sacktag_write_queue`, `tcp_clean_rtx_queue`, `tcp_fastretrans_alert`,
//! `tcp_cwnd_reduction`), loss detection (net/ipv4/tcp_recovery.c RACK: `tcp_rack_advance`,
//! `tcp_rack_detect_loss`, `tcp_rack_reo_timeout`), timers (net/ipv4/tcp_timer.c
//! `tcp_retransmit_timer`; tcp_output.c `tcp_schedule_loss_probe`, `tcp_send_loss_probe`,
//! `tcp_rearm_rto`) and transmission (tcp_output.c `tcp_write_xmit`,
//! `tcp_xmit_retransmit_queue`, `tcp_update_skb_after_send`, `tcp_tso_autosize`,
//! `tcp_cwnd_validate`). The digest is ../shared/reference/cc.md §1.
//!
//! Reading list: RFC 8985 (RACK-TLP), RFC 6937 (PRR), RFC 6298 (RTO), RFC 3168 §6.1 (ECN),
//! RFC 2018 (SACK), RFC 7323 (timestamps).
//!
//! The simulator numbers segments, not bytes. Simplifications, each documented in
//! docs/model.md: the connection starts established, with the handshake's RTT sample already
//! taken (Linux senders measure the SYN/SYN-ACK RTT); no reordering exists in the simulated
//! network, so RACK's reordering window stays at its no-reordering value and DSACK, undo and
//! F-RTO are not modelled; no application-limited cwnd decay (bulk senders always have data).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use aqm::Ecn;

use crate::cc::{AckEvent, AckSample, AnyCc, CaEvent, CaState, CongestionControl, EcnUse, RateSample, TcpState, TxSnapshot, TCP_INFINITE_SSTHRESH};
use crate::engine::{Event, Nanos, Scheduler, TimerSlot};
use crate::packet::{flags, AckPkt, DataPkt, MSS_BYTES, TCP_HEADER_BYTES, TCP_IP_HEADER_BYTES};
use crate::tcp::minmax::MinMax;
use crate::tcp::rtt::{RttEstimator, TCP_RTO_MAX_US, TCP_RTO_MIN_US};
use crate::tcp::SenderReport;

/// `TCP_TIMEOUT_MIN` = 2 jiffies = 2 ms, added to the PTO and the RACK reordering timeout.
const TCP_TIMEOUT_MIN_US: u64 = 2_000;
/// `tcp_min_rtt_wlen` = 300 s: the window of the min-RTT filter (`tcp_update_rtt_min`).
const MIN_RTT_WLEN_US: u64 = 300_000_000;
/// `tcp_pacing_ss_ratio` = 200 % and `tcp_pacing_ca_ratio` = 120 % (`tcp_update_pacing_rate`).
const PACING_SS_RATIO: u64 = 200;
const PACING_CA_RATIO: u64 = 120;
/// `sk_gso_max_size` = 64 KB without BIG TCP (`tcp_tso_autosize`).
const GSO_MAX_SIZE: u64 = 65_536;
/// `sk_pacing_shift` = 10: TSO bursts of ≈1 ms at the pacing rate.
const PACING_SHIFT: u32 = 10;
/// `sysctl_tcp_tso_rtt_log` = 9: the RTT allowance halves per 512 µs of min_rtt.
const TSO_RTT_LOG: u32 = 9;
/// "Original sch_fq does not pace first 10 MSS" (`tcp_update_skb_after_send`).
const UNPACED_INITIAL_SEGS: u64 = 10;

/// Scoreboard flag bits (Linux `TCPCB_*` in `tcp_skb_cb.sacked`).
mod sb {
    /// `TCPCB_SACKED_ACKED`.
    pub const SACKED: u8 = 1 << 0;
    /// `TCPCB_LOST`.
    pub const LOST: u8 = 1 << 1;
    /// `TCPCB_SACKED_RETRANS`: a retransmission is in flight.
    pub const RETRANS_OUT: u8 = 1 << 2;
    /// `TCPCB_EVER_RETRANS`.
    pub const EVER_RETRANS: u8 = 1 << 3;
    /// On the time-sorted list (`tcp_tsorted_anchor` linked).
    pub const IN_TSORTED: u8 = 1 << 4;
}

const NONE: u32 = u32::MAX;

/// One sent segment on the retransmission queue.
#[derive(Clone, Copy, Debug)]
struct Seg {
    /// Time of its last transmission (`tcp_skb_timestamp_us`).
    sent_ns: Nanos,
    flags: u8,
    /// Links of the time-sorted list of unacknowledged, not-lost transmissions
    /// (`tsorted_sent_queue`), as absolute segment numbers.
    prev: u32,
    next: u32,
    /// Delivery state when it was last sent (`TCP_SKB_CB(skb)->tx`).
    tx: TxSnapshot,
}

/// What occupies the retransmission-timer slot (Linux `icsk_pending`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum XmitTimer {
    Rto,
    LossProbe,
    ReoTimeout,
}

#[derive(Clone, Debug)]
pub struct SenderConfig {
    pub flow: u32,
    /// Payload bytes to send; None = bulk.
    pub size_bytes: Option<u64>,
    /// The flow class enables ECN.
    pub ecn: bool,
    /// Pace as the fq qdisc would, even if the CC does not ask.
    pub fq_pacing: bool,
    /// Base RTT of the path, taken as the handshake's RTT sample.
    pub handshake_rtt_ns: Nanos,
}

pub struct Sender {
    pub flow: u32,
    pub tp: TcpState,
    pub cc: AnyCc,
    ecn_use: EcnUse,
    /// ECN negotiated (`TCP_ECN_OK`).
    ecn_ok: bool,
    /// `TCP_ECN_QUEUE_CWR`: set CWR on the next new data segment.
    queue_cwr: bool,
    total_segs: Option<u32>,
    last_payload: u32,
    // Retransmission queue and scoreboard (index = seq − snd_una).
    segs: VecDeque<Seg>,
    sacked_out: u32,
    lost_out: u32,
    retrans_out: u32,
    ts_head: u32,
    ts_tail: u32,
    /// Lost segments waiting for retransmission, lowest sequence first (lazy deletion).
    lost_queue: BinaryHeap<Reverse<u32>>,
    /// The previous ACK's SACK blocks (Linux `recv_sack_cache`), to skip known ranges.
    sack_cache: [(u32, u32); 3],
    n_sack_cache: usize,
    // RACK (`tp->rack`).
    rack_mstamp_ns: Nanos,
    rack_end_seq: u32,
    rack_rtt_us: u64,
    rack_advanced: bool,
    // RTT and timers.
    rtt: RttEstimator,
    min_rtt: MinMax,
    /// `icsk_rto` including backoff, µs.
    cur_rto_us: u64,
    /// `icsk_retransmits`.
    retransmits: u32,
    xmit_timer: TimerSlot,
    xmit_kind: XmitTimer,
    pacing_timer: TimerSlot,
    // Congestion state.
    high_seq: u32,
    prr_delivered: u32,
    prr_out: u32,
    tlp_high_seq: Option<u32>,
    tlp_retrans: bool,
    cwnd_usage_seq: u32,
    // Pacing (`tcp_wstamp_ns`, `data_segs_out`).
    wstamp_ns: Nanos,
    data_segs_out: u64,
    /// AccECN: the CE count last seen from the receiver.
    last_ce_count: u32,
    pub report: SenderReport,
    /// The rate sample being built by the current ACK (`sack_state.rate`).
    rs: RateSample,
    /// Whether to run tcp_rate.c's bookkeeping: only CCs with `cong_control` read rate samples
    /// (Linux always runs it; for the others it is unobservable, and it costs ≈ 15 % of
    /// scenario (a)'s speed).
    rate_sampling: bool,
}

impl Sender {
    pub fn new(cfg: &SenderConfig, cc: AnyCc) -> Self {
        let (total_segs, last_payload) = match cfg.size_bytes {
            Some(b) => {
                let n = b.div_ceil(MSS_BYTES as u64);
                (Some(n as u32), (b - (n - 1) * MSS_BYTES as u64) as u32)
            }
            None => (None, MSS_BYTES),
        };
        let ecn_use = cc.ecn_use();
        // TCP_CONG_NEEDS_ECN forces negotiation (cc.md §1.13).
        let ecn_ok = cfg.ecn || matches!(ecn_use, EcnUse::Dctcp | EcnUse::L4s);
        let mut tp = TcpState::new(MSS_BYTES, 0);
        tp.ecn_ok = ecn_ok;
        tp.paced = cc.wants_pacing() || cfg.fq_pacing;
        let mut s = Sender {
            flow: cfg.flow,
            tp,
            cc,
            ecn_use,
            ecn_ok,
            queue_cwr: false,
            total_segs,
            last_payload,
            segs: VecDeque::new(),
            sacked_out: 0,
            lost_out: 0,
            retrans_out: 0,
            ts_head: NONE,
            ts_tail: NONE,
            lost_queue: BinaryHeap::new(),
            sack_cache: [(0, 0); 3],
            n_sack_cache: 0,
            rack_mstamp_ns: 0,
            rack_end_seq: 0,
            rack_rtt_us: 0,
            rack_advanced: false,
            rtt: RttEstimator::default(),
            min_rtt: MinMax::default(),
            cur_rto_us: 0,
            retransmits: 0,
            xmit_timer: TimerSlot::default(),
            xmit_kind: XmitTimer::Rto,
            pacing_timer: TimerSlot::default(),
            high_seq: 0,
            prr_delivered: 0,
            prr_out: 0,
            tlp_high_seq: None,
            tlp_retrans: false,
            cwnd_usage_seq: 0,
            wstamp_ns: 0,
            data_segs_out: 0,
            last_ce_count: 0,
            report: SenderReport::default(),
            rs: RateSample::default(),
            rate_sampling: false,
        };
        s.rate_sampling = s.cc.has_cong_control();
        // The handshake's RTT sample (the SYN-ACK's, `tcp_ack_update_rtt` on the SYN-ACK).
        let rtt_us = (cfg.handshake_rtt_ns / 1000).max(1);
        s.rtt.sample(rtt_us, 0, 0);
        s.cur_rto_us = s.rtt.rto_us;
        s.min_rtt.reset(0, rtt_us);
        s.tp.srtt_us = s.rtt.srtt() as u32;
        s.tp.min_rtt_us = rtt_us as u32;
        s
    }

    pub fn ecn_use(&self) -> EcnUse {
        self.ecn_use
    }

    pub fn ecn_ok(&self) -> bool {
        self.ecn_ok
    }

    /// Segments in flight (`tcp_packets_in_flight`).
    #[inline]
    pub fn inflight(&self) -> u32 {
        self.tp.packets_out - (self.sacked_out + self.lost_out) + self.retrans_out
    }

    pub fn srtt_us(&self) -> u64 {
        self.rtt.srtt()
    }

    pub fn is_finished(&self) -> bool {
        self.report.finished_at.is_some()
    }

    #[inline]
    fn seg(&self, seq: u32) -> &Seg {
        &self.segs[(seq - self.tp.snd_una) as usize]
    }

    #[inline]
    fn seg_mut(&mut self, seq: u32) -> &mut Seg {
        let i = (seq - self.tp.snd_una) as usize;
        &mut self.segs[i]
    }

    fn payload_of(&self, seq: u32) -> u32 {
        match self.total_segs {
            Some(n) if seq + 1 == n => self.last_payload,
            _ => MSS_BYTES,
        }
    }

    fn has_new_data(&self) -> bool {
        self.total_segs.is_none_or(|n| self.tp.snd_nxt < n)
    }

    fn sync_tp(&mut self, now: Nanos) {
        self.tp.now_ns = now;
        self.tp.inflight = self.inflight();
        self.tp.sacked_out = self.sacked_out;
        self.tp.lost_out = self.lost_out;
        self.tp.retrans_out = self.retrans_out;
        self.tp.wstamp_ns = self.wstamp_ns;
    }

    // ---------------------------------------------------------------------------------------
    // Delivery-rate sampling (net/ipv4/tcp_rate.c, with google/bbr's v2/v3 additions)
    // ---------------------------------------------------------------------------------------

    /// `tcp_rate_skb_sent` + `tcp_set_tx_in_flight`: snapshot the delivery state into a segment
    /// about to be (re)transmitted, before the core counts it as sent.
    fn rate_skb_sent(&mut self, now: Nanos) -> TxSnapshot {
        let now_us = now / 1000;
        if self.tp.packets_out == 0 {
            // Nothing in flight: the sample starts now (packets_out, not the inflight guess).
            self.tp.first_tx_mstamp_us = now_us;
            self.tp.delivered_mstamp_us = now_us;
        }
        TxSnapshot {
            first_tx_mstamp_us: self.tp.first_tx_mstamp_us,
            delivered_mstamp_us: self.tp.delivered_mstamp_us,
            delivered: self.tp.delivered as u32,
            delivered_ce: self.tp.delivered_ce as u32,
            lost: self.tp.lost as u32,
            in_flight: self.inflight() + 1,
            is_app_limited: self.tp.app_limited != 0,
        }
    }

    /// `tcp_rate_skb_delivered`: a segment was newly cum-acked or SACKed; keep the snapshot of
    /// the most recently sent one delivered by this ACK (`tcp_skb_sent_after`: later send time,
    /// then higher sequence).
    fn rate_skb_delivered(&mut self, seq: u32, f: u8, sent_ns: Nanos, tx: TxSnapshot) {
        let tx_us = sent_ns / 1000;
        let end_seq = seq + 1;
        let rs = &mut self.rs;
        let sent_after = tx_us > self.tp.first_tx_mstamp_us || (tx_us == self.tp.first_tx_mstamp_us && end_seq > rs.last_end_seq);
        if rs.prior_mstamp_us.is_none() || sent_after {
            rs.prior_delivered_ce = tx.delivered_ce;
            rs.prior_delivered = tx.delivered;
            rs.prior_mstamp_us = Some(tx.delivered_mstamp_us);
            rs.is_app_limited = tx.is_app_limited;
            rs.is_retrans = f & sb::EVER_RETRANS != 0;
            rs.tx_in_flight = tx.in_flight;
            rs.lost = (self.tp.lost as u32).wrapping_sub(tx.lost);
            rs.last_end_seq = end_seq;
            self.tp.first_tx_mstamp_us = tx_us;
            rs.interval_us = tx_us as i64 - tx.first_tx_mstamp_us as i64;
        }
    }

    /// `tcp_rate_gen`: finish the ACK's rate sample.
    fn rate_gen(&mut self, delivered: u32, lost: u32) {
        let tp = &mut self.tp;
        if tp.app_limited != 0 && tp.delivered > tp.app_limited {
            tp.app_limited = 0;
        }
        let now_us = tp.now_us();
        if delivered > 0 {
            tp.delivered_mstamp_us = now_us;
        }
        let rs = &mut self.rs;
        rs.acked_sacked = delivered;
        rs.losses = lost;
        let Some(prior_mstamp) = rs.prior_mstamp_us else {
            rs.delivered = -1;
            rs.interval_us = -1;
            return;
        };
        rs.delivered = (tp.delivered as u32).wrapping_sub(rs.prior_delivered) as i64;
        rs.delivered_ce = (tp.delivered_ce as u32).wrapping_sub(rs.prior_delivered_ce) as i64;
        let snd_us = rs.interval_us;
        let ack_us = now_us as i64 - prior_mstamp as i64;
        rs.interval_us = snd_us.max(ack_us);
        rs.snd_interval_us = snd_us;
        rs.rcv_interval_us = ack_us;
        // Normally interval ≥ min_rtt; a shorter one would overestimate bw.
        if rs.interval_us < tp.min_rtt_us as i64 {
            rs.interval_us = -1;
        }
    }

    // ---------------------------------------------------------------------------------------
    // Time-sorted list (tsorted_sent_queue)
    // ---------------------------------------------------------------------------------------

    fn ts_push_tail(&mut self, seq: u32) {
        let tail = self.ts_tail;
        {
            let s = self.seg_mut(seq);
            s.prev = tail;
            s.next = NONE;
            s.flags |= sb::IN_TSORTED;
        }
        if tail == NONE {
            self.ts_head = seq;
        } else {
            self.seg_mut(tail).next = seq;
        }
        self.ts_tail = seq;
    }

    fn ts_remove(&mut self, seq: u32) {
        let (prev, next) = {
            let s = self.seg_mut(seq);
            if s.flags & sb::IN_TSORTED == 0 {
                return;
            }
            s.flags &= !sb::IN_TSORTED;
            (s.prev, s.next)
        };
        if prev == NONE {
            self.ts_head = next;
        } else {
            self.seg_mut(prev).next = next;
        }
        if next == NONE {
            self.ts_tail = prev;
        } else {
            self.seg_mut(next).prev = prev;
        }
    }

    // ---------------------------------------------------------------------------------------
    // Transmission
    // ---------------------------------------------------------------------------------------

    /// The flow opens: initialize the CC and send the initial window.
    pub fn start(&mut self, sched: &mut Scheduler, out: &mut Vec<DataPkt>) {
        let now = sched.now();
        self.report.started_at = Some(now);
        self.sync_tp(now);
        self.cc.init(&mut self.tp);
        if !self.cc.has_cong_control() {
            self.update_pacing_rate();
        }
        self.transmit(sched, out);
    }

    /// The application stops writing (a scheduled stop, world.rs): nothing new is sent from
    /// `now` on. A TCP flow becomes a finite flow whose data is what it has sent — in-flight
    /// segments are still delivered, retransmitted as needed, and it finishes when all are
    /// acknowledged (Linux: a socket whose application stops writing drains its send queue).
    pub fn stop_writing(&mut self, now: Nanos) {
        if self.report.finished_at.is_some() || self.report.started_at.is_none() {
            return;
        }
        let written = self.tp.snd_nxt;
        if self.total_segs.is_some_and(|n| n <= written) {
            return;
        }
        self.total_segs = Some(written);
        // Every segment sent so far was a full one (a bulk sender always has a full MSS).
        self.last_payload = MSS_BYTES;
        if self.tp.snd_una == written {
            self.report.finished_at = Some(now);
            self.xmit_timer.disarm();
            self.pacing_timer.disarm();
        }
    }

    /// `tcp_tso_segs`: the CC's `tso_segs` hook, else `tcp_tso_autosize` with its
    /// `min_tso_segs`: segments per burst for a paced socket.
    fn tso_segs(&self) -> u32 {
        if let Some(n) = self.cc.tso_segs(&self.tp) {
            return n.max(1);
        }
        let mut bytes = self.tp.pacing_rate >> PACING_SHIFT;
        let r = (self.tp.min_rtt_us as u64) >> TSO_RTT_LOG;
        if r < 32 {
            bytes += GSO_MAX_SIZE >> r;
        }
        bytes = bytes.min(GSO_MAX_SIZE);
        ((bytes / self.tp.mss as u64) as u32).max(self.cc.min_tso_segs(&self.tp))
    }

    /// The next lost segment to retransmit, lowest sequence first (`tcp_xmit_retransmit_queue`).
    fn next_lost(&mut self) -> Option<u32> {
        while let Some(&Reverse(seq)) = self.lost_queue.peek() {
            if seq >= self.tp.snd_una {
                let f = self.seg(seq).flags;
                if f & sb::LOST != 0 && f & (sb::RETRANS_OUT | sb::SACKED) == 0 {
                    return Some(seq);
                }
            }
            self.lost_queue.pop();
        }
        None
    }

    /// `tcp_write_xmit` preceded by `tcp_xmit_retransmit_queue`: lost segments first, then new
    /// data, while inflight < cwnd and pacing allows.
    pub fn transmit(&mut self, sched: &mut Scheduler, out: &mut Vec<DataPkt>) {
        if self.report.finished_at.is_some() || self.report.started_at.is_none() {
            return;
        }
        let now = sched.now();
        self.sync_tp(now);
        let mut sent_new = false;
        let mut sent_any = false;
        let mut retransmitted_head = false;
        loop {
            if self.tp.paced && self.data_segs_out >= UNPACED_INITIAL_SEGS && self.wstamp_ns > now {
                self.pacing_timer.arm(sched, self.wstamp_ns, Event::PacingTimer(self.flow));
                break;
            }
            let burst = if self.tp.paced { self.tso_segs() } else { u32::MAX };
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
                burst_bytes += (pkt.payload + TCP_HEADER_BYTES) as u64;
                out.push(pkt);
                n += 1;
            }
            if n == 0 {
                break;
            }
            sent_any = true;
            if !self.tp.paced {
                break;
            }
            self.advance_pacing(now, burst_bytes, n);
        }
        let is_cwnd_limited = self.inflight() >= self.tp.cwnd;
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

    /// `tcp_update_skb_after_send` for a burst (one TSO skb) of `bytes` (TCP payload+header):
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

    fn send_new(&mut self, now: Nanos, sched: &mut Scheduler) -> DataPkt {
        let seq = self.tp.snd_nxt;
        if self.tp.packets_out == 0 {
            // tcp_event_data_sent: (re)start after idle.
            self.cc.cwnd_event(&mut self.tp, CaEvent::TxStart);
        }
        let prior_packets = self.tp.packets_out;
        let tx = if self.rate_sampling { self.rate_skb_sent(now) } else { TxSnapshot::default() };
        self.segs.push_back(Seg { sent_ns: now, flags: 0, prev: NONE, next: NONE, tx });
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

    fn retransmit(&mut self, seq: u32, now: Nanos) -> DataPkt {
        let tx = if self.rate_sampling { self.rate_skb_sent(now) } else { TxSnapshot::default() };
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
        let ecn = if self.ecn_ok && matches!(self.ecn_use, EcnUse::Dctcp | EcnUse::L4s) { self.ect() } else { Ecn::NotEct };
        self.make_pkt(seq, ecn, flags::RETRANS, now)
    }

    fn make_pkt(&mut self, seq: u32, ecn: Ecn, f: u8, now: Nanos) -> DataPkt {
        let payload = self.payload_of(seq);
        let wire_len = payload + TCP_IP_HEADER_BYTES;
        self.report.stats.segs_sent += 1;
        self.report.stats.wire_bytes_sent += wire_len as u64;
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
    fn update_pacing_rate(&mut self) {
        let ratio = if self.tp.cwnd < self.tp.ssthresh / 2 { PACING_SS_RATIO } else { PACING_CA_RATIO };
        let w = self.tp.cwnd.max(self.tp.packets_out) as u64;
        let srtt_us = self.rtt.srtt().max(1);
        self.tp.pacing_rate = self.tp.mss as u64 * ratio * w * 1_000_000 / (100 * srtt_us);
    }

    // ---------------------------------------------------------------------------------------
    // ACK processing (tcp_ack)
    // ---------------------------------------------------------------------------------------

    pub fn on_ack(&mut self, ack: &AckPkt, sched: &mut Scheduler, out: &mut Vec<DataPkt>) {
        let now = sched.now();
        if self.report.finished_at.is_some() || ack.ack > self.tp.snd_nxt {
            return;
        }
        self.sync_tp(now);
        let prior_snd_una = self.tp.snd_una;
        let prior_delivered = self.tp.delivered;
        let prior_lost = self.tp.lost;
        let prior_inflight = self.inflight();
        let prior_packets_out = self.tp.packets_out;
        let prior_sacked = self.sacked_out;
        self.rs = RateSample { prior_in_flight: prior_inflight, ..RateSample::default() };
        let mut ece = matches!(self.ecn_use, EcnUse::Classic | EcnUse::Dctcp | EcnUse::WantsCeEvents) && self.ecn_ok && ack.ece;

        // AccECN: the CE counter's increase (cc.md §1.3 step 6).
        let mut ce_delta = 0;
        if self.ecn_use == EcnUse::L4s && self.ecn_ok {
            ce_delta = ack.ce_count.wrapping_sub(self.last_ce_count);
            self.last_ce_count = ack.ce_count;
            ece = ce_delta > 0;
        }
        let count_ce = ece && self.ecn_use != EcnUse::L4s;

        // SACK blocks (tcp_sacktag_write_queue).
        let mut sack = SackState::default();
        self.sacktag(ack, now, count_ce, &mut sack);

        // Cumulative ACK (tcp_clean_rtx_queue).
        let mut pkts_acked = 0u32;
        let mut first_ackt: Option<Nanos> = None;
        let mut last_ackt: Option<Nanos> = None;
        let mut retrans_data_acked = false;
        let snd_una_advanced = ack.ack > self.tp.snd_una;
        while self.tp.snd_una < ack.ack {
            let seq = self.tp.snd_una;
            let Seg { flags: f, sent_ns: sent, tx, .. } = *self.seg(seq);
            self.ts_remove(seq);
            if f & sb::RETRANS_OUT != 0 {
                self.retrans_out -= 1;
            }
            if f & sb::EVER_RETRANS != 0 {
                retrans_data_acked = true;
            } else {
                first_ackt.get_or_insert(sent);
                last_ackt = Some(sent);
            }
            if f & sb::SACKED != 0 {
                self.sacked_out -= 1;
            } else {
                self.tp.delivered += 1;
                if count_ce {
                    self.tp.delivered_ce += 1;
                }
                self.rack_advance(f, seq + 1, sent, now);
                // A SACKed segment already gave its sample (Linux zeroes its tx stamp).
                if self.rate_sampling {
                    self.rate_skb_delivered(seq, f, sent, tx);
                }
            }
            if f & sb::LOST != 0 {
                self.lost_out -= 1;
            }
            self.segs.pop_front();
            self.tp.snd_una += 1;
            self.tp.packets_out -= 1;
            pkts_acked += 1;
        }
        if self.ecn_use == EcnUse::L4s {
            self.tp.delivered_ce += ce_delta as u64;
        }
        self.rs.ece_delta = ce_delta;
        self.rs.is_ece = ece;
        // FLAG_ACK_MAYBE_DELAYED (tcp_clean_rtx_queue): one segment acked, nothing else was in
        // flight, nothing SACKed: the receiver probably delayed this ACK.
        self.rs.is_ack_delayed = pkts_acked == 1
            && prior_packets_out == 1
            && prior_sacked == 0
            && self.rs.prior_mstamp_us.is_some()
            && self.rs.prior_delivered.wrapping_add(1) == self.tp.delivered as u32;
        if snd_una_advanced {
            self.retransmits = 0;
        }

        // RTT samples (tcp_ack_update_rtt), Karn's rule for retransmitted data.
        let mut seq_rtt_us: Option<u64> = None;
        let mut ca_rtt_us: Option<u64> = None;
        if let (Some(f), Some(l)) = (first_ackt, last_ackt) {
            if !retrans_data_acked {
                seq_rtt_us = Some((now - f) / 1000);
                ca_rtt_us = Some((now - l) / 1000);
            }
        }
        let mut sack_rtt_us = None;
        if let (Some(f), Some(l)) = (sack.first_sackt, sack.last_sackt) {
            sack_rtt_us = Some((now - f) / 1000);
            ca_rtt_us = Some((now - l) / 1000);
        }
        if seq_rtt_us.is_none() {
            seq_rtt_us = sack_rtt_us;
        }
        if seq_rtt_us.is_none() && snd_una_advanced && ack.tsecr != 0 {
            // Timestamp-echo fallback (RFC 7323 RTTM), ms resolution.
            let ms = (tsval(now) - ack.tsecr) as u64;
            seq_rtt_us = Some(ms * 1000);
            ca_rtt_us = Some(ms * 1000);
        }
        if let Some(m) = seq_rtt_us {
            let ca = ca_rtt_us.unwrap_or(m).max(1);
            let now_us = now / 1000;
            self.tp.min_rtt_us = self.min_rtt.running_min(MIN_RTT_WLEN_US, now_us, ca) as u32;
            self.rtt.sample(m.max(1), self.tp.snd_una, self.tp.snd_nxt);
            self.cur_rto_us = self.rtt.rto_us;
            self.tp.srtt_us = self.rtt.srtt() as u32;
        }
        self.sync_tp(now);

        let rtt_sample = ca_rtt_us.map(|v| v.min(u32::MAX as u64) as u32);
        self.rs.rtt_us = rtt_sample.map_or(-1, |v| v as i64);
        self.cc.pkts_acked(&mut self.tp, &AckSample { pkts_acked, rtt_us: rtt_sample, in_flight: prior_inflight });
        self.cc.in_ack_event(&mut self.tp, &AckEvent { ece, snd_una_advanced });

        let mut set_xmit_timer = snd_una_advanced;
        if let Some(high) = self.tlp_high_seq {
            // v3's `is_acking_tlp_retrans_seq`: this ACK covers the probe's retransmission.
            self.rs.is_acking_tlp_retrans_seq = self.tlp_retrans && ack.ack >= high;
            self.process_tlp_ack(ack.ack, snd_una_advanced, sack.newly_sacked > 0);
        }
        // tcp_ack_is_dubious: a dupACK, SACK or ECE information, or a state other than Open.
        let dubious = !snd_una_advanced || sack.newly_sacked > 0 || ece || self.tp.ca_state != CaState::Open;
        if dubious && self.fastretrans_alert(ece, sched) {
            // RACK armed its reordering timer: leave the slot to it.
            set_xmit_timer = false;
        }
        if set_xmit_timer {
            self.set_xmit_timer(sched);
        }
        if self.tp.packets_out == 0 {
            self.xmit_timer.disarm();
        }

        // tcp_cong_control.
        let acked_sacked = (self.tp.delivered - prior_delivered) as u32;
        let losses = (self.tp.lost - prior_lost) as u32;
        self.sync_tp(now);
        if self.rate_sampling {
            self.rate_gen(acked_sacked, losses);
        }
        if self.cc.has_cong_control() {
            let rs = self.rs;
            self.cc.cong_control(&mut self.tp, &rs);
        } else {
            if self.in_cwnd_reduction() {
                self.cwnd_reduction(acked_sacked, losses, snd_una_advanced);
            } else if snd_una_advanced {
                // tcp_may_raise_cwnd: FLAG_DATA_ACKED (no reordering seen).
                self.cc.cong_avoid(&mut self.tp, acked_sacked);
            }
            self.update_pacing_rate();
        }
        let _ = prior_snd_una;

        if let Some(n) = self.total_segs {
            if self.tp.snd_una == n {
                self.report.finished_at = Some(now);
                self.xmit_timer.disarm();
                self.pacing_timer.disarm();
                // Everything is acknowledged: give the queues' memory back (a workload
                // finishes thousands of flows).
                self.segs = VecDeque::new();
                self.lost_queue = BinaryHeap::new();
                return;
            }
        }
        self.transmit(sched, out);
    }

    /// `tcp_sacktag_write_queue` + `tcp_sacktag_one`: mark newly SACKed segments, skipping the
    /// parts of each block already covered by the previous ACK's blocks (`recv_sack_cache`),
    /// so a growing block costs O(new segments), not O(block).
    fn sacktag(&mut self, ack: &AckPkt, now: Nanos, count_ce: bool, st: &mut SackState) {
        let blocks = ack.sack_blocks();
        if blocks.is_empty() {
            self.n_sack_cache = 0;
            return;
        }
        let una = ack.ack.max(self.tp.snd_una);
        let cache: [(u32, u32); 3] = self.sack_cache;
        let n_cache = self.n_sack_cache;
        for &(s, e) in blocks {
            let s = s.max(una);
            let e = e.min(self.tp.snd_nxt);
            if s >= e {
                continue;
            }
            // Subtract the cached blocks from [s, e).
            let mut pieces: [(u32, u32); 4] = [(s, e), (0, 0), (0, 0), (0, 0)];
            let mut np = 1;
            for &(cs, ce) in &cache[..n_cache] {
                let mut next: [(u32, u32); 4] = [(0, 0); 4];
                let mut nn = 0;
                for &(ps, pe) in &pieces[..np] {
                    if ce <= ps || cs >= pe {
                        next[nn] = (ps, pe);
                        nn += 1;
                    } else {
                        if ps < cs && nn < 4 {
                            next[nn] = (ps, cs);
                            nn += 1;
                        }
                        if ce < pe && nn < 4 {
                            next[nn] = (ce, pe);
                            nn += 1;
                        }
                    }
                }
                pieces = next;
                np = nn;
            }
            for &(ps, pe) in &pieces[..np] {
                for seq in ps..pe {
                    self.sacktag_one(seq, now, count_ce, st);
                }
            }
        }
        self.n_sack_cache = blocks.len().min(3);
        self.sack_cache[..self.n_sack_cache].copy_from_slice(&blocks[..self.n_sack_cache]);
    }

    fn sacktag_one(&mut self, seq: u32, now: Nanos, count_ce: bool, st: &mut SackState) {
        let Seg { flags: mut f, sent_ns: sent, tx, .. } = *self.seg(seq);
        if f & sb::SACKED != 0 {
            return;
        }
        self.rack_advance(f, seq + 1, sent, now);
        if self.rate_sampling {
            self.rate_skb_delivered(seq, f, sent, tx);
        }
        if f & sb::RETRANS_OUT != 0 {
            // A retransmission not tagged lost (a TLP) is believed still in flight.
            if f & sb::LOST != 0 {
                f &= !(sb::LOST | sb::RETRANS_OUT);
                self.lost_out -= 1;
                self.retrans_out -= 1;
            }
        } else {
            if f & sb::EVER_RETRANS == 0 {
                st.first_sackt.get_or_insert(sent);
                st.last_sackt = Some(sent);
            }
            if f & sb::LOST != 0 {
                f &= !sb::LOST;
                self.lost_out -= 1;
            }
        }
        f |= sb::SACKED;
        self.seg_mut(seq).flags = f;
        self.ts_remove(seq);
        self.sacked_out += 1;
        self.tp.delivered += 1;
        if count_ce {
            self.tp.delivered_ce += 1;
        }
        st.newly_sacked += 1;
    }

    /// `tcp_rack_advance`: remember the most recently sent segment delivered so far.
    fn rack_advance(&mut self, f: u8, end_seq: u32, xmit_ns: Nanos, now: Nanos) {
        let rtt_us = (now - xmit_ns) / 1000;
        if f & sb::EVER_RETRANS != 0 && rtt_us < self.tp.min_rtt_us as u64 {
            // Ambiguous: probably the original, not the retransmission, was delivered.
            return;
        }
        self.rack_advanced = true;
        self.rack_rtt_us = rtt_us;
        if xmit_ns > self.rack_mstamp_ns || (xmit_ns == self.rack_mstamp_ns && end_seq > self.rack_end_seq) {
            self.rack_mstamp_ns = xmit_ns;
            self.rack_end_seq = end_seq;
        }
    }

    /// `tcp_rack_reo_wnd`: 0 without observed reordering once in recovery or with ≥ 3 SACKed
    /// (the simulated network never reorders, so `reord_seen` stays 0), else min_rtt/4 ≤ srtt.
    fn rack_reo_wnd_us(&self) -> u64 {
        if self.tp.ca_state >= CaState::Recovery || self.sacked_out >= 3 {
            return 0;
        }
        ((self.tp.min_rtt_us as u64) >> 2).min(self.rtt.srtt())
    }

    /// `tcp_rack_detect_loss`: walk transmissions in send order; those sent before the RACK
    /// segment and older than its RTT plus the reordering window are lost. Returns the
    /// longest remaining wait for the others (µs), 0 if none.
    fn rack_detect_loss(&mut self, now: Nanos) -> u64 {
        let reo_wnd = self.rack_reo_wnd_us() as i64;
        let mut timeout: i64 = 0;
        let mut seq = self.ts_head;
        while seq != NONE {
            let s = *self.seg(seq);
            let next = s.next;
            // Only segments sent before the RACK segment (time, then sequence).
            let sent_before = self.rack_mstamp_ns > s.sent_ns || (self.rack_mstamp_ns == s.sent_ns && self.rack_end_seq > seq + 1);
            if !sent_before {
                break;
            }
            let remaining = self.rack_rtt_us as i64 + reo_wnd - ((now - s.sent_ns) / 1000) as i64;
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

    /// `tcp_mark_skb_lost`.
    fn mark_lost(&mut self, seq: u32) {
        let f = self.seg(seq).flags;
        if f & sb::SACKED != 0 {
            return;
        }
        let mut nf = f;
        if f & sb::RETRANS_OUT != 0 {
            // The retransmission itself is lost.
            nf &= !sb::RETRANS_OUT;
            self.retrans_out -= 1;
            self.tp.lost += 1;
        }
        if f & sb::LOST == 0 {
            nf |= sb::LOST;
            self.lost_out += 1;
            self.tp.lost += 1;
        }
        self.seg_mut(seq).flags = nf;
        self.lost_queue.push(Reverse(seq));
        if self.cc.has_cong_control() {
            let tx = self.seg(seq).tx;
            self.sync_tp(self.tp.now_ns);
            self.cc.skb_marked_lost(&mut self.tp, &tx);
        }
    }

    /// `tcp_rack_mark_lost`; returns whether the reordering timer was armed.
    fn rack_mark_lost(&mut self, sched: &mut Scheduler) -> bool {
        if !self.rack_advanced {
            return false;
        }
        self.rack_advanced = false;
        let now = sched.now();
        let timeout = self.rack_detect_loss(now);
        if timeout > 0 {
            let t = (timeout + TCP_TIMEOUT_MIN_US).min(self.cur_rto_us);
            self.arm_xmit(sched, XmitTimer::ReoTimeout, now + t * 1000);
            return true;
        }
        false
    }

    /// `tcp_fastretrans_alert`: the congestion state machine (cc.md §1.5). Returns whether
    /// RACK armed its reordering timer.
    fn fastretrans_alert(&mut self, ece: bool, sched: &mut Scheduler) -> bool {
        let snd_una = self.tp.snd_una;
        // D. State exits when high_seq is acknowledged.
        if self.tp.ca_state != CaState::Open && snd_una >= self.high_seq {
            match self.tp.ca_state {
                CaState::Cwr
                    // Held until something *above* high_seq is acked, so that the CWR bit is
                    // known to have reached the receiver.
                    if snd_una != self.high_seq => {
                        self.end_cwnd_reduction();
                        self.set_ca_state(CaState::Open);
                    }
                CaState::Recovery => {
                    self.end_cwnd_reduction();
                    self.set_ca_state(CaState::Open);
                }
                _ => {}
            }
        }
        // E. Process the state.
        let mut reo_armed = false;
        match self.tp.ca_state {
            CaState::Recovery => {
                reo_armed = self.rack_mark_lost(sched);
            }
            CaState::Loss => {
                if snd_una >= self.high_seq {
                    // Recovered from the RTO (tcp_process_loss → tcp_try_undo_recovery).
                    self.set_ca_state(CaState::Open);
                    reo_armed = self.rack_mark_lost(sched);
                    self.open_or_recover(ece);
                }
            }
            _ => {
                reo_armed = self.rack_mark_lost(sched);
                self.open_or_recover(ece);
            }
        }
        reo_armed
    }

    /// `tcp_time_to_recover` ? `tcp_enter_recovery` : `tcp_try_to_open`.
    fn open_or_recover(&mut self, ece: bool) {
        if self.lost_out > 0 {
            self.enter_recovery();
        } else {
            self.try_to_open(ece);
        }
    }

    fn in_cwnd_reduction(&self) -> bool {
        matches!(self.tp.ca_state, CaState::Cwr | CaState::Recovery)
    }

    /// `tcp_set_ca_state`: the CC's hook sees the old state in `tp.ca_state`.
    fn set_ca_state(&mut self, s: CaState) {
        self.sync_tp(self.tp.now_ns);
        self.cc.set_state(&mut self.tp, s);
        self.tp.ca_state = s;
    }

    /// `tcp_init_cwnd_reduction`.
    fn init_cwnd_reduction(&mut self) {
        self.high_seq = self.tp.snd_nxt;
        self.tlp_high_seq = None;
        self.tp.snd_cwnd_cnt = 0;
        self.tp.prior_cwnd = self.tp.cwnd;
        self.prr_delivered = 0;
        self.prr_out = 0;
        self.sync_tp(self.tp.now_ns);
        self.tp.ssthresh = self.cc.ssthresh(&self.tp);
        if self.ecn_ok {
            self.queue_cwr = true;
        }
    }

    /// `tcp_end_cwnd_reduction`.
    fn end_cwnd_reduction(&mut self) {
        if !self.cc.has_cong_control() && self.tp.ssthresh < TCP_INFINITE_SSTHRESH {
            // CWR, or Recovery that was not undone (undo is not modelled).
            self.tp.cwnd = self.tp.ssthresh;
        }
        self.cc.cwnd_event(&mut self.tp, CaEvent::CompleteCwr);
    }

    /// `tcp_enter_cwr`.
    fn enter_cwr(&mut self) {
        if self.tp.ca_state < CaState::Cwr {
            self.report.stats.cwr_count += 1;
            self.init_cwnd_reduction();
            self.set_ca_state(CaState::Cwr);
        }
    }

    /// `tcp_enter_recovery`: a loss during an ECN reduction does not reduce again.
    fn enter_recovery(&mut self) {
        if self.tp.ca_state == CaState::Recovery {
            return;
        }
        self.report.stats.recoveries += 1;
        if !self.in_cwnd_reduction() {
            self.init_cwnd_reduction();
        }
        self.set_ca_state(CaState::Recovery);
    }

    /// `tcp_try_to_open` / `tcp_try_keep_open`.
    fn try_to_open(&mut self, ece: bool) {
        if ece {
            self.enter_cwr();
        }
        if self.tp.ca_state != CaState::Cwr {
            let any_retrans = self.retrans_out > 0 || self.segs.front().is_some_and(|s| s.flags & sb::EVER_RETRANS != 0);
            let s = if self.sacked_out + self.lost_out > 0 || any_retrans { CaState::Disorder } else { CaState::Open };
            if self.tp.ca_state != s {
                self.set_ca_state(s);
                self.high_seq = self.tp.snd_nxt;
            }
        }
    }

    /// PRR (RFC 6937; `tcp_cwnd_reduction`, cc.md §1.7).
    fn cwnd_reduction(&mut self, newly_acked_sacked: u32, newly_lost: u32, snd_una_advanced: bool) {
        if newly_acked_sacked == 0 || self.tp.prior_cwnd == 0 {
            return;
        }
        let inflight = self.inflight();
        let delta = self.tp.ssthresh as i64 - inflight as i64;
        self.prr_delivered += newly_acked_sacked;
        let mut sndcnt: i64;
        if delta < 0 {
            // Proportional rate reduction while above ssthresh.
            let dividend = self.tp.ssthresh as u64 * self.prr_delivered as u64 + self.tp.prior_cwnd as u64 - 1;
            sndcnt = (dividend / self.tp.prior_cwnd as u64) as i64 - self.prr_out as i64;
        } else {
            // Slow-start reduction bound once at/below ssthresh (PRR-SSRB).
            sndcnt = (self.prr_delivered as i64 - self.prr_out as i64).max(newly_acked_sacked as i64);
            if snd_una_advanced && newly_lost == 0 {
                sndcnt += 1;
            }
            sndcnt = sndcnt.min(delta);
        }
        // Force a fast retransmit upon entering fast recovery.
        sndcnt = sndcnt.max(if self.prr_out > 0 { 0 } else { 1 });
        self.tp.cwnd = (inflight as i64 + sndcnt).max(1) as u32;
    }

    /// `tcp_process_tlp_ack`.
    fn process_tlp_ack(&mut self, ack: u32, snd_una_advanced: bool, sacked: bool) {
        let Some(high) = self.tlp_high_seq else { return };
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

    // ---------------------------------------------------------------------------------------
    // Timers
    // ---------------------------------------------------------------------------------------

    fn arm_xmit(&mut self, sched: &mut Scheduler, kind: XmitTimer, at: Nanos) {
        self.xmit_kind = kind;
        self.xmit_timer.arm(sched, at, Event::SenderTimer(self.flow));
    }

    /// `tcp_rearm_rto`: the RTO counts from now, or — if a probe or reordering timer held the
    /// slot — from the head segment's transmission.
    fn rearm_rto(&mut self, sched: &mut Scheduler) {
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
        self.arm_xmit(sched, XmitTimer::Rto, now + rto_us.min(TCP_RTO_MAX_US) * 1000);
    }

    /// `tcp_schedule_loss_probe`: PTO = 2·SRTT + (1 segment out ? rto_min : 2 ms), no later
    /// than the RTO. Only in Open and CWR.
    fn schedule_loss_probe(&mut self, sched: &mut Scheduler, advancing_rto: bool) -> bool {
        if self.tp.packets_out == 0 || !matches!(self.tp.ca_state, CaState::Open | CaState::Cwr) {
            return false;
        }
        let now = sched.now();
        let srtt = self.rtt.srtt();
        let mut timeout_us = if srtt > 0 {
            2 * srtt + if self.tp.packets_out == 1 { TCP_RTO_MIN_US } else { TCP_TIMEOUT_MIN_US }
        } else {
            crate::tcp::rtt::TCP_TIMEOUT_INIT_US
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
    fn set_xmit_timer(&mut self, sched: &mut Scheduler) {
        if !self.schedule_loss_probe(sched, true) {
            self.rearm_rto(sched);
        }
    }

    /// The retransmission-timer slot fired.
    pub fn on_xmit_timer(&mut self, sched: &mut Scheduler, out: &mut Vec<DataPkt>) {
        let now = sched.now();
        if !self.xmit_timer.on_fire(sched, now, Event::SenderTimer(self.flow)) || self.report.finished_at.is_some() {
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
            let recent = (self.rack_rtt_us as i64 - ((now - s.sent_ns) / 1000) as i64) > 0;
            if seq != una && recent {
                continue;
            }
            self.mark_lost(seq);
            self.ts_remove(seq);
        }
        self.sync_tp(now);
        if new_episode {
            self.tp.prior_cwnd = self.tp.cwnd;
            self.tp.ssthresh = self.cc.ssthresh(&self.tp);
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

    /// `tcp_rack_reo_timeout`.
    fn rack_reo_timeout(&mut self, sched: &mut Scheduler, out: &mut Vec<DataPkt>) {
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

    /// The pacing timer fired.
    pub fn on_pacing_timer(&mut self, sched: &mut Scheduler, out: &mut Vec<DataPkt>) {
        let now = sched.now();
        if self.pacing_timer.on_fire(sched, now, Event::PacingTimer(self.flow)) {
            self.transmit(sched, out);
        }
    }

    /// Segments sent but neither acknowledged nor SACKed, and not counted lost: a view for
    /// tests and end-of-run accounting.
    pub fn packets_out(&self) -> u32 {
        self.tp.packets_out
    }

    pub fn sacked_out(&self) -> u32 {
        self.sacked_out
    }

    pub fn lost_out(&self) -> u32 {
        self.lost_out
    }

    pub fn retrans_out(&self) -> u32 {
        self.retrans_out
    }

    pub fn rto_us(&self) -> u64 {
        self.cur_rto_us
    }
}

/// What one ACK's SACK blocks changed.
#[derive(Default)]
struct SackState {
    newly_sacked: u32,
    first_sackt: Option<Nanos>,
    last_sackt: Option<Nanos>,
}

/// The TSval of a segment sent at `now`: a ms clock, +1 so that 0 means "no timestamp".
pub(crate) fn tsval(now: Nanos) -> u32 {
    (now / 1_000_000) as u32 + 1
}
