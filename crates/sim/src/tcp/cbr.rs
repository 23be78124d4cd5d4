//! An unresponsive constant-bit-rate (UDP-like) source: 1500-byte datagrams (1472 B of
//! payload behind 28 B of IP and UDP headers) at a fixed rate, exactly spaced from the flow's
//! start, never retransmitted, deaf to loss and ECN (its datagrams may carry an ECN-capable
//! codepoint: CE marks on them change nothing). It is the traffic an AQM must contain
//! without the sender's help (CHOKe, RFC 7567 §2.1's unresponsive flows; Liu et al. (CKCD);
//! PPV); its receiver sends no ACKs ([`crate::tcp::Receiver::new_cbr`]).

use aqm::Ecn;

use crate::engine::{Event, Nanos, Scheduler, TimerSlot};
use crate::packet::{DataPkt, CBR_PAYLOAD_BYTES, MTU_BYTES};
use crate::tcp::output::tsval;
use crate::tcp::SenderConfig;
use crate::tcp::SenderReport;

/// IPv4 (20 B) and UDP (8 B) headers.
const UDP_IP_HEADER_BYTES: u32 = MTU_BYTES - CBR_PAYLOAD_BYTES;

pub struct CbrSender {
    pub flow: u32,
    rate_bps: u64,
    /// Datagrams to send; None = until stopped.
    total: Option<u32>,
    /// Payload of the last datagram of a finite flow.
    last_payload: u32,
    /// The next datagram's number.
    next: u32,
    timer: TimerSlot,
    /// The path's base RTT, µs: what the time series shows as the flow's srtt.
    base_rtt_us: u64,
    /// Every datagram's ECN codepoint.
    ecn: Ecn,
    pub report: SenderReport,
}

impl CbrSender {
    /// A source of `cfg.size_bytes` (None = unbounded) at `rate_bps`, its datagrams carrying
    /// `ecn`; `cfg`'s ECN and pacing options do not apply.
    pub fn new(cfg: &SenderConfig, rate_bps: u64, ecn: Ecn) -> Self {
        let (total, last_payload) = match cfg.size_bytes {
            Some(b) => {
                let per = CBR_PAYLOAD_BYTES as u64;
                let n = b.div_ceil(per);
                (Some(n as u32), (b - (n - 1) * per) as u32)
            }
            None => (None, CBR_PAYLOAD_BYTES),
        };
        CbrSender {
            flow: cfg.flow,
            rate_bps,
            total,
            last_payload,
            next: 0,
            timer: TimerSlot::default(),
            base_rtt_us: (cfg.handshake_rtt_ns / 1000).max(1),
            ecn,
            report: SenderReport::default(),
        }
    }

    /// The flow opens.
    pub fn start(&mut self, sched: &mut Scheduler, out: &mut Vec<DataPkt>) {
        self.report.started_at = Some(sched.now());
        self.transmit(sched, out);
    }

    /// The application stops (a scheduled stop): no datagram due at or after `now` leaves.
    pub fn stop_writing(&mut self, now: Nanos) {
        if self.report.finished_at.is_some() || self.report.started_at.is_none() {
            return;
        }
        let written = self.next;
        if self.total.is_some_and(|n| n <= written) {
            return;
        }
        self.total = Some(written);
        self.last_payload = CBR_PAYLOAD_BYTES;
        self.report.finished_at = Some(now);
        self.timer.disarm();
    }

    /// The send timer fired.
    pub fn on_timer(&mut self, sched: &mut Scheduler, out: &mut Vec<DataPkt>) {
        let now = sched.now();
        if self
            .timer
            .on_fire(sched, now, Event::PacingTimer(self.flow))
        {
            self.transmit(sched, out);
        }
    }

    /// Send every datagram whose time has come, then sleep until the next one.
    fn transmit(&mut self, sched: &mut Scheduler, out: &mut Vec<DataPkt>) {
        if self.report.finished_at.is_some() {
            return;
        }
        let Some(start) = self.report.started_at else {
            return;
        };
        let now = sched.now();
        loop {
            if self.total.is_some_and(|n| self.next >= n) {
                self.report.finished_at.get_or_insert(now);
                return;
            }
            // Datagram k leaves at start + k·1500·8/rate, computed exactly.
            let k = self.next as u128;
            let at = start
                + ((k * MTU_BYTES as u128 * 8 * 1_000_000_000) / self.rate_bps as u128) as u64;
            if at > now {
                self.timer.arm(sched, at, Event::PacingTimer(self.flow));
                return;
            }
            let seq = self.next;
            self.next += 1;
            let payload = match self.total {
                Some(n) if seq + 1 == n => self.last_payload,
                _ => CBR_PAYLOAD_BYTES,
            };
            let wire_len = payload + UDP_IP_HEADER_BYTES;
            self.report.stats.segs_sent += 1;
            self.report.stats.wire_bytes_sent += wire_len as u64;
            out.push(DataPkt {
                flow: self.flow,
                seq,
                payload,
                wire_len,
                ecn: self.ecn,
                flags: 0,
                hop: 0,
                enqueue_ns: 0,
                value: 0,
                tsval: tsval(now),
            });
        }
    }

