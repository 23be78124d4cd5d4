//! Congestion controls, each behind one trait, modelled on Linux's `struct tcp_congestion_ops`
//! (`include/net/tcp.h`).
//!
//! The TCP core ([`crate::tcp`]) owns the connection state ([`TcpState`]) and calls the hooks in
//! the order Linux's `tcp_ack()` does (net/ipv4/tcp_input.c):
//! `pkts_acked` (per ACK with an RTT sample) → `in_ack_event` → loss/ECN state changes
//! (`ssthresh`, `set_state`) → `cong_control` if the CC has one, else PRR in CWR/Recovery or
//! `cong_avoid` otherwise. Hooks default to no-ops. A CC's own state lives in its own struct;
//! the shared primitives of `net/ipv4/tcp_cong.c` (`tcp_slow_start`, `tcp_cong_avoid_ai`) are
//! methods of [`TcpState`].
//!
//! Units as in Linux: cwnd, ssthresh and inflight in segments; sequence numbers in segments
//! (the simulator numbers segments, not bytes); times in the units their names say.

pub mod bbr;
pub use bbr::{v2 as bbr2, v3 as bbr3};
pub mod cubic;
pub mod dctcp;
pub mod hystart;
pub mod plugin;
pub mod prague;
pub mod reno;

use serde::Deserialize;

/// `TCP_INFINITE_SSTHRESH` (include/net/tcp.h).
pub const TCP_INFINITE_SSTHRESH: u32 = 0x7fff_ffff;
/// `TCP_INIT_CWND` = 10 (include/net/tcp.h; RFC 6928): the initial window, segments.
pub const TCP_INIT_CWND: u32 = 10;

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

/// What the sender snapshots into each segment when it is (re)transmitted, for the rate sample
/// its delivery will produce (`TCP_SKB_CB(skb)->tx`, `tcp_rate_skb_sent` in
/// net/ipv4/tcp_rate.c; `in_flight`, `lost` and `delivered_ce` are the BBRv2/v3 additions of
/// google/bbr's tree, `tcp_set_tx_in_flight`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxSnapshot {
    /// `tp->first_tx_mstamp` at send time, µs.
    pub first_tx_mstamp_us: u64,
    /// `tp->delivered_mstamp` at send time, µs.
    pub delivered_mstamp_us: u64,
    /// `tp->delivered` at send time (u32 as in Linux's skb control block, wrapping).
    pub delivered: u32,
    /// `tp->delivered_ce` at send time (wrapping).
    pub delivered_ce: u32,
    /// `tp->lost` at send time (wrapping).
    pub lost: u32,
    /// Packets in flight just after this one was sent (`tcp_packets_in_flight + pcount`).
    pub in_flight: u32,
    /// The connection was application-limited when it was sent.
    pub is_app_limited: bool,
}

/// The rate sample handed to `cong_control` once per ACK (Linux `struct rate_sample`,
/// include/net/tcp.h, filled by `tcp_rate_skb_delivered` and `tcp_rate_gen`,
/// net/ipv4/tcp_rate.c; with google/bbr's v2/v3 additions). Signed fields keep Linux's
/// "−1 = invalid" convention so that CC code ports line for line.
#[derive(Clone, Copy, Debug)]
pub struct RateSample {
    /// `tx.delivered_mstamp` of the most recently sent segment this ACK delivered, µs; None if
    /// the ACK delivered no segment with timing information (`!rs->prior_mstamp`).
    pub prior_mstamp_us: Option<u64>,
    /// `tx.delivered` of that segment (u32, wrapping, as Linux).
    pub prior_delivered: u32,
    /// `tx.delivered_ce` of that segment.
    pub prior_delivered_ce: u32,
    /// Segments delivered over the sampling interval (`tp->delivered − prior_delivered`), −1 if
    /// invalid.
    pub delivered: i64,
    /// Of those, CE-marked (v2/v3).
    pub delivered_ce: i64,
    /// The sampling interval, µs: max(send phase, ACK phase); −1 if invalid (no timing, or
    /// shorter than min_rtt).
    pub interval_us: i64,
    /// Send phase of the interval, µs.
    pub snd_interval_us: i64,
    /// ACK phase of the interval, µs.
    pub rcv_interval_us: i64,
    /// `ca_rtt` of this ACK, µs; −1 if none (Karn).
    pub rtt_us: i64,
    /// Segments newly marked lost while processing this ACK.
    pub losses: u32,
    /// Segments newly delivered (cum-acked or SACKed) by this ACK.
    pub acked_sacked: u32,
    /// Packets in flight before this ACK.
    pub prior_in_flight: u32,
    /// `tx.in_flight` of the sampled segment (v2/v3).
    pub tx_in_flight: u32,
    /// Segments marked lost since the sampled segment was sent (`tp->lost − tx.lost`; v2/v3).
    pub lost: u32,
    /// The sampled segment was sent while application-limited.
    pub is_app_limited: bool,
    /// The sampled segment was a retransmission.
    pub is_retrans: bool,
    /// The ACK was probably delayed (`FLAG_ACK_MAYBE_DELAYED`: it acked a single segment with
    /// nothing else in flight).
    pub is_ack_delayed: bool,
    /// The ACK echoed congestion (classic ECE, or an AccECN CE-counter increase).
    pub is_ece: bool,
    /// AccECN: segments newly reported CE by this ACK (Prague's `ece_delta`).
    pub ece_delta: u32,
    /// The ACK covered the retransmission sent by a tail loss probe (v3
    /// `is_acking_tlp_retrans_seq`).
    pub is_acking_tlp_retrans_seq: bool,
    /// Sequence end of the sampled segment (`last_end_seq`, for `tcp_skb_sent_after`).
    pub last_end_seq: u32,
}

