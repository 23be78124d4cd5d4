//! The TCP sender: its state ([`Sender`], Linux's `tcp_sock` as far as modelled) and ACK
//! processing with the congestion state machine (net/ipv4/tcp_input.c `tcp_ack`,
//! `tcp_clean_rtx_queue`, `tcp_ack_update_rtt`, `tcp_fastretrans_alert`, `tcp_enter_cwr`,
//! `tcp_enter_recovery`, `tcp_try_to_open`, `tcp_cwnd_reduction` (PRR, RFC 6937);
//! tcp_cong.c `tcp_cong_control`'s order of hooks). Its other parts are the sibling modules
//! `scoreboard` (retransmission queue, SACK), `rack` (loss detection), `timers` (RTO,
//! tail-loss probe), `output` (transmission and pacing) and `rate` (delivery-rate samples).
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

use crate::cc::{
    AckEvent, AckSample, AnyCc, CaEvent, CaState, CongestionControl, EcnUse, RateSample, TcpState,
    TCP_INFINITE_SSTHRESH,
};
use crate::engine::{Nanos, Scheduler, TimerSlot};
use crate::packet::{AckPkt, DataPkt, ETH_HEADER_BYTES, MSS_BYTES, TCP_IP_HEADER_BYTES};
use crate::tcp::minmax::MinMax;
use crate::tcp::output::tsval;
use crate::tcp::rack::Rack;
use crate::tcp::rtt::RttEstimator;
use crate::tcp::scoreboard::{sb, SackState, Seg, NONE};
use crate::tcp::timers::XmitTimer;
use crate::tcp::{rate, SenderReport};

/// `tcp_min_rtt_wlen` = 300 s: the window of the min-RTT filter (`tcp_update_rtt_min`).
const MIN_RTT_WLEN_US: u64 = 300_000_000;

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
    /// The host's TSO/GSO and TSQ (a Linux host, offloads on or off); None = an ideal host.
    pub tso: Option<TsoConfig>,
}

/// A Linux host's segmentation offload as the sender sees it: TSO autosizing's parameters
/// (`tcp_tso_autosize`) for every flow, paced or not, and TCP Small Queues
/// (`tcp_small_queue_check`) against the bytes waiting at the NIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TsoConfig {
    /// `sk_gso_max_size`, bytes.
    pub gso_max_bytes: u64,
    /// `sk_pacing_shift`.
    pub pacing_shift: u32,
    /// sysctl `tcp_min_tso_segs` (a CC's own floor takes precedence).
    pub min_tso_segs: u32,
}

