// SPDX-License-Identifier: GPL-2.0
/* TCP Prague as a struct_ops tcp_congestion_ops: a port of net/ipv4/tcp_prague.c of
 * github.com/L4STeam/linux at commit 893e1479793e4cd975adf062fab3ff44206f76b1
 * (MODULE_VERSION("0.7"), the version the simulator follows: crates/sim/src/cc/prague.rs,
 * docs/sources.md), for a stock kernel with AccECN (Linux 6.18 here), which has no Prague.
 *
 * Every op and helper is the source's function of the same name, statement for statement,
 * and says so; the module parameters are constants at their defaults (prague_burst_shift 12,
 * prague_max_tso_segs 0, prague_rtt_transition 4, prague_rtt_target 25 ms, prague_alpha_mode
 * 0, prague_cwnd_mode 2, prague_cwnd_transit 4). What the port cannot do as the source does,
 * and why, is marked "BPF:" where it happens and collected here:
 *
 *  1. ECT(1) on established packets: NOT POSSIBLE on this kernel. prague_init sets
 *     TCP_ECN_ECT_1 in tp->ecn_flags, a bit of the L4S tree that mainline lacks; mainline's
 *     TCP_CONG_ECT_1_NEGOTIATION (set here) gives ECT(1) only while the CC is uninitialized:
 *     tcp_assign_congestion_control / tcp_reinit_congestion_control and tcp_ecn_send_syn /
 *     tcp_ecn_send_synack (include/net/tcp_ecn.h) call INET_ECN_xmit_ect_1_negotiation, so
 *     the SYN and SYN-ACK leave as ECT(1); then net/ipv4/tcp_cong.c
 *     tcp_init_congestion_control runs this CC's init and right after it INET_ECN_xmit(sk),
 *     which sets inet_sk(sk)->tos to ECT(0) for every CC with TCP_CONG_NEEDS_ECN. A BPF CC
 *     cannot undo that: net/ipv4/bpf_tcp_ca.c bpf_tcp_ca_btf_struct_access refuses a write
 *     to inet_sock.tos (verifier: "no write support to tcp_sock at off 828"), and
 *     bpf_setsockopt(SOL_IP, IP_TOS) returns 0 but keeps the old ECN bits of a SOCK_STREAM
 *     socket (net/ipv4/ip_sockglue.c __ip_sock_set_tos; measured: tos stays 0x02). The flag
 *     that would keep ECT(1) after init (TCP_CONG_ECT_1_ESTABLISH) was moved to the
 *     not-yet-merged Prague patch series (changelog v6 of "tcp: ECT_1_NEGOTIATION and
 *     NEEDS_ACCECN identifiers"); this kernel accepts flags 0x1f only (bpf_tcp_ca_init_member:
 *     flags & ~TCP_CONG_MASK is -EINVAL). So data and ACKs leave as ECT(0): an RFC 9331
 *     classifier (ECT(1) or CE) puts this flow in the Classic queue.
 *  2. rs->ece_delta (the CE count of this ACK, which the L4S tree adds to struct rate_sample
 *     in tcp_accecn_process) does not exist in mainline: it is rebuilt as the increase of
 *     tp->delivered_ce (which tcp_accecn_process / tcp_count_delivered_ce raises by exactly
 *     that count) since the previous cong_control. Equal whenever each ACK that raises it
 *     reaches cong_control; a CE count of an ACK that leaves tcp_ack before tcp_cong_control
 *     is taken at the next cong_control here, and never in the source.
 *  3. The MSS reduction of rate mode (prague_update_alpha: tcp_sync_mss with
 *     tp->mss_cache_set_by_cca, down to MIN_MSS below ~1 Mbit/s): tcp_sync_mss is not a
 *     kfunc, tp->mss_cache is not writable, and mss_cache_set_by_cca is not in mainline. The
 *     MTU the source would pick is computed; when it differs, nothing changes (neither MSS
 *     nor frac_cwnd nor ssthresh) and `mss_reductions_skipped` counts it (as the simulator).
 *  4. .tso_segs (Prague's GSO burst cap, max_tso_burst = 2^-12 s of the pacing rate) is not
 *     an op of mainline's tcp_congestion_ops, which has only .min_tso_segs, a floor inside
 *     tcp_output.c tcp_tso_autosize. max_tso_burst is computed as the source does and not
 *     used: bursts are tcp_tso_autosize's (pacing_rate >> sk_pacing_shift, ~1 ms, plus its
 *     min-RTT allowance) instead of ~0.25 ms.
 *  5. .get_info (INET_DIAG_PRAGUEINFO) is refused for a BPF CC (bpf_tcp_ca.c unsupported_ops).
 *     Instead `aqmlab_prague_stats` (global data, printed by bpf/loader.c at exit) says what
 *     the CC did: alpha after each EWMA update (last, max, sum), CWR reductions, etc.
 *  6. The prague-reno fallback (prague_init without AccECN): a BPF CC cannot switch
 *     icsk_ca_ops; a flag in the private state makes every op act as prague_reno's
 *     (tcp_reno_ssthresh, tcp_reno_undo_cwnd, no set_state/cwnd_event). Since this CC has
 *     .cong_control, the kernel then runs neither PRR (tcp_input.c tcp_cwnd_reduction) nor
 *     .cong_avoid for it (tcp_cong_control returns after cong_control, and
 *     tcp_end_cwnd_reduction returns early): the fallback's cong_control calls the kernel's
 *     tcp_reno_cong_avoid outside CWR/Recovery and cuts cwnd to ssthresh at once inside them
 *     (no PRR). prague_release cannot INET_ECN_dontxmit (tos is not writable, 1.) nor clear
 *     TCP_ECN_ECT_1 (absent). With TCP_CONG_NO_FALLBACK_RFC3168 a failed AccECN negotiation
 *     leaves ECN off (tcp_ecn.h tcp_ecn_rcv_synack / tcp_ecn_rcv_syn).
 *  7. cmpxchg on sk_pacing_status is a compare then a plain write (BPF has no cmpxchg on a
 *     kernel pointer; the ops run under the socket lock); tcp_jiffies32 is
 *     (u32)bpf_jiffies64(); WRITE_ONCE/READ_ONCE are plain accesses; the LOG() lines
 *     (pr_info) are dropped. tcp_mss_to_mtu, tcp_is_cwnd_limited, tcp_packets_in_flight,
 *     tcp_in_slow_start, tcp_stamp_us_delta and mul_u64_u64_shr (lib/math/div64.c's generic
 *     form: BPF has no 128-bit multiply) are rewritten here after the kernel's; tcp_slow_start
 *     is the kernel's own (kfunc).
 *  8. Deployment, not the port: the receiver must run this CC too. A listener accepts an
 *     AccECN SYN only if net.ipv4.tcp_ecn >= 3 (this kernel refuses 3) or its CC has
 *     TCP_CONG_NEEDS_ACCECN (tcp_input.c tcp_ecn_create_request); otherwise the SYN-ACK falls
 *     back and (with TCP_CONG_NO_FALLBACK_RFC3168) ECN is off.
 *
 * Not in tcp_prague.c: the guard of bpf/aqmlab_dctcp.bpf.c against snd_cwnd/snd_ssthresh
 * >= 2^31 (docs/emulator.md, "The anomaly"), counted in the same fields.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char _license[] SEC("license") = "GPL";

/* include/net/tcp.h (mainline 6.18): tcp_congestion_ops flags and tcp_sock ecn_flags. */
#define TCP_CONG_NON_RESTRICTED		(1U << 0)
#define TCP_CONG_NEEDS_ECN		(1U << 1)
#define TCP_CONG_NEEDS_ACCECN		(1U << 2)
#define TCP_CONG_ECT_1_NEGOTIATION	(1U << 3)	/* the L4S tree's TCP_CONG_WANTS_ECT_1 */
#define TCP_CONG_NO_FALLBACK_RFC3168	(1U << 4)
#define TCP_ECN_MODE_RFC3168		(1U << 0)
#define TCP_ECN_MODE_ACCECN		(1U << 4)
#define TCP_ECN_MODE_ANY		(TCP_ECN_MODE_RFC3168 | TCP_ECN_MODE_ACCECN)
#define TCP_INFINITE_SSTHRESH		0x7fffffffU

