//! Arrival workloads and completion-time metrics (issue "Traffic beyond bulk flows").

mod common;

use common::*;
use serde_json::{json, Value};

const MBPS: u64 = 1_000_000;

fn workload_class(cc: &str, rtt_ms: f64, rate_per_s: f64, size: Value) -> Class {
    let mut c = class(cc, 0, rtt_ms);
    c.cc = json!({"name": cc});
    c.size_bytes = None;
    c.start = json!({"kind": "fixed", "at_ns": 0});
    let mut c = c;
    c.workload = Some(json!({"rate_per_s": rate_per_s, "size": size, "start_ns": 0, "stop_ns": null}));
    c
}

/// Kolmogorov–Smirnov statistic of samples against a CDF.
fn ks(mut xs: Vec<f64>, cdf: impl Fn(f64) -> f64) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    let n = xs.len() as f64;
    xs.iter().enumerate().map(|(i, &x)| {
        let f = cdf(x);
        (f - i as f64 / n).abs().max(((i + 1) as f64 / n - f).abs())
    }).fold(0.0, f64::max)
}

#[test]
fn poisson_arrivals_and_bounded_pareto_sizes_match_their_configuration() {
    // 30 flows/s for 200 s of 1 KB–1 MB bounded-Pareto flows (α = 1.2) on an idle 1 Gbps path:
    // the count is Poisson(6000) (±4σ = ±310), the inter-arrival times exponential and the
    // sizes the bounded Pareto — each by a Kolmogorov–Smirnov test at the 1 % level
    // (critical value 1.63/√n).
    let (rate, alpha, lo, hi) = (30.0, 1.2, 1000.0, 1_000_000.0);
    let size = json!({"dist": "pareto", "alpha": alpha, "lo": lo as u64, "hi": hi as u64});
    let cfg = config(1000 * MBPS, Some(10_000_000), None, json!({"kind": "taildrop"}), &[workload_class("cubic", 2.0, rate, size)], 200.0, 0.0, 11);
    let r = run(&cfg);
    let starts = col_f64(&r, "fct", "start_s");
    let sizes: Vec<f64> = col_u64(&r, "fct", "size_bytes").iter().map(|&s| s as f64).collect();
    let n = starts.len() as f64;
    println!("{n} arrivals");
    assert!((n - 6000.0).abs() <= 4.0 * 6000f64.sqrt(), "{n} arrivals");
    let mut gaps: Vec<f64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.push(starts[0]);
    let d_gap = ks(gaps, |x| 1.0 - (-rate * x).exp());
    // Sizes are floored to whole bytes: compare against the CDF at x + 1 (the largest size
    // that floors to x).
    let pareto = |x: f64| ((1.0 - (lo / x).powf(alpha)) / (1.0 - (lo / hi).powf(alpha))).clamp(0.0, 1.0);
    let d_size = ks(sizes.clone(), |x| pareto((x + 1.0).min(hi)));
    let crit = 1.63 / n.sqrt();
    println!("KS: gaps {d_gap:.4}, sizes {d_size:.4}, critical {crit:.4}");
    assert!(d_gap < crit, "inter-arrival times are not exponential: D = {d_gap:.4}");
    assert!(d_size < crit, "sizes are not the bounded Pareto: D = {d_size:.4}");
    assert!(sizes.iter().all(|&s| (lo..=hi).contains(&s)));
}

#[test]
fn short_flows_finish_far_sooner_under_fq_codel_than_behind_a_deep_taildrop_queue() {
    // The effect seed 002's dynamic experiment relies on: short flows arriving beside bulk
    // CUBIC traffic wait behind the bulk flows' standing queue in a deep drop-tail buffer
    // (here 10 BDP ≈ 200 ms), while FQ-CoDel gives each new flow its own queue with priority.
    // Expect the < 100 KB flows' mean FCT at least 5× lower under FQ-CoDel.
    let bdp = (40.0e6 / 8.0 * 0.02) as u64;
    let short = json!({"dist": "pareto", "alpha": 1.2, "lo": 1000, "hi": 1_000_000});
    let mk = |aqm: Value| config(40 * MBPS, Some(10 * bdp), None, aqm, &[class("cubic", 2, 20.0), workload_class("cubic", 20.0, 10.0, short.clone())], 40.0, 5.0, 3);
    let td = run(&mk(json!({"kind": "taildrop"})));
    let fq = run(&mk(json!({"kind": "fq_codel", "limit": 10240, "memory_limit": 33_554_432u64})));
    let small = |r: &sim::RunResult| r.summary["fct"][0]["fct_s"]["mean"].as_f64().unwrap();
    let (a, b) = (small(&td), small(&fq));
    println!("mean FCT of < 100 KB flows: taildrop {a:.3} s, fq_codel {b:.3} s (ratio {:.1})", a / b);
    assert_eq!(td.summary["fct"][0]["bin"], "<100KB");
    assert!(a / b >= 5.0, "taildrop {a:.3} s vs fq_codel {b:.3} s");
    assert!(metric(&fq, "utilization") > 0.9);
}

#[test]
fn unfinished_flows_are_counted_never_averaged_away() {
    // Arrivals continue to the end, so the last flows cannot finish: per bin, flows =
    // completed + unfinished, and the totals match the fct table and the counters.
    let size = json!({"dist": "fixed", "bytes": 2_000_000});
    let cfg = config(20 * MBPS, Some(200_000), None, json!({"kind": "taildrop"}), &[workload_class("reno", 20.0, 2.0, size)], 20.0, 0.0, 5);
    let r = run(&cfg);
    let bins = r.summary["fct"].as_array().unwrap();
    let (mut flows, mut done, mut open) = (0, 0, 0);
    for b in bins {
        let (f, c, u) = (b["flows"].as_u64().unwrap(), b["completed"].as_u64().unwrap(), b["unfinished"].as_u64().unwrap());
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
    let mk = |seed| config(50 * MBPS, Some(500_000), None, json!({"kind": "taildrop"}), &[class("cubic", 1, 10.0), workload_class("dctcp", 10.0, 20.0, size.clone())], 5.0, 0.0, seed);
    let (a, b, c) = (run(&mk(1)), run(&mk(1)), run(&mk(2)));
    assert_eq!(a.table("fct"), b.table("fct"));
    assert_ne!(a.table("fct"), c.table("fct"));
}
