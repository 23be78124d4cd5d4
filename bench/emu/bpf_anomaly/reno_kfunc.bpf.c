// SPDX-License-Identifier: GPL-2.0
/* The minimal congestion control for the anomaly (docs/emulator.md, "The anomaly"): Reno made
 * of the kernel's own functions only (the kfuncs tcp_reno_ssthresh, tcp_reno_cong_avoid,
 * tcp_reno_undo_cwnd, net/ipv4/bpf_tcp_ca.c), with TCP_CONG_NEEDS_ECN like DCTCP. Registered
 * as "aqmlab_dctcp" so that the emulator runs it in the port's place (bench/emu/bpf_anomaly.py).
 *
 * Nothing here computes a window. Each op only records itself in a trail (the last op and
 * the snd_cwnd, snd_ssthresh and CA state it saw), and in_ack_event, called by tcp_ack on
 * every ACK, checks the trail: the first time snd_ssthresh or snd_cwnd is at or above 2^31
 * when it was not at the previous op, it stores both ends in `caught`. The counters use the
 * port's names (corrupt, corrupt_ssthresh, corrupt_cwnd), so the emulator refuses such a run
 * with the same message. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char _license[] SEC("license") = "GPL";

#define TCP_CONG_NEEDS_ECN (1U << 1)	/* include/net/tcp.h */

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

struct trail {			/* in icsk_ca_priv */
	__u32 op, cwnd, ssthresh, state;
};

enum { OP_SSTHRESH = 1, OP_CONG_AVOID = 2, OP_UNDO = 3, OP_IN_ACK = 4, OP_SET_STATE = 5 };

struct stats {
	__u64 corrupt;		/* ACKs that found snd_ssthresh or snd_cwnd >= 2^31 */
	__u64 corrupt_ssthresh;
	__u64 corrupt_cwnd;
	__u64 caught_prev_op;	/* the op that ran before (see enum) ... */
	__u64 caught_prev_cwnd;	/* ... and what it saw */
	__u64 caught_prev_ssthresh;
	__u64 caught_prev_state;
	__u64 caught_state;	/* the CA state at the catching in_ack_event */
	__u64 caught_prior_cwnd;
	__u64 caught_prr_out;
};
struct stats stats = {};

static __always_inline struct trail *trail_of(struct sock *sk)
{
	return (struct trail *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline void record(struct sock *sk, __u32 op)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct trail *t = trail_of(sk);

	t->op = op;
	t->cwnd = tp->snd_cwnd;
	t->ssthresh = tp->snd_ssthresh;
	t->state = BPF_CORE_READ_BITFIELD((struct inet_connection_sock *)sk, icsk_ca_state);
}

SEC("struct_ops/rk_ssthresh")
__u32 BPF_PROG(rk_ssthresh, struct sock *sk)
{
	record(sk, OP_SSTHRESH);
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops/rk_cong_avoid")
void BPF_PROG(rk_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
	record(sk, OP_CONG_AVOID);
}

SEC("struct_ops/rk_undo")
__u32 BPF_PROG(rk_undo, struct sock *sk)
{
	record(sk, OP_UNDO);
	return tcp_reno_undo_cwnd(sk);
}

SEC("struct_ops/rk_set_state")
void BPF_PROG(rk_set_state, struct sock *sk, __u8 new_state)
{
	record(sk, OP_SET_STATE);
}

SEC("struct_ops/rk_in_ack")
void BPF_PROG(rk_in_ack, struct sock *sk, __u32 flags)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct trail *t = trail_of(sk);
	__u32 cwnd = tp->snd_cwnd, ssthresh = tp->snd_ssthresh;

	if ((cwnd | ssthresh) & 0x80000000U) {
		if (__sync_fetch_and_add(&stats.corrupt, 1) == 0) {
			stats.corrupt_ssthresh = ssthresh;
			stats.corrupt_cwnd = cwnd;
			stats.caught_prev_op = t->op;
			stats.caught_prev_cwnd = t->cwnd;
			stats.caught_prev_ssthresh = t->ssthresh;
			stats.caught_prev_state = t->state;
			stats.caught_state = BPF_CORE_READ_BITFIELD((struct inet_connection_sock *)sk, icsk_ca_state);
			stats.caught_prior_cwnd = tp->prior_cwnd;
			stats.caught_prr_out = tp->prr_out;
		}
	}
	record(sk, OP_IN_ACK);
}

SEC(".struct_ops")
struct tcp_congestion_ops aqmlab_dctcp = {
	.ssthresh	= (void *)rk_ssthresh,
	.cong_avoid	= (void *)rk_cong_avoid,
	.undo_cwnd	= (void *)rk_undo,
	.set_state	= (void *)rk_set_state,
	.in_ack_event	= (void *)rk_in_ack,
	.flags		= TCP_CONG_NEEDS_ECN,
	.name		= "aqmlab_dctcp",
};
