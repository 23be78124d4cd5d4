//! The plugin ports of STEP, CoDel, PI2 and DualPI2 (examples/plugins/step.c, codel.c, pi2.c,
//! dualpi2.c) against the built-ins they port (crates/aqm/src/qdisc/step.rs, codel.rs, pi2.rs,
//! dualpi2.rs): the same verdicts, packet for packet, on random traces; and the schedules the
//! sources give, computed by hand.

mod common;

use aqm::codel::{self, Codel};
use aqm::dualpi2::{self, DualPi2};
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

/// `trace(seed, 6_000)` stretched to span 100 to 400 updates of a controller of period
/// `tupdate`, so that queues stand for many of them; in one trace of four, a pause of 9 000 to
/// 15 000 updates (pi2.rs replays at most 10 000 of them at the next call). Returns the trace
/// and whether its pause passes that cap.
fn stretched_trace(
    seed: u64,
    tupdate: Nanos,
    r: &mut impl FnMut(u64) -> u64,
) -> (Vec<(Nanos, Op)>, bool) {
    let ops = trace(seed, 6_000);
    let span = ops.last().map_or(1, |o| o.0).max(1);
    let scale = (tupdate * (100 + r(300)) / span).max(1);
    let pause = (r(4) == 0).then(|| (r(6_000) as usize, (9_000 + r(6_000)) * tupdate));
    let ops = ops
        .into_iter()
        .enumerate()
        .map(|(i, (t, op))| {
            let idle = pause.filter(|p| i >= p.0).map_or(0, |p| p.1);
            (t * scale + idle, op)
        })
        .collect();
    (ops, pause.is_some_and(|p| p.1 > 10_000 * tupdate))
}

/// A PI gain around dualpi2's `default` for its 16 ms period, larger for shorter periods
/// `tupdate` (the step per update is α·error + β·change in seconds); now and then 0 or the
/// default.
fn random_gain(r: &mut impl FnMut(u64) -> u64, default: f64, tupdate: Nanos) -> f64 {
    match r(6) {
        0 => 0.0,
        1 => default,
        _ => default * (16 * MS) as f64 / tupdate as f64 * (1 + r(1000)) as f64 / 100.0,
    }
}

