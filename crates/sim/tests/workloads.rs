//! Arrival workloads and completion-time metrics.

mod common;

use common::*;
use serde_json::{json, Value};

const MBPS: u64 = 1_000_000;

fn workload_class(cc: &str, rtt_ms: f64, rate_per_s: f64, size: Value) -> Class {
    let mut c = class(cc, 0, rtt_ms);
    c.cc = json!({"name": cc});
    c.size_bytes = None;
    c.start = json!({"kind": "fixed", "at_ns": 0});
    c.workload =
        Some(json!({"rate_per_s": rate_per_s, "size": size, "start_ns": 0, "stop_ns": null}));
    c
}

/// Kolmogorov–Smirnov statistic of samples against a CDF.
fn ks(mut xs: Vec<f64>, cdf: impl Fn(f64) -> f64) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    let n = xs.len() as f64;
    xs.iter()
        .enumerate()
        .map(|(i, &x)| {
            let f = cdf(x);
            (f - i as f64 / n).abs().max(((i + 1) as f64 / n - f).abs())
        })
        .fold(0.0, f64::max)
}

#[test]
fn poisson_arrivals_and_bounded_pareto_sizes_match_their_configuration() {
    // 30 flows/s for 200 s of 1 KB–1 MB bounded-Pareto flows (α = 1.2) on an idle 1 Gbps path:
    // the count is Poisson(6000) (±4σ = ±310), the inter-arrival times exponential and the
    // sizes the bounded Pareto — each by a Kolmogorov–Smirnov test at the 1 % level
    // (critical value 1.63/√n).
    let (rate, alpha, lo, hi) = (30.0, 1.2, 1000.0, 1_000_000.0);
    let size = json!({"dist": "pareto", "alpha": alpha, "lo": lo as u64, "hi": hi as u64});
    let cfg = config(
        1000 * MBPS,
        Some(10_000_000),
        None,
        json!({"kind": "taildrop"}),
        &[workload_class("cubic", 2.0, rate, size)],
        200.0,
        0.0,
        11,
    );
    let r = run(&cfg);
    let starts = col_f64(&r, "fct", "start_s");
    let sizes: Vec<f64> = col_u64(&r, "fct", "size_bytes")
        .iter()
        .map(|&s| s as f64)
        .collect();
    let n = starts.len() as f64;
    println!("{n} arrivals");
    assert!((n - 6000.0).abs() <= 4.0 * 6000f64.sqrt(), "{n} arrivals");
    let mut gaps: Vec<f64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.push(starts[0]);
    let d_gap = ks(gaps, |x| 1.0 - (-rate * x).exp());
    // Sizes are floored to whole bytes: compare against the CDF at x + 1 (the largest size
    // that floors to x).
    let pareto =
        |x: f64| ((1.0 - (lo / x).powf(alpha)) / (1.0 - (lo / hi).powf(alpha))).clamp(0.0, 1.0);
    let d_size = ks(sizes.clone(), |x| pareto((x + 1.0).min(hi)));
    let crit = 1.63 / n.sqrt();
    println!("KS: gaps {d_gap:.4}, sizes {d_size:.4}, critical {crit:.4}");
    assert!(
        d_gap < crit,
        "inter-arrival times are not exponential: D = {d_gap:.4}"
    );
    assert!(
        d_size < crit,
        "sizes are not the bounded Pareto: D = {d_size:.4}"
    );
    assert!(sizes.iter().all(|&s| (lo..=hi).contains(&s)));
}

