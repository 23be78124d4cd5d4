//! The simulated world: flows, the dumbbell topology, the event loop and the results.
//!
//! Topology (docs/model.md): each flow class has its own base RTT R. A sender's packets reach the bottleneck at once (no access delay), are queued and
//! serialized at rate C, then travel R/2 to the receiver; ACKs travel R − R/2 back,
//! uncongested. Routes are lists of hops ([`Hop`]), so a reverse-path bottleneck or a second
//! bottleneck is a longer route, not a change to hosts or flows.

use aqm::{PhysicalLimit, Qdisc};
use rand_core::Rng as _;

use crate::config::{EngineConfig, StartConfig};
use crate::engine::{Event, Nanos, Scheduler};
use crate::marker::FlowMarker;
use link::seed::{SEED_CC, SEED_HOST, SEED_MARKER, SEED_QDISC, SEED_STALLS, SEED_STARTS, SEED_STOPS, SEED_WORKLOAD};
use crate::measure::{FlowMeasure, QueueMeasure, Sink};
use crate::host::{Gro, Nic, Stalls};
use crate::net::{Bottleneck, DelayLine, Hop};
use crate::packet::{AckPkt, DataPkt};
use crate::results::{RunResult, SampleRow};
use link::record::{ClassRecord, FlowRecord, RunRecord, SampleRecord};
use crate::tcp::{AnySender, CbrSender, EcnFeedback, Receiver, Sender, SenderConfig, TsoConfig};

/// One connection.
pub struct Flow {
    pub class: usize,
    pub start_ns: Nanos,
    /// When the flow's application stops writing (a CBR flow stops sending); None = never.
    pub stop_ns: Option<Nanos>,
    /// Payload bytes of a finite flow; None = bulk.
    pub size_bytes: Option<u64>,
    pub sender: AnySender,
    pub receiver: Receiver,
}

/// Every flow's Linux hosts (`[host]` without `ideal`): flow i's sender NIC and receiver GRO
/// are `nics[i]` and `gros[i]`.
pub struct Offloads {
    pub nics: Vec<Nic>,
    pub gros: Vec<Gro>,
    /// The GRO packets of the current poll (ranges into its packets), reused.
    units: Vec<std::ops::Range<usize>>,
    /// GRO packets handed to the receivers.
    pub gro_packets: u64,
}

/// Why a run stopped early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunError {
    Config(String),
    Interrupted,
    /// A large allocation (flows, per-flow state, result tables) failed: what it was for.
    OutOfMemory(String),
}

/// Reserve room for `n` more elements, or say what the memory was for.
fn reserve<T>(v: &mut Vec<T>, n: usize, what: &str) -> Result<(), RunError> {
    v.try_reserve_exact(n).map_err(|_| RunError::OutOfMemory(format!("cannot allocate {} MB for {what}", (n as u128 * std::mem::size_of::<T>() as u128) >> 20)))
}

/// `n` copies of `x` in a vector allocated with [`reserve`].
fn filled<T: Clone>(n: usize, x: T, what: &str) -> Result<Vec<T>, RunError> {
    let mut v = Vec::new();
    reserve(&mut v, n, what)?;
    v.resize(n, x);
    Ok(v)
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Config(m) => f.write_str(m),
            RunError::Interrupted => f.write_str("interrupted"),
            RunError::OutOfMemory(m) => write!(f, "out of memory: {m}"),
        }
    }
}

pub struct World {
    pub cfg: EngineConfig,
    pub sched: Scheduler,
    pub bottleneck: Bottleneck<DataPkt>,
    /// Forward (bottleneck → receiver) lines, one per class; line id = class index.
    pub fwd_lines: Vec<DelayLine<DataPkt>>,
    /// Reverse (receiver → sender) lines, one per class; line id = n_classes + class index.
    pub rev_lines: Vec<DelayLine<AckPkt>>,
    fwd_routes: Vec<Vec<Hop>>,
    rev_routes: Vec<Vec<Hop>>,
    pub flows: Vec<Flow>,
    /// One packet-value marker per flow when the discipline reads values (else empty).
    pub markers: Vec<FlowMarker>,
    pub fm: Vec<FlowMeasure>,
    pub qm: QueueMeasure,
    pub dropped_total: u64,
    pub samples: Vec<SampleRow>,
    pub queue_samples: Vec<crate::results::QueueRow>,
    data_buf: Vec<DataPkt>,
    ack_buf: Vec<AckPkt>,
    /// Packets the bottleneck has accepted for transmission (for benchmarks).
    pub bottleneck_pkts: u64,
    /// The Linux hosts' NICs and receive paths; None = ideal hosts.
    pub offloads: Option<Offloads>,
    /// When the hosts' CPU is away (none by default).
    pub stalls: Stalls,
    /// Flows in start order, and the next one to start.
    start_order: Vec<u32>,
    next_start: usize,
    /// Flows the time series may still show, in id order: those whose start time has come,
    /// less those done for good (`take_sample`'s skip test, once true, stays true), so a
    /// sample does not touch the cold state of a workload's thousands of finished flows.
    sampled: Vec<u32>,
    /// Every flow by (start time, id), and the next one to add to `sampled`.
    sample_order: Vec<u32>,
    next_sampled: usize,
}

