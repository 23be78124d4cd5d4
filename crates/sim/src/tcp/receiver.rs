//! The TCP receiver: in-order delivery, SACK blocks, delayed ACKs with quick-ACK mode,
//! compressed SACKs, and the three ECN feedback modes — as Linux's receive path
//! (net/ipv4/tcp_input.c: `tcp_data_queue`, `tcp_event_data_recv`, `__tcp_ack_snd_check`,
//! `tcp_send_delayed_ack`, `tcp_sack_new_ofo_skb`, `tcp_ecn_check_ce`, `tcp_ecn_accept_cwr`;
//! include/net/tcp_dctcp.h `dctcp_ece_ack_update`; RFC 3168 §6.1.3, RFC 8257 §3.2).
//!
//! Simplifications (documented in docs/model.md): the receiver reads instantly, so pushed data
//! are ACKed on arrival (`__tcp_cleanup_rbuf` after the read), the advertised window never
//! limits the sender (Linux's receive-buffer autotuning,
//! `tcp_rcv_space_adjust`, keeps it ahead of a bulk sender) and "the window would advance"
//! always holds; no DSACK blocks (the simulated network never duplicates or reorders, so
//! DSACK would only report retransmissions that were spurious, which the sender does not
//! undo either); the receiver's own RTT estimate (for bounding the delayed-ACK timer and the
//! compressed-SACK delay) is the path's base RTT, as measured during the handshake.

use aqm::Ecn;

use crate::engine::{Event, Nanos, Scheduler, TimerSlot};
use crate::packet::{ack_wire_len, flags, AckPkt, DataPkt, MAX_SACK_BLOCKS, MSS_BYTES};

/// `TCP_ATO_MIN` = HZ/25 = 40 ms (include/net/tcp.h).
pub const TCP_ATO_MIN_NS: Nanos = 40_000_000;
/// `TCP_DELACK_MIN` = HZ/25 = 40 ms.
pub const TCP_DELACK_MIN_NS: Nanos = 40_000_000;
/// `TCP_DELACK_MAX` = HZ/5 = 200 ms (`icsk_delack_max`).
pub const TCP_DELACK_MAX_NS: Nanos = 200_000_000;
/// `max_ato` = HZ/2 in `tcp_send_delayed_ack`.
const MAX_ATO_NS: Nanos = 500_000_000;
/// `TCP_MAX_QUICKACKS` = 16.
pub const TCP_MAX_QUICKACKS: u32 = 16;
/// `sysctl_tcp_comp_sack_nr` = 44: at most this many ACKs are compressed into one.
pub const TCP_COMP_SACK_NR: u32 = 44;
/// `sysctl_tcp_comp_sack_delay_ns` = 1 ms: the longest a compressed SACK waits.
pub const TCP_COMP_SACK_DELAY_NS: Nanos = 1_000_000;
/// `TCP_FASTRETRANS_THRESH` = 3: dupACKs sent immediately before compression starts.
pub const TCP_FASTRETRANS_THRESH: u32 = 3;

/// How this receiver echoes CE marks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EcnFeedback {
    /// ECN not negotiated.
    Off,
    /// RFC 3168: ECE latched until a CWR arrives.
    Classic,
    /// RFC 8257 §3.2 / `dctcp_ece_ack_update`: ECE reflects the CE state of the data each ACK
    /// newly acknowledges, with an immediate ACK at each CE-state change.
    Dctcp,
    /// Accurate ECN: every ACK carries the running count of CE segments received.
    Accurate,
}

/// An out-of-order range `[start, end)` of segments, with the time order of its last growth
/// (SACK blocks are reported most recent first, RFC 2018 §4).
#[derive(Clone, Copy, Debug)]
struct OfoRange {
    start: u32,
    end: u32,
    touched: u64,
}

