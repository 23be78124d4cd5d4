//! The host model (`[host]`; docs/model.md "Host model") in whole runs: GRO's stretch ACKs,
//! Linux hosts without offloads (GSO skbs still, no GRO), TCP Small Queues behind a NIC no
//! faster than the bottleneck, conservation with packets held at NICs and in GRO, and ideal
//! hosts.

mod common;

use common::*;
use serde_json::json;

const GBPS: u64 = 1_000_000_000;
const MBPS: u64 = 1_000_000;

fn counter(r: &sim::RunResult, key: &str) -> u64 {
    r.counters[key]
        .as_u64()
        .unwrap_or_else(|| panic!("counter {key}"))
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
    let base = config(
        GBPS,
        Some(2 * 1_250_000),
        None,
        json!({"kind": "taildrop"}),
        &[class("reno", 1, 10.0)],
        3.0,
        0.0,
        1,
    );
    let linux = run(&with_offloads(&base, json!({})));
    let ratio = segs_per_ack(&linux);
    println!(
        "offloads: {ratio:.2} segments per ACK, {} GRO packets",
        counter(&linux, "gro_packets")
    );
    assert!((3.5..=4.5).contains(&ratio), "{ratio}");
    // rx_coalesce = 0: a poll per arrival, so GRO never finds two segments together and the
    // delayed-ACK rule gives one ACK per two segments again.
    let no_moderation = run(&with_offloads(&base, json!({"rx_coalesce_ns": 0})));
    let ratio = segs_per_ack(&no_moderation);
    assert!((1.8..=2.2).contains(&ratio), "{ratio}");
    assert_eq!(
        counter(&no_moderation, "gro_packets"),
        col_u64(&no_moderation, "flows", "segs_received")[0]
    );
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
    let base = config(
        100 * MBPS,
        None,
        Some(10_000),
        json!({"kind": "taildrop"}),
        &[class("cubic", 1, 20.0)],
        10.0,
        2.0,
        1,
    );
    let r = run(&with_offloads(&base, json!({"nic_rate_bps": 100 * MBPS})));
    assert_eq!(col_u64(&r, "flows", "total_dropped_pkts")[0], 0);
    assert!(
        metric(&r, "utilization") > 0.99,
        "{}",
        metric(&r, "utilization")
    );
    assert!(r.summary["metrics"]["sojourn_ms"]["max"].as_f64().unwrap() < 0.2);
    let srtt_ms = col_f64(&r, "timeseries", "srtt_ms");
    let last = *srtt_ms.last().unwrap();
    println!(
        "srtt at the end {last:.2} ms, cwnd at the end {}",
        col_u64(&r, "timeseries", "cwnd").last().unwrap()
    );
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
        assert_eq!(
            sent[f],
            recv[f] + dropped[f] + innet[f],
            "flow {f}: sent = received + dropped + in network"
        );
    }
}

#[test]
fn conservation_with_offloads() {
    // Drops (a 20-packet buffer), marks (DCTCP under STEP) and a CBR flow, with slow NICs so
    // that packets are queued at them, and a long GRO interval so that some wait for a poll,
    // when the run ends.
    let mut classes = vec![
        class("cubic", 3, 20.0),
        class("dctcp", 2, 10.0),
        cbr(1, 10.0, 20 * MBPS),
    ];
    classes[0].ecn = true;
    let base = config(
        100 * MBPS,
        None,
        Some(20),
        json!({"kind": "step", "threshold": {"bytes": 15_000}}),
        &classes,
        5.3,
        0.0,
        4,
    );
    let r = run(&with_offloads(
        &base,
        json!({"nic_rate_bps": 200 * MBPS, "rx_coalesce_ns": 200_000}),
    ));
    assert!(
        col_u64(&r, "flows", "total_dropped_pkts")
            .iter()
            .sum::<u64>()
            > 10
    );
    assert!(
        col_u64(&r, "flows", "total_marked_pkts")
            .iter()
            .sum::<u64>()
            > 10
    );
    assert_conservation(&r);
}

/// Linux hosts with their NICs' offloads off (`{"offloads": false}`): the Linux sender of
/// `with_offloads`, a receiver without GRO.
fn without_offloads(cfg: &str, knobs: serde_json::Value) -> String {
    let mut knobs = knobs;
    knobs["offloads"] = json!(false);
    with_offloads(cfg, knobs)
}

#[test]
fn without_offloads_the_receiver_acks_every_second_packet_where_gro_makes_stretch_acks() {
    // The saturated 1 Gbit/s Reno flow of the GRO test: segments arrive every 12 µs, closer
    // than rx_coalesce (50 µs), so with offloads a poll's ≈ 4 segments make one GRO packet and
    // one stretch ACK. Without GRO (net/core/gro.c `dev_gro_receive` passes every skb up when
    // the device has no NETIF_F_GRO) each packet is its own skb and its own ACK decision
    // (`__tcp_ack_snd_check`: ACK once more than one rcv_mss is unacknowledged), so no ACK
    // covers more than two full segments: about two segments per ACK, one unit per packet.
    let base = config(
        GBPS,
        Some(2 * 1_250_000),
        None,
        json!({"kind": "taildrop"}),
        &[class("reno", 1, 10.0)],
        3.0,
        0.0,
        1,
    );
    let linux = run(&with_offloads(&base, json!({})));
    let off = run(&without_offloads(&base, json!({})));
    let (on_ratio, off_ratio) = (segs_per_ack(&linux), segs_per_ack(&off));
    println!("segments per ACK: offloads {on_ratio:.2}, without {off_ratio:.2}");
    assert!(on_ratio > 3.0, "{on_ratio}");
    assert!((1.8..=2.2).contains(&off_ratio), "{off_ratio}");
    assert_eq!(
        counter(&off, "gro_packets"),
        col_u64(&off, "flows", "segs_received")[0]
    );
    assert!(counter(&linux, "gro_packets") * 3 < col_u64(&linux, "flows", "segs_received")[0]);
    // The sender is Linux's either way: TSO/GSO skbs (sk_setup_caps gives every TCP socket
    // GSO), which leave the NIC back to back, and the link stays full.
    assert!(counter(&off, "tso_skbs") > 0);
    assert!(col_u64(&off, "flows", "segs_sent")[0] > 2 * counter(&off, "tso_skbs"));
    assert!(metric(&off, "utilization") > 0.95);
}