impl Default for RateSample {
    fn default() -> Self {
        RateSample {
            prior_mstamp_us: None,
            prior_delivered: 0,
            prior_delivered_ce: 0,
            delivered: -1,
            delivered_ce: 0,
            interval_us: -1,
            snd_interval_us: -1,
            rcv_interval_us: -1,
            rtt_us: -1,
            losses: 0,
            acked_sacked: 0,
            prior_in_flight: 0,
            tx_in_flight: 0,
            lost: 0,
            is_app_limited: false,
            is_retrans: false,
            is_ack_delayed: false,
            is_ece: false,
            ece_delta: 0,
            is_acking_tlp_retrans_seq: false,
            last_end_seq: 0,
        }
    }
}

/// A CC's internal state for the time-series table: what `ss -ti` shows (`bbr:(bw:…,mrtt:…,
/// pacing_gain:…)`) and the bounds a user needs to see why a flow behaves as it does.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CcProbe {
    /// The CC's mode/phase (BBR: "startup", "drain", "probe_bw:up", "probe_rtt", …).
    pub phase: Option<&'static str>,
    /// The CC's bandwidth estimate, bit/s.
    pub bw_bps: Option<f64>,
    /// The CC's upper bound on inflight, segments (BBRv2/v3 inflight_hi), if set.
    pub inflight_hi: Option<u32>,
    /// The CC's congestion-signal average in [0, 1] (DCTCP/Prague/BBRv2 α), if any.
    pub alpha: Option<f64>,
}

/// How a CC uses ECN: decides what the sender sets on its packets and how its receiver echoes CE
/// (RFC 3168 §6.1 classic ECN, RFC 8257 §3.2 DCTCP, RFC 9331 L4S; `tcp_ecn_send`,
/// `TCP_CONG_NEEDS_ECN`).
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
    /// `TCP_CONG_WANTS_CE_EVENTS` without `NEEDS_ECN` (BBRv2/v3): ECN only when the flow class
    /// enables it, classic codepoints (ECT(0) on new data), but the receiver echoes CE with the
    /// DCTCP state machine so each ACK's ECE describes exactly the data it acknowledges.
    WantsCeEvents,
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
    /// Time of the last delivery (`delivered_mstamp`), µs.
    pub delivered_mstamp_us: u64,
    /// Send time of the first segment of the current sampling flight (`first_tx_mstamp`), µs.
    pub first_tx_mstamp_us: u64,
    /// `app_limited`: the `delivered` count at which the current application-limited period
    /// ends; 0 if not application-limited. Set by CCs (BBR's PROBE_RTT) and cleared by the
    /// core when delivery passes it (`tcp_rate_gen`).
    pub app_limited: u64,
    /// Earliest departure time of the next segment (`tcp_wstamp_ns`), ns.
    pub wstamp_ns: u64,
    /// Scoreboard counters (`sacked_out`, `lost_out`, `retrans_out`).
    pub sacked_out: u32,
    pub lost_out: u32,
    pub retrans_out: u32,
    /// ECN was negotiated (`TCP_ECN_OK`).
    pub ecn_ok: bool,
}

impl TcpState {
    pub fn new(mss: u32, now_ns: u64) -> Self {
        TcpState {
            now_ns,
            mss,
            cwnd: TCP_INIT_CWND,
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
            delivered_mstamp_us: 0,
            first_tx_mstamp_us: 0,
            app_limited: 0,
            wstamp_ns: 0,
            sacked_out: 0,
            lost_out: 0,
            retrans_out: 0,
            ecn_ok: false,
        }
    }

    /// `tcp_clock_us()` / `tp->tcp_mstamp`: now in µs.
    #[inline]
    pub fn now_us(&self) -> u64 {
        self.now_ns / 1000
    }