#[derive(Debug)]
pub struct Receiver {
    pub flow: u32,
    ecn: EcnFeedback,
    /// Segments in a finite flow (None = bulk).
    total_segs: Option<u32>,
    /// Payload of the last segment of a finite flow.
    last_payload: u32,
    /// Next in-order segment expected.
    pub rcv_nxt: u32,
    /// rcv_nxt when the last ACK was sent (`rcv_wup`).
    rcv_wup: u32,
    /// Payload bytes received in order since the last ACK (`rcv_nxt − rcv_wup` in bytes).
    unacked_bytes: u64,
    ofo: Vec<OfoRange>,
    touch_clock: u64,
    // Delayed-ACK engine (`icsk_ack`).
    quick: u32,
    ato_ns: Nanos,
    lrcvtime_ns: Nanos,
    ack_scheduled: bool,
    /// `ICSK_ACK_PUSHED`: an in-order segment with PSH arrived since the last ACK.
    pushed: bool,
    ack_now: bool,
    delack: TimerSlot,
    /// The receiver's RTO (handshake RTT + 200 ms), for the ATO logic.
    rto_ns: Nanos,
    /// The receiver's RTT estimate (from the handshake: the base RTT).
    srtt_ns: Nanos,
    // Compressed SACK.
    compressed_ack: u32,
    dup_ack_counter: u32,
    compressed_ack_rcv_nxt: u32,
    comp_sack: TimerSlot,
    // ECN.
    demand_cwr: bool,
    ecn_seen: bool,
    ce_state: bool,
    prior_rcv_nxt: u32,
    ce_count: u32,
    /// RFC 7323 TS.Recent (ms), echoed as TSecr.
    ts_recent: u32,
    // Measurement.
    /// Payload bytes delivered in order to the application.
    pub delivered_bytes: u64,
    /// Data segments received (including duplicates).
    pub segs_received: u64,
    /// Time the last byte of a finite flow was delivered.
    pub completed_at: Option<Nanos>,
    pub acks_sent: u64,
    /// An unresponsive CBR (UDP-like) sink: counts every datagram, sends no ACKs.
    cbr: bool,
}

impl Receiver {
    pub fn new(flow: u32, ecn: EcnFeedback, size_bytes: Option<u64>, base_rtt_ns: Nanos) -> Self {
        let (total_segs, last_payload) = match size_bytes {
            Some(b) => {
                let n = b.div_ceil(MSS_BYTES as u64);
                (Some(n as u32), (b - (n - 1) * MSS_BYTES as u64) as u32)
            }
            None => (None, MSS_BYTES),
        };
        Receiver {
            flow,
            ecn,
            total_segs,
            last_payload,
            rcv_nxt: 0,
            rcv_wup: 0,
            unacked_bytes: 0,
            ofo: Vec::new(),
            touch_clock: 0,
            quick: 0,
            ato_ns: 0,
            lrcvtime_ns: 0,
            ack_scheduled: false,
            pushed: false,
            ack_now: false,
            delack: TimerSlot::default(),
            rto_ns: base_rtt_ns + 200_000_000,
            srtt_ns: base_rtt_ns,
            compressed_ack: 0,
            dup_ack_counter: 0,
            compressed_ack_rcv_nxt: 0,
            comp_sack: TimerSlot::default(),
            demand_cwr: false,
            ecn_seen: false,
            ce_state: false,
            prior_rcv_nxt: 0,
            ce_count: 0,
            ts_recent: 0,
            delivered_bytes: 0,
            segs_received: 0,
            completed_at: None,
            acks_sent: 0,
            cbr: false,
        }
    }

    /// The sink of an unresponsive CBR flow: every datagram's payload counts as delivered
    /// (UDP has no order to wait for); nothing is acknowledged.
    pub fn new_cbr(flow: u32, size_bytes: Option<u64>, base_rtt_ns: Nanos) -> Self {
        let mut r = Receiver::new(flow, EcnFeedback::Off, None, base_rtt_ns);
        r.cbr = true;
        r.total_segs =
            size_bytes.map(|b| b.div_ceil(crate::packet::CBR_PAYLOAD_BYTES as u64) as u32);
        r
    }

    fn payload_of(&self, seq: u32) -> u32 {
        match self.total_segs {
            Some(n) if seq + 1 == n => self.last_payload,
            _ => MSS_BYTES,
        }
    }

