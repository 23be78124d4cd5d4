// SPDX-License-Identifier: GPL-2.0
/* DCTCP as a struct_ops tcp_congestion_ops: a port of Linux's net/ipv4/tcp_dctcp.c and
 * net/ipv4/tcp_dctcp.h (the kernel's own module, which this kernel does not ship), for the
 * emulator (docs/emulator.md, "eBPF congestion controls").
 *
 * Every op is the kernel's function of the same name, statement for statement; the only
 * differences are forced by BPF and are marked "BPF:" where they occur:
 *  - dctcp_init cannot switch icsk_ca_ops to dctcp_reno when ECN was not negotiated (a BPF CC
 *    may write only a few tcp_sock fields, net/ipv4/bpf_tcp_ca.c
 *    bpf_tcp_ca_btf_struct_access); the fallback is a flag in the private state, and each op
 *    then does what dctcp_reno's would (tcp_reno_ssthresh, tcp_reno_undo_cwnd, no alpha, no
 *    CE events).  Nor can it clear ECT from the socket (INET_ECN_dontxmit): the emulator's
 *    receiver always accepts ECN, so the fallback is never taken there.
 *  - get_info is not allowed for a BPF CC (bpf_tcp_ca.c unsupported_ops); instead the
 *    counters in `aqmlab_dctcp_stats` (global data, read by the loader at the end of a run)
 *    say what the CC did: how many connections it ran, how many fell back to Reno, and the
 *    alpha of every update.
 *  - __tcp_send_ack is the helper bpf_tcp_send_ack (include/uapi/linux/bpf.h).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char _license[] SEC("license") = "GPL";

/* include/net/tcp.h: struct tcp_congestion_ops flags and tcp_sock ecn_flags bits. */
#define TCP_CONG_NEEDS_ECN	(1U << 1)
#define TCP_ECN_MODE_RFC3168	(1U << 0)	/* was TCP_ECN_OK */
#define TCP_ECN_DEMAND_CWR	(1U << 2)
#define TCP_ECN_MODE_ACCECN	(1U << 4)

/* tcp_dctcp.c: DCTCP_MAX_ALPHA, and the module parameters with their defaults,
 * dctcp_shift_g = 4 (g = 1/2^4) and dctcp_alpha_on_init = DCTCP_MAX_ALPHA: tunables here (set
 * before load, per registration: a flow class's cc_params), where the kernel's are global. */
#define DCTCP_MAX_ALPHA		1024U
const volatile unsigned int dctcp_shift_g = 4;
const volatile unsigned int dctcp_alpha_on_init = DCTCP_MAX_ALPHA;

#define min(a, b) ((a) < (b) ? (a) : (b))
#define max(a, b) ((a) > (b) ? (a) : (b))
/* include/linux/minmax.h */
#define min_not_zero(x, y) ((x) == 0 ? (y) : ((y) == 0 ? (x) : min(x, y)))

static __always_inline bool before(__u32 seq1, __u32 seq2)
{
	return (__s32)(seq1 - seq2) < 0;
}

static __always_inline struct tcp_sock *tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct inet_connection_sock *inet_csk(const struct sock *sk)
{
	return (struct inet_connection_sock *)sk;
}

static __always_inline void *inet_csk_ca(const struct sock *sk)
{
	return (void *)inet_csk(sk)->icsk_ca_priv;
}

/* The kernel's own Reno, exported to struct_ops programs as kfuncs (net/ipv4/bpf_tcp_ca.c
 * bpf_tcp_ca_check_kfunc_ids). */
extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

/* tcp_dctcp.c struct dctcp, plus the BPF fallback flag (see the top). */
struct dctcp {
	__u32 old_delivered;
	__u32 old_delivered_ce;
	__u32 prior_rcv_nxt;
	__u32 dctcp_alpha;
	__u32 next_seq;
	__u32 ce_state;
	__u32 loss_cwnd;
	__u32 reno;	/* BPF: 1 = ECN not negotiated, act as dctcp_reno */
};

/* What the CC did, for the run's metadata (not part of tcp_dctcp.c): read by bpf/loader.c. */
struct aqmlab_dctcp_stats {
	__u64 inits;		/* dctcp_init calls */
	__u64 reno_fallbacks;	/* of which without ECN: Reno */
	__u64 alpha_updates;	/* dctcp_update_alpha at an expired RTT with data delivered */
	__u64 alpha_sum;	/* sum of alpha after those updates (fixed point, 1024 = 1) */
	__u64 alpha_nonzero;	/* updates that left alpha > 0 */
	__u64 ssthresh_calls;	/* dctcp_ssthresh (a CWR or a loss) */
	__u64 loss_reactions;	/* dctcp_react_to_loss (Recovery entered or CA_EVENT_LOSS) */
	__u64 ce_changes;	/* receiver: CE state changes (immediate ACKs forced) */
	__u64 ssthresh_max;	/* largest value dctcp_ssthresh returned */
	__u64 corrupt;		/* ops that found snd_ssthresh or snd_cwnd >= 2^31 (see check_sane) */
	__u64 corrupt_ssthresh;	/* the first such snd_ssthresh ... */
	__u64 corrupt_cwnd;	/* ... and snd_cwnd */
};
struct aqmlab_dctcp_stats aqmlab_dctcp_stats = {};