/* tcp_prague.c */
#define MIN_CWND_RTT		2U
#define MIN_CWND_VIRT		2U
#define MIN_MSS			150U
#define MINIMUM_RATE		12500ULL	/* Minimum rate: 100kbps */
#define PRAGUE_ALPHA_BITS	24U
#define PRAGUE_MAX_ALPHA	(1ULL << PRAGUE_ALPHA_BITS)
#define CWND_UNIT		20U
#define ONE_CWND		(1ULL << CWND_UNIT)
#define PRAGUE_SHIFT_G		4		/* EWMA gain g = 1/2^4 */
#define DEFAULT_RTT_TRANSITION	4
#define USEC_PER_MSEC		1000U
#define USEC_PER_SEC		1000000ULL
#define RTT_TARGET		(25 * USEC_PER_MSEC)
#define MAX_SCALED_RTT		(100 * USEC_PER_MSEC)
#define MTU_SYS			1500UL
#define RATE_OFFSET		4		/* 4/128 ~= 3% */
#define OFFSET_UNIT		7
#define HSRTT_SHIFT		7
#define RTT2SEC_SHIFT		23

/* tcp_prague.c module parameters, at their defaults (BPF: constants). */
static const __u32 prague_burst_shift = 12;	/* 1/2^12 sec ~=.25ms */
static const __u32 prague_max_tso_segs __attribute__((unused)) = 0;	/* prague_tso_segs: see 4. */
static const int prague_rtt_transition = DEFAULT_RTT_TRANSITION;
static const __u32 prague_rtt_target = RTT_TARGET;
static const int prague_alpha_mode = 0;
static const int prague_cwnd_mode = 2;
static const int prague_cwnd_transit = 4;

#define min(a, b) ((a) < (b) ? (a) : (b))
#define max(a, b) ((a) > (b) ? (a) : (b))
/* include/linux/math64.h, include/linux/math.h */
#define DIV64_U64_ROUND_CLOSEST(x, d)	(((__u64)(x) + ((__u64)(d) / 2)) / (__u64)(d))
#define DIV_U64_ROUND_CLOSEST(x, d)	DIV64_U64_ROUND_CLOSEST(x, d)
#define DIV64_U64_ROUND_UP(x, d)	(((__u64)(x) + (__u64)(d) - 1) / (__u64)(d))
#define DIV_U64_ROUND_UP(x, d)		DIV64_U64_ROUND_UP(x, d)

/* tcp_prague.c struct prague, reordered so that the BPF additions fit in the 104 bytes of
 * icsk_ca_priv (the source's bitfields are bytes here). */