    /// `tcp_incr_quickack`: the budget is rcv_wnd/(2·rcv_mss) capped at `max`; the receive
    /// window of an instantly-reading receiver is large, so the cap applies.
    fn incr_quickack(&mut self, max: u32) {
        self.quick = self.quick.max(max);
    }

    /// `tcp_enter_quickack_mode`.
    fn enter_quickack_mode(&mut self, max: u32) {
        self.incr_quickack(max);
        self.ato_ns = TCP_ATO_MIN_NS;
    }

    /// A data segment arrives. ACKs to send are pushed to `out`.
    pub fn on_data(&mut self, pkt: &DataPkt, sched: &mut Scheduler, out: &mut Vec<AckPkt>) {
        let now = sched.now();
        if self.cbr {
            self.cbr_datagram(pkt, now);
            return;
        }
        self.receive(pkt, true, now, sched, out);
        self.ack_snd_check(now, sched, out);
    }

    /// A GRO packet arrives: segments of consecutive sequence, alike in ECN codepoint, flags
    /// and timestamp (see `crate::host::gro`), received as one skb — each segment is queued,
    /// the ATO estimate sees one arrival, and one ACK decision (`__tcp_ack_snd_check`) covers
    /// them all, so a unit of two or more full segments is acknowledged at once by one
    /// (stretch) ACK.
    pub fn on_gro(&mut self, pkts: &[DataPkt], sched: &mut Scheduler, out: &mut Vec<AckPkt>) {
        let now = sched.now();
        if self.cbr {
            for p in pkts {
                self.cbr_datagram(p, now);
            }
            return;
        }
        for (i, p) in pkts.iter().enumerate() {
            self.receive(p, i == 0, now, sched, out);
        }
        self.ack_snd_check(now, sched, out);
    }

    fn cbr_datagram(&mut self, pkt: &DataPkt, now: Nanos) {
        self.segs_received += 1;
        self.delivered_bytes += pkt.payload as u64;
        if self.total_segs == Some(self.segs_received as u32) && self.completed_at.is_none() {
            self.completed_at = Some(now);
        }
    }

    /// `tcp_data_queue` for one segment, without the ACK decision. `first` is false for the
    /// second and later segments of a GRO packet, which Linux receives in the same skb: the
    /// ATO estimate (`tcp_event_data_recv`) is updated once per skb.
    fn receive(
        &mut self,
        pkt: &DataPkt,
        first: bool,
        now: Nanos,
        sched: &mut Scheduler,
        out: &mut Vec<AckPkt>,
    ) {
        self.segs_received += 1;
        let seq = pkt.seq;
        // RFC 7323 §4.3: TS.Recent from a segment with SEG.SEQ <= Last.ACK.sent.
        if seq <= self.rcv_wup {
            self.ts_recent = self.ts_recent.max(tsval_of(pkt));
        }
        // tcp_ecn_accept_cwr: CWR clears DEMAND_CWR and asks for an immediate ACK ("the
        // sender's cwnd may be very low"). A DCTCP receiver then re-derives DEMAND_CWR from
        // the CE state of this segment (dctcp_ece_ack_cwr), so only the ACK remains.
        if pkt.flags & flags::CWR != 0
            && matches!(self.ecn, EcnFeedback::Classic | EcnFeedback::Dctcp)
        {
            self.demand_cwr = false;
            self.ack_now = true;
        }
        if seq < self.rcv_nxt {
            // A retransmission of data already received: "force an immediate ack"
            // (tcp_data_queue, out_of_window).
            self.enter_quickack_mode(TCP_MAX_QUICKACKS);
            self.ack_scheduled = true;
            return;
        }
        if seq == self.rcv_nxt {
            // tcp_measure_rcv_mss: a full segment with PSH is "likely the end of an
            // application write" (commit 4720852ed9af, Linux 6.6).
            if pkt.flags & flags::PSH != 0 && pkt.payload == MSS_BYTES {
                self.pushed = true;
            }
            self.rcv_nxt += 1;
            self.unacked_bytes += self.payload_of(seq) as u64;
            self.delivered_bytes += self.payload_of(seq) as u64;
            if !self.ofo.is_empty() {
                self.ofo_queue();
                // RFC 5681 §4.2: ACK immediately when the gap is filled.
                if self.ofo.is_empty() {
                    self.ack_now = true;
                }
            }
            if first {
                self.event_data_recv(pkt, now, sched, out);
            } else {
                self.ack_scheduled = true;
                self.check_ce(pkt, sched, out);
            }
            if let Some(n) = self.total_segs {
                if self.rcv_nxt == n && self.completed_at.is_none() {
                    self.completed_at = Some(now);
                }
            }
        } else {
            // Out of order (tcp_data_queue_ofo).
            self.check_ce(pkt, sched, out);
            self.insert_ofo(seq);
            self.ack_scheduled = true;
        }
    }