/// The PI controller's parameters for a random trace, from the defaults `(target, α, β, k)`:
/// the target now and then the default, else up to 8 updates; the gains by `random_gain`; k
/// the default, 1, or up to 4.
fn random_controller(
    r: &mut impl FnMut(u64) -> u64,
    (target, alpha, beta, k): (Nanos, f64, f64, f64),
    tupdate: Nanos,
) -> (Nanos, f64, f64, f64) {
    let target = if r(4) == 0 {
        target
    } else {
        1 + r(8 * tupdate)
    };
    let alpha = random_gain(r, alpha, tupdate);
    let beta = random_gain(r, beta, tupdate);
    let k = match r(4) {
        0 => k,
        1 => 1.0,
        _ => 1.0 + r(3000) as f64 / 1000.0,
    };
    (target, alpha, beta, k)
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
        let (ops, long_idle) = stretched_trace(seed, tupdate, &mut r);
        long_idles += long_idle as usize;
        updates += ops.last().unwrap().0 / tupdate;
        let d = pi2::Params::default();
        let (target_ns, alpha, beta, k) =
            random_controller(&mut r, (d.target_ns, d.alpha, d.beta, d.k), tupdate);
        let params = pi2::Params {
            target_ns,
            tupdate_ns: tupdate,
            alpha,
            beta,
            k,
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

/// That a plugin's declared options are a built-in's `about`: names, order, units (a choice
/// with the same strings, its bounds the indices), bounds and `defaults` (in the unit's terms).
fn declares_as(declared: &[plugin::PluginOption], about: &[aqm::options::Opt], defaults: &[f64]) {
    use aqm::options::Unit;
    assert_eq!(declared.len(), about.len());
    assert_eq!(defaults.len(), about.len());
    for ((o, a), &default) in declared.iter().zip(about).zip(defaults) {
        assert_eq!(o.name, a.name);
        match a.unit {
            Unit::Choice(c) => {
                let last = (c.len() - 1) as f64;
                assert_eq!(
                    (o.unit, o.min, o.max),
                    (Unit::Choice(&[]), Some(0.0), Some(last))
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
}

#[test]
fn plugin_pi2_declares_pi2_rs_s_options() {
    // Names, order, units, bounds and defaults as pi2.rs's Options and ABOUT: ecn_mask a
    // choice of the same strings (its bounds the indices), tupdate the timer's period, set by
    // aqmlab_init (none declared).
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
    declares_as(declared, about, &defaults);
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

/// examples/plugins/dualpi2.c, built.
fn dualpi2_wasm() -> Vec<u8> {
    common::build("examples/plugins/dualpi2.c", &[])
}

/// dualpi2.c's options for the built-in's `params` (ecn_mask as the index of its choice), each
/// left out now and then when it is the default, so that the defaults are exercised too.
fn dualpi2_options(
    params: &dualpi2::Params,
    r: &mut impl FnMut(u64) -> u64,
) -> Vec<(&'static str, f64)> {
    let d = dualpi2::Params::default();
    let mask = |m: EcnMask| (m == EcnMask::AnyEct) as u8 as f64;
    [
        ("target", params.target_ns as f64, d.target_ns as f64),
        ("tupdate", params.tupdate_ns as f64, d.tupdate_ns as f64),
        ("alpha", params.alpha, d.alpha),
        ("beta", params.beta, d.beta),
        ("k", params.k, d.k),
        ("step", params.step_ns as f64, d.step_ns as f64),
        (
            "min_qlen_step",
            params.min_qlen_step as f64,
            d.min_qlen_step as f64,
        ),
        ("wc", params.wc as f64, d.wc as f64),
        ("ecn_mask", mask(params.ecn_mask), mask(d.ecn_mask)),
        ("limit", params.limit as f64, d.limit as f64),
    ]
    .into_iter()
    .filter(|&(_, v, default)| v != default || r(2) == 0)
    .map(|(name, v, _)| (name, v))
    .collect()
}

/// The built-in DualPI2, counting the dequeues that find both queues backlogged by the queue
/// its WRR credit serves first (L while the credit is ≤ 0): the scheduler's two branches.
struct WatchedDualPi2 {
    q: DualPi2<Pkt>,
    l_turns: usize,
    c_turns: usize,
}

impl Qdisc<Pkt> for WatchedDualPi2 {
    fn enqueue(&mut self, pkt: Pkt, now: Nanos, out: &mut impl aqm::Verdicts<Pkt>) {
        self.q.enqueue(pkt, now, out)
    }
    fn dequeue(&mut self, now: Nanos, out: &mut impl aqm::Verdicts<Pkt>) -> Option<Pkt> {
        let (l, all) = (self.q.l_len(), self.q.len());
        if l > 0 && all > l {
            if self.q.credit <= 0 {
                self.l_turns += 1;
            } else {
                self.c_turns += 1;
            }
        }
        self.q.dequeue(now, out)
    }
    fn len(&self) -> usize {
        self.q.len()
    }
    fn backlog_bytes(&self) -> u64 {
        self.q.backlog_bytes()
    }
    fn head_enqueue_ns(&self) -> Option<Nanos> {
        self.q.head_enqueue_ns()
    }
    fn reset(&mut self) -> Vec<Pkt> {
        self.q.reset()
    }
    fn owns_limit(&self) -> bool {
        self.q.owns_limit()
    }
}

#[test]
fn plugin_dualpi2_gives_the_built_in_s_verdicts_on_random_traces() {
    // The timer periods and the stretched traces of the PI2 test; every ECN codepoint, so both
    // queues fill (ECT(1) and CE in L and ECT(0) in C under l4s_ect, ECT(0) in L under
    // any_ect, Not-ECT always in C).
    let periods = [16 * MS, 10 * MS, MS, 250_000];
    let plugin = Plugin::load("dualpi2.wasm", &dualpi2_wasm()).unwrap();
    let (mut step_marks, mut at_step, mut coupled_marks, mut prob_marks) = (0, 0, 0, 0);
    let (mut early, mut l_overload, mut c_overload, mut overflows) = (0, 0, 0, 0);
    // Coupled marks on L packets at or past the step (which the step would have marked had it
    // run first), the scheduler's turns, updates, pauses past the replay cap.
    let (mut coupled_past_step, mut l_turns, mut c_turns) = (0, 0, 0);
    let (mut updates, mut long_idles) = (0, 0);
    for seed in 0..120u64 {
        let mut rng = aqm::rng_from_seed(4000 + seed);
        let mut r = move |k: u64| rng.next_u64() % k;
        let limit = random_limit(&mut r);
        let tupdate = periods[r(periods.len() as u64) as usize];
        let (ops, long_idle) = stretched_trace(seed, tupdate, &mut r);
        long_idles += long_idle as usize;
        updates += ops.last().unwrap().0 / tupdate;
        // The controller as in the PI2 test; the step within two updates (sojourns in these
        // traces run from 0 to several updates); min_qlen_step 0, small or up to 100 packets;
        // wc dualpi2's 10 %, the extremes 0 and 100 % (strict priority to L or to C), or any.
        let d = dualpi2::Params::default();
        let (target_ns, alpha, beta, k) =
            random_controller(&mut r, (d.target_ns, d.alpha, d.beta, d.k), tupdate);
        let params = dualpi2::Params {
            target_ns,
            tupdate_ns: tupdate,
            alpha,
            beta,
            k,
            step_ns: if r(4) == 0 {
                d.step_ns
            } else {
                1 + r(2 * tupdate)
            },
            min_qlen_step: match r(3) {
                0 => d.min_qlen_step,
                1 => 1 + r(4),
                _ => r(100),
            },
            wc: match r(5) {
                0 => d.wc,
                1 => 0,
                2 => 100,
                _ => r(101) as u32,
            },
            ecn_mask: if r(2) == 0 {
                EcnMask::L4sEct
            } else {
                EcnMask::AnyEct
            },
            limit: if r(3) == 0 { d.limit } else { 1 + r(2000) },
            ..d
        };
        let options = dualpi2_options(&params, &mut r);
        // In one trace of three, every instant on a grid of step/1 to step/8, so that
        // sojourns of exactly the step occur (the step marks from there on).
        let ops: Vec<(Nanos, Op)> = if r(3) == 0 {
            let grid = (params.step_ns / (1 + r(8))).max(1);
            ops.into_iter()
                .map(|(t, op)| (t / grid * grid, op))
                .collect()
        } else {
            ops
        };
        let mut built_in = WatchedDualPi2 {
            q: DualPi2::build(&params, seed).unwrap(),
            l_turns: 0,
            c_turns: 0,
        };
        let b = run(&mut built_in, &limit, &ops);
        let mut pq: PluginQdisc<Pkt> = plugin.build(&options, seed).unwrap();
        let p = run(&mut pq, &limit, &ops);
        assert_eq!(pq.error(), None);
        same(&b, &p, &format!("seed {seed}, {params:?}, {limit:?}"));
        (l_turns, c_turns) = (l_turns + built_in.l_turns, c_turns + built_in.c_turns);
        for e in &b.0 {
            match *e {
                Ev::Drop(p, DropReason::Early, _) => {
                    assert_eq!(p.ecn, Ecn::NotEct);
                    early += 1;
                }
                Ev::Drop(p, DropReason::Overload, _) if params.ecn_mask.is_scalable(p.ecn) => {
                    l_overload += 1
                }
                Ev::Drop(_, DropReason::Overload, _) => c_overload += 1,
                Ev::Drop(_, DropReason::Overflow, _) => overflows += 1,
                Ev::Mark(p, MarkReason::Step, now) => {
                    step_marks += 1;
                    at_step += (now - p.enq == params.step_ns) as usize;
                }
                Ev::Mark(_, MarkReason::Prob, _) => prob_marks += 1,
                Ev::Mark(p, MarkReason::Coupled, now) => {
                    coupled_marks += 1;
                    coupled_past_step += (now - p.enq >= params.step_ns) as usize;
                }
                Ev::Drop(..) | Ev::Mark(..) => panic!("{e:?}: not a DualPI2 verdict"),
                _ => {}
            }
        }
    }
    eprintln!("dualpi2: {updates} updates ({long_idles} pauses over 10 000), {step_marks} step marks ({at_step} at a sojourn of exactly the step), {coupled_marks} coupled marks ({coupled_past_step} at or past the step), {prob_marks} classic marks, {early} early drops, {l_overload} L and {c_overload} C overload drops, {overflows} overflows; WRR with both queues backlogged: {l_turns} L turns, {c_turns} C turns");
    // Every path ran: the step (at exactly its threshold too), the coupled marks (also where the step would have marked),
    // classic marks and drops, overload drops in both queues, the limit, both branches of the
    // scheduler, and pauses past the replay cap.
    assert!(
        step_marks > 1000
            && at_step > 100
            && coupled_marks > 1000
            && coupled_past_step > 1000
            && prob_marks > 1000
            && early > 1000
            && l_overload > 1000
            && c_overload > 1000
            && overflows > 1000
            && l_turns > 10_000
            && c_turns > 1000
            && long_idles > 5,
        "{step_marks} step marks ({at_step} at the step), {coupled_marks} coupled marks ({coupled_past_step} past the step), {prob_marks} classic marks, {early} early drops, {l_overload}/{c_overload} overload drops, {overflows} overflows, {l_turns}/{c_turns} turns, {long_idles} long pauses"
    );
}

#[test]
fn plugin_dualpi2_serves_the_queues_as_the_wrr_credit_says() {
    // sch_dualpi2.c dequeue_packet with 1500 B packets in both queues, p′ = 0 (α = β = 0) and
    // every packet at t = 0 (no sojourn, so no step): the credit starts at 1514·(wc − wl),
    // wl = 100 − wc (dualpi2_calculate_c_protection); L is served while it is ≤ 0, adding
    // wc·1500; C otherwise, subtracting wl·1500.
    //   wc = 10: −121 120, then +15 000 per L packet: 9 L packets bring it to 13 880 > 0, one C
    //            packet back to −121 120: 9 L, 1 C, 9 L, 1 C, ... (C gets its 10 %);
    //   wc = 50: 0, L (+75 000), C (−75 000), L, C, ...;
    //   wc = 0:  −151 400, L adds nothing: L until it is empty;
    //   wc = 100: 151 400, C subtracts nothing: C until it is empty.
    let plugin = Plugin::load("dualpi2.wasm", &dualpi2_wasm()).unwrap();
    for wc in [10, 50, 0, 100] {
        // Whether the i-th packet sent is from C, as computed above.
        let from_c = |i: usize| match wc {
            10 => i % 10 == 9,
            50 => i % 2 == 1,
            0 => i >= 100,
            _ => i < 100,
        };
        let mut ops: Vec<(Nanos, Op)> = Vec::new();
        for id in 0..100 {
            ops.push((0, Op::Arrive(Pkt::new(2 * id, 0, 1500, Ecn::Ect1))));
            ops.push((0, Op::Arrive(Pkt::new(2 * id + 1, 1, 1500, Ecn::NotEct))));
        }
        ops.extend((0..201).map(|_| (0, Op::Serve)));
        let options = [("alpha", 0.0), ("beta", 0.0), ("wc", wc as f64)];
        let mut q: PluginQdisc<Pkt> = plugin.build(&options, 0).unwrap();
        let got = run(&mut q, &PhysicalLimit::default(), &ops);
        assert_eq!(q.error(), None);
        let sent: Vec<bool> = got
            .0
            .iter()
            .filter_map(|e| match e {
                Ev::Sent(p, _) => Some(p.ecn == Ecn::NotEct),
                _ => None,
            })
            .collect();
        assert_eq!(sent.len(), 200, "wc {wc}");
        assert!(got.marks().is_empty() && got.drops().is_empty(), "wc {wc}");
        let expected: Vec<bool> = (0..100).map(from_c).collect();
        assert_eq!(
            sent[..100],
            expected[..],
            "wc {wc}: the first 100 (true: C)"
        );
        // The built-in agrees.
        let params = dualpi2::Params {
            alpha: 0.0,
            beta: 0.0,
            wc,
            ..dualpi2::Params::default()
        };
        let mut b = DualPi2::<Pkt>::build(&params, 0).unwrap();
        same(
            &run(&mut b, &PhysicalLimit::default(), &ops),
            &got,
            &format!("wc {wc}"),
        );
    }
}

#[test]
fn plugin_dualpi2_replays_updates_past_its_limit_as_the_built_in() {
    // dualpi2.rs catches its controller up at every enqueue, also one it drops at its limit,
    // and replays at most 10 000 missed updates per call; dualpi2.c decides the limit in
    // aqmlab_enqueue, so that such an arrival restarts its count too. 30 Not-ECT packets fill
    // limit = 30 at t = 0; arrivals at 6 000 and 12 000 updates (16 ms) are dropped; the 30
    // packets are served at 12 000 updates. The head's age at update i is 16 ms·i, so with
    // α = 5e-7 Hz, β = 0, target 15 ms: p′ = α·Σ (0.016·i − 0.015) = 0.576 over the 12 000
    // updates (0.400 had the first 10 000 been all), and the packets are dropped with p′².
    let (tupdate, n) = (16 * MS, 30);
    let mut ops: Vec<(Nanos, Op)> = (0..n)
        .map(|id| (0, Op::Arrive(Pkt::new(id, 0, 1500, Ecn::NotEct))))
        .collect();
    for (id, i) in [(n, 6_000), (n + 1, 12_000)] {
        ops.push((i * tupdate, Op::Arrive(Pkt::new(id, 0, 1500, Ecn::NotEct))));
    }
    ops.extend((0..n).map(|_| (12_000 * tupdate, Op::Serve)));
    let params = dualpi2::Params {
        alpha: 5e-7,
        beta: 0.0,
        limit: n,
        ..dualpi2::Params::default()
    };
    let mut b = DualPi2::<Pkt>::build(&params, 3).unwrap();
    let built_in = run(&mut b, &PhysicalLimit::default(), &ops);
    let sum: f64 = (1..=12_000).map(|i| 0.016 * i as f64 - 0.015).sum();
    assert!(
        (b.vars.prob - 5e-7 * sum).abs() < 1e-9,
        "p′ = {}",
        b.vars.prob
    );
    assert!((b.vars.prob - 0.576).abs() < 1e-3, "p′ = {}", b.vars.prob);
    let plugin = Plugin::load("dualpi2.wasm", &dualpi2_wasm()).unwrap();
    let options = [("alpha", 5e-7), ("beta", 0.0), ("limit", n as f64)];
    let mut q: PluginQdisc<Pkt> = plugin.build(&options, 3).unwrap();
    let got = run(&mut q, &PhysicalLimit::default(), &ops);
    assert_eq!(q.error(), None);
    same(
        &built_in,
        &got,
        "updates replayed across drops at the limit",
    );
    let (overflow, early): (Vec<_>, Vec<_>) = got
        .drops()
        .into_iter()
        .partition(|d| d.1 == DropReason::Overflow);
    assert_eq!(overflow.len(), 2);
    assert!(
        (3..20).contains(&early.len()),
        "{} of 28 signalled packets dropped at p′² = 0.33",
        early.len()
    );
}

#[test]
fn plugin_dualpi2_declares_dualpi2_rs_s_options() {
    // Names, order, units, bounds and defaults as dualpi2.rs's Options and ABOUT: ecn_mask a
    // choice of the same strings (its bounds the indices), tupdate the timer's period, set by
    // aqmlab_init (none declared); two queues; the limit its own, not the physical buffer's.
    let plugin = Plugin::load("dualpi2.wasm", &dualpi2_wasm()).unwrap();
    let declared = &plugin.info().options;
    let about = dualpi2::Options::ABOUT.options;
    let d = dualpi2::Options::default();
    let defaults = [
        d.target as f64,
        d.tupdate as f64,
        d.alpha,
        d.beta,
        d.k,
        d.step as f64,
        d.min_qlen_step as f64,
        d.wc as f64,
        0.0,
        d.limit as f64,
    ];
    declares_as(declared, about, &defaults);
    let info = plugin.info();
    assert_eq!((info.abi_version, info.n_queues), (2, 2));
    assert_eq!((info.timer_ns, info.sets_timer), (None, true));
    assert_eq!(info.delay_target_option, Some(0));
    let built_in = DualPi2::<Pkt>::build(&dualpi2::Params::default(), 0).unwrap();
    assert_eq!(info.owns_limit, built_in.owns_limit());
    // ecn_mask takes the indices of its two strings only; wc is a percentage.
    for (option, value) in [("ecn_mask", 2.0), ("wc", 101.0)] {
        let e = plugin.build::<Pkt>(&[(option, value)], 0).err().unwrap();
        assert!(
            matches!(&e, plugin::PluginError::Options { message, .. } if message.starts_with(&format!("{option}: "))),
            "{e}"
        );
    }
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
