//! FQ-PIE — flow queueing with PIE per queue (Linux net/sched/sch_fq_pie.c, merged in 5.6;
//! Ramakrishnan et al., NetDevConf 0x14).
//!
//! Arrivals are hashed into `flows` queues, each with its own PIE state ([`PieLaw`]) and shared
//! parameters; PIE's early drop runs at enqueue on the queue's own backlog, ECN marks while
//! the queue's p ≤ `ecn_prob` (10 %); the queues are served by the same deficit round robin as
//! FQ-CoDel ([`crate::drr`]), with no AQM at dequeue; each queue's probability is updated
//! every `tupdate` (lazily, per queue, from `now`: a queue's backlog and last measured delay
//! only change when it is touched, so replaying its ticks then is exact). A full qdisc drops
//! the arrival (`limit`, 10240 packets); the memory limit is only counted, as in
//! sch_fq_pie.c `fq_pie_qdisc_enqueue` (Linux 5.6). The hash is the same seeded mix as FQ-CoDel's.

use crate::drr::{self, Drr, Scheduled};
use crate::options::{About, Link, Lowered, Opt, OptionError, Range, ScenarioOptions, Size, Unit};
use crate::pie::{self, PieLaw, PIE_OPTIONS};
use crate::pool::{List, Pool};
use crate::{DropReason, MarkReason, Nanos, Packet, Qdisc, Rng, Verdicts};

#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields, default)
)]
pub struct Params {
    /// Number of queues (`flows`, 1024).
    pub flows: u32,
    /// Packet limit of the qdisc (`limit`, 10240).
    pub limit: u64,
    /// DRR quantum, bytes (`quantum`, 1514).
    pub quantum: u32,
    /// ECN marks only while the queue's p ≤ this (`ecn_prob`, 10 %).
    pub ecn_prob: f64,
    /// PIE's target, tupdate, alpha, beta, ecn, bytemode and estimator, shared by all queues
    /// (its `limit` is unused: the qdisc's applies).
    pub pie: pie::Params,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            flows: 1024,
            limit: 10_240,
            quantum: 1514,
            ecn_prob: 0.1,
            pie: pie::Params::default(),
        }
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
        if self.limit == 0 {
            return Err(OptionError::new("limit", "must be positive"));
        }
        if self.quantum == 0 {
            return Err(OptionError::new("quantum", "must be positive"));
        }
        if !(0.0..=1.0).contains(&self.ecn_prob) {
            return Err(OptionError::new(
                "ecn_prob",
                format!("{} must be a probability", self.ecn_prob),
            ));
        }
        self.pie.validate()
    }
}

/// The scenario's options (tc-fq_pie(8)'s names; times in ns).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields, default)
)]
pub struct Options {
    pub flows: u32,
    pub limit: u64,
    pub quantum: Size,
    pub ecn_prob: f64,
    pub target: Nanos,
    pub tupdate: Nanos,
    pub alpha: u32,
    pub beta: u32,
    pub ecn: bool,
    pub bytemode: bool,
    pub dq_rate_estimator: bool,
}

impl Default for Options {
    fn default() -> Self {
        let p = Params::default();
        Options {
            flows: p.flows,
            limit: p.limit,
            quantum: Size::Bytes(p.quantum as u64),
            ecn_prob: p.ecn_prob,
            target: p.pie.target_ns,
            tupdate: p.pie.tupdate_ns,
            alpha: p.pie.alpha,
            beta: p.pie.beta,
            ecn: p.pie.ecn,
            bytemode: p.pie.bytemode,
            dq_rate_estimator: p.pie.dq_rate_estimator,
        }
    }
}

impl ScenarioOptions for Options {
    type Config = Params;
    const ABOUT: About = About {
        kind: "fq_pie",
        summary: "hashed flow queues served by deficit round robin, PIE per queue at enqueue",
        source: "Linux net/sched/sch_fq_pie.c; RFC 8033 per queue",
        one_of: &[],
        reads_packet_values: false,
        options: &[
            Opt::new(
                "flows",
                Unit::Int,
                Range::closed(1.0, 65536.0),
                "number of flow queues",
                "tc-fq_pie(8) flows; sch_fq_pie.c fq_pie_init (1024)",
            ),
            Opt::new(
                "limit",
                Unit::Packets,
                Range::POSITIVE,
                "packet limit of the whole qdisc, capped by the physical buffer",
                "tc-fq_pie(8) limit; sch_fq_pie.c fq_pie_init (10240)",
            ),
            Opt::new(
                "quantum",
                Unit::Size,
                Range::POSITIVE,
                "DRR quantum",
                "tc-fq_pie(8) quantum; sch_fq_pie.c fq_pie_init (psched_mtu, 1514 B)",
            ),
            Opt::new(
                "ecn_prob",
                Unit::Float,
                Range::PROBABILITY,
                "ECN marks only while the queue's p ≤ this",
                "tc-fq_pie(8) ecn_prob; sch_fq_pie.c fq_pie_init (10 %)",
            ),
            PIE_OPTIONS[0],
            PIE_OPTIONS[1],
            PIE_OPTIONS[2],
            PIE_OPTIONS[3],
            PIE_OPTIONS[4],
            PIE_OPTIONS[5],
            PIE_OPTIONS[6],
        ],
    };

