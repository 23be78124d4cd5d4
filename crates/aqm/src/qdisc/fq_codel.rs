//! FQ-CoDel — Flow Queue CoDel (RFC 8290; Linux net/sched/sch_fq_codel.c).
//!
//! Arrivals are hashed into `flows` queues (1024), each with its own CoDel state
//! ([`crate::codel_law::Vars`]) and shared parameters and statistics ([`crate::codel_law`]). A deficit round robin ([`crate::drr`]) with a quantum of one MTU
//! serves two lists: a flow becoming active joins *new_flows* (served first: sparse flows get
//! priority); a flow that used its quantum moves to *old_flows*; an empty new flow passes
//! through old_flows once before leaving (anti-starvation), exactly as `fq_codel_dequeue`.
//! When the packet limit (10240) or the memory limit is exceeded, `fq_codel_drop` drops from
//! the head of the fattest queue — half its backlog, at most 64 packets at once — and raises
//! that flow's CoDel count by the number dropped. CoDel's "one MTU left" guard sees the whole
//! qdisc's backlog, as in Linux. ECN is on by default.
//!
//! Deviations (aqmlab's choice): the flow hash is a seeded 64-bit mix of the packet's flow key (Linux: a
//! perturbed jhash of the 5-tuple), mapped to a queue by `reciprocal_scale` as in Linux
//! ([`crate::drr::flow_bucket`]), so distinct flows collide as randomly as in Linux,
//! deterministically per seed; memory is counted as
//! wire bytes (Linux counts skb truesize, roughly 1.5× larger); `mtu_bytes` (CoDel's
//! one-MTU guard) is a field here, Linux takes it from the device (`psched_mtu`, 1514), and it
//! is independent of `quantum` as in Linux; the CoDel law's own deviations are those of
//! [`crate::codel_law`] (u64 ns time, exact f64 √count).

use crate::codel::CODEL_OPTIONS;
use crate::codel_law::{self, CodelQueue, Vars};
use crate::drr::{self, Drr, Scheduled};
use crate::options::{About, Link, Lowered, Opt, OptionError, Range, ScenarioOptions, Size, Unit};
use crate::pool::{List, Pool};
use crate::{DropReason, Nanos, Packet, Qdisc, Verdicts};

#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields, default)
)]
pub struct Params {
    /// Number of flow queues (`flows`, 1024).
    pub flows: u32,
    /// DRR quantum, bytes (`quantum`: psched_mtu = 1514).
    pub quantum: u32,
    /// Packet limit of the whole qdisc (`limit`, 10240).
    pub limit: u64,
    /// Memory limit, bytes (`memory_limit`, 32 MB; counted as wire bytes here).
    pub memory_limit: u64,
    /// Packets dropped at most per overflow (`drop_batch`, 64).
    pub drop_batch: u32,
    /// CoDel `target`, ns (5 ms).
    pub target_ns: Nanos,
    /// CoDel `interval`, ns (100 ms).
    pub interval_ns: Nanos,
    /// Mark instead of drop (`ecn`, on by default).
    pub ecn: bool,
    /// `ce_threshold`, ns (None: off).
    pub ce_threshold_ns: Option<Nanos>,
    /// CoDel's "at most one MTU queued" guard, bytes (not a tc option: Linux `psched_mtu` of
    /// the device, 1514).
    pub mtu_bytes: u64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            flows: 1024,
            quantum: 1514,
            limit: 10_240,
            memory_limit: 32 << 20,
            drop_batch: 64,
            target_ns: 5_000_000,
            interval_ns: 100_000_000,
            ecn: true,
            ce_threshold_ns: None,
            mtu_bytes: 1514,
        }
    }
}

/// The scenario's options (tc-fq_codel(8)'s names; times in ns).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields, default)
)]
pub struct Options {
    pub flows: u32,
    pub quantum: Size,
    pub limit: u64,
    pub memory_limit: Size,
    pub drop_batch: u32,
    pub target: Nanos,
    pub interval: Nanos,
    pub ecn: bool,
    pub ce_threshold: Option<Nanos>,
}

