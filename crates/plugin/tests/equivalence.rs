//! The plugin ports of STEP and CoDel (examples/plugins/step.c, codel.c) against the built-ins
//! they port (crates/aqm/src/qdisc/step.rs, codel.rs): the same verdicts, packet for packet,
//! on random traces; and the schedules the sources give, computed by hand.

mod common;

use aqm::codel::{self, Codel};
use aqm::step::{Step, Threshold};
use aqm::{DropReason, Ecn, MarkReason, Nanos, PhysicalLimit, Qdisc};
use common::{Ev, Log, Pkt};
use plugin::{Plugin, PluginQdisc};
use rand_core::Rng as _;

const MS: Nanos = 1_000_000;

enum Op {
    Arrive(Pkt),
    Serve,
    Reset,
}

/// A random trace: phases of random load (arrival share 0.3 to 0.75 of the operations) over a
/// link serving a packet every `gap` ns on average, so queues build, stand and drain; packets
/// of 64 to 1500 bytes with every ECN codepoint; now and then several events at one instant
/// and, rarely, a reset.
fn trace(seed: u64, n: usize) -> Vec<(Nanos, Op)> {
    let mut rng = aqm::rng_from_seed(seed);
    let mut r = move |k: u64| rng.next_u64() % k;
    let gap = 1_000 + r(40_000);
    let (mut t, mut ops, mut id) = (0, Vec::with_capacity(n), 0);
    let mut p_arrive = 50;
    for i in 0..n {
        if i % 500 == 0 {
            p_arrive = [30, 45, 50, 55, 65, 75][r(6) as usize];
        }
        if r(8) != 0 {
            t += r(2 * gap);
        }
        let op = if r(100) < p_arrive {
            id += 1;
            let ecn = [Ecn::NotEct, Ecn::Ect0, Ecn::Ect1, Ecn::Ce][r(4) as usize];
            let len = if r(2) == 0 { 1500 } else { 64 + r(1437) as u32 };
            Op::Arrive(Pkt::new(id, r(16), len, ecn))
        } else if r(20_000) == 0 {
            Op::Reset
        } else {
            Op::Serve
        };
        ops.push((t, op));
    }
    ops
}

/// Run `q` through the physical buffer `limit` over `ops`, logging every verdict, every
/// dequeue and the queue after each operation.
fn run(q: &mut impl Qdisc<Pkt>, limit: &PhysicalLimit, ops: &[(Nanos, Op)]) -> Log {
    let mut log = Log::default();
    for (now, op) in ops {
        match op {
            Op::Arrive(p) => limit.offer(q, *p, *now, &mut log),
            Op::Serve => match q.dequeue(*now, &mut log) {
                Some(p) => log.0.push(Ev::Sent(p, *now)),
                None => log.0.push(Ev::Idle(*now)),
            },
            Op::Reset => {
                for p in q.reset() {
                    log.0.push(Ev::Sent(p, u64::MAX));
                }
            }
        }
        log.0.push(Ev::State(q.len(), q.backlog_bytes()));
    }
    log
}

/// Assert two logs equal, naming the first difference.
fn same(builtin: &Log, plugin: &Log, what: &str) {
    if let Some(i) = (0..builtin.0.len().min(plugin.0.len())).find(|&i| builtin.0[i] != plugin.0[i])
    {
        panic!(
            "{what}: event {i} differs\n  built-in: {:?}\n  plugin:   {:?}\n  before: {:?}",
            builtin.0[i],
            plugin.0[i],
            &builtin.0[i.saturating_sub(4)..i]
        );
    }
    assert_eq!(builtin.0.len(), plugin.0.len(), "{what}: log lengths");
}

fn random_limit(r: &mut impl FnMut(u64) -> u64) -> PhysicalLimit {
    match r(3) {
        0 => PhysicalLimit::default(),
        1 => PhysicalLimit {
            packets: Some(20 + r(1000)),
            bytes: None,
        },
        _ => PhysicalLimit {
            packets: None,
            bytes: Some(30_000 + r(1_500_000)),
        },
    }
}

