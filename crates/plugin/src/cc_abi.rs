//! The congestion-control plugins' ABI: a Linux struct_ops CC (`SEC(".struct_ops") struct
//! tcp_congestion_ops`) built for wasm32 against `plugins/include/bpfcc` (the simulator's
//! `vmlinux.h` and libbpf headers). The byte offsets here are the header's, which asserts them
//! (`__aqmlab_at`); a test reads those assertions back and compares.

/// The import module of the helpers and kernel functions the host provides.
pub const IMPORT_MODULE: &str = "aqmlab_bpfcc_v1";
/// The data segment holding the CC's `struct tcp_congestion_ops` (libbpf's section names).
pub const STRUCT_OPS_SECTIONS: [&str; 2] = [".struct_ops", ".struct_ops.link"];
/// The function table the ops' pointers index (`-Wl,--export-table`).
pub const TABLE_EXPORT: &str = "__indirect_function_table";
pub const MEMORY_EXPORT: &str = "memory";

/// What the host provides, by import name: helpers (include/uapi/linux/bpf.h) and the kernel
/// functions a struct_ops CC may call (net/ipv4/bpf_tcp_ca.c, bpf_tcp_ca_check_kfunc_ids), as
/// (name, wasm parameters, wasm results).
pub const IMPORTS: [(&str, &[Ty], &[Ty]); 9] = [
    ("bpf_ktime_get_ns", &[], &[Ty::I64]),
    ("bpf_get_prandom_u32", &[], &[Ty::I32]),
    ("bpf_jiffies64", &[], &[Ty::I64]),
    ("bpf_tcp_send_ack", &[Ty::I32, Ty::I32], &[Ty::I32]),
    ("tcp_reno_ssthresh", &[Ty::I32], &[Ty::I32]),
    ("tcp_reno_cong_avoid", &[Ty::I32, Ty::I32, Ty::I32], &[]),
    ("tcp_reno_undo_cwnd", &[Ty::I32], &[Ty::I32]),
    ("tcp_slow_start", &[Ty::I32, Ty::I32], &[Ty::I32]),
    ("tcp_cong_avoid_ai", &[Ty::I32, Ty::I32, Ty::I32], &[]),
];

pub use crate::abi::Ty;

/// `struct tcp_congestion_ops` (include/net/tcp.h, 6.18): the ops in member order, with their
/// offsets and wasm signatures.
pub mod ops {
    use super::Ty;

    /// The ops in member order: `op as usize` is the op's index in [`ALL`].
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum Op {
        Ssthresh,
        CongAvoid,
        SetState,
        CwndEvent,
        InAckEvent,
        PktsAcked,
        MinTsoSegs,
        CongControl,
        UndoCwnd,
        SndbufExpand,
        GetInfo,
        Init,
        Release,
    }

    /// One member of `struct tcp_congestion_ops` that is an op.
    #[derive(Clone, Copy, Debug)]
    pub struct OpDef {
        pub op: Op,
        pub member: &'static str,
        pub offset: usize,
        pub params: &'static [Ty],
        pub results: &'static [Ty],
    }

    const fn def(
        op: Op,
        member: &'static str,
        offset: usize,
        params: &'static [Ty],
        results: &'static [Ty],
    ) -> OpDef {
        OpDef {
            op,
            member,
            offset,
            params,
            results,
        }
    }

    const SK: &[Ty] = &[Ty::I32];
    const SK_U32: &[Ty] = &[Ty::I32, Ty::I32];
    const U32: &[Ty] = &[Ty::I32];

    pub const ALL: [OpDef; 13] = [
        def(Op::Ssthresh, "ssthresh", 0, SK, U32),
        def(
            Op::CongAvoid,
            "cong_avoid",
            4,
            &[Ty::I32, Ty::I32, Ty::I32],
            &[],
        ),
        def(Op::SetState, "set_state", 8, SK_U32, &[]),
        def(Op::CwndEvent, "cwnd_event", 12, SK_U32, &[]),
        def(Op::InAckEvent, "in_ack_event", 16, SK_U32, &[]),
        def(Op::PktsAcked, "pkts_acked", 20, SK_U32, &[]),
        def(Op::MinTsoSegs, "min_tso_segs", 24, SK, U32),
        def(
            Op::CongControl,
            "cong_control",
            28,
            &[Ty::I32, Ty::I32, Ty::I32, Ty::I32],
            &[],
        ),
        def(Op::UndoCwnd, "undo_cwnd", 32, SK, U32),
        def(Op::SndbufExpand, "sndbuf_expand", 36, SK, U32),
        def(
            Op::GetInfo,
            "get_info",
            40,
            &[Ty::I32, Ty::I32, Ty::I32, Ty::I32],
            U32,
        ),
        def(Op::Init, "init", 80, SK, &[]),
        def(Op::Release, "release", 84, SK, &[]),
    ];
    pub const NAME: usize = 44;
    pub const NAME_LEN: usize = 16;
    pub const FLAGS: usize = 76;
    pub const SIZE: usize = 88;