impl Default for Options {
    fn default() -> Self {
        let p = Params::default();
        Options {
            flows: p.flows,
            quantum: Size::Bytes(p.quantum as u64),
            limit: p.limit,
            memory_limit: Size::Bytes(p.memory_limit),
            drop_batch: p.drop_batch,
            target: p.target_ns,
            interval: p.interval_ns,
            ecn: p.ecn,
            ce_threshold: p.ce_threshold_ns,
        }
    }
}

impl ScenarioOptions for Options {
    type Config = Params;
    const ABOUT: About = About {
        kind: "fq_codel",
        summary: "hashed flow queues with CoDel each, deficit round robin with new flows first; on overflow, drops from the fattest queue's head",
        source: "RFC 8290; Linux net/sched/sch_fq_codel.c",
        one_of: &[],
        reads_packet_values: false,
        options: &[
            Opt::new("flows", Unit::Int, Range::closed(1.0, 65536.0), "number of flow queues", "tc-fq_codel(8) flows; sch_fq_codel.c fq_codel_init (1024)"),
            Opt::new("quantum", Unit::Size, Range::POSITIVE, "DRR quantum", "tc-fq_codel(8) quantum; sch_fq_codel.c fq_codel_init (psched_mtu, 1514 B)"),
            Opt::new("limit", Unit::Packets, Range::POSITIVE, "packet limit of the whole qdisc, capped by the physical buffer", "tc-fq_codel(8) limit; sch_fq_codel.c fq_codel_init (10240)"),
            Opt::new("memory_limit", Unit::Size, Range::POSITIVE, "byte limit of the whole qdisc (wire bytes), capped by the physical buffer", "tc-fq_codel(8) memory_limit; sch_fq_codel.c fq_codel_init (32 MiB)"),
            Opt::new("drop_batch", Unit::Int, Range::at_least(1.0), "packets dropped at most per overflow", "tc-fq_codel(8) drop_batch; sch_fq_codel.c fq_codel_init (64)"),
            CODEL_OPTIONS[0],
            CODEL_OPTIONS[1],
            Opt::new("ecn", Unit::Bool, Range::ANY, "CE-mark ECT packets instead of dropping them", "tc-fq_codel(8) ecn; sch_fq_codel.c fq_codel_init (on)"),
            CODEL_OPTIONS[2],
        ],
    };

    /// FQ-CoDel enforces its own limits (it drops from the fattest queue, not the arrival);
    /// the physical buffer caps them.
    fn lower(&self, link: &Link) -> Result<Lowered<Self::Config>, OptionError> {
        let quantum = u32::try_from(self.quantum.bytes())
            .map_err(|_| OptionError::new("quantum", "too large"))?;
        let memory = self.memory_limit.bytes();
        let params = Params {
            flows: self.flows,
            quantum,
            limit: link
                .buffer_packets
                .map_or(self.limit, |b| self.limit.min(b)),
            memory_limit: link.buffer_bytes.map_or(memory, |b| memory.min(b)),
            drop_batch: self.drop_batch,
            target_ns: self.target,
            interval_ns: self.interval,
            ecn: self.ecn,
            ce_threshold_ns: self.ce_threshold,
            ..Params::default()
        };
        params.validate()?;
        Ok(Lowered {
            config: params,
            delay_target_ns: Some(self.target),
        })
    }
}

impl Params {
    pub fn validate(&self) -> Result<(), OptionError> {
        if self.flows == 0 || self.flows > 65_536 {
            return Err(OptionError::new(
                "flows",
                format!("{} must be in 1..=65536 (as tc)", self.flows),
            ));
        }
        if self.quantum == 0 {
            return Err(OptionError::new("quantum", "must be positive"));
        }
        if self.limit == 0 {
            return Err(OptionError::new("limit", "must be positive"));
        }
        if self.drop_batch == 0 {
            return Err(OptionError::new("drop_batch", "must be positive"));
        }
        if self.target_ns == 0 || self.interval_ns == 0 {
            return Err(OptionError::new(
                "target",
                "target and interval must be positive",
            ));
        }
        Ok(())
    }

