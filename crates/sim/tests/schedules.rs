//! Schedules with stops: bulk and CBR flows that stop
//! at given times, and the fair shares of flows active for part of the window.

mod common;

use common::*;
use serde_json::{json, Value};

const MBPS: u64 = 1_000_000;

fn with_stop(mut c: Class, start: Value, stop: Value) -> (Class, Value) {
    c.start = start;
    (c, stop)
}

/// `config` with a `stop` schedule per class (Null = none).
fn config_stops(
    rate_bps: u64,
    buffer_bytes: Option<u64>,
    aqm: Value,
    classes: Vec<(Class, Value)>,
    duration_s: f64,
    warmup_s: f64,
    seed: u64,
) -> String {
    let stops: Vec<Value> = classes.iter().map(|(_, s)| s.clone()).collect();
    let cls: Vec<Class> = classes.into_iter().map(|(c, _)| c).collect();
    let mut v: Value = serde_json::from_str(&config(
        rate_bps,
        buffer_bytes,
        None,
        aqm,
        &cls,
        duration_s,
        warmup_s,
        seed,
    ))
    .unwrap();
    for (k, s) in stops.into_iter().enumerate() {
        if !s.is_null() {
            v["classes"][k]["stop"] = s;
        }
    }
    v.to_string()
}

fn at(s: f64) -> Value {
    json!({"kind": "fixed", "at_ns": (s * 1e9).round() as u64})
}

fn staggered(first_s: f64, spacing_s: f64) -> Value {
    json!({"kind": "staggered", "first_ns": (first_s * 1e9).round() as u64, "spacing_ns": (spacing_s * 1e9).round() as u64})
}

fn taildrop() -> Value {
    json!({"kind": "taildrop"})
}

fn bdp_bytes(rate_bps: u64, rtt_ms: f64) -> u64 {
    (rate_bps as f64 * rtt_ms / 1e3 / 8.0) as u64
}

#[test]
fn a_stopped_bulk_flow_sends_exactly_the_new_data_it_had_sent_by_its_stop() {
    // Two CUBIC flows, 100 Mbit/s, 20 ms, a 1-BDP drop-tail buffer (losses, so retransmissions
    // happen); flow 1 stops at 20 s. A run of the same scenario without the stop, ended just
    // before 20 s, sees the same world up to then (same seed): its flow 1 had sent N new
    // segments. The stopped flow must send no new segment after that — only retransmissions —
    // so its new segments over the whole run are N, and all of them are delivered (it drains:
    // delivered = N · MSS, and its sender finishes).
    let t_stop = 20.0;
    let classes = |stop: Value| {
        vec![
            (class("cubic", 1, 20.0), Value::Null),
            with_stop(class("cubic", 1, 20.0), at(0.5), stop),
        ]
    };
    let buf = Some(bdp_bytes(100 * MBPS, 20.0));
    let stopped = run(&config_stops(
        100 * MBPS,
        buf,
        taildrop(),
        classes(at(t_stop)),
        40.0,
        0.0,
        3,
    ));
    // Ended 1 ns before the stop: every event at or after it is left out (the stop runs first
    // among the events at its instant).
    let mut before: Value = serde_json::from_str(&config_stops(
        100 * MBPS,
        buf,
        taildrop(),
        classes(Value::Null),
        t_stop,
        0.0,
        3,
    ))
    .unwrap();
    before["duration_ns"] = json!(20_000_000_000u64 - 1);
    let before = run(&before.to_string());
    let new_segs = |r: &sim::RunResult| {
        col_u64(r, "flows", "segs_sent")[1] - col_u64(r, "flows", "retrans_segs")[1]
    };
    let (n_stopped, n_before) = (new_segs(&stopped), new_segs(&before));
    let retrans_after = col_u64(&stopped, "flows", "retrans_segs")[1]
        - col_u64(&before, "flows", "retrans_segs")[1];
    println!("new segments: by the stop {n_before}, whole run {n_stopped}; retransmissions after the stop {retrans_after}");
    assert_eq!(n_stopped, n_before);
    // Half the link for 19.5 s would be 19.5 · 50e6 / (1448 · 8) ≈ 84 000 segments.
    assert!(n_before > 50_000, "flow 1 was sending: {n_before}");
    assert_eq!(
        col_u64(&stopped, "flows", "delivered_bytes")[1],
        n_before * MSS as u64
    );
    // It finishes (fct_s runs from its start at 0.5 s) soon after the stop: the in-flight data,
    // at most a recovery.
    let finish =
        0.5 + col_opt(&stopped, "flows", "fct_s")[1].expect("the stopped flow drains and finishes");
    assert!(
        finish > t_stop && finish < t_stop + 1.0,
        "finished at {finish} s"
    );
    // The time series: no delivery to flow 1 after the stop beyond what was in flight.
    let t = col_f64(&stopped, "timeseries", "t_s");
    let f = col_u64(&stopped, "timeseries", "flow");
    let thr = col_f64(&stopped, "timeseries", "throughput_bps");
    let late: f64 = (0..t.len())
        .filter(|&i| f[i] == 1 && t[i] > t_stop + 1.0)
        .map(|i| thr[i])
        .sum();
    assert_eq!(late, 0.0);
    assert!(
        !(0..t.len()).any(|i| f[i] == 1 && t[i] > t_stop + 2.0),
        "a finished stopped flow is no longer sampled"
    );
}