    /// `tcp_congestion_ops.flags` (include/net/tcp.h, 6.18).
    pub const TCP_CONG_NON_RESTRICTED: u32 = 1 << 0;
    pub const TCP_CONG_NEEDS_ECN: u32 = 1 << 1;
    pub const TCP_CONG_NEEDS_ACCECN: u32 = 1 << 2;
    pub const TCP_CONG_ECT_1_NEGOTIATION: u32 = 1 << 3;
    pub const TCP_CONG_NO_FALLBACK_RFC3168: u32 = 1 << 4;
    pub const KNOWN_FLAGS: u32 = 0x1f;
}

/// `struct tcp_sock` (with its `inet_connection_sock` and `sock`) as the header lays it out.
pub mod sock {
    pub const SK_STATE: usize = 0;
    pub const SK_PACING_SHIFT: usize = 1;
    pub const SK_PACING_STATUS: usize = 4;
    pub const SK_PACING_RATE: usize = 8;
    pub const SK_MAX_PACING_RATE: usize = 16;
    pub const ICSK_CA_STATE: usize = 24;
    pub const ICSK_RETRANSMITS: usize = 25;
    pub const ICSK_ACK_PENDING: usize = 26;
    pub const ICSK_CA_PRIV: usize = 32;
    /// `ICSK_CA_PRIV_SIZE` (include/net/inet_connection_sock.h): 13 × u64.
    pub const ICSK_CA_PRIV_SIZE: usize = 104;
    pub const SND_CWND: usize = 136;
    pub const SND_CWND_CNT: usize = 140;
    pub const SND_SSTHRESH: usize = 144;
    pub const APP_LIMITED: usize = 148;
    pub const ECN_FLAGS: usize = 152;
    pub const IS_CWND_LIMITED: usize = 153;
    pub const SND_UNA: usize = 156;
    pub const SND_NXT: usize = 160;
    pub const RCV_NXT: usize = 164;
    pub const MSS_CACHE: usize = 168;
    pub const SRTT_US: usize = 172;
    pub const PACKETS_OUT: usize = 176;
    pub const RETRANS_OUT: usize = 180;
    pub const SACKED_OUT: usize = 184;
    pub const LOST_OUT: usize = 188;
    pub const DELIVERED: usize = 192;
    pub const DELIVERED_CE: usize = 196;
    pub const LOST: usize = 200;
    pub const PRIOR_CWND: usize = 204;
    pub const MAX_PACKETS_OUT: usize = 208;
    pub const SND_CWND_CLAMP: usize = 212;
    pub const LSNDTIME: usize = 216;
    pub const RTT_MIN: usize = 220;
    pub const TCP_MSTAMP: usize = 248;
    pub const TCP_CLOCK_CACHE: usize = 256;
    pub const DELIVERED_MSTAMP: usize = 264;
    pub const FIRST_TX_MSTAMP: usize = 272;
    pub const SIZE: usize = 280;

    /// The bytes a BPF CC may write (net/ipv4/bpf_tcp_ca.c, bpf_tcp_ca_btf_struct_access),
    /// as (offset, length, field).
    pub const WRITABLE: [(usize, usize, &str); 9] = [
        (SK_PACING_STATUS, 4, "sk_pacing_status"),
        (SK_PACING_RATE, 8, "sk_pacing_rate"),
        (ICSK_ACK_PENDING, 1, "icsk_ack.pending"),
        (ICSK_CA_PRIV, ICSK_CA_PRIV_SIZE, "icsk_ca_priv"),
        (SND_CWND, 4, "snd_cwnd"),
        (SND_CWND_CNT, 4, "snd_cwnd_cnt"),
        (SND_SSTHRESH, 4, "snd_ssthresh"),
        (APP_LIMITED, 4, "app_limited"),
        (ECN_FLAGS, 1, "ecn_flags"),
    ];

    /// `TCP_ECN_MODE_RFC3168` and `TCP_ECN_MODE_ACCECN` (include/net/tcp.h, 6.18).
    pub const TCP_ECN_MODE_RFC3168: u8 = 1 << 0;
    pub const TCP_ECN_MODE_ACCECN: u8 = 1 << 4;
    /// `enum sk_pacing` (include/net/sock.h).
    pub const SK_PACING_NONE: u32 = 0;
    pub const SK_PACING_NEEDED: u32 = 1;
    /// `TCP_ESTABLISHED` (include/net/tcp_states.h).
    pub const TCP_ESTABLISHED: u8 = 1;
}

