/* SPDX-License-Identifier: Apache-2.0 */
/* The kernel as the simulator shows it to a BPF congestion control (docs/plugins.md, "Your own
 * congestion control"). A struct_ops CC written against the running kernel's vmlinux.h (Linux
 * 6.18: include/net/sock.h, include/net/inet_connection_sock.h, include/linux/tcp.h,
 * include/net/tcp.h) builds unchanged against this file for the simulator: aqmlab compiles it
 * with clang --target=wasm32 and -I this directory, ahead of the kernel's headers.
 *
 * The structs hold only the fields the simulator keeps, with the kernel's names, types and
 * units, so that a CC reading a field the simulator does not provide fails to build naming
 * it. Fields a BPF CC may not write (net/ipv4/bpf_tcp_ca.c, bpf_tcp_ca_btf_struct_access:
 * only sk_pacing_rate, sk_pacing_status, icsk_ca_priv, icsk_ack.pending, snd_cwnd,
 * snd_cwnd_cnt, snd_ssthresh, ecn_flags and app_limited) are const here: writing one is a
 * compile error, as the kernel's verifier refuses it at load.
 *
 * Differences from the kernel, forced by what a simulator is:
 *  - Sequence numbers count bytes as the kernel's do, from an initial sequence number of 0;
 *    the simulator's segments are all mss_cache bytes.
 *  - The host never raises the receiver-side events (CA_EVENT_ECN_IS_CE / _NO_CE): its
 *    receivers echo CE as the kernel's do for the CC's flags (RFC 3168; DCTCP's state machine,
 *    tcp_dctcp.h, for TCP_CONG_NEEDS_ECN; AccECN for TCP_CONG_NEEDS_ACCECN). So
 *    icsk_ack.pending and ecn_flags may be read but a write to either ends the run.
 *  - rcv_nxt is 0: the sender receives no data.
 *  - The layout is this file's, not the kernel's (wasm32, and no field the simulator lacks);
 *    the offsets below are also the host's (crates/plugin/src/cc_abi.rs), checked at build.
 */
#ifndef __AQMLAB_SIM_VMLINUX_H__
#define __AQMLAB_SIM_VMLINUX_H__
#define AQMLAB_SIM_VMLINUX 1

#ifndef __wasm32__
#error "this vmlinux.h is the simulator's (wasm32); build the kernel's side against the kernel's (bpftool btf dump)"
#endif

typedef unsigned char __u8;
typedef signed char __s8;
typedef unsigned short __u16;
typedef short __s16;
typedef unsigned int __u32;
typedef int __s32;
typedef unsigned long long __u64;
typedef long long __s64;
typedef __u8 u8;
typedef __s8 s8;
typedef __u16 u16;
typedef __s16 s16;
typedef __u32 u32;
typedef __s32 s32;
typedef __u64 u64;
typedef __s64 s64;
typedef _Bool bool;
enum { false = 0, true = 1 };
typedef __SIZE_TYPE__ size_t;
#define NULL ((void *)0)

/* include/net/tcp_states.h */
enum {
	TCP_ESTABLISHED = 1,
	TCP_SYN_SENT = 2,
	TCP_SYN_RECV = 3,
	TCP_FIN_WAIT1 = 4,
	TCP_FIN_WAIT2 = 5,
	TCP_TIME_WAIT = 6,
	TCP_CLOSE = 7,
	TCP_CLOSE_WAIT = 8,
	TCP_LAST_ACK = 9,
	TCP_LISTEN = 10,
	TCP_CLOSING = 11,
	TCP_NEW_SYN_RECV = 12,
};

/* include/uapi/linux/tcp.h enum tcp_ca_state */
enum tcp_ca_state {
	TCP_CA_Open = 0,
	TCP_CA_Disorder = 1,
	TCP_CA_CWR = 2,
	TCP_CA_Recovery = 3,
	TCP_CA_Loss = 4,
};

/* include/net/tcp.h enum tcp_ca_event; the simulator raises TX_START, COMPLETE_CWR and LOSS
 * (see the top for the receiver's two). */
