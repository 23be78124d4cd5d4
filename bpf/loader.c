// SPDX-License-Identifier: GPL-2.0
/* aqmlab-bpfcc: registers the struct_ops congestion control of one BPF object for as long as
 * this process lives, and no longer.
 *
 *   aqmlab-bpfcc [--name NAME] [--set VAR=VALUE]... OBJECT.bpf.o
 *
 * The object's struct_ops map is created with BPF_F_LINK and registered through a bpf_link
 * (BPF_LINK_CREATE with attach type BPF_STRUCT_OPS, Linux 6.4+: kernel/bpf/bpf_struct_ops.c
 * bpf_struct_ops_link_create) that only this process holds: when it exits, however it exits
 * (EOF on stdin, a signal, SIGKILL, its parent's death through PR_SET_PDEATHSIG), the kernel
 * closes the link and unregisters the congestion control. Nothing is pinned. (`bpftool
 * struct_ops register` instead registers a map that stays until `bpftool struct_ops
 * unregister`, and libbpf 1.1 knows no ".struct_ops.link" section, hence the raw syscall.)
 *
 * --name NAME registers the CC under NAME instead of the .name the object declares, so that one
 * object can be registered more than once (a user's CC in two flow classes, or in two runs at
 * once): congestion controls are global to the kernel and their names unique in it
 * (net/ipv4/tcp_cong.c tcp_register_congestion_control refuses a known name with EEXIST).
 * The name is patched into the struct_ops map's initial value before the object is loaded.
 *
 * --set VAR=VALUE sets the global `const volatile` integer VAR (a tunable: libbpf's .rodata,
 * which the verifier then takes as a constant) in the initial value of the object's .rodata
 * map before the object is loaded, as a libbpf skeleton's `skel->rodata->VAR = VALUE` does.
 * The value must fit VAR's type as the object's BTF says (size, signedness, bool).
 *
 * Prints "ready NAME" (NAME from --name; without it the struct_ops variable's name, by our
 * convention the CC's) on stdout once the CC is in tcp_available_congestion_control, waits for
 * EOF on stdin, then prints the object's global counters (its .bss, if any) as one JSON line
 * of "name": value pairs of __u64 members, and exits 0. Errors: one line on stderr, exit 1.
 */
#include <ctype.h>
#include <elf.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
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
/* include/net/tcp.h: struct tcp_congestion_ops' name[TCP_CA_NAME_MAX], the NUL included. */
#define TCP_CA_NAME_MAX 16

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

static int die_msg(const char *msg)
{
	fprintf(stderr, "aqmlab-bpfcc: %s\n", msg);
	return 1;
}

/* NULL if the kernel accepts NAME as a CC's name, else why not. net/ipv4/bpf_tcp_ca.c
 * bpf_tcp_ca_init_member copies it with kernel/bpf/syscall.c bpf_obj_name_cpy: at most
 * TCP_CA_NAME_MAX - 1 bytes before the NUL, only [A-Za-z0-9_.], not empty. */
static const char *bad_name(const char *name)
{
	if (!*name)
		return "an empty name";
	if (strlen(name) > TCP_CA_NAME_MAX - 1)
		return "longer than 15 bytes (TCP_CA_NAME_MAX = 16 with the NUL, include/net/tcp.h)";
	for (const char *c = name; *c; c++)
		if (!isalnum((unsigned char)*c) && *c != '_' && *c != '.')
			return "only letters, digits, '_' and '.' are allowed (kernel/bpf/syscall.c bpf_obj_name_cpy)";
	return NULL;
}

static struct bpf_map *struct_ops_map(struct bpf_object *obj, const char **err)
{
	struct bpf_map *map, *st = NULL;

	bpf_object__for_each_map(map, obj) {
		if (bpf_map__type(map) == BPF_MAP_TYPE_STRUCT_OPS) {
			if (st) {
				*err = "more than one struct_ops map in the object";
				return NULL;
			}
			st = map;
		}
	}
	if (!st)
		*err = "no struct_ops map in the object";
	return st;
}

/* Where the CC's name lies: the offset of member "name" in the map's value type, and of the
 * map's variable in its ELF section. The value type comes from bpf_map__btf_value_type_id
 * where libbpf sets it for struct_ops maps (not 1.1, which keeps it to itself), else from the
 * variable of the map's name in the ".struct_ops" DATASEC, as libbpf's own
 * bpf_object__init_struct_ops_maps finds it (libbpf sets that DATASEC's offsets at open,
 * btf_fixup_datasec). */
