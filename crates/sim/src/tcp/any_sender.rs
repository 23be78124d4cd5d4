//! A flow's sender, TCP or CBR, and what the rest of the simulator reads of either: the
//! world dispatches its events through [`AnySender`] (one branch on the kind per event), and
//! the results read a [`SenderReport`] and a [`SenderSample`].

use std::ops::Deref;

use crate::cc::{CaState, CcProbe, CongestionControl, TCP_INFINITE_SSTHRESH};
use crate::engine::{Nanos, Scheduler};
use crate::packet::{AckPkt, DataPkt};
use crate::tcp::{CbrSender, Sender};

/// Counters a run reports per flow.
#[derive(Clone, Copy, Debug, Default)]
pub struct SenderStats {
    /// Data packets sent, retransmissions included.
    pub segs_sent: u64,
    pub retrans_segs: u64,
    /// Their IP bytes.
    pub wire_bytes_sent: u64,
    /// RTOs, tail-loss probes, entries into Recovery and into CWR (TCP only).
    pub rto_count: u64,
    pub tlp_count: u64,
    pub recoveries: u64,
    pub cwr_count: u64,
    /// With TSO: the skbs handed to the NIC, each one TSO/GSO packet of one or more segments.
    pub tso_skbs: u64,
}

/// What the results read of any sender at the end of a run.
#[derive(Clone, Copy, Debug, Default)]
pub struct SenderReport {
    pub started_at: Option<Nanos>,
    /// When a TCP sender's last data was acknowledged; when a CBR source sent its last
    /// datagram or stopped.
    pub finished_at: Option<Nanos>,
    pub stats: SenderStats,
}

/// A sender's columns of the time series.
#[derive(Clone, Debug)]
pub struct SenderSample {
    pub cwnd: u32,
    pub ssthresh: u32,
    pub inflight: u32,
    pub srtt_us: u64,
    /// Bytes per second.
    pub pacing_rate: u64,
    pub ca_state: CaState,
    pub cc: CcProbe,
}

/// Both kinds are held inline, so the per-packet dispatch chases no pointer; a CBR flow's
/// slot is as large as a TCP sender's.
#[allow(clippy::large_enum_variant)]
pub enum AnySender {
    Tcp(Sender),
    Cbr(CbrSender),
}

/// The report is read the same way whatever the kind (`flow.sender.finished_at`).
impl Deref for AnySender {
    type Target = SenderReport;

    #[inline]
    fn deref(&self) -> &SenderReport {
        match self {
            AnySender::Tcp(s) => &s.report,
            AnySender::Cbr(s) => &s.report,
        }
    }
}

impl AnySender {
    pub fn is_cbr(&self) -> bool {
        matches!(self, AnySender::Cbr(_))
    }

    /// "cbr", or the CC's Linux name.
    pub fn kind_name(&self) -> &str {
        match self {
            AnySender::Tcp(s) => s.cc.name(),
            AnySender::Cbr(_) => "cbr",
        }
    }

    pub fn start(&mut self, sched: &mut Scheduler, out: &mut Vec<DataPkt>) {
        match self {
            AnySender::Tcp(s) => s.start(sched, out),
            AnySender::Cbr(s) => s.start(sched, out),
        }
    }

    pub fn stop_writing(&mut self, now: Nanos) {
        match self {
            AnySender::Tcp(s) => s.stop_writing(now),
            AnySender::Cbr(s) => s.stop_writing(now),
        }
    }

    /// The retransmission-timer slot fired (only a TCP sender arms it).
    #[inline]
    pub fn on_xmit_timer(&mut self, sched: &mut Scheduler, out: &mut Vec<DataPkt>) {
        if let AnySender::Tcp(s) = self {
            s.on_xmit_timer(sched, out);
        }
    }

    /// The pacing timer (TCP) or the send timer (CBR) fired.
    #[inline]
    pub fn on_pacing_timer(&mut self, sched: &mut Scheduler, out: &mut Vec<DataPkt>) {
        match self {
            AnySender::Tcp(s) => s.on_pacing_timer(sched, out),
            AnySender::Cbr(s) => s.on_timer(sched, out),
        }
    }

    /// One of the flow's packets left its host's NIC (TSQ; a CBR flow has none).
    #[inline]
    pub fn on_nic_departure(
        &mut self,
        wire_len: u32,
        sched: &mut Scheduler,
        out: &mut Vec<DataPkt>,
    ) {
        if let AnySender::Tcp(s) = self {
            s.on_nic_departure(wire_len, sched, out);
        }
    }

    /// An ACK arrived (a CBR flow's receiver sends none).
    #[inline]
    pub fn on_ack(&mut self, ack: &AckPkt, sched: &mut Scheduler, out: &mut Vec<DataPkt>) {
        if let AnySender::Tcp(s) = self {
            s.on_ack(ack, sched, out);
        }
    }

    /// The time-series columns. A CBR flow has no window: it shows a TCP sender's values
    /// before its first ACK (cwnd 10, ssthresh infinite, nothing in flight, no pacing rate,
    /// Open) with the path's base RTT as srtt.
    pub fn sample(&self) -> SenderSample {
        match self {
            AnySender::Tcp(s) => SenderSample {
                cwnd: s.tp.cwnd,
                ssthresh: s.tp.ssthresh,
                inflight: s.inflight(),
                srtt_us: s.srtt_us(),
                pacing_rate: s.tp.pacing_rate,
                ca_state: s.tp.ca_state,
                cc: CongestionControl::probe(&s.cc, &s.tp),
            },
            AnySender::Cbr(s) => SenderSample {
                cwnd: crate::cc::TCP_INIT_CWND,
                ssthresh: TCP_INFINITE_SSTHRESH,
                inflight: 0,
                srtt_us: s.base_rtt_us(),
                pacing_rate: 0,
                ca_state: CaState::Open,
                cc: CcProbe::default(),
            },
        }
    }
}