enum tcp_ca_event {
	CA_EVENT_TX_START = 0,
	CA_EVENT_CWND_RESTART = 1,
	CA_EVENT_COMPLETE_CWR = 2,
	CA_EVENT_LOSS = 3,
	CA_EVENT_ECN_NO_CE = 4,
	CA_EVENT_ECN_IS_CE = 5,
};

/* include/net/tcp.h enum tcp_ca_ack_event_flags: in_ack_event's flags. */
enum tcp_ca_ack_event_flags {
	CA_ACK_SLOWPATH = 1,
	CA_ACK_WIN_UPDATE = 2,
	CA_ACK_ECE = 4,
};

/* include/net/sock.h enum sk_pacing */
enum sk_pacing {
	SK_PACING_NONE = 0,
	SK_PACING_NEEDED = 1,
	SK_PACING_FQ = 2,
};

/* include/net/inet_connection_sock.h */
enum inet_csk_ack_state_t {
	ICSK_ACK_SCHED = 1,
	ICSK_ACK_TIMER = 2,
	ICSK_ACK_PUSHED = 4,
	ICSK_ACK_PUSHED2 = 8,
	ICSK_ACK_NOW = 16,
	ICSK_ACK_NOMEM = 32,
};

struct sock_common {
	const unsigned char skc_state;	/* TCP_ESTABLISHED */
};

struct sock {
	struct sock_common __sk_common;
	const __u8 sk_pacing_shift;		/* 10 (sk_pacing_shift_update: ~1 ms of data) */
	__u32 sk_pacing_status;			/* enum sk_pacing */
	__u64 sk_pacing_rate;			/* bytes per second */
	const __u64 sk_max_pacing_rate;		/* ~0: unlimited */
};

struct inet_sock {
	struct sock sk;
};

struct inet_connection_sock {
	struct inet_sock icsk_inet;
	const __u8 icsk_ca_state;		/* enum tcp_ca_state (a 5-bit field in the kernel) */
	const __u8 icsk_retransmits;		/* 0: the host does not count them */
	struct {
		__u8 pending;			/* ICSK_ACK_*; see the top */
	} icsk_ack;
	__u64 icsk_ca_priv[13];			/* ICSK_CA_PRIV_SIZE = 13 * sizeof(u64) */
};

/* include/linux/win_minmax.h */
struct minmax_sample {
	__u32 t;
	__u32 v;
};
struct minmax {
	struct minmax_sample s[3];
};

struct tcp_sock {
	struct inet_connection_sock inet_conn;
	/* What a BPF CC may write. */
	__u32 snd_cwnd;			/* segments */
	__u32 snd_cwnd_cnt;		/* segments acked towards the next increase */
	__u32 snd_ssthresh;		/* segments */
	__u32 app_limited;		/* delivered count at which app-limited ends; 0: not */
	__u8 ecn_flags;			/* TCP_ECN_MODE_RFC3168 (1) or _ACCECN (1 << 4); see the top */
	/* What it may read. */
	const __u8 is_cwnd_limited;	/* a 1-bit field in the kernel */
	const __u32 snd_una;		/* bytes */
	const __u32 snd_nxt;		/* bytes */
	const __u32 rcv_nxt;		/* 0; see the top */
	const __u32 mss_cache;		/* bytes */
	const __u32 srtt_us;		/* smoothed RTT << 3, us (as the kernel's) */
	const __u32 packets_out;
	const __u32 retrans_out;
	const __u32 sacked_out;
	const __u32 lost_out;
	const __u32 delivered;
	const __u32 delivered_ce;
	const __u32 lost;
	const __u32 prior_cwnd;
	const __u32 max_packets_out;
	const __u32 snd_cwnd_clamp;	/* ~0: unclamped, the kernel's default */
	const __u32 lsndtime;		/* last data sent, jiffies (HZ = 1000) */
	const struct minmax rtt_min;	/* tcp_min_rtt(tp) = rtt_min.s[0].v, us */
	const __u64 tcp_mstamp;		/* now, us */
	const __u64 tcp_clock_cache;	/* now, ns */
	const __u64 delivered_mstamp;	/* us */
	const __u64 first_tx_mstamp;	/* us */
};