pub struct Sender {
    pub flow: u32,
    pub tp: TcpState,
    pub cc: AnyCc,
    pub(super) ecn_use: EcnUse,
    /// ECN negotiated (`TCP_ECN_OK`).
    pub(super) ecn_ok: bool,
    /// `TCP_ECN_QUEUE_CWR`: set CWR on the next new data segment.
    pub(super) queue_cwr: bool,
    /// Segments to send (None = bulk), and the last one's payload.
    pub(super) total_segs: Option<u32>,
    pub(super) last_payload: u32,
    // Retransmission queue and scoreboard (index = seq − snd_una).
    pub(super) segs: VecDeque<Seg>,
    /// Segments SACKed, marked lost, and retransmitted and still in flight (`sacked_out`,
    /// `lost_out`, `retrans_out`).
    pub(super) sacked_out: u32,
    pub(super) lost_out: u32,
    pub(super) retrans_out: u32,
    /// Ends of the time-sorted list of transmissions (`tsorted_sent_queue`).
    pub(super) ts_head: u32,
    pub(super) ts_tail: u32,
    /// Lost segments waiting for retransmission, lowest sequence first (lazy deletion).
    pub(super) lost_queue: BinaryHeap<Reverse<u32>>,
    /// The previous ACK's SACK blocks (Linux `recv_sack_cache`), to skip known ranges.
    pub(super) sack_cache: [(u32, u32); 3],
    pub(super) n_sack_cache: usize,
    /// RACK's most recently delivered transmission (`tp->rack`).
    pub(super) rack: Rack,
    // RTT and timers.
    pub(super) rtt: RttEstimator,
    pub(super) min_rtt: MinMax,
    /// `icsk_rto` including backoff, µs.
    pub(super) cur_rto_us: u64,
    /// `icsk_retransmits`.
    pub(super) retransmits: u32,
    pub(super) xmit_timer: TimerSlot,
    pub(super) xmit_kind: XmitTimer,
    pub(super) pacing_timer: TimerSlot,
    // Congestion state.
    /// `snd_nxt` when the current reduction or loss episode began (`high_seq`).
    pub(super) high_seq: u32,
    /// PRR's counters (`prr_delivered`, `prr_out`).
    pub(super) prr_delivered: u32,
    pub(super) prr_out: u32,
    /// `snd_nxt` after the outstanding tail-loss probe (`tlp_high_seq`), and whether the probe
    /// was a retransmission (`tlp_retrans`).
    pub(super) tlp_high_seq: Option<u32>,
    pub(super) tlp_retrans: bool,
    /// `snd_nxt` when cwnd use was last recorded (`cwnd_usage_seq`, `tcp_cwnd_validate`).
    pub(super) cwnd_usage_seq: u32,
    // Pacing (`tcp_wstamp_ns`, `data_segs_out`).
    pub(super) wstamp_ns: Nanos,
    /// Bytes each segment counts for pacing beyond its payload: none when TCP paces itself
    /// (it times the payload-only write-queue skb), the TCP/IP and Ethernet headers when the
    /// fq qdisc paces (`fq_pacing`).
    pub(super) pacing_overhead_bytes: u32,
    pub(super) data_segs_out: u64,
    /// AccECN: the CE count last seen from the receiver.
    pub(super) last_ce_count: u32,
    pub report: SenderReport,
    /// The rate sample being built by the current ACK (`sack_state.rate`).
    pub(super) rs: RateSample,
    /// Whether to run tcp_rate.c's bookkeeping: only CCs with `cong_control` read rate samples
    /// (see `rate.rs`).
    pub(super) rate_sampling: bool,
    /// The host's offload (None: an ideal host, every segment its own transmission).
    pub(super) tso: Option<TsoConfig>,
    /// Bytes this flow has handed its NIC that are not on the wire yet (what TSQ reads from
    /// `sk_wmem_alloc`).
    pub(super) nic_bytes: u64,
    /// TSQ stopped transmission (`TSQ_THROTTLED`): the NIC's next departure resumes it.
    pub(super) tsq_throttled: bool,
    /// With TSO, the unsent skbs of the write queue (`tcp_send_head` on): the head is
    /// [snd_nxt, wq_head_end), the next [wq_head_end, wq_next_end), segment numbers; every
    /// later one is a full `tcp_xmit_size_goal` (`output.rs`, `write_queue_head`).
    pub(super) wq_head_end: u32,
    pub(super) wq_next_end: u32,
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
        // A CC flagged TCP_CONG_NEEDS_ECN (DCTCP, Prague) requests ECN whatever the sysctl
        // (`tcp_ecn_send_syn`).
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
            rack: Rack::default(),
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
            pacing_overhead_bytes: if cfg.fq_pacing {
                TCP_IP_HEADER_BYTES + ETH_HEADER_BYTES
            } else {
                0
            },
            data_segs_out: 0,
            last_ce_count: 0,
            report: SenderReport::default(),
            rs: RateSample::default(),
            rate_sampling: false,
            tso: cfg.tso,
            nic_bytes: 0,
            tsq_throttled: false,
            wq_head_end: 0,
            wq_next_end: 0,
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

    pub(super) fn payload_of(&self, seq: u32) -> u32 {
        match self.total_segs {
            Some(n) if seq + 1 == n => self.last_payload,
            _ => MSS_BYTES,
        }
    }

    pub(super) fn has_new_data(&self) -> bool {
        self.total_segs.map_or(true, |n| self.tp.snd_nxt < n)
    }

    pub(super) fn sync_tp(&mut self, now: Nanos) {
        self.tp.now_ns = now;
        self.tp.inflight = self.inflight();
        self.tp.sacked_out = self.sacked_out;
        self.tp.lost_out = self.lost_out;
        self.tp.retrans_out = self.retrans_out;
        self.tp.wstamp_ns = self.wstamp_ns;
    }

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

