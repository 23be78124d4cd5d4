//! The plugin ports of STEP, CoDel and PI2 (examples/plugins/step.c, codel.c, pi2.c) against
//! the built-ins they port (crates/aqm/src/qdisc/step.rs, codel.rs, pi2.rs): the same verdicts,
//! packet for packet, on random traces; and the schedules the sources give, computed by hand.

mod common;

use aqm::codel::{self, Codel};
use aqm::pi2::{self, EcnMask, Pi2};
use aqm::step::{Step, Threshold};
use aqm::{DropReason, Ecn, MarkReason, Nanos, PhysicalLimit, Qdisc, ScenarioOptions};
use common::{Ev, Log, Pkt};
use plugin::{Plugin, PluginQdisc};
use rand_core::Rng as _;
use std::path::Path;

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

/// examples/plugins/pi2.c, built.
fn pi2_wasm() -> Vec<u8> {
    common::build("examples/plugins/pi2.c", &[])
}

/// pi2.c's options for the built-in's `params` (ecn_mask as the index of its choice), each
/// left out now and then when it is the default, so that the defaults are exercised too.
fn pi2_options(params: &pi2::Params, r: &mut impl FnMut(u64) -> u64) -> Vec<(&'static str, f64)> {
    let d = pi2::Params::default();
    let mask = |m: EcnMask| (m == EcnMask::AnyEct) as u8 as f64;
    [
        ("target", params.target_ns as f64, d.target_ns as f64),
        ("tupdate", params.tupdate_ns as f64, d.tupdate_ns as f64),
        ("alpha", params.alpha, d.alpha),
        ("beta", params.beta, d.beta),
        ("k", params.k, d.k),
        ("ecn_mask", mask(params.ecn_mask), mask(d.ecn_mask)),
        ("limit", params.limit as f64, d.limit as f64),
    ]
    .into_iter()
    .filter(|&(_, v, default)| v != default || r(2) == 0)
    .map(|(name, v, _)| (name, v))
    .collect()
}