    /// `tcp_jiffies32` with HZ = 1000 (the common server configuration): now in ms.
    #[inline]
    pub fn jiffies(&self) -> u32 {
        (self.now_ns / 1_000_000) as u32
    }

    /// `tcp_in_slow_start`: strictly below ssthresh (Linux ≥ 4.x).
    #[inline]
    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// `tcp_is_cwnd_limited` (include/net/tcp.h, Linux ≥ 5.x): the window was fully used, or —
    /// in slow start — cwnd < 2·max_packets_out (so cwnd grows to twice what was ACKed).
    #[inline]
    pub fn is_cwnd_limited(&self) -> bool {
        if self.is_cwnd_limited {
            return true;
        }
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
        // No clamp: Linux's default `snd_cwnd_clamp` is effectively unlimited (~0).
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
    fn name(&self) -> &str;
    fn init(&mut self, _tp: &mut TcpState) {}
    fn ssthresh(&mut self, tp: &mut TcpState) -> u32;
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
    /// `min_tso_segs`: the floor of `tcp_tso_autosize` if the CC sets it (BBR does); None =
    /// the host's sysctl `tcp_min_tso_segs`.
    fn min_tso_segs(&self, _tp: &TcpState) -> Option<u32> {
        None
    }
    /// `tso_segs`: segments per TSO burst, if the CC sizes bursts itself (BBRv2/v3, Prague);
    /// None = the core's `tcp_tso_autosize` with `min_tso_segs`.
    fn tso_segs(&self, _tp: &TcpState) -> Option<u32> {
        None
    }
    /// `skb_marked_lost` (google/bbr v2/v3 core hook): called for every segment RACK or an RTO
    /// marks lost, after the core counted it in `tp.lost`, with the segment's send-time
    /// snapshot.
    fn skb_marked_lost(&mut self, _tp: &mut TcpState, _tx: &TxSnapshot) {}
    /// The CC's internal state for the time-series table.
    fn probe(&self, _tp: &TcpState) -> CcProbe {
        CcProbe::default()
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
    Bbr(bbr::Params),
    Bbr2(bbr2::Params),
    Bbr3(bbr3::Params),
    Prague(prague::Params),
    /// A user's struct_ops BPF C file, compiled for the sandbox ([`plugin`]).
    Plugin(plugin::Params),
}

/// One flow class's registration of a plugin CC in a run, shared by its flows' sockets.
pub type Registration = std::rc::Rc<std::cell::RefCell<::plugin::CcInstance>>;

/// Static dispatch over every CC (smoltcp's `AnyController`).
///
/// The model-based CCs are boxed: their state is several hundred bytes (BBRv3's the most),
/// and inline it would size every sender — thousands of a workload's CUBIC flows, each
/// carrying BBRv3's footprint, with the page faults and cache misses that go with it.
#[derive(Clone, Debug)]
pub enum AnyCc {
    Reno(reno::Reno),
    Cubic(cubic::Cubic),
    Dctcp(dctcp::Dctcp),
    Bbr(Box<bbr::Bbr>),
    Bbr2(Box<bbr2::Bbr2>),
    Bbr3(Box<bbr3::Bbr3>),
    Prague(Box<prague::Prague>),
    Plugin(Box<plugin::PluginCc>),
}

impl CcConfig {
    /// The names of every CC this build provides.
    pub fn names() -> &'static [&'static str] {
        &["reno", "cubic", "dctcp", "bbr", "bbr2", "bbr3", "prague"]
    }

    /// Every CC with its Linux source and its tunables' defaults, for `aqmlab list ccs`.
    pub fn describe() -> serde_json::Value {
        let d = |name: &str, source: &str, params: serde_json::Value| serde_json::json!({"name": name, "source": source, "params": params});
        serde_json::json!([
            d(
                "reno",
                "Linux net/ipv4/tcp_cong.c (RFC 5681)",
                serde_json::to_value(reno::Params::default()).unwrap()
            ),
            d(
                "cubic",
                "Linux net/ipv4/tcp_cubic.c v2.3 with HyStart (RFC 9438)",
                serde_json::to_value(cubic::Params::default()).unwrap()
            ),
            d(
                "dctcp",
                "Linux net/ipv4/tcp_dctcp.c with the 5.1 loss halving (RFC 8257)",
                serde_json::to_value(dctcp::Params::default()).unwrap()
            ),
            d(
                "bbr",
                bbr::SOURCE,
                serde_json::to_value(bbr::Params::default()).unwrap()
            ),
            d(
                "bbr2",
                bbr2::SOURCE,
                serde_json::to_value(bbr2::Params::default()).unwrap()
            ),
            d(
                "bbr3",
                bbr3::SOURCE,
                serde_json::to_value(bbr3::Params::default()).unwrap()
            ),
            d(
                "prague",
                prague::SOURCE,
                serde_json::to_value(prague::Params::default()).unwrap()
            ),
        ])
    }

    /// Range-check the tunables. Messages start with the parameter name.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            CcConfig::Reno(_) => Ok(()),
            CcConfig::Cubic(p) => p.validate(),
            CcConfig::Dctcp(p) => p.validate(),
            CcConfig::Bbr(p) => p.validate(),
            CcConfig::Bbr2(p) => p.validate(),
            CcConfig::Bbr3(p) => p.validate(),
            CcConfig::Prague(p) => p.validate(),
            CcConfig::Plugin(_) => Ok(()),
        }
    }

    /// For a plugin CC, its registration for one flow class of a run (its
    /// `bpf_get_prandom_u32` stream seeded by `seed`, its tunables set); None for a built-in.
    pub fn register(&self, seed: u64) -> Result<Option<Registration>, String> {
        match self {
            CcConfig::Plugin(p) => {
                let mut reg =
                    ::plugin::CcInstance::new(&p.plugin, seed).map_err(|e| e.to_string())?;
                for (name, value) in &p.tunables {
                    reg.set_tunable(name, *value)?;
                }
                Ok(Some(std::rc::Rc::new(std::cell::RefCell::new(reg))))
            }
            _ => Ok(None),
        }
    }

    /// The CC of one flow, as [`CcConfig::build`]; a plugin CC gets a socket in `reg`, its
    /// class's registration.
    pub fn build_in(&self, seed: u64, reg: Option<&Registration>) -> Result<AnyCc, String> {
        match (self, reg) {
            (CcConfig::Plugin(p), Some(reg)) => {
                plugin::PluginCc::new(p, reg).map(|c| AnyCc::Plugin(Box::new(c)))
            }
            (CcConfig::Plugin(p), None) => Err(format!(
                "plugin {}: no registration for its flow class",
                p.module.display()
            )),
            _ => Ok(self.build(seed)),
        }
    }

    /// The CC for one flow; `seed` feeds the CC's own random choices (BBR's gain-cycle phase
    /// and probe timing: Linux's `prandom_u32_max`/`get_random_u32_below`). Built-ins only: a
    /// plugin CC needs its class's registration ([`CcConfig::build_in`]).
    pub fn build(&self, seed: u64) -> AnyCc {
        match self {
            CcConfig::Reno(p) => AnyCc::Reno(reno::Reno::new(p.clone())),
            CcConfig::Cubic(p) => AnyCc::Cubic(cubic::Cubic::new(p.clone())),
            CcConfig::Dctcp(p) => AnyCc::Dctcp(dctcp::Dctcp::new(p.clone())),
            CcConfig::Bbr(p) => AnyCc::Bbr(Box::new(bbr::Bbr::new(p.clone(), seed))),
            CcConfig::Bbr2(p) => AnyCc::Bbr2(Box::new(bbr2::Bbr2::new(p.clone(), seed))),
            CcConfig::Bbr3(p) => AnyCc::Bbr3(Box::new(bbr3::Bbr3::new(p.clone(), seed))),
            CcConfig::Prague(p) => AnyCc::Prague(Box::new(prague::Prague::new(p.clone(), seed))),
            CcConfig::Plugin(p) => panic!(
                "plugin {}: a plugin CC is built with build_in",
                p.module.display()
            ),
        }
    }
}

