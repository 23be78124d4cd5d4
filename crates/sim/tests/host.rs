//! The host model (`[host]` with offloads; docs/model.md "Host model") in whole runs: GRO's
//! stretch ACKs, TCP Small Queues behind a NIC no faster than the bottleneck, and conservation
//! with packets held at NICs and in GRO. Run in release mode (`cargo test --release`).

mod common;

use common::*;
use serde_json::json;

const GBPS: u64 = 1_000_000_000;
const MBPS: u64 = 1_000_000;

fn counter(r: &sim::RunResult, key: &str) -> u64 {
    r.counters[key].as_u64().unwrap_or_else(|| panic!("counter {key}"))
}

/// Data segments per ACK of a one-flow run.
fn segs_per_ack(r: &sim::RunResult) -> f64 {
    col_u64(r, "flows", "segs_received")[0] as f64 / counter(r, "acks_sent") as f64
}

#[test]
fn gro_makes_one_stretch_ack_per_poll_of_a_saturated_link() {
    // One Reno flow keeps a 1 Gbit/s link busy (a 2-BDP buffer never empties after slow start),
    // so segments reach the receiver every 1500·8/1e9 s = 12 µs. Polls come at most every
    // rx_coalesce = 50 µs, each taking the ≈ 50/12 = 4.17 segments that arrived since the
    // last; every GRO packet of two or more full segments is ACKed at once, as one ACK
    // (__tcp_ack_snd_check: more than one rcv_mss unacknowledged). The sender's 1 ms TSval
    // tick splits about one poll in 20 (1 ms / 50 µs), so ≈ 4 segments per ACK; ideal hosts
    // ACK every second segment.
    let base = config(GBPS, Some(2 * 1_250_000), None, json!({"kind": "taildrop"}), &[class("reno", 1, 10.0)], 3.0, 0.0, 1);
    let linux = run(&with_offloads(&base, json!({})));
    let ratio = segs_per_ack(&linux);
    println!("offloads: {ratio:.2} segments per ACK, {} GRO packets", counter(&linux, "gro_packets"));
    assert!((3.5..=4.5).contains(&ratio), "{ratio}");
    // rx_coalesce = 0: a poll per arrival, so GRO never finds two segments together and the
    // delayed-ACK rule gives one ACK per two segments again.
    let no_moderation = run(&with_offloads(&base, json!({"rx_coalesce_ns": 0})));
    let ratio = segs_per_ack(&no_moderation);
    assert!((1.8..=2.2).contains(&ratio), "{ratio}");
    assert_eq!(counter(&no_moderation, "gro_packets"), col_u64(&no_moderation, "flows", "segs_received")[0]);
    // The link stays full either way.
    assert!(metric(&linux, "utilization") > 0.95);
}

#[test]
fn tsq_keeps_the_queue_of_a_nic_as_slow_as_the_bottleneck_short() {
    // NIC = bottleneck = 100 Mbit/s: packets leave the NIC already spaced for the link, so the
    // bottleneck never queues (sojourn ≈ 0, no drop) and any standing queue sits in the NIC.
    // TCP Small Queues (tcp_small_queue_check) stop the flow once more than max(2 skbs,
    // pacing_rate >> 10) bytes wait there, so at most 3 skbs do. TSO autosizing makes an skb
    // ≈ 1 ms of the pacing rate (20 ms of min_rtt add nothing: 65 536 >> 39), and CUBIC paces
    // (had it pacing) at 1.2 × cwnd/srtt: the NIC holds ≤ 3 × 1.2 = 3.6 ms of link time, so
    // srtt ≤ 20 + 3.6 ms plus the receiver's 50 µs polls — below 25 ms. Without TSQ nothing
    // would ever drop, CUBIC's window would grow without bound and the RTT with it.
    let base = config(100 * MBPS, None, Some(10_000), json!({"kind": "taildrop"}), &[class("cubic", 1, 20.0)], 10.0, 2.0, 1);
    let r = run(&with_offloads(&base, json!({"nic_rate_bps": 100 * MBPS})));
    assert_eq!(col_u64(&r, "flows", "total_dropped_pkts")[0], 0);
    assert!(metric(&r, "utilization") > 0.99, "{}", metric(&r, "utilization"));
    assert!(r.summary["metrics"]["sojourn_ms"]["max"].as_f64().unwrap() < 0.2);
    let srtt_ms = col_f64(&r, "timeseries", "srtt_ms");
    let last = *srtt_ms.last().unwrap();
    println!("srtt at the end {last:.2} ms, cwnd at the end {}", col_u64(&r, "timeseries", "cwnd").last().unwrap());
    assert!(last < 25.0, "srtt {last} ms");
}

/// Every segment sent is received, dropped, or still in the network — at a NIC and in GRO
/// included.
fn assert_conservation(r: &sim::RunResult) {
    let sent = col_u64(r, "flows", "segs_sent");
    let recv = col_u64(r, "flows", "segs_received");
    let dropped = col_u64(r, "flows", "total_dropped_pkts");
    let innet = col_u64(r, "flows", "end_in_network_pkts");
    for f in 0..sent.len() {
        assert_eq!(sent[f], recv[f] + dropped[f] + innet[f], "flow {f}: sent = received + dropped + in network");
    }
}

#[test]
fn conservation_with_offloads() {
    // Drops (a 20-packet buffer), marks (DCTCP under STEP) and a CBR flow, with slow NICs so
    // that packets are queued at them, and a long GRO interval so that some wait for a poll,
    // when the run ends.
    let mut classes = vec![class("cubic", 3, 20.0), class("dctcp", 2, 10.0), cbr(1, 10.0, 20 * MBPS)];
    classes[0].ecn = true;
    let base = config(100 * MBPS, None, Some(20), json!({"kind": "step", "threshold_bytes": 15_000}), &classes, 5.3, 0.0, 4);
    let r = run(&with_offloads(&base, json!({"nic_rate_bps": 200 * MBPS, "rx_coalesce_ns": 200_000})));
    assert!(col_u64(&r, "flows", "total_dropped_pkts").iter().sum::<u64>() > 10);
    assert!(col_u64(&r, "flows", "total_marked_pkts").iter().sum::<u64>() > 10);
    assert_conservation(&r);
}

#[test]
fn ideal_hosts_are_the_hosts_without_offloads_and_linux_hosts_differ() {
    // `offloads: false` is the model without any host: the same run, bit for bit, whatever
    // the (unused) knobs say; with offloads the ACK clock changes, and so do the results.
    let base = config(GBPS, Some(1_250_000), None, json!({"kind": "taildrop"}), &[class("cubic", 2, 10.0)], 2.0, 0.5, 3);
    let ideal = run(&base);
    let mut v: serde_json::Value = serde_json::from_str(&base).unwrap();
    v["host"] = json!({"offloads": false, "nic_rate_bps": 1000, "rx_coalesce_ns": 1});
    let ideal2 = run(&v.to_string());
    assert_eq!(ideal.summary["metrics"], ideal2.summary["metrics"]);
    assert_eq!(col_u64(&ideal, "flows", "segs_sent"), col_u64(&ideal2, "flows", "segs_sent"));
    let linux = run(&with_offloads(&base, json!({})));
    assert_ne!(col_u64(&ideal, "flows", "segs_sent"), col_u64(&linux, "flows", "segs_sent"));
}
