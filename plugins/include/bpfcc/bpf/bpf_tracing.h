/* SPDX-License-Identifier: Apache-2.0 */
/* libbpf's bpf/bpf_tracing.h as the simulator provides it: BPF_PROG(name, args...) is the
 * function name(args...) itself, which the host calls with the op's arguments. */
#ifndef __AQMLAB_BPF_TRACING_H__
#define __AQMLAB_BPF_TRACING_H__
#define BPF_PROG(name, args...) name(args)
#define BPF_STRUCT_OPS(name, args...) SEC("struct_ops/" #name) BPF_PROG(name, ##args)
#endif
