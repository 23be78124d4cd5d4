/* SPDX-License-Identifier: Apache-2.0 */
/* libbpf's bpf/bpf_core_read.h as the simulator provides it: no relocations to make (the
 * layout is the simulator's vmlinux.h), so a CO-RE read is a plain read. */
#ifndef __AQMLAB_BPF_CORE_READ_H__
#define __AQMLAB_BPF_CORE_READ_H__
#define BPF_CORE_READ_BITFIELD(s, field) ((s)->field)
#define BPF_CORE_READ_BITFIELD_PROBED(s, field) ((s)->field)
#define bpf_core_field_exists(field) 1
#endif