#[test]
fn short_flows_finish_far_sooner_under_fq_codel_than_behind_a_deep_taildrop_queue() {
    // The effect the dynamic experiment of De Schepper et al. (DualQ) relies on: short flows arriving beside bulk
    // CUBIC traffic wait behind the bulk flows' standing queue in a deep drop-tail buffer
    // (here 10 BDP ≈ 200 ms), while FQ-CoDel gives each new flow its own queue with priority.
    // Expect the < 100 KB flows' mean FCT at least 5× lower under FQ-CoDel.
    let bdp = (40.0e6 / 8.0 * 0.02) as u64;
    let short = json!({"dist": "pareto", "alpha": 1.2, "lo": 1000, "hi": 1_000_000});
    let mk = |aqm: Value| {
        config(
            40 * MBPS,
            Some(10 * bdp),
            None,
            aqm,
            &[
                class("cubic", 2, 20.0),
                workload_class("cubic", 20.0, 10.0, short.clone()),
            ],
            40.0,
            5.0,
            3,
        )
    };
    let td = run(&mk(json!({"kind": "taildrop"})));
    let fq = run(&mk(
        json!({"kind": "fq_codel", "limit": 10240, "memory_limit": {"bytes": 33_554_432u64}}),
    ));
    let small = |r: &sim::RunResult| r.summary["fct"][0]["fct_s"]["mean"].as_f64().unwrap();
    let (a, b) = (small(&td), small(&fq));
    println!(
        "mean FCT of < 100 KB flows: taildrop {a:.3} s, fq_codel {b:.3} s (ratio {:.1})",
        a / b
    );
    assert_eq!(td.summary["fct"][0]["bin"], "<100KB");
    assert!(a / b >= 5.0, "taildrop {a:.3} s vs fq_codel {b:.3} s");
    assert!(metric(&fq, "utilization") > 0.9);
}

