//! The host side of a running plugin: the queues it holds, the host functions, the calls into
//! the module, and [`PluginQdisc`], the `aqm::Qdisc` the simulator and the router run.

use std::collections::VecDeque;

use aqm::{DropReason, Ecn, MarkReason, Nanos, Packet, Qdisc, Verdicts};
use rand_core::Rng as _;
use wasmtime::{Caller, Linker, Memory, Store, StoreLimits, Trap, TypedFunc};

/// An error a host function returns: the call traps with it.
fn host_error(message: String) -> wasmtime::Error {
    wasmtime::Error::msg(message)
}

use crate::abi::{self, EnqueueVerdict};
use crate::plugin::{read_info, Layout, Linkage, Mem, Plugin, PluginInfo};
use crate::PluginError;

/// One host queue: packets by value, with their byte backlog.
struct HostQueue<P> {
    q: VecDeque<P>,
    bytes: u64,
}

/// A drop or mark a host function performed during a call, handed to the caller's
/// `Verdicts` once the call has returned (the sink is the caller's, borrowed for one call;
/// the host functions cannot hold it). A dropped packet travels with its event; a marked one
/// stays at the head of its queue, unless a later drop in the same call takes it.
enum Event<P> {
    Drop {
        queue: u32,
        pkt: P,
        reason: DropReason,
    },
    Mark {
        queue: u32,
        reason: MarkReason,
    },
}

/// The store's data: everything the host functions touch.
pub(crate) struct Host<P> {
    queues: Vec<HostQueue<P>>,
    len: usize,
    bytes: u64,
    events: VecDeque<Event<P>>,
    rng: aqm::Rng,
    seed: u64,
    classify: fn(&P) -> u32,
    /// Where `aqmlab_queue queues[]` lies in the module's memory.
    mirror: u32,
    /// Queues whose record in the module's memory is stale (written before the next call):
    /// their indices, and per queue 0 (current), 1 (counts stale) or 2 (head stale too).
    dirty: Vec<u32>,
    stale: Vec<u8>,
    memory: Option<Memory>,
    limits: StoreLimits,
    /// While `aqmlab_init` runs (the only call that may set the timer).
    in_init: bool,
    /// The period `aqmlab_set_timer` set, if it was called (0: no timer).
    timer_set: Option<Nanos>,
    /// The packet limit `aqmlab_set_limit` set, if it was called (0: none).
    limit_set: Option<u64>,
}

fn no_class<P>(_: &P) -> u32 {
    0
}

impl<P: Packet> Host<P> {
    fn new(n_queues: u32, seed: u64, mirror: u32, memory_bytes: usize) -> Self {
        Host {
            queues: (0..n_queues)
                .map(|_| HostQueue {
                    q: VecDeque::new(),
                    bytes: 0,
                })
                .collect(),
            len: 0,
            bytes: 0,
            events: VecDeque::new(),
            rng: aqm::rng_from_seed(seed),
            seed,
            classify: no_class::<P>,
            mirror,
            dirty: Vec::new(),
            stale: vec![0; n_queues as usize],
            memory: None,
            limits: crate::plugin::store_limits(memory_bytes),
            in_init: false,
            timer_set: None,
            limit_set: None,
        }
    }

    /// `aqmlab_pkt` for `p`, which joined its queue at `enqueue_ns`.
    #[inline]
    fn write_pkt(&self, out: &mut [u8], p: &P, enqueue_ns: Nanos) {
        use abi::pkt as K;
        out[K::ENQUEUE_NS..K::ENQUEUE_NS + 8].copy_from_slice(&enqueue_ns.to_le_bytes());
        out[K::FLOW_ID..K::FLOW_ID + 8].copy_from_slice(&p.flow_key().to_le_bytes());
        out[K::FLOW_HASH..K::FLOW_HASH + 4]
            .copy_from_slice(&abi::flow_hash(p.flow_key(), self.seed).to_le_bytes());
        out[K::WIRE_LEN..K::WIRE_LEN + 4].copy_from_slice(&p.wire_len().to_le_bytes());
        out[K::VALUE..K::VALUE + 4].copy_from_slice(&p.value().to_le_bytes());
        out[K::TRAFFIC_CLASS..K::TRAFFIC_CLASS + 4]
            .copy_from_slice(&(self.classify)(p).to_le_bytes());
        out[K::ECN..abi::pkt::SIZE].fill(0);
        out[K::ECN] = abi::ecn_code(p.ecn());
    }

