//! The router's data path, sans-IO: every call takes the scenario time `now` (ns), so the
//! whole pipeline runs under a virtual clock in tests and under CLOCK_MONOTONIC in the binary.
//!
//! Per packet, in order:
//!
//! 1. **parse** ([`crate::ipv4::parse`]); non-IPv4 and malformed packets, and IPv4 packets whose
//!    source matches no class prefix, bypass everything below and are emitted at once,
//!    unchanged, counted.
//! 2. **classify** by source prefix (first matching prefix of `class_sources`), and find the
//!    packet's flow by 5-tuple (flows are numbered in order of first sight). A class of
//!    `ect1_classes` has its ECT(0) packets turned into ECT(1) here.
//! 3. **packet-value marker** for the disciplines that read values (PPV, CSAQM): the
//!    simulator's own [`link::marker::FlowMarker`], one per flow, seeded as the simulator seeds
//!    its markers (`derive_seed(seed, SEED_MARKER + flow)`, [`link::seed`]) — here the flow
//!    number is the order of first sight, not the simulator's flow id.
//! 4. **buffer and discipline**: [`aqm::PhysicalLimit::offer`] into the [`aqm::AnyQdisc`] built
//!    from `engine.bottleneck.aqm`, seeded `derive_seed(seed, SEED_QDISC)` as the simulator's.
//! 5. **the link**: exact serialization at `rate_bps` in virtual time with the simulator's
//!    [`link::Serializer`] — `bits·1e9/rate` ns with the remainder carried while the link
//!    stays busy (dropped when it goes idle), so a busy period of n packets lasts exactly
//!    Σbits/C. The next packet is dequeued at the virtual instant the link frees, whatever
//!    the wall clock says when the binary gets round to it; arrivals are processed in time
//!    order with the link's completions ([`Pipeline::advance`] runs before each arrival).
//! 6. **the delay line** of the packet's class: the whole base RTT R on the forward path, after
//!    the link (the simulator puts R/2 there and R/2 on the ACK path; for TCP the sum is what
//!    counts — only the ACK path's own timing differs, and the reverse path is uncongested in
//!    both). One FIFO per class: packets leave the link in order and all wait the same R, so
//!    the FIFO is sorted by due time and no flow can be reordered.
//! 7. **emit** ([`Pipeline::pop_due`]) once the due time has come; never before.
//!
//! Sojourn = virtual dequeue time − enqueue (arrival) time.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use aqm::{DropReason, MarkReason, Nanos, Packet, PhysicalLimit, Qdisc, Verdicts};
use link::config::MarkerConfig;
use link::discipline::Discipline;
use link::marker::FlowMarker;
use link::measure::QueueMeasure;
use link::seed::{derive_seed, SEED_MARKER, SEED_QDISC};
use link::{LinkConfig, Serializer};

use crate::config::Prefix;
use crate::ipv4::{self, Parse};
use crate::measure::{Counters, FlowStats, Lateness, QueueSample, Report};
use crate::packet::RouterPkt;

/// Capacity of a fresh packet buffer: an Ethernet MTU (1500) with room to spare; larger
/// packets grow it.
const BUF_CAPACITY: usize = 2048;

/// A packet ready to be written back.
#[derive(Debug)]
pub struct Emit {
    pub buf: Vec<u8>,
    /// Scenario time at which it became due.
    pub due_ns: Nanos,
    /// Its flow, if it went through the bottleneck.
    pub flow: Option<u32>,
}

/// Hasher for the flow table: the key is the packed 5-tuple, mixed once (SplitMix64).
#[derive(Default)]
pub struct TupleHasher(u64);

impl Hasher for TupleHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0000_0100_0000_01B3);
        }
    }
    fn write_u128(&mut self, x: u128) {
        let mut z = (x as u64) ^ ((x >> 64) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        self.0 = z ^ (z >> 31);
    }
}

/// One flow: its measurement and, for PPV/CSAQM, its marker.
struct Flow {
    stats: FlowStats,
    marker: Option<FlowMarker>,
    /// Arrival number the next packet gets.
    next_seq: u64,
    /// Arrival number of the last packet emitted.
    last_emitted: Option<u64>,
}