#[test]
fn plugin_pi2_gives_the_built_in_s_verdicts_on_random_traces() {
    // Four timer periods (tupdate, which the plugin gives its timer): dualpi2's 16 ms, Fejes
    // et al.'s 10 ms, and two short ones for traces of a fraction of a second.
    let periods = [16 * MS, 10 * MS, MS, 250_000];
    let plugin = Plugin::load("pi2.wasm", &pi2_wasm()).unwrap();
    let (mut prob_marks, mut coupled_marks, mut early, mut overload, mut overflows) =
        (0, 0, 0, 0, 0);
    let (mut updates, mut long_idles) = (0, 0);
    for seed in 0..120u64 {
        let mut rng = aqm::rng_from_seed(3000 + seed);
        let mut r = move |k: u64| rng.next_u64() % k;
        let limit = random_limit(&mut r);
        let which = r(periods.len() as u64) as usize;
        let tupdate = periods[which];
        // The trace, stretched to span 100 to 400 updates, so that queues stand for many of
        // them; now and then a pause of 9 000 to 15 000 updates (pi2.rs replays at most
        // 10 000 of them at the next call).
        let ops = trace(seed, 6_000);
        let span = ops.last().map_or(1, |o| o.0).max(1);
        let scale = (tupdate * (100 + r(300)) / span).max(1);
        let pause = (r(4) == 0).then(|| (r(6_000) as usize, (9_000 + r(6_000)) * tupdate));
        long_idles += pause.is_some_and(|p| p.1 > 10_000 * tupdate) as usize;
        let ops: Vec<(Nanos, Op)> = ops
            .into_iter()
            .enumerate()
            .map(|(i, (t, op))| {
                let idle = pause.filter(|p| i >= p.0).map_or(0, |p| p.1);
                (t * scale + idle, op)
            })
            .collect();
        updates += ops.last().unwrap().0 / tupdate;
        // Gains around dualpi2's for its 16 ms period, larger for the shorter ones (the step
        // per update is α·error + β·change in seconds); now and then 0 or the defaults.
        let d = pi2::Params::default();
        let gain = |r: &mut dyn FnMut(u64) -> u64, default: f64| match r(6) {
            0 => 0.0,
            1 => default,
            _ => default * (16 * MS) as f64 / tupdate as f64 * (1 + r(1000)) as f64 / 100.0,
        };
        let params = pi2::Params {
            target_ns: if r(4) == 0 {
                d.target_ns
            } else {
                1 + r(8 * tupdate)
            },
            tupdate_ns: tupdate,
            alpha: gain(&mut r, d.alpha),
            beta: gain(&mut r, d.beta),
            k: match r(4) {
                0 => d.k,
                1 => 1.0,
                _ => 1.0 + r(3000) as f64 / 1000.0,
            },
            ecn_mask: if r(2) == 0 {
                EcnMask::L4sEct
            } else {
                EcnMask::AnyEct
            },
            limit: if r(3) == 0 { d.limit } else { 1 + r(2000) },
            ..d
        };
        let options = pi2_options(&params, &mut r);
        let b = run(&mut Pi2::<Pkt>::build(&params, seed).unwrap(), &limit, &ops);
        let mut pq: PluginQdisc<Pkt> = plugin.build(&options, seed).unwrap();
        let p = run(&mut pq, &limit, &ops);
        assert_eq!(pq.error(), None);
        same(&b, &p, &format!("seed {seed}, {params:?}, {limit:?}"));
        for (_, why, _) in b.drops() {
            early += (why == DropReason::Early) as usize;
            overload += (why == DropReason::Overload) as usize;
            overflows += (why == DropReason::Overflow) as usize;
        }
        for (_, why, _) in b.marks() {
            prob_marks += (why == MarkReason::Prob) as usize;
            coupled_marks += (why == MarkReason::Coupled) as usize;
        }
    }
    eprintln!("pi2: {updates} updates ({long_idles} pauses over 10 000), {coupled_marks} coupled marks, {prob_marks} classic marks, {early} early drops, {overload} overload drops, {overflows} overflows");
    // Every path of the controller and the signal ran: scalable marks, classic marks (p′²),
    // classic drops, overload drops, the limit; and pauses past the replay cap.
    assert!(
        coupled_marks > 1000
            && prob_marks > 1000
            && early > 1000
            && overload > 1000
            && overflows > 1000
            && long_idles > 5,
        "{coupled_marks} coupled marks, {prob_marks} classic marks, {early} early drops, {overload} overload drops, {overflows} overflows, {long_idles} long pauses"
    );
}

/// What RFC 9332 A.1 and sch_dualpi2.c prescribe, written out for the hand-computed checks: a
/// queue of packets served at the probabilities `p(t)` given, drawing the uniforms from the
/// stream the plugin is seeded with; logged as `run` logs.
fn pi2_by_hand(seed: u64, k: f64, p: impl Fn(Nanos) -> f64, ops: &[(Nanos, Op)]) -> Log {
    let mut stream = aqm::rng_from_seed(seed);
    let mut u = move || aqm::uniform01(&mut stream);
    let mut queue = std::collections::VecDeque::<Pkt>::new();
    let mut log = Log::default();
    for (now, op) in ops {
        let (now, p) = (*now, p(*now));
        match op {
            Op::Arrive(pkt) => queue.push_back(Pkt { enq: now, ..*pkt }),
            Op::Serve => loop {
                let Some(mut pkt) = queue.pop_front() else {
                    log.0.push(Ev::Idle(now));
                    break;
                };
                // The 2-MTU guard on the backlog before the packet leaves.
                let backlog = pkt.len as u64 + queue.iter().map(|q| q.len as u64).sum::<u64>();
                let scalable = pkt.ecn == Ecn::Ect1 || pkt.ecn == Ecn::Ce;
                if backlog >= 2 * 1514 {
                    assert!(scalable, "pi2_by_hand signals scalable packets only");
                    if k * p >= 1.0 && u() < p && u() < p {
                        log.0.push(Ev::Drop(pkt, DropReason::Overload, now));
                        continue;
                    }
                    if k * p >= 1.0 || u() < k * p {
                        pkt.ecn = Ecn::Ce;
                        log.0.push(Ev::Mark(pkt, MarkReason::Coupled, now));
                    }
                }
                log.0.push(Ev::Sent(pkt, now));
                break;
            },
            Op::Reset => unreachable!(),
        }
        let bytes = queue.iter().map(|q| q.len as u64).sum();
        log.0.push(Ev::State(queue.len(), bytes));
    }
    log
}