    /// Queue `q`'s record in the module's memory: counts, and the head if `head`.
    #[inline]
    fn write_queue(&self, data: &mut [u8], q: usize, head: bool) {
        use abi::queue as Q;
        let hq = &self.queues[q];
        let at = self.mirror as usize + q * Q::SIZE;
        let rec = &mut data[at..at + Q::SIZE];
        rec[Q::BACKLOG_BYTES..Q::BACKLOG_BYTES + 8].copy_from_slice(&hq.bytes.to_le_bytes());
        rec[Q::LEN..Q::LEN + 4].copy_from_slice(&(hq.q.len() as u32).to_le_bytes());
        if head {
            match hq.q.front() {
                Some(p) => self.write_pkt(&mut rec[Q::HEAD..], p, p.enqueue_ns()),
                None => rec[Q::HEAD..].fill(0),
            }
        }
    }

    /// Note that queue `q`'s record (and its head's, if `head`) must be rewritten.
    #[inline]
    fn touch(&mut self, q: usize, head: bool) {
        let stale = &mut self.stale[q];
        if *stale == 0 {
            self.dirty.push(q as u32);
        }
        *stale = (*stale).max(1 + head as u8);
    }

    /// Bring the stale records up to date: before every call into the module.
    #[inline]
    fn flush(&mut self, data: &mut [u8]) {
        for i in 0..self.dirty.len() {
            let q = self.dirty[i] as usize;
            self.write_queue(data, q, self.stale[q] == 2);
            self.stale[q] = 0;
        }
        self.dirty.clear();
    }

    #[inline]
    fn push(&mut self, q: usize, pkt: P) {
        let len = pkt.wire_len() as u64;
        let hq = &mut self.queues[q];
        let was_empty = hq.q.is_empty();
        hq.bytes += len;
        hq.q.push_back(pkt);
        self.len += 1;
        self.bytes += len;
        self.touch(q, was_empty);
    }

    #[inline]
    fn pop(&mut self, q: usize) -> Option<P> {
        let hq = &mut self.queues[q];
        let p = hq.q.pop_front()?;
        let len = p.wire_len() as u64;
        hq.bytes -= len;
        self.len -= 1;
        self.bytes -= len;
        self.touch(q, true);
        Some(p)
    }

    fn queue_index(&self, fun: &str, queue: u32) -> Result<usize, wasmtime::Error> {
        if (queue as usize) < self.queues.len() {
            Ok(queue as usize)
        } else {
            Err(host_error(format!(
                "{fun}({queue}, ...): there is no queue {queue} (aqmlab_qdisc.n_queues = {})",
                self.queues.len()
            )))
        }
    }

    /// `aqmlab_drop_head`.
    fn drop_head(&mut self, data: &mut [u8], queue: u32, code: u32) -> Result<(), wasmtime::Error> {
        let q = self.queue_index("aqmlab_drop_head", queue)?;
        let reason = abi::drop_reason(code).ok_or_else(|| {
            host_error(format!(
                "aqmlab_drop_head({queue}, {code}): {code} is no AQMLAB_DROP_* reason (1..=8)"
            ))
        })?;
        let pkt = self.pop(q).ok_or_else(|| {
            host_error(format!(
                "aqmlab_drop_head({queue}, {code}): queue {queue} is empty"
            ))
        })?;
        // The module reads the new head before the call returns.
        self.write_queue(data, q, true);
        self.events.push_back(Event::Drop { queue, pkt, reason });
        Ok(())
    }

    /// `aqmlab_mark_head`.
    fn mark_head(
        &mut self,
        data: &mut [u8],
        queue: u32,
        code: u32,
    ) -> Result<u32, wasmtime::Error> {
        let q = self.queue_index("aqmlab_mark_head", queue)?;
        let reason = abi::mark_reason(code).ok_or_else(|| {
            host_error(format!(
                "aqmlab_mark_head({queue}, {code}): {code} is no AQMLAB_MARK_* reason (1..=7)"
            ))
        })?;
        let head = self.queues[q].q.front_mut().ok_or_else(|| {
            host_error(format!(
                "aqmlab_mark_head({queue}, {code}): queue {queue} is empty"
            ))
        })?;
        if !head.ecn().is_ect_or_ce() {
            return Ok(0);
        }
        head.set_ce();
        let at = self.mirror as usize + q * abi::queue::SIZE + abi::queue::HEAD + abi::pkt::ECN;
        data[at] = abi::ecn_code(Ecn::Ce);
        self.events.push_back(Event::Mark { queue, reason });
        Ok(1)
    }

