// SPDX-License-Identifier: GPL-2.0
/* The kernel stack of the first CA-state change that finds snd_ssthresh at or above 2^31
 * (tracepoint tcp:tcp_cong_state_set, fired by net/ipv4/tcp_cong.c tcp_set_ca_state), for
 * bench/emu/bpf_anomaly.py --stack. A tp_btf program: this kernel has no kprobes and no fentry
 * (no ftrace), but BTF tracepoints work. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
char _license[] SEC("license") = "GPL";
__u64 stack[32];		/* the first hit's kernel stack (return addresses) */
__u64 nstack, nbig, ncwr, ssth, cwnd, stack_len;	/* hits so far, state changes to CWR, the hit's values */
SEC("tp_btf/tcp_cong_state_set")
int BPF_PROG(t_state, struct sock *sk, __u8 ca_state)
{
	struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);
	if (!tp) return 0;
	if (ca_state == 2) __sync_fetch_and_add(&ncwr, 1);
	if (tp->snd_ssthresh > 0x7fffffff) {
		__sync_fetch_and_add(&nbig, 1);
		if (nstack == 0) {
			nstack = 1;
			ssth = tp->snd_ssthresh; cwnd = tp->snd_cwnd;
			stack_len = bpf_get_stack(ctx, stack, sizeof(stack), 0);
		}
	}
	return 0;
}
