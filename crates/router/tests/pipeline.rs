//! The router's pipeline under a virtual clock: timing, drops, marks and conservation, with
//! expected values computed by hand from the link rate, the RTT and the disciplines' rules.

use link::LinkConfig;
use proptest::prelude::*;
use router::config::Prefix;
use router::ipv4::{header_checksum, ones_sum};
use router::Pipeline;
use serde_json::Value;

const MS: u64 = 1_000_000;

/// An engine config with one class per RTT (sources 10.77.<i+1>.0/24), rate in bit/s.
fn engine(aqm: &str, rate_bps: u64, buffer_packets: Option<u64>, rtts_ns: &[u64]) -> LinkConfig {
    let classes: Vec<String> = rtts_ns
        .iter()
        .enumerate()
        .map(|(i, r)| {
            format!(
                r#"{{"name": "c{i}", "cc": {{"name": "cubic"}}, "count": 1, "rtt_ns": {r}, "ecn": true,
                    "start": {{"kind": "fixed", "at_ns": 0}}, "size_bytes": null, "fq_pacing": false}}"#
            )
        })
        .collect();
    let buf = buffer_packets.map_or("null".to_string(), |b| b.to_string());
    LinkConfig::from_json(&format!(
        r#"{{"name": "t", "seed": 7, "duration_ns": 10000000000, "warmup_ns": 0,
            "bottleneck": {{"rate_bps": {rate_bps}, "buffer_packets": {buf}, "buffer_bytes": null, "aqm": {aqm}, "rtt_ref_ns": 10000000}},
            "classes": [{}], "measure": {{"interval_ns": 100000000, "hist_bin_ns": 1000000}}}}"#,
        classes.join(",")
    ))
    .unwrap()
}

fn pipeline(aqm: &str, rate_bps: u64, buffer_packets: Option<u64>, rtts_ns: &[u64]) -> Pipeline {
    let sources = (0..rtts_ns.len())
        .map(|i| Prefix::parse(&format!("10.77.{}.0/24", i + 1)).unwrap())
        .collect();
    Pipeline::new(&engine(aqm, rate_bps, buffer_packets, rtts_ns), sources).unwrap()
}

