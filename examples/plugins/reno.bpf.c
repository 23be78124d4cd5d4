// SPDX-License-Identifier: GPL-2.0
/* Reno as a struct_ops congestion control made only of the kernel's own Reno functions
 * (net/ipv4/tcp_cong.c tcp_reno_ssthresh, tcp_reno_cong_avoid, tcp_reno_undo_cwnd, which
 * net/ipv4/bpf_tcp_ca.c exports to BPF CCs): the smallest CC aqmlab runs on both backends,
 * and the check that the simulator's kernel functions are its built-in Reno's.
 *
 *   aqmlab plugin build examples/plugins/reno.bpf.c
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

SEC("struct_ops/reno_ssthresh")
__u32 BPF_PROG(reno_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops/reno_cong_avoid")
void BPF_PROG(reno_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops/reno_undo_cwnd")
__u32 BPF_PROG(reno_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops aqmlab_reno = {
	.ssthresh	= (void *)reno_ssthresh,
	.cong_avoid	= (void *)reno_cong_avoid,
	.undo_cwnd	= (void *)reno_undo_cwnd,
	.name		= "aqmlab_reno",
};