/// The time flow `i` of a class gets from a start or stop schedule; uniform draws come from
/// `rng` as integers in [lo, hi] (exact and platform-independent).
fn schedule_time(s: &StartConfig, i: u64, rng: &mut aqm::Rng) -> Nanos {
    match *s {
        StartConfig::Fixed { at_ns } => at_ns,
        StartConfig::Uniform { lo_ns, hi_ns } => {
            let span = hi_ns - lo_ns;
            if span == 0 {
                lo_ns
            } else {
                lo_ns + rng.next_u64() % (span + 1)
            }
        }
        StartConfig::Staggered { first_ns, spacing_ns } => first_ns + i * spacing_ns,
    }
}

/// A component's seed from the run seed ([`link::seed`], shared with the emulator's router).
pub use link::seed::derive_seed;

/// One flow as the run plans it before anything is simulated: its class, when it starts and
/// (bulk and CBR classes with a `stop`) stops, and its size (finite flows; None = bulk).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlannedFlow {
    pub class: usize,
    pub start_ns: Nanos,
    pub stop_ns: Option<Nanos>,
    pub size_bytes: Option<u64>,
}

/// Every flow of the run in flow-id order, exactly as [`World::new`] creates them (it calls
/// this): per class, a workload's Poisson arrivals with their size draws (the class's own
/// stream, SEED_WORKLOAD + class), else `count` flows whose starts come from the run's start
/// stream and stops from its stop stream, class by class and flow by flow. The emulator
/// (`aqmlab._native.flow_plan`) starts the same flows at the same times with the same sizes.
/// `cfg` must have passed [`EngineConfig::check`]. Fails, rather than aborting, when the
/// plan cannot be allocated.
pub fn flow_plan(cfg: &EngineConfig) -> Result<Vec<PlannedFlow>, RunError> {
    let mut start_rng = aqm::rng_from_seed(derive_seed(cfg.seed, SEED_STARTS));
    let mut stop_rng = aqm::rng_from_seed(derive_seed(cfg.seed, SEED_STOPS));
    let mut out = Vec::new();
    let scheduled: usize = cfg.classes.iter().filter(|c| c.workload.is_none()).map(|c| c.count as usize).sum();
    reserve(&mut out, scheduled, "the flow plan")?;
    for (c, class) in cfg.classes.iter().enumerate() {
        if let Some(wl) = &class.workload {
            // Each class's workload has its own RNG stream: exponential inter-arrival times (a
            // Poisson process of rate λ), then two uniforms for the size.
            let mut rng = aqm::rng_from_seed(derive_seed(cfg.seed, SEED_WORKLOAD.wrapping_add(c as u64)));
            let stop = wl.stop_ns.unwrap_or(cfg.duration_ns).min(cfg.duration_ns);
            let mut t = wl.start_ns as f64;
            loop {
                t += -(1.0 - aqm::uniform01(&mut rng)).ln() / wl.rate_per_s * 1e9;
                if t >= stop as f64 {
                    break;
                }
                let (u, v) = (aqm::uniform01(&mut rng), aqm::uniform01(&mut rng));
                // A workload class has no stop schedule (EngineConfig::check).
                if out.len() == out.capacity() {
                    out.try_reserve(1).map_err(|_| RunError::OutOfMemory(format!("cannot allocate the flow plan beyond {} flows", out.len())))?;
                }
                out.push(PlannedFlow { class: c, start_ns: t as Nanos, stop_ns: None, size_bytes: Some(wl.size.sample(u, v)) });
            }
            continue;
        }
        for i in 0..class.count as u64 {
            let start_ns = schedule_time(&class.start, i, &mut start_rng);
            let stop_ns = class.stop.as_ref().map(|s| schedule_time(s, i, &mut stop_rng));
            out.push(PlannedFlow { class: c, start_ns, stop_ns, size_bytes: class.size_bytes });
        }
    }
    Ok(out)
}

/// Everything [`World::new`] checks, without building the flows: the config's own checks
/// and its discipline's (a config of a hundred million flows is checked in no time, and its
/// cost estimated, [`crate::estimate`], before anything is allocated for it).
pub fn check(cfg: &EngineConfig) -> Result<(), RunError> {
    cfg.check().map_err(RunError::Config)?;
    cfg.bottleneck.aqm.build::<DataPkt>(derive_seed(cfg.seed, SEED_QDISC)).map_err(|e| RunError::Config(format!("bottleneck.aqm.{e}")))?;
    Ok(())
}

