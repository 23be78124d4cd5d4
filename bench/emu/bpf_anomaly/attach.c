// SPDX-License-Identifier: GPL-2.0
/* attach OBJECT.bpf.o: load a BPF object, attach every program (tracepoints here), print
 * "attached", and keep them until SIGTERM/SIGINT. For bench/emu/bpf_anomaly.py --stack. */
#include <stdio.h>
#include <unistd.h>
#include <signal.h>
#include <bpf/libbpf.h>
static volatile int stop;
static void h(int s) { stop = 1; }
int main(int argc, char **argv) {
	struct bpf_object *obj = bpf_object__open_file(argv[1], NULL);
	if (!obj) { perror("open"); return 1; }
	if (bpf_object__load(obj)) { fprintf(stderr, "load failed\n"); return 1; }
	struct bpf_program *p;
	bpf_object__for_each_program(p, obj) {
		if (!bpf_program__attach(p)) { fprintf(stderr, "attach %s failed\n", bpf_program__name(p)); }
	}
	signal(SIGTERM, h); signal(SIGINT, h);
	printf("attached\n"); fflush(stdout);
	while (!stop) sleep(1);
	return 0;
}
