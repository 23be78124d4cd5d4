/*
 * DualPI2 — the DualQ Coupled AQM, two queues, as an aqmlab plugin (ABI v2): a port of the
 * built-in crates/aqm/src/qdisc/dualpi2.rs and of what it takes from pi2.rs (Vars: the PI
 * update, the signal, the replay cap), verdict for verdict.
 *
 * Sources: RFC 9332 §2.1 (the coupling: p_C = p'^2, p_CL = k*p'), §2.3 (classification by the
 * ECN field), §2.4 (k = 2), §4.2.2 (a weighted scheduler protecting the C queue), §4.2.3
 * (drop in L4S ECN saturation) and Appendix A.1 (the PI update, the native L4S AQM); De
 * Schepper, Bondarenko, Tsang, Briscoe, "PI2: A Linearized AQM for both Classic and Scalable
 * TCP", ACM CoNEXT 2016 ("think once to mark, twice to drop", §3); Linux
 * net/sched/sch_dualpi2.c (dualpi2_skb_classify, dualpi2_enqueue_skb, dequeue_packet,
 * dualpi2_reset_c_protection, dualpi2_calculate_c_protection, must_drop,
 * dualpi2_classic_marking, dualpi2_scalable_marking, do_step_aqm, dualpi2_qdisc_dequeue,
 * get_queue_delays, calculate_probability, dualpi2_reset_default), whose names the functions
 * below keep; tc-dualpi2(8) names the options.
 *
 * Two host queues: queue 0 is the L queue (scalable traffic: ECT(1) and CE under ecn_mask
 * l4s_ect, every ECN-capable packet under any_ect), queue 1 the C queue (the rest). Every
 * tupdate the timer moves the base probability p' by
 *     alpha*(qdelay - target) + beta*(qdelay - prev_qdelay)      (RFC 9332 A.1, in seconds)
 * clamped to [0, 1], qdelay being the older of the two heads' ages at the tick
 * (get_queue_delays). At dequeue the WRR scheduler picks a queue (dequeue_packet): L while the
 * credit is <= 0 or C is empty; serving L while C waits adds wc*len to the credit, serving C
 * while L waits subtracts (100 - wc)*len; both empty resets it to 1514*(wc - (100 - wc)). Then,
 * unless less than 2*1514 bytes were queued in all before the pick (must_drop's guard), the
 * head is signalled: a C packet with p'^2 (CE if ECN-capable and k*p' < 1, else a drop), an L
 * packet CE-marked with min(k*p', 1), and when k*p' >= 1 (overload) dropped with p'^2 first,
 * every survivor marked. A dropped head is followed by the next pick. Last (do_step_aqm after
 * must_drop), an L head not yet CE is marked if it waited at least `step` and the L queue held
 * at least min_qlen_step packets before the pick.
 *
 * Deviations from dualpi2.rs: none. Its deviations from Linux hold here too: f64
 * probabilities instead of 32-bit fixed point, time in u64 ns, drops at dequeue only (Linux's
 * default, drop_early off), the step on the sojourn only (Linux also offers a packet
 * threshold), the ECN field the only classifier (no tc filters, no skb priority). So do these,
 * where dualpi2.rs reads the upstream sch_dualpi2.c otherwise: the credit moves when a queue
 * is picked, also for a head then dropped (upstream: for the packet sent only); the 2-MTU
 * guard counts the picked packet (upstream: the backlog without it); the step marks from a
 * sojourn of `step` on (upstream: above it) and tests min_qlen_step at dequeue (upstream: at
 * enqueue).
 *
 * The timer. aqmlab_init sets its period to the tupdate option (aqmlab_set_timer); the host
 * then calls aqmlab_timer(t) at t = tupdate, 2*tupdate, ..., each before the first call whose
 * `now` is >= t, with the queues as the last call left them: exactly the updates pi2.rs's
 * Vars::catch_up replays lazily for dualpi2.rs (first at t = tupdate). pi2.rs replays at most
 * MAX_CATCHUP (10 000) missed updates per call and only moves its timer on past the rest; the
 * host never skips a tick, so the ticks since the last enqueue or dequeue are counted here and
 * those past the 10 000th leave the controller alone, as there.
 *
 * The limit. dualpi2.rs drops an arrival ("overflow") while both queues together hold `limit`
 * packets, after its controller has caught up, and lets the physical buffer beneath refuse
 * arrivals first (it does not own its limit). aqmlab_enqueue does the same, without
 * AQMLAB_OWNS_LIMIT. It does not use aqmlab_set_limit: the host would drop those arrivals
 * without a call into the plugin, and the count of missed ticks must restart at every enqueue,
 * a dropped one too, as every catch_up does.
 *
 * What the sandbox bounds: a call's fuel (docs/plugins.md, Limits: 10^6 units). A head dropped
 * and the next pick cost about 81 units (clang 14, -O2), so one dequeue drops at most about
 * 12 300 packets in a row before the run stops with an error. Within the default limit of
 * 10 000 packets it never does; with a larger limit and p' near 1 it can, where the built-in
 * goes on.
 *
 * Options as dualpi2.rs's Options and ABOUT declare them: names, order, units (ecn_mask a
 * choice, the plugin receiving its index), ranges, defaults.
 *
 *   clang --target=wasm32 -O2 -nostdlib -Wl,--no-entry -Wl,--export-dynamic \
 *         -I plugins/include -o dualpi2.wasm examples/plugins/dualpi2.c
 */