#[test]
fn plugin_pi2_moves_p_as_rfc_9332_a1_says() {
    // RFC 9332 A.1 with Fejes et al. 2020's tupdate 10 ms, α 0.16 Hz, β 3.2 Hz, target 15 ms,
    // and k = 20; 2500 ECT(1) packets of 1500 B enqueued at t = 0, so the head's age is t:
    //   tick 10 ms: qdelay 10 ms, prev 0:      p′ = 0.16·(−0.005) + 3.2·0.010 = 0.0312;
    //   tick 20 ms: qdelay 20 ms, prev 10 ms:  p′ = 0.0312 + 0.16·0.005 + 3.2·0.010 = 0.064;
    //   tick 30 ms: the queue drained at 25 ms, qdelay 0, prev 20 ms:
    //               p′ = 0.064 − 0.16·0.015 − 3.2·0.020 = −0.0024, clamped to 0.
    // At p′ = 0.0312 an ECT(1) packet is marked iff a uniform is below k·p′ = 0.624; at
    // p′ = 0.064, k·p′ = 1.28 ≥ 1 (overload): dropped iff two uniforms are below p′, else
    // marked; at p′ = 0 never; none while less than 2·1514 B are queued (the last two).
    let seed = 7;
    let ect1 = |id| Op::Arrive(Pkt::new(id, 0, 1500, Ecn::Ect1));
    let mut ops: Vec<(Nanos, Op)> = (1..=2500).map(|id| (0, ect1(id))).collect();
    ops.extend((0..1000).map(|_| (10 * MS, Op::Serve)));
    ops.extend((0..1000).map(|_| (20 * MS, Op::Serve)));
    ops.extend((0..600).map(|_| (25 * MS, Op::Serve)));
    ops.extend((3001..=3100).map(|id| (30 * MS, ect1(id))));
    ops.extend((0..100).map(|_| (30 * MS, Op::Serve)));
    let p = |t: Nanos| match t / (10 * MS) {
        0 => 0.0,
        1 => 0.0312,
        2 => 0.064,
        _ => 0.0,
    };
    let expected = pi2_by_hand(seed, 20.0, p, &ops);

    let plugin = Plugin::load("pi2.wasm", &pi2_wasm()).unwrap();
    let options = [
        ("alpha", 0.16),
        ("beta", 3.2),
        ("k", 20.0),
        ("tupdate", 10e6),
    ];
    let mut q: PluginQdisc<Pkt> = plugin.build(&options, seed).unwrap();
    let got = run(&mut q, &PhysicalLimit::default(), &ops);
    assert_eq!(q.error(), None);
    same(&expected, &got, "RFC 9332 A.1 by hand vs pi2.c");
    // The built-in agrees, and its p′ is the one computed above.
    let params = pi2::Params {
        tupdate_ns: 10 * MS,
        alpha: 0.16,
        beta: 3.2,
        k: 20.0,
        ..pi2::Params::default()
    };
    let mut b = Pi2::<Pkt>::build(&params, seed).unwrap();
    let built_in = run(&mut b, &PhysicalLimit::default(), &ops);
    same(&expected, &built_in, "RFC 9332 A.1 by hand vs pi2.rs");
    let mut b = Pi2::<Pkt>::build(&params, seed).unwrap();
    run(&mut b, &PhysicalLimit::default(), &ops[..4500]); // to the serves at 20 ms
    assert!((b.vars.prob - 0.064).abs() < 1e-12, "p′ = {}", b.vars.prob);

    // The checks could fail: marks at 10 ms near 62.4 %, overload drops at 20 ms, nothing at
    // 30 ms.
    let at = |t: Nanos| got.marks().iter().filter(|m| m.2 == t).count();
    let drops_20 = got.drops().iter().filter(|d| d.2 == 20 * MS).count();
    assert!(
        (560..690).contains(&at(10 * MS)),
        "{} marks at 10 ms",
        at(10 * MS)
    );
    assert!(
        drops_20 > 0 && at(20 * MS) > 900,
        "{drops_20} drops, {} marks at 20 ms",
        at(20 * MS)
    );
    assert_eq!(at(30 * MS), 0);
    // Drops only in overload (p′ = 0.064, at 20 and 25 ms).
    assert!(got.drops().iter().all(|d| d.2 / (10 * MS) == 2));

    // pi2.rs replays at most 10 000 missed updates per call, and so does pi2.c. α = 1/300 Hz,
    // β = 0, k = 1.5, tupdate 16 ms: 10 Not-ECT packets at t = 0 push p′ to 1 by t = 5 s,
    // where the queue is drained (8 dropped at p′ = 1, the last 2 under the 2-MTU guard);
    // 25 000 ticks later, at 405 s, each with qdelay 0, the first 10 000 lower p′ by
    // α·0.015 = 0.00005 each: p′ = 0.5 (0 had all 25 000 run), and ECT(1) arrivals are marked
    // with k·p′ = 0.75.
    let mut ops: Vec<(Nanos, Op)> = (1..=10)
        .map(|id| (0, Op::Arrive(Pkt::new(id, 0, 1500, Ecn::NotEct))))
        .collect();
    ops.extend((0..12).map(|_| (5_000 * MS, Op::Serve)));
    ops.extend((11..=210).map(|id| (405_000 * MS, ect1(id))));
    ops.extend((0..200).map(|_| (405_000 * MS, Op::Serve)));
    let params = pi2::Params {
        alpha: 1.0 / 300.0,
        beta: 0.0,
        k: 1.5,
        ..pi2::Params::default()
    };
    let mut b = Pi2::<Pkt>::build(&params, seed).unwrap();
    let built_in = run(&mut b, &PhysicalLimit::default(), &ops);
    assert!((b.vars.prob - 0.5).abs() < 1e-9, "p′ = {}", b.vars.prob);
    let plugin = Plugin::load("pi2.wasm", &pi2_wasm()).unwrap();
    let options = [("alpha", 1.0 / 300.0), ("beta", 0.0), ("k", 1.5)];
    let mut q: PluginQdisc<Pkt> = plugin.build(&options, seed).unwrap();
    let got = run(&mut q, &PhysicalLimit::default(), &ops);
    assert_eq!(q.error(), None);
    same(&built_in, &got, "10 000 replayed updates");
    let early = got
        .drops()
        .iter()
        .filter(|d| d.1 == DropReason::Early)
        .count();
    let marks = got.marks().len();
    assert_eq!((early, got.drops().len()), (8, 8));
    assert!(
        (120..175).contains(&marks),
        "{marks} of 198 marked at k·p′ = 0.75"
    );
}