    fn lower(&self, link: &Link) -> Result<Lowered<Self::Config>, OptionError> {
        let quantum = u32::try_from(self.quantum.bytes())
            .map_err(|_| OptionError::new("quantum", "too large"))?;
        let params = Params {
            flows: self.flows,
            // The physical buffer caps the qdisc's own limit.
            limit: link
                .buffer_packets
                .map_or(self.limit, |b| self.limit.min(b)),
            quantum,
            ecn_prob: self.ecn_prob,
            pie: pie::Params {
                target_ns: self.target,
                tupdate_ns: self.tupdate,
                alpha: self.alpha,
                beta: self.beta,
                ecn: self.ecn,
                bytemode: self.bytemode,
                dq_rate_estimator: self.dq_rate_estimator,
                ..pie::Params::default()
            },
        };
        params.validate()?;
        Ok(Lowered {
            config: params,
            delay_target_ns: Some(self.target),
        })
    }
}

/// tc -s names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub dropped: u64,
    pub overlimit: u64,
    pub ecn_mark: u64,
    pub new_flow_count: u64,
}

/// One flow queue, all its state in one record (sch_fq_pie's `struct fq_pie_flow`: packets,
/// `deficit` and `flowchain`, `vars`), aligned to a cache line.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
struct Bucket {
    drr: drr::QueueState,
    queue: List,
    law: PieLaw,
}

impl Scheduled for Bucket {
    #[inline]
    fn drr(&mut self) -> &mut drr::QueueState {
        &mut self.drr
    }
}

impl Bucket {
    fn new(params: &pie::Params) -> Self {
        Bucket {
            drr: drr::QueueState::default(),
            queue: List::default(),
            law: PieLaw::new(params),
        }
    }
}

#[derive(Clone, Debug)]
pub struct FqPie<P> {
    pub params: Params,
    pub stats: Stats,
    buckets: Vec<Bucket>,
    /// Every bucket's packets ([`crate::pool`]).
    pool: Pool<P>,
    drr: Drr,
    qlen: usize,
    backlog: u64,
    hash_seed: u64,
    rng: Rng,
}

impl<P: Packet> FqPie<P> {
    /// The discipline for engine parameters `params`, checked; `seed` seeds its random stream.
    pub fn build(params: &Params, seed: u64) -> Result<Self, OptionError> {
        params.validate()?;
        Ok(Self::new(
            params.clone(),
            seed,
            crate::rng_from_seed(seed ^ 0xF0),
        ))
    }

    pub fn new(params: Params, hash_seed: u64, rng: Rng) -> Self {
        let buckets = (0..params.flows)
            .map(|_| Bucket::new(&params.pie))
            .collect();
        FqPie {
            drr: Drr::new(params.flows as usize, params.quantum),
            params,
            stats: Stats::default(),
            buckets,
            pool: Pool::default(),
            qlen: 0,
            backlog: 0,
            hash_seed,
            rng,
        }
    }

    /// The flow queue of a packet ([`crate::drr::flow_bucket`], as FQ-CoDel's).
    pub fn classify(&self, flow_key: u64) -> usize {
        crate::drr::flow_bucket(flow_key, self.hash_seed, self.params.flows)
    }

    /// The drop probability of the queue `flow_key` maps to (for tests and time series).
    pub fn prob_of(&self, flow_key: u64) -> f64 {
        self.buckets[self.classify(flow_key)].law.vars.prob
    }
}

impl<P: Packet> Qdisc<P> for FqPie<P> {
    fn enqueue(&mut self, mut pkt: P, now: Nanos, out: &mut impl Verdicts<P>) {
        let idx = self.classify(pkt.flow_key());
        let pp = &self.params.pie;
        let b = &mut self.buckets[idx];
        b.law.catch_up(pp, now, b.queue.bytes());
        if self.qlen as u64 >= self.params.limit {
            self.stats.overlimit += 1;
            self.stats.dropped += 1;
            b.law.vars.accu_prob = 0.0;
            out.dropped(pkt, DropReason::Overflow, now);
            return;
        }
        if b.law
            .drop_early(pp, b.queue.bytes(), pkt.wire_len(), &mut self.rng)
        {
            if pp.ecn && b.law.vars.prob <= self.params.ecn_prob && pkt.ecn().is_ect_or_ce() {
                pkt.set_ce();
                self.stats.ecn_mark += 1;
                out.marked(&pkt, MarkReason::Prob, now);
            } else {
                self.stats.dropped += 1;
                b.law.vars.accu_prob = 0.0;
                out.dropped(pkt, DropReason::Early, now);
                return;
            }
        }
        pkt.set_enqueue_ns(now);
        self.qlen += 1;
        self.backlog += pkt.wire_len() as u64;
        self.pool.push(&mut b.queue, pkt);
        if self.drr.activate(&mut self.buckets, idx) {
            self.stats.new_flow_count += 1;
        }
    }