struct prague {
	__u64 cwr_stamp;
	__u64 alpha_stamp;	/* EWMA update timestamp */
	__u64 upscaled_alpha;	/* Congestion-estimate EWMA */
	__u64 ai_ack_increase;	/* AI increase per non-CE ACKed MSS */
	__u64 hsrtt_us;
	__u64 frac_cwnd;	/* internal fractional cwnd */
	__u64 rate_bytes;	/* internal pacing rate in bytes */
	__u64 loss_rate_bytes;
	__u32 mtu_cache;
	__u32 loss_cwnd;
	__u32 max_tso_burst;
	__u32 old_delivered;	/* tp->delivered at round start */
	__u32 old_delivered_ce;	/* tp->delivered_ce at round start */
	__u32 next_seq;		/* tp->snd_nxt at round start */
	__u32 round;		/* Round count since last slow-start exit */
	__u32 ack_delivered_ce;	/* BPF: tp->delivered_ce at the last cong_control (see 2.) */
	__u8 saw_ce;		/* Is there an AQM on the path? */
	__u8 alpha_mode;	/* Alpha initialization mode */
	__u8 cwnd_mode_transit;	/* Fixed CWND operating mode */
	__u8 cwnd_mode;		/* CWND operating mode */
	__u8 in_loss;		/* In cwnd reduction caused by loss */
	__u8 reno;		/* BPF: 1 = AccECN not negotiated, act as prague_reno (see 6.) */
};
_Static_assert(sizeof(struct prague) <= 13 * sizeof(__u64), "struct prague > ICSK_CA_PRIV_SIZE");

/* What the CC did, for a run's metadata and the tests (not in tcp_prague.c): every __u64
 * member is printed by bpf/loader.c when it exits. alpha_* are alpha = upscaled_alpha >> 4
 * in 1/2^24 (PRAGUE_MAX_ALPHA = 16777216 = 1.0) after an EWMA step that ran (saw_ce). */
struct aqmlab_prague_stats {
	__u64 inits;			/* prague_init calls */
	__u64 reno_fallbacks;		/* of which without AccECN: prague_reno */
	__u64 ce_acks;			/* cong_control calls with ece_delta > 0 */
	__u64 ce_segments;		/* sum of those ece_delta */
	__u64 first_ce_halvings;	/* frac_cwnd halved at the first CE (alpha_mode 0) */
	__u64 alpha_updates;		/* EWMA steps (prague_update_alpha after saw_ce) */
	__u64 alpha_skipped_no_ce;	/* prague_update_alpha before any CE: alpha untouched */
	__u64 alpha_last;
	__u64 alpha_max;
	__u64 alpha_sum;
	__u64 cwr_reductions;		/* prague_enter_cwr that reduced */
	__u64 cwr_skipped_rtt_indep;	/* prague_enter_cwr within 25 ms of the last (RTT-indep) */
	__u64 loss_reductions;		/* prague_enter_loss */
	__u64 rate_mode_acks;		/* cong_control calls in rate mode (cwnd_mode 1) */
	__u64 mss_reductions_skipped;	/* see 3. */
	__u64 pacing_rate_last;		/* sk_pacing_rate written at the last ACK (B/s) */
	__u64 corrupt;			/* ops that found snd_ssthresh or snd_cwnd >= 2^31 */
	__u64 corrupt_ssthresh;		/* the first such snd_ssthresh ... */
	__u64 corrupt_cwnd;		/* ... and snd_cwnd */
};
struct aqmlab_prague_stats aqmlab_prague_stats = {};

#define STAT_ADD(field, v) __sync_fetch_and_add(&aqmlab_prague_stats.field, (v))

/* The kernel's own, exported to struct_ops programs as kfuncs (net/ipv4/bpf_tcp_ca.c). */
extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;
extern __u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked) __ksym;

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

static __always_inline struct prague *prague_ca(const struct sock *sk)
{
	return (struct prague *)inet_csk(sk)->icsk_ca_priv;
}

/* include/net/tcp.h */
static __always_inline bool tcp_in_slow_start(const struct tcp_sock *tp)
{
	return tp->snd_cwnd < tp->snd_ssthresh;
}

/* include/net/tcp.h */
static __always_inline bool tcp_is_cwnd_limited(const struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	if (BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited))
		return true;

	/* If in slow start, ensure cwnd grows to twice what was ACKed. */
	if (tcp_in_slow_start(tp))
		return tp->snd_cwnd < 2 * tp->max_packets_out;

	return false;
}

/* include/net/tcp.h tcp_left_out, tcp_packets_in_flight */
static __always_inline __u32 tcp_packets_in_flight(const struct tcp_sock *tp)
{
	return tp->packets_out - (tp->sacked_out + tp->lost_out) + tp->retrans_out;
}

/* net/ipv4/tcp_output.c */
static __always_inline __u32 tcp_mss_to_mtu(const struct sock *sk, __u32 mss)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	const struct inet_connection_sock *icsk = inet_csk(sk);

	return mss + tp->tcp_header_len + icsk->icsk_ext_hdr_len +
	       icsk->icsk_af_ops->net_header_len;
}

/* include/net/tcp.h */
static __always_inline __u32 tcp_stamp_us_delta(__u64 t1, __u64 t0)
{
	__s64 d = (__s64)(t1 - t0);

	return d > 0 ? (__u32)d : 0;
}