    /// The CoDel parameters shared by all flow queues (`q->cparams`).
    pub fn codel(&self) -> codel_law::Params {
        codel_law::Params {
            target_ns: self.target_ns,
            interval_ns: self.interval_ns,
            mtu_bytes: self.mtu_bytes,
            ecn: self.ecn,
            ce_threshold_ns: self.ce_threshold_ns,
        }
    }
}

/// One flow queue, all its state in one record as Linux's `struct fq_codel_flow` (packets,
/// `deficit` and `flowchain`, `cvars`), aligned to a cache line: at a queue's turn the scheduler,
/// the pool and CoDel read the same line (CoDel's `count`, `lastcount` and `drop_next`, used only
/// around drops, may fall in the next one).
#[derive(Clone, Debug, Default)]
#[repr(C, align(64))]
struct Flow {
    /// `deficit`, `flowchain`.
    drr: drr::QueueState,
    /// `head`, `tail`, and the flow's byte backlog (for `fq_codel_drop`).
    queue: List,
    /// `cvars`.
    vars: Vars,
}

impl Scheduled for Flow {
    #[inline]
    fn drr(&mut self) -> &mut drr::QueueState {
        &mut self.drr
    }
}

/// tc -s names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// CoDel's counters, shared by all flow queues (`q->cstats`): `maxpacket`, `drop_count`,
    /// `ecn_mark`, `ce_mark`, ...
    pub codel: codel_law::Stats,
    /// Packets dropped by `fq_codel_drop` on overflow (packet or memory limit).
    pub drop_overlimit: u64,
    /// Of those, the ones dropped while over the memory limit.
    pub drop_overmemory: u64,
    pub new_flow_count: u64,
}

#[derive(Clone, Debug)]
pub struct FqCodel<P> {
    pub params: Params,
    codel_params: codel_law::Params,
    pub stats: Stats,
    flows: Vec<Flow>,
    /// Every flow queue's packets ([`crate::pool`]).
    pool: Pool<P>,
    drr: Drr,
    qlen: usize,
    backlog: u64,
    hash_seed: u64,
}

/// The queue CoDel drains inside FQ-CoDel: one flow's packets, with the *qdisc's* backlog
/// for the MTU guard (`codel_dequeue(..., &sch->qstats.backlog, ...)`).
struct FlowView<'a, P> {
    pool: &'a mut Pool<P>,
    queue: &'a mut List,
    total_backlog: &'a mut u64,
    qlen: &'a mut usize,
}

impl<P: Packet> CodelQueue<P> for FlowView<'_, P> {
    /// Always inlined: once per packet, and an out-of-line call returns the packet through the
    /// stack.
    #[inline(always)]
    fn pop_head(&mut self) -> Option<P> {
        let len = self.pool.head(self.queue)?.wire_len();
        *self.total_backlog -= len as u64;
        *self.qlen -= 1;
        self.pool.pop(self.queue)
    }
    #[inline(always)]
    fn backlog(&self) -> u64 {
        *self.total_backlog
    }
}

impl<P: Packet> FqCodel<P> {
    /// The discipline for engine parameters `params`, checked; `seed` seeds its random stream.
    pub fn build(params: &Params, seed: u64) -> Result<Self, OptionError> {
        params.validate()?;
        Ok(Self::new(params.clone(), seed))
    }

    pub fn new(params: Params, hash_seed: u64) -> Self {
        let flows = (0..params.flows).map(|_| Flow::default()).collect();
        FqCodel {
            codel_params: params.codel(),
            drr: Drr::new(params.flows as usize, params.quantum),
            params,
            stats: Stats::default(),
            flows,
            pool: Pool::default(),
            qlen: 0,
            backlog: 0,
            hash_seed,
        }
    }

    /// The flow queue of a packet ([`crate::drr::flow_bucket`]).
    pub fn classify(&self, flow_key: u64) -> usize {
        crate::drr::flow_bucket(flow_key, self.hash_seed, self.params.flows)
    }