/// The link: at most one packet serializing, from `tx_start` to `tx_end`.
struct Link {
    serializer: Serializer,
    in_tx: Option<RouterPkt>,
    tx_start: Nanos,
    tx_end: Nanos,
}

pub struct Pipeline {
    // Configuration.
    warmup_ns: Nanos,
    duration_ns: Nanos,
    interval_ns: Nanos,
    rtt_ns: Vec<Nanos>,
    sources: Vec<Prefix>,
    /// Marker policy when the discipline reads values (the simulator's config: rate window, TVFs).
    marker: Option<MarkerConfig>,
    seed: u64,
    // Data path.
    limit: PhysicalLimit,
    qdisc: Discipline<RouterPkt>,
    link: Link,
    lines: Vec<VecDeque<(Nanos, RouterPkt)>>,
    bypass: VecDeque<(Nanos, Vec<u8>)>,
    flow_index: HashMap<u128, u32, BuildHasherDefault<TupleHasher>>,
    flows: Vec<Flow>,
    pool: Vec<Vec<u8>>,
    /// The virtual clock: the latest time the pipeline has been advanced to.
    now: Nanos,
    // Measurement.
    qm: QueueMeasure,
    class_sojourn: Vec<(u64, u64)>,
    queue: Vec<QueueSample>,
    next_sample: Option<Nanos>,
    pub counters: Counters,
    pub lateness: Lateness,
    /// Per class: turn ECT(0) into ECT(1) on arrival ([`Pipeline::with_ect1_classes`]).
    ect1: Vec<bool>,
}

/// The verdict sink: accounts each drop and mark to its flow and recycles dropped buffers.
struct Sink<'a> {
    flows: &'a mut [Flow],
    qm: &'a mut QueueMeasure,
    counters: &'a mut Counters,
    pool: &'a mut Vec<Vec<u8>>,
    window: (Nanos, Nanos),
}

impl Verdicts<RouterPkt> for Sink<'_> {
    fn dropped(&mut self, pkt: RouterPkt, reason: DropReason, now: Nanos) {
        self.counters.qdisc_drops += 1;
        self.qm.iv_drops += 1;
        if now >= self.window.0 && now < self.window.1 {
            self.flows[pkt.flow as usize]
                .stats
                .count_drop(pkt.wire_len, reason);
        }
        self.pool.push(pkt.buf);
    }

    fn marked(&mut self, pkt: &RouterPkt, reason: MarkReason, now: Nanos) {
        self.counters.qdisc_marks += 1;
        self.qm.iv_marks += 1;
        if now >= self.window.0 && now < self.window.1 {
            self.flows[pkt.flow as usize]
                .stats
                .count_mark(pkt.wire_len, reason);
        }
    }
}

impl Pipeline {
    /// Build the pipeline for `engine` with one source prefix per class.
    pub fn new(engine: &LinkConfig, sources: Vec<Prefix>) -> Result<Pipeline, String> {
        engine.check()?;
        if sources.len() != engine.classes.len() {
            return Err(format!(
                "class_sources: {} prefixes for {} classes",
                sources.len(),
                engine.classes.len()
            ));
        }
        let b = &engine.bottleneck;
        let qdisc = b
            .aqm
            .build(derive_seed(engine.seed, SEED_QDISC))
            .map_err(|e| format!("engine.bottleneck.aqm{e}"))?;
        let marker = engine.marker();
        let interval = engine.measure.interval_ns;
        Ok(Pipeline {
            warmup_ns: engine.warmup_ns,
            duration_ns: engine.duration_ns,
            interval_ns: interval,
            rtt_ns: engine.classes.iter().map(|c| c.rtt_ns).collect(),
            sources,
            marker,
            seed: engine.seed,
            limit: PhysicalLimit {
                packets: b.buffer_packets,
                bytes: b.buffer_bytes,
            },
            qdisc,
            link: Link {
                serializer: Serializer::new(b.rate_bps),
                in_tx: None,
                tx_start: 0,
                tx_end: 0,
            },
            lines: engine.classes.iter().map(|_| VecDeque::new()).collect(),
            bypass: VecDeque::new(),
            flow_index: HashMap::default(),
            flows: Vec::new(),
            pool: Vec::new(),
            now: 0,
            qm: QueueMeasure::default(),
            class_sojourn: vec![(0, 0); engine.classes.len()],
            queue: Vec::new(),
            next_sample: (interval > 0 && interval <= engine.duration_ns).then_some(interval),
            counters: Counters::default(),
            lateness: Lateness::default(),
            ect1: vec![false; engine.classes.len()],
        })
    }

