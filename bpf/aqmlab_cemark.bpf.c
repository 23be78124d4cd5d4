// SPDX-License-Identifier: GPL-2.0
/* A deterministic CE marker for tests of the eBPF congestion controls (tests/test_prague_bpf.py):
 * a tc classifier (direct action, clsact egress) that sets CE on every 4th ECN-capable IPv4 TCP
 * packet carrying payload, and passes everything else untouched.
 *
 * Why not a qdisc: this kernel is built without sch_dualpi2, sch_fq_codel, sch_red and
 * sch_netem (CONFIG_NET_SCH_*; no modules), and the emulator's own bottleneck (aqmlab-router)
 * needs its orchestrator. A fixed marking fraction also gives the tests an expected value that
 * does not depend on the CC: the receiver sees exactly floor(n/4) CE marks in n data segments
 * if one skb is one segment, so the CC's alpha must tend to 1/4. TCP hands the device GSO skbs
 * even with GSO off, segmented only after clsact egress (net/core/dev.c validate_xmit_skb):
 * set the device's gso_max_segs to 1 (ip link set DEV gso_max_segs 1), or whole GSO bursts
 * are marked at once.
 *
 * Both ECT codepoints are marked ("any ECT", as dualpi2's ecn_mask any_ect): on this kernel a
 * BPF Prague's data leave as ECT(0), not ECT(1) (bpf/aqmlab_prague.bpf.c, note 1.), and an
 * ECT(1)-only marker would test nothing. Not-ECT packets are never marked (RFC 3168 §5).
 *
 *   tc qdisc add dev DEV clsact
 *   tc filter add dev DEV egress bpf direct-action obj aqmlab_cemark.bpf.o sec tc
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

char _license[] SEC("license") = "GPL";

#define ETH_HLEN	14
#define ETH_P_IP	0x0800
#define IPPROTO_TCP	6
#define INET_ECN_MASK	3
#define INET_ECN_CE	3
#define TC_ACT_OK	0
#define MARK_EVERY	4	/* CE on every MARK_EVERY-th ECN-capable data packet */

/* Counted ECN-capable data packets, and those marked (for a reader with bpftool). */
__u64 ect_data_packets = 0;
__u64 ce_marked = 0;

SEC("tc")
int aqmlab_cemark(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct iphdr *ip = data + ETH_HLEN;
	struct tcphdr *th;
	__u32 ihl, payload;
	__u16 old, new;
	__u8 *b;

	if (skb->protocol != bpf_htons(ETH_P_IP))
		return TC_ACT_OK;
	if ((void *)(ip + 1) > data_end)
		return TC_ACT_OK;
	if (ip->protocol != IPPROTO_TCP || (ip->tos & INET_ECN_MASK) == 0 ||
	    (ip->tos & INET_ECN_MASK) == INET_ECN_CE)
		return TC_ACT_OK;
	ihl = ip->ihl * 4;
	if (ihl < sizeof(*ip) || ihl > 60)
		return TC_ACT_OK;
	th = (void *)ip + ihl;
	if ((void *)(th + 1) > data_end)
		return TC_ACT_OK;
	payload = bpf_ntohs(ip->tot_len) - ihl - th->doff * 4;
	if ((__s32)payload <= 0)
		return TC_ACT_OK;
	if (__sync_fetch_and_add(&ect_data_packets, 1) % MARK_EVERY != MARK_EVERY - 1)
		return TC_ACT_OK;

	/* The IP checksum covers the 16-bit word of version/ihl and tos (built byte by byte:
	 * a __u16 load through the struct iphdr pointer would be an aliasing violation, which
	 * clang uses to reuse the value loaded before the store). */
	b = (__u8 *)ip;
	old = bpf_htons(((__u16)b[0] << 8) | b[1]);
	new = bpf_htons(((__u16)b[0] << 8) | (b[1] | INET_ECN_CE));
	ip->tos |= INET_ECN_CE;
	bpf_l3_csum_replace(skb, ETH_HLEN + __builtin_offsetof(struct iphdr, check), old, new, 2);
	__sync_fetch_and_add(&ce_marked, 1);
	return TC_ACT_OK;
}