/* include/linux/math64.h mul_u64_u64_shr, generic form (BPF has no 128-bit multiply). */
static __always_inline __u64 mul_u64_u64_shr(__u64 a, __u64 b, __u32 shift)
{
	__u64 al = (__u32)a, ah = a >> 32, bl = (__u32)b, bh = b >> 32;
	__u64 rl = al * bl, rm = al * bh, rn = ah * bl, rh = ah * bh;
	__u64 c, lo, hi;

	c = (rl >> 32) + (__u32)rm + (__u32)rn;
	lo = (rl & 0xffffffffULL) | (c << 32);
	c = (c >> 32) + (rm >> 32) + (rn >> 32) + (__u32)rh;
	hi = ((rh >> 32) + (c >> 32)) << 32 | (__u32)c;
	if (shift == 0)
		return lo;
	if (shift < 64)
		return (lo >> shift) | (hi << (64 - shift));
	return hi >> (shift & 63);
}

/* include/net/tcp.h tcp_snd_cwnd_set */
static __always_inline void tcp_snd_cwnd_set(struct tcp_sock *tp, __u32 val)
{
	tp->snd_cwnd = val;
}

/* Not in tcp_prague.c: see the top. */
static __always_inline void check_sane(const struct tcp_sock *tp)
{
	__u32 cwnd = tp->snd_cwnd, ssthresh = tp->snd_ssthresh;

	if ((cwnd | ssthresh) & 0x80000000U) {
		if (__sync_fetch_and_add(&aqmlab_prague_stats.corrupt, 1) == 0) {
			aqmlab_prague_stats.corrupt_ssthresh = ssthresh;
			aqmlab_prague_stats.corrupt_cwnd = cwnd;
		}
	}
}

/* tcp_prague.c prague_is_rtt_indep */
static __always_inline bool prague_is_rtt_indep(struct sock *sk)
{
	struct prague *ca = prague_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);

	return !tcp_in_slow_start(tp) && ca->round >= (__u32)prague_rtt_transition;
}

/* tcp_prague.c prague_e2e_rtt_elapsed */
static __always_inline bool prague_e2e_rtt_elapsed(struct sock *sk)
{
	struct prague *ca = prague_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);

	return !before(tp->snd_una, ca->next_seq);
}

/* tcp_prague.c prague_target_rtt */
static __always_inline __u32 prague_target_rtt(struct sock *sk)
{
	return prague_rtt_target << 3;
}

/* tcp_prague.c prague_elapsed_since_alpha_update */
static __always_inline __u32 prague_elapsed_since_alpha_update(struct sock *sk)
{
	struct prague *ca = prague_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);

	return tcp_stamp_us_delta(tp->tcp_mstamp, ca->alpha_stamp);
}

/* tcp_prague.c prague_target_rtt_elapsed */
static __always_inline bool prague_target_rtt_elapsed(struct sock *sk)
{
	return (prague_target_rtt(sk) >> 3) <= prague_elapsed_since_alpha_update(sk);
}

/* tcp_prague.c prague_should_update_ewma: RTT independence on a step AQM requires the
 * competing flows to converge to the same alpha, i.e., the EWMA update frequency might no
 * longer be "once every RTT". */
static __always_inline bool prague_should_update_ewma(struct sock *sk)
{
	return prague_e2e_rtt_elapsed(sk) &&
	       (!prague_is_rtt_indep(sk) || prague_target_rtt_elapsed(sk));
}

/* tcp_prague.c prague_unscaled_ai_ack_increase */
static __always_inline __u64 prague_unscaled_ai_ack_increase(struct sock *sk)
{
	return 1 << CWND_UNIT;
}

/* tcp_prague.c prague_rate_scaled_ai_ack_increase */
static __always_inline __u64 prague_rate_scaled_ai_ack_increase(struct sock *sk, __u32 rtt)
{
	__u64 increase;
	__u64 divisor;
	__u64 target;

	target = prague_target_rtt(sk);
	if (rtt >= target)
		return prague_unscaled_ai_ack_increase(sk);
	/* Scale increase to:
	 * - Grow by 1MSS/target RTT
	 * - Take into account the rate ratio of doing cwnd += 1MSS
	 *
	 * Overflows if e2e RTT is > 100ms, hence the cap
	 */
	increase = (__u64)rtt << CWND_UNIT;
	increase *= rtt;
	divisor = target * target;
	increase = DIV64_U64_ROUND_CLOSEST(increase, divisor);
	return increase;
}

/* tcp_prague.c prague_frac_cwnd_to_snd_cwnd */
static __always_inline __u32 prague_frac_cwnd_to_snd_cwnd(struct sock *sk)
{
	struct prague *ca = prague_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 c = (__u32)((ca->frac_cwnd + (ONE_CWND - 1)) >> CWND_UNIT);

	return min(max(MIN_CWND_RTT, c), tp->snd_cwnd_clamp);
}

/* tcp_prague.c prague_virtual_rtt */
static __always_inline __u64 prague_virtual_rtt(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);

	return max(prague_target_rtt(sk), tp->srtt_us);
}

/* tcp_prague.c prague_pacing_rate_to_max_mtu */
static __always_inline __u64 prague_pacing_rate_to_max_mtu(struct sock *sk)
{
	struct prague *ca = prague_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);
	__u64 cwnd_bytes;

	if (prague_is_rtt_indep(sk) && ca->cwnd_mode == 1) {
		cwnd_bytes = mul_u64_u64_shr(ca->rate_bytes, prague_virtual_rtt(sk),
					     RTT2SEC_SHIFT);
	} else {
		__u64 target = prague_target_rtt(sk);
		__u64 scaled_cwnd = ca->frac_cwnd;
		__u64 rtt = tp->srtt_us;

		if (rtt < target)
			scaled_cwnd = scaled_cwnd * target / rtt;
		cwnd_bytes = mul_u64_u64_shr(scaled_cwnd, tcp_mss_to_mtu(sk, tp->mss_cache),
					     CWND_UNIT);
	}
	return DIV_U64_ROUND_UP(cwnd_bytes, MIN_CWND_VIRT);
}