impl World {
    pub fn new(cfg: EngineConfig) -> Result<World, RunError> {
        cfg.check().map_err(RunError::Config)?;
        let qdisc = cfg
            .bottleneck
            .aqm
            .build::<DataPkt>(derive_seed(cfg.seed, SEED_QDISC))
            .map_err(|e| RunError::Config(format!("bottleneck.aqm.{e}")))?;
        let limit = PhysicalLimit { packets: cfg.bottleneck.buffer_packets, bytes: cfg.bottleneck.buffer_bytes };
        let bottleneck = Bottleneck::new(0, cfg.bottleneck.rate_bps, limit, qdisc);
        let n = cfg.classes.len();
        // PPV and CSAQM need every packet valued before the bottleneck (ppv.elte.hu: the marker
        // requirement): a marker hop at the head of each forward route, equal sharing unless
        // the config says otherwise.
        let marker_cfg = cfg.bottleneck.aqm.reads_packet_values().then(|| cfg.marker.clone().unwrap_or_default());
        let mut fwd_lines = Vec::new();
        let mut rev_lines = Vec::new();
        let mut fwd_routes = Vec::new();
        let mut rev_routes = Vec::new();
        for (c, class) in cfg.classes.iter().enumerate() {
            let fwd = class.rtt_ns / 2;
            fwd_lines.push(DelayLine::new(c as u32, fwd));
            rev_lines.push(DelayLine::new((n + c) as u32, class.rtt_ns - fwd));
            let mut route = vec![Hop::Bottleneck(0), Hop::Line(c as u32), Hop::Host];
            if marker_cfg.is_some() {
                route.insert(0, Hop::Marker);
            }
            // Linux hosts: the sender's NIC first (the marker sits at the network's edge,
            // after it), and the NAPI poll (GRO) in front of the receiver.
            if !cfg.host.ideal {
                route.insert(0, Hop::Nic);
                let last = route.len() - 1;
                route[last] = Hop::Gro;
            }
            fwd_routes.push(route);
            rev_routes.push(vec![Hop::Line((n + c) as u32), Hop::Host]);
        }
        // Every flow's plan (class, start, stop, size) — the one definition of the draws,
        // shared with the emulator (`flow_plan`). Drawn before any flow is built so `flows` is
        // allocated once at its final size (a growing vector of a workload's thousands of
        // flows would copy them each time it doubles).
        let plan = flow_plan(&cfg)?;
        let mut flows = Vec::new();
        reserve(&mut flows, plan.len(), "the flows")?;
        for PlannedFlow { class: c, start_ns, stop_ns, size_bytes } in plan {
            let class = &cfg.classes[c];
            let id = flows.len() as u32;
            let scfg = SenderConfig {
                flow: id,
                size_bytes,
                ecn: class.ecn,
                fq_pacing: class.fq_pacing,
                handshake_rtt_ns: class.rtt_ns,
                // With offloads off too: TCP sockets always build GSO skbs (HostConfig::offloads).
                tso: (!cfg.host.ideal).then_some(TsoConfig {
                    gso_max_bytes: cfg.host.gso_max_bytes as u64,
                    pacing_shift: cfg.host.pacing_shift,
                    min_tso_segs: cfg.host.min_tso_segs,
                }),
            };
            let (sender, receiver) = match (&class.cc, class.cbr_rate_bps) {
                (Some(cc), _) => {
                    let sender = Sender::new(&scfg, cc.build(derive_seed(cfg.seed, SEED_CC.wrapping_add(id as u64))));
                    let feedback = if !sender.ecn_ok() {
                        EcnFeedback::Off
                    } else {
                        match sender.ecn_use() {
                            crate::cc::EcnUse::Classic => EcnFeedback::Classic,
                            crate::cc::EcnUse::Dctcp | crate::cc::EcnUse::WantsCeEvents => EcnFeedback::Dctcp,
                            crate::cc::EcnUse::L4s => EcnFeedback::Accurate,
                        }
                    };
                    (AnySender::Tcp(sender), Receiver::new(id, feedback, size_bytes, class.rtt_ns))
                }
                (None, Some(rate)) => (AnySender::Cbr(CbrSender::new(&scfg, rate)), Receiver::new_cbr(id, size_bytes, class.rtt_ns)),
                (None, None) => unreachable!("checked by EngineConfig::check"),
            };
            flows.push(Flow { class: c, start_ns, stop_ns, size_bytes, sender, receiver });
        }
        let mut markers = Vec::new();
        if let Some(m) = &marker_cfg {
            reserve(&mut markers, flows.len(), "the packet-value markers")?;
            markers.extend(flows.iter().enumerate().map(|(id, f)| {
                let rng = aqm::rng_from_seed(derive_seed(cfg.seed, SEED_MARKER.wrapping_add(id as u64)));
                FlowMarker::new(m.tvf(f.class), m.rate_window_ns, rng)
            }));
        }
        let fm = filled(flows.len(), FlowMeasure::default(), "the flows' measurements")?;
        let h = &cfg.host;
        let offloads = if !h.ideal {
            let (mut nics, mut gros) = (Vec::new(), Vec::new());
            reserve(&mut nics, flows.len(), "the senders' NICs")?;
            reserve(&mut gros, flows.len(), "the receivers' GRO state")?;
            nics.extend((0..flows.len()).map(|i| Nic::new(h.nic_rate_bps, h.jitter_ns, aqm::rng_from_seed(derive_seed(cfg.seed, SEED_HOST.wrapping_add(i as u64))))));
            // Without offloads the NIC still interrupts at most once per rx-usecs and each
            // poll hands TCP its packets one skb at a time (a GRO limit of one packet), so
            // the receiver makes one ACK decision per packet, as Linux's per-skb
            // `__tcp_ack_snd_check`.
            let gro_max = h.gro_limit(crate::packet::MTU_BYTES);
            gros.extend((0..flows.len()).map(|_| Gro::new(h.rx_coalesce_ns, gro_max)));
            Some(Offloads { nics, gros, units: Vec::new(), gro_packets: 0 })
        } else {
            None
        };
        let stalls = Stalls::new(h.stall_ns, h.stall_every_ns, cfg.duration_ns, &mut aqm::rng_from_seed(derive_seed(cfg.seed, SEED_STALLS)));
        Ok(World {
            cfg,
            sched: Scheduler::new(),
            bottleneck,
            fwd_lines,
            rev_lines,
            fwd_routes,
            rev_routes,
            flows,
            markers,
            fm,
            qm: QueueMeasure::default(),
            dropped_total: 0,
            samples: Vec::new(),
            queue_samples: Vec::new(),
            data_buf: Vec::with_capacity(64),
            ack_buf: Vec::with_capacity(8),
            bottleneck_pkts: 0,
            offloads,
            stalls,
            start_order: Vec::new(),
            next_start: 0,
            sampled: Vec::new(),
            sample_order: Vec::new(),
            next_sampled: 0,
        })
    }