macro_rules! dispatch {
    ($self:ident, $cc:ident => $e:expr) => {
        match $self {
            AnyCc::Reno($cc) => $e,
            AnyCc::Cubic($cc) => $e,
            AnyCc::Dctcp($cc) => $e,
            AnyCc::Bbr($cc) => $e,
            AnyCc::Bbr2($cc) => $e,
            AnyCc::Bbr3($cc) => $e,
            AnyCc::Prague($cc) => $e,
            AnyCc::Plugin($cc) => $e,
        }
    };
}

impl CongestionControl for AnyCc {
    fn name(&self) -> &str {
        dispatch!(self, c => c.name())
    }
    fn init(&mut self, tp: &mut TcpState) {
        dispatch!(self, c => c.init(tp))
    }
    fn ssthresh(&mut self, tp: &mut TcpState) -> u32 {
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
    fn min_tso_segs(&self, tp: &TcpState) -> Option<u32> {
        dispatch!(self, c => c.min_tso_segs(tp))
    }
    fn tso_segs(&self, tp: &TcpState) -> Option<u32> {
        dispatch!(self, c => c.tso_segs(tp))
    }
    fn skb_marked_lost(&mut self, tp: &mut TcpState, tx: &TxSnapshot) {
        dispatch!(self, c => c.skb_marked_lost(tp, tx))
    }
    fn probe(&self, tp: &TcpState) -> CcProbe {
        dispatch!(self, c => c.probe(tp))
    }
}