#[test]
fn without_offloads_a_paced_flow_still_sends_tso_autosized_skbs() {
    // One CUBIC flow paced by fq (`fq_pacing`) fills a 200 Mbit/s link, 20 ms, 1-BDP buffer:
    // CUBIC's reduction to 0.7 of at most 2 BDP leaves 1.4 BDP in flight, so the queue never
    // empties and cwnd/srtt is the link's packet rate, 200e6 / (1500·8) = 16 667 /s. Linux's
    // pacing rate in congestion avoidance is 120 % of cwnd·mss/srtt (tcp_update_pacing_rate):
    // 1.2 · 16 667 · 1448 = 28.96 MB/s. tcp_tso_autosize with pacing_shift 11: 28.96e6 >> 11
    // = 14 140 B, plus gso_max_size >> (min_rtt 20 000 µs >> 9 = 39) = 0, ÷ 1448 = 9 segments
    // (floor of 9.77), the most an skb carries. The window opens 9 segments within 9 · 60 µs
    // = 0.54 ms of ACKs, under tcp_tso_should_defer's 1 ms, so the flow waits for whole 9-
    // segment skbs: at least 8.5 per skb on average. With shift 10 the goal doubles to 19
    // segments (floor of 19.53): more per skb, never more than 19. Hosts without offloads
    // send these skbs as hosts with them do: TCP's GSO does not depend on the NIC's TSO.
    // Counted from 2 s to 6 s (the difference of two runs), past slow start.
    let per_skb = |shift: u32| {
        let counts = [2.0, 6.0].map(|dur| {
            let base = config(
                200 * MBPS,
                Some(500_000),
                None,
                json!({"kind": "taildrop"}),
                &[class("cubic", 1, 20.0)],
                dur,
                1.0,
                1,
            );
            let mut v: serde_json::Value = serde_json::from_str(&base).unwrap();
            v["classes"][0]["fq_pacing"] = json!(true);
            let off = run(&without_offloads(
                &v.to_string(),
                json!({"pacing_shift": shift}),
            ));
            assert!(metric(&off, "utilization") > 0.95);
            (
                col_u64(&off, "flows", "segs_sent")[0],
                counter(&off, "tso_skbs"),
            )
        });
        let (segs, skbs) = (counts[1].0 - counts[0].0, counts[1].1 - counts[0].1);
        println!(
            "pacing_shift {shift}: {skbs} skbs, {:.2} segments per skb",
            segs as f64 / skbs as f64
        );
        segs as f64 / skbs as f64
    };
    let (s11, s10) = (per_skb(11), per_skb(10));
    assert!((8.5..=9.0).contains(&s11), "{s11}");
    assert!(s10 > 9.0 && s10 <= 19.0, "{s10}");
}

#[test]
fn ideal_hosts_are_the_model_without_hosts_and_linux_hosts_differ() {
    // `ideal: true` is the model without any host: the same run, bit for bit, whatever the
    // (unused) knobs say; Linux hosts change the ACK clock with offloads and without, and
    // so the results.
    let base = config(
        GBPS,
        Some(1_250_000),
        None,
        json!({"kind": "taildrop"}),
        &[class("cubic", 2, 10.0)],
        2.0,
        0.5,
        3,
    );
    let ideal = run(&base);
    let mut v: serde_json::Value = serde_json::from_str(&base).unwrap();
    v["host"] =
        json!({"offloads": false, "ideal": true, "nic_rate_bps": 1000, "rx_coalesce_ns": 1});
    let ideal2 = run(&v.to_string());
    assert_eq!(ideal.summary["metrics"], ideal2.summary["metrics"]);
    assert_eq!(
        col_u64(&ideal, "flows", "segs_sent"),
        col_u64(&ideal2, "flows", "segs_sent")
    );
    assert!(ideal.counters.get("tso_skbs").is_none());
    let linux = run(&with_offloads(&base, json!({})));
    assert_ne!(
        col_u64(&ideal, "flows", "segs_sent"),
        col_u64(&linux, "flows", "segs_sent")
    );
    let off = run(&without_offloads(&base, json!({})));
    assert_ne!(
        col_u64(&ideal, "flows", "segs_sent"),
        col_u64(&off, "flows", "segs_sent")
    );
    // An ideal host has no offloads to turn on.
    v["host"] = json!({"offloads": true, "ideal": true});
    let err = sim::run_json(&v.to_string(), &mut |_| true)
        .expect_err("refused")
        .to_string();
    assert!(err.contains("host.ideal"), "{err}");
}