    #[inline]
    fn in_window(&self) -> bool {
        self.sched.now() >= self.cfg.warmup_ns
    }

    /// Run to the end of the scenario. `progress` gets the fraction of simulated time done,
    /// now and then; returning false stops the run.
    pub fn run(mut self, progress: &mut dyn FnMut(f64) -> bool) -> Result<RunResult, RunError> {
        // Every stop is scheduled first, so that it runs before anything else due at the same
        // instant (events at one time run in scheduling order): a CBR datagram or an ACK at
        // exactly the stop time finds the application already stopped. Scheduled flows are
        // few (a workload has no stops), so these entries cost the heap little.
        for (f, flow) in self.flows.iter().enumerate() {
            if let Some(t) = flow.stop_ns.filter(|&t| t < self.cfg.duration_ns) {
                self.sched.schedule(t, Event::FlowStop(f as u32));
            }
        }
        // One pending start at a time (a workload has thousands of flows: keep the event heap
        // small); flows starting at the same instant start together, in flow order.
        reserve(&mut self.start_order, self.flows.len(), "the start order")?;
        self.start_order.extend((0..self.flows.len() as u32).filter(|&f| self.flows[f as usize].start_ns < self.cfg.duration_ns));
        self.start_order.sort_by_key(|&f| (self.flows[f as usize].start_ns, f));
        if let Some(&f) = self.start_order.first() {
            self.sched.schedule(self.flows[f as usize].start_ns, Event::FlowStart(f));
        }
        reserve(&mut self.sample_order, self.flows.len(), "the sample order")?;
        self.sample_order.extend(0..self.flows.len() as u32);
        self.sample_order.sort_by_key(|&f| (self.flows[f as usize].start_ns, f));
        if self.cfg.measure.interval_ns > 0 && self.cfg.measure.interval_ns <= self.cfg.duration_ns {
            self.sched.schedule(self.cfg.measure.interval_ns, Event::Sample);
        }
        let end = self.cfg.duration_ns;
        // Check progress every 2^16 events (a few ms of wall time).
        let mut tick: u32 = 0;
        let mut warmup_done = false;
        while let Some((now, ev)) = self.sched.pop_until(end) {
            if !warmup_done && now >= self.cfg.warmup_ns {
                self.mark_window_start();
                warmup_done = true;
            }
            match ev {
                Event::Sample => self.on_sample()?,
                ev => self.dispatch(ev),
            }
            tick = tick.wrapping_add(1);
            if tick & 0xFFFF == 0 && !progress(now as f64 / end as f64) {
                return Err(RunError::Interrupted);
            }
        }
        self.sched.advance_to(end);
        if !warmup_done {
            self.mark_window_start();
        }
        progress(1.0);
        Ok(link::collect(self.into_record()?))
    }

