/*
 * aqmlab_qdisc.h — ABI v2 of aqmlab's queue-discipline plugins.
 *
 * A plugin is ONE C file that includes this header and is compiled to WebAssembly:
 *
 *   clang --target=wasm32 -O2 -nostdlib -Wl,--no-entry -Wl,--export-dynamic \
 *         -I plugins/include -o my_aqm.wasm my_aqm.c
 *
 * (Debian: `apt-get install clang lld`; lld provides wasm-ld.) aqmlab runs the module in a
 * sandbox (crates/plugin): the module may import nothing but the five host functions below,
 * its memory is capped, and every call into it has an instruction budget; a trap, a runaway
 * call or a broken rule of this ABI ends the run with an error naming the module, the
 * function and the simulated time.
 *
 * The model is Linux's qdisc with the packets held by the HOST:
 *
 * - The host keeps `n_queues` FIFOs of packets. The plugin never owns packets: at enqueue it
 *   says which queue the arrival joins (or that it is dropped), at dequeue which queue's head
 *   is sent next, and it may drop or CE-mark the head of any queue on the way. One queue fits
 *   single-queue AQMs (RED, PIE, CoDel, STEP), several fit FQ and dual-queue designs.
 * - The host keeps a record per queue (`aqmlab_queue`: length, backlog, the head packet) up to
 *   date IN THE PLUGIN'S MEMORY, so reading the queues costs the plugin no call.
 * - Nothing here reads a clock: `now` (ns since the start of the run) is passed on every call.
 *   The only other input is the random stream, seeded by the host from the run's seed, so a
 *   run is reproducible bit for bit.
 * - Every drop and mark carries a reason, one of the fixed codes below; the results count drops
 *   and marks per reason under the name given with each code ("overflow", "head", "step", ...),
 *   as they do for the built-in disciplines.
 *
 * What the plugin provides:
 *
 *   const aqmlab_qdisc_info aqmlab_qdisc   data: version, queues, timer, options (AQMLAB_QDISC)
 *   const char *aqmlab_init(void)          required: check the options, set up the state
 *   uint32_t aqmlab_enqueue(now, pkt)      the verdict on an arrival: optional with one queue
 *                                          (default: every arrival joins queue 0, within the
 *                                          limit aqmlab_set_limit sets)
 *   int32_t  aqmlab_dequeue(now)           optional: the queue to serve (default: queue 0's head)
 *   void     aqmlab_timer(now)             the periodic update: required if info.timer_ns > 0
 *                                          or the module imports aqmlab_set_timer
 *
 * Integers are little-endian; pointers are 32-bit offsets in the module's memory. The layouts
 * below are part of the ABI (checked by the _Static_asserts at the end). A change of any of
 * them is a new ABI version: the import module's name carries it ("aqmlab_v2").
 *
 * v2 adds to v1, whose modules the host still runs unchanged: the "choice" unit (an option
 * naming one of several strings, in aqmlab_option.choices, v1's reserved field), the
 * AQMLAB_READS_VALUES flag (the run's packet-value marker feeds aqmlab_pkt.value),
 * aqmlab_set_timer (the timer's period from an option, set in aqmlab_init), aqmlab_set_limit
 * (a packet limit the host enforces) and aqmlab_enqueue optional for one queue.
 *
 * Examples: examples/plugins/step.c (enqueue only), examples/plugins/codel.c (dequeue only,
 * the limit left to the host), examples/plugins/pi2.c (a timer whose period is an option, a
 * choice option), examples/plugins/dualpi2.c (two queues and a scheduler between them).
 */
#ifndef AQMLAB_QDISC_H
#define AQMLAB_QDISC_H

#include <stddef.h>
#include <stdint.h>

/* The ABI this header describes; a plugin puts it in aqmlab_qdisc.abi_version. */
#define AQMLAB_ABI_VERSION 2

/* ---- Packets --------------------------------------------------------------------------- */

/* ECN codepoint of the IP header (RFC 3168 §5), the values of the two ECN bits. */
#define AQMLAB_NOT_ECT 0
#define AQMLAB_ECT1 1 /* L4S senders (RFC 9331) */
#define AQMLAB_ECT0 2 /* classic ECN senders (RFC 3168), Linux DCTCP */
#define AQMLAB_CE 3

