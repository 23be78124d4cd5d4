//! The run estimate (`sim::estimate`) against what a real run produces.

mod common;

use common::*;
use serde_json::json;
use sim::estimate::{estimate, FCT_COLUMNS, FLOWS_COLUMNS, QUEUE_COLUMNS, TIMESERIES_COLUMNS};

#[test]
fn table_widths_are_the_real_tables_widths() {
    // The estimate counts cells of the tables `results::collect` builds; a real run's tables are
    // the independent count.
    let mut fin = class("cubic", 2, 10.0);
    fin.size_bytes = Some(20_000);
    let cfg = config(
        10_000_000,
        Some(100_000),
        None,
        json!({"kind": "taildrop"}),
        &[class("reno", 2, 10.0), fin],
        0.5,
        0.0,
        1,
    );
    let r = run(&cfg);
    let width = |t: &str| r.table(t).columns.len() as u64;
    assert_eq!(width("timeseries"), TIMESERIES_COLUMNS);
    assert_eq!(width("queue"), QUEUE_COLUMNS);
    assert_eq!(width("flows"), FLOWS_COLUMNS);
    assert_eq!(width("fct"), FCT_COLUMNS);
}

#[test]
fn bulk_flows_carry_the_link_capacity_and_the_run_agrees() {
    // 2 Reno flows on 10 Mbit/s for 2 s: 10e6 · 2 / (8 · 1500) = 1666.7 packets at most; the
    // run, after its slow start, carries within 10 % of them.
    let cfg = config(
        10_000_000,
        Some(100_000),
        None,
        json!({"kind": "taildrop"}),
        &[class("reno", 2, 10.0)],
        2.0,
        0.0,
        1,
    );
    let e = estimate(&sim::EngineConfig::from_json(&cfg).unwrap());
    assert_eq!(e.bottleneck_packets, 1667);
    let r = run(&cfg);
    let carried = r.counters["bottleneck_pkts"].as_u64().unwrap() as f64;
    assert!((carried / 1666.7 - 1.0).abs() < 0.1, "{carried} packets");
}

#[test]
fn the_world_refuses_a_plan_it_cannot_allocate() {
    // u32::MAX flows of over a kilobyte each: more than any address space allows, refused
    // as an error value, not an abort.
    let mut c = class("cubic", u32::MAX, 10.0);
    c.start = json!({"kind": "fixed", "at_ns": 0});
    let cfg = config(
        10_000_000,
        Some(100_000),
        None,
        json!({"kind": "taildrop"}),
        &[c],
        0.1,
        0.0,
        1,
    );
    let cfg = sim::EngineConfig::from_json(&cfg).unwrap();
    sim::world::check(&cfg).unwrap();
    match sim::World::new(cfg) {
        Err(sim::RunError::OutOfMemory(m)) => assert!(m.contains("flow"), "{m}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("4 G flows allocated"),
    }
}
