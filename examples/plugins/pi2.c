/*
 * PI2 — a linearized PI controller for classic and scalable traffic in one queue, as an aqmlab
 * plugin (ABI v2): a port of the built-in crates/aqm/src/qdisc/pi2.rs, verdict for verdict.
 *
 * Sources: De Schepper, Bondarenko, Tsang, Briscoe, "PI2: A Linearized AQM for both Classic
 * and Scalable TCP", ACM CoNEXT 2016 ("think once to mark, twice to drop", §3); RFC 9332 §2.1,
 * §2.4 (k = 2) and Appendix A.1 (the PI update); Linux net/sched/sch_dualpi2.c
 * (calculate_probability, dualpi2_classic_marking, dualpi2_scalable_marking, drop_overload,
 * must_drop, the dequeue loop's drop_and_retry, dualpi2_reset_default), whose names the
 * functions below keep; tc-dualpi2(8) names the options; Fejes et al. 2020 §III (tupdate
 * 10 ms, alpha 0.16, beta 3.2, target K*RTT).
 *
 * Every tupdate the timer moves the base probability p' by
 *     alpha*(qdelay - target) + beta*(qdelay - prev_qdelay)      (RFC 9332 A.1, in seconds)
 * clamped to [0, 1], qdelay being the head packet's age at the tick (dualpi2's
 * get_queue_delays). At dequeue, past the 2-MTU guard (no signal while less than 2*1514 bytes
 * are queued), a classic packet is signalled with p'^2 (two uniforms, both below p'), a
 * scalable one with min(k*p', 1). A signal is CE for ECN-capable packets, a drop otherwise;
 * when k*p' >= 1 (overload) classic ECN packets are dropped instead of marked, and scalable
 * packets are dropped with p'^2 before the survivors are marked (drop_overload). Which packets
 * are scalable is ecn_mask. The deviations are pi2.rs's: the decision at dequeue (as Linux
 * dualpi2; the CoNEXT qdisc decided at enqueue, as PIE), f64 probabilities instead of
 * dualpi2's 32-bit fixed point, one queue for both kinds of traffic, time in u64 ns.
 *
 * The timer. aqmlab_init sets its period to the tupdate option (aqmlab_set_timer); the host
 * then calls aqmlab_timer(t) at t = tupdate, 2*tupdate, ..., each before the first call whose
 * `now` is >= t, with the queue as the last call left it: exactly the updates pi2.rs's
 * Vars::catch_up replays lazily (first at t = tupdate, qdelay(t) = t - the head's enqueue
 * time). pi2.rs replays at most MAX_CATCHUP (10 000) missed updates per call and only moves its
 * timer on past the rest; the host never skips a tick, so the ticks since the last enqueue or
 * dequeue are counted here and those past the 10 000th leave the controller alone, as there.
 *
 * Options as pi2.rs's Options declares them: names, units (ecn_mask a choice, the plugin
 * receiving its index), ranges, defaults.
 *
 *   clang --target=wasm32 -O2 -nostdlib -Wl,--no-entry -Wl,--export-dynamic \
 *         -I plugins/include -o pi2.wasm examples/plugins/pi2.c
 */
#include "aqmlab_qdisc.h"

/* The 2-MTU guard's MTU, bytes (pi2.rs Params::mtu_bytes). */
#define MTU_BYTES 1514

/* At most this many missed updates are replayed per enqueue or dequeue (pi2.rs MAX_CATCHUP). */
#define MAX_CATCHUP 10000

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
     "coupling factor: scalable packets are marked with min(k*p', 1) (RFC 9332 §2.4: 2)", 0, 2.0,
     1, AQMLAB_NO_MAX},
    {"ecn_mask", AQMLAB_UNIT_CHOICE,
     "which packets are scalable: ECT(1) and CE, or every ECN-capable packet (Linux DCTCP sends "
     "ECT(0)) (tc-dualpi2 l4s_ect/any_ect; RFC 9331 §5.1)",
     "l4s_ect|any_ect", 0, 0, 0},
    {"limit", AQMLAB_UNIT_PACKETS,
     "packet limit of the queue (sch_dualpi2.c dualpi2_reset_default: 10000)", 0, 10000, 1,
     AQMLAB_NO_MAX},
};