static int name_member(struct bpf_object *obj, struct bpf_map *st, __u32 *member_off, long *var_off, const char **err)
{
	const struct btf *btf = bpf_object__btf(obj);
	__u32 vt = bpf_map__btf_value_type_id(st);
	__s32 ds_id;

	*var_off = -1;
	if (!btf) {
		*err = "the object has no BTF (compile it with -g)";
		return -1;
	}
	ds_id = btf__find_by_name_kind(btf, ".struct_ops", BTF_KIND_DATASEC);
	if (ds_id > 0) {
		const struct btf_type *ds = btf__type_by_id(btf, ds_id);
		const struct btf_var_secinfo *vs = btf_var_secinfos(ds);
		for (int i = 0; i < btf_vlen(ds); i++, vs++) {
			const struct btf_type *var = btf__type_by_id(btf, vs->type);
			if (strcmp(btf__name_by_offset(btf, var->name_off), bpf_map__name(st)))
				continue;
			*var_off = vs->offset;
			if (!vt)
				vt = var->type;
		}
	}
	const struct btf_type *t = vt ? btf__type_by_id(btf, vt) : NULL;
	while (t && (btf_is_mod(t) || btf_is_typedef(t)))
		t = btf__type_by_id(btf, t->type);
	if (!t || !btf_is_struct(t)) {
		*err = "cannot find the struct_ops variable's type in the object's BTF";
		return -1;
	}
	const struct btf_member *m = btf_members(t);
	for (int i = 0; i < btf_vlen(t); i++, m++) {
		if (strcmp(btf__name_by_offset(btf, m->name_off), "name"))
			continue;
		if (btf__resolve_size(btf, m->type) != TCP_CA_NAME_MAX) {
			*err = "the struct_ops type's member \"name\" is not char[16]: not a struct tcp_congestion_ops";
			return -1;
		}
		*member_off = btf_member_bit_offset(t, i) / 8;
		return 0;
	}
	*err = "the struct_ops type has no member \"name\": not a struct tcp_congestion_ops";
	return -1;
}

/* The object file with NAME written at `off` in its ".struct_ops" section, for libbpf
 * versions whose bpf_map__initial_value gives nothing for a struct_ops map (1.1: only for
 * mmap-able global data). libbpf copies the section's bytes into the map's value at open
 * (bpf_object__init_struct_ops_maps) and the name on into the kernel's at load
 * (bpf_map__init_kern_struct_ops). */
static void *patched_image(const char *path, long off, const char *name, size_t *size, const char **err)
{
	FILE *f = fopen(path, "rb");
	struct stat sb;
	unsigned char *img = NULL;

	*err = "cannot read the object file";
	if (!f || fstat(fileno(f), &sb) || sb.st_size < (off_t)sizeof(Elf64_Ehdr))
		goto out;
	img = malloc(sb.st_size);
	if (!img || fread(img, 1, sb.st_size, f) != (size_t)sb.st_size)
		goto fail;
	*size = sb.st_size;
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
	*err = "not a 64-bit ELF object of this machine's byte order";
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_ident[EI_DATA] != (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB) ||
	    eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > *size ||
	    (size_t)eh->e_shnum * sizeof(Elf64_Shdr) > *size - eh->e_shoff || eh->e_shstrndx >= eh->e_shnum)
		goto fail;
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh->e_shoff);
	const Elf64_Shdr *strs = &sh[eh->e_shstrndx];
	*err = "the object has no \".struct_ops\" section holding the CC";
	for (int i = 0; i < eh->e_shnum; i++) {
		const char *sname = (const char *)img + strs->sh_offset + sh[i].sh_name;
		if (sh[i].sh_name >= strs->sh_size || strs->sh_offset + strs->sh_size > *size ||
		    strnlen(sname, strs->sh_size - sh[i].sh_name) == strs->sh_size - sh[i].sh_name ||
		    strcmp(sname, ".struct_ops") || sh[i].sh_type != SHT_PROGBITS)
			continue;
		if (off < 0 || off + TCP_CA_NAME_MAX > (long)sh[i].sh_size || sh[i].sh_offset + sh[i].sh_size > *size)
			goto fail;
		memset(img + sh[i].sh_offset + off, 0, TCP_CA_NAME_MAX);
		memcpy(img + sh[i].sh_offset + off, name, strlen(name));
		fclose(f);
		return img;
	}
fail:
	free(img);
	img = NULL;
out:
	if (f)
		fclose(f);
	return img;
}

/* Open `path` with the CC's name set to `name` (NULL: as declared). */
static struct bpf_object *open_named(const char *path, const char *name, void **image, const char **err)
{
	struct bpf_object *obj = bpf_object__open_file(path, NULL);
	struct bpf_map *st;
	__u32 moff;
	long voff;
	size_t sz = 0;