    /// Pull newly in-order ranges from the out-of-order queue (`tcp_ofo_queue`).
    fn ofo_queue(&mut self) {
        while let Some(first) = self.ofo.first().copied() {
            if first.start > self.rcv_nxt {
                break;
            }
            if first.end > self.rcv_nxt {
                for s in self.rcv_nxt..first.end {
                    let b = self.payload_of(s) as u64;
                    self.unacked_bytes += b;
                    self.delivered_bytes += b;
                }
                self.rcv_nxt = first.end;
            }
            self.ofo.remove(0);
        }
    }

    fn insert_ofo(&mut self, seq: u32) {
        self.touch_clock += 1;
        let t = self.touch_clock;
        // Find the first range ending at or after seq.
        let i = self.ofo.partition_point(|r| r.end < seq);
        if i < self.ofo.len() && self.ofo[i].start <= seq && seq < self.ofo[i].end {
            self.ofo[i].touched = t; // duplicate of ofo data
            return;
        }
        let joins_prev = i < self.ofo.len() && self.ofo[i].end == seq;
        let idx = if joins_prev {
            self.ofo[i].end = seq + 1;
            self.ofo[i].touched = t;
            i
        } else if i < self.ofo.len() && self.ofo[i].start == seq + 1 {
            self.ofo[i].start = seq;
            self.ofo[i].touched = t;
            i
        } else {
            self.ofo.insert(
                i,
                OfoRange {
                    start: seq,
                    end: seq + 1,
                    touched: t,
                },
            );
            i
        };
        // Coalesce with the next range if they now touch.
        if idx + 1 < self.ofo.len() && self.ofo[idx].end == self.ofo[idx + 1].start {
            self.ofo[idx].end = self.ofo[idx + 1].end;
            self.ofo.remove(idx + 1);
        }
    }

    /// `tcp_event_data_recv`: ATO estimation, quick-ACK at start and after idle, ECN.
    fn event_data_recv(
        &mut self,
        pkt: &DataPkt,
        now: Nanos,
        sched: &mut Scheduler,
        out: &mut Vec<AckPkt>,
    ) {
        self.ack_scheduled = true;
        if self.ato_ns == 0 {
            // The first data segment: initialize the delayed-ACK engine.
            self.incr_quickack(TCP_MAX_QUICKACKS);
            self.ato_ns = TCP_ATO_MIN_NS;
        } else {
            let m = now - self.lrcvtime_ns;
            if m <= TCP_ATO_MIN_NS / 2 {
                self.ato_ns = (self.ato_ns >> 1) + TCP_ATO_MIN_NS / 2;
            } else if m < self.ato_ns {
                self.ato_ns = ((self.ato_ns >> 1) + m).min(self.rto_ns);
            } else if m > self.rto_ns {
                // Too long a gap: the sender failed to restart its window; ACK quickly.
                self.incr_quickack(TCP_MAX_QUICKACKS);
            }
        }
        self.lrcvtime_ns = now;
        self.check_ce(pkt, sched, out);
    }