    /// An ACK arrives (`tcp_ack`): SACK and cumulative ACK processing, RTT samples, the CC's
    /// per-ACK hooks, the state machine, the cwnd update and what may then be sent.
    pub fn on_ack(&mut self, ack: &AckPkt, sched: &mut Scheduler, out: &mut Vec<DataPkt>) {
        let now = sched.now();
        if self.report.finished_at.is_some() || ack.ack > self.tp.snd_nxt {
            return;
        }
        self.sync_tp(now);
        let prior_delivered = self.tp.delivered;
        let prior_lost = self.tp.lost;
        let prior_inflight = self.inflight();
        let prior_packets_out = self.tp.packets_out;
        let prior_sacked = self.sacked_out;
        self.rs = RateSample {
            prior_in_flight: prior_inflight,
            ..RateSample::default()
        };
        let mut ece = matches!(
            self.ecn_use,
            EcnUse::Classic | EcnUse::Dctcp | EcnUse::WantsCeEvents
        ) && self.ecn_ok
            && ack.ece;

        // AccECN: the CE counter's increase (`tcp_accecn_process`; draft-ietf-tcpm-accurate-ecn).
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
            let Seg {
                flags: f,
                sent_ns: sent,
                tx,
                ..
            } = *self.seg(seq);
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
                self.rack.advance(
                    f & sb::EVER_RETRANS != 0,
                    seq + 1,
                    sent,
                    now,
                    self.tp.min_rtt_us,
                );
                // A SACKed segment already gave its sample (Linux zeroes its tx stamp).
                if self.rate_sampling {
                    rate::skb_delivered(
                        &mut self.tp,
                        &mut self.rs,
                        seq + 1,
                        f & sb::EVER_RETRANS != 0,
                        sent,
                        tx,
                    );
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
        self.cc.pkts_acked(
            &mut self.tp,
            &AckSample {
                pkts_acked,
                rtt_us: rtt_sample,
                in_flight: prior_inflight,
            },
        );
        self.cc.in_ack_event(
            &mut self.tp,
            &AckEvent {
                ece,
                snd_una_advanced,
            },
        );

        let mut set_xmit_timer = snd_una_advanced;
        if let Some(high) = self.tlp_high_seq {
            // v3's `is_acking_tlp_retrans_seq`: this ACK covers the probe's retransmission.
            self.rs.is_acking_tlp_retrans_seq = self.tlp_retrans && ack.ack >= high;
            self.process_tlp_ack(ack.ack, snd_una_advanced, sack.newly_sacked > 0);
        }
        // tcp_ack_is_dubious: a dupACK, SACK or ECE information, or a state other than Open.
        let dubious =
            !snd_una_advanced || sack.newly_sacked > 0 || ece || self.tp.ca_state != CaState::Open;
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
            rate::gen(&mut self.tp, &mut self.rs, acked_sacked, losses);
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

    /// `tcp_fastretrans_alert`: the congestion state machine (Open, Disorder, CWR, Recovery,
    /// Loss: `enum tcp_ca_state`, include/net/tcp.h). Returns whether
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

    pub(super) fn in_cwnd_reduction(&self) -> bool {
        matches!(self.tp.ca_state, CaState::Cwr | CaState::Recovery)
    }

    /// `tcp_set_ca_state`: the CC's hook sees the old state in `tp.ca_state`.
    pub(super) fn set_ca_state(&mut self, s: CaState) {
        self.sync_tp(self.tp.now_ns);
        self.cc.set_state(&mut self.tp, s);
        self.tp.ca_state = s;
    }

    /// `tcp_init_cwnd_reduction`.
    pub(super) fn init_cwnd_reduction(&mut self) {
        self.high_seq = self.tp.snd_nxt;
        self.tlp_high_seq = None;
        self.tp.snd_cwnd_cnt = 0;
        self.tp.prior_cwnd = self.tp.cwnd;
        self.prr_delivered = 0;
        self.prr_out = 0;
        self.sync_tp(self.tp.now_ns);
        self.tp.ssthresh = self.cc.ssthresh(&mut self.tp);
        if self.ecn_ok {
            self.queue_cwr = true;
        }
    }

    /// `tcp_end_cwnd_reduction`.
    pub(super) fn end_cwnd_reduction(&mut self) {
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
    pub(super) fn enter_recovery(&mut self) {
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
    pub(super) fn try_to_open(&mut self, ece: bool) {
        if ece {
            self.enter_cwr();
        }
        if self.tp.ca_state != CaState::Cwr {
            let any_retrans = self.retrans_out > 0
                || self
                    .segs
                    .front()
                    .is_some_and(|s| s.flags & sb::EVER_RETRANS != 0);
            let s = if self.sacked_out + self.lost_out > 0 || any_retrans {
                CaState::Disorder
            } else {
                CaState::Open
            };
            if self.tp.ca_state != s {
                self.set_ca_state(s);
                self.high_seq = self.tp.snd_nxt;
            }
        }
    }

    /// PRR (RFC 6937 §3; `tcp_cwnd_reduction`).
    pub(super) fn cwnd_reduction(
        &mut self,
        newly_acked_sacked: u32,
        newly_lost: u32,
        snd_una_advanced: bool,
    ) {
        if newly_acked_sacked == 0 || self.tp.prior_cwnd == 0 {
            return;
        }
        let inflight = self.inflight();
        let delta = self.tp.ssthresh as i64 - inflight as i64;
        self.prr_delivered += newly_acked_sacked;
        let mut sndcnt: i64;
        if delta < 0 {
            // Proportional rate reduction while above ssthresh.
            let dividend =
                self.tp.ssthresh as u64 * self.prr_delivered as u64 + self.tp.prior_cwnd as u64 - 1;
            sndcnt = (dividend / self.tp.prior_cwnd as u64) as i64 - self.prr_out as i64;
        } else {
            // Slow-start reduction bound once at/below ssthresh (PRR-SSRB).
            sndcnt =
                (self.prr_delivered as i64 - self.prr_out as i64).max(newly_acked_sacked as i64);
            if snd_una_advanced && newly_lost == 0 {
                sndcnt += 1;
            }
            sndcnt = sndcnt.min(delta);
        }
        // Force a fast retransmit upon entering fast recovery.
        sndcnt = sndcnt.max(if self.prr_out > 0 { 0 } else { 1 });
        self.tp.cwnd = (inflight as i64 + sndcnt).max(1) as u32;
    }

    /// The current RTO including backoff, µs.
    pub fn rto_us(&self) -> u64 {
        self.cur_rto_us
    }
}