    fn mark_window_start(&mut self) {
        for (f, flow) in self.flows.iter().enumerate() {
            self.fm[f].delivered_at_warmup = Some(flow.receiver.delivered_bytes);
        }
    }

    fn dispatch(&mut self, ev: Event) {
        // A host's timers and its NAPI poll wait out a stall of its CPU (`[host] stall`); what
        // reaches a host in one is held by the delay line that brings it (`DelayLine::push`).
        // Not held (a simplification, docs/model.md "Host stalls"): the NIC's transmit
        // completions, which resume a flow held by TSQ, and the applications' starts and stops.
        if let Event::PacingTimer(_) | Event::SenderTimer(_) | Event::AckTimer(_) | Event::CompSackTimer(_) | Event::GroPoll(_) = ev {
            let now = self.sched.now();
            let at = self.stalls.release(now);
            if at != now {
                self.sched.schedule(at, ev);
                return;
            }
        }
        match ev {
            Event::FlowStart(_) => {
                let now = self.sched.now();
                while let Some(&f) = self.start_order.get(self.next_start) {
                    if self.flows[f as usize].start_ns != now {
                        self.sched.schedule(self.flows[f as usize].start_ns, Event::FlowStart(f));
                        break;
                    }
                    self.next_start += 1;
                    let mut out = std::mem::take(&mut self.data_buf);
                    self.flows[f as usize].sender.start(&mut self.sched, &mut out);
                    self.route_data_batch(&mut out);
                    self.data_buf = out;
                }
            }
            Event::FlowStop(f) => {
                let now = self.sched.now();
                self.flows[f as usize].sender.stop_writing(now);
            }
            Event::LinkTxDone(_) => {
                let (start, end) = (self.bottleneck.tx_start_ns, self.bottleneck.tx_end_ns);
                let mut pkt = self.bottleneck.finish_tx();
                self.qm.record_tx(pkt.wire_len, start, end, self.cfg.warmup_ns, self.cfg.duration_ns);
                self.qm.record_tx_interval(pkt.wire_len, start, end);
                pkt.hop += 1;
                self.route_data(pkt);
                self.start_tx();
            }
            Event::DelayLineHead(id) => {
                let n = self.fwd_lines.len();
                let id = id as usize;
                let now = self.sched.now();
                if id < n {
                    self.fwd_lines[id].on_head_event();
                    while let Some(mut p) = self.fwd_lines[id].pop_due(now) {
                        p.hop += 1;
                        self.route_data(p);
                    }
                    self.fwd_lines[id].reschedule(&mut self.sched);
                } else {
                    let k = id - n;
                    self.rev_lines[k].on_head_event();
                    while let Some(mut a) = self.rev_lines[k].pop_due(now) {
                        a.hop += 1;
                        self.route_ack(a);
                    }
                    self.rev_lines[k].reschedule(&mut self.sched);
                }
            }
            Event::SenderTimer(f) => {
                let mut out = std::mem::take(&mut self.data_buf);
                self.flows[f as usize].sender.on_xmit_timer(&mut self.sched, &mut out);
                self.route_data_batch(&mut out);
                self.data_buf = out;
            }
            Event::PacingTimer(f) => {
                let mut out = std::mem::take(&mut self.data_buf);
                self.flows[f as usize].sender.on_pacing_timer(&mut self.sched, &mut out);
                self.route_data_batch(&mut out);
                self.data_buf = out;
            }
            Event::AckTimer(f) => {
                let mut out = std::mem::take(&mut self.ack_buf);
                self.flows[f as usize].receiver.on_delack_timer(&mut self.sched, &mut out);
                self.route_ack_batch(&mut out);
                self.ack_buf = out;
            }
            Event::CompSackTimer(f) => {
                let mut out = std::mem::take(&mut self.ack_buf);
                self.flows[f as usize].receiver.on_comp_sack_timer(&mut self.sched, &mut out);
                self.route_ack_batch(&mut out);
                self.ack_buf = out;
            }
            Event::Sample => unreachable!("run by World::on_sample"),
            Event::NicTxDone(f) => {
                let now = self.sched.now();
                let off = self.offloads.as_mut().expect("NIC event with ideal hosts");
                let (mut pkt, next) = off.nics[f as usize].finish(now);
                if let Some(at) = next {
                    self.sched.schedule(at, Event::NicTxDone(f));
                }
                let wire_len = pkt.wire_len;
                pkt.hop += 1;
                self.route_data(pkt);
                let mut out = std::mem::take(&mut self.data_buf);
                self.flows[f as usize].sender.on_nic_departure(wire_len, &mut self.sched, &mut out);
                self.route_data_batch(&mut out);
                self.data_buf = out;
            }
            Event::GroPoll(f) => {
                let now = self.sched.now();
                let off = self.offloads.as_mut().expect("GRO event with ideal hosts");
                let mut acks = std::mem::take(&mut self.ack_buf);
                let gro = &mut off.gros[f as usize];
                let pkts = gro.poll(now, &mut off.units);
                let receiver = &mut self.flows[f as usize].receiver;
                for r in off.units.iter() {
                    receiver.on_gro(&pkts[r.clone()], &mut self.sched, &mut acks);
                }
                off.gro_packets += off.units.len() as u64;
                gro.done();
                self.route_ack_batch(&mut acks);
                self.ack_buf = acks;
            }
        }
    }