/* tcp_prague.c prague_half_virtual_rtt_elapsed */
static __always_inline bool prague_half_virtual_rtt_elapsed(struct sock *sk)
{
	return (prague_virtual_rtt(sk) >> (3 + 1)) <= prague_elapsed_since_alpha_update(sk);
}

/* tcp_prague.c prague_pacing_rate_to_frac_cwnd */
static __always_inline __u64 prague_pacing_rate_to_frac_cwnd(struct sock *sk)
{
	struct prague *ca = prague_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);
	__u64 rtt;
	__u64 mtu;

	mtu = tcp_mss_to_mtu(sk, tp->mss_cache);
	rtt = ca->hsrtt_us >> HSRTT_SHIFT;
	if (!rtt)
		rtt = tp->srtt_us;

	return DIV_U64_ROUND_UP(mul_u64_u64_shr(ca->rate_bytes, rtt, RTT2SEC_SHIFT - CWND_UNIT),
				mtu);
}

/* tcp_prague.c prague_frac_cwnd_to_pacing_rate */
static __always_inline __u64 prague_frac_cwnd_to_pacing_rate(struct sock *sk)
{
	struct prague *ca = prague_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);
	__u64 rate;

	rate = (__u64)(USEC_PER_SEC << 3) * tcp_mss_to_mtu(sk, tp->mss_cache);
	if (tp->srtt_us)
		rate = rate / tp->srtt_us;
	return max(mul_u64_u64_shr(rate, ca->frac_cwnd, CWND_UNIT), MINIMUM_RATE);
}

/* tcp_prague.c prague_valid_mtu */
static __always_inline __u32 prague_valid_mtu(struct sock *sk, __u32 mtu)
{
	struct prague *ca = prague_ca(sk);

	return max(min(ca->mtu_cache, mtu), tcp_mss_to_mtu(sk, MIN_MSS));
}

/* tcp_prague.c prague_ai_ack_increase: RTT independence will scale the classical 1/W per
 * ACK increase. */
static __always_inline void prague_ai_ack_increase(struct sock *sk)
{
	struct prague *ca = prague_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);
	__u64 increase;
	__u32 rtt;

	rtt = tp->srtt_us;
	if (ca->round < (__u32)prague_rtt_transition ||
	    !rtt || rtt > (MAX_SCALED_RTT << 3)) {
		increase = prague_unscaled_ai_ack_increase(sk);
		goto exit;
	}

	increase = prague_rate_scaled_ai_ack_increase(sk, rtt);

exit:
	ca->ai_ack_increase = increase;
}

/* tcp_prague.c prague_update_pacing_rate */
static __always_inline void prague_update_pacing_rate(struct sock *sk)
{
	struct prague *ca = prague_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);
	__u32 rate_offset = RATE_OFFSET;
	__u64 rate, burst, offset;
	__u64 max_inflight, mtu;

	if (prague_is_rtt_indep(sk) && ca->cwnd_mode == 1) {
		offset = mul_u64_u64_shr(rate_offset, ca->rate_bytes, OFFSET_UNIT);
		if (prague_half_virtual_rtt_elapsed(sk))
			rate = ca->rate_bytes - offset;
		else
			rate = ca->rate_bytes + offset;
	} else {
		mtu = tcp_mss_to_mtu(sk, tp->mss_cache);
		max_inflight = max((__u32)(ca->frac_cwnd >> CWND_UNIT), tcp_packets_in_flight(tp));
		rate = (__u64)(USEC_PER_SEC << 3) * mtu;
		if (tp->srtt_us)
			rate = rate / (__u64)tp->srtt_us;
		rate = max(rate * max_inflight, MINIMUM_RATE);
		ca->rate_bytes = rate;
	}

	if (tp->snd_cwnd < tp->snd_ssthresh / 2)
		rate <<= 1;

	rate = min(rate, (__u64)sk->sk_max_pacing_rate);
	burst = rate / tcp_mss_to_mtu(sk, tp->mss_cache);

	/* BPF: computed and kept, but mainline has no .tso_segs to apply it (see 4.). */
	ca->max_tso_burst = max(1U, (__u32)(burst >> prague_burst_shift));
	sk->sk_pacing_rate = rate;
	aqmlab_prague_stats.pacing_rate_last = rate;
}

/* tcp_prague.c prague_new_round */
static __always_inline void prague_new_round(struct sock *sk)
{
	struct prague *ca = prague_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);

	ca->next_seq = tp->snd_nxt;
	ca->old_delivered_ce = tp->delivered_ce;
	ca->old_delivered = tp->delivered;
	if (!tcp_in_slow_start(tp)) {
		++ca->round;
		if (!ca->round)
			ca->round = prague_rtt_transition;
	}
	prague_ai_ack_increase(sk);
}

/* tcp_prague.c prague_cwnd_changed */
static __always_inline void prague_cwnd_changed(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);

	tp->snd_cwnd_stamp = (__u32)bpf_jiffies64();	/* BPF: tcp_jiffies32 */
	prague_ai_ack_increase(sk);
}

