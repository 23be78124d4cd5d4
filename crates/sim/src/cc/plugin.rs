//! A congestion control written as a Linux struct_ops BPF C file (the form the emulator loads
//! into the kernel), run by the simulator in the plugin sandbox (crates/plugin, `CcInstance`).
//!
//! The kernel calls a CC's ops with the socket; here each op gets the flow's `struct tcp_sock`
//! image in the module's memory, written from [`TcpState`] before the call, and what a BPF CC
//! may write (net/ipv4/bpf_tcp_ca.c, bpf_tcp_ca_btf_struct_access) is read back after it. One
//! registration (instance) per flow class and run serves the class's flows, as one
//! registration serves its sockets in the kernel: global data is shared, `icsk_ca_priv` is
//! per socket.
//!
//! Where the simulator's TCP and the kernel's differ for a CC (plugins/include/bpfcc/vmlinux.h
//! says so for the module's author):
//! - sequence numbers are bytes from an initial sequence number of 0 (`segment × mss`);
//! - `in_ack_event`'s flags: an ACK that advances snd_una without ECE is the fast path
//!   (`CA_ACK_WIN_UPDATE`), any other the slow path (`CA_ACK_SLOWPATH`, with `CA_ACK_ECE` if it
//!   echoed congestion) — tcp_input.c `tcp_ack`, with header prediction taken to fail exactly
//!   on ECE or on an ACK that acknowledges nothing new;
//! - `cong_control`'s `flag` carries `FLAG_ECE` only;
//! - ops the simulator has no occasion for are not called: `sndbuf_expand` (its send buffer is
//!   unlimited), `release` (a flow's socket is never freed before the run ends), `undo_cwnd`
//!   (undo is not modelled, for any CC).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;

use plugin::cc_abi::{ack_sample as A, ops as O, rate_sample as R, sock as S};
use plugin::{CcInstance, CcPlugin, OpArgs};
use serde::Deserialize;

use super::{
    AckEvent, AckSample, CaEvent, CaState, CongestionControl, EcnUse, RateSample, TcpState,
};
use plugin::cc_abi::ops::Op;

/// `{"name": "plugin", "module": "x.wasm", "tunables": {"shift_g": 2}}`: the compiled module
/// (the front builds `.bpf.c` files and caches them by content), loaded and checked when the
/// config is read, and the values its class gives its tunables (`const volatile` globals).
#[derive(Clone, Debug, Deserialize)]
#[serde(try_from = "Spec")]
pub struct Params {
    pub module: PathBuf,
    pub plugin: CcPlugin,
    /// By name; each checked against the module's type for it.
    pub tunables: BTreeMap<String, i128>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Spec {
    module: PathBuf,
    #[serde(default)]
    tunables: BTreeMap<String, serde_json::Value>,
}

impl TryFrom<Spec> for Params {
    type Error = String;
    fn try_from(s: Spec) -> Result<Params, String> {
        let plugin = CcPlugin::from_file(&s.module).map_err(|e| e.to_string())?;
        let mut tunables = BTreeMap::new();
        for (name, v) in s.tunables {
            // A C bool is set with true/false, any tunable with an integer.
            let value = match &v {
                serde_json::Value::Bool(b) => i128::from(*b),
                serde_json::Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                    (Some(i), _) => i128::from(i),
                    (None, Some(u)) => i128::from(u),
                    _ => return Err(format!("{name}: {v} is not an integer")),
                },
                _ => return Err(format!("{name}: {v} is not an integer or a bool")),
            };
            plugin.info().tunable(&name, value)?;
            tunables.insert(name, value);
        }
        Ok(Params {
            module: s.module,
            plugin,
            tunables,
        })
    }
}

impl Params {
    /// How the module's flags ask for ECN (include/net/tcp.h `TCP_CONG_*`): AccECN or ECT(1)
    /// negotiation is L4S; `TCP_CONG_NEEDS_ECN` alone is DCTCP's.
    pub fn ecn_use(&self) -> EcnUse {
        let f = self.plugin.info().flags;
        if f & (O::TCP_CONG_NEEDS_ACCECN | O::TCP_CONG_ECT_1_NEGOTIATION) != 0 {
            EcnUse::L4s
        } else if f & O::TCP_CONG_NEEDS_ECN != 0 {
            EcnUse::Dctcp
        } else {
            EcnUse::Classic
        }
    }
}