#[test]
fn plugin_pi2_declares_pi2_rs_s_options() {
    // Names, order, units, bounds and defaults as pi2.rs's Options and ABOUT: ecn_mask a
    // choice of the same strings (its bounds the indices), tupdate the timer's period, set by
    // aqmlab_init (none declared).
    use aqm::options::Unit;
    let plugin = Plugin::load("pi2.wasm", &pi2_wasm()).unwrap();
    let declared = &plugin.info().options;
    let about = pi2::Options::ABOUT.options;
    let d = pi2::Options::default();
    let defaults = [
        d.target as f64,
        d.tupdate as f64,
        d.alpha,
        d.beta,
        d.k,
        0.0,
        d.limit as f64,
    ];
    assert_eq!(declared.len(), about.len());
    for ((o, a), default) in declared.iter().zip(about).zip(defaults) {
        assert_eq!(o.name, a.name);
        match a.unit {
            Unit::Choice(c) => {
                assert_eq!(
                    (o.unit, o.min, o.max),
                    (Unit::Choice(&[]), Some(0.0), Some(1.0))
                );
                assert_eq!(o.choices, c);
            }
            unit => {
                assert_eq!(o.unit, unit, "{}", o.name);
                assert!(o.choices.is_empty());
                // Open at 0 for whole ns and packets is closed at 1.
                let min = a.range.min.map(|m| m + a.range.min_open as u8 as f64);
                assert_eq!((o.min, o.max), (min, a.range.max), "{}", o.name);
            }
        }
        assert_eq!(o.default, Some(default), "{}", o.name);
    }
    assert_eq!(plugin.info().abi_version, 2);
    assert_eq!(
        (plugin.info().timer_ns, plugin.info().sets_timer),
        (None, true)
    );
    assert_eq!(plugin.info().delay_target_option, Some(0));
    // ecn_mask takes the indices of its two strings only.
    let e = plugin.build::<Pkt>(&[("ecn_mask", 2.0)], 0).err().unwrap();
    assert!(
        matches!(&e, plugin::PluginError::Options { message, .. } if message.starts_with("ecn_mask: ")),
        "{e}"
    );
}