    /// The rule of the setters (`aqmlab_set_timer`, `aqmlab_set_limit`): only in `aqmlab_init`.
    fn init_only(&self, function: &str, arg: u64) -> Result<(), wasmtime::Error> {
        match self.in_init {
            true => Ok(()),
            false => Err(host_error(format!(
                "{function}({arg}): allowed only in aqmlab_init"
            ))),
        }
    }

    /// Hand the events of the last call to `out`, in the order they happened.
    #[inline]
    fn replay(&mut self, now: Nanos, out: &mut impl Verdicts<P>) {
        if !self.events.is_empty() {
            self.replay_events(now, out);
        }
    }

    #[inline(never)]
    fn replay_events(&mut self, now: Nanos, out: &mut impl Verdicts<P>) {
        while let Some(ev) = self.events.pop_front() {
            match ev {
                Event::Drop { pkt, reason, .. } => out.dropped(pkt, reason, now),
                Event::Mark { queue, reason } => {
                    // The packet marked is the next one dropped from its queue in this call
                    // if any, else still its queue's head.
                    let later = self.events.iter().find_map(|e| match e {
                        Event::Drop { queue: q, pkt, .. } if *q == queue => Some(pkt),
                        _ => None,
                    });
                    let pkt = later.or_else(|| self.queues[queue as usize].q.front());
                    out.marked(
                        pkt.expect("a marked packet is queued or dropped"),
                        reason,
                        now,
                    );
                }
            }
        }
    }
}

/// The packet type of the instance made at load to read the description: no packet is ever
/// offered to it.
pub(crate) enum Probe {}

impl Packet for Probe {
    fn wire_len(&self) -> u32 {
        match *self {}
    }
    fn ecn(&self) -> Ecn {
        match *self {}
    }
    fn set_ce(&mut self) {
        match *self {}
    }
    fn flow_key(&self) -> u64 {
        match *self {}
    }
    fn enqueue_ns(&self) -> Nanos {
        match *self {}
    }
    fn set_enqueue_ns(&mut self, _: Nanos) {
        match *self {}
    }
}

/// A live instance of a module.
pub(crate) struct Instance<P: 'static> {
    store: Store<Host<P>>,
    memory: Memory,
    init: TypedFunc<(), u32>,
    enqueue: Option<TypedFunc<(u64, u32), u32>>,
    dequeue: Option<TypedFunc<u64, i32>>,
    timer: Option<TypedFunc<u64, ()>>,
}

impl<P: Packet + 'static> Instance<P> {
    /// Instantiate `plugin`'s module with `host` as the store's data.
    fn new(plugin: &Plugin, host: Host<P>) -> Result<(Self, u32), PluginError> {
        let refused = |reason: String| PluginError::Refused {
            module: plugin.name.to_string(),
            reason,
        };
        let mut store = Store::new(&plugin.engine, host);
        store.limiter(|h| &mut h.limits);
        store.set_fuel(plugin.limits.fuel_init).expect("fuel is on");
        let mut linker = <Linker<Host<P>>>::new(&plugin.engine);
        for version in abi::VERSIONS {
            define_host_functions(&mut linker, &abi::import_module(version));
        }
        let instance = linker
            .instantiate(&mut store, &plugin.module)
            .map_err(|e| refused(format!("cannot be instantiated: {e}")))?;
        let memory = instance
            .get_memory(&mut store, abi::MEMORY_EXPORT)
            .expect("checked at load");
        store.data_mut().memory = Some(memory);
        let info_addr = match instance
            .get_global(&mut store, abi::INFO_EXPORT)
            .map(|g| g.get(&mut store))
        {
            Some(wasmtime::Val::I32(a)) => a as u32,
            _ => {
                return Err(refused(format!(
                    "{} is not an i32 global",
                    abi::INFO_EXPORT
                )))
            }
        };
        let typed = |e: wasmtime::Error| refused(format!("export has the wrong type: {e}"));
        let init = instance
            .get_typed_func::<(), u32>(&mut store, abi::INIT.name)
            .map_err(typed)?;
        let enqueue = match plugin.info.has_enqueue {
            true => Some(
                instance
                    .get_typed_func::<(u64, u32), u32>(&mut store, abi::ENQUEUE.name)
                    .map_err(typed)?,
            ),
            false => None,
        };
        let dequeue = match plugin.info.has_dequeue {
            true => Some(
                instance
                    .get_typed_func::<u64, i32>(&mut store, abi::DEQUEUE.name)
                    .map_err(typed)?,
            ),
            false => None,
        };
        let timer = match plugin.has_timer {
            true => Some(
                instance
                    .get_typed_func::<u64, ()>(&mut store, abi::TIMER.name)
                    .map_err(typed)?,
            ),
            false => None,
        };
        Ok((
            Instance {
                store,
                memory,
                init,
                enqueue,
                dequeue,
                timer,
            },
            info_addr,
        ))
    }
}