#define STAT_ADD(field, v) __sync_fetch_and_add(&aqmlab_dctcp_stats.field, (v))

/* Not in tcp_dctcp.c: the kernel keeps snd_cwnd below 2^31 (include/net/tcp.h
 * tcp_snd_cwnd_set warns otherwise) and snd_ssthresh at most TCP_INFINITE_SSTHRESH
 * (0x7fffffff); a value at or above 2^31 has been seen only when the kernel ran none of this
 * CC's ops during an ACK and took snd_ssthresh from a stale word (docs/emulator.md, "The
 * anomaly"). Counted, never repaired: the emulator refuses such a run. */
static __always_inline void check_sane(const struct tcp_sock *tp)
{
	__u32 cwnd = tp->snd_cwnd, ssthresh = tp->snd_ssthresh;

	if ((cwnd | ssthresh) & 0x80000000U) {
		if (__sync_fetch_and_add(&aqmlab_dctcp_stats.corrupt, 1) == 0) {
			aqmlab_dctcp_stats.corrupt_ssthresh = ssthresh;
			aqmlab_dctcp_stats.corrupt_cwnd = cwnd;
		}
	}
}

static __always_inline void dctcp_reset(const struct tcp_sock *tp, struct dctcp *ca)
{
	ca->next_seq = tp->snd_nxt;

	ca->old_delivered = tp->delivered;
	ca->old_delivered_ce = tp->delivered_ce;
}

SEC("struct_ops/dctcp_init")
void BPF_PROG(dctcp_init, struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct dctcp *ca = inet_csk_ca(sk);

	/* tcp_dctcp.c tests TCP_ECN_OK, since AccECN (include/net/tcp.h) either ECN mode. */
	if ((tp->ecn_flags & (TCP_ECN_MODE_RFC3168 | TCP_ECN_MODE_ACCECN)) ||
	    (sk->__sk_common.skc_state == TCP_LISTEN ||
	     sk->__sk_common.skc_state == TCP_CLOSE)) {
		ca->prior_rcv_nxt = tp->rcv_nxt;

		ca->dctcp_alpha = min(dctcp_alpha_on_init, DCTCP_MAX_ALPHA);

		ca->loss_cwnd = 0;
		ca->ce_state = 0;
		ca->reno = 0;

		dctcp_reset(tp, ca);
		STAT_ADD(inits, 1);
		return;
	}

	/* No ECN support? Fall back to Reno (BPF: by flag, see the top). */
	ca->reno = 1;
	STAT_ADD(inits, 1);
	STAT_ADD(reno_fallbacks, 1);
}

SEC("struct_ops/dctcp_ssthresh")
__u32 BPF_PROG(dctcp_ssthresh, struct sock *sk)
{
	struct dctcp *ca = inet_csk_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 cwnd = tp->snd_cwnd;
	__u32 ret;

	if (ca->reno)
		return tcp_reno_ssthresh(sk);
	STAT_ADD(ssthresh_calls, 1);
	ca->loss_cwnd = cwnd;
	ret = max(cwnd - ((cwnd * ca->dctcp_alpha) >> 11U), 2U);
	if (ret > aqmlab_dctcp_stats.ssthresh_max)
		aqmlab_dctcp_stats.ssthresh_max = ret;
	return ret;
}

SEC("struct_ops/dctcp_update_alpha")
void BPF_PROG(dctcp_update_alpha, struct sock *sk, __u32 flags)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct dctcp *ca = inet_csk_ca(sk);

	check_sane(tp);	/* BPF check, on every ACK */
	if (ca->reno)
		return;
	/* Expired RTT */
	if (!before(tp->snd_una, ca->next_seq)) {
		__u32 delivered_ce = tp->delivered_ce - ca->old_delivered_ce;
		__u32 alpha = ca->dctcp_alpha;

		/* alpha = (1 - g) * alpha + g * F */

		alpha -= min_not_zero(alpha, alpha >> dctcp_shift_g);
		if (delivered_ce) {
			__u32 delivered = tp->delivered - ca->old_delivered;

			/* If dctcp_shift_g == 1, a 32bit value would overflow
			 * after 8 M packets.
			 */
			delivered_ce <<= (10 - dctcp_shift_g);
			delivered_ce /= max(1U, delivered);

			alpha = min(alpha + delivered_ce, DCTCP_MAX_ALPHA);
		}
		if (tp->delivered != ca->old_delivered) {	/* a sender's RTT, not a receiver's */
			STAT_ADD(alpha_updates, 1);
			STAT_ADD(alpha_sum, alpha);
			if (alpha)
				STAT_ADD(alpha_nonzero, 1);
		}
		ca->dctcp_alpha = alpha;
		dctcp_reset(tp, ca);
	}
}