    /// Take a time-series sample and schedule the next; the time series is the run's largest
    /// table, so its growth fails as an error, not an abort.
    fn on_sample(&mut self) -> Result<(), RunError> {
        self.take_sample()?;
        let next = self.sched.now() + self.cfg.measure.interval_ns;
        if next <= self.cfg.duration_ns {
            self.sched.schedule(next, Event::Sample);
        }
        Ok(())
    }

    fn route_data_batch(&mut self, out: &mut Vec<DataPkt>) {
        for p in out.drain(..) {
            self.route_data(p);
        }
    }

    fn route_ack_batch(&mut self, out: &mut Vec<AckPkt>) {
        for a in out.drain(..) {
            self.route_ack(a);
        }
    }

    /// Hand a data packet to the hop its route names next.
    fn route_data(&mut self, mut pkt: DataPkt) {
        let class = self.flows[pkt.flow as usize].class;
        // The marker is the first hop after the sender host (see `World::new`): mark and go on
        // in place.
        if let Hop::Marker = self.fwd_routes[class][pkt.hop as usize] {
            pkt.value = self.markers[pkt.flow as usize].value_for(pkt.wire_len, self.sched.now());
            pkt.hop += 1;
        }
        match self.fwd_routes[class][pkt.hop as usize] {
            Hop::Marker => unreachable!("one marker per route, its first hop"),
            Hop::Bottleneck(_) => {
                let in_window = self.in_window();
                if in_window {
                    let f = &mut self.fm[pkt.flow as usize];
                    f.arrived_bytes += pkt.wire_len as u64;
                    f.arrived_pkts += 1;
                }
                let now = self.sched.now();
                let mut sink = Sink { flows: &mut self.fm, queue: &mut self.qm, in_window, dropped_total: &mut self.dropped_total };
                self.bottleneck.arrive(pkt, now, &mut sink);
                self.start_tx();
            }
            Hop::Line(l) => self.fwd_lines[l as usize].push(&mut self.sched, pkt, &self.stalls),
            Hop::Nic => {
                let now = self.sched.now();
                let nic = &mut self.offloads.as_mut().expect("a NIC hop with ideal hosts").nics[pkt.flow as usize];
                if let Some(at) = nic.push(pkt, now) {
                    self.sched.schedule(at, Event::NicTxDone(pkt.flow));
                }
            }
            Hop::Gro => {
                let now = self.sched.now();
                let gro = &mut self.offloads.as_mut().expect("a GRO hop with ideal hosts").gros[pkt.flow as usize];
                if let Some(at) = gro.arrive(pkt, now) {
                    self.sched.schedule(at, Event::GroPoll(pkt.flow));
                }
            }
            Hop::Host => {
                let mut acks = std::mem::take(&mut self.ack_buf);
                self.flows[pkt.flow as usize].receiver.on_data(&pkt, &mut self.sched, &mut acks);
                self.route_ack_batch(&mut acks);
                self.ack_buf = acks;
            }
        }
    }

    fn route_ack(&mut self, ack: AckPkt) {
        let class = self.flows[ack.flow as usize].class;
        match self.rev_routes[class][ack.hop as usize] {
            Hop::Line(l) => {
                let n = self.fwd_lines.len();
                self.rev_lines[l as usize - n].push(&mut self.sched, ack, &self.stalls);
            }
            Hop::Host => {
                let mut out = std::mem::take(&mut self.data_buf);
                self.flows[ack.flow as usize].sender.on_ack(&ack, &mut self.sched, &mut out);
                self.route_data_batch(&mut out);
                self.data_buf = out;
            }
            Hop::Bottleneck(_) | Hop::Marker | Hop::Nic | Hop::Gro => unreachable!("no reverse-path bottleneck, marker or offload in this topology"),
        }
    }

    /// If the link is idle, start the next transmission.
    fn start_tx(&mut self) {
        if self.bottleneck.is_busy() {
            return;
        }
        let in_window = self.in_window();
        let mut sink = Sink { flows: &mut self.fm, queue: &mut self.qm, in_window, dropped_total: &mut self.dropped_total };
        if let Some(p) = self.bottleneck.try_start(&mut self.sched, &mut sink) {
            let sojourn = self.sched.now() - p.enqueue_ns;
            self.qm.record_sojourn(sojourn, in_window);
            if in_window {
                let m = &mut self.fm[p.flow as usize];
                m.sojourn_sum_ns += sojourn as u128;
                m.sojourn_count += 1;
            }
            self.bottleneck_pkts += 1;
        }
    }