/// The host functions, under `module` (the import module of one ABI version: each version's
/// functions are the same, v2 adds `set_timer` and `set_limit`).
fn define_host_functions<P: Packet + 'static>(linker: &mut Linker<Host<P>>, module: &str) {
    linker
        .func_wrap(
            module,
            "drop_head",
            |mut caller: Caller<'_, Host<P>>, queue: u32, reason: u32| {
                let memory = caller.data().memory.expect("set at instantiation");
                let (data, host) = memory.data_and_store_mut(&mut caller);
                host.drop_head(data, queue, reason)
            },
        )
        .and_then(|l| {
            l.func_wrap(
                module,
                "mark_head",
                |mut caller: Caller<'_, Host<P>>, queue: u32, reason: u32| {
                    let memory = caller.data().memory.expect("set at instantiation");
                    let (data, host) = memory.data_and_store_mut(&mut caller);
                    host.mark_head(data, queue, reason)
                },
            )
        })
        .and_then(|l| {
            l.func_wrap(
                module,
                "random_u64",
                |mut caller: Caller<'_, Host<P>>| -> u64 { caller.data_mut().rng.next_u64() },
            )
        })
        .and_then(|l| {
            l.func_wrap(
                module,
                "set_timer",
                |mut caller: Caller<'_, Host<P>>, period_ns: u64| {
                    let host = caller.data_mut();
                    host.init_only("aqmlab_set_timer", period_ns)?;
                    host.timer_set = Some(period_ns);
                    Ok(())
                },
            )
        })
        .and_then(|l| {
            l.func_wrap(
                module,
                "set_limit",
                |mut caller: Caller<'_, Host<P>>, packets: u64| {
                    let host = caller.data_mut();
                    host.init_only("aqmlab_set_limit", packets)?;
                    host.limit_set = Some(packets);
                    Ok(())
                },
            )
        })
        .expect("the ABI's host functions are defined once per import module");
}

impl Instance<Probe> {
    /// Read the module's description (at load).
    pub(crate) fn describe(
        plugin: &Plugin,
        import_version: Option<u32>,
    ) -> Result<PluginInfo, PluginError> {
        let host = Host::<Probe>::new(1, 0, 0, plugin.limits.memory_bytes);
        let (inst, addr) = Instance::new(plugin, host)?;
        let mem = Mem(inst.memory.data(&inst.store));
        let link = Linkage {
            has_enqueue: plugin.info.has_enqueue,
            has_dequeue: plugin.info.has_dequeue,
            has_timer: plugin.has_timer,
            sets_timer: plugin.info.sets_timer,
            import_version,
        };
        read_info(mem, addr, link).map_err(|reason| PluginError::Refused {
            module: plugin.name.to_string(),
            reason,
        })
    }
}

/// A plugin as a queue discipline: the module's instance and the queues the host holds for
/// it. Built by [`Plugin::build`]; runs like a built-in through [`aqm::Qdisc`].
///
/// A call into the module that fails (a trap, the fuel limit, the memory cap, a broken ABI
/// rule) cannot be returned through `Qdisc`: the discipline records the first such error
/// ([`PluginQdisc::error`]) and from then on drops every arrival (`Overflow`) and sends
/// nothing. The caller must check `error()` (cheap) after each call or at least at the end of
/// the run, and fail the run with it; [`PluginQdisc::try_enqueue`] and
/// [`PluginQdisc::try_dequeue`] return it directly.
pub struct PluginQdisc<P: 'static> {
    plugin: Plugin,
    values: Vec<f64>,
    inst: Instance<P>,
    layout: Layout,
    fuel: u64,
    timer_ns: Nanos,
    /// The next timer tick, if the plugin has a timer.
    next_tick: Option<Nanos>,
    /// The packet limit `aqmlab_set_limit` set (`u64::MAX`: none).
    limit: u64,
    error: Option<PluginError>,
}

