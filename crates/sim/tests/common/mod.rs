//! Shared helpers for the simulator's integration tests: build engine configs in code.
#![allow(dead_code)]

use serde_json::{json, Value};
use sim::results::{Column, RunResult};

pub const MSS: f64 = 1448.0;

pub struct Class {
    pub cc: Value,
    pub count: u32,
    pub rtt_ms: f64,
    pub ecn: bool,
    pub start: Value,
    pub size_bytes: Option<u64>,
    /// Some(rate): an unresponsive CBR class instead of TCP.
    pub cbr_rate_bps: Option<u64>,
    /// Some(workload JSON): Poisson arrivals of finite flows instead of `count` flows.
    pub workload: Option<Value>,
}

pub fn class(cc: &str, count: u32, rtt_ms: f64) -> Class {
    Class {
        cc: json!({"name": cc}),
        count,
        rtt_ms,
        ecn: false,
        start: json!({"kind": "fixed", "at_ns": 0}),
        size_bytes: None,
        cbr_rate_bps: None,
        workload: None,
    }
}

pub fn cbr(count: u32, rtt_ms: f64, rate_bps: u64) -> Class {
    Class {
        cc: Value::Null,
        cbr_rate_bps: Some(rate_bps),
        ..class("reno", count, rtt_ms)
    }
}

// Every test states its scenario in one call, the bottleneck's knobs then the classes and the
// run's: eight arguments, each named where it is read.
#[allow(clippy::too_many_arguments)]
pub fn config(
    rate_bps: u64,
    buffer_bytes: Option<u64>,
    buffer_packets: Option<u64>,
    aqm: Value,
    classes: &[Class],
    duration_s: f64,
    warmup_s: f64,
    seed: u64,
) -> String {
    let cls: Vec<Value> = classes
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({
                "name": format!("c{i}"), "cc": c.cc, "cbr_rate_bps": c.cbr_rate_bps, "count": c.count, "rtt_ns": (c.rtt_ms * 1e6) as u64,
                "ecn": c.ecn, "start": c.start, "size_bytes": c.size_bytes, "fq_pacing": false, "workload": c.workload,
            })
        })
        .collect();
    json!({
        "name": "test", "seed": seed,
        "duration_ns": (duration_s * 1e9) as u64, "warmup_ns": (warmup_s * 1e9) as u64,
        "bottleneck": {"rate_bps": rate_bps, "buffer_packets": buffer_packets, "buffer_bytes": buffer_bytes, "aqm": aqm, "rtt_ref_ns": 10000000},
        "classes": cls,
        "measure": {"interval_ns": 100_000_000u64, "hist_bin_ns": 1_000_000u64},
        // Ideal hosts (see `with_offloads`).
        "host": {"offloads": false, "ideal": true},
    })
    .to_string()
}

pub fn run(cfg: &str) -> RunResult {
    sim::run_json(cfg, &mut |_| true).expect("run succeeds")
}

pub fn metric(r: &RunResult, key: &str) -> f64 {
    r.summary["metrics"][key]
        .as_f64()
        .unwrap_or_else(|| panic!("metric {key}"))
}

pub fn col_f64(r: &RunResult, table: &str, col: &str) -> Vec<f64> {
    r.table(table).f64(col)
}

pub fn col_u64(r: &RunResult, table: &str, col: &str) -> Vec<u64> {
    r.table(table).u64(col)
}

pub fn col_opt(r: &RunResult, table: &str, col: &str) -> Vec<Option<f64>> {
    match r.table(table).get(col) {
        Some(Column::OptF64(v)) => v.clone(),
        other => panic!("{col}: {other:?}"),
    }
}

/// Mean cwnd (segments) of flow `flow` over time-series samples with t ≥ from_s.
pub fn mean_cwnd(r: &RunResult, flow: u64, from_s: f64) -> f64 {
    let t = col_f64(r, "timeseries", "t_s");
    let f = col_u64(r, "timeseries", "flow");
    let w = col_u64(r, "timeseries", "cwnd");
    let xs: Vec<f64> = (0..t.len())
        .filter(|&i| f[i] == flow && t[i] >= from_s)
        .map(|i| w[i] as f64)
        .collect();
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Give a config's hosts Linux's offloads (`link::config::HostConfig::linux`) with `knobs`
/// (e.g. `{"nic_rate_bps": ...}`) on top. `config` builds ideal hosts: the analytic oracles
/// of these tests assume every segment is sent and acknowledged on its own.
pub fn with_offloads(cfg: &str, knobs: Value) -> String {
    let mut v: Value = serde_json::from_str(cfg).unwrap();
    let mut host = serde_json::to_value(link::config::HostConfig::linux()).unwrap();
    for (k, x) in knobs.as_object().unwrap() {
        host[k] = x.clone();
    }
    v["host"] = host;
    v.to_string()
}

/// Add a packet-value marker (`{"rate_window_ns": ..., "class_weights": [...]}`) to a config.
pub fn with_marker(cfg: &str, marker: Value) -> String {
    let mut v: Value = serde_json::from_str(cfg).unwrap();
    v["marker"] = marker;
    v.to_string()
}
