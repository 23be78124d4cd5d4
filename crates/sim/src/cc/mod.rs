//! Congestion controls, each behind one trait, modelled on Linux's `struct tcp_congestion_ops`
//! (`include/net/tcp.h`).
//!
//! The TCP core ([`crate::tcp`]) owns the connection state ([`TcpState`]) and calls the hooks in
//! the order Linux's `tcp_ack()` does (../shared/reference/cc.md §1.3):
//! `pkts_acked` (per ACK with an RTT sample) → `in_ack_event` → loss/ECN state changes
//! (`ssthresh`, `set_state`) → `cong_control` if the CC has one, else PRR in CWR/Recovery or
//! `cong_avoid` otherwise. Hooks default to no-ops. A CC's own state lives in its own struct;
//! the shared primitives of `net/ipv4/tcp_cong.c` (`tcp_slow_start`, `tcp_cong_avoid_ai`) are
//! methods of [`TcpState`].
//!
//! Units as in Linux: cwnd, ssthresh and inflight in segments; sequence numbers in segments
//! (the simulator numbers segments, not bytes); times in the units their names say.

pub mod cubic;
pub mod dctcp;
pub mod hystart;
pub mod reno;

use serde::Deserialize;

/// `TCP_INFINITE_SSTHRESH` (include/net/tcp.h).
pub const TCP_INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

/// Linux's `icsk_ca_state` (include/net/inet_connection_sock.h, `enum tcp_ca_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CaState {
    Open = 0,
    Disorder = 1,
    Cwr = 2,
    Recovery = 3,
    Loss = 4,
}

impl std::fmt::Display for CaState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The names `ss -i` and tcp_info use.
        f.write_str(match self {
            CaState::Open => "open",
            CaState::Disorder => "disorder",
            CaState::Cwr => "cwr",
            CaState::Recovery => "recovery",
            CaState::Loss => "loss",
        })
    }
}

/// Linux's `enum tcp_ca_event` (the subset the simulator raises).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaEvent {
    /// First transmission when no packets are in flight (restart after idle).
    TxStart,
    /// CWR completed (`tcp_end_cwnd_reduction`).
    CompleteCwr,
    /// RTO fired; raised before cwnd is set to 1 (`tcp_enter_loss`).
    Loss,
}

/// What an ACK carried, for `in_ack_event` (Linux `CA_ACK_*` flags).
#[derive(Clone, Copy, Debug, Default)]
pub struct AckEvent {
    /// The ACK echoed congestion (classic ECE, or an AccECN CE-counter increase).
    pub ece: bool,
    /// The ACK advanced snd_una.
    pub snd_una_advanced: bool,
}

/// The per-ACK sample for `pkts_acked` (Linux `struct ack_sample`).
#[derive(Clone, Copy, Debug, Default)]
pub struct AckSample {
    /// Segments newly cumulatively acked.
    pub pkts_acked: u32,
    /// `ca_rtt`: now − send time of the most recently sent segment newly acked or SACKed,
    /// never from a retransmitted segment (Karn). `None` if there is no valid sample.
    pub rtt_us: Option<u32>,
    /// Segments in flight before this ACK.
    pub in_flight: u32,
}

/// The rate sample handed to CCs that implement `cong_control` (Linux `struct rate_sample`,
/// `net/ipv4/tcp_rate.c`). BBR and Prague extend its use.
#[derive(Clone, Copy, Debug, Default)]
pub struct RateSample {
    /// Segments newly delivered (cum-acked or SACKed) by this ACK.
    pub acked_sacked: u32,
    /// Segments newly marked lost by this ACK.
    pub losses: u32,
    /// `ca_rtt` of this ACK, if any.
    pub rtt_us: Option<u32>,
    /// Inflight before the ACK was processed.
    pub prior_in_flight: u32,
    /// The ACK echoed congestion.
    pub is_ece: bool,
}