/* What the plugin knows of a packet (40 bytes). Read-only for the plugin. */
typedef struct aqmlab_pkt {
    /* When the packet joined its queue, ns. In the arrival passed to aqmlab_enqueue: `now`. */
    uint64_t enqueue_ns;
    /* The packet's flow: the simulator's flow index or the router's 5-tuple hash. */
    uint64_t flow_id;
    /* 32 bits of a hash of flow_id, keyed by the run's seed: uniform, the same for every packet
     * of a flow. aqmlab_bucket(flow_hash, n) spreads flows over n queues exactly as the
     * built-in FQ-CoDel and FQ-PIE do. */
    uint32_t flow_hash;
    /* Bytes in the queue and on the link (the IP packet length). */
    uint32_t wire_len;
    /* Packet value for value-based AQMs (PPV, CSAQM; higher = more important), as the run's
     * packet-value marker set it if the plugin has AQMLAB_READS_VALUES; 0 otherwise. */
    uint32_t value;
    /* The packet's traffic class as the host classifies it (the scenario's flow class); 0 if
     * the host gives none. */
    uint32_t traffic_class;
    /* AQMLAB_NOT_ECT, AQMLAB_ECT1, AQMLAB_ECT0 or AQMLAB_CE. */
    uint8_t ecn;
    uint8_t reserved[7];
} aqmlab_pkt;

/* The host's record of one of its queues (56 bytes), kept current in the plugin's memory
 * (at aqmlab_qdisc.queues[i]) before every call and after every aqmlab_drop_head. */
typedef struct aqmlab_queue {
    /* Bytes queued (sum of wire_len). */
    uint64_t backlog_bytes;
    /* Packets queued. */
    uint32_t len;
    uint32_t reserved;
    /* The head packet (the next to leave) while len > 0; all zero when the queue is empty. */
    aqmlab_pkt head;
} aqmlab_queue;

/* ---- Reasons ------------------------------------------------------------------------------
 * Each code is counted in the results under the name in quotes, the names the built-in
 * disciplines' drops and marks are counted under (aqm::DropReason, aqm::MarkReason). */

/* Why a packet is dropped. */
#define AQMLAB_DROP_OVERFLOW 1   /* "overflow": the buffer or the discipline's limit is full */
#define AQMLAB_DROP_EARLY 2      /* "early": probabilistic early drop (RED, PIE, PI2) */
#define AQMLAB_DROP_FORCED 3     /* "forced": above a hard threshold */
#define AQMLAB_DROP_HEAD 4       /* "head": at dequeue by a delay rule (CoDel) */
#define AQMLAB_DROP_FLOW_MATCH 5 /* "flow_match": matched a random queued packet (CHOKe) */
#define AQMLAB_DROP_VALUE 6      /* "value": for its low packet value (PPV, CSAQM) */
#define AQMLAB_DROP_OVERLOAD 7   /* "overload": ECT packet dropped as the mark rate is too high */
#define AQMLAB_DROP_RANDOM 8     /* "random": Bernoulli loss */

/* Why a packet is CE-marked. */
#define AQMLAB_MARK_PROB 1    /* "prob": probabilistic mark (RED, PIE, PI2 classic) */
#define AQMLAB_MARK_FORCED 2  /* "forced": above a hard threshold */
#define AQMLAB_MARK_STEP 3    /* "step": instantaneous threshold (STEP, L4S step, ce_threshold) */
#define AQMLAB_MARK_COUPLED 4 /* "coupled": coupled mark (PI2, DualPI2 scalable traffic) */
#define AQMLAB_MARK_CTV 5     /* "ctv": below the congestion threshold value (CSAQM) */
#define AQMLAB_MARK_RANDOM 6  /* "random": Bernoulli mark */
#define AQMLAB_MARK_DELAY 7   /* "delay": instead of a drop by a delay law (CoDel's ecn) */

/* ---- Verdicts at enqueue ------------------------------------------------------------------
 * aqmlab_enqueue returns one of these (bits 0-7 reason, 8-15 action, 16-31 queue). */

/* The arrival joins the tail of `queue` unchanged. */
#define AQMLAB_ACCEPT(queue) ((uint32_t)(queue) << 16)
/* The arrival gets CE and joins the tail of `queue`. Only for ECT or CE arrivals: marking a
 * Not-ECT packet is an error (drop it instead). */
#define AQMLAB_MARK(queue, reason) (((uint32_t)(queue) << 16) | (1u << 8) | (uint32_t)(reason))
/* The arrival is dropped. */
#define AQMLAB_DROP(reason) ((2u << 8) | (uint32_t)(reason))

/* aqmlab_dequeue's answer when no packet is to be sent now. */
#define AQMLAB_NONE (-1)