    fn take_sample(&mut self) -> Result<(), RunError> {
        let now = self.sched.now();
        let iv = self.cfg.measure.interval_ns;
        // Only flows under way: not yet started, or completed before this interval, have
        // nothing to show (and a workload has thousands of them).
        // A stopped flow likewise once its sender is done (its last data acknowledged).
        while let Some(&f) = self.sample_order.get(self.next_sampled) {
            if self.flows[f as usize].start_ns > now {
                break;
            }
            let at = self.sampled.partition_point(|&g| g < f);
            self.sampled.insert(at, f);
            self.next_sampled += 1;
        }
        let flows = &self.flows;
        self.sampled.retain(|&f| {
            let flow = &flows[f as usize];
            !(flow.receiver.completed_at.is_some_and(|t| t + iv <= now)
                || (flow.stop_ns.is_some() && flow.sender.finished_at.is_some_and(|t| t + iv <= now)))
        });
        if self.samples.capacity() - self.samples.len() < self.sampled.len() {
            let grow = self.sampled.len().max(self.samples.len());
            self.samples.try_reserve(grow).map_err(|_| RunError::OutOfMemory(format!("cannot grow the time series beyond {} rows", self.samples.len())))?;
        }
        if self.queue_samples.len() == self.queue_samples.capacity() {
            self.queue_samples.try_reserve(self.queue_samples.len().max(64)).map_err(|_| RunError::OutOfMemory("cannot grow the queue table".into()))?;
        }
        for &f in &self.sampled {
            let (f, flow) = (f as usize, &self.flows[f as usize]);
            let d = flow.receiver.delivered_bytes;
            let prev = self.fm[f].delivered_at_last_sample;
            self.fm[f].delivered_at_last_sample = d;
            let s = flow.sender.sample();
            self.samples.push(SampleRow {
                t_ns: now,
                flow: f as u32,
                class: flow.class as u32,
                throughput_bps: (d - prev) as f64 * 8e9 / iv as f64,
                cwnd: s.cwnd,
                ssthresh: s.ssthresh,
                inflight: s.inflight,
                srtt_us: s.srtt_us,
                pacing_rate_bps: s.pacing_rate as f64 * 8.0,
                ca_state: s.ca_state,
                cc: s.cc,
            });
        }
        let in_tx = self.bottleneck.in_tx().map(|p| (p.wire_len, self.bottleneck.tx_start_ns, self.bottleneck.tx_end_ns));
        let (sum, cnt, max, link, drops, marks) = self.qm.take_interval(now, in_tx);
        self.queue_samples.push(crate::results::QueueRow {
            t_ns: now,
            qlen_pkts: self.bottleneck.qdisc.len() as u64,
            backlog_bytes: self.bottleneck.qdisc.backlog_bytes(),
            sojourn_mean_ns: if cnt > 0 { Some(sum as f64 / cnt as f64) } else { None },
            sojourn_max_ns: if cnt > 0 { Some(max) } else { None },
            link_bytes: link,
            drops,
            marks,
        });
        Ok(())
    }