impl<P: Packet + 'static> PluginQdisc<P> {
    /// A fresh instance of `plugin` with `options` (by name), seeded by `seed`.
    pub fn new(plugin: &Plugin, options: &[(&str, f64)], seed: u64) -> Result<Self, PluginError> {
        let values = plugin.option_values(options)?;
        let info = plugin.info();
        let host = Host::new(
            info.n_queues,
            seed,
            info.layout.queues,
            plugin.limits.memory_bytes,
        );
        let inst = Self::start(plugin, &values, host)?;
        let period = inst.store.data().timer_set.or(info.timer_ns).unwrap_or(0);
        let limit = match inst.store.data().limit_set {
            None | Some(0) => u64::MAX,
            Some(n) => n,
        };
        Ok(PluginQdisc {
            plugin: plugin.clone(),
            values,
            inst,
            layout: info.layout,
            fuel: plugin.limits.fuel_per_call,
            timer_ns: period,
            next_tick: (period > 0).then_some(period),
            limit,
            error: None,
        })
    }

    /// Instantiate, write the option values, run `aqmlab_init`.
    fn start(plugin: &Plugin, values: &[f64], host: Host<P>) -> Result<Instance<P>, PluginError> {
        let (mut inst, addr) = Instance::new(plugin, host)?;
        let layout = plugin.info.layout;
        if addr != layout.info {
            return Err(PluginError::Refused {
                module: plugin.name.to_string(),
                reason: "its description moved between two instances".into(),
            });
        }
        let (data, host) = inst.memory.data_and_store_mut(&mut inst.store);
        for (i, v) in values.iter().enumerate() {
            let at = layout.option_values as usize + 8 * i;
            data[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
        // The queues' records (non-empty after a reset would be a bug: reset drains them).
        for q in 0..host.queues.len() {
            host.write_queue(data, q, true);
        }
        let call = |e| call_error(plugin, abi::INIT.name, 0, e);
        host.in_init = true;
        let msg = inst.init.call(&mut inst.store, ());
        inst.store.data_mut().in_init = false;
        let msg = msg.map_err(call)?;
        if msg != 0 {
            let message = Mem(inst.memory.data(&inst.store))
                .str(msg)
                .unwrap_or_else(|e| format!("aqmlab_init refused the options ({e})"));
            return Err(PluginError::Options {
                module: plugin.name.to_string(),
                message,
            });
        }
        Ok(inst)
    }

    /// Classify packets into `aqmlab_pkt.traffic_class` (default: every packet is class 0).
    pub fn with_classifier(mut self, classify: fn(&P) -> u32) -> Self {
        self.inst.store.data_mut().classify = classify;
        self
    }

    pub fn plugin(&self) -> &Plugin {
        &self.plugin
    }

    pub fn info(&self) -> &PluginInfo {
        self.plugin.info()
    }

    /// The option values the instance runs with, in declaration order (NaN: unset).
    pub fn option_values(&self) -> &[f64] {
        &self.values
    }

    /// The first failed call, if any: the run must fail with it.
    pub fn error(&self) -> Option<&PluginError> {
        self.error.as_ref()
    }

    /// Packets in queue `q`.
    pub fn queue_len(&self, q: usize) -> usize {
        self.inst
            .store
            .data()
            .queues
            .get(q)
            .map_or(0, |q| q.q.len())
    }

    fn fail(&mut self, e: PluginError) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }

    fn call_error(&self, function: &'static str, now: Nanos, e: wasmtime::Error) -> PluginError {
        call_error(&self.plugin, function, now, e)
    }

    fn protocol_error(&self, function: &'static str, now: Nanos, reason: String) -> PluginError {
        PluginError::Call {
            module: self.plugin.name.to_string(),
            function,
            now,
            reason,
        }
    }

    /// Every timer tick due at `now`, in order.
    #[inline(always)]
    fn run_timer(&mut self, now: Nanos, out: &mut impl Verdicts<P>) -> Result<(), PluginError> {
        match self.next_tick {
            Some(t) if t <= now => self.run_ticks(now, out),
            _ => Ok(()),
        }
    }

    #[inline(never)]
    fn run_ticks(&mut self, now: Nanos, out: &mut impl Verdicts<P>) -> Result<(), PluginError> {
        while let Some(t) = self.next_tick.filter(|&t| t <= now) {
            let inst = &mut self.inst;
            let timer = inst
                .timer
                .as_ref()
                .expect("a timer period implies aqmlab_timer");
            let (data, host) = inst.memory.data_and_store_mut(&mut inst.store);
            host.flush(data);
            inst.store.set_fuel(self.fuel).expect("fuel is on");
            let r = timer.call(&mut inst.store, t);
            inst.store.data_mut().replay(t, out);
            r.map_err(|e| self.call_error(abi::TIMER.name, t, e))?;
            self.next_tick = Some(t + self.timer_ns);
        }
        Ok(())
    }

    /// [`Qdisc::enqueue`], returning a failed call's error (the arrival is then dropped as
    /// `Overflow`, so that every packet stays accounted for).
    pub fn try_enqueue(
        &mut self,
        mut pkt: P,
        now: Nanos,
        out: &mut impl Verdicts<P>,
    ) -> Result<(), PluginError> {
        if let Some(e) = &self.error {
            out.dropped(pkt, DropReason::Overflow, now);
            return Err(e.clone());
        }
        if let Err(e) = self.run_timer(now, out) {
            out.dropped(pkt, DropReason::Overflow, now);
            return Err(e);
        }
        if self.inst.store.data().len as u64 >= self.limit {
            out.dropped(pkt, DropReason::Overflow, now);
            return Ok(());
        }
        let Some(enqueue) = self.inst.enqueue.clone() else {
            pkt.set_enqueue_ns(now);
            self.inst.store.data_mut().push(0, pkt);
            return Ok(());
        };
        let arrival = self.layout.arrival;
        {
            let inst = &mut self.inst;
            let (data, host) = inst.memory.data_and_store_mut(&mut inst.store);
            host.flush(data);
            let at = arrival as usize;
            host.write_pkt(&mut data[at..at + abi::pkt::SIZE], &pkt, now);
            inst.store.set_fuel(self.fuel).expect("fuel is on");
        }
        let inst = &mut self.inst;
        let r = enqueue.call(&mut inst.store, (now, arrival));
        inst.store.data_mut().replay(now, out);
        let v = match r {
            Ok(v) => v,
            Err(e) => {
                out.dropped(pkt, DropReason::Overflow, now);
                return Err(self.call_error(abi::ENQUEUE.name, now, e));
            }
        };
        let n_queues = self.plugin.info.n_queues;
        let bad = |why: String| {
            self.protocol_error(abi::ENQUEUE.name, now, format!("returned {v:#010x}: {why}"))
        };
        let queue = match abi::decode_verdict(v) {
            Some(EnqueueVerdict::Drop(reason)) => {
                out.dropped(pkt, reason, now);
                return Ok(());
            }
            Some(EnqueueVerdict::Accept(q)) if q < n_queues => q,
            Some(EnqueueVerdict::Mark(q, reason)) if q < n_queues => {
                if !pkt.ecn().is_ect_or_ce() {
                    let e = bad("AQMLAB_MARK of a Not-ECT packet (drop it instead)".into());
                    out.dropped(pkt, DropReason::Overflow, now);
                    return Err(e);
                }
                pkt.set_ce();
                out.marked(&pkt, reason, now);
                q
            }
            Some(EnqueueVerdict::Accept(q) | EnqueueVerdict::Mark(q, _)) => {
                let e = bad(format!("there is no queue {q} (n_queues = {n_queues})"));
                out.dropped(pkt, DropReason::Overflow, now);
                return Err(e);
            }
            None => {
                let e = bad(
                    "none of AQMLAB_ACCEPT(queue), AQMLAB_MARK(queue, reason), AQMLAB_DROP(reason)"
                        .into(),
                );
                out.dropped(pkt, DropReason::Overflow, now);
                return Err(e);
            }
        };
        pkt.set_enqueue_ns(now);
        self.inst.store.data_mut().push(queue as usize, pkt);
        Ok(())
    }

    /// [`Qdisc::dequeue`], returning a failed call's error.
    pub fn try_dequeue(
        &mut self,
        now: Nanos,
        out: &mut impl Verdicts<P>,
    ) -> Result<Option<P>, PluginError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        self.run_timer(now, out)?;
        let inst = &mut self.inst;
        let Some(dequeue) = &inst.dequeue else {
            return Ok(inst.store.data_mut().pop(0));
        };
        let (data, host) = inst.memory.data_and_store_mut(&mut inst.store);
        host.flush(data);
        inst.store.set_fuel(self.fuel).expect("fuel is on");
        let r = dequeue.call(&mut inst.store, now);
        inst.store.data_mut().replay(now, out);
        let q = r.map_err(|e| self.call_error(abi::DEQUEUE.name, now, e))?;
        if q == abi::DEQUEUE_NONE {
            return Ok(None);
        }
        let n_queues = self.plugin.info.n_queues;
        if q < 0 || q as u32 >= n_queues {
            return Err(self.protocol_error(
                abi::DEQUEUE.name,
                now,
                format!("returned {q}, neither a queue (0..{n_queues}) nor AQMLAB_NONE"),
            ));
        }
        match self.inst.store.data_mut().pop(q as usize) {
            Some(p) => Ok(Some(p)),
            None => Err(self.protocol_error(
                abi::DEQUEUE.name,
                now,
                format!("returned queue {q}, which is empty"),
            )),
        }
    }
}