/* ---- Options ------------------------------------------------------------------------------
 * A plugin declares its options as data; a scenario sets them by name, the host checks each
 * value against
 * [min, max], converts it by its unit, and writes every value, as a double, into
 * aqmlab_qdisc.option_values[i] before calling aqmlab_init. Integers are exact up to 2^53. */

/* Units (aqm::options::Unit), and what the plugin receives:
 *   "time"          ns (a scenario writes 15ms)
 *   "delay-target"  ns; a time or a multiple of the bottleneck's reference RTT (0.5rtt); the
 *                   first such option is the discipline's delay target in the summary
 *   "size"          bytes (a scenario writes bytes, 10pkt = 15000 bytes, or 1bdp)
 *   "packets"       packets
 *   "rate"          bit/s (40Mbit)
 *   "int", "float"  the number
 *   "bool"          0 or 1
 *   "choice"        the index of the string the scenario names, in aqmlab_option.choices
 *                   ("l4s_ect|any_ect": a scenario writes "any_ect", the plugin receives 1);
 *                   the default is an index too, and min and max are not read */
#define AQMLAB_UNIT_TIME "time"
#define AQMLAB_UNIT_DELAY_TARGET "delay-target"
#define AQMLAB_UNIT_SIZE "size"
#define AQMLAB_UNIT_PACKETS "packets"
#define AQMLAB_UNIT_RATE "rate"
#define AQMLAB_UNIT_INT "int"
#define AQMLAB_UNIT_FLOAT "float"
#define AQMLAB_UNIT_BOOL "bool"
#define AQMLAB_UNIT_CHOICE "choice"

/* As a default: the option has none; the plugin receives AQMLAB_UNSET (a NaN, test it with
 * aqmlab_is_unset) when the scenario does not set it. As min or max: no bound. */
#define AQMLAB_UNSET (__builtin_nan(""))
#define AQMLAB_NO_MIN (-__builtin_inf())
#define AQMLAB_NO_MAX (__builtin_inf())

/* One option (40 bytes). */
typedef struct aqmlab_option {
    const char *name; /* the scenario key: [a-z][a-z0-9_]*, at most 64 bytes */
    const char *unit; /* one of the AQMLAB_UNIT_* strings */
    const char *doc;  /* one line: what it does (and where it comes from) */
    /* For the unit "choice": its strings, separated by '|', each [a-z0-9_-]+, at least two
     * and at most 64 (NULL for every other unit). */
    const char *choices;
    double default_value; /* in the unit's terms (ns, bytes, ...), or AQMLAB_UNSET */
    double min;           /* closed bounds in the same terms; AQMLAB_NO_MIN / AQMLAB_NO_MAX */
    double max;
} aqmlab_option;

/* ---- The description --------------------------------------------------------------------- */

/* Flags. */
/* The plugin enforces the buffer limit itself and sees every arrival, also those the physical
 * buffer beneath would refuse (as the built-in PPV, GSP, FQ-CoDel and FQ-PIE do). Without it
 * the host drops those arrivals ("overflow") before the plugin sees them. */
#define AQMLAB_OWNS_LIMIT 1u
/* The plugin reads aqmlab_pkt.value: a run gives its flows a packet-value marker (the
 * scenario's [marker], else equal shares), as for the built-in PPV and CSAQM. Without it every
 * packet's value is 0 and a scenario's [marker] is refused. */
#define AQMLAB_READS_VALUES 2u

/* The most queues a plugin may ask for. */
#define AQMLAB_MAX_QUEUES 65536
/* The most options a plugin may declare. */
#define AQMLAB_MAX_OPTIONS 64

/* The plugin's description (56 bytes), exported as the data symbol `aqmlab_qdisc`. The host
 * reads it once, when it loads the module, before any call. */
typedef struct aqmlab_qdisc_info {
    uint32_t abi_version; /* AQMLAB_ABI_VERSION */
    uint32_t n_queues;    /* host queues, 1..AQMLAB_MAX_QUEUES */
    const char *kind;     /* a name for the discipline, [a-z][a-z0-9_]* */
    const char *summary;  /* one line */
    const char *source;   /* what it follows: papers, RFCs, Linux files */
    uint32_t flags;       /* AQMLAB_OWNS_LIMIT | AQMLAB_READS_VALUES, or 0 */
    /* Period of aqmlab_timer, ns; 0: no timer, unless aqmlab_init sets one with
     * aqmlab_set_timer. The host calls aqmlab_timer(t) for t = period, 2·period, ... (ns since
     * the start of the run), each before the first enqueue or dequeue whose `now` is ≥ t, in
     * order: a tick is never skipped, however long the queue was idle. */
    uint64_t timer_ns;
    uint32_t n_options;            /* 0..AQMLAB_MAX_OPTIONS */
    const aqmlab_option *options;  /* n_options entries */
    double *option_values;         /* n_options doubles, written by the host */
    aqmlab_queue *queues;          /* n_queues records, kept current by the host */
    aqmlab_pkt *arrival;           /* one record: the host writes each arrival here */
} aqmlab_qdisc_info;