#include "aqmlab_qdisc.h"

/* The host's queues: L (sch_dualpi2.c q->l_queue) and C (the qdisc's own queue). */
#define L 0
#define C 1

/* The 2-MTU guard's MTU and the credit's unit, bytes (dualpi2.rs Params::mtu_bytes; Linux
 * psched_mtu on Ethernet). */
#define MTU_BYTES 1514

/* The WRR weights are percentages: wc + wl = 100 (sch_dualpi2.c MAX_WC). */
#define MAX_WC 100

/* At most this many missed updates are replayed per enqueue or dequeue (pi2.rs MAX_CATCHUP). */
#define MAX_CATCHUP 10000

/* ecn_mask as sch_dualpi2.c dualpi2_skb_classify applies it (cb->ect & q->ecn_mask), on the
 * ECN field's two bits, which the header's AQMLAB_* codepoints are: l4s_ect and any_ect are
 * TC_DUALPI2_ECN_MASK_L4S_ECT (1) and TC_DUALPI2_ECN_MASK_ANY_ECT (3) of
 * include/uapi/linux/pkt_sched.h. */
#define ECN_MASK_L4S_ECT 1
#define ECN_MASK_ANY_ECT 3

static const aqmlab_option options[] = {
    {"target", AQMLAB_UNIT_DELAY_TARGET,
     "queue-delay target of the PI controller (sch_dualpi2.c dualpi2_reset_default: 15 ms; "
     "Fejes et al. 2020: K*RTT)",
     0, 15e6, 1, AQMLAB_NO_MAX},
    {"tupdate", AQMLAB_UNIT_TIME,
     "period of the PI controller's update (sch_dualpi2.c dualpi2_reset_default: 16 ms)", 0,
     16e6, 1, AQMLAB_NO_MAX},
    {"alpha", AQMLAB_UNIT_FLOAT,
     "integral gain, Hz (dualpi2_reset_default: 41/256; RFC 9332 App. A.1: 0.16)", 0,
     41.0 / 256.0, 0, AQMLAB_NO_MAX},
    {"beta", AQMLAB_UNIT_FLOAT,
     "proportional gain, Hz (dualpi2_reset_default: 819/256; RFC 9332 App. A.1: 3.2)", 0,
     819.0 / 256.0, 0, AQMLAB_NO_MAX},
    {"k", AQMLAB_UNIT_FLOAT,
     "coupling factor: L packets are marked with min(k*p', 1) (RFC 9332 §2.4: 2)", 0, 2.0, 1,
     AQMLAB_NO_MAX},
    {"step", AQMLAB_UNIT_TIME,
     "L-queue step threshold on the sojourn (sch_dualpi2.c dualpi2_reset_default: 1 ms)", 0,
     1e6, 1, AQMLAB_NO_MAX},
    {"min_qlen_step", AQMLAB_UNIT_INT,
     "the step applies once the L queue holds this many packets (tc-dualpi2 min_qlen_step; "
     "sch_dualpi2.c dualpi2_reset_default: 0)",
     0, 0, 0, AQMLAB_NO_MAX},
    {"wc", AQMLAB_UNIT_INT,
     "C-queue weight of the WRR scheduler, % (tc-dualpi2 classic_protection; sch_dualpi2.c "
     "dualpi2_reset_default: 10)",
     0, 10, 0, MAX_WC},
    {"ecn_mask", AQMLAB_UNIT_CHOICE,
     "which packets are scalable: ECT(1) and CE, or every ECN-capable packet (Linux DCTCP sends "
     "ECT(0)) (tc-dualpi2 l4s_ect/any_ect; RFC 9331 §5.1)",
     "l4s_ect|any_ect", 0, 0, 0},
    {"limit", AQMLAB_UNIT_PACKETS,
     "packet limit of both queues together (sch_dualpi2.c dualpi2_reset_default: 10000)", 0,
     10000, 1, AQMLAB_NO_MAX},
};

