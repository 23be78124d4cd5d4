// SPDX-License-Identifier: GPL-2.0
/* aqmlab-bpfcc: registers the struct_ops congestion control of one BPF object for as long as
 * this process lives, and no longer.
 *
 *   aqmlab-bpfcc OBJECT.bpf.o
 *
 * The object's struct_ops map is created with BPF_F_LINK and registered through a bpf_link
 * (BPF_LINK_CREATE with attach type BPF_STRUCT_OPS, Linux 6.4+: kernel/bpf/bpf_struct_ops.c
 * bpf_struct_ops_link_create) that only this process holds: when it exits, however it exits
 * (EOF on stdin, a signal, SIGKILL, its parent's death through PR_SET_PDEATHSIG), the kernel
 * closes the link and unregisters the congestion control. Nothing is pinned. (`bpftool
 * struct_ops register` instead registers a map that stays until `bpftool struct_ops
 * unregister`, and libbpf 1.1 knows no ".struct_ops.link" section, hence the raw syscall.)
 *
 * Prints "ready NAME" (the struct_ops variable's name, by our convention the CC's) on stdout
 * once the CC is in tcp_available_congestion_control, waits for
 * EOF on stdin, then prints the object's global counters (its .bss, if any) as one JSON line
 * of "name": value pairs of __u64 members, and exits 0. Errors: one line on stderr, exit 1.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

/* include/uapi/linux/bpf.h (Linux 6.4+), absent from older headers. */
#define AQ_BPF_STRUCT_OPS_ATTACH 44
#ifndef BPF_F_LINK
#define BPF_F_LINK (1U << 13)
#endif

static int quiet_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	/* libbpf's warnings and the verifier's log go to stderr: the orchestrator keeps them in the
	 * run's log. */
	if (level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

static int die(const char *what, int err)
{
	fprintf(stderr, "aqmlab-bpfcc: %s: %s\n", what, strerror(err < 0 ? -err : err));
	return 1;
}

/* Print the __u64 members of the structs in .bss (the object's counters) as JSON, read from
 * the kernel's map (libbpf 1.1 maps .bss into this process only for skeletons). */
static void print_stats(struct bpf_object *obj)
{
	struct bpf_map *bss = NULL, *m;
	const struct btf *btf = bpf_object__btf(obj);
	int first = 1;

	bpf_object__for_each_map(m, obj) {
		const char *n = bpf_map__name(m);
		size_t l = strlen(n);
		if (l >= 4 && !strcmp(n + l - 4, ".bss"))
			bss = m;
	}
	printf("{");
	if (bss && btf) {
		size_t sz = bpf_map__value_size(bss);
		int zero = 0;
		unsigned char *val = calloc(1, sz);
		if (val && bpf_map_lookup_elem(bpf_map__fd(bss), &zero, val)) {
			free(val);
			val = NULL;
		}
		__s32 id = btf__find_by_name_kind(btf, ".bss", BTF_KIND_DATASEC);
		const struct btf_type *ds = id > 0 ? btf__type_by_id(btf, id) : NULL;
		const struct btf_var_secinfo *vs = ds ? btf_var_secinfos(ds) : NULL;
		for (int i = 0; val && ds && i < btf_vlen(ds); i++, vs++) {
			const struct btf_type *var = btf__type_by_id(btf, vs->type);
			const struct btf_type *st = btf__type_by_id(btf, var->type);
			while (st && (btf_is_mod(st) || btf_is_typedef(st)))
				st = btf__type_by_id(btf, st->type);
			if (!st || !btf_is_struct(st))
				continue;
			const struct btf_member *mb = btf_members(st);
			for (int j = 0; j < btf_vlen(st); j++, mb++) {
				__u32 off = vs->offset + btf_member_bit_offset(st, j) / 8;
				__u64 v;
				if (btf__resolve_size(btf, mb->type) != 8 || off + 8 > sz)
					continue;
				memcpy(&v, val + off, 8);
				printf("%s\"%s\": %llu", first ? "" : ", ", btf__name_by_offset(btf, mb->name_off),
				       (unsigned long long)v);
				first = 0;
			}
		}
		free(val);
	}
	/* Per program, the runs its trampoline skipped (kernel/bpf/trampoline.c
	 * __bpf_prog_enter_recur: the program already active on this CPU): a skipped op returns
	 * whatever its trampoline's stack slot held (docs/emulator.md, the anomaly). */
	printf("%s\"recursion_misses\": {", first ? "" : ", ");
	int pfirst = 1;
	struct bpf_program *prog;
	bpf_object__for_each_program(prog, obj) {
		struct bpf_prog_info info;
		__u32 len = sizeof(info);
		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len))
			continue;
		printf("%s\"%s\": %llu", pfirst ? "" : ", ", bpf_program__name(prog), (unsigned long long)info.recursion_misses);
		pfirst = 0;
	}
	printf("}}\n");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct bpf_object *obj;
	struct bpf_map *map, *st = NULL;
	struct bpf_link *fake;
	union bpf_attr attr;
	char buf[256];
	int err, link_fd;

	if (argc != 2) {
		fprintf(stderr, "usage: aqmlab-bpfcc OBJECT.bpf.o\n");
		return 2;
	}
	/* The orchestrator's death ends this process, and with it the registration. */
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0)
		return die("prctl(PR_SET_PDEATHSIG)", errno);
	if (getppid() == 1)
		return die("parent already gone", ESRCH);
	libbpf_set_print(quiet_print);
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj)
		return die(argv[1], errno);
	bpf_object__for_each_map(map, obj) {
		if (bpf_map__type(map) == BPF_MAP_TYPE_STRUCT_OPS) {
			if (st)
				return die("more than one struct_ops map in the object", EINVAL);
			st = map;
		}
	}
	if (!st)
		return die("no struct_ops map in the object", EINVAL);
	err = bpf_map__set_map_flags(st, bpf_map__map_flags(st) | BPF_F_LINK);
	if (err)
		return die("bpf_map__set_map_flags(BPF_F_LINK)", err);
	err = bpf_object__load(obj);
	if (err)
		return die("loading the object (verifier log above)", err);
	/* libbpf 1.1 fills the map's kernel value here (programs, flags, name); with BPF_F_LINK
	 * the kernel only stores it (state READY) and registers nothing. */
	fake = bpf_map__attach_struct_ops(st);
	if (!fake)
		return die("writing the struct_ops map", errno);
	memset(&attr, 0, sizeof(attr));
	attr.link_create.prog_fd = bpf_map__fd(st); /* the union's map_fd */
	attr.link_create.attach_type = AQ_BPF_STRUCT_OPS_ATTACH;
	link_fd = syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	if (link_fd < 0)
		return die("BPF_LINK_CREATE (struct_ops)", errno);
	/* libbpf's own link would delete the map element on destroy: forget it. */
	bpf_link__disconnect(fake);
	printf("ready %s\n", bpf_map__name(st));
	fflush(stdout);
	while (read(STDIN_FILENO, buf, sizeof(buf)) > 0)
		;
	print_stats(obj);
	close(link_fd);
	bpf_link__destroy(fake);
	bpf_object__close(obj);
	return 0;
}