#[test]
fn only_the_measurement_window_counts_and_a_straddling_transmission_counts_pro_rata() {
    // Window [50 ms, 100 ms), 12 Mbit/s (1 ms per 1500 B). Packet A arrives at 49.5 ms and is
    // serialized over [49.5, 50.5) ms: half its time, so 750 of its bytes, fall in the window;
    // it arrived and was dequeued before the window, so the flow's window counters skip it
    // except `link_*`, which count by the end of transmission (50.5 ms: inside). Packet B
    // arrives at 99.5 ms: [99.5, 100.5) ⇒ 750 bytes in the window, arrived inside, but its
    // transmission ends outside. Packet C at 120 ms counts nowhere.
    let mut e = engine(r#"{"kind": "taildrop"}"#, 12_000_000, None, &[MS]);
    e.warmup_ns = 50 * MS;
    e.duration_ns = 100 * MS;
    e.measure.interval_ns = 50 * MS;
    let mut p = Pipeline::new(&e, vec![Prefix::parse("10.77.1.0/24").unwrap()]).unwrap();
    for (k, t) in [49_500_000u64, 99_500_000, 120 * MS]
        .into_iter()
        .enumerate()
    {
        p.receive(udp(0, 1, 1500, 0, k as u64), t);
    }
    assert_eq!(run_to(&mut p, 200 * MS).len(), 3);
    let r = p.report(true);
    let f = &r["flows"][0];
    assert_eq!(f["first_seen_ns"], 49_500_000);
    assert_eq!(f["arrived_pkts"], 1, "B only");
    assert_eq!(f["link_pkts"], 1, "A only (ends at 50.5 ms)");
    assert_eq!(f["sojourn_count"], 1, "B's dequeue at 99.5 ms");
    assert_eq!(r["link_bytes"], 1500, "750 of A + 750 of B");
    assert_eq!(r["window_ns"], serde_json::json!([50 * MS, 100 * MS]));
    // Queue samples at 50 and 100 ms (whole run, up to the duration): the first interval got
    // A's first 750 bytes, the second A's last 750 and B's first 750.
    let q = r["queue"].as_array().unwrap();
    assert_eq!(q.len(), 2);
    assert_eq!(
        (q[0]["t_ns"].as_u64(), q[0]["link_bytes"].as_f64()),
        (Some(50 * MS), Some(750.0))
    );
    assert_eq!(
        (q[1]["t_ns"].as_u64(), q[1]["link_bytes"].as_f64()),
        (Some(100 * MS), Some(1500.0))
    );
}

/// A valid IPv4/UDP packet of `len` bytes from 10.77.<class+1>.2:`sport` with TOS `tos`; the
/// payload's first 8 bytes carry `tag` so emitted packets can be identified.
fn udp(class: u8, sport: u16, len: usize, tos: u8, tag: u64) -> Vec<u8> {
    assert!(len >= 36);
    let mut b = vec![0u8; len];
    b[0] = 0x45;
    b[1] = tos;
    b[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    b[8] = 64;
    b[9] = 17;
    b[12..16].copy_from_slice(&[10, 77, class + 1, 2]);
    b[16..20].copy_from_slice(&[10, 77, 200, 2]);
    b[20..22].copy_from_slice(&sport.to_be_bytes());
    b[22..24].copy_from_slice(&5201u16.to_be_bytes());
    b[24..26].copy_from_slice(&((len - 20) as u16).to_be_bytes());
    b[28..36].copy_from_slice(&tag.to_be_bytes());
    let c = header_checksum(&b[..20]);
    b[10..12].copy_from_slice(&c.to_be_bytes());
    b
}

/// The tag of a packet built by [`udp`] (0 for anything shorter).
fn tag(buf: &[u8]) -> u64 {
    buf.get(28..36)
        .map_or(0, |t| u64::from_be_bytes(t.try_into().unwrap()))
}

/// Drive the pipeline to `t` and collect everything due, as (due, tag, bytes).
fn drain_until(p: &mut Pipeline, t: u64) -> Vec<(u64, u64, Vec<u8>)> {
    p.advance(t);
    let mut out = vec![];
    while let Some(e) = p.pop_due(t) {
        assert!(e.due_ns <= t, "emitted early: due {} at {t}", e.due_ns);
        out.push((e.due_ns, tag(&e.buf), e.buf));
    }
    out
}

/// Step the virtual clock through every wake-up the pipeline asks for, up to `end`.
fn run_to(p: &mut Pipeline, end: u64) -> Vec<(u64, u64, Vec<u8>)> {
    let mut out = drain_until(p, p.now());
    while let Some(w) = p.next_wakeup().filter(|&w| w <= end) {
        out.extend(drain_until(p, w));
    }
    out.extend(drain_until(p, end));
    out
}

#[test]
fn back_to_back_packets_leave_exactly_len_bits_over_rate_apart_and_arrive_rtt_later() {
    // 7 Mbit/s, 1500-byte packets: 12 000 bits take 12e12/7e6 = 1 714 285.714... ns each, so
    // with the remainder carried the k-th of a burst ends at floor(k·12e12/7e6) ns (the busy
    // period's exact length, rounded once), and is delivered RTT = 10 ms later.
    let mut p = pipeline(r#"{"kind": "taildrop"}"#, 7_000_000, None, &[10 * MS]);
    for k in 0..8u64 {
        p.receive(udp(0, 40001, 1500, 0, k), 0);
    }
    let out = run_to(&mut p, 100 * MS);
    assert_eq!(out.len(), 8);
    for (k, (due, t, _)) in out.iter().enumerate() {
        let k = k as u64 + 1;
        let tx_end = k * 12_000_000_000_000 / 7_000_000;
        assert_eq!(*t, k - 1, "FIFO order");
        assert_eq!(*due, tx_end + 10 * MS, "packet {k}");
    }
    // The hand values of the first two: 1 714 285 ns and 3 428 571 ns after time 0.
    assert_eq!(out[0].0, 11_714_285);
    assert_eq!(out[1].0, 13_428_571);
    // Not one nanosecond early: just before the first due time nothing comes out.
    let mut p = pipeline(r#"{"kind": "taildrop"}"#, 7_000_000, None, &[10 * MS]);
    p.receive(udp(0, 40001, 1500, 0, 0), 0);
    assert!(drain_until(&mut p, 11_714_284).is_empty());
    assert_eq!(drain_until(&mut p, 11_714_285).len(), 1);
}

#[test]
fn the_kth_packet_of_a_burst_waits_k_transmission_times() {
    // 12 Mbit/s, 1500 B ⇒ exactly 1 ms per packet. A burst of 5 at t = 0: packet k (from 0)
    // is dequeued when k packets have been sent, at k ms, so its sojourn is k ms; the sum is
    // 0+1+2+3+4 = 10 ms and the 1 µs histogram has one sample in each of bins 0, 1000, ...,
    // 4000.
    let mut p = pipeline(r#"{"kind": "taildrop"}"#, 12_000_000, None, &[20 * MS]);
    for k in 0..5 {
        p.receive(udp(0, 40001, 1500, 0, k), 0);
    }
    let out = run_to(&mut p, 100 * MS);
    assert_eq!(
        out.iter().map(|o| o.0).collect::<Vec<_>>(),
        vec![21 * MS, 22 * MS, 23 * MS, 24 * MS, 25 * MS]
    );
    let r = p.report(true);
    let f = &r["flows"][0];
    assert_eq!(f["sojourn_count"], 5);
    assert_eq!(f["sojourn_sum_ns"], 10 * MS);
    assert_eq!(f["link_pkts"], 5);
    assert_eq!(f["link_bytes"], 7500);
    assert_eq!(r["class_sojourn"][0]["sum_ns"], 10 * MS);
    let bins: Vec<(u64, u64)> = r["sojourn_hist"]["bins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b[0].as_u64().unwrap(), b[1].as_u64().unwrap()))
        .collect();
    assert_eq!(
        bins,
        vec![(0, 1), (1000, 1), (2000, 1), (3000, 1), (4000, 1)]
    );
    // Link bytes in the window: all 7 500 B finished inside it.
    assert_eq!(r["link_bytes"], 7500);
    // The 100 ms queue sample counts those 7 500 bytes in its interval.
    assert_eq!(r["queue"][0]["t_ns"], 100 * MS);
    assert_eq!(r["queue"][0]["link_bytes"].as_f64(), Some(7500.0));
}

#[test]
fn a_taildrop_buffer_of_n_packets_drops_the_n_plus_first_of_a_burst() {
    // N = 4. One packet is on the link (not in the buffer); a burst of N + 1 = 5 then arrives:
    // four fit, the fifth is dropped as overflow.
    let mut p = pipeline(r#"{"kind": "taildrop"}"#, 12_000_000, Some(4), &[MS]);
    p.receive(udp(0, 1, 1500, 0, 100), 0);
    for k in 0..5 {
        p.receive(udp(0, 2, 1500, 0, k), 10);
    }
    let out = run_to(&mut p, 50 * MS);
    assert_eq!(
        out.iter().map(|o| o.1).collect::<Vec<_>>(),
        vec![100, 0, 1, 2, 3]
    );
    let r = p.report(true);
    let burst = r["flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["sport"] == 2)
        .unwrap();
    assert_eq!(burst["arrived_pkts"], 5);
    assert_eq!(burst["dropped_pkts"], 1);
    assert_eq!(burst["dropped_bytes"], 1500);
    assert_eq!(burst["drops"]["overflow"], 1);
    assert_eq!(r["counters"]["qdisc_drops"], 1);
}

#[test]
fn step_marks_ect_packets_with_a_valid_checksum_and_never_marks_not_ect() {
    // STEP with K = 2 packets marks an arrival when the queue holds more than 2 (aqm step.rs:
    // strict, before the arrival is added); a Not-ECT packet that would be marked is dropped.
    // Burst at t = 0 (TOS ECN bits): p0 ECT(0) → link; p1 ECT(0), p2 Not-ECT, p3 ECT(1) find
    // 0, 1, 2 queued → unmarked; p4 ECT(0) finds 3 → CE; p5 Not-ECT finds 4 → dropped;
    // p6 ECT(1) finds 4 → CE.
    let tos = [0x02u8, 0x02, 0xb8, 0x01, 0x02, 0x00, 0x01];
    let mut p = pipeline(
        r#"{"kind": "step", "threshold": {"packets": 2}}"#,
        12_000_000,
        None,
        &[MS],
    );
    for (k, &t) in tos.iter().enumerate() {
        p.receive(udp(0, 7, 1500, t, k as u64), 0);
    }
    let out = run_to(&mut p, 50 * MS);
    assert_eq!(
        out.iter().map(|o| o.1).collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 4, 6]
    );
    for (_, k, buf) in &out {
        assert_eq!(
            ones_sum(&buf[..20]),
            0xFFFF,
            "packet {k}: header checksum must verify"
        );
        let orig = tos[*k as usize];
        if *k == 4 || *k == 6 {
            assert_eq!(buf[1], orig | 0b11, "packet {k} carries CE, DSCP kept");
        } else {
            assert_eq!(buf[1], orig, "packet {k} unchanged");
        }
        // Nothing but the TOS byte and the checksum changes.
        let mut expect = udp(0, 7, 1500, orig, *k);
        expect[1] = buf[1];
        expect[10..12].copy_from_slice(&buf[10..12]);
        assert_eq!(&expect, buf);
    }
    let r = p.report(true);
    assert_eq!(r["flows"][0]["marks"]["step"], 2);
    assert_eq!(r["flows"][0]["marked_pkts"], 2);
    assert_eq!(r["flows"][0]["drops"]["forced"], 1);
}

#[test]
fn bypassed_packets_leave_at_once_unchanged_and_are_counted() {
    let mut p = pipeline(r#"{"kind": "taildrop"}"#, 12_000_000, None, &[10 * MS]);
    let ipv6 = vec![0x60, 0, 0, 0, 0, 8, 17, 64];
    let mut bad = udp(0, 1, 100, 0, 1);
    bad[8] = 1; // TTL changed, checksum not: malformed
    let stranger = {
        let mut b = udp(0, 1, 100, 0, 2);
        b[14] = 99; // 10.77.99.2 matches no class
        let c = header_checksum(&{
            let mut h = b[..20].to_vec();
            h[10] = 0;
            h[11] = 0;
            h
        });
        b[10..12].copy_from_slice(&c.to_be_bytes());
        b
    };
    for b in [ipv6.clone(), bad.clone(), stranger.clone()] {
        p.receive(b, 5 * MS);
    }
    p.advance(5 * MS);
    let mut got = vec![];
    while let Some(e) = p.pop_due(5 * MS) {
        assert_eq!(e.due_ns, 5 * MS);
        assert!(e.flow.is_none());
        got.push(e.buf);
    }
    assert_eq!(got, vec![ipv6, bad, stranger]);
    let c = &p.report(true)["counters"];
    assert_eq!(
        (
            c["non_ipv4"].as_u64(),
            c["malformed"].as_u64(),
            c["unclassified"].as_u64()
        ),
        (Some(1), Some(1), Some(1))
    );
    assert_eq!(p.flow_count(), 0);
}

#[test]
fn classes_get_their_own_rtt_and_ppv_values_its_packets() {
    // Two classes, 5 ms and 40 ms, through PPV (which needs the marker): at 12 Mbit/s a
    // packet of each at t = 0 leaves the link at 1 ms and 2 ms ⇒ due at 6 ms and 42 ms.
    let mut p = pipeline(
        r#"{"kind": "ppv"}"#,
        12_000_000,
        Some(20),
        &[5 * MS, 40 * MS],
    );
    p.receive(udp(1, 9, 1500, 0, 1), 0);
    p.receive(udp(0, 9, 1500, 0, 0), 0);
    let out = run_to(&mut p, 100 * MS);
    assert_eq!(
        out.iter().map(|o| (o.1, o.0)).collect::<Vec<_>>(),
        vec![(0, 7 * MS), (1, 41 * MS)]
    );
    // A PPV buffer of two packets and a burst of four from one flow: the link takes
    // the first, two fit, the fourth finds the buffer full and the lowest-valued packet
    // goes — PPV's value drop, never a plain overflow.
    let mut p = pipeline(r#"{"kind": "ppv"}"#, 12_000_000, Some(2), &[5 * MS]);
    for k in 0..4 {
        p.receive(udp(0, 9, 1500, 0, k), 0);
    }
    assert_eq!(run_to(&mut p, 100 * MS).len(), 3);
    let r = p.report(true);
    assert_eq!(r["flows"][0]["drops"]["value"], 1);
    assert_eq!(r["flows"][0]["drops"]["overflow"], 0);
}

#[derive(Clone, Debug)]
struct Arrival {
    dt_ns: u64,
    class: u8,
    flow: u16,
    len: usize,
    tos: u8,
}

fn arrivals() -> impl Strategy<Value = Vec<Arrival>> {
    proptest::collection::vec(
        (0u64..400_000, 0u8..2, 0u16..4, 40usize..1500, 0u8..4).prop_map(
            |(dt_ns, class, flow, len, tos)| Arrival {
                dt_ns,
                class,
                flow,
                len,
                tos,
            },
        ),
        1..400,
    )
}

const AQMS: [&str; 6] = [
    r#"{"kind": "taildrop"}"#,
    r#"{"kind": "step", "threshold": {"bytes": 6000}}"#,
    r#"{"kind": "red", "limit": {"bytes": 30000}, "min": {"bytes": 3000}, "max": {"bytes": 9000}, "avpkt": {"bytes": 1000}, "probability": 0.1, "ecn": true}"#,
    r#"{"kind": "codel"}"#,
    r#"{"kind": "fq_codel"}"#,
    r#"{"kind": "ppv"}"#,
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Whatever arrives: every classified packet is, at every instant, dropped, queued, on the
    /// link, in a delay line or emitted (arrived = forwarded + dropped + queued); nothing is
    /// emitted early (due ≥ arrival + RTT) or out of order within its flow; every emitted
    /// header's checksum verifies.
    #[test]
    fn conservation_order_and_timing(arr in arrivals(), aqm in 0usize..AQMS.len(), rate in prop_oneof![Just(5_000_000u64), Just(24_000_000), Just(100_000_000)]) {
        let rtts = [3 * MS, 11 * MS];
        let mut p = pipeline(AQMS[aqm], rate, Some(12), &rtts);
        let mut t = 0;
        let mut arrived_at = std::collections::HashMap::new();
        let mut last_tag: std::collections::HashMap<(u8, u16), u64> = Default::default();
        let mut emitted = 0u64;
        let check = |p: &Pipeline, emitted: u64| {
            let (q, l, d, b) = p.held();
            prop_assert_eq!(b, 0);
            prop_assert_eq!(p.counters.offered, p.counters.qdisc_drops + q as u64 + l as u64 + d as u64 + emitted);
            Ok(())
        };
        let take = |p: &mut Pipeline, now: u64, emitted: &mut u64, arrived_at: &std::collections::HashMap<u64, (u8, u16, u64)>, last_tag: &mut std::collections::HashMap<(u8, u16), u64>| -> Result<(), TestCaseError> {
            for (due, k, buf) in drain_until(p, now) {
                let (class, flow, at): (u8, u16, u64) = arrived_at[&k];
                prop_assert!(due >= at + rtts[class as usize], "due {} before arrival {} + RTT", due, at);
                prop_assert_eq!(ones_sum(&buf[..20]), 0xFFFF);
                if let Some(prev) = last_tag.insert((class, flow), k) { prop_assert!(prev < k, "reordered within a flow"); }
                *emitted += 1;
            }
            Ok(())
        };
        for (k, a) in arr.iter().enumerate() {
            t += a.dt_ns;
            take(&mut p, t, &mut emitted, &arrived_at, &mut last_tag)?;
            arrived_at.insert(k as u64, (a.class, a.flow, t));
            p.receive(udp(a.class, 1000 + a.flow, a.len.max(36), a.tos, k as u64), t);
            check(&p, emitted)?;
        }
        while let Some(w) = p.next_wakeup() {
            take(&mut p, w, &mut emitted, &arrived_at, &mut last_tag)?;
            check(&p, emitted)?;
        }
        prop_assert_eq!(p.held(), (0, 0, 0, 0));
        prop_assert_eq!(p.counters.reordered, 0);
        let r: Value = p.report(true);
        // Per-flow window counts agree with the totals (the window covers the whole run).
        let sum = |k: &str| r["flows"].as_array().unwrap().iter().map(|f| f[k].as_u64().unwrap()).sum::<u64>();
        prop_assert_eq!(sum("arrived_pkts"), arr.len() as u64);
        prop_assert_eq!(sum("dropped_pkts"), p.counters.qdisc_drops);
        prop_assert_eq!(sum("link_pkts") + sum("dropped_pkts"), arr.len() as u64);
        prop_assert_eq!(sum("marked_pkts"), p.counters.qdisc_marks);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Raw bytes into the whole pipeline (half of them made to look like IPv4 from a class
    /// source): nothing panics, and with no buffer limit every packet comes out — the
    /// unparsable and unclassified ones unchanged and at once, counted by kind.
    #[test]
    fn raw_bytes_through_the_pipeline(bufs in proptest::collection::vec((proptest::collection::vec(any::<u8>(), 0..80), 0u8..3), 1..60)) {
        let mut p = pipeline(r#"{"kind": "fq_codel"}"#, 24_000_000, None, &[MS]);
        let mut sent = vec![];
        for (k, (mut b, how)) in bufs.into_iter().enumerate() {
            // how: 0 raw; 1 IPv4 version/IHL and a class source, the rest raw; 2 also a
            // consistent total length and header checksum (so it may be queued).
            if how >= 1 && b.len() >= 20 {
                b[0] = 0x45;
                b[12..16].copy_from_slice(&[10, 77, 1, 9]);
                if how == 2 {
                    let n = b.len() as u16;
                    b[2..4].copy_from_slice(&n.to_be_bytes());
                    let c = header_checksum(&b[..20]);
                    b[10..12].copy_from_slice(&c.to_be_bytes());
                }
            }
            sent.push(b.clone());
            p.receive(b, k as u64 * 1000);
        }
        let out = run_to(&mut p, 10_000 * MS);
        prop_assert_eq!(out.len(), sent.len());
        let c = &p.counters;
        prop_assert_eq!(c.rx_pkts, sent.len() as u64);
        prop_assert_eq!(c.non_ipv4 + c.malformed + c.unclassified + c.offered, c.rx_pkts);
        prop_assert_eq!(c.qdisc_drops, 0);
        // Bytes are preserved except, for queued packets, a CE mark in the TOS byte and its
        // checksum: compare everything else as multisets.
        let strip = |b: &[u8]| { let mut b = b.to_vec(); if b.len() >= 12 { b[1] &= !3; b[10] = 0; b[11] = 0; } b };
        let mut a: Vec<Vec<u8>> = sent.iter().map(|b| strip(b)).collect();
        let mut e: Vec<Vec<u8>> = out.iter().map(|o| strip(&o.2)).collect();
        a.sort();
        e.sort();
        prop_assert_eq!(a, e);
    }
}

#[test]
fn a_udp_and_a_tcp_flow_on_the_same_port_are_two_flows() {
    // The emulator's CBR flows are UDP, its other flows TCP, and the kernel's UDP and TCP port
    // spaces are separate: one source port can name a flow of each. The router keys flows by
    // the whole 5-tuple, protocol included, so 3 UDP datagrams of 1500 B and 2 TCP segments of
    // 1000 B from 10.77.1.2:40000 are reported as two flows with their own counts.
    let mut p = pipeline(r#"{"kind": "taildrop"}"#, 12_000_000, None, &[MS]);
    for k in 0..3 {
        p.receive(udp(0, 40000, 1500, 0, k), k * MS);
    }
    for k in 0..2 {
        let mut b = udp(0, 40000, 1000, 0, 10 + k);
        b[9] = 6; // TCP: the ports are the first four bytes of either header
        let c = header_checksum(&b[..20]);
        b[10..12].copy_from_slice(&c.to_be_bytes());
        p.receive(b, 5 * MS + k * MS);
    }
    assert_eq!(run_to(&mut p, 50 * MS).len(), 5);
    let r = p.report(true);
    let flows = r["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 2);
    let by = |proto: u64| flows.iter().find(|f| f["proto"] == proto).unwrap();
    let (u, t) = (by(17), by(6));
    assert_eq!(
        (
            u["sport"].as_u64(),
            u["dport"].as_u64(),
            u["arrived_pkts"].as_u64(),
            u["arrived_bytes"].as_u64()
        ),
        (Some(40000), Some(5201), Some(3), Some(4500))
    );
    assert_eq!(
        (
            t["sport"].as_u64(),
            t["dport"].as_u64(),
            t["arrived_pkts"].as_u64(),
            t["arrived_bytes"].as_u64()
        ),
        (Some(40000), Some(5201), Some(2), Some(2000))
    );
    assert_eq!(
        (u["class"].as_u64(), t["class"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(r["counters"]["unclassified"], 0);
}

#[test]
fn an_ect1_class_reaches_dualpi2s_l4s_queue_the_other_stays_classic() {
    // Class 0 is an ect1 class: its ECT(0) packets become ECT(1) on arrival (RFC 3168 §5
    // codepoints), which DualPI2 classifies into its L queue (RFC 9332 §2.3: ECT(1) or CE) and
    // marks at its step (1 ms of sojourn, dualpi2's step_thresh); at 12 Mbit/s a 1500-byte
    // packet takes 1 ms, so in a burst of 8 the later ones wait longer and leave CE. Class 1's
    // ECT(0) packets stay classic: in the first 20 ms the PI2 probability is still 0 (its first
    // update is at 16 ms, from a queue of 8 ms, under the 15 ms target), so none is marked. A
    // Not-ECT packet of class 0 is left as it is.
    let mut p =
        pipeline(r#"{"kind": "dualpi2"}"#, 12_000_000, None, &[MS, MS]).with_ect1_classes(&[0]);
    for k in 0..8u64 {
        p.receive(udp(0, 7, 1500, 0x02, k), 0);
        p.receive(udp(1, 8, 1500, 0x02, 100 + k), 0);
    }
    p.receive(udp(0, 9, 1500, 0x00, 50), 0);
    let out = run_to(&mut p, 40 * MS);
    assert_eq!(out.len(), 17);
    for (_, k, buf) in &out {
        assert_eq!(ones_sum(&buf[..20]), 0xFFFF, "packet {k}: checksum");
        let ecn = buf[1] & 0b11;
        match k {
            0..=7 => assert!(ecn == 0b01 || ecn == 0b11, "packet {k}: {ecn:#b}"),
            50 => assert_eq!(ecn, 0b00),
            _ => assert_eq!(ecn, 0b10, "classic packet {k}"),
        }
    }
    let ce = out
        .iter()
        .filter(|o| o.1 < 8 && o.2[1] & 0b11 == 0b11)
        .count();
    assert!(ce >= 1, "the L queue marked none");
    assert_eq!(p.counters.ect1_set, 8);
}