/* include/net/tcp.h struct ack_sample: pkts_acked's argument. */
struct ack_sample {
	__u32 pkts_acked;
	__s32 rtt_us;		/* -1: no valid sample */
	__u32 in_flight;
};

/* include/net/tcp.h struct rate_sample: cong_control's argument (long is 64 bits in the
 * kernel: __s64 here). */
struct rate_sample {
	__u64 prior_mstamp;
	__u32 prior_delivered;
	__u32 prior_delivered_ce;
	__s32 delivered;
	__s32 delivered_ce;
	__s64 interval_us;
	__u32 snd_interval_us;
	__u32 rcv_interval_us;
	__s64 rtt_us;
	int losses;
	__u32 acked_sacked;
	__u32 prior_in_flight;
	__u32 last_end_seq;
	bool is_app_limited;
	bool is_retrans;
	bool is_ack_delayed;
};

struct module;
struct list_head {
	struct list_head *next, *prev;
};
union tcp_cc_info;

/* include/net/tcp.h struct tcp_congestion_ops (6.18), its member order and signatures.
 * cong_control's `flag` carries FLAG_ECE (0x40, tcp_input.c) only. */
struct tcp_congestion_ops {
	__u32 (*ssthresh)(struct sock *sk);
	void (*cong_avoid)(struct sock *sk, __u32 ack, __u32 acked);
	void (*set_state)(struct sock *sk, __u8 new_state);
	void (*cwnd_event)(struct sock *sk, enum tcp_ca_event ev);
	void (*in_ack_event)(struct sock *sk, __u32 flags);
	void (*pkts_acked)(struct sock *sk, const struct ack_sample *sample);
	__u32 (*min_tso_segs)(struct sock *sk);
	void (*cong_control)(struct sock *sk, __u32 ack, int flag, const struct rate_sample *rs);
	__u32 (*undo_cwnd)(struct sock *sk);
	__u32 (*sndbuf_expand)(struct sock *sk);
	size_t (*get_info)(struct sock *sk, __u32 ext, int *attr, union tcp_cc_info *info);
	char name[16];
	struct module *owner;
	struct list_head list;
	__u32 key;
	__u32 flags;
	void (*init)(struct sock *sk);
	void (*release)(struct sock *sk);
};

/* The layout the host reads and writes (crates/plugin/src/cc_abi.rs). */
#define __aqmlab_at(type, field, off) _Static_assert(__builtin_offsetof(type, field) == (off), #type "." #field)
__aqmlab_at(struct sock, sk_pacing_status, 4);
__aqmlab_at(struct sock, sk_pacing_rate, 8);
__aqmlab_at(struct inet_connection_sock, icsk_ca_state, 24);
__aqmlab_at(struct inet_connection_sock, icsk_ack.pending, 26);
__aqmlab_at(struct inet_connection_sock, icsk_ca_priv, 32);
__aqmlab_at(struct tcp_sock, snd_cwnd, 136);
__aqmlab_at(struct tcp_sock, ecn_flags, 152);
__aqmlab_at(struct tcp_sock, snd_una, 156);
__aqmlab_at(struct tcp_sock, rtt_min, 220);
__aqmlab_at(struct tcp_sock, tcp_mstamp, 248);
__aqmlab_at(struct tcp_sock, first_tx_mstamp, 272);
_Static_assert(sizeof(struct tcp_sock) == 280, "sizeof(struct tcp_sock)");
__aqmlab_at(struct rate_sample, interval_us, 24);
__aqmlab_at(struct rate_sample, rtt_us, 40);
__aqmlab_at(struct rate_sample, is_ack_delayed, 66);
_Static_assert(sizeof(struct rate_sample) == 72, "sizeof(struct rate_sample)");
__aqmlab_at(struct tcp_congestion_ops, name, 44);
__aqmlab_at(struct tcp_congestion_ops, flags, 76);
__aqmlab_at(struct tcp_congestion_ops, release, 84);
_Static_assert(sizeof(struct tcp_congestion_ops) == 88, "sizeof(struct tcp_congestion_ops)");
#undef __aqmlab_at

#endif