    /// Turn the ECT(0) packets of `classes` into ECT(1) as they arrive (step 2), before the
    /// discipline sees them: the stand-in for L4S senders whose kernel cannot send ECT(1).
    pub fn with_ect1_classes(mut self, classes: &[u16]) -> Pipeline {
        for &c in classes {
            self.ect1[c as usize] = true;
        }
        self
    }

    /// An empty buffer to read a packet into (recycled when possible).
    #[inline]
    pub fn take_buf(&mut self) -> Vec<u8> {
        match self.pool.pop() {
            Some(mut b) => {
                b.clear();
                b
            }
            None => Vec::with_capacity(BUF_CAPACITY),
        }
    }

    /// Give a written packet's buffer back.
    #[inline]
    pub fn recycle(&mut self, buf: Vec<u8>) {
        self.pool.push(buf);
    }

    #[inline]
    fn in_window(&self, t: Nanos) -> bool {
        t >= self.warmup_ns && t < self.duration_ns
    }

    /// The virtual clock (the latest `now` seen).
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// A packet arrived at `now`. Times before the pipeline's clock are taken as its clock
    /// (the clock never runs backwards).
    pub fn receive(&mut self, mut buf: Vec<u8>, now: Nanos) {
        self.advance(now);
        let now = self.now;
        self.counters.rx_pkts += 1;
        let h = match ipv4::parse(&buf) {
            Parse::Ipv4(h) => h,
            Parse::NotIpv4 => {
                self.counters.non_ipv4 += 1;
                self.bypass.push_back((now, buf));
                return;
            }
            Parse::Malformed(_) => {
                self.counters.malformed += 1;
                self.bypass.push_back((now, buf));
                return;
            }
        };
        let src = u32::from_be_bytes(h.tuple.src);
        let Some(class) = self.sources.iter().position(|p| p.contains(src)) else {
            self.counters.unclassified += 1;
            self.bypass.push_back((now, buf));
            return;
        };
        if self.ect1.get(class).copied().unwrap_or(false) && ipv4::ect0_to_ect1(&mut buf) {
            self.counters.ect1_set += 1;
        }
        let key = h.tuple.packed();
        let flow = match self.flow_index.get(&key) {
            Some(&f) => f,
            None => {
                let f = self.flows.len() as u32;
                let marker = self.marker.as_ref().map(|m| {
                    FlowMarker::new(
                        m.tvf(class),
                        m.rate_window_ns,
                        aqm::rng_from_seed(derive_seed(
                            self.seed,
                            SEED_MARKER.wrapping_add(f as u64),
                        )),
                    )
                });
                self.flows.push(Flow {
                    stats: FlowStats::new(h.tuple, class as u16, now),
                    marker,
                    next_seq: 0,
                    last_emitted: None,
                });
                self.flow_index.insert(key, f);
                f
            }
        };
        let in_window = self.in_window(now);
        let fl = &mut self.flows[flow as usize];
        let wire_len = h.total_len as u32;
        let value = match &mut fl.marker {
            Some(m) => m.value_for(wire_len, now),
            None => 0,
        };
        if in_window {
            fl.stats.arrived_pkts += 1;
            fl.stats.arrived_bytes += wire_len as u64;
        }
        let seq = fl.next_seq;
        fl.next_seq += 1;
        self.counters.offered += 1;
        let pkt = RouterPkt {
            buf,
            wire_len,
            flow,
            class: class as u16,
            key: h.tuple.hash(),
            value,
            seq,
            enqueue_ns: now,
        };
        let mut sink = Sink {
            flows: &mut self.flows,
            qm: &mut self.qm,
            counters: &mut self.counters,
            pool: &mut self.pool,
            window: (self.warmup_ns, self.duration_ns),
        };
        self.qdisc.offer(&self.limit, pkt, now, &mut sink);
        self.start_tx(now);
    }