/* tcp_prague.c prague_update_alpha */
static __always_inline void prague_update_alpha(struct sock *sk)
{
	__u64 ecn_segs, alpha, mtu, mtu_used;
	struct prague *ca = prague_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);

	/* Do not update alpha before we have proof that there's an AQM on
	 * the path.
	 */
	if (!ca->saw_ce) {
		STAT_ADD(alpha_skipped_no_ce, 1);
		goto skip;
	}

	alpha = ca->upscaled_alpha;
	ecn_segs = tp->delivered_ce - ca->old_delivered_ce;
	/* We diverge from the original EWMA, i.e.,
	 * alpha = (1 - g) * alpha + g * F
	 * by working with (and storing)
	 * upscaled_alpha = alpha * (1/g) [recall that 0<g<1]
	 *
	 * This enables to carry alpha's residual value to the next EWMA round.
	 *
	 * We first compute F, the fraction of ecn segments.
	 */
	if (ecn_segs) {
		__u32 acked_segs = tp->delivered - ca->old_delivered;

		ecn_segs <<= PRAGUE_ALPHA_BITS;
		ecn_segs = ecn_segs / max(1U, acked_segs);
	}
	alpha = alpha - (alpha >> PRAGUE_SHIFT_G) + ecn_segs;
	ca->alpha_stamp = tp->tcp_mstamp;

	ca->upscaled_alpha = min(PRAGUE_MAX_ALPHA << PRAGUE_SHIFT_G, alpha);

	alpha = ca->upscaled_alpha >> PRAGUE_SHIFT_G;
	STAT_ADD(alpha_updates, 1);
	STAT_ADD(alpha_sum, alpha);
	aqmlab_prague_stats.alpha_last = alpha;
	if (alpha > aqmlab_prague_stats.alpha_max)
		aqmlab_prague_stats.alpha_max = alpha;

	if (prague_is_rtt_indep(sk) && !ca->in_loss) {
		mtu_used = tcp_mss_to_mtu(sk, tp->mss_cache);
		mtu = prague_valid_mtu(sk, prague_pacing_rate_to_max_mtu(sk));
		if (mtu_used != mtu) {
			/* BPF: the source scales frac_cwnd by mtu_used/mtu, sets
			 * tp->mss_cache_set_by_cca and calls tcp_sync_mss(sk, mtu), then sets
			 * cwnd and ssthresh to match; none of it is possible (see 3.).
			 */
			STAT_ADD(mss_reductions_skipped, 1);
		}
	}
skip:
	ca->hsrtt_us = ca->hsrtt_us + (__u64)tp->srtt_us - (ca->hsrtt_us >> HSRTT_SHIFT);
	prague_new_round(sk);
}

/* tcp_prague.c prague_update_cwnd */
static __always_inline void prague_update_cwnd(struct sock *sk, const struct rate_sample *rs)
{
	struct prague *ca = prague_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);
	__u64 increase;
	__u64 new_cwnd;
	__u64 mtu_used;
	__u64 divisor;
	__u32 ece_delta;
	__s64 acked;

	/* BPF: rs->ece_delta rebuilt from tp->delivered_ce (see 2.). */
	ece_delta = tp->delivered_ce - ca->ack_delivered_ce;
	ca->ack_delivered_ce = tp->delivered_ce;

	acked = rs->acked_sacked;
	if (ece_delta) {
		/* (LOG of ece_delta > acked dropped) */
		STAT_ADD(ce_acks, 1);
		STAT_ADD(ce_segments, ece_delta);
		if (!ca->saw_ce && !ca->alpha_mode) {
			ca->frac_cwnd = (ca->frac_cwnd + 1U) >> 1;
			STAT_ADD(first_ce_halvings, 1);
		}
		ca->saw_ce = 1;
		acked -= ece_delta;
	}

	if (acked <= 0 || ca->in_loss || !tcp_is_cwnd_limited(sk))
		goto adjust;

	if (tcp_in_slow_start(tp)) {
		acked = tcp_slow_start(tp, (__u32)acked);
		ca->frac_cwnd = (__u64)tp->snd_cwnd << CWND_UNIT;
		if (!acked) {
			prague_cwnd_changed(sk);
			return;
		}
	}

	if (prague_is_rtt_indep(sk) && ca->cwnd_mode == 1) {
		mtu_used = tcp_mss_to_mtu(sk, tp->mss_cache);
		increase = (((__u64)acked * MTU_SYS) << RTT2SEC_SHIFT) / prague_virtual_rtt(sk);
		divisor = mtu_used << RTT2SEC_SHIFT;
		new_cwnd = DIV64_U64_ROUND_UP(ca->rate_bytes * prague_virtual_rtt(sk), divisor);
		if (new_cwnd)
			ca->rate_bytes += DIV_U64_ROUND_CLOSEST(increase, new_cwnd);
		ca->frac_cwnd = max(ca->frac_cwnd + (__u64)acked,
				    prague_pacing_rate_to_frac_cwnd(sk));
	} else {
		increase = (__u64)acked * ca->ai_ack_increase;
		new_cwnd = ca->frac_cwnd;
		if (new_cwnd) {
			increase <<= CWND_UNIT;
			increase = DIV64_U64_ROUND_CLOSEST(increase, new_cwnd);
		}
		increase = increase * MTU_SYS / tcp_mss_to_mtu(sk, tp->mss_cache);
		ca->frac_cwnd += max((__u64)acked, increase);

		__u64 rate = prague_frac_cwnd_to_pacing_rate(sk);

		ca->rate_bytes = max(ca->rate_bytes + (__u64)acked, rate);
	}

adjust:
	new_cwnd = prague_frac_cwnd_to_snd_cwnd(sk);
	if (tp->snd_cwnd > new_cwnd) {
		/* Step-wise cwnd decrement */
		tcp_snd_cwnd_set(tp, tp->snd_cwnd - 1);
		tp->snd_ssthresh = tp->snd_cwnd;
		prague_cwnd_changed(sk);
	} else if (tp->snd_cwnd < new_cwnd) {
		/* Step-wise cwnd increment */
		tcp_snd_cwnd_set(tp, tp->snd_cwnd + 1);
		prague_cwnd_changed(sk);
	}
}