#[test]
fn plugin_step_gives_the_built_in_s_verdicts_on_random_traces() {
    let plugin = Plugin::load("step.wasm", &common::step_wasm()).unwrap();
    let (mut marks, mut drops) = (0, 0);
    for seed in 0..120u64 {
        let mut rng = aqm::rng_from_seed(1000 + seed);
        let mut r = move |k: u64| rng.next_u64() % k;
        let limit = random_limit(&mut r);
        let (threshold, option) = if r(2) == 0 {
            let k = r(400_000);
            (Threshold::Bytes(k), ("threshold_bytes", k as f64))
        } else {
            let k = r(300);
            (Threshold::Packets(k), ("threshold_packets", k as f64))
        };
        let ops = trace(seed, 6_000);
        let b = run(&mut Step::<Pkt>::new(threshold), &limit, &ops);
        let mut pq: PluginQdisc<Pkt> = plugin.build(&[option], seed).unwrap();
        let p = run(&mut pq, &limit, &ops);
        assert_eq!(pq.error(), None);
        same(&b, &p, &format!("seed {seed}, {threshold:?}, {limit:?}"));
        marks += b.marks().len();
        drops += b
            .drops()
            .iter()
            .filter(|d| d.1 == DropReason::Forced)
            .count();
    }
    eprintln!("step: {marks} marks, {drops} forced drops");
    // The traces exercised the rule: many marks and forced drops.
    assert!(
        marks > 10_000 && drops > 10_000,
        "{marks} marks, {drops} drops"
    );
}

#[test]
fn plugin_codel_gives_the_built_in_s_verdicts_on_random_traces() {
    let plugin = Plugin::load("codel.wasm", &common::codel_wasm()).unwrap();
    let (mut head_drops, mut delay_marks, mut step_marks, mut overflows) = (0, 0, 0, 0);
    let mut bursts = 0; // dequeues that dropped several packets
    for seed in 0..120u64 {
        let mut rng = aqm::rng_from_seed(2000 + seed);
        let mut r = move |k: u64| rng.next_u64() % k;
        let limit = random_limit(&mut r);
        let target = 20_000 + r(2 * MS);
        let params = codel::Params {
            target_ns: target,
            interval_ns: target + r(10 * MS),
            ecn: r(2) == 0,
            ce_threshold_ns: (r(3) == 0).then(|| 1 + r(10 * MS)),
            limit: 1 + r(2000),
            ..codel::Params::default()
        };
        let mut options = vec![
            ("target", params.target_ns as f64),
            ("interval", params.interval_ns as f64),
            ("limit", params.limit as f64),
            ("ecn", params.ecn as u8 as f64),
        ];
        if let Some(th) = params.ce_threshold_ns {
            options.push(("ce_threshold", th as f64));
        }
        let ops = trace(seed, 6_000);
        let b = run(&mut Codel::<Pkt>::new(params.clone()), &limit, &ops);
        let mut pq: PluginQdisc<Pkt> = plugin.build(&options, seed).unwrap();
        let p = run(&mut pq, &limit, &ops);
        assert_eq!(pq.error(), None);
        same(&b, &p, &format!("seed {seed}, {params:?}, {limit:?}"));
        let mut run = 0;
        for e in &b.0 {
            match e {
                Ev::Drop(_, DropReason::HeadDrop, _) => run += 1,
                Ev::State(..) => {
                    bursts += (run > 1) as usize;
                    run = 0;
                }
                _ => {}
            }
        }
        for (_, why, _) in b.drops() {
            head_drops += (why == DropReason::HeadDrop) as usize;
            overflows += (why == DropReason::Overflow) as usize;
        }
        for (_, why, _) in b.marks() {
            delay_marks += (why == MarkReason::Delay) as usize;
            step_marks += (why == MarkReason::Step) as usize;
        }
    }
    eprintln!("codel: {head_drops} head drops ({bursts} dequeues with several), {delay_marks} delay marks, {step_marks} step marks, {overflows} overflows");
    // Every path of the law ran: head drops (several in one dequeue too), ecn marks,
    // ce_threshold marks, the limit.
    assert!(
        head_drops > 1000 && bursts > 100 && delay_marks > 1000 && step_marks > 1000 && overflows > 1000,
        "{head_drops} head drops ({bursts} dequeues with several), {delay_marks} delay marks, {step_marks} step marks, {overflows} overflows"
    );
}