AQMLAB_QDISC(2, options, .kind = "dualpi2_c",
             .summary = "DualQ Coupled AQM: an L queue with a step AQM and the coupled k*p', a C "
                        "queue with p'^2, one PI controller, WRR giving C at least wc %",
             .source = "RFC 9332; Linux net/sched/sch_dualpi2.c; De Schepper et al. (DualQ); "
                       "port of crates/aqm/src/qdisc/dualpi2.rs");

/* The parameters (dualpi2.rs Params). */
static uint64_t target, step, min_qlen_step, limit;
static double alpha, beta, k;
static int64_t wc;
static uint8_t ecn_mask;

/* The controller (pi2.rs Vars; sch_dualpi2.c pi2_prob, last_qdelay). */
static double prob;          /* the base probability p' */
static uint64_t prev_qdelay; /* qdelay at the last update, ns */
static uint32_t missed;      /* timer ticks since the last enqueue or dequeue */

/* The scheduler (dualpi2.rs DualPi2::credit; sch_dualpi2.c c_protection_credit, _init). */
static int64_t credit;      /* L is served while <= 0 */
static int64_t credit_init; /* MTU*(wc - wl) */

/* dualpi2_reset_c_protection */
static void reset_c_protection(void) { credit = credit_init; }

AQMLAB_EXPORT(aqmlab_init) const char *aqmlab_init(void) {
    target = (uint64_t)option_values[0];
    aqmlab_set_timer((uint64_t)option_values[1]);
    alpha = option_values[2];
    beta = option_values[3];
    k = option_values[4];
    step = (uint64_t)option_values[5];
    min_qlen_step = (uint64_t)option_values[6];
    wc = (int64_t)option_values[7];
    ecn_mask = option_values[8] == 1 ? ECN_MASK_ANY_ECT : ECN_MASK_L4S_ECT; /* 1: "any_ect" */
    limit = (uint64_t)option_values[9];
    /* dualpi2_calculate_c_protection: wl = MAX_WC - wc, init = MTU*(wc - wl) */
    credit_init = MTU_BYTES * (wc - (MAX_WC - wc));
    /* dualpi2_reset: p' = 0, the credit at its start (the timer keeps its schedule) */
    reset_c_protection();
    prob = 0;
    prev_qdelay = 0;
    missed = 0;
    return 0;
}

/* Seconds of a signed difference of ns (pi2.rs Vars::update's s). */
static double seconds(int64_t ns) { return (double)ns / 1e9; }

/* calculate_probability: p' += alpha*(qdelay - target) + beta*(qdelay - prev_qdelay), clamped
 * to [0, 1] (RFC 9332 A.1). */
static void calculate_probability(uint64_t qdelay) {
    double delta = alpha * seconds((int64_t)qdelay - (int64_t)target) +
                   beta * seconds((int64_t)qdelay - (int64_t)prev_qdelay);
    double p = prob + delta;
    prob = p < 0.0 ? 0.0 : p > 1.0 ? 1.0 : p;
    prev_qdelay = qdelay;
}

/* The age of a queue's head at `now`, 0 if the queue is empty (or the head is younger). */
static uint64_t head_age(const aqmlab_queue *q, uint64_t now) {
    return q->len && now > q->head.enqueue_ns ? now - q->head.enqueue_ns : 0;
}