    /// `tcp_ecn_check_ce` and, for DCTCP receivers, `dctcp_ece_ack_update`.
    fn check_ce(&mut self, pkt: &DataPkt, sched: &mut Scheduler, out: &mut Vec<AckPkt>) {
        let is_ce = pkt.ecn == Ecn::Ce;
        match self.ecn {
            EcnFeedback::Off => {}
            EcnFeedback::Classic => match pkt.ecn {
                Ecn::Ce => {
                    if !self.demand_cwr {
                        // "Better not delay acks, sender can have a very low cwnd."
                        self.enter_quickack_mode(2);
                        self.demand_cwr = true;
                    }
                    self.ecn_seen = true;
                }
                Ecn::NotEct => {
                    // Funny extension: a non-ECT segment after ECT ones ⇒ quick ACKs.
                    if self.ecn_seen {
                        self.enter_quickack_mode(2);
                    }
                }
                _ => self.ecn_seen = true,
            },
            EcnFeedback::Dctcp => {
                if is_ce != self.ce_state {
                    // CE state changed: flush a pending delayed ACK with the old ECE state,
                    // acknowledging only what preceded this segment, then ACK this one now.
                    if self.delack.is_armed() {
                        self.demand_cwr = self.ce_state;
                        let ack = self.prior_rcv_nxt;
                        self.emit_ack(ack, sched.now(), out);
                    }
                    self.ack_now = true;
                }
                self.prior_rcv_nxt = self.rcv_nxt;
                self.ce_state = is_ce;
                self.demand_cwr = is_ce;
            }
            EcnFeedback::Accurate => {
                if is_ce {
                    self.ce_count += 1;
                }
            }
        }
    }

    /// `__tcp_ack_snd_check`.
    fn ack_snd_check(&mut self, now: Nanos, sched: &mut Scheduler, out: &mut Vec<AckPkt>) {
        if !self.ack_scheduled && !self.ack_now {
            return;
        }
        // More than one full frame received (and the window advances: an instantly-reading
        // receiver), quick-ACK mode, or an immediate ACK requested.
        if self.unacked_bytes > MSS_BYTES as u64 || self.quick > 0 || self.ack_now {
            self.send_ack(now, sched, out);
            return;
        }
        if self.ofo.is_empty() {
            // The application reads at once and drains the socket, so `__tcp_cleanup_rbuf`
            // (net/ipv4/tcp.c) ACKs pushed data now: a lone last segment of an skb is not left
            // to the delayed-ACK timer.
            if self.pushed {
                self.send_ack(now, sched, out);
                return;
            }
            self.send_delayed_ack(now, sched, out);
            return;
        }
        if self.compressed_ack >= TCP_COMP_SACK_NR {
            self.send_ack(now, sched, out);
            return;
        }
        if self.compressed_ack_rcv_nxt != self.rcv_nxt {
            self.compressed_ack_rcv_nxt = self.rcv_nxt;
            self.dup_ack_counter = 0;
        }
        if self.dup_ack_counter < TCP_FASTRETRANS_THRESH {
            self.dup_ack_counter += 1;
            self.send_ack(now, sched, out);
            return;
        }
        self.compressed_ack += 1;
        if self.comp_sack.is_armed() {
            return;
        }
        // 5 % of the RTT, at most tcp_comp_sack_delay_ns.
        let delay = TCP_COMP_SACK_DELAY_NS.min(self.srtt_ns / 20);
        self.comp_sack
            .arm(sched, now + delay, Event::CompSackTimer(self.flow));
    }

    /// `tcp_send_delayed_ack`.
    fn send_delayed_ack(&mut self, now: Nanos, sched: &mut Scheduler, out: &mut Vec<AckPkt>) {
        let mut ato = self.ato_ns;
        if ato > TCP_DELACK_MIN_NS {
            let mut max_ato = MAX_ATO_NS;
            let rtt = self.srtt_ns.max(TCP_DELACK_MIN_NS);
            if rtt < max_ato {
                max_ato = rtt;
            }
            ato = ato.min(max_ato);
        }
        ato = ato.min(TCP_DELACK_MAX_NS);
        let mut timeout = now + ato;
        if let Some(old) = self.delack.deadline() {
            // If the delayed-ACK timer is about to expire, send the ACK now.
            if old <= now + (ato >> 2) {
                self.send_ack(now, sched, out);
                return;
            }
            // Keep the older, earlier timeout.
            if timeout >= old {
                timeout = old;
            }
        }
        self.delack.arm(sched, timeout, Event::AckTimer(self.flow));
    }