    /// Run the link and the queue samples up to `now`, in time order.
    pub fn advance(&mut self, now: Nanos) {
        loop {
            let tx = self
                .link
                .in_tx
                .as_ref()
                .map(|_| self.link.tx_end)
                .filter(|&t| t <= now);
            let sample = self.next_sample.filter(|&t| t <= now);
            match (tx, sample) {
                // A completion and a sample at the same instant: the completion first, so the
                // sample sees the link's state after it (the simulator's FIFO order of events
                // scheduled earlier).
                (Some(t), Some(s)) if t <= s => self.complete_tx(t),
                (Some(t), None) => self.complete_tx(t),
                (_, Some(s)) => self.take_sample(s),
                (None, None) => break,
            }
        }
        self.now = self.now.max(now);
    }

    /// The transmission ending at `t` completed: the packet enters its class's delay line,
    /// and the link starts on the next packet at the same instant.
    fn complete_tx(&mut self, t: Nanos) {
        let pkt = self
            .link
            .in_tx
            .take()
            .expect("complete_tx with a packet on the link");
        let (start, end) = (self.link.tx_start, self.link.tx_end);
        self.qm
            .record_tx(pkt.wire_len, start, end, self.warmup_ns, self.duration_ns);
        self.qm.record_tx_interval(pkt.wire_len, start, end);
        if self.in_window(t) {
            let s = &mut self.flows[pkt.flow as usize].stats;
            s.link_pkts += 1;
            s.link_bytes += pkt.wire_len as u64;
        }
        let class = pkt.class as usize;
        self.lines[class].push_back((t + self.rtt_ns[class], pkt));
        if self.qdisc.is_empty() {
            self.link.serializer.idle();
        }
        self.start_tx(t);
    }

    /// If the link is idle at `t`, dequeue the next packet and start serializing it.
    fn start_tx(&mut self, t: Nanos) {
        if self.link.in_tx.is_some() {
            return;
        }
        let mut sink = Sink {
            flows: &mut self.flows,
            qm: &mut self.qm,
            counters: &mut self.counters,
            pool: &mut self.pool,
            window: (self.warmup_ns, self.duration_ns),
        };
        let Some(pkt) = self.qdisc.dequeue(t, &mut sink) else {
            return;
        };
        let sojourn = t - pkt.enqueue_ns;
        let in_window = t >= self.warmup_ns && t < self.duration_ns;
        self.qm.record_sojourn(sojourn, in_window);
        if in_window {
            let s = &mut self.flows[pkt.flow as usize].stats;
            s.sojourn_sum_ns += sojourn;
            s.sojourn_count += 1;
            let c = &mut self.class_sojourn[pkt.class as usize];
            c.0 += sojourn;
            c.1 += 1;
        }
        let tx_ns = self.link.serializer.tx_ns(pkt.wire_len());
        self.link.tx_start = t;
        self.link.tx_end = t + tx_ns;
        self.link.in_tx = Some(pkt);
    }

    fn take_sample(&mut self, t: Nanos) {
        let in_tx = self
            .link
            .in_tx
            .as_ref()
            .map(|p| (p.wire_len, self.link.tx_start, self.link.tx_end));
        let (sum, cnt, max, link, drops, marks) = self.qm.take_interval(t, in_tx);
        self.queue.push(QueueSample {
            t_ns: t,
            qlen_pkts: self.qdisc.len() as u64,
            backlog_bytes: self.qdisc.backlog_bytes(),
            sojourn_mean_ns: (cnt > 0).then(|| sum as f64 / cnt as f64),
            sojourn_max_ns: (cnt > 0).then_some(max),
            link_bytes: link,
            drops,
            marks,
        });
        let next = t + self.interval_ns;
        self.next_sample = (next <= self.duration_ns).then_some(next);
    }