#[test]
fn plugin_step_marks_above_k_as_dctcp_says() {
    // K = 3000 B: the 1st to 3rd 1500 B arrivals find 0, 1500, 3000 B (not above K), the 4th
    // and 5th find 4500 and 6000 B and are marked; a Not-ECT 6th is dropped ("forced").
    let plugin = Plugin::load("step.wasm", &common::step_wasm()).unwrap();
    let mut q: PluginQdisc<Pkt> = plugin.build(&[("threshold_bytes", 3000.0)], 0).unwrap();
    let mut log = Log::default();
    for i in 1..=5 {
        q.enqueue(Pkt::new(i, 0, 1500, Ecn::Ect0), 0, &mut log);
    }
    q.enqueue(Pkt::new(6, 0, 1500, Ecn::NotEct), 0, &mut log);
    assert_eq!(
        log.marks(),
        vec![(4, MarkReason::Step, 0), (5, MarkReason::Step, 0)]
    );
    assert_eq!(log.drops(), vec![(6, DropReason::Forced, 0)]);
    assert_eq!((q.len(), q.backlog_bytes()), (5, 7500));
    // Draining below K stops the marking at once; the head leaves first.
    let sent: Vec<u64> = (0..3).map(|_| q.dequeue(0, &mut log).unwrap().id).collect();
    assert_eq!(sent, vec![1, 2, 3]);
    q.enqueue(Pkt::new(7, 0, 1500, Ecn::Ect1), 0, &mut log);
    assert_eq!(log.marks().len(), 2);
}

#[test]
fn plugin_codel_drops_at_interval_over_sqrt_count() {
    // 400 packets of 1500 B at t = 0, one dequeue per ms from 1 ms (RFC 8289 §5 with
    // target 5 ms, interval 100 ms): the sojourn reaches target at 5 ms, so first_above =
    // 105 ms and the first drop is at the first dequeue strictly after it, 106 ms; then
    // drop_next = 106 + 100/√1 = 206, 206 + 100/√2 = 276.71 → 277, + 100/√3 = 334.45 → 335,
    // + 100/√4 = 384.45 → 385 ms.
    let plugin = Plugin::load("codel.wasm", &common::codel_wasm()).unwrap();
    for ecn in [false, true] {
        let mut q: PluginQdisc<Pkt> = plugin
            .build(&[("ecn", if ecn { 1.0 } else { 0.0 })], 0)
            .unwrap();
        let mut log = Log::default();
        let codepoint = if ecn { Ecn::Ect0 } else { Ecn::NotEct };
        for i in 0..400 {
            q.enqueue(Pkt::new(i, 0, 1500, codepoint), 0, &mut log);
        }
        for t in 1..=390u64 {
            q.dequeue(t * MS, &mut log);
        }
        let times: Vec<u64> = if ecn {
            assert!(log.drops().is_empty());
            assert!(log.marks().iter().all(|m| m.1 == MarkReason::Delay));
            log.marks().iter().map(|m| m.2 / MS).collect()
        } else {
            assert!(log.marks().is_empty());
            assert!(log.drops().iter().all(|d| d.1 == DropReason::HeadDrop));
            log.drops().iter().map(|d| d.2 / MS).collect()
        };
        assert_eq!(times, vec![106, 206, 277, 335, 385], "ecn {ecn}");
    }
    // limit 3: the 4th arrival is dropped at enqueue ("overflow").
    let mut q: PluginQdisc<Pkt> = plugin.build(&[("limit", 3.0)], 0).unwrap();
    let mut log = Log::default();
    for i in 0..4 {
        q.enqueue(Pkt::new(i, 0, 100, Ecn::NotEct), 0, &mut log);
    }
    assert_eq!(log.drops(), vec![(3, DropReason::Overflow, 0)]);
}