	*image = NULL;
	if (!obj) {
		*err = strerror(errno);
		return NULL;
	}
	if (!name)
		return obj;
	if (!(st = struct_ops_map(obj, err)) || name_member(obj, st, &moff, &voff, err))
		goto fail;
	/* libbpf 1.4+ returns the struct_ops map's data, which it copies to the kernel's value at
	 * load (the skeleton's struct_ops shadow types write there too). */
	char *iv = (char *)bpf_map__initial_value(st, &sz);
	if (iv) {
		if (moff + TCP_CA_NAME_MAX > sz) {
			*err = "the struct_ops map's value is smaller than its type";
			goto fail;
		}
		memset(iv + moff, 0, TCP_CA_NAME_MAX);
		memcpy(iv + moff, name, strlen(name));
		return obj;
	}
	bpf_object__close(obj);
	obj = NULL;
	if (!(*image = patched_image(path, voff < 0 ? -1 : voff + (long)moff, name, &sz, err)))
		return NULL;
	/* The name bpf_object__open_file would give it (its basename up to the first '.'): libbpf
	 * prefixes the global data maps' names with it (".bss" is found by that suffix). */
	char oname[64];
	const char *base = strrchr(path, '/');
	snprintf(oname, sizeof(oname), "%s", base ? base + 1 : path);
	oname[strcspn(oname, ".")] = 0;
	LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = oname);
	obj = bpf_object__open_mem(*image, sz, &opts);
	if (!obj) {
		*err = strerror(errno);
		free(*image);
		*image = NULL;
	}
	return obj;
fail:
	bpf_object__close(obj);
	return NULL;
}

/* The CC's name in tcp_available_congestion_control (net/ipv4/tcp_cong.c
 * tcp_get_available_congestion_control: the names, space-separated). */