/* Declares the exported description with its storage. Use once, at file scope:
 *
 *   static const aqmlab_option options[] = { {"target", AQMLAB_UNIT_DELAY_TARGET, "...",
 *                                             0, 5e6, 1, AQMLAB_NO_MAX}, ... };
 *   AQMLAB_QDISC(1, options, .kind = "mine", .summary = "...", .source = "...");
 *
 * which defines `aqmlab_queue queues[N_QUEUES]`, `aqmlab_pkt arrival` and
 * `double option_values[]` (one per option) for the plugin to read. */
#define AQMLAB_QDISC(N_QUEUES, OPTIONS, ...)                                                   \
    static aqmlab_queue queues[N_QUEUES];                                                      \
    static aqmlab_pkt arrival;                                                                 \
    static double option_values[sizeof(OPTIONS) / sizeof(aqmlab_option)];                    \
    __attribute__((visibility("default"))) const aqmlab_qdisc_info aqmlab_qdisc = {            \
        .abi_version = AQMLAB_ABI_VERSION,                                                     \
        .n_queues = (N_QUEUES),                                                                \
        .n_options = sizeof(OPTIONS) / sizeof(aqmlab_option),                                  \
        .options = (OPTIONS),                                                                  \
        .option_values = option_values,                                                        \
        .queues = queues,                                                                      \
        .arrival = &arrival,                                                                   \
        __VA_ARGS__}

/* ---- What the plugin exports --------------------------------------------------------------
 * Define each with the AQMLAB_EXPORT attribute, spelled as here. Every call gets an
 * instruction budget; a call that exceeds it, traps, or returns something this ABI does not
 * allow ends the run with an error. */

#define AQMLAB_EXPORT(name) __attribute__((export_name(#name)))

/* Called once per run (and again after a reset, on a fresh instance), after the host has
 * written the option values. Check them and set up the state (and the timer's period, with
 * aqmlab_set_timer). Returns NULL if the options are acceptable, else a message that names
 * the option first: "threshold: give one of ...". */
AQMLAB_EXPORT(aqmlab_init) const char *aqmlab_init(void);

/* An arrival: `pkt` (= aqmlab_qdisc.arrival) at `now`. Returns AQMLAB_ACCEPT(queue),
 * AQMLAB_MARK(queue, reason) or AQMLAB_DROP(reason). May also drop queued packets
 * (aqmlab_drop_head) and mark them (aqmlab_mark_head) first. The host stamps enqueue_ns = now
 * on an accepted or marked arrival and appends it to the queue. Called only for arrivals
 * within the limit aqmlab_set_limit set. Optional for a plugin with one queue that decides
 * nothing at enqueue (CoDel): without it the host appends every arrival to queue 0, and a
 * call per packet is saved. */
AQMLAB_EXPORT(aqmlab_enqueue) uint32_t aqmlab_enqueue(uint64_t now, const aqmlab_pkt *pkt);

/* The link is ready to send at `now`: returns the queue whose head is sent (the host removes
 * it), or AQMLAB_NONE to send nothing. Before returning it may drop and mark heads of any
 * queue. Returning an empty queue is an error. Called also when every queue is empty.
 * Optional for a plugin with one queue: without it the host sends queue 0's head. */
AQMLAB_EXPORT(aqmlab_dequeue) int32_t aqmlab_dequeue(uint64_t now);

/* The periodic update at tick `now` (see timer_ns). It may read the queues, draw random
 * numbers, and drop or mark heads. Required if timer_ns > 0 or the module imports
 * aqmlab_set_timer, refused otherwise. */
AQMLAB_EXPORT(aqmlab_timer) void aqmlab_timer(uint64_t now);

/* ---- What the host provides (import module "aqmlab_v2") --------------------------------- */

#define AQMLAB_IMPORT(name) __attribute__((import_module("aqmlab_v2"), import_name(#name)))

/* Drop the head of `queue` now, with `reason` (AQMLAB_DROP_*). The queue's record is updated
 * before this returns (the next packet is the head). Dropping from an empty queue is an error.
 * Allowed in every call but aqmlab_init. */