static __always_inline void dctcp_react_to_loss(struct sock *sk)
{
	struct dctcp *ca = inet_csk_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);

	STAT_ADD(loss_reactions, 1);
	ca->loss_cwnd = tp->snd_cwnd;
	tp->snd_ssthresh = max(tp->snd_cwnd >> 1U, 2U);
}

SEC("struct_ops/dctcp_state")
void BPF_PROG(dctcp_state, struct sock *sk, __u8 new_state)
{
	struct dctcp *ca = inet_csk_ca(sk);

	if (ca->reno)
		return;
	if (new_state == TCP_CA_Recovery &&
	    new_state != BPF_CORE_READ_BITFIELD(inet_csk(sk), icsk_ca_state))
		dctcp_react_to_loss(sk);
	/* We handle RTO in dctcp_cwnd_event to ensure that we perform only
	 * one loss-adjustment per RTT.
	 */
}

/* tcp_dctcp.h */
static __always_inline void dctcp_ece_ack_cwr(struct sock *sk, __u32 ce_state)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (ce_state == 1)
		tp->ecn_flags |= TCP_ECN_DEMAND_CWR;
	else
		tp->ecn_flags &= ~TCP_ECN_DEMAND_CWR;
}

/* tcp_dctcp.h: minimal DCTCP CE state machine:
 *
 * S:	0 <- last pkt was non-CE
 *	1 <- last pkt was CE
 */
static __always_inline void dctcp_ece_ack_update(struct sock *sk, enum tcp_ca_event evt,
						 __u32 *prior_rcv_nxt, __u32 *ce_state)
{
	__u32 new_ce_state = (evt == CA_EVENT_ECN_IS_CE) ? 1 : 0;

	if (*ce_state != new_ce_state) {
		/* CE state has changed, force an immediate ACK to
		 * reflect the new CE state. If an ACK was delayed,
		 * send that first to reflect the prior CE state.
		 */
		if (inet_csk(sk)->icsk_ack.pending & ICSK_ACK_TIMER) {
			dctcp_ece_ack_cwr(sk, *ce_state);
			bpf_tcp_send_ack(sk, *prior_rcv_nxt);
		}
		inet_csk(sk)->icsk_ack.pending |= ICSK_ACK_NOW;
		STAT_ADD(ce_changes, 1);
	}
	*prior_rcv_nxt = tcp_sk(sk)->rcv_nxt;
	*ce_state = new_ce_state;
	dctcp_ece_ack_cwr(sk, new_ce_state);
}

SEC("struct_ops/dctcp_cwnd_event")
void BPF_PROG(dctcp_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct dctcp *ca = inet_csk_ca(sk);

	if (ca->reno)
		return;
	switch (ev) {
	case CA_EVENT_ECN_IS_CE:
	case CA_EVENT_ECN_NO_CE:
		dctcp_ece_ack_update(sk, ev, &ca->prior_rcv_nxt, &ca->ce_state);
		break;
	case CA_EVENT_LOSS:
		dctcp_react_to_loss(sk);
		break;
	default:
		/* Don't care for the rest. */
		break;
	}
}

SEC("struct_ops/dctcp_cwnd_undo")
__u32 BPF_PROG(dctcp_cwnd_undo, struct sock *sk)
{
	const struct dctcp *ca = inet_csk_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);

	if (ca->reno)
		return tcp_reno_undo_cwnd(sk);
	return max(tp->snd_cwnd, ca->loss_cwnd);
}

/* tcp_dctcp.c: .cong_avoid = tcp_reno_cong_avoid, the kernel's own, called as a kfunc. */
SEC("struct_ops/dctcp_cong_avoid")
void BPF_PROG(dctcp_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC(".struct_ops")
struct tcp_congestion_ops aqmlab_dctcp = {
	.init		= (void *)dctcp_init,
	.in_ack_event	= (void *)dctcp_update_alpha,
	.cwnd_event	= (void *)dctcp_cwnd_event,
	.ssthresh	= (void *)dctcp_ssthresh,
	.cong_avoid	= (void *)dctcp_cong_avoid,
	.undo_cwnd	= (void *)dctcp_cwnd_undo,
	.set_state	= (void *)dctcp_state,
	.flags		= TCP_CONG_NEEDS_ECN,
	.name		= "aqmlab_dctcp",
};