static int is_registered(const char *name)
{
	char list[4096], *tok, *save;
	FILE *f = fopen("/proc/sys/net/ipv4/tcp_available_congestion_control", "r");
	size_t n = f ? fread(list, 1, sizeof(list) - 1, f) : 0;

	if (f)
		fclose(f);
	list[n] = 0;
	for (tok = strtok_r(list, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save))
		if (!strcmp(tok, name))
			return 1;
	return 0;
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

/* Set the .rodata variable `var` to the decimal `text` in the object's initial data (before
 * load); NULL, or why not. */
static const char *set_rodata(struct bpf_object *obj, const char *var, const char *text, char *msg, size_t len)
{
	const struct btf *btf = bpf_object__btf(obj);
	struct bpf_map *ro = NULL, *m;
	size_t sz = 0;
	unsigned char *data;

	bpf_object__for_each_map(m, obj) {
		const char *n = bpf_map__name(m);
		size_t l = strlen(n);
		if (l >= 7 && !strcmp(n + l - 7, ".rodata"))
			ro = m;
	}
	__s32 id = btf ? btf__find_by_name_kind(btf, ".rodata", BTF_KIND_DATASEC) : -1;
	const struct btf_type *ds = id > 0 ? btf__type_by_id(btf, id) : NULL;
	const void *initial = ro ? bpf_map__initial_value(ro, &sz) : NULL;
	if (!ds || !initial) {
		snprintf(msg, len, "--set %s: the object has no .rodata (no const volatile globals)", var);
		return msg;
	}
	/* A copy, changed and set back: libbpf copies it into the map at load. */
	data = malloc(sz);
	if (!data) {
		snprintf(msg, len, "--set %s: out of memory", var);
		return msg;
	}
	memcpy(data, initial, sz);
	const struct btf_var_secinfo *vs = btf_var_secinfos(ds);
	for (int i = 0; i < btf_vlen(ds); i++, vs++) {
		const struct btf_type *v = btf__type_by_id(btf, vs->type);
		if (!btf_is_var(v) || strcmp(btf__name_by_offset(btf, v->name_off), var))
			continue;
		if (btf_var(v)->linkage != BTF_VAR_GLOBAL_ALLOCATED) {
			free(data);
			snprintf(msg, len, "--set %s: a static variable, not a tunable", var);
			return msg;
		}
		const struct btf_type *t = btf__type_by_id(btf, v->type);
		while (t && (btf_is_mod(t) || btf_is_typedef(t)))
			t = btf__type_by_id(btf, t->type);
		int sign = t && btf_is_int(t) && (btf_int_encoding(t) & BTF_INT_SIGNED);
		int boolean = t && btf_is_int(t) && (btf_int_encoding(t) & BTF_INT_BOOL);
		if (!t || !(btf_is_int(t) || btf_is_enum(t)) || vs->size > 8 || vs->offset + vs->size > sz) {
			free(data);
			snprintf(msg, len, "--set %s: not an integer variable", var);
			return msg;
		}
		char *end;
		int neg = text[0] == '-';
		unsigned bits = 8 * vs->size;
		long long sv = 0;
		unsigned long long uv;
		errno = 0;
		if (neg)
			uv = (unsigned long long)(sv = strtoll(text, &end, 10));
		else
			uv = strtoull(text, &end, 10);
		int fits = !errno && end != text && !*end && isdigit((unsigned char)text[neg]);
		if (boolean)
			fits = fits && !neg && uv <= 1;
		else if (sign)
			fits = fits && (neg ? bits == 64 || sv >= -(1LL << (bits - 1)) : uv <= (~0ULL >> (65 - bits)));
		else
			fits = fits && !neg && (bits == 64 || uv < (1ULL << bits));
		if (!fits) {
			free(data);
			snprintf(msg, len, "--set %s=%s: not a value of its %u-byte %s type", var, text, vs->size,
				 boolean ? "bool" : sign ? "signed" : "unsigned");
			return msg;
		}
		/* Little-endian, as the BPF target's data on x86-64 and arm64. */
		for (unsigned b = 0; b < vs->size; b++)
			data[vs->offset + b] = (unsigned char)(uv >> (8 * b));
		int err = bpf_map__set_initial_value(ro, data, sz);
		free(data);
		if (err) {
			snprintf(msg, len, "--set %s: bpf_map__set_initial_value: %s", var, strerror(-err));
			return msg;
		}
		return NULL;
	}
	free(data);
	snprintf(msg, len, "--set %s: no such global in the object's .rodata", var);
	return msg;
}

int main(int argc, char **argv)
{
	struct bpf_object *obj;
	struct bpf_map *st;
	struct bpf_link *fake;
	union bpf_attr attr;
	const char *path = NULL, *name = NULL, *why;
	void *image;
	char buf[256], msg[512];
	int err, link_fd;

	const char *sets[64];
	int nsets = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--name") && i + 1 < argc && !name)
			name = argv[++i];
		else if (!strcmp(argv[i], "--set") && i + 1 < argc && strchr(argv[i + 1], '=') && nsets < 64)
			sets[nsets++] = argv[++i];
		else if (argv[i][0] != '-' && !path)
			path = argv[i];
		else
			path = name = NULL, i = argc;
	}
	if (!path) {
		fprintf(stderr, "usage: aqmlab-bpfcc [--name NAME] [--set VAR=VALUE]... OBJECT.bpf.o\n");
		return 2;
	}
	if (name && (why = bad_name(name))) {
		snprintf(msg, sizeof(msg), "cannot register as \"%s\": %s", name, why);
		return die_msg(msg);
	}
	/* The orchestrator's death ends this process, and with it the registration. */
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0)
		return die("prctl(PR_SET_PDEATHSIG)", errno);
	if (getppid() == 1)
		return die("parent already gone", ESRCH);
	libbpf_set_print(quiet_print);
	obj = open_named(path, name, &image, &why);
	if (!obj) {
		snprintf(msg, sizeof(msg), "%s: %s", path, why);
		return die_msg(msg);
	}
	if (!(st = struct_ops_map(obj, &why)))
		return die_msg(why);
	for (int i = 0; i < nsets; i++) {
		char var[128];
		const char *eq = strchr(sets[i], '=');
		snprintf(var, sizeof(var), "%.*s", (int)(eq - sets[i]), sets[i]);
		if ((why = set_rodata(obj, var, eq + 1, msg, sizeof(msg))))
			return die_msg(why);
	}
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
	if (link_fd < 0) {
		/* Registration happens here (kernel/bpf/bpf_struct_ops.c bpf_struct_ops_link_create
		 * -> net/ipv4/tcp_cong.c tcp_register_congestion_control), which refuses a name, or
		 * a name's hash (tcp_ca_find_key), already in tcp_cong_list with EEXIST. */
		const char *cc = name ? name : bpf_map__name(st);
		int e = errno;
		if (e == EEXIST && is_registered(cc))
			snprintf(msg, sizeof(msg), "a congestion control named \"%s\" is already registered in this kernel "
				 "(tcp_available_congestion_control lists it): register under another name (--name)", cc);
		else if (e == EEXIST)
			snprintf(msg, sizeof(msg), "the kernel refused the name \"%s\" as not unique (EEXIST: its hash "
				 "collides with a registered congestion control's): register under another name (--name)", cc);
		else
			snprintf(msg, sizeof(msg), "BPF_LINK_CREATE (struct_ops): %s", strerror(e));
		return die_msg(msg);
	}
	/* libbpf's own link would delete the map element on destroy: forget it. */
	bpf_link__disconnect(fake);
	printf("ready %s\n", name ? name : bpf_map__name(st));
	fflush(stdout);
	while (read(STDIN_FILENO, buf, sizeof(buf)) > 0)
		;
	print_stats(obj);
	close(link_fd);
	bpf_link__destroy(fake);
	bpf_object__close(obj);
	free(image);
	return 0;
}