    fn dequeue(&mut self, now: Nanos, _out: &mut impl Verdicts<P>) -> Option<P> {
        loop {
            let q = self.drr.next(&mut self.buckets)?;
            let pp = &self.params.pie;
            let b = &mut self.buckets[q];
            b.law.catch_up(pp, now, b.queue.bytes());
            let Some(head) = self.pool.head(&b.queue) else {
                self.drr.empty(&mut self.buckets, q);
                continue;
            };
            // The head's accounting first, with the backlog it leaves behind, then the packet
            // itself, straight from its slot to the caller.
            let (len, enqueued_ns) = (head.wire_len(), head.enqueue_ns());
            self.qlen -= 1;
            self.backlog -= len as u64;
            b.drr.charge(len);
            b.law
                .process_dequeue(pp, enqueued_ns, len, b.queue.bytes() - len as u64, now);
            return self.pool.pop(&mut b.queue);
        }
    }

    fn len(&self) -> usize {
        self.qlen
    }

    fn backlog_bytes(&self) -> u64 {
        self.backlog
    }

    fn head_enqueue_ns(&self) -> Option<Nanos> {
        self.buckets
            .iter()
            .filter_map(|b| self.pool.head(&b.queue).map(|p| p.enqueue_ns()))
            .min()
    }

    fn reset(&mut self) -> Vec<P> {
        let mut all = Vec::with_capacity(self.qlen);
        for b in &mut self.buckets {
            all.extend(self.pool.drain(&mut b.queue));
            *b = Bucket::new(&self.params.pie);
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
    use crate::rng_from_seed;
    use crate::testing::{pkt, Recorder, TestPkt};
    use crate::Ecn;

    const MS: Nanos = 1_000_000;

    fn fq() -> FqPie<TestPkt> {
        FqPie::new(Params::default(), 7, rng_from_seed(1))
    }

    fn distinct_keys(q: &FqPie<TestPkt>, n: usize) -> Vec<u64> {
        let mut keys = vec![];
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
    fn each_queue_runs_its_own_controller() {
        // Flow A keeps a standing queue with 30 ms sojourns, flow B's packets leave at once.
        // After 1 s (66 ticks of 15 ms) A's p has risen, B's is still 0: per-flow state, shared
        // parameters (sch_fq_pie: one pie_vars per flow).
        let mut q = fq();
        let k = distinct_keys(&q, 2);
        let mut r = Recorder::default();
        for t in 0..1000u64 {
            q.enqueue(pkt(k[0], 1500, Ecn::NotEct), t * MS, &mut r);
            q.enqueue(pkt(k[0], 1500, Ecn::NotEct), t * MS, &mut r);
            q.enqueue(pkt(k[1], 100, Ecn::NotEct), t * MS, &mut r);
            // Serve B's packet and one of A's per ms: A's queue grows by a packet per ms.
            for _ in 0..2 {
                q.dequeue(t * MS, &mut r);
            }
        }
        assert!(q.prob_of(k[0]) > 0.01, "A: p = {}", q.prob_of(k[0]));
        assert_eq!(q.prob_of(k[1]), 0.0);
    }

    #[test]
    fn a_full_qdisc_drops_the_arrival_and_drr_serves_new_flows_first() {
        let mut q = FqPie::new(
            Params {
                limit: 3,
                ..Params::default()
            },
            7,
            rng_from_seed(1),
        );
        let k = distinct_keys(&q, 2);
        let mut r = Recorder::default();
        for _ in 0..4 {
            q.enqueue(pkt(k[0], 1500, Ecn::NotEct), 0, &mut r);
        }
        assert_eq!(r.drops.len(), 1);
        assert_eq!(r.drops[0].1, DropReason::Overflow);
        // A uses its quantum (2 packets: 1514 → 14 → −1486), then a new flow B goes first.
        assert_eq!(q.dequeue(0, &mut r).unwrap().flow, k[0]);
        assert_eq!(q.dequeue(0, &mut r).unwrap().flow, k[0]);
        q.enqueue(pkt(k[1], 100, Ecn::NotEct), 0, &mut r);
        assert_eq!(q.dequeue(0, &mut r).unwrap().flow, k[1]);
    }
}