/* tcp_prague.c prague_ca_open */
static __always_inline void prague_ca_open(struct sock *sk)
{
	struct prague *ca = prague_ca(sk);

	ca->in_loss = 0;
}

/* tcp_prague.c prague_enter_loss */
static __always_inline void prague_enter_loss(struct sock *sk)
{
	struct prague *ca = prague_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);

	STAT_ADD(loss_reductions, 1);
	ca->loss_cwnd = tp->snd_cwnd;
	ca->loss_rate_bytes = ca->rate_bytes;
	if (prague_is_rtt_indep(sk) && ca->cwnd_mode == 1) {
		ca->rate_bytes -= (ca->rate_bytes >> 1);
		ca->frac_cwnd = prague_pacing_rate_to_frac_cwnd(sk);
	} else {
		ca->frac_cwnd -= (ca->frac_cwnd >> 1);
		ca->rate_bytes = prague_frac_cwnd_to_pacing_rate(sk);
	}
	ca->in_loss = 1;
}

/* tcp_prague.c prague_enter_cwr */
static __always_inline void prague_enter_cwr(struct sock *sk)
{
	struct prague *ca = prague_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);
	__u64 reduction;
	__u64 alpha;

	if (prague_is_rtt_indep(sk) &&
	    (prague_target_rtt(sk) >> 3) > tcp_stamp_us_delta(tp->tcp_mstamp, ca->cwr_stamp)) {
		STAT_ADD(cwr_skipped_rtt_indep, 1);
		return;
	}
	ca->cwr_stamp = tp->tcp_mstamp;
	alpha = ca->upscaled_alpha >> PRAGUE_SHIFT_G;

	if (prague_is_rtt_indep(sk) && ca->cwnd_mode == 1) {
		reduction = mul_u64_u64_shr(ca->rate_bytes, alpha, PRAGUE_ALPHA_BITS + 1);
		ca->rate_bytes = max(ca->rate_bytes - reduction, MINIMUM_RATE);
		ca->frac_cwnd = prague_pacing_rate_to_frac_cwnd(sk);
	} else {
		reduction = (alpha * (ca->frac_cwnd) +
			     /* Unbias the rounding by adding 1/2 */
			     PRAGUE_MAX_ALPHA) >>
			    (PRAGUE_ALPHA_BITS + 1U);
		ca->frac_cwnd -= reduction;
		ca->rate_bytes = prague_frac_cwnd_to_pacing_rate(sk);
	}
	STAT_ADD(cwr_reductions, 1);
}

SEC("struct_ops/prague_state")
void BPF_PROG(prague_state, struct sock *sk, __u8 new_state)
{
	if (prague_ca(sk)->reno)
		return;	/* prague_reno has no .set_state */
	if (new_state == BPF_CORE_READ_BITFIELD(inet_csk(sk), icsk_ca_state))
		return;

	switch (new_state) {
	case TCP_CA_Recovery:
		prague_enter_loss(sk);
		break;
	case TCP_CA_CWR:
		prague_enter_cwr(sk);
		break;
	case TCP_CA_Open:
		prague_ca_open(sk);
		break;
	}
}

SEC("struct_ops/prague_cwnd_event")
void BPF_PROG(prague_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	if (prague_ca(sk)->reno)
		return;	/* prague_reno has no .cwnd_event */
	if (ev == CA_EVENT_LOSS)
		prague_enter_loss(sk);
}

SEC("struct_ops/prague_cwnd_undo")
__u32 BPF_PROG(prague_cwnd_undo, struct sock *sk)
{
	struct prague *ca = prague_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);

	if (ca->reno)
		return tcp_reno_undo_cwnd(sk);
	/* We may have made some progress since then, account for it. */
	ca->in_loss = 0;
	ca->rate_bytes = max(ca->rate_bytes, ca->loss_rate_bytes);
	ca->frac_cwnd = prague_pacing_rate_to_frac_cwnd(sk);
	return max(ca->loss_cwnd, tp->snd_cwnd);
}

SEC("struct_ops/prague_cong_control")
void BPF_PROG(prague_cong_control, struct sock *sk, __u32 ack, int flag,
	      const struct rate_sample *rs)
{
	struct prague *ca = prague_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);

	check_sane(tp);	/* BPF check, on every ACK */
	if (ca->reno) {
		/* BPF: prague_reno's .cong_avoid, and instead of the kernel's PRR a cut to
		 * ssthresh (see 6.). */
		__u8 state = BPF_CORE_READ_BITFIELD(inet_csk(sk), icsk_ca_state);

		if (state == TCP_CA_CWR || state == TCP_CA_Recovery) {
			if (tp->snd_cwnd > max(tp->snd_ssthresh, 2U))
				tcp_snd_cwnd_set(tp, max(tp->snd_ssthresh, 2U));
		} else {
			tcp_reno_cong_avoid(sk, ack, rs->acked_sacked);
		}
		return;
	}

	prague_update_cwnd(sk, rs);
	if (prague_should_update_ewma(sk))
		prague_update_alpha(sk);
	prague_update_pacing_rate(sk);
	if (ca->cwnd_mode_transit) {
		__u64 cwnd_bytes = (__u64)tp->snd_cwnd * tcp_mss_to_mtu(sk, tp->mss_cache);
		__u64 cwnd_bytes_transit = prague_cwnd_transit * MTU_SYS;

		if (ca->saw_ce && cwnd_bytes <= cwnd_bytes_transit) {
			ca->cwnd_mode = 1;
			ca->frac_cwnd = prague_pacing_rate_to_frac_cwnd(sk);
		} else if (!ca->saw_ce || cwnd_bytes > cwnd_bytes_transit) {
			ca->cwnd_mode = 0;
			ca->rate_bytes = prague_frac_cwnd_to_pacing_rate(sk);
		}
	}
	if (ca->cwnd_mode == 1)
		STAT_ADD(rate_mode_acks, 1);
}

