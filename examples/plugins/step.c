/*
 * STEP — DCTCP's reference marker, as an aqmlab plugin (ABI v2): a port of the built-in
 * crates/aqm/src/qdisc/step.rs, verdict for verdict.
 *
 * Sources: Alizadeh et al., "Data Center TCP (DCTCP)", SIGCOMM 2010, §3.1 (mark the arriving
 * packet with CE if the instantaneous queue exceeds K); RFC 8257 §3.1; Fejes et al. 2020 §III
 * ("STEP AQM marks all incoming packets when the queue size is above L_target").
 * aqmlab's choices, as in step.rs: the comparison is strict ("above"), on the backlog before
 * the arrival is added; a Not-ECT packet that would be marked is dropped (counted "forced").
 *
 * One queue, decisions at enqueue only: no aqmlab_dequeue, so the host sends the queue's head.
 *
 *   clang --target=wasm32 -O2 -nostdlib -Wl,--no-entry -Wl,--export-dynamic \
 *         -I plugins/include -o step.wasm examples/plugins/step.c
 */
#include "aqmlab_qdisc.h"

/* K in bytes or in packets: exactly one is set (step.rs Params). */
static const aqmlab_option options[] = {
    {"threshold_bytes", AQMLAB_UNIT_SIZE, "K as a size: mark while more than K bytes are queued",
     0, AQMLAB_UNSET, 0, AQMLAB_NO_MAX},
    {"threshold_packets", AQMLAB_UNIT_PACKETS,
     "K in packets (DCTCP's unit): mark while more than K packets are queued", 0, AQMLAB_UNSET, 0,
     AQMLAB_NO_MAX},
};

AQMLAB_QDISC(1, options, .kind = "step_c",
             .summary = "DCTCP's marker: CE-mark (drop if Not-ECT) every arrival while the "
                        "instantaneous queue exceeds the threshold",
             .source = "Alizadeh et al., DCTCP, SIGCOMM 2010 §3.1; RFC 8257 §3.1; "
                       "port of crates/aqm/src/qdisc/step.rs");

static uint64_t k;       /* the threshold */
static int k_in_packets; /* whether k counts packets (else bytes) */

AQMLAB_EXPORT(aqmlab_init) const char *aqmlab_init(void) {
    double bytes = option_values[0], packets = option_values[1];
    if (!aqmlab_is_unset(bytes) && !aqmlab_is_unset(packets))
        return "threshold: give it in bytes or in packets, not both";
    if (aqmlab_is_unset(bytes) && aqmlab_is_unset(packets))
        return "threshold: missing (a size in bytes or in packets)";
    k_in_packets = aqmlab_is_unset(bytes);
    k = (uint64_t)(k_in_packets ? packets : bytes);
    return 0;
}

AQMLAB_EXPORT(aqmlab_enqueue) uint32_t aqmlab_enqueue(uint64_t now, const aqmlab_pkt *pkt) {
    (void)now;
    const aqmlab_queue *q = &queues[0];
    int above = k_in_packets ? q->len > k : q->backlog_bytes > k;
    if (!above)
        return AQMLAB_ACCEPT(0);
    if (aqmlab_is_ect(pkt))
        return AQMLAB_MARK(0, AQMLAB_MARK_STEP);
    return AQMLAB_DROP(AQMLAB_DROP_FORCED);
}
