/* SPDX-License-Identifier: Apache-2.0 */
/* libbpf's bpf/bpf_helpers.h as the simulator provides it (docs/plugins.md): the section and
 * inlining macros, and the helpers and kernel functions a struct_ops CC may call
 * (net/ipv4/bpf_tcp_ca.c: bpf_tcp_ca_get_func_proto, bpf_tcp_ca_check_kfunc_ids), each
 * imported from the host. A function not declared here does not exist in the simulator:
 * calling one is a build error naming it (wasm-ld: undefined symbol). */
#ifndef __AQMLAB_BPF_HELPERS_H__
#define __AQMLAB_BPF_HELPERS_H__

#ifndef AQMLAB_SIM_VMLINUX
#error "include \"vmlinux.h\" first; a vmlinux.h beside the source shadows the simulator's (move it, or build the kernel's side with -I its directory)"
#endif

#define SEC(name) __attribute__((section(name), used))
#undef __always_inline
#define __always_inline inline __attribute__((always_inline))
#define __noinline __attribute__((noinline))
#define __weak __attribute__((weak))
#define __hidden __attribute__((visibility("hidden")))
/* A kernel function's declaration in the CC file: the host's import of the same name (below). */
#define __ksym
#define __kconfig
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name
#define __array(name, val) typeof(val) *name[]

#define __aqmlab_import(name) __attribute__((import_module("aqmlab_bpfcc_v1"), import_name(#name)))

/* Helpers (include/uapi/linux/bpf.h). */
__aqmlab_import(bpf_ktime_get_ns) __u64 bpf_ktime_get_ns(void);
__aqmlab_import(bpf_get_prandom_u32) __u32 bpf_get_prandom_u32(void);
__aqmlab_import(bpf_jiffies64) __u64 bpf_jiffies64(void);
/* Receiver side only (see vmlinux.h): a call ends the run. */
__aqmlab_import(bpf_tcp_send_ack) long bpf_tcp_send_ack(void *tp, __u32 rcv_nxt);

/* Kernel functions (net/ipv4/tcp_cong.c), run by the host as the kernel does. */
struct sock;
struct tcp_sock;
__aqmlab_import(tcp_reno_ssthresh) __u32 tcp_reno_ssthresh(struct sock *sk);
__aqmlab_import(tcp_reno_cong_avoid) void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked);
__aqmlab_import(tcp_reno_undo_cwnd) __u32 tcp_reno_undo_cwnd(struct sock *sk);
__aqmlab_import(tcp_slow_start) __u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked);
__aqmlab_import(tcp_cong_avoid_ai) void tcp_cong_avoid_ai(struct tcp_sock *tp, __u32 w, __u32 acked);

#undef __aqmlab_import
#endif