/* The update at tick `now`, on the older head of the two queues (get_queue_delays). */
AQMLAB_EXPORT(aqmlab_timer) void aqmlab_timer(uint64_t now) {
    if (missed >= MAX_CATCHUP)
        return; /* pi2.rs only moves its timer on past these */
    missed++;
    uint64_t qdelay_l = head_age(&queues[L], now), qdelay_c = head_age(&queues[C], now);
    calculate_probability(qdelay_l > qdelay_c ? qdelay_l : qdelay_c);
}

/* dualpi2_enqueue_skb: tail-drop while both queues hold `limit` packets ("overflow"), else the
 * arrival joins the queue dualpi2_skb_classify gives it. */
AQMLAB_EXPORT(aqmlab_enqueue) uint32_t aqmlab_enqueue(uint64_t now, const aqmlab_pkt *pkt) {
    (void)now;
    missed = 0;
    if ((uint64_t)queues[L].len + queues[C].len >= limit)
        return AQMLAB_DROP(AQMLAB_DROP_OVERFLOW);
    return AQMLAB_ACCEPT(pkt->ecn & ecn_mask ? L : C);
}

/* dequeue_packet: the queue whose head leaves next, by the WRR credit, the credit moved by the
 * head's length while the other queue waits; -1 with the credit reset if both are empty. */
static int dequeue_packet(void) {
    const aqmlab_queue *l = &queues[L], *c = &queues[C];
    if (l->len && (!c->len || credit <= 0)) {
        if (c->len)
            credit += wc * l->head.wire_len;
        return L;
    }
    if (c->len) {
        if (l->len)
            credit -= (MAX_WC - wc) * c->head.wire_len;
        return C;
    }
    reset_c_protection();
    return -1;
}

/* "Think once to mark, think twice to drop": both uniforms below p', i.e. probability p'^2. */
static int think_twice(void) { return aqmlab_random_unit() < prob && aqmlab_random_unit() < prob; }

/* The signal for a head past the 2-MTU guard (pi2.rs Vars::signal): 0 none, >0 a mark reason,
 * <0 minus a drop reason. dualpi2_scalable_marking with drop_overload for L heads,
 * dualpi2_classic_marking for C heads. */
static int signal(int scalable, int ect) {
    int overloaded = k * prob >= 1.0;
    if (scalable) {
        if (overloaded && think_twice())
            return -AQMLAB_DROP_OVERLOAD;
        if (overloaded || aqmlab_random_unit() < k * prob)
            return AQMLAB_MARK_COUPLED;
        return 0;
    }
    if (think_twice()) {
        if (ect && !overloaded)
            return AQMLAB_MARK_PROB;
        return -(ect ? AQMLAB_DROP_OVERLOAD : AQMLAB_DROP_EARLY);
    }
    return 0;
}

/* dualpi2_qdisc_dequeue: pick a queue; must_drop (no signal while less than 2 MTUs were queued
 * in all), a dropped head followed by the next pick (drop_and_retry); then do_step_aqm on an L
 * head that is not CE, whether it arrived so or the law has just marked it. */
AQMLAB_EXPORT(aqmlab_dequeue) int32_t aqmlab_dequeue(uint64_t now) {
    missed = 0;
    for (;;) {
        uint64_t backlog = queues[L].backlog_bytes + queues[C].backlog_bytes;
        uint32_t l_qlen = queues[L].len;
        int q = dequeue_packet();
        if (q < 0)
            return AQMLAB_NONE;
        const aqmlab_pkt *head = &queues[q].head;
        if (backlog >= 2 * MTU_BYTES) {
            int s = signal(q == L, aqmlab_is_ect(head));
            if (s < 0) {
                aqmlab_drop_head((uint32_t)q, (uint32_t)-s);
                continue;
            }
            if (s > 0)
                aqmlab_mark_head((uint32_t)q, (uint32_t)s);
        }
        if (q == L && head->ecn != AQMLAB_CE && l_qlen >= min_qlen_step &&
            now - head->enqueue_ns >= step)
            aqmlab_mark_head(L, AQMLAB_MARK_STEP);
        return q;
    }
}
