// SPDX-License-Identifier: GPL-2.0
/* A delay-based congestion control: TCP Vegas (L. Brakmo, L. Peterson, "TCP Vegas: End to End
 * Congestion Avoidance on a Global Internet", IEEE JSAC 13(8), 1995), as Linux's
 * net/ipv4/tcp_vegas.c runs it, shortened. Once per RTT it compares the window with what the
 * lowest RTT seen (baseRTT) would need, and keeps between alpha and beta segments queued at the
 * bottleneck: diff = cwnd * (rtt - baseRTT) / baseRTT segments. Losses are Reno's.
 *
 * Built for both backends from this file (docs/plugins.md, "Your own congestion control"):
 *   aqmlab plugin build examples/plugins/delay.bpf.c
 *   clang -target bpf -O2 -g -Wall -I target/bpf -c examples/plugins/delay.bpf.c -o delay.bpf.o
 * Left out from tcp_vegas.c: get_info (a BPF CC may not set it). Its module parameters are
 * tunables: a flow class sets them with cc_params = { alpha = 4, beta = 8 }.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

/* tcp_vegas.c's module parameters and defaults: alpha = 2, beta = 4, gamma = 1 (segments
 * queued). */
const volatile __u32 alpha = 2;
const volatile __u32 beta = 4;
const volatile __u32 gamma = 1;

extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;
extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked) __ksym;

/* tcp_vegas.h struct vegas, in icsk_ca_priv. */
struct delay {
	__u32 beg_snd_nxt;	/* the round ends when this is acked */
	__u32 base_rtt;		/* lowest RTT seen, us */
	__u32 min_rtt;		/* lowest RTT in this round, us */
	__u32 cnt_rtt;		/* RTT samples in this round */
	__u32 on;		/* 1 in TCP_CA_Open: Vegas's rule; else Reno's */
};

static __always_inline struct delay *ca(struct sock *sk)
{
	return (struct delay *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline void new_round(struct sock *sk)
{
	struct delay *d = ca(sk);

	d->beg_snd_nxt = ((struct tcp_sock *)sk)->snd_nxt;
	d->cnt_rtt = 0;
	d->min_rtt = 0x7fffffff;
}

SEC("struct_ops/delay_init")
void BPF_PROG(delay_init, struct sock *sk)
{
	ca(sk)->base_rtt = 0x7fffffff;
	ca(sk)->on = 1;
	new_round(sk);
}

SEC("struct_ops/delay_pkts_acked")
void BPF_PROG(delay_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct delay *d = ca(sk);
	__u32 rtt;

	if (sample->rtt_us < 0)
		return;
	rtt = sample->rtt_us + 1;	/* never 0 */
	if (rtt < d->base_rtt)
		d->base_rtt = rtt;
	if (rtt < d->min_rtt)
		d->min_rtt = rtt;
	d->cnt_rtt++;
}

SEC("struct_ops/delay_set_state")
void BPF_PROG(delay_set_state, struct sock *sk, __u8 new_state)
{
	ca(sk)->on = new_state == TCP_CA_Open;
	if (new_state == TCP_CA_Open)
		new_round(sk);
}

SEC("struct_ops/delay_cong_avoid")
void BPF_PROG(delay_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct delay *d = ca(sk);
	__u32 cwnd = tp->snd_cwnd, diff;

	if (!d->on) {
		tcp_reno_cong_avoid(sk, ack, acked);
		return;
	}
	if ((__s32)(ack - d->beg_snd_nxt) <= 0) {	/* within the round */
		if (cwnd < tp->snd_ssthresh)
			tcp_slow_start(tp, acked);
		return;
	}
	if (d->cnt_rtt <= 2) {	/* too few samples to trust (tcp_vegas.c) */
		tcp_reno_cong_avoid(sk, ack, acked);
	} else {
		diff = (__u64)cwnd * (d->min_rtt - d->base_rtt) / d->base_rtt;
		if (cwnd < tp->snd_ssthresh) {
			if (diff > gamma) {	/* queue building in slow start: leave it */
				__u32 target = (__u64)cwnd * d->base_rtt / d->min_rtt + 1;

				tp->snd_cwnd = cwnd < target ? cwnd : target;
				tp->snd_ssthresh = tp->snd_cwnd > 2 ? tp->snd_cwnd - 1 : 2;
			} else {
				tcp_slow_start(tp, acked);
			}
		} else if (diff > beta) {	/* too many queued: one fewer, and no slow start back */
			tp->snd_cwnd = cwnd - 1;
			if (tp->snd_ssthresh > cwnd - 2)
				tp->snd_ssthresh = cwnd - 2;
		} else if (diff < alpha) {
			tp->snd_cwnd = cwnd + 1;
		}
		if (tp->snd_cwnd < 2)
			tp->snd_cwnd = 2;
	}
	new_round(sk);
}

SEC("struct_ops/delay_ssthresh")
__u32 BPF_PROG(delay_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops/delay_undo_cwnd")
__u32 BPF_PROG(delay_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops delay = {
	.init		= (void *)delay_init,
	.ssthresh	= (void *)delay_ssthresh,
	.cong_avoid	= (void *)delay_cong_avoid,
	.set_state	= (void *)delay_set_state,
	.pkts_acked	= (void *)delay_pkts_acked,
	.undo_cwnd	= (void *)delay_undo_cwnd,
	.name		= "aqmlab_delay",
};