/// `struct ack_sample` (include/net/tcp.h).
pub mod ack_sample {
    pub const PKTS_ACKED: usize = 0;
    pub const RTT_US: usize = 4;
    pub const IN_FLIGHT: usize = 8;
    pub const SIZE: usize = 12;
}

/// `struct rate_sample` (include/net/tcp.h, 6.18; `long` members as 64 bits).
pub mod rate_sample {
    pub const PRIOR_MSTAMP: usize = 0;
    pub const PRIOR_DELIVERED: usize = 8;
    pub const PRIOR_DELIVERED_CE: usize = 12;
    pub const DELIVERED: usize = 16;
    pub const DELIVERED_CE: usize = 20;
    pub const INTERVAL_US: usize = 24;
    pub const SND_INTERVAL_US: usize = 32;
    pub const RCV_INTERVAL_US: usize = 36;
    pub const RTT_US: usize = 40;
    pub const LOSSES: usize = 48;
    pub const ACKED_SACKED: usize = 52;
    pub const PRIOR_IN_FLIGHT: usize = 56;
    pub const LAST_END_SEQ: usize = 60;
    pub const IS_APP_LIMITED: usize = 64;
    pub const IS_RETRANS: usize = 65;
    pub const IS_ACK_DELAYED: usize = 66;
    pub const SIZE: usize = 72;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header asserts each offset the host relies on (`__aqmlab_at(struct, field, N)` and
    /// `sizeof`); clang checks the header against its own layout, this test checks ours
    /// against the header.
    #[test]
    fn each_op_is_at_its_index() {
        for (i, d) in ops::ALL.iter().enumerate() {
            assert_eq!(d.op as usize, i, "{}", d.member);
        }
        // Member order: offsets increase.
        assert!(ops::ALL.windows(2).all(|w| w[0].offset < w[1].offset));
    }

    #[test]
    fn the_offsets_are_the_headers() {
        let h = std::fs::read_to_string(crate::include_dir().join("bpfcc/vmlinux.h")).unwrap();
        let ours = |ty: &str, field: &str| -> usize {
            match (ty, field) {
                ("sock", "sk_pacing_status") => sock::SK_PACING_STATUS,
                ("sock", "sk_pacing_rate") => sock::SK_PACING_RATE,
                ("inet_connection_sock", "icsk_ca_state") => sock::ICSK_CA_STATE,
                ("inet_connection_sock", "icsk_ack.pending") => sock::ICSK_ACK_PENDING,
                ("inet_connection_sock", "icsk_ca_priv") => sock::ICSK_CA_PRIV,
                ("tcp_sock", "snd_cwnd") => sock::SND_CWND,
                ("tcp_sock", "ecn_flags") => sock::ECN_FLAGS,
                ("tcp_sock", "snd_una") => sock::SND_UNA,
                ("tcp_sock", "rtt_min") => sock::RTT_MIN,
                ("tcp_sock", "tcp_mstamp") => sock::TCP_MSTAMP,
                ("tcp_sock", "first_tx_mstamp") => sock::FIRST_TX_MSTAMP,
                ("rate_sample", "interval_us") => rate_sample::INTERVAL_US,
                ("rate_sample", "rtt_us") => rate_sample::RTT_US,
                ("rate_sample", "is_ack_delayed") => rate_sample::IS_ACK_DELAYED,
                ("tcp_congestion_ops", "name") => ops::NAME,
                ("tcp_congestion_ops", "flags") => ops::FLAGS,
                ("tcp_congestion_ops", "release") => ops::ALL[12].offset,
                other => panic!("the header asserts {other:?}, which this test does not know"),
            }
        };
        let mut n = 0;
        for line in h.lines() {
            if let Some(rest) = line.strip_prefix("__aqmlab_at(struct ") {
                let parts: Vec<&str> = rest.trim_end_matches(");").split(", ").collect();
                let off: usize = parts[2].parse().unwrap();
                assert_eq!(ours(parts[0], parts[1]), off, "{line}");
                n += 1;
            }
            if let Some(rest) = line.strip_prefix("_Static_assert(sizeof(struct ") {
                let (ty, tail) = rest.split_once(')').unwrap();
                let size: usize = tail
                    .trim_start_matches(" == ")
                    .split(',')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap();
                let want = match ty {
                    "tcp_sock" => sock::SIZE,
                    "rate_sample" => rate_sample::SIZE,
                    "tcp_congestion_ops" => ops::SIZE,
                    other => panic!("sizeof {other}"),
                };
                assert_eq!(want, size, "{line}");
                n += 1;
            }
        }
        assert_eq!(n, 20, "the header's layout assertions");
    }
}