AQMLAB_IMPORT(drop_head) void aqmlab_drop_head(uint32_t queue, uint32_t reason);

/* Set CE on the head of `queue` with `reason` (AQMLAB_MARK_*) if it is ECT or CE
 * (Linux's INET_ECN_set_ce), and return 1; return 0 and leave it unchanged if it is Not-ECT.
 * The packet stays at the head. An empty queue is an error. Allowed in every call but
 * aqmlab_init. */
AQMLAB_IMPORT(mark_head) uint32_t aqmlab_mark_head(uint32_t queue, uint32_t reason);

/* The next 64 bits of the discipline's random stream (PCG-64, aqm::rng_from_seed of the seed
 * the run gives the discipline): the same sequence on every run with that seed. */
AQMLAB_IMPORT(random_u64) uint64_t aqmlab_random_u64(void);

/* Only in aqmlab_init: the timer's period, ns, in place of aqmlab_qdisc.timer_ns (0: no
 * timer), so that it can follow an option (PIE's and PI2's tupdate). The first tick is at
 * `period_ns`; after a reset the timer keeps its schedule. */
AQMLAB_IMPORT(set_timer) void aqmlab_set_timer(uint64_t period_ns);

/* Only in aqmlab_init: at most `packets` packets in the plugin's queues together; the host drops
 * an arrival beyond it ("overflow") before any call, as a Linux qdisc checks sch->limit at
 * enqueue (sch_codel.c codel_qdisc_enqueue). 0: no limit but the physical buffer's. */
AQMLAB_IMPORT(set_limit) void aqmlab_set_limit(uint64_t packets);

/* ---- Helpers (inline: no calls into the host) -------------------------------------------- */

/* A uniform draw in [0, 1) with 53 bits of precision (as aqm::uniform01). */
static inline double aqmlab_random_unit(void) {
    return (double)(aqmlab_random_u64() >> 11) * (1.0 / 9007199254740992.0);
}

/* Sojourn of queue q's head at `now`, ns (0 if the queue is empty). */
static inline uint64_t aqmlab_head_sojourn(const aqmlab_queue *q, uint64_t now) {
    return q->len ? now - q->head.enqueue_ns : 0;
}

/* Whether an option was left unset (its default is AQMLAB_UNSET and the scenario gave none). */
static inline int aqmlab_is_unset(double v) { return __builtin_isnan(v); }

/* Whether a packet may be CE-marked instead of dropped. */
static inline int aqmlab_is_ect(const aqmlab_pkt *p) { return p->ecn != AQMLAB_NOT_ECT; }

/* Flow hash → one of n buckets (Linux's reciprocal_scale). */
static inline uint32_t aqmlab_bucket(uint32_t flow_hash, uint32_t n) {
    return (uint32_t)(((uint64_t)flow_hash * n) >> 32);
}

/* ---- The layouts the host reads (do not edit) -------------------------------------------- */
#ifdef __wasm32__
_Static_assert(sizeof(aqmlab_pkt) == 40, "aqmlab_pkt layout");
_Static_assert(offsetof(aqmlab_pkt, flow_hash) == 16 && offsetof(aqmlab_pkt, wire_len) == 20 &&
                   offsetof(aqmlab_pkt, value) == 24 && offsetof(aqmlab_pkt, traffic_class) == 28 &&
                   offsetof(aqmlab_pkt, ecn) == 32,
               "aqmlab_pkt layout");
_Static_assert(sizeof(aqmlab_queue) == 56 && offsetof(aqmlab_queue, len) == 8 &&
                   offsetof(aqmlab_queue, head) == 16,
               "aqmlab_queue layout");
_Static_assert(sizeof(aqmlab_option) == 40 && offsetof(aqmlab_option, doc) == 8 &&
                   offsetof(aqmlab_option, choices) == 12 &&
                   offsetof(aqmlab_option, default_value) == 16 &&
                   offsetof(aqmlab_option, max) == 32,
               "aqmlab_option layout");
_Static_assert(sizeof(aqmlab_qdisc_info) == 56 && offsetof(aqmlab_qdisc_info, kind) == 8 &&
                   offsetof(aqmlab_qdisc_info, flags) == 20 &&
                   offsetof(aqmlab_qdisc_info, timer_ns) == 24 &&
                   offsetof(aqmlab_qdisc_info, n_options) == 32 &&
                   offsetof(aqmlab_qdisc_info, arrival) == 48,
               "aqmlab_qdisc_info layout");
#else
#error "aqmlab plugins are compiled with clang --target=wasm32"
#endif

#endif /* AQMLAB_QDISC_H */