    /// The base RTT the time series shows as srtt, µs.
    pub fn base_rtt_us(&self) -> u64 {
        self.base_rtt_us
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    fn cbr(size_bytes: Option<u64>, rate_bps: u64) -> CbrSender {
        CbrSender::new(
            &SenderConfig {
                flow: 0,
                size_bytes,
                ecn: true,
                fq_pacing: true,
                handshake_rtt_ns: 20 * MS,
                tso: None,
            },
            rate_bps,
            Ecn::NotEct,
        )
    }

    /// Run the sender's timer until `t`, collecting what it sends.
    fn run_until(
        s: &mut CbrSender,
        sched: &mut Scheduler,
        t: Nanos,
        out: &mut Vec<(Nanos, DataPkt)>,
    ) {
        let mut buf = vec![];
        while let Some((at, ev)) = sched.pop_until(t) {
            assert_eq!(ev, Event::PacingTimer(0));
            s.on_timer(sched, &mut buf);
            out.extend(buf.drain(..).map(|p| (at, p)));
        }
        sched.advance_to(t);
    }

    #[test]
    fn datagrams_leave_exactly_every_mtu_time_and_ignore_ecn() {
        // 10 Mbit/s: one 1500-byte datagram every 1500·8/10e6 s = 1.2 ms, the first at the start.
        let mut sched = Scheduler::new();
        sched.advance_to(3 * MS);
        let mut s = cbr(None, 10_000_000);
        let mut first = vec![];
        s.start(&mut sched, &mut first);
        let mut out: Vec<(Nanos, DataPkt)> = first.into_iter().map(|p| (3 * MS, p)).collect();
        run_until(&mut s, &mut sched, 3 * MS + 12 * MS, &mut out);
        let times: Vec<Nanos> = out.iter().map(|(t, _)| *t - 3 * MS).collect();
        assert_eq!(times, (0..=10).map(|k| k * 1_200_000).collect::<Vec<_>>());
        assert!(out.iter().enumerate().all(|(k, (_, p))| p.seq == k as u32
            && p.wire_len == 1500
            && p.payload == 1472
            && p.ecn == Ecn::NotEct));
        assert_eq!(
            (s.report.stats.segs_sent, s.report.stats.wire_bytes_sent),
            (11, 11 * 1500)
        );
    }

    #[test]
    fn a_finite_flow_ends_with_a_short_datagram_and_finishes_when_it_is_sent() {
        // 3000 bytes = 1472 + 1472 + 56: the last datagram is 56 + 28 = 84 bytes on the wire.
        let mut sched = Scheduler::new();
        let mut s = cbr(Some(3000), 12_000_000);
        let mut first = vec![];
        s.start(&mut sched, &mut first);
        let mut out: Vec<(Nanos, DataPkt)> = first.into_iter().map(|p| (0, p)).collect();
        run_until(&mut s, &mut sched, 100 * MS, &mut out);
        let wire: Vec<u32> = out.iter().map(|(_, p)| p.wire_len).collect();
        assert_eq!(wire, [1500, 1500, 84]);
        // 1 ms per datagram at 12 Mbit/s; the third leaves at 2 ms, and the flow is done then.
        assert_eq!(s.report.finished_at, Some(2 * MS));
    }

    #[test]
    fn a_stop_sends_nothing_due_at_or_after_it() {
        let mut sched = Scheduler::new();
        let mut s = cbr(None, 12_000_000);
        let mut first = vec![];
        s.start(&mut sched, &mut first);
        let mut out: Vec<(Nanos, DataPkt)> = first.into_iter().map(|p| (0, p)).collect();
        run_until(&mut s, &mut sched, 3 * MS - 1, &mut out);
        sched.advance_to(3 * MS);
        // Datagrams at 0, 1, 2 ms have left; the one due at 3 ms, the stop's instant, does not.
        s.stop_writing(3 * MS);
        run_until(&mut s, &mut sched, 100 * MS, &mut out);
        assert_eq!(out.len(), 3);
        assert_eq!(s.report.finished_at, Some(3 * MS));
    }
}