/// How a CC uses ECN: decides what the sender sets on its packets and how its receiver echoes CE
/// (../shared/reference/cc.md §1.13).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EcnUse {
    /// Classic RFC 3168 when the flow class enables ECN; ECT(0) on new data only.
    Classic,
    /// `TCP_CONG_NEEDS_ECN` (DCTCP): ECT(0) on every packet incl. retransmissions, and the
    /// receiver runs the DCTCP ECE state machine (RFC 8257 §3.2, `dctcp_ece_ack_update`), so
    /// `delivered_ce` is (almost) exact.
    Dctcp,
    /// L4S: ECT(1) on every packet and accurate per-packet CE feedback (AccECN).
    L4s,
}

/// The connection state a CC reads and writes: the fields of Linux's `struct tcp_sock` that CC
/// modules touch. Owned by the TCP core; handed to every hook.
#[derive(Clone, Debug)]
pub struct TcpState {
    /// Current time, ns.
    pub now_ns: u64,
    /// Sender MSS (payload bytes per full segment; 1448 with timestamps on a 1500 B MTU).
    pub mss: u32,
    /// Congestion window, segments.
    pub cwnd: u32,
    /// Slow-start threshold, segments.
    pub ssthresh: u32,
    /// Additive-increase counter (`snd_cwnd_cnt`), segments.
    pub snd_cwnd_cnt: u32,
    /// cwnd when the current reduction started (`prior_cwnd`), for undo and PRR.
    pub prior_cwnd: u32,
    /// Oldest unacknowledged segment.
    pub snd_una: u32,
    /// Next segment to send for the first time.
    pub snd_nxt: u32,
    /// Segments sent and not cumulatively acked.
    pub packets_out: u32,
    /// `tcp_packets_in_flight` = packets_out − (sacked_out + lost_out) + retrans_out.
    pub inflight: u32,
    /// Cumulative segments delivered (cum-acked or SACKed, each once).
    pub delivered: u64,
    /// Of those, segments reported CE.
    pub delivered_ce: u64,
    /// Cumulative segments marked lost.
    pub lost: u64,
    /// Smoothed RTT, µs (0 until the first sample).
    pub srtt_us: u32,
    /// Windowed minimum RTT (`tcp_min_rtt`), µs (u32::MAX until the first sample).
    pub min_rtt_us: u32,
    /// The sender was limited by cwnd during the last window (`is_cwnd_limited`).
    pub is_cwnd_limited: bool,
    /// Maximum segments in flight over the last window (`max_packets_out`).
    pub max_packets_out: u32,
    /// Congestion state (`icsk_ca_state`).
    pub ca_state: CaState,
    /// Pacing rate, bytes per second (`sk_pacing_rate`).
    pub pacing_rate: u64,
    /// The socket is paced (CC requested it, or the host paces like the fq qdisc).
    pub paced: bool,
    /// Time of the last data transmission (`lsndtime`), ns.
    pub lsndtime_ns: u64,
}

impl TcpState {
    pub fn new(mss: u32, now_ns: u64) -> Self {
        TcpState {
            now_ns,
            mss,
            // TCP_INIT_CWND = 10 (include/net/tcp.h; RFC 6928).
            cwnd: 10,
            ssthresh: TCP_INFINITE_SSTHRESH,
            snd_cwnd_cnt: 0,
            prior_cwnd: 0,
            snd_una: 0,
            snd_nxt: 0,
            packets_out: 0,
            inflight: 0,
            delivered: 0,
            delivered_ce: 0,
            lost: 0,
            srtt_us: 0,
            min_rtt_us: u32::MAX,
            is_cwnd_limited: false,
            max_packets_out: 0,
            ca_state: CaState::Open,
            pacing_rate: 0,
            paced: false,
            lsndtime_ns: 0,
        }
    }

    /// `tcp_in_slow_start`: strictly below ssthresh (Linux ≥ 4.x).
    #[inline]
    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// `tcp_is_cwnd_limited` (include/net/tcp.h): in slow start also true while
    /// cwnd < 2·max_packets_out.
    #[inline]
    pub fn is_cwnd_limited(&self) -> bool {
        if self.in_slow_start() {
            return self.cwnd < 2 * self.max_packets_out;
        }
        self.is_cwnd_limited
    }