    /// `fq_codel_drop`: drop half of the fattest queue (at most `drop_batch` packets) from its
    /// head. Returns the queue index.
    fn drop_fattest(&mut self, now: Nanos, out: &mut impl Verdicts<P>) -> usize {
        let (idx, max_backlog) = self
            .flows
            .iter()
            .enumerate()
            .map(|(i, f)| (i, f.queue.bytes()))
            .fold((0, 0), |a, b| if b.1 > a.1 { b } else { a });
        let threshold = max_backlog >> 1;
        let mut len = 0u64;
        let mut i = 0u32;
        let flow = &mut self.flows[idx];
        loop {
            let Some(p) = self.pool.pop(&mut flow.queue) else {
                break;
            };
            len += p.wire_len() as u64;
            self.backlog -= p.wire_len() as u64;
            self.qlen -= 1;
            out.dropped(p, DropReason::Overflow, now);
            i += 1;
            if i >= self.params.drop_batch || len >= threshold {
                break;
            }
        }
        // Tell CoDel to increase its signal strength too.
        flow.vars.count = flow.vars.count.wrapping_add(i);
        idx
    }
}

impl<P: Packet> Qdisc<P> for FqCodel<P> {
    fn enqueue(&mut self, mut pkt: P, now: Nanos, out: &mut impl Verdicts<P>) {
        let idx = self.classify(pkt.flow_key());
        pkt.set_enqueue_ns(now);
        self.backlog += pkt.wire_len() as u64;
        self.qlen += 1;
        self.pool.push(&mut self.flows[idx].queue, pkt);
        if self.drr.activate(&mut self.flows, idx) {
            self.stats.new_flow_count += 1;
        }
        let memory_limited = self.backlog > self.params.memory_limit;
        if self.qlen as u64 <= self.params.limit && !memory_limited {
            return;
        }
        let before = self.qlen;
        self.drop_fattest(now, out);
        let dropped = (before - self.qlen) as u64;
        self.stats.drop_overlimit += dropped;
        if memory_limited {
            self.stats.drop_overmemory += dropped;
        }
    }

    fn dequeue(&mut self, now: Nanos, out: &mut impl Verdicts<P>) -> Option<P> {
        let params = &self.codel_params;
        loop {
            let q = self.drr.next(&mut self.flows)?;
            let flow = &mut self.flows[q];
            // `codel_dequeue` ([`codel_law::dequeue`]) on the flow's queue, with its head looked
            // at where it lies instead of popped first: `should_drop` only reads the packet and
            // the backlog that will remain, so in the common case (neither dropping nor
            // starting to) the packet moves once, from its slot to the caller.
            let Some(head) = self.pool.head_mut(&flow.queue) else {
                flow.vars.dropping = false;
                self.drr.empty(&mut self.flows, q);
                continue;
            };
            let len = head.wire_len();
            let drop = codel_law::should_drop(
                Some(&*head),
                self.backlog - len as u64,
                now,
                params,
                &mut flow.vars,
                &mut self.stats.codel,
            );
            if !flow.vars.dropping && !drop {
                codel_law::ce_threshold(head, now, params, &flow.vars, &mut self.stats.codel, out);
                flow.drr.charge(len);
                let mut view = FlowView {
                    pool: &mut self.pool,
                    queue: &mut flow.queue,
                    total_backlog: &mut self.backlog,
                    qlen: &mut self.qlen,
                };
                // The head seen above, straight to the caller.
                return view.pop_head();
            }
            let mut view = FlowView {
                pool: &mut self.pool,
                queue: &mut flow.queue,
                total_backlog: &mut self.backlog,
                qlen: &mut self.qlen,
            };
            let pkt = view.pop_head().expect("the head seen above");
            match codel_law::dequeue_dropping(
                &mut view,
                pkt,
                drop,
                now,
                params,
                &mut flow.vars,
                &mut self.stats.codel,
                out,
            ) {
                Some(p) => {
                    flow.drr.charge(p.wire_len());
                    return Some(p);
                }
                None => self.drr.empty(&mut self.flows, q),
            }
        }
    }

    fn len(&self) -> usize {
        self.qlen
    }

    fn backlog_bytes(&self) -> u64 {
        self.backlog
    }

    fn head_enqueue_ns(&self) -> Option<Nanos> {
        self.flows
            .iter()
            .filter_map(|f| self.pool.head(&f.queue).map(|p| p.enqueue_ns()))
            .min()
    }