#[test]
fn the_remaining_cubic_flow_takes_over_the_link_after_the_other_stops() {
    // Two CUBIC flows share 100 Mbit/s (20 ms, 1-BDP drop-tail buffer); one stops at 15 s.
    // Measured from 20 s to 60 s, the other alone keeps the link busy (CUBIC alone in a 1-BDP
    // buffer: ≈ 1.0, model.md's validation) and gets nearly all of it.
    let buf = Some(bdp_bytes(100 * MBPS, 20.0));
    let cfg = config_stops(
        100 * MBPS,
        buf,
        taildrop(),
        vec![
            (class("cubic", 1, 20.0), Value::Null),
            with_stop(class("cubic", 1, 20.0), at(0.2), at(15.0)),
        ],
        60.0,
        20.0,
        1,
    );
    let r = run(&cfg);
    let u = metric(&r, "utilization");
    let g = col_f64(&r, "flows", "goodput_bps");
    println!(
        "utilization after the stop {u:.4}; goodputs {:.2} / {:.2} Mbit/s",
        g[0] / 1e6,
        g[1] / 1e6
    );
    assert!(u >= 0.9, "utilization {u}");
    assert!(
        g[0] >= 0.9 * 100e6 * 1448.0 / 1500.0,
        "the remaining flow: {}",
        g[0]
    );
    assert_eq!(g[1], 0.0, "the stopped flow delivers nothing in the window");
    // Its fair share in the window is nil, so it is left out of Jain and of its class's
    // relative throughput; the remaining flow's share is the whole link.
    assert_eq!(col_f64(&r, "flows", "fair_share_bps"), vec![100e6, 0.0]);
    assert!(r.summary["classes"][1]["rel_throughput"].is_null());
    assert_eq!(metric(&r, "jain"), 1.0);
}