#[test]
fn plugin_random_unit_is_uniform01_bit_for_bit() {
    // pi2.c draws with the header's aqmlab_random_unit where pi2.rs draws aqm::uniform01: both
    // are (next_u64 >> 11)·2^−53 on the run's PCG stream. A module that hands out the 53-bit
    // mantissa of each draw, 16 bits per arrival as the queue it joins (of 65536), shows they
    // agree bit for bit and draw for draw.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let src = dir.join(format!("draws-{}.c", std::process::id()));
    std::fs::write(
        &src,
        r#"#include "aqmlab_qdisc.h"
static const aqmlab_option options[] = {{"unused", AQMLAB_UNIT_INT, "", 0, 0, 0, 1}};
AQMLAB_QDISC(65536, options, .kind = "draws", .summary = "", .source = "");
static uint64_t m;
static int chunk;
AQMLAB_EXPORT(aqmlab_init) const char *aqmlab_init(void) { return 0; }
AQMLAB_EXPORT(aqmlab_enqueue) uint32_t aqmlab_enqueue(uint64_t now, const aqmlab_pkt *pkt) {
    (void)now, (void)pkt;
    if (chunk == 0)
        m = (uint64_t)(aqmlab_random_unit() * 9007199254740992.0);
    uint32_t q = (uint32_t)(m >> (16 * chunk)) & 0xffff;
    chunk = (chunk + 1) & 3;
    return AQMLAB_ACCEPT(q);
}
AQMLAB_EXPORT(aqmlab_dequeue) int32_t aqmlab_dequeue(uint64_t now) { (void)now; return AQMLAB_NONE; }
"#,
    )
    .unwrap();
    let wasm = plugin::compile_c(&src, &src.with_extension("wasm")).unwrap();
    let plugin = Plugin::load("draws.wasm", &wasm).unwrap();
    for seed in [0, 7, 3000] {
        let mut q: PluginQdisc<Pkt> = plugin.build(&[], seed).unwrap();
        let mut rng = aqm::rng_from_seed(seed);
        let mut log = Log::default();
        for i in 0..2_000u64 {
            let u = aqm::uniform01(&mut rng);
            let m = (u * (1u64 << 53) as f64) as u64;
            assert_eq!(m as f64 / (1u64 << 53) as f64, u);
            for chunk in 0..4 {
                let queue = (m >> (16 * chunk)) as usize & 0xffff;
                let before = q.queue_len(queue);
                q.enqueue(Pkt::new(4 * i + chunk, 0, 64, Ecn::NotEct), 0, &mut log);
                assert_eq!(q.queue_len(queue), before + 1, "seed {seed}, draw {i}");
            }
        }
        assert_eq!(q.error(), None);
    }
}