    /// The run's records, for the summary and tables ([`link::collect`]). The packets still
    /// in the network are counted per flow (for the conservation identity sent = received +
    /// dropped + in network), and the part of a transmission in progress that falls inside
    /// the window is credited to the link. Fails when the records cannot be allocated.
    pub fn into_record(mut self) -> Result<RunRecord, RunError> {
        let cfg = &self.cfg;
        let mut in_network = filled(self.flows.len(), 0u64, "the flows' records")?;
        for p in self.bottleneck.qdisc.reset() {
            in_network[p.flow as usize] += 1;
        }
        if let Some(p) = self.bottleneck.in_tx() {
            in_network[p.flow as usize] += 1;
            let (s, e, len) = (self.bottleneck.tx_start_ns, self.bottleneck.tx_end_ns, p.wire_len);
            self.qm.record_tx(len, s, e, cfg.warmup_ns, cfg.duration_ns);
        }
        for line in &self.fwd_lines {
            for p in line.iter() {
                in_network[p.flow as usize] += 1;
            }
        }
        if let Some(off) = &self.offloads {
            for p in off.nics.iter().flat_map(|n| n.iter()).chain(off.gros.iter().flat_map(|g| g.iter())) {
                in_network[p.flow as usize] += 1;
            }
        }
        let mut flows: Vec<FlowRecord> = Vec::new();
        reserve(&mut flows, self.flows.len(), "the flows table")?;
        flows.extend(self.flows.iter().enumerate().map(|(f, flow)| {
                let m = &self.fm[f];
                let st = &flow.sender.stats;
                FlowRecord {
                    class: flow.class,
                    cc: flow.sender.kind_name().to_string(),
                    start_ns: flow.start_ns,
                    stop_ns: flow.stop_ns,
                    size_bytes: flow.size_bytes,
                    delivered_bytes: flow.receiver.delivered_bytes - m.delivered_at_warmup.unwrap_or(0),
                    arrived_bytes: m.arrived_bytes,
                    dropped_bytes: m.dropped_bytes,
                    marked_bytes: m.marked_bytes,
                    drops: m.drops,
                    marks: m.marks,
                    segs_sent: Some(st.segs_sent),
                    wire_bytes_sent: Some(st.wire_bytes_sent),
                    retrans_segs: Some(st.retrans_segs),
                    rto_count: Some(st.rto_count),
                    tlp_count: Some(st.tlp_count),
                    recoveries: Some(st.recoveries),
                    cwr_count: Some(st.cwr_count),
                    segs_received: Some(flow.receiver.segs_received),
                    total_dropped_pkts: Some(m.total_dropped_pkts),
                    total_marked_pkts: Some(m.total_marked_pkts),
                    end_in_network_pkts: Some(in_network[f]),
                    fct_s: flow.sender.finished_at.map(|t| (t - flow.start_ns) as f64 / 1e9),
                }
            }));
        let classes = cfg
            .classes
            .iter()
            .enumerate()
            .map(|(c, class)| {
                let idx: Vec<usize> = (0..flows.len()).filter(|&f| flows[f].class == c).collect();
                // A class without flows (a workload with no arrival) shows the first flow's CC.
                let cc = flows.get(*idx.first().unwrap_or(&0)).map(|f| f.cc.clone()).unwrap_or_default();
                ClassRecord {
                    name: class.name.clone(),
                    cc,
                    rtt_ns: class.rtt_ns,
                    workload: class.workload.is_some(),
                    sojourn_sum_ns: idx.iter().map(|&f| self.fm[f].sojourn_sum_ns).sum(),
                    sojourn_count: idx.iter().map(|&f| self.fm[f].sojourn_count).sum(),
                }
            })
            .collect();
        let rows = std::mem::take(&mut self.samples);
        let mut samples: Vec<SampleRecord> = Vec::new();
        reserve(&mut samples, rows.len(), "the time series")?;
        samples.extend(rows.into_iter().map(|r| SampleRecord {
                t_ns: r.t_ns,
                flow: r.flow as u64,
                class: r.class as usize,
                throughput_bps: Some(r.throughput_bps),
                cwnd: Some(r.cwnd as u64),
                ssthresh: Some(r.ssthresh as u64),
                inflight: Some(r.inflight as u64),
                srtt_ms: Some(r.srtt_us as f64 / 1e3),
                pacing_rate_bps: Some(r.pacing_rate_bps),
                ca_state: Some(r.ca_state.to_string()),
                cc_phase: r.cc.phase.map(str::to_string),
                cc_bw_bps: r.cc.bw_bps,
                inflight_hi: r.cc.inflight_hi.map(f64::from),
                cc_alpha: r.cc.alpha,
            }));
        let mut counters = serde_json::Map::new();
        counters.insert("events".into(), self.sched.events_run.into());
        counters.insert("bottleneck_pkts".into(), self.bottleneck_pkts.into());
        counters.insert("dropped_pkts".into(), self.dropped_total.into());
        // Linux hosts: how many GRO packets the receivers got (every packet without offloads)
        // and how many ACKs they sent (data segments per ACK is the stretch-ACK ratio).
        if let Some(off) = &self.offloads {
            counters.insert("gro_packets".into(), off.gro_packets.into());
            counters.insert("acks_sent".into(), self.flows.iter().map(|f| f.receiver.acks_sent).sum::<u64>().into());
            // The senders' TSO/GSO packets (segments sent per skb is the burst size).
            counters.insert("tso_skbs".into(), self.flows.iter().map(|f| f.sender.stats.tso_skbs).sum::<u64>().into());
        }
        Ok(RunRecord {
            warmup_ns: cfg.warmup_ns,
            duration_ns: cfg.duration_ns,
            rate_bps: cfg.bottleneck.rate_bps,
            delay_target_ns: cfg.bottleneck.delay_target_ns,
            interval_ns: cfg.measure.interval_ns,
            hist_bin_ns: cfg.measure.hist_bin_ns,
            fct_bins_bytes: cfg.measure.fct_bins_bytes.clone(),
            classes,
            flows,
            samples,
            queue_samples: std::mem::take(&mut self.queue_samples),
            sojourn: self.qm.hist(),
            sojourn_sum_ns: self.qm.sojourn_sum_ns,
            sojourn_count: self.qm.sojourn_count,
            link_bytes: self.qm.link_bytes,
            counters,
        })
    }
}