    /// The delayed-ACK timer fired (`tcp_delack_timer_handler`).
    pub fn on_delack_timer(&mut self, sched: &mut Scheduler, out: &mut Vec<AckPkt>) {
        let now = sched.now();
        if !self.delack.on_fire(sched, now, Event::AckTimer(self.flow)) {
            return;
        }
        if self.ack_scheduled {
            // Delayed ACK missed: inflate ATO.
            self.ato_ns = (self.ato_ns << 1).min(self.rto_ns);
            self.send_ack(now, sched, out);
        }
    }

    /// The compressed-SACK timer fired (`tcp_compressed_ack_kick`).
    pub fn on_comp_sack_timer(&mut self, sched: &mut Scheduler, out: &mut Vec<AckPkt>) {
        let now = sched.now();
        if !self
            .comp_sack
            .on_fire(sched, now, Event::CompSackTimer(self.flow))
        {
            return;
        }
        if self.compressed_ack > 0 {
            self.send_ack(now, sched, out);
        }
    }

    /// `tcp_send_ack` + `tcp_event_ack_sent`.
    fn send_ack(&mut self, now: Nanos, _sched: &mut Scheduler, out: &mut Vec<AckPkt>) {
        let ack = self.rcv_nxt;
        self.emit_ack(ack, now, out);
        self.compressed_ack = 0;
        self.comp_sack.disarm();
        // tcp_dec_quickack_mode: one quick ACK used per ACK of scheduled data.
        if self.quick > 0 && self.ack_scheduled {
            self.quick -= 1;
            if self.quick == 0 {
                self.ato_ns = TCP_ATO_MIN_NS;
            }
        }
        self.ack_scheduled = false;
        self.ack_now = false;
        self.pushed = false;
        self.delack.disarm();
        self.rcv_wup = self.rcv_nxt;
        self.unacked_bytes = 0;
    }

    fn emit_ack(&mut self, ack: u32, now: Nanos, out: &mut Vec<AckPkt>) {
        let mut sack = [(0u32, 0u32); MAX_SACK_BLOCKS];
        let mut n = 0usize;
        // The most recently changed ranges first (RFC 2018 §4): one pass keeping the (at most)
        // three latest `touched`, newest first. Every growth takes a fresh `touch_clock` tick
        // for one range, so no two ranges share a `touched` and the choice is unique.
        // `touched` starts at 1, so 0 marks an empty place.
        const _: () = assert!(MAX_SACK_BLOCKS == 3);
        let mut best = [(0u64, 0u32, 0u32); MAX_SACK_BLOCKS];
        for r in &self.ofo {
            let e = (r.touched, r.start, r.end);
            if e.0 > best[2].0 {
                if e.0 > best[1].0 {
                    best[2] = best[1];
                    if e.0 > best[0].0 {
                        best[1] = best[0];
                        best[0] = e;
                    } else {
                        best[1] = e;
                    }
                } else {
                    best[2] = e;
                }
            }
        }
        for &(t, start, end) in &best {
            if t > 0 {
                sack[n] = (start, end);
                n += 1;
            }
        }
        let _ = now;
        self.acks_sent += 1;
        out.push(AckPkt {
            flow: self.flow,
            ack,
            sack,
            n_sack: n as u8,
            ece: match self.ecn {
                EcnFeedback::Classic | EcnFeedback::Dctcp => self.demand_cwr,
                _ => false,
            },
            ce_count: self.ce_count,
            tsecr: self.ts_recent,
            wire_len: ack_wire_len(n),
            hop: 0,
            enqueue_ns: 0,
        });
    }

    /// Whether every segment of a finite flow has been delivered.
    pub fn is_complete(&self) -> bool {
        self.completed_at.is_some()
    }
}

/// The TSval a segment carries: its sender's clock in ms (Linux's default `tcp_time_stamp_ts`
/// granularity, HZ-independent since 4.13).
#[inline]
pub fn tsval_of(pkt: &DataPkt) -> u32 {
    pkt.tsval
}