fn call_error(
    plugin: &Plugin,
    function: &'static str,
    now: Nanos,
    e: wasmtime::Error,
) -> PluginError {
    let root = e.root_cause().to_string();
    let reason = match e.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => format!(
            "stopped after {} units of fuel (the per-call limit; an endless loop?)",
            if function == abi::INIT.name {
                plugin.limits.fuel_init
            } else {
                plugin.limits.fuel_per_call
            }
        ),
        _ if root.contains("growing memory") => format!(
            "tried to grow its memory past the cap of {} KiB",
            plugin.limits.memory_bytes >> 10
        ),
        Some(trap) => format!("trapped: {trap}"),
        // A host function's error (a broken rule of the ABI): its message.
        None => root,
    };
    PluginError::Call {
        module: plugin.name.to_string(),
        function,
        now,
        reason,
    }
}

impl<P: Packet + 'static> Qdisc<P> for PluginQdisc<P> {
    #[inline]
    fn enqueue(&mut self, pkt: P, now: Nanos, out: &mut impl Verdicts<P>) {
        if let Err(e) = self.try_enqueue(pkt, now, out) {
            self.fail(e);
        }
    }

    #[inline]
    fn dequeue(&mut self, now: Nanos, out: &mut impl Verdicts<P>) -> Option<P> {
        match self.try_dequeue(now, out) {
            Ok(p) => p,
            Err(e) => {
                self.fail(e);
                None
            }
        }
    }

    #[inline]
    fn len(&self) -> usize {
        self.inst.store.data().len
    }

    #[inline]
    fn backlog_bytes(&self) -> u64 {
        self.inst.store.data().bytes
    }

    /// The oldest head of all queues.
    fn head_enqueue_ns(&self) -> Option<Nanos> {
        self.inst
            .store
            .data()
            .queues
            .iter()
            .filter_map(|q| q.q.front().map(|p| p.enqueue_ns()))
            .min()
    }

    /// Every packet, queue by queue, then a fresh instance with the same options (the
    /// module's state is what `aqmlab_init` makes of them); the random stream goes on, the
    /// timer keeps its schedule.
    fn reset(&mut self) -> Vec<P> {
        let host = self.inst.store.data_mut();
        let mut all = Vec::with_capacity(host.len);
        for q in &mut host.queues {
            all.extend(q.q.drain(..));
            q.bytes = 0;
        }
        host.len = 0;
        host.bytes = 0;
        host.events.clear();
        let old = std::mem::replace(
            host,
            Host::new(0, 0, self.layout.queues, self.plugin.limits.memory_bytes),
        );
        let mut fresh = Host::new(
            old.queues.len() as u32,
            old.seed,
            self.layout.queues,
            self.plugin.limits.memory_bytes,
        );
        fresh.rng = old.rng;
        fresh.classify = old.classify;
        match Self::start(&self.plugin, &self.values, fresh) {
            Ok(inst) => self.inst = inst,
            Err(e) => self.fail(e),
        }
        all
    }

    fn owns_limit(&self) -> bool {
        self.plugin.info.owns_limit
    }
}