    fn reset(&mut self) -> Vec<P> {
        let mut all = Vec::with_capacity(self.qlen);
        for f in &mut self.flows {
            all.extend(self.pool.drain(&mut f.queue));
            *f = Flow::default();
        }
        self.drr.clear();
        self.qlen = 0;
        self.backlog = 0;
        all
    }

    fn owns_limit(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{pkt, Recorder, TestPkt};
    use crate::Ecn;

    /// FQ-CoDel written the plain way, as `fq_codel_dequeue` reads: per-flow double-ended
    /// queues, the shared DRR, and `codel_law::dequeue` popping the head first. (No overflow:
    /// the tests below stay under the limits.)
    struct Reference {
        drr: Drr,
        flows: Vec<RefFlow>,
        backlog: u64,
        params: codel_law::Params,
        stats: codel_law::Stats,
    }

    #[derive(Default)]
    struct RefFlow {
        drr: drr::QueueState,
        queue: std::collections::VecDeque<TestPkt>,
        vars: Vars,
    }

    impl Scheduled for RefFlow {
        fn drr(&mut self) -> &mut drr::QueueState {
            &mut self.drr
        }
    }

    /// One flow's queue with the qdisc's backlog, as CoDel sees it inside FQ-CoDel.
    struct RefView<'a> {
        queue: &'a mut std::collections::VecDeque<TestPkt>,
        backlog: &'a mut u64,
    }