/// One flow's CC: its socket in the class's registration (a clone shares the socket).
#[derive(Clone, Debug)]
pub struct PluginCc {
    reg: Rc<RefCell<CcInstance>>,
    sk: u32,
    name: String,
    ecn_use: EcnUse,
    has_cong_control: bool,
    has_min_tso_segs: bool,
}

impl PluginCc {
    /// A socket for one flow in `reg`, the registration of the module `params` loaded.
    pub fn new(params: &Params, reg: &Rc<RefCell<CcInstance>>) -> Result<PluginCc, String> {
        let sk = reg.borrow_mut().new_sock().map_err(|e| e.to_string())?;
        let inst = reg.borrow();
        Ok(PluginCc {
            reg: reg.clone(),
            sk,
            name: inst.info().name.clone(),
            ecn_use: params.ecn_use(),
            has_cong_control: inst.has(Op::CongControl),
            has_min_tso_segs: inst.has(Op::MinTsoSegs),
        })
    }

    /// Run `op` with the socket's image written from `tp`; read what the op may write back
    /// into `tp`. A failed op leaves `tp` as it was; the run ends with its error (the world
    /// checks [`CcInstance::error`]).
    fn op(&self, tp: &mut TcpState, op: Op, args: OpArgs<'_>) -> Option<u32> {
        let mut reg = self.reg.borrow_mut();
        if !reg.has(op) || reg.error().is_some() {
            return None;
        }
        write_sock(reg.sock_mut(self.sk), tp, self.ecn_use);
        let out = reg.call(op, self.sk, tp.now_ns, args).ok()?;
        read_sock(reg.sock(self.sk), tp);
        out
    }
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn get32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn get64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// A sequence number in bytes (an initial sequence number of 0; u32, wrapping, as the
/// kernel's).
fn seq_bytes(seg: u32, mss: u32) -> u32 {
    seg.wrapping_mul(mss)
}

/// The socket's image as the kernel would show it (everything but `icsk_ca_priv`, which is
/// the CC's).
fn write_sock(b: &mut [u8], tp: &TcpState, ecn_use: EcnUse) {
    b[S::SK_STATE] = S::TCP_ESTABLISHED;
    // sk_pacing_shift_update's default (include/net/sock.h: 10, ~1 ms of data at the rate).
    b[S::SK_PACING_SHIFT] = 10;
    put32(
        b,
        S::SK_PACING_STATUS,
        if tp.paced {
            S::SK_PACING_NEEDED
        } else {
            S::SK_PACING_NONE
        },
    );
    put64(b, S::SK_PACING_RATE, tp.pacing_rate);
    put64(b, S::SK_MAX_PACING_RATE, u64::MAX);
    b[S::ICSK_CA_STATE] = tp.ca_state as u8;
    b[S::ICSK_RETRANSMITS] = 0;
    b[S::ICSK_ACK_PENDING] = 0;
    put32(b, S::SND_CWND, tp.cwnd);
    put32(b, S::SND_CWND_CNT, tp.snd_cwnd_cnt);
    put32(b, S::SND_SSTHRESH, tp.ssthresh);
    put32(b, S::APP_LIMITED, tp.app_limited as u32);
    b[S::ECN_FLAGS] = match (tp.ecn_ok, ecn_use) {
        (false, _) => 0,
        (true, EcnUse::L4s) => S::TCP_ECN_MODE_ACCECN,
        (true, _) => S::TCP_ECN_MODE_RFC3168,
    };
    b[S::IS_CWND_LIMITED] = tp.is_cwnd_limited as u8;
    put32(b, S::SND_UNA, seq_bytes(tp.snd_una, tp.mss));
    put32(b, S::SND_NXT, seq_bytes(tp.snd_nxt, tp.mss));
    put32(b, S::RCV_NXT, 0);
    put32(b, S::MSS_CACHE, tp.mss);
    // The kernel keeps srtt_us scaled by 8 (tcp_rtt_estimator).
    put32(b, S::SRTT_US, tp.srtt_us << 3);
    put32(b, S::PACKETS_OUT, tp.packets_out);
    put32(b, S::RETRANS_OUT, tp.retrans_out);
    put32(b, S::SACKED_OUT, tp.sacked_out);
    put32(b, S::LOST_OUT, tp.lost_out);
    put32(b, S::DELIVERED, tp.delivered as u32);
    put32(b, S::DELIVERED_CE, tp.delivered_ce as u32);
    put32(b, S::LOST, tp.lost as u32);
    put32(b, S::PRIOR_CWND, tp.prior_cwnd);
    put32(b, S::MAX_PACKETS_OUT, tp.max_packets_out);
    put32(b, S::SND_CWND_CLAMP, u32::MAX);
    put32(b, S::LSNDTIME, (tp.lsndtime_ns / 1_000_000) as u32);
    // tcp_min_rtt reads rtt_min.s[0].v; the window's three samples are the minimum here.
    for k in 0..3 {
        put32(b, S::RTT_MIN + 8 * k, tp.jiffies());
        put32(b, S::RTT_MIN + 8 * k + 4, tp.min_rtt_us);
    }
    put64(b, S::TCP_MSTAMP, tp.now_us());
    put64(b, S::TCP_CLOCK_CACHE, tp.now_ns);
    put64(b, S::DELIVERED_MSTAMP, tp.delivered_mstamp_us);
    put64(b, S::FIRST_TX_MSTAMP, tp.first_tx_mstamp_us);
}

/// What the op may have written: cwnd, its counter, ssthresh, app_limited, pacing.
fn read_sock(b: &[u8], tp: &mut TcpState) {
    tp.cwnd = get32(b, S::SND_CWND);
    tp.snd_cwnd_cnt = get32(b, S::SND_CWND_CNT);
    tp.ssthresh = get32(b, S::SND_SSTHRESH);
    let app_limited = get32(b, S::APP_LIMITED);
    if app_limited != tp.app_limited as u32 {
        // The kernel's is a u32 delivered count: the simulator's u64 one, nearest above the
        // delivered count it extends.
        tp.app_limited = match app_limited {
            0 => 0,
            v => {
                let base = tp.delivered & !0xffff_ffff;
                let at = base | v as u64;
                if at < tp.delivered {
                    at + (1 << 32)
                } else {
                    at
                }
            }
        };
    }
    tp.pacing_rate = get64(b, S::SK_PACING_RATE);
    tp.paced = get32(b, S::SK_PACING_STATUS) != S::SK_PACING_NONE;
}

impl CongestionControl for PluginCc {
    fn name(&self) -> &str {
        &self.name
    }
    fn init(&mut self, tp: &mut TcpState) {
        self.op(tp, Op::Init, OpArgs::None);
    }
    fn ssthresh(&mut self, tp: &mut TcpState) -> u32 {
        // A failed op ends the run at the next check; until then ssthresh stays as it was.
        self.op(tp, Op::Ssthresh, OpArgs::None)
            .unwrap_or(tp.ssthresh)
    }
    fn cong_avoid(&mut self, tp: &mut TcpState, acked: u32) {
        let ack = seq_bytes(tp.snd_una, tp.mss);
        self.op(tp, Op::CongAvoid, OpArgs::Avoid(ack, acked));
    }
    fn set_state(&mut self, tp: &mut TcpState, new_state: CaState) {
        self.op(tp, Op::SetState, OpArgs::U32(new_state as u32));
    }
    fn cwnd_event(&mut self, tp: &mut TcpState, ev: CaEvent) {
        // include/net/tcp.h enum tcp_ca_event.
        let ev = match ev {
            CaEvent::TxStart => 0,
            CaEvent::CompleteCwr => 2,
            CaEvent::Loss => 3,
        };
        self.op(tp, Op::CwndEvent, OpArgs::U32(ev));
    }
    fn in_ack_event(&mut self, tp: &mut TcpState, ev: &AckEvent) {
        // include/net/tcp.h CA_ACK_SLOWPATH = 1, CA_ACK_WIN_UPDATE = 2, CA_ACK_ECE = 4.
        let flags = match (ev.snd_una_advanced, ev.ece) {
            (true, false) => 2,
            (_, true) => 1 | 4,
            (false, false) => 1,
        };
        self.op(tp, Op::InAckEvent, OpArgs::U32(flags));
    }
    fn pkts_acked(&mut self, tp: &mut TcpState, sample: &AckSample) {
        let mut b = [0u8; A::SIZE];
        put32(&mut b, A::PKTS_ACKED, sample.pkts_acked);
        put32(
            &mut b,
            A::RTT_US,
            sample.rtt_us.map_or(-1, |v| v.min(i32::MAX as u32) as i32) as u32,
        );
        put32(&mut b, A::IN_FLIGHT, sample.in_flight);
        self.op(tp, Op::PktsAcked, OpArgs::AckSample(&b));
    }
    fn has_cong_control(&self) -> bool {
        self.has_cong_control
    }
    fn cong_control(&mut self, tp: &mut TcpState, rs: &RateSample) {
        let mut b = [0u8; R::SIZE];
        put64(&mut b, R::PRIOR_MSTAMP, rs.prior_mstamp_us.unwrap_or(0));
        put32(&mut b, R::PRIOR_DELIVERED, rs.prior_delivered);
        put32(&mut b, R::PRIOR_DELIVERED_CE, rs.prior_delivered_ce);
        put32(&mut b, R::DELIVERED, rs.delivered as i32 as u32);
        put32(&mut b, R::DELIVERED_CE, rs.delivered_ce as i32 as u32);
        put64(&mut b, R::INTERVAL_US, rs.interval_us as u64);
        put32(&mut b, R::SND_INTERVAL_US, rs.snd_interval_us as u32);
        put32(&mut b, R::RCV_INTERVAL_US, rs.rcv_interval_us as u32);
        put64(&mut b, R::RTT_US, rs.rtt_us as u64);
        put32(&mut b, R::LOSSES, rs.losses);
        put32(&mut b, R::ACKED_SACKED, rs.acked_sacked);
        put32(&mut b, R::PRIOR_IN_FLIGHT, rs.prior_in_flight);
        put32(&mut b, R::LAST_END_SEQ, seq_bytes(rs.last_end_seq, tp.mss));
        b[R::IS_APP_LIMITED] = rs.is_app_limited as u8;
        b[R::IS_RETRANS] = rs.is_retrans as u8;
        b[R::IS_ACK_DELAYED] = rs.is_ack_delayed as u8;
        let ack = seq_bytes(tp.snd_una, tp.mss);
        // tcp_input.c FLAG_ECE.
        let flag = if rs.is_ece { 0x40 } else { 0 };
        self.op(tp, Op::CongControl, OpArgs::Control(ack, flag, &b));
    }
    fn ecn_use(&self) -> EcnUse {
        self.ecn_use
    }
    fn min_tso_segs(&self, tp: &TcpState) -> Option<u32> {
        if !self.has_min_tso_segs {
            return None;
        }
        // The core asks min_tso_segs for a number: a write to the socket would be lost, so
        // it ends the run.
        let mut copy = tp.clone();
        let segs = self.op(&mut copy, Op::MinTsoSegs, OpArgs::None);
        let wrote = |f: &str| {
            self.reg.borrow_mut().fail(
                Op::MinTsoSegs,
                tp.now_ns,
                format!("wrote {f}, which the simulator cannot take from min_tso_segs"),
            )
        };
        if (copy.cwnd, copy.snd_cwnd_cnt, copy.ssthresh) != (tp.cwnd, tp.snd_cwnd_cnt, tp.ssthresh)
        {
            wrote("the window (snd_cwnd, snd_cwnd_cnt or snd_ssthresh)");
        } else if (copy.app_limited, copy.pacing_rate, copy.paced)
            != (tp.app_limited, tp.pacing_rate, tp.paced)
        {
            wrote("app_limited or the pacing state");
        }
        segs
    }
}