#[test]
fn a_cbr_flow_with_a_stop_puts_exactly_rate_times_active_time_on_the_wire() {
    // 10 Mbit/s CBR: one 1500-byte datagram every 1500·8/10e6 = 1.2 ms, the first at the start.
    // Class 0: two flows, starts staggered(0 s, 1 s), stops staggered(2.4 s, 2.2 s): flow 0
    // is active [0, 2.4 s), flow 1 [1 s, 4.6 s). Datagrams due in [start, stop): k·1.2 ms <
    // active time ⇒ 2.4/0.0012 = 2000 and 3.6/0.0012 = 3000 — exactly rate × active time.
    // Class 1: one flow, [0.5 s, 1.7 s) at a fixed stop: 1000 datagrams.
    let mut a = cbr(2, 10.0, 10 * MBPS);
    a.start = staggered(0.0, 1.0);
    let mut b = cbr(1, 10.0, 10 * MBPS);
    b.start = at(0.5);
    let cfg = config_stops(
        100 * MBPS,
        Some(1_000_000),
        taildrop(),
        vec![(a, staggered(2.4, 2.2)), (b, at(1.7))],
        6.0,
        0.0,
        1,
    );
    let r = run(&cfg);
    let wire = col_u64(&r, "flows", "wire_bytes_sent");
    assert_eq!(wire, vec![2000 * 1500, 3000 * 1500, 1000 * 1500]);
    assert_eq!(wire[1] as f64 * 8.0, 10e6 * 3.6);
    // 30 Mbit/s at most on a 100 Mbit/s link: nothing is lost, every datagram's 1472 payload
    // bytes are delivered, and the link carried exactly the wire bytes.
    assert_eq!(
        col_u64(&r, "flows", "delivered_bytes"),
        vec![2000 * 1472, 3000 * 1472, 1000 * 1472]
    );
    let u = metric(&r, "utilization");
    assert!(
        (u - 6000.0 * 1500.0 * 8.0 / (100e6 * 6.0)).abs() < 1e-12,
        "utilization {u}"
    );
}

#[test]
fn fair_shares_relative_throughput_and_jain_for_flows_active_part_of_the_window() {
    // The CBR flows above (no loss, so their goodputs are known exactly), measured over
    // [0, 6 s). Fair shares, by hand, from who is active when (C = 100 Mbit/s):
    //   [0, 0.5)   flow 0 alone          → flow 0: C · 0.5
    //   [0.5, 1)   flows 0, 2            → each C/2 · 0.5
    //   [1, 1.7)   flows 0, 1, 2         → each C/3 · 0.7
    //   [1.7, 2.4) flows 0, 1            → each C/2 · 0.7
    //   [2.4, 4.6) flow 1 alone          → flow 1: C · 2.2
    //   [4.6, 6)   nobody
    // share_0 = C(0.5 + 0.25 + 0.7/3 + 0.35)/6, share_1 = C(0.7/3 + 0.35 + 2.2)/6,
    // share_2 = C(0.25 + 0.7/3)/6. Goodput_i = datagrams · 1472 · 8 / 6 s.
    let mut a = cbr(2, 10.0, 10 * MBPS);
    a.start = staggered(0.0, 1.0);
    let mut b = cbr(1, 10.0, 10 * MBPS);
    b.start = at(0.5);
    let cfg = config_stops(
        100 * MBPS,
        Some(1_000_000),
        taildrop(),
        vec![(a, staggered(2.4, 2.2)), (b, at(1.7))],
        6.0,
        0.0,
        1,
    );
    let r = run(&cfg);
    let c = 100e6;
    let share = [
        c * (0.5 + 0.25 + 0.7 / 3.0 + 0.35) / 6.0,
        c * (0.7 / 3.0 + 0.35 + 2.2) / 6.0,
        c * (0.25 + 0.7 / 3.0) / 6.0,
    ];
    let good = [
        2000.0 * 1472.0 * 8.0 / 6.0,
        3000.0 * 1472.0 * 8.0 / 6.0,
        1000.0 * 1472.0 * 8.0 / 6.0,
    ];
    let got = col_f64(&r, "flows", "fair_share_bps");
    for k in 0..3 {
        assert!(
            (got[k] - share[k]).abs() < 1e-6,
            "share {k}: {} vs {}",
            got[k],
            share[k]
        );
    }
    // Class 0's relative throughput: its bytes over its fair bytes; class 1's likewise.
    let rel0 = (good[0] + good[1]) / (share[0] + share[1]);
    let rel1 = good[2] / share[2];
    let rel = |k: usize| r.summary["classes"][k]["rel_throughput"].as_f64().unwrap();
    assert!(
        (rel(0) - rel0).abs() < 1e-12 && (rel(1) - rel1).abs() < 1e-12,
        "{} {} vs {rel0} {rel1}",
        rel(0),
        rel(1)
    );
    // Jain over the normalized throughputs x_i = goodput_i / share_i.
    let x: Vec<f64> = (0..3).map(|k| good[k] / share[k]).collect();
    let jain = x.iter().sum::<f64>().powi(2) / (3.0 * x.iter().map(|v| v * v).sum::<f64>());
    assert!(
        (metric(&r, "jain") - jain).abs() < 1e-12,
        "jain {} vs {jain}",
        metric(&r, "jain")
    );
    let stops: Vec<Option<f64>> = col_opt(&r, "flows", "stop_s");
    assert_eq!(stops, vec![Some(2.4), Some(4.6), Some(1.7)]);
}

