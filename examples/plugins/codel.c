/*
 * CoDel — Controlled Delay, one queue, as an aqmlab plugin (ABI v2): a port of the built-in
 * crates/aqm/src/qdisc/codel.rs and the law it runs, crates/aqm/src/support/codel_law.rs,
 * verdict for verdict.
 *
 * Sources: K. Nichols, V. Jacobson, "Controlling Queue Delay", ACM Queue 10(5), 2012;
 * RFC 8289 §3, §5; Linux net/sched/sch_codel.c (codel_qdisc_enqueue, codel_qdisc_dequeue,
 * codel_init) and include/net/codel_impl.h (codel_should_drop, codel_dequeue), whose names
 * the functions below keep. tc-codel(8) names the options.
 *
 * Linux pops the head and then decides on it; here the packet being decided on stays at the
 * head of the host's queue until it is dropped (aqmlab_drop_head), marked (aqmlab_mark_head)
 * or sent (return 0), so "the backlog after the pop" is the backlog less the head's length.
 * The deviations from Linux are codel_law.rs's: time is u64 ns, never wrapping (Linux: u32
 * units of 1024 ns), and interval/√count uses the exact square root (Linux: Newton-iterated
 * rec_inv_sqrt). tc's statistics (drop_count, maxpacket, ...) are not kept.
 *
 *   clang --target=wasm32 -O2 -nostdlib -Wl,--no-entry -Wl,--export-dynamic \
 *         -I plugins/include -o codel.wasm examples/plugins/codel.c
 */
#include "aqmlab_qdisc.h"

static const aqmlab_option options[] = {
    {"target", AQMLAB_UNIT_DELAY_TARGET, "acceptable standing sojourn (RFC 8289 §4.4 TARGET)", 0,
     5e6, 1, AQMLAB_NO_MAX},
    {"interval", AQMLAB_UNIT_TIME,
     "window the sojourn must stay above target in, and the control law's base (RFC 8289 §4.3)",
     0, 100e6, 1, AQMLAB_NO_MAX},
    {"limit", AQMLAB_UNIT_PACKETS, "packet limit of the queue (sch_codel.c codel_init: 1000)", 0,
     1000, 1, AQMLAB_NO_MAX},
    {"ecn", AQMLAB_UNIT_BOOL, "CE-mark ECT packets instead of dropping them (tc-codel(8) ecn)", 0,
     0, 0, 1},
    {"ce_threshold", AQMLAB_UNIT_TIME,
     "CE-mark every ECT packet whose sojourn exceeds this (unset: off; tc-codel(8))", 0,
     AQMLAB_UNSET, 1, AQMLAB_NO_MAX},
};

AQMLAB_QDISC(1, options, .kind = "codel_c",
             .summary = "CoDel: drops (or marks) at dequeue once the sojourn has stayed above "
                        "target for an interval, then at interval/sqrt(count) spacing",
             .source = "Nichols & Jacobson, ACM Queue 2012; RFC 8289; Linux "
                       "include/net/codel_impl.h, net/sched/sch_codel.c; port of "
                       "crates/aqm/src/qdisc/codel.rs");

/* No drop while at most this many bytes stay queued (Linux psched_mtu on Ethernet). */
#define MTU_BYTES 1514

/* struct codel_params */
static uint64_t target, interval, limit, ce_threshold;
static int ecn, ce_threshold_on;

/* struct codel_vars (zero = codel_vars_init) */
static struct {
    uint32_t count;            /* packets dropped (or marked) since entering the dropping state */
    uint32_t lastcount;        /* count when the last dropping state was entered */
    int dropping;              /* in the dropping state */
    uint64_t first_above_time; /* when the sojourn will have been above target for an interval */
    uint64_t drop_next;        /* time of the next drop (or mark) */
    uint64_t ldelay;           /* sojourn of the last packet examined */
} v;

AQMLAB_EXPORT(aqmlab_init) const char *aqmlab_init(void) {
    target = (uint64_t)option_values[0];
    interval = (uint64_t)option_values[1];
    limit = (uint64_t)option_values[2];
    ecn = option_values[3] != 0;
    ce_threshold_on = !aqmlab_is_unset(option_values[4]);
    ce_threshold = ce_threshold_on ? (uint64_t)option_values[4] : 0;
    /* codel_qdisc_enqueue is a tail drop at `limit` packets, which the host does for a plugin
     * without aqmlab_enqueue: every arrival within the limit joins the queue. */
    aqmlab_set_limit(limit);
    return 0;
}

/* codel_control_law: t + interval/√count (count 0 taken as 1). */
static uint64_t control_law(uint64_t t, uint32_t count) {
    return t + (uint64_t)((double)interval / __builtin_sqrt((double)(count ? count : 1)));
}

/* codel_should_drop for the head of the queue, as if popped. */
static int should_drop(uint64_t now) {
    const aqmlab_queue *q = &queues[0];
    if (q->len == 0) {
        v.first_above_time = 0;
        return 0;
    }
    v.ldelay = now - q->head.enqueue_ns;
    if (v.ldelay < target || q->backlog_bytes - q->head.wire_len <= MTU_BYTES) {
        /* went below: stay below for at least an interval */
        v.first_above_time = 0;
        return 0;
    }
    if (v.first_above_time == 0) {
        /* just went above from below: if it stays above for an interval, drop */
        v.first_above_time = now + interval;
        return 0;
    }
    return now > v.first_above_time;
}

/* The `end:` label of codel_dequeue: CE above ce_threshold. */
static int32_t send_head(void) {
    if (queues[0].len == 0)
        return AQMLAB_NONE;
    if (ce_threshold_on && v.ldelay > ce_threshold)
        aqmlab_mark_head(0, AQMLAB_MARK_STEP);
    return 0;
}

/* codel_dequeue */
AQMLAB_EXPORT(aqmlab_dequeue) int32_t aqmlab_dequeue(uint64_t now) {
    if (queues[0].len == 0) {
        v.dropping = 0;
        return AQMLAB_NONE;
    }
    int drop = should_drop(now);
    if (v.dropping) {
        if (!drop) {
            /* sojourn below target: leave the dropping state */
            v.dropping = 0;
        } else {
            /* time for the next drop(s): a large backlog may call for several now */
            while (v.dropping && now >= v.drop_next) {
                v.count++;
                if (ecn && aqmlab_mark_head(0, AQMLAB_MARK_DELAY)) {
                    v.drop_next = control_law(v.drop_next, v.count);
                    return send_head();
                }
                aqmlab_drop_head(0, AQMLAB_DROP_HEAD);
                if (!should_drop(now))
                    v.dropping = 0; /* leave the dropping state */
                else
                    v.drop_next = control_law(v.drop_next, v.count);
            }
        }
    } else if (drop) {
        if (!(ecn && aqmlab_mark_head(0, AQMLAB_MARK_DELAY))) {
            aqmlab_drop_head(0, AQMLAB_DROP_HEAD);
            should_drop(now); /* Linux re-evaluates for first_above_time/ldelay, ignores it */
        }
        v.dropping = 1;
        /* if the sojourn went above target soon after the last episode, reuse its rate */
        uint32_t delta = v.count - v.lastcount;
        if (delta > 1 && (int64_t)(now - v.drop_next) < (int64_t)(16 * interval))
            v.count = delta;
        else
            v.count = 1;
        v.lastcount = v.count;
        v.drop_next = control_law(now, v.count);
    }
    return send_head();
}