    /// The earliest time a packet becomes due: the head of the bypass FIFO or of a delay line,
    /// or the packet on the link (due its class's RTT after its transmission ends; those
    /// queued behind it are due later still). None if nothing is pending. The link's own
    /// completions need no wake-up: [`Pipeline::advance`] replays them in virtual time.
    pub fn next_wakeup(&self) -> Option<Nanos> {
        let mut t = self.bypass.front().map(|&(d, _)| d);
        for l in &self.lines {
            if let Some(&(d, _)) = l.front() {
                t = Some(t.map_or(d, |x| x.min(d)));
            }
        }
        if let Some(p) = &self.link.in_tx {
            let d = self.link.tx_end + self.rtt_ns[p.class as usize];
            t = Some(t.map_or(d, |x| x.min(d)));
        }
        t
    }

    /// The next packet due at or before `now`, earliest first. Call [`Pipeline::advance`]
    /// first so that transmissions completed by `now` are in the delay lines.
    pub fn pop_due(&mut self, now: Nanos) -> Option<Emit> {
        let mut best: Option<(Nanos, usize)> = self.bypass.front().map(|&(d, _)| (d, usize::MAX));
        for (c, l) in self.lines.iter().enumerate() {
            if let Some(&(d, _)) = l.front() {
                if best.map_or(true, |(b, _)| d < b) {
                    best = Some((d, c));
                }
            }
        }
        let (due, which) = best.filter(|&(d, _)| d <= now)?;
        self.counters.tx_pkts += 1;
        if which == usize::MAX {
            let (_, buf) = self.bypass.pop_front().expect("front exists");
            return Some(Emit {
                buf,
                due_ns: due,
                flow: None,
            });
        }
        let (_, pkt) = self.lines[which].pop_front().expect("front exists");
        let f = &mut self.flows[pkt.flow as usize];
        if f.last_emitted.is_some_and(|s| pkt.seq < s) {
            self.counters.reordered += 1;
        }
        f.last_emitted = Some(f.last_emitted.map_or(pkt.seq, |s| s.max(pkt.seq)));
        Some(Emit {
            buf: pkt.buf,
            due_ns: due,
            flow: Some(pkt.flow),
        })
    }

    /// Packets held: in the discipline, on the link, in the delay lines, in the bypass FIFO.
    pub fn held(&self) -> (usize, usize, usize, usize) {
        (
            self.qdisc.len(),
            self.link.in_tx.is_some() as usize,
            self.lines.iter().map(VecDeque::len).sum(),
            self.bypass.len(),
        )
    }

    /// Number of flows seen.
    pub fn flow_count(&self) -> usize {
        self.flows.len()
    }

    /// One flow's counters.
    pub fn flow_stats(&self, flow: u32) -> &FlowStats {
        &self.flows[flow as usize].stats
    }

    pub fn queue_samples(&self) -> &[QueueSample] {
        &self.queue
    }

    pub fn queue_measure(&self) -> &QueueMeasure {
        &self.qm
    }

    /// A plugin discipline's first failed call (a trap, a runaway): the run must end with it.
    pub fn discipline_error(&self) -> Option<&plugin::PluginError> {
        self.qdisc.error()
    }

    /// The results file's JSON.
    pub fn report(&self, complete: bool) -> serde_json::Value {
        let stats: Vec<FlowStats> = self.flows.iter().map(|f| f.stats.clone()).collect();
        Report {
            complete,
            window: (self.warmup_ns, self.duration_ns),
            rate_bps: self.link.serializer.rate_bps,
            flows: &stats,
            qm: &self.qm,
            class_sojourn: &self.class_sojourn,
            queue: &self.queue,
            counters: &self.counters,
            lateness: &self.lateness,
        }
        .to_json()
    }
}