    /// `tcp_slow_start` (net/ipv4/tcp_cong.c): ABC without a per-ACK limit (RFC 3465; Linux
    /// removed `tcp_abc` in 3.8). Returns the acked segments left over for congestion avoidance.
    #[inline]
    pub fn slow_start(&mut self, acked: u32) -> u32 {
        let cwnd = self.cwnd.saturating_add(acked).min(self.ssthresh);
        let leftover = acked - (cwnd - self.cwnd);
        self.cwnd = cwnd;
        leftover
    }

    /// `tcp_cong_avoid_ai` (net/ipv4/tcp_cong.c): +1 segment per `w` segments acked.
    #[inline]
    pub fn cong_avoid_ai(&mut self, w: u32, acked: u32) {
        let w = w.max(1);
        // If credits accumulated at a higher w, apply them gently now.
        if self.snd_cwnd_cnt >= w {
            self.snd_cwnd_cnt = 0;
            self.cwnd += 1;
        }
        self.snd_cwnd_cnt += acked;
        if self.snd_cwnd_cnt >= w {
            let delta = self.snd_cwnd_cnt / w;
            self.snd_cwnd_cnt -= delta * w;
            self.cwnd += delta;
        }
        // snd_cwnd_clamp is effectively unlimited in Linux (cc.md §1.1).
    }
}

/// The hooks of Linux's `struct tcp_congestion_ops`. Contracts:
/// - `ssthresh` is called once per congestion episode (entering CWR/Recovery/Loss) and returns
///   the new ssthresh; it may update the CC's own state (CUBIC's W_max).
/// - `cong_avoid` is called per ACK that may raise cwnd (state Open/Disorder/Loss, the ACK
///   advanced snd_una) with `acked` = segments newly delivered; it must respect
///   `tp.is_cwnd_limited()` itself, as Linux modules do.
/// - `cong_control`, when `has_cong_control()` is true, replaces PRR and `cong_avoid` entirely
///   (BBR, Prague).
pub trait CongestionControl {
    /// The Linux module name (`tcp_congestion_ops.name`).
    fn name(&self) -> &'static str;
    fn init(&mut self, _tp: &mut TcpState) {}
    fn ssthresh(&mut self, tp: &TcpState) -> u32;
    fn cong_avoid(&mut self, tp: &mut TcpState, acked: u32);
    fn set_state(&mut self, _tp: &mut TcpState, _new_state: CaState) {}
    fn cwnd_event(&mut self, _tp: &mut TcpState, _ev: CaEvent) {}
    fn in_ack_event(&mut self, _tp: &mut TcpState, _ev: &AckEvent) {}
    fn pkts_acked(&mut self, _tp: &mut TcpState, _sample: &AckSample) {}
    /// `tcp_reno_undo_cwnd`: max(cwnd, prior_cwnd).
    fn undo_cwnd(&mut self, tp: &TcpState) -> u32 {
        tp.cwnd.max(tp.prior_cwnd)
    }
    fn has_cong_control(&self) -> bool {
        false
    }
    fn cong_control(&mut self, _tp: &mut TcpState, _rs: &RateSample) {}
    fn ecn_use(&self) -> EcnUse {
        EcnUse::Classic
    }
    /// Whether the CC asks for pacing (`SK_PACING_NEEDED`).
    fn wants_pacing(&self) -> bool {
        false
    }
}

/// Which CC a flow class runs, with its tunables (module parameters in Linux). Deserialized
/// from the engine config: `{"name": "cubic", "beta": 717, ...}`; unknown keys are refused.
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "name", rename_all = "snake_case", deny_unknown_fields)]
pub enum CcConfig {
    Reno(reno::Params),
    Cubic(cubic::Params),
    Dctcp(dctcp::Params),
}