SEC("struct_ops/prague_ssthresh")
__u32 BPF_PROG(prague_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (prague_ca(sk)->reno)
		return tcp_reno_ssthresh(sk);
	return tp->snd_ssthresh;
}

/* tcp_prague.c prague_release, as a helper for prague_init and as the op. */
static __always_inline void __prague_release(struct sock *sk)
{
	/* cmpxchg(&sk->sk_pacing_status, SK_PACING_NEEDED, SK_PACING_NONE) */
	if (sk->sk_pacing_status == SK_PACING_NEEDED)
		sk->sk_pacing_status = SK_PACING_NONE;
	/* BPF: tp->ecn_flags &= ~TCP_ECN_ECT_1 (no such bit in mainline) and, without ECN,
	 * INET_ECN_dontxmit(sk) (tos is not writable) cannot be done (see 1. and 6.). The LOG
	 * line is dropped. */
}

SEC("struct_ops/prague_release")
void BPF_PROG(prague_release, struct sock *sk)
{
	__prague_release(sk);
}

SEC("struct_ops/prague_init")
void BPF_PROG(prague_init, struct sock *sk)
{
	struct prague *ca = prague_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);
	__u8 state = sk->__sk_common.skc_state;

	STAT_ADD(inits, 1);
	if (!(tp->ecn_flags & TCP_ECN_MODE_ANY) &&
	    state != TCP_LISTEN && state != TCP_CLOSE) {
		__prague_release(sk);
		/* "Switching to pure reno" (BPF: by flag, see 6.) */
		ca->reno = 1;
		STAT_ADD(reno_fallbacks, 1);
		return;
	}
	ca->reno = 0;

	/* tp->ecn_flags |= TCP_ECN_ECT_1: BPF: impossible here, see 1. */
	if (sk->sk_pacing_status == SK_PACING_NONE)
		sk->sk_pacing_status = SK_PACING_NEEDED;
	/* If we have an initial RTT estimate, ensure we have an initial pacing
	 * rate to use if net.ipv4.tcp_pace_iw is set.
	 */
	ca->alpha_stamp = tp->tcp_mstamp;
	ca->alpha_mode = prague_alpha_mode & 0x01;
	if (!ca->alpha_mode)
		ca->upscaled_alpha = 0;
	else
		ca->upscaled_alpha = PRAGUE_MAX_ALPHA << PRAGUE_SHIFT_G;
	ca->frac_cwnd = (__u64)tp->snd_cwnd << CWND_UNIT;
	ca->max_tso_burst = 1;

	/* rate initialization */
	if (tp->srtt_us) {
		ca->rate_bytes = ((__u64)USEC_PER_SEC << 3) * tcp_mss_to_mtu(sk, tp->mss_cache) /
				 tp->srtt_us;
		ca->rate_bytes = max(MINIMUM_RATE,
				     ca->rate_bytes * max(tp->snd_cwnd, tcp_packets_in_flight(tp)));
	} else {
		ca->rate_bytes = MINIMUM_RATE;
	}
	prague_update_pacing_rate(sk);
	ca->loss_rate_bytes = 0;
	ca->round = 0;
	ca->saw_ce = !!tp->delivered_ce;
	ca->ack_delivered_ce = tp->delivered_ce;	/* BPF: see 2. */

	ca->mtu_cache = tcp_mss_to_mtu(sk, tp->mss_cache);
	if (!ca->mtu_cache)
		ca->mtu_cache = MTU_SYS;
	// Default as 1us
	ca->hsrtt_us = tp->srtt_us ? (((__u64)tp->srtt_us) << HSRTT_SHIFT) :
				     (1 << (HSRTT_SHIFT + 3));
	ca->cwnd_mode_transit = (prague_cwnd_mode & 0x02) >> 1;
	ca->cwnd_mode = prague_cwnd_mode & 0x01;

	prague_new_round(sk);
}

/* tcp_prague.c struct tcp_congestion_ops prague. BPF: no .get_info (see 5.), no .tso_segs
 * (see 4.); flags: TCP_CONG_WANTS_ECT_1 is mainline's TCP_CONG_ECT_1_NEGOTIATION (see 1.). */
SEC(".struct_ops")
struct tcp_congestion_ops aqmlab_prague = {
	.init		= (void *)prague_init,
	.release	= (void *)prague_release,
	.cong_control	= (void *)prague_cong_control,
	.cwnd_event	= (void *)prague_cwnd_event,
	.ssthresh	= (void *)prague_ssthresh,
	.undo_cwnd	= (void *)prague_cwnd_undo,
	.set_state	= (void *)prague_state,
	.flags		= TCP_CONG_NEEDS_ECN |
			  TCP_CONG_NEEDS_ACCECN |
			  TCP_CONG_ECT_1_NEGOTIATION |
			  TCP_CONG_NO_FALLBACK_RFC3168 |
			  TCP_CONG_NON_RESTRICTED,
	.name		= "aqmlab_prague",
};