    impl CodelQueue<TestPkt> for RefView<'_> {
        fn pop_head(&mut self) -> Option<TestPkt> {
            let p = self.queue.pop_front()?;
            *self.backlog -= p.len as u64;
            Some(p)
        }
        fn backlog(&self) -> u64 {
            *self.backlog
        }
    }

    impl Reference {
        fn enqueue(&mut self, mut p: TestPkt, idx: usize, now: Nanos) {
            p.enqueued = now;
            self.backlog += p.len as u64;
            self.flows[idx].queue.push_back(p);
            self.drr.activate(&mut self.flows, idx);
        }

        fn dequeue(&mut self, now: Nanos, out: &mut Recorder) -> Option<TestPkt> {
            loop {
                let q = self.drr.next(&mut self.flows)?;
                let f = &mut self.flows[q];
                let mut view = RefView {
                    queue: &mut f.queue,
                    backlog: &mut self.backlog,
                };
                match codel_law::dequeue(
                    &mut view,
                    now,
                    &self.params,
                    &mut f.vars,
                    &mut self.stats,
                    out,
                ) {
                    None => self.drr.empty(&mut self.flows, q),
                    Some(p) => {
                        f.drr.charge(p.len);
                        return Some(p);
                    }
                }
            }
        }
    }

    proptest::proptest! {
        /// FQ-CoDel's dequeue, which looks at a flow's head in its slot and pops it last,
        /// sends, drops and marks exactly what the plain composition of the DRR and
        /// `codel_dequeue` does, with the same CoDel state and counters, over random arrivals
        /// (few queues, so flows collide), ECN codepoints, sizes and times; with ECN on or off
        /// and with or without `ce_threshold`.
        #[test]
        fn dequeue_matches_the_plain_composition_of_drr_and_codel_dequeue(
            ops in proptest::collection::vec((0u64..6, 0u8..4, 60u32..1600, 0u8..3, 0u64..3_000_000), 1..500),
            ecn in proptest::bool::ANY,
            ce_threshold in proptest::bool::ANY,
        ) {
            let params = Params {
                flows: 4,
                quantum: 1514,
                target_ns: 1_000_000,
                interval_ns: 5_000_000,
                ecn,
                ce_threshold_ns: ce_threshold.then_some(1_500_000),
                ..Params::default()
            };
            let mut q: FqCodel<TestPkt> = FqCodel::new(params.clone(), 7);
            let mut r = Reference { drr: Drr::new(4, 1514), flows: (0..4).map(|_| RefFlow::default()).collect(), backlog: 0, params: params.codel(), stats: codel_law::Stats::default() };
            let (mut out_q, mut out_r) = (Recorder::default(), Recorder::default());
            let ecns = [Ecn::NotEct, Ecn::Ect0, Ecn::Ect1, Ecn::Ce];
            let mut now = 0;
            for (flow, e, len, op, dt) in ops {
                now += dt;
                if op < 2 {
                    let p = pkt(flow, len, ecns[e as usize]);
                    q.enqueue(p, now, &mut out_q);
                    r.enqueue(p, q.classify(flow), now);
                } else {
                    proptest::prop_assert_eq!(q.dequeue(now, &mut out_q), r.dequeue(now, &mut out_r));
                }
                proptest::prop_assert_eq!(&out_q.drops, &out_r.drops);
                proptest::prop_assert_eq!(&out_q.marks, &out_r.marks);
                proptest::prop_assert_eq!(q.backlog_bytes(), r.backlog);
                proptest::prop_assert_eq!(q.stats.codel, r.stats);
                for i in 0..4 {
                    proptest::prop_assert_eq!(&q.flows[i].vars, &r.flows[i].vars);
                }
            }
        }
    }

    fn fq(flows: u32) -> FqCodel<TestPkt> {
        FqCodel::new(
            Params {
                flows,
                ..Params::default()
            },
            7,
        )
    }

    /// Flow keys that land in distinct queues.
    fn distinct_keys(q: &FqCodel<TestPkt>, n: usize) -> Vec<u64> {
        let mut keys: Vec<u64> = vec![];
        let mut used = std::collections::BTreeSet::new();
        for k in 0.. {
            if used.insert(q.classify(k)) {
                keys.push(k);
                if keys.len() == n {
                    break;
                }
            }
        }
        keys
    }

    #[test]
    fn a_new_sparse_flow_is_served_before_backlogged_old_flows() {
        // Flow A has 10 packets queued and has been served (it is on old_flows after using
        // its quantum); a single packet of flow B arrives: it joins new_flows and leaves next.
        let mut q = fq(1024);
        let k = distinct_keys(&q, 2);
        let mut r = Recorder::default();
        for _ in 0..10 {
            q.enqueue(pkt(k[0], 1500, Ecn::NotEct), 0, &mut r);
        }
        // Quantum 1514: A sends 2 packets (deficit 1514 → 14 → −1486) before moving to old.
        assert_eq!(q.dequeue(0, &mut r).unwrap().flow, k[0]);
        assert_eq!(q.dequeue(0, &mut r).unwrap().flow, k[0]);
        q.enqueue(pkt(k[1], 100, Ecn::NotEct), 0, &mut r);
        assert_eq!(q.dequeue(0, &mut r).unwrap().flow, k[1]);
        assert_eq!(q.dequeue(0, &mut r).unwrap().flow, k[0]);
    }

    #[test]
    fn drr_gives_backlogged_flows_equal_bytes() {
        // Two backlogged flows with 1500-B and 500-B packets: over many rounds each gets one
        // quantum of bytes per round, so the byte counts stay within one quantum + one packet.
        let mut q = fq(1024);
        let k = distinct_keys(&q, 2);
        let mut r = Recorder::default();
        for _ in 0..2000 {
            q.enqueue(pkt(k[0], 1500, Ecn::NotEct), 0, &mut r);
            q.enqueue(pkt(k[1], 500, Ecn::NotEct), 0, &mut r);
            q.enqueue(pkt(k[1], 500, Ecn::NotEct), 0, &mut r);
            q.enqueue(pkt(k[1], 500, Ecn::NotEct), 0, &mut r);
        }
        let mut bytes = [0u64; 2];
        for _ in 0..2000 {
            let p = q.dequeue(0, &mut r).unwrap();
            bytes[(p.flow == k[1]) as usize] += p.len as u64;
        }
        let diff = bytes[0].abs_diff(bytes[1]);
        assert!(diff <= 1514 + 1500, "bytes {bytes:?}");
    }

    #[test]
    fn overflow_drops_half_of_the_fattest_queue_from_its_head() {
        // limit 20 packets: flow A holds 16, B 4; the 21st arrival (B) overflows: A is the
        // fattest (24 000 B) and loses packets from its head until half its bytes (12 000 B =
        // 8 packets) are gone; its CoDel count rises by 8.
        let mut q = FqCodel::new(
            Params {
                limit: 20,
                ..Params::default()
            },
            7,
        );
        let k = distinct_keys(&q, 2);
        let mut r = Recorder::default();
        for i in 0..16 {
            let mut p = pkt(k[0], 1500, Ecn::NotEct);
            p.value = i;
            q.enqueue(p, 0, &mut r);
        }
        for _ in 0..5 {
            q.enqueue(pkt(k[1], 1500, Ecn::NotEct), 0, &mut r);
        }
        assert_eq!(r.drops.len(), 8);
        assert!(r
            .drops
            .iter()
            .all(|(p, w)| p.flow == k[0] && *w == DropReason::Overflow));
        assert_eq!(
            r.drops.iter().map(|(p, _)| p.value).collect::<Vec<_>>(),
            (0..8).collect::<Vec<_>>(),
            "from the head"
        );
        assert_eq!(q.len(), 13);
        let a = q.classify(k[0]);
        assert_eq!(q.flows[a].vars.count, 8);
    }

    #[test]
    fn colliding_flows_share_a_queue() {
        // With 4 queues, 5 flows must collide somewhere (pigeonhole); two flows in one queue
        // are served FIFO together.
        let q = fq(4);
        let mut seen = std::collections::BTreeMap::new();
        let mut pair = None;
        for k in 0..5u64 {
            if let Some(&other) = seen.get(&q.classify(k)) {
                pair = Some((other, k));
                break;
            }
            seen.insert(q.classify(k), k);
        }
        let (a, b) = pair.expect("pigeonhole");
        let mut q = fq(4);
        let mut r = Recorder::default();
        q.enqueue(pkt(a, 1500, Ecn::NotEct), 0, &mut r);
        q.enqueue(pkt(a, 1500, Ecn::NotEct), 0, &mut r);
        q.enqueue(pkt(b, 100, Ecn::NotEct), 0, &mut r);
        let order: Vec<u64> = (0..3).map(|_| q.dequeue(0, &mut r).unwrap().flow).collect();
        assert_eq!(order, vec![a, a, b], "no isolation within a shared queue");
    }

    #[test]
    fn defaults_are_fq_codel_init_s() {
        let p = Params::default();
        assert_eq!(
            (p.flows, p.quantum, p.limit, p.memory_limit, p.drop_batch),
            (1024, 1514, 10_240, 32 * 1024 * 1024, 64)
        );
        assert_eq!(
            (
                p.target_ns,
                p.interval_ns,
                p.ecn,
                p.ce_threshold_ns,
                p.mtu_bytes
            ),
            (5_000_000, 100_000_000, true, None, 1514)
        );
        assert!(FqCodel::<TestPkt>::new(p, 1).owns_limit());
    }

    #[test]
    fn drr_order_for_two_flows_of_full_size_packets() {
        // Both flows new with deficit 1514, 1500-B packets. A: 1514 → 14 → −1486 (2 packets),
        // then +1514 = 28, to old; B the same: A A B B. Then on old_flows each has 28 > 0:
        // one packet (→ −1472), then +1514 = 42 and to the tail: A B A B.
        let mut q = fq(1024);
        let k = distinct_keys(&q, 2);
        let mut r = Recorder::default();
        for _ in 0..10 {
            q.enqueue(pkt(k[0], 1500, Ecn::NotEct), 0, &mut r);
            q.enqueue(pkt(k[1], 1500, Ecn::NotEct), 0, &mut r);
        }
        let order: Vec<u64> = (0..8).map(|_| q.dequeue(0, &mut r).unwrap().flow).collect();
        let (a, b) = (k[0], k[1]);
        assert_eq!(order, vec![a, a, b, b, a, b, a, b]);
    }

    #[test]
    fn an_emptied_new_flow_passes_through_old_flows_and_loses_its_priority() {
        // A: 20 × 500 B; four dequeues take A's deficit 1514 → 14 → −486 (still at the head of
        // new_flows). B (100 B) arrives: next dequeue rotates A to old (deficit 1028) and
        // serves B from new (1414). The next dequeue finds B empty on new_flows with old_flows
        // non-empty: B moves to the tail of old ([A, B]) and A is served (1028 → 528). A second
        // B packet now finds B still listed: not a new flow, no priority: A (528 → 28),
        // A (28 → −472), then A rotates (+1514) and B is served.
        let mut q = fq(1024);
        let k = distinct_keys(&q, 2);
        let (a, b) = (k[0], k[1]);
        let mut r = Recorder::default();
        for _ in 0..20 {
            q.enqueue(pkt(a, 500, Ecn::NotEct), 0, &mut r);
        }
        for _ in 0..4 {
            assert_eq!(q.dequeue(0, &mut r).unwrap().flow, a);
        }
        q.enqueue(pkt(b, 100, Ecn::NotEct), 0, &mut r);
        assert_eq!(q.dequeue(0, &mut r).unwrap().flow, b);
        assert_eq!(q.dequeue(0, &mut r).unwrap().flow, a);
        q.enqueue(pkt(b, 100, Ecn::NotEct), 0, &mut r);
        let order: Vec<u64> = (0..3).map(|_| q.dequeue(0, &mut r).unwrap().flow).collect();
        assert_eq!(order, vec![a, a, b]);
        assert_eq!(q.stats.new_flow_count, 2);
    }

    #[test]
    fn codel_runs_per_flow_queue() {
        // A: 300 × 1500 B at t = 0 (a standing queue); B: one 100-B packet at 10.5, 20.5, ...
        // ms (sparse). One dequeue per ms. B joins new_flows and leaves at the next dequeue
        // (sojourn 0.5 ms), so A is served at every other ms; A's sojourn reaches 5 ms at its
        // 5 ms dequeue (first_above = 105 ms) and its first drop is at its first dequeue
        // after 105 ms: 106 ms (101 ms went to B). B never loses a packet.
        let mut q = FqCodel::new(
            Params {
                ecn: false,
                ..Params::default()
            },
            7,
        );
        let k = distinct_keys(&q, 2);
        let (a, b) = (k[0], k[1]);
        let mut r = Recorder::default();
        for _ in 0..300 {
            q.enqueue(pkt(a, 1500, Ecn::NotEct), 0, &mut r);
        }
        let (mut b_sent, mut b_got, mut first_drop) = (0, 0, None);
        for t in 1..=250u64 {
            if t % 10 == 0 {
                q.enqueue(pkt(b, 100, Ecn::NotEct), t * 1_000_000 + 500_000, &mut r);
                b_sent += 1;
            }
            let before = r.drops.len();
            if q.dequeue(t * 1_000_000 + 1_000_000, &mut r).map(|p| p.flow) == Some(b) {
                b_got += 1;
            }
            if first_drop.is_none() && r.drops.len() > before {
                first_drop = Some(t + 1);
            }
        }
        assert_eq!(first_drop, Some(106));
        assert!(r
            .drops
            .iter()
            .all(|(p, w)| p.flow == a && *w == DropReason::HeadDrop));
        assert_eq!((b_sent, b_got), (25, 25));
        assert_eq!(q.stats.codel.drop_count, r.drops.len() as u64);
    }

    #[test]
    fn memory_limit_drops_from_the_fattest_queue() {
        // memory_limit 10 000 B: A holds 6 × 1500 = 9000 B; B's 1500-B arrival makes 10 500 B
        // > 10 000: A is fattest (9000 B), threshold 4500 B: 3 packets dropped from its head.
        let mut q = FqCodel::new(
            Params {
                memory_limit: 10_000,
                ..Params::default()
            },
            7,
        );
        let k = distinct_keys(&q, 2);
        let mut r = Recorder::default();
        for _ in 0..6 {
            q.enqueue(pkt(k[0], 1500, Ecn::NotEct), 0, &mut r);
        }
        assert!(r.drops.is_empty());
        q.enqueue(pkt(k[1], 1500, Ecn::NotEct), 0, &mut r);
        assert_eq!(r.drops.len(), 3);
        assert!(r
            .drops
            .iter()
            .all(|(p, w)| p.flow == k[0] && *w == DropReason::Overflow));
        assert_eq!((q.stats.drop_overlimit, q.stats.drop_overmemory), (3, 3));
        assert_eq!((q.len(), q.backlog_bytes()), (4, 6000));
    }
}