#[test]
fn stops_are_deterministic_by_seed_and_drawn_apart_from_the_starts() {
    let mk = |seed: u64, stop: Value| {
        let mut c = class("cubic", 4, 20.0);
        c.start = json!({"kind": "uniform", "lo_ns": 0u64, "hi_ns": 1_000_000_000u64});
        config_stops(
            50 * MBPS,
            Some(bdp_bytes(50 * MBPS, 20.0)),
            taildrop(),
            vec![(c, stop)],
            12.0,
            0.0,
            seed,
        )
    };
    let uni = json!({"kind": "uniform", "lo_ns": 4_000_000_000u64, "hi_ns": 8_000_000_000u64});
    let (a, b, other) = (
        run(&mk(5, uni.clone())),
        run(&mk(5, uni.clone())),
        run(&mk(6, uni)),
    );
    assert_eq!(a.tables, b.tables);
    assert_ne!(
        col_opt(&a, "flows", "stop_s"),
        col_opt(&other, "flows", "stop_s")
    );
    // Adding stops does not move the starts (their own random stream).
    let none = run(&mk(5, Value::Null));
    assert_eq!(
        col_f64(&a, "flows", "start_s"),
        col_f64(&none, "flows", "start_s")
    );
    for s in col_opt(&a, "flows", "stop_s") {
        let s = s.unwrap();
        assert!((4.0..=8.0).contains(&s), "stop {s}");
    }
}

#[test]
fn bad_stops_are_refused_naming_the_key() {
    let err = |classes: Vec<(Class, Value)>| {
        let cfg = config_stops(50 * MBPS, Some(100_000), taildrop(), classes, 10.0, 0.0, 1);
        sim::run_json(&cfg, &mut |_| true)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    // Flow 2 of staggered(0, 2 s) starts at 4 s; staggered(3 s, 0.5 s) stops it at 4 s.
    let mut c = class("cubic", 3, 20.0);
    c.start = staggered(0.0, 2.0);
    let e = err(vec![(c, staggered(3.0, 0.5))]);
    assert!(
        e.starts_with(
            "flows[0].stop: flow 2 of the class could stop at 4 s, not after its start at 4 s"
        ),
        "{e}"
    );
    let mut c = class("cubic", 1, 20.0);
    c.size_bytes = Some(100_000);
    let e = err(vec![(c, at(5.0))]);
    assert!(
        e.starts_with("flows[0].stop: a stop is for bulk and cbr flows"),
        "{e}"
    );
    let e = err(vec![(
        class("cubic", 1, 20.0),
        json!({"kind": "uniform", "lo_ns": 5u64, "hi_ns": 4u64}),
    )]);
    assert!(
        e.starts_with("flows[0].stop: uniform(a, b) needs a <= b"),
        "{e}"
    );
    // A uniform start may run up to its upper bound: a stop must come after that.
    let mut c = class("cubic", 1, 20.0);
    c.start = json!({"kind": "uniform", "lo_ns": 0u64, "hi_ns": 2_000_000_000u64});
    let e = err(vec![(c, at(1.0))]);
    assert!(
        e.starts_with(
            "flows[0].stop: flow 0 of the class could stop at 1 s, not after its start at 2 s"
        ),
        "{e}"
    );
}