#[test]
fn unfinished_flows_are_counted_never_averaged_away() {
    // Arrivals continue to the end, so the last flows cannot finish: per bin, flows =
    // completed + unfinished, and the totals match the fct table and the counters.
    let size = json!({"dist": "fixed", "bytes": 2_000_000});
    let cfg = config(
        20 * MBPS,
        Some(200_000),
        None,
        json!({"kind": "taildrop"}),
        &[workload_class("reno", 20.0, 2.0, size)],
        20.0,
        0.0,
        5,
    );
    let r = run(&cfg);
    let bins = r.summary["fct"].as_array().unwrap();
    let (mut flows, mut done, mut open) = (0, 0, 0);
    for b in bins {
        let (f, c, u) = (
            b["flows"].as_u64().unwrap(),
            b["completed"].as_u64().unwrap(),
            b["unfinished"].as_u64().unwrap(),
        );
        assert_eq!(f, c + u);
        flows += f;
        done += c;
        open += u;
    }
    let completed = match r.table("fct").get("completed") {
        Some(sim::results::Column::Bool(v)) => v.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(flows as usize, completed.len());
    assert_eq!(done as usize, completed.iter().filter(|&&c| c).count());
    assert!(open >= 1, "the last arrivals cannot finish");
    assert_eq!(r.counters["unfinished_flows"].as_u64().unwrap(), open);
    // 2 MB flows all fall in the ≥ 1 MB bin.
    assert_eq!(bins[2]["flows"].as_u64().unwrap(), flows);
}

#[test]
fn workloads_are_reproducible_from_the_seed() {
    let size = json!({"dist": "lognormal", "mu": 9.0, "sigma": 1.5});
    let mk = |seed| {
        config(
            50 * MBPS,
            Some(500_000),
            None,
            json!({"kind": "taildrop"}),
            &[
                class("cubic", 1, 10.0),
                workload_class("dctcp", 10.0, 20.0, size.clone()),
            ],
            5.0,
            0.0,
            seed,
        )
    };
    let (a, b, c) = (run(&mk(1)), run(&mk(1)), run(&mk(2)));
    assert_eq!(a.table("fct"), b.table("fct"));
    assert_ne!(a.table("fct"), c.table("fct"));
}

#[test]
fn flow_plan_is_what_the_world_runs() {
    // A bulk class with uniform starts and stops, a finite CBR class, and two workloads (one
    // with a fixed size, one from a distribution, one bounded by its own start and stop):
    // `flow_plan` (the emulator's source of flows) must list exactly the flows World::new
    // builds, in id order, and the run's own tables must show the same starts and sizes.
    let mut wl_fixed = workload_class(
        "reno",
        20.0,
        40.0,
        json!({"dist": "fixed", "bytes": 20_000}),
    );
    wl_fixed.workload.as_mut().unwrap()["start_ns"] = json!(500_000_000u64);
    wl_fixed.workload.as_mut().unwrap()["stop_ns"] = json!(2_000_000_000u64);
    let wl_pareto = workload_class(
        "cubic",
        10.0,
        30.0,
        json!({"dist": "pareto", "alpha": 1.2, "lo": 1000, "hi": 1_000_000}),
    );
    let mut bulk = class("cubic", 3, 10.0);
    bulk.start = json!({"kind": "uniform", "lo_ns": 0, "hi_ns": 1_000_000_000u64});
    let mut c = cbr(2, 10.0, 2 * MBPS);
    c.size_bytes = Some(100_000);
    c.start = json!({"kind": "staggered", "first_ns": 1_000_000, "spacing_ns": 7_000_000});
    let mut v: Value = serde_json::from_str(&config(
        30 * MBPS,
        Some(100_000),
        None,
        json!({"kind": "taildrop"}),
        &[bulk, wl_fixed, c, wl_pareto],
        3.0,
        1.0,
        5,
    ))
    .unwrap();
    v["classes"][0]["stop"] =
        json!({"kind": "uniform", "lo_ns": 2_000_000_000u64, "hi_ns": 2_500_000_000u64});
    let cfg = sim::EngineConfig::from_json(&v.to_string()).unwrap();
    let plan = sim::world::flow_plan(&cfg).unwrap();
    let world = sim::World::new(cfg).unwrap();
    let built: Vec<sim::world::PlannedFlow> = world
        .flows
        .iter()
        .map(|f| sim::world::PlannedFlow {
            class: f.class,
            start_ns: f.start_ns,
            stop_ns: f.stop_ns,
            size_bytes: f.size_bytes,
        })
        .collect();
    assert_eq!(plan, built);
    // By hand: the classes in order; the bulk flows' draws within their bounds; the fixed
    // workload's arrivals increasing inside [0.5 s, 2 s) with 20 kB each (≈ 1.5 s · 40/s = 60
    // of them, Poisson: ±4σ ≈ ±31); the CBR flows staggered 1 ms + i·7 ms.
    let of = |k: usize| {
        plan.iter()
            .filter(|p| p.class == k)
            .copied()
            .collect::<Vec<_>>()
    };
    assert_eq!(of(0).len(), 3);
    assert!(of(0).iter().all(|p| p.start_ns <= 1_000_000_000
        && (2_000_000_000..=2_500_000_000).contains(&p.stop_ns.unwrap())
        && p.size_bytes.is_none()));
    let fixed = of(1);
    assert!(
        (fixed.len() as f64 - 60.0).abs() <= 31.0,
        "{} arrivals",
        fixed.len()
    );
    assert!(fixed.windows(2).all(|w| w[0].start_ns <= w[1].start_ns));
    assert!(fixed
        .iter()
        .all(|p| (500_000_000..2_000_000_000).contains(&p.start_ns)
            && p.size_bytes == Some(20_000)
            && p.stop_ns.is_none()));
    assert_eq!(
        of(2)
            .iter()
            .map(|p| (p.start_ns, p.size_bytes))
            .collect::<Vec<_>>(),
        vec![(1_000_000, Some(100_000)), (8_000_000, Some(100_000))]
    );
    assert!(of(3)
        .iter()
        .all(|p| (1000..=1_000_000).contains(&p.size_bytes.unwrap())));
    let r = world.run(&mut |_| true).unwrap();
    let finite: Vec<&sim::world::PlannedFlow> =
        plan.iter().filter(|p| p.size_bytes.is_some()).collect();
    assert_eq!(
        col_u64(&r, "fct", "size_bytes"),
        finite
            .iter()
            .map(|p| p.size_bytes.unwrap())
            .collect::<Vec<_>>()
    );
    assert_eq!(
        col_f64(&r, "fct", "start_s"),
        finite
            .iter()
            .map(|p| p.start_ns as f64 / 1e9)
            .collect::<Vec<_>>()
    );
}