/// Static dispatch over every CC (smoltcp's `AnyController`).
#[derive(Clone, Debug)]
pub enum AnyCc {
    Reno(reno::Reno),
    Cubic(cubic::Cubic),
    Dctcp(dctcp::Dctcp),
}

impl CcConfig {
    /// The names of every CC this build provides.
    pub fn names() -> &'static [&'static str] {
        &["reno", "cubic", "dctcp"]
    }

    /// Every CC with its Linux source and its tunables' defaults, for `aqmlab list ccs`.
    pub fn describe() -> serde_json::Value {
        let d = |name: &str, source: &str, params: serde_json::Value| serde_json::json!({"name": name, "source": source, "params": params});
        serde_json::json!([
            d("reno", "Linux net/ipv4/tcp_cong.c (RFC 5681)", serde_json::to_value(reno::Params::default()).unwrap()),
            d("cubic", "Linux net/ipv4/tcp_cubic.c v2.3 with HyStart (RFC 9438)", serde_json::to_value(cubic::Params::default()).unwrap()),
            d("dctcp", "Linux net/ipv4/tcp_dctcp.c with the 5.1 loss halving (RFC 8257)", serde_json::to_value(dctcp::Params::default()).unwrap()),
        ])
    }

    /// Range-check the tunables. Messages start with the parameter name.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            CcConfig::Reno(_) => Ok(()),
            CcConfig::Cubic(p) => p.validate(),
            CcConfig::Dctcp(p) => p.validate(),
        }
    }

    pub fn build(&self) -> AnyCc {
        match self {
            CcConfig::Reno(p) => AnyCc::Reno(reno::Reno::new(p.clone())),
            CcConfig::Cubic(p) => AnyCc::Cubic(cubic::Cubic::new(p.clone())),
            CcConfig::Dctcp(p) => AnyCc::Dctcp(dctcp::Dctcp::new(p.clone())),
        }
    }
}

macro_rules! dispatch {
    ($self:ident, $cc:ident => $e:expr) => {
        match $self {
            AnyCc::Reno($cc) => $e,
            AnyCc::Cubic($cc) => $e,
            AnyCc::Dctcp($cc) => $e,
        }
    };
}

impl CongestionControl for AnyCc {
    fn name(&self) -> &'static str {
        dispatch!(self, c => c.name())
    }
    fn init(&mut self, tp: &mut TcpState) {
        dispatch!(self, c => c.init(tp))
    }
    fn ssthresh(&mut self, tp: &TcpState) -> u32 {
        dispatch!(self, c => c.ssthresh(tp))
    }
    fn cong_avoid(&mut self, tp: &mut TcpState, acked: u32) {
        dispatch!(self, c => c.cong_avoid(tp, acked))
    }
    fn set_state(&mut self, tp: &mut TcpState, new_state: CaState) {
        dispatch!(self, c => c.set_state(tp, new_state))
    }
    fn cwnd_event(&mut self, tp: &mut TcpState, ev: CaEvent) {
        dispatch!(self, c => c.cwnd_event(tp, ev))
    }
    fn in_ack_event(&mut self, tp: &mut TcpState, ev: &AckEvent) {
        dispatch!(self, c => c.in_ack_event(tp, ev))
    }
    fn pkts_acked(&mut self, tp: &mut TcpState, sample: &AckSample) {
        dispatch!(self, c => c.pkts_acked(tp, sample))
    }
    fn undo_cwnd(&mut self, tp: &TcpState) -> u32 {
        dispatch!(self, c => c.undo_cwnd(tp))
    }
    fn has_cong_control(&self) -> bool {
        dispatch!(self, c => c.has_cong_control())
    }
    fn cong_control(&mut self, tp: &mut TcpState, rs: &RateSample) {
        dispatch!(self, c => c.cong_control(tp, rs))
    }
    fn ecn_use(&self) -> EcnUse {
        dispatch!(self, c => c.ecn_use())
    }
    fn wants_pacing(&self) -> bool {
        dispatch!(self, c => c.wants_pacing())
    }
}