AQMLAB_QDISC(1, options, .kind = "pi2_c",
             .summary = "PI2 in one queue: p' from a PI controller on the head packet's age; "
                        "classic packets signalled with p'^2, scalable ones with min(k*p', 1)",
             .source = "De Schepper et al., CoNEXT 2016; RFC 9332 App. A.1; Linux "
                       "net/sched/sch_dualpi2.c; Fejes et al. 2020 §III; port of "
                       "crates/aqm/src/qdisc/pi2.rs");

/* The parameters (pi2.rs Params). */
static uint64_t target, limit;
static double alpha, beta, k;
static int any_ect;

/* The controller (pi2.rs Vars; sch_dualpi2.c pi2_prob, last_qdelay). */
static double prob;           /* the base probability p' */
static uint64_t prev_qdelay;  /* qdelay at the last update, ns */
static uint32_t missed;       /* timer ticks since the last enqueue or dequeue */

AQMLAB_EXPORT(aqmlab_init) const char *aqmlab_init(void) {
    target = (uint64_t)option_values[0];
    aqmlab_set_timer((uint64_t)option_values[1]);
    alpha = option_values[2];
    beta = option_values[3];
    k = option_values[4];
    any_ect = option_values[5] == 1; /* the index of "any_ect" */
    limit = (uint64_t)option_values[6];
    /* dualpi2_reset: p' = 0 (the timer keeps its schedule across a reset) */
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

/* The update at tick `now`, on the head packet's age (get_queue_delays). */
AQMLAB_EXPORT(aqmlab_timer) void aqmlab_timer(uint64_t now) {
    if (missed >= MAX_CATCHUP)
        return; /* pi2.rs only moves its timer on past these */
    missed++;
    const aqmlab_queue *q = &queues[0];
    uint64_t qdelay = q->len && now > q->head.enqueue_ns ? now - q->head.enqueue_ns : 0;
    calculate_probability(qdelay);
}

/* Tail-drop at `limit` packets ("overflow"). */
AQMLAB_EXPORT(aqmlab_enqueue) uint32_t aqmlab_enqueue(uint64_t now, const aqmlab_pkt *pkt) {
    (void)now, (void)pkt;
    missed = 0;
    return queues[0].len < limit ? AQMLAB_ACCEPT(0) : AQMLAB_DROP(AQMLAB_DROP_OVERFLOW);
}

/* "Think once to mark, think twice to drop": both uniforms below p', i.e. probability p'^2. */
static int think_twice(void) { return aqmlab_random_unit() < prob && aqmlab_random_unit() < prob; }

/* Whether a packet is scalable under ecn_mask. */
static int is_scalable(uint8_t ecn) {
    return any_ect ? ecn != AQMLAB_NOT_ECT : ecn == AQMLAB_ECT1 || ecn == AQMLAB_CE;
}

/* The signal for the head (pi2.rs Vars::signal): 0 none, >0 a mark reason, <0 minus a drop
 * reason. dualpi2_scalable_marking with drop_overload; dualpi2_classic_marking. */
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

/* dualpi2_qdisc_dequeue: the head leaves untouched while less than 2 MTUs are queued, else it
 * is signalled; a dropped head is followed by the next (drop_and_retry). */
AQMLAB_EXPORT(aqmlab_dequeue) int32_t aqmlab_dequeue(uint64_t now) {
    (void)now;
    missed = 0;
    const aqmlab_queue *q = &queues[0];
    while (q->len) {
        if (q->backlog_bytes < 2 * MTU_BYTES)
            return 0;
        int s = signal(is_scalable(q->head.ecn), aqmlab_is_ect(&q->head));
        if (s >= 0) {
            if (s > 0)
                aqmlab_mark_head(0, (uint32_t)s);
            return 0;
        }
        aqmlab_drop_head(0, (uint32_t)-s);
    }
    return AQMLAB_NONE;
}
