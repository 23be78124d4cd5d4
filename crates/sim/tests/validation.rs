//! Whole-simulator validation: conservation laws, analytic oracles (the steady-state window
//! laws of Reno, CUBIC and DCTCP), behaviour the literature documents, and determinism. Run in release mode
//! (`cargo test --release`); each test simulates seconds to minutes of traffic.

mod common;

use common::*;
use serde_json::json;

const GBPS: u64 = 1_000_000_000;
const MBPS: u64 = 1_000_000;

fn taildrop() -> serde_json::Value {
    json!({"kind": "taildrop"})
}

fn bernoulli(drop: f64, mark: f64) -> serde_json::Value {
    json!({"kind": "bernoulli", "drop": drop, "mark": mark})
}

// ---------------------------------------------------------------------------------------------
// Conservation
// ---------------------------------------------------------------------------------------------

/// Every data segment sent is, at the end, received, dropped at the bottleneck, or still in
/// the network; every drop and mark is counted under exactly one reason.
fn assert_conservation(r: &sim::RunResult) {
    let sent = col_u64(r, "flows", "segs_sent");
    let recv = col_u64(r, "flows", "segs_received");
    let dropped = col_u64(r, "flows", "total_dropped_pkts");
    let marked = col_u64(r, "flows", "total_marked_pkts");
    let innet = col_u64(r, "flows", "end_in_network_pkts");
    let flows = r.table("flows");
    for f in 0..sent.len() {
        assert_eq!(
            sent[f],
            recv[f] + dropped[f] + innet[f],
            "flow {f}: sent = received + dropped + in network"
        );
        // Warmup is 0 in these runs, so the per-reason (window) counters cover the whole run.
        let by_reason: u64 = flows
            .columns
            .iter()
            .filter(|(n, _)| n.starts_with("drops_"))
            .map(|(n, _)| flows.u64(n)[f])
            .sum();
        assert_eq!(by_reason, dropped[f], "flow {f}: drops by reason");
        let marks_by_reason: u64 = flows
            .columns
            .iter()
            .filter(|(n, _)| n.starts_with("marks_"))
            .map(|(n, _)| flows.u64(n)[f])
            .sum();
        assert_eq!(marks_by_reason, marked[f], "flow {f}: marks by reason");
    }
}

#[test]
fn conservation_with_tail_drops() {
    // 5 CUBIC flows into a 20-packet buffer at 100 Mbps: plenty of overflow drops, RTOs and
    // recoveries, and a run that ends with packets in flight.
    let cfg = config(
        100 * MBPS,
        None,
        Some(20),
        taildrop(),
        &[class("cubic", 5, 20.0)],
        20.0,
        0.0,
        7,
    );
    let r = run(&cfg);
    assert!(
        col_u64(&r, "flows", "total_dropped_pkts")
            .iter()
            .sum::<u64>()
            > 100
    );
    assert_conservation(&r);
}

#[test]
fn conservation_with_marks_and_drops() {
    // Random drops and marks on ECN flows of three CCs.
    let mut classes = vec![
        class("dctcp", 2, 10.0),
        class("reno", 2, 30.0),
        class("cubic", 2, 50.0),
    ];
    classes[1].ecn = true;
    classes[2].ecn = true;
    let cfg = config(
        200 * MBPS,
        Some(2_000_000),
        None,
        bernoulli(0.002, 0.01),
        &classes,
        10.0,
        0.0,
        3,
    );
    let r = run(&cfg);
    assert!(col_u64(&r, "flows", "total_marked_pkts")
        .iter()
        .all(|&m| m > 0));
    assert_conservation(&r);
}

// ---------------------------------------------------------------------------------------------
// Analytic oracles: steady-state window laws
// ---------------------------------------------------------------------------------------------

/// Goodput of the single flow of a run, in segments per RTT.
fn window_segments(r: &sim::RunResult, rtt_s: f64) -> f64 {
    let g = col_f64(r, "flows", "goodput_bps")[0];
    g / 8.0 / MSS * rtt_s
}

#[test]
fn reno_matches_mathis_under_random_loss() {
    // Mathis et al. 1997: W = √(3/(2p)) ≈ 1.22/√p segments per RTT (Mathis, Semke, Mahdavi, Ott, CCR 1997; Linux counts
    // acked segments, so delayed ACKs do not change the constant). A 10 Gbps link keeps the
    // flow far below capacity, so the RTT is the 50 ms base RTT and losses come only from the
    // Bernoulli dropper.
    for (p, secs) in [(1e-4, 600.0), (1e-3, 200.0), (1e-2, 200.0)] {
        let cfg = config(
            10 * GBPS,
            None,
            None,
            bernoulli(p, 0.0),
            &[class("reno", 1, 50.0)],
            secs,
            20.0,
            11,
        );
        let r = run(&cfg);
        let w = window_segments(&r, 0.050);
        let oracle = (1.5f64 / p).sqrt();
        let err = (w - oracle).abs() / oracle;
        println!(
            "reno p={p}: W={w:.1} oracle={oracle:.1} err={:.1}%",
            err * 100.0
        );
        assert!(
            err < 0.15,
            "p={p}: W={w:.1} segments/RTT vs Mathis {oracle:.1}"
        );
    }
}

#[test]
fn cubic_matches_rfc9438_response() {
    // RFC 9438 §5.1 with Linux's β = 717/1024 and C = 0.4: W = 1.054·(R/p)^¾ ... precisely
    // W = 1.054·R^0.75/p^0.75, never below the Reno-friendly √(3/(2p)) (RFC 9438 §5.1).
    for (rtt_ms, p, secs) in [
        (100.0, 1e-5, 900.0),
        (100.0, 1e-4, 300.0),
        (10.0, 1e-3, 120.0),
    ] {
        let rtt = rtt_ms / 1000.0;
        let cfg = config(
            10 * GBPS,
            None,
            None,
            bernoulli(p, 0.0),
            &[class("cubic", 1, rtt_ms)],
            secs,
            30.0,
            5,
        );
        let r = run(&cfg);
        let w = window_segments(&r, rtt);
        let cubic = 1.054 * f64::powf(rtt, 0.75) / f64::powf(p, 0.75);
        let reno = (1.5f64 / p).sqrt();
        let oracle = cubic.max(reno);
        let err = (w - oracle).abs() / oracle;
        println!("cubic rtt={rtt_ms}ms p={p}: W={w:.1} oracle={oracle:.1} (cubic {cubic:.1}, reno {reno:.1}) err={:.1}%", err * 100.0);
        assert!(
            err < 0.20,
            "rtt={rtt_ms} ms p={p}: W={w:.1} vs oracle {oracle:.1}"
        );
    }
}

#[test]
fn dctcp_under_fixed_marking_lands_in_the_linux_band() {
    // De Schepper et al., PI2, CoNEXT 2016 (and RFC 9332 §2.1): the idealised law is W = 2/p; Linux DCTCP suspends additive increase
    // during the CWR round and cannot reduce again until CWR ends, which a mean-field argument
    // puts at W ≈ √2/p. Expect 1.4/p ≤ W ≤ 2/p where Linux's α can resolve p. The flow sees
    // no loss (marks only) and runs far below the 10 Gbps link.
    //
    // Where in the band: measured W·p ≈ 1.75–1.85 for p = 0.05–0.2, i.e. between the two
    // laws and nearer 2/p, because with W·p ≈ 2 marks per window the next ECE often arrives
    // within the RTT after CWR ends, so the Open period is shorter than the mean-field 1/p
    // packets assumes and less growth is lost than √2/p predicts.
    for p in [0.05, 0.1, 0.2] {
        let w = dctcp_window(p);
        let k = w * p;
        println!("dctcp p={p}: W={w:.1} segments, W·p = {k:.2}");
        assert!(
            (1.4..=2.0).contains(&k),
            "p={p}: W·p = {k:.2} outside [1.4, 2.0]"
        );
    }
    // Below p ≈ 1/32 Linux's fixed point cannot represent α ≈ p: each window adds
    // g·F = (Dce << 6)/D, truncated, so with F = p·(1 ± noise) and D ≈ W segments the increment
    // is ⌊64·p⌋ ∈ {0, 1} most of the time, and the min_not_zero quirk sends any α < 16 to 0.
    // α underestimates p, reductions shrink, and W·p exceeds the idealised 2 (at p = 0.01,
    // 64·p = 0.64 ⇒ the increment is usually 0). This is Linux's behaviour, not a model error.
    for p in [0.01, 0.02] {
        let w = dctcp_window(p);
        println!(
            "dctcp p={p}: W={w:.1} segments, W·p = {:.2} (α resolution limit)",
            w * p
        );
        assert!(w * p > 2.0, "p={p}: W·p = {:.2}", w * p);
    }
}

fn dctcp_window(p: f64) -> f64 {
    let mut c = class("dctcp", 1, 10.0);
    c.ecn = true;
    let cfg = config(
        10 * GBPS,
        None,
        None,
        bernoulli(0.0, p),
        &[c],
        60.0,
        10.0,
        9,
    );
    window_segments(&run(&cfg), 0.010)
}

// ---------------------------------------------------------------------------------------------
// Documented behaviour
// ---------------------------------------------------------------------------------------------

/// Bytes in one BDP of `rate` × `rtt`.
fn bdp_bytes(rate: u64, rtt_ms: f64) -> u64 {
    (rate as f64 / 8.0 * rtt_ms / 1000.0) as u64
}

#[test]
fn one_flow_fills_the_link_with_a_one_bdp_buffer() {
    // With a buffer of one BDP, halving (Reno) or ×0.7 (CUBIC) from a full pipe plus full
    // buffer leaves at least one BDP in flight: the link stays busy (the classic rule of thumb,
    // Villamizar & Song 1994). Expect ≥ 95 % utilization after slow start.
    for cc in ["reno", "cubic"] {
        let cfg = config(
            100 * MBPS,
            Some(bdp_bytes(100 * MBPS, 20.0)),
            None,
            taildrop(),
            &[class(cc, 1, 20.0)],
            60.0,
            10.0,
            1,
        );
        let r = run(&cfg);
        let u = metric(&r, "utilization");
        println!("{cc}: utilization {u:.4}");
        assert!(u >= 0.95, "{cc}: utilization {u:.3}");
    }
}

#[test]
fn ten_cubic_flows_share_fairly() {
    let mut c = class("cubic", 10, 20.0);
    c.start = json!({"kind": "uniform", "lo_ns": 0, "hi_ns": 1_000_000_000u64});
    let cfg = config(
        100 * MBPS,
        Some(bdp_bytes(100 * MBPS, 20.0)),
        None,
        taildrop(),
        &[c],
        60.0,
        0.0,
        2,
    );
    let r = run(&cfg);
    let j = metric(&r, "jain");
    println!("10 cubic: jain {j:.4}");
    assert!(j >= 0.95, "Jain {j:.3}");
}

#[test]
fn reno_favours_the_short_rtt_flow() {
    // Reno's throughput falls with RTT: 1/RTT at equal loss probability (Mathis), up to 1/RTT²
    // with synchronized drop-tail losses (Lakshman & Madhow 1997). For 10 vs 100 ms the short
    // flow should get between 3× and 100× the long flow's rate.
    let cfg = config(
        100 * MBPS,
        Some(bdp_bytes(100 * MBPS, 10.0)),
        None,
        taildrop(),
        &[class("reno", 1, 10.0), class("reno", 1, 100.0)],
        120.0,
        20.0,
        4,
    );
    let r = run(&cfg);
    let g = col_f64(&r, "flows", "goodput_bps");
    let ratio = g[0] / g[1];
    println!(
        "reno 10ms vs 100ms: {:.1} vs {:.1} Mbps, ratio {ratio:.1}",
        g[0] / 1e6,
        g[1] / 1e6
    );
    assert!((3.0..=100.0).contains(&ratio), "ratio {ratio:.2}");
}

#[test]
fn step_keeps_the_dctcp_queue_near_its_threshold() {
    // DCTCP's fluid model (Alizadeh et al., SIGCOMM 2010 §3.3): N synchronized flows over
    // a STEP marker at K packets keep the queue between K + N − A and K + N, where
    // A = ½·√(2N(C·R + K)), and the link full when K > C·R/7.
    // 1 Gbps, 5 ms: C·R = 625000 B ≈ 416.7 packets of 1500 B; K = 0.17·C·R = 106250 B
    // ≈ 70.8 packets; N = 10 ⇒ A = ½·√(20·487.5) ≈ 49.4, so the band is [31.4, 80.8] packets.
    let k_bytes = 106_250u64;
    let mut c = class("dctcp", 10, 5.0);
    c.start = json!({"kind": "uniform", "lo_ns": 0, "hi_ns": 1_000_000_000u64});
    let cfg = config(
        GBPS,
        Some(62_500_000),
        None,
        json!({"kind": "step", "threshold": {"bytes": k_bytes}}),
        &[c],
        20.0,
        5.0,
        8,
    );
    let r = run(&cfg);
    let u = metric(&r, "utilization");
    let t = col_f64(&r, "queue", "t_s");
    let b = col_u64(&r, "queue", "backlog_bytes");
    let xs: Vec<f64> = (0..t.len())
        .filter(|&i| t[i] >= 5.0)
        .map(|i| b[i] as f64 / 1500.0)
        .collect();
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    println!("dctcp step: utilization {u:.4}, mean queue {mean:.1} packets (K = 70.8)");
    assert!(u >= 0.98, "utilization {u:.3}");
    assert!(
        (31.4..=80.8).contains(&mean),
        "mean queue {mean:.1} packets outside the fluid model's band"
    );
}

// ---------------------------------------------------------------------------------------------
// Determinism
// ---------------------------------------------------------------------------------------------

#[test]
fn same_scenario_and_seed_give_identical_results_on_any_thread() {
    let mut a = class("cubic", 3, 10.0);
    a.start = json!({"kind": "uniform", "lo_ns": 0, "hi_ns": 500_000_000u64});
    let mut b = class("dctcp", 3, 30.0);
    b.start = json!({"kind": "uniform", "lo_ns": 0, "hi_ns": 500_000_000u64});
    let cfg = config(
        100 * MBPS,
        Some(300_000),
        None,
        bernoulli(0.0005, 0.005),
        &[a, b],
        10.0,
        1.0,
        42,
    );
    let first = run(&cfg);
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let c = cfg.clone();
            std::thread::spawn(move || run(&c))
        })
        .collect();
    for h in handles {
        let other = h.join().unwrap();
        assert_eq!(first.summary, other.summary);
        assert_eq!(first.tables, other.tables);
        assert_eq!(first.counters, other.counters);
    }
    // A different seed changes the start times, hence the results.
    let other_seed = cfg.replace("\"seed\":42", "\"seed\":43");
    assert_ne!(other_seed, cfg);
    assert_ne!(run(&other_seed).tables, first.tables);
}

// ---------------------------------------------------------------------------------------------
// Finite flows
// ---------------------------------------------------------------------------------------------

#[test]
fn a_finite_flow_completes_in_the_slow_start_rounds_predicted_by_hand() {
    // 100 full segments (144 800 B) on an idle 1 Gbit/s path with a 100 ms RTT. IW 10 and
    // slow start doubling per round (ABC without a per-ACK limit, RFC 3465 and Linux `tcp_slow_start`, so delayed ACKs do not slow it) send
    // 10, 20, 40 and then the last 30 segments: 4 rounds. The last segment leaves in the 4th
    // round, ≈ 3 RTTs after the start, arrives RTT/2 later and its ACK (the 100th segment: an
    // even count, acknowledged at once) reaches the sender RTT/2 after that. The FCT — start
    // until the sender has every byte acknowledged — is ≈ 4 RTT = 400 ms, plus serialization:
    // each round's burst crosses the link back to back at 12 µs per 1500-byte packet (≤ 40
    // packets ⇒ < 0.5 ms per round, < 2 ms in all).
    let mut c = class("reno", 1, 100.0);
    c.size_bytes = Some(100 * 1448);
    let cfg = config(GBPS, None, None, taildrop(), &[c], 5.0, 0.0, 1);
    let r = run(&cfg);
    let fct = col_opt(&r, "fct", "fct_s")[0].expect("completes");
    println!("fct {fct:.6} s");
    assert!(
        (0.400..0.402).contains(&fct),
        "FCT {fct} s, expected 4 RTT + < 2 ms"
    );
    // No loss, no retransmission on an idle path.
    assert_eq!(col_u64(&r, "flows", "retrans_segs")[0], 0);
    assert_eq!(col_u64(&r, "flows", "segs_sent")[0], 100);
}

// ---------------------------------------------------------------------------------------------
// Unresponsive CBR traffic
// ---------------------------------------------------------------------------------------------

#[test]
fn a_cbr_flow_alone_delivers_its_rate_and_is_conserved_when_overloaded() {
    // 50 Mbit/s of 1500-byte datagrams (1472 B payload) on an idle 100 Mbit/s link: every
    // datagram arrives, goodput = 50e6·1472/1500 = 49.067 Mbit/s over the window.
    let cfg = config(
        100 * MBPS,
        Some(150_000),
        None,
        taildrop(),
        &[cbr(1, 20.0, 50 * MBPS)],
        10.0,
        1.0,
        1,
    );
    let r = run(&cfg);
    let g = col_f64(&r, "flows", "goodput_bps")[0];
    assert!(
        (g - 50e6 * 1472.0 / 1500.0).abs() < 0.001 * g,
        "goodput {g}"
    );
    assert_eq!(col_u64(&r, "flows", "total_dropped_pkts")[0], 0);
    // 150 Mbit/s into 100 Mbit/s: a third is dropped, and every datagram is accounted for.
    let cfg = config(
        100 * MBPS,
        Some(150_000),
        None,
        taildrop(),
        &[cbr(1, 20.0, 150 * MBPS)],
        10.0,
        0.0,
        1,
    );
    let r = run(&cfg);
    assert_conservation(&r);
    let g = col_f64(&r, "flows", "goodput_bps")[0];
    // The link carries 100 Mbit/s of 1500-byte datagrams: goodput 100e6·1472/1500 = 98.13.
    assert!(
        (g - 100e6 * 1472.0 / 1500.0).abs() < 0.01 * g,
        "goodput {g}"
    );
    let d = col_opt(&r, "flows", "drop_ratio")[0].unwrap();
    assert!((d - 1.0 / 3.0).abs() < 0.01, "drop ratio {d}");
}

#[test]
fn choke_cuts_the_share_an_unresponsive_flow_takes_under_taildrop() {
    // Pan, Prabhakar, Psounis (INFOCOM 2000) §IV: 32 TCP flows beside one UDP flow sending at
    // twice the link rate; with a drop-tail (or RED) queue the UDP flow takes nearly all of the
    // link, with CHOKe it is matched in proportion to its share of the queue and keeps about a
    // quarter. Here: 100 Mbit/s, 20 ms, 300-packet buffer, CHOKe thresholds 100/200 packets,
    // 32 Reno flows and one 200 Mbit/s CBR flow. Expect the CBR share above 0.9 under TailDrop
    // and below 0.4 under CHOKe.
    let mut tcp = class("reno", 32, 20.0);
    tcp.start = json!({"kind": "uniform", "lo_ns": 0, "hi_ns": 1_000_000_000u64});
    let classes = [tcp, cbr(1, 20.0, 200 * MBPS)];
    let share = |aqm: serde_json::Value| {
        let r = run(&config(
            100 * MBPS,
            None,
            Some(300),
            aqm,
            &classes,
            30.0,
            5.0,
            3,
        ));
        let g = col_f64(&r, "flows", "goodput_bps");
        g[32] / g.iter().sum::<f64>()
    };
    let taildrop_share = share(taildrop());
    let choke_share = share(
        json!({"kind": "choke", "limit": 300, "min": 100, "max": 200, "bandwidth": 100 * MBPS}),
    );
    println!("cbr share: taildrop {taildrop_share:.3}, choke {choke_share:.3}");
    assert!(
        taildrop_share > 0.9,
        "TailDrop lets the CBR flow take {taildrop_share:.3}"
    );
    assert!(
        choke_share < 0.4,
        "CHOKe leaves the CBR flow {choke_share:.3}"
    );
}

#[test]
fn gsp_holds_the_cubic_queue_near_its_threshold() {
    // Fejes et al. 2019 §3: with many flows GSP "acts like an on-off controller keeping a given queuing
    // delay". 10 CUBIC flows, 100 Mbit/s, 20 ms, a 1-BDP buffer (250 000 B = 20 ms), θ = 0.75
    // of it (187 500 B = 15 ms, the rule of Fejes et al. 2019). Expect a full link, the mean sojourn within
    // [0.75, 1.1] × 15 ms, and no overflow (GSP's single drops keep the queue off the limit).
    let mut c = class("cubic", 10, 20.0);
    c.start = json!({"kind": "uniform", "lo_ns": 0, "hi_ns": 1_000_000_000u64});
    let aqm = json!({"kind": "gsp", "threshold": {"bytes": 187_500}});
    let r = run(&config(
        100 * MBPS,
        Some(250_000),
        None,
        aqm,
        &[c],
        60.0,
        10.0,
        6,
    ));
    let mean_ms = r.summary["metrics"]["sojourn_ms"]["mean"].as_f64().unwrap();
    let u = metric(&r, "utilization");
    let overflow: u64 = col_u64(&r, "flows", "drops_overflow").iter().sum();
    println!("gsp: utilization {u:.4}, mean sojourn {mean_ms:.2} ms (target 15), overflow drops {overflow}");
    assert!(u > 0.99, "utilization {u}");
    assert!(
        (11.25..=16.5).contains(&mean_ms),
        "mean sojourn {mean_ms} ms"
    );
    assert_eq!(overflow, 0);
}

#[test]
fn ckcd_cuts_the_share_an_unresponsive_flow_takes_under_taildrop() {
    // Liu et al. (CKCD) motivate CKCD's enqueue phase with CHOKe's containment of unresponsive flows.
    // The CHOKe test's setting (32 Reno + one 200 Mbit/s CBR flow, 100 Mbit/s, 300 packets)
    // with CKCD's defaults (q_min = min(BDP, B/3) = 100, q_max = min(3·BDP, B) = 300 packets,
    // D = 5 ms, Δ = 100 ms, d_max = the 36 ms buffer time): the CBR flow, nearly alone under
    // TailDrop, should keep well under two thirds of the link.
    let mut tcp = class("reno", 32, 20.0);
    tcp.start = json!({"kind": "uniform", "lo_ns": 0, "hi_ns": 1_000_000_000u64});
    let classes = [tcp, cbr(1, 20.0, 200 * MBPS)];
    let ckcd = json!({"kind": "ckcd", "q_min": {"packets": 100}, "q_max": {"packets": 300}});
    let r = run(&config(
        100 * MBPS,
        None,
        Some(300),
        ckcd,
        &classes,
        30.0,
        5.0,
        3,
    ));
    let g = col_f64(&r, "flows", "goodput_bps");
    let share = g[32] / g.iter().sum::<f64>();
    println!(
        "ckcd: cbr share {share:.3}, utilization {:.4}",
        metric(&r, "utilization")
    );
    assert!(share < 0.66, "CBR share {share:.3}");
    assert!(metric(&r, "utilization") > 0.99);
}

#[test]
fn codel_holds_the_cubic_sojourn_near_its_target() {
    // RFC 8289 §1–3: CoDel keeps the standing queue near `target` (5 ms) whatever the buffer.
    // 10 CUBIC flows, 100 Mbit/s, 20 ms, a 1000-packet (120 ms) buffer: TailDrop fills it;
    // CoDel should keep the mean sojourn within [target, 2·target] with the link full.
    let mut c = class("cubic", 10, 20.0);
    c.start = json!({"kind": "uniform", "lo_ns": 0, "hi_ns": 1_000_000_000u64});
    let sojourn = |aqm: serde_json::Value| {
        let r = run(&config(
            100 * MBPS,
            None,
            Some(1000),
            aqm,
            std::slice::from_ref(&c),
            60.0,
            10.0,
            2,
        ));
        (
            r.summary["metrics"]["sojourn_ms"]["mean"].as_f64().unwrap(),
            metric(&r, "utilization"),
        )
    };
    let (codel, u) = sojourn(json!({"kind": "codel", "limit": 1000}));
    let (taildrop, _) = sojourn(taildrop());
    println!("codel: mean sojourn {codel:.2} ms (target 5), utilization {u:.4}; taildrop {taildrop:.1} ms");
    assert!(
        (5.0..=10.0).contains(&codel),
        "CoDel mean sojourn {codel} ms"
    );
    assert!(u > 0.98);
    assert!(taildrop > 50.0);
}

#[test]
fn fq_codel_evens_out_mixed_ccs_and_rtts_and_isolates_a_cbr_flow() {
    // RFC 8290 §1: flow queueing gives each flow an equal share of the link and keeps queues
    // short. 2 CUBIC flows at 10 ms and 2 Reno flows at 80 ms (100 Mbit/s, 1000-packet
    // buffer): TailDrop favours the short-RTT CUBIC flows and fills the buffer; FQ-CoDel
    // should raise Jain's index above 0.95 and keep the mean sojourn near CoDel's 5 ms.
    let classes = [class("cubic", 2, 10.0), class("reno", 2, 80.0)];
    let go = |aqm: serde_json::Value| {
        run(&config(
            100 * MBPS,
            None,
            Some(1000),
            aqm,
            &classes,
            60.0,
            10.0,
            4,
        ))
    };
    let td = go(taildrop());
    let fq = go(json!({"kind": "fq_codel", "limit": 1000}));
    let (j_td, j_fq) = (metric(&td, "jain"), metric(&fq, "jain"));
    let d_fq = fq.summary["metrics"]["sojourn_ms"]["mean"]
        .as_f64()
        .unwrap();
    println!("fq_codel: jain {j_fq:.3} (taildrop {j_td:.3}), mean sojourn {d_fq:.2} ms");
    assert!(j_fq > 0.95 && j_fq > j_td);
    assert!(d_fq < 10.0, "mean sojourn {d_fq} ms");
    // An unresponsive 60 Mbit/s CBR flow beside 4 CUBIC flows gets about its fair share
    // (one fifth), not the 60 % it sends.
    let classes = [class("cubic", 4, 20.0), cbr(1, 20.0, 60 * MBPS)];
    let r = run(&config(
        100 * MBPS,
        None,
        Some(1000),
        json!({"kind": "fq_codel", "limit": 1000}),
        &classes,
        30.0,
        5.0,
        4,
    ));
    let g = col_f64(&r, "flows", "goodput_bps");
    let share = g[4] / g.iter().sum::<f64>();
    println!("fq_codel: cbr share {share:.3}");
    assert!((0.15..0.3).contains(&share), "CBR share {share:.3}");
}

#[test]
fn pie_holds_the_cubic_sojourn_at_its_target() {
    // RFC 8033 §1: PIE's PI controller drives the queueing delay to `target` (15 ms) on
    // average. 10 CUBIC flows, 100 Mbit/s, 20 ms, 1000-packet buffer; both delay estimators.
    let mut c = class("cubic", 10, 20.0);
    c.start = json!({"kind": "uniform", "lo_ns": 0, "hi_ns": 1_000_000_000u64});
    for rate_estimator in [false, true] {
        let aqm = json!({"kind": "pie", "limit": 1000, "dq_rate_estimator": rate_estimator});
        let r = run(&config(
            100 * MBPS,
            None,
            Some(1000),
            aqm,
            std::slice::from_ref(&c),
            60.0,
            10.0,
            2,
        ));
        let mean = r.summary["metrics"]["sojourn_ms"]["mean"].as_f64().unwrap();
        println!("pie (rate estimator {rate_estimator}): mean sojourn {mean:.2} ms (target 15), utilization {:.4}", metric(&r, "utilization"));
        assert!((12.0..=18.0).contains(&mean), "mean sojourn {mean} ms");
        assert!(metric(&r, "utilization") > 0.98);
    }
}

#[test]
fn pi2_holds_the_dctcp_sojourn_at_its_target() {
    // The setting of Fejes et al. 2020: 10 DCTCP flows (ECT(0), so ecn_mask = any_ect), 1 Gbit/s, 5 ms,
    // 500 ms buffer, PI2 with tupdate 10 ms, α 0.16, β 3.2, target K·RTT with K = 0.5
    // (2.5 ms). The PI controller's integral action drives the mean queueing delay to the
    // target (De Schepper et al. 2016 §4); expect it within ±10 % and a full link.
    let mut c = class("dctcp", 10, 5.0);
    c.start = json!({"kind": "uniform", "lo_ns": 0, "hi_ns": 1_000_000_000u64});
    let aqm = json!({"kind": "pi2", "target": 2_500_000u64, "tupdate": 10_000_000u64, "alpha": 0.16, "beta": 3.2, "ecn_mask": "any_ect"});
    let r = run(&config(
        GBPS,
        Some(62_500_000),
        None,
        aqm,
        &[c],
        30.0,
        5.0,
        3,
    ));
    let mean = r.summary["metrics"]["sojourn_ms"]["mean"].as_f64().unwrap();
    println!(
        "pi2: mean sojourn {mean:.3} ms (target 2.5), utilization {:.4}, jain {:.3}",
        metric(&r, "utilization"),
        metric(&r, "jain")
    );
    assert!((2.25..=2.75).contains(&mean), "mean sojourn {mean} ms");
    assert!(metric(&r, "utilization") > 0.99);
}

#[test]
fn fq_pie_evens_out_mixed_ccs_and_rtts() {
    // sch_fq_pie's purpose (NetDevConf 0x14): per-flow queues give each flow an equal share
    // while each queue's PIE holds its delay near target (15 ms). Same mix as the FQ-CoDel test.
    let classes = [class("cubic", 2, 10.0), class("reno", 2, 80.0)];
    let r = run(&config(
        100 * MBPS,
        None,
        Some(1000),
        json!({"kind": "fq_pie", "limit": 1000}),
        &classes,
        60.0,
        10.0,
        4,
    ));
    let j = metric(&r, "jain");
    let d = r.summary["metrics"]["sojourn_ms"]["mean"].as_f64().unwrap();
    println!(
        "fq_pie: jain {j:.3}, mean sojourn {d:.2} ms, utilization {:.4}",
        metric(&r, "utilization")
    );
    assert!(j > 0.95, "Jain {j}");
    assert!(d < 18.0, "mean sojourn {d} ms");
    assert!(metric(&r, "utilization") > 0.98);
}

#[test]
fn dualpi2_brings_dctcp_and_cubic_far_closer_than_a_shared_red_queue() {
    // De Schepper et al. (DualQ) (DCTCP vs Cubic at 40 Mbit/s, 7 ms): in one RED queue with ECN (the slides' tc
    // line) DCTCP starves Cubic; the DualQ's coupling (p_C = (p_L/k)², k = 2; RFC 9332 §2.1)
    // brings their rates close while the queue stays short. 2 + 2 flows; DCTCP classified by
    // ECN (any_ect), as in the demo. Expect the DCTCP/Cubic ratio under 3 with DualPI2 (over
    // 10 with RED) and a mean sojourn under 10 ms (RED's thresholds sit at 24–72 ms).
    let classes = [class("dctcp", 2, 7.0), class("cubic", 2, 7.0)];
    let ratio = |aqm: serde_json::Value| {
        let r = run(&config(
            40 * MBPS,
            Some(1_250_000),
            None,
            aqm,
            &classes,
            60.0,
            10.0,
            5,
        ));
        let g = col_f64(&r, "flows", "goodput_bps");
        (
            (g[0] + g[1]) / (g[2] + g[3]),
            r.summary["metrics"]["sojourn_ms"]["mean"].as_f64().unwrap(),
        )
    };
    let red = json!({"kind": "red", "limit": {"bytes": 1_600_000u64}, "min": {"bytes": 120_000u64}, "max": {"bytes": 360_000u64}, "avpkt": {"bytes": 1000}, "burst": 220, "ecn": true, "bandwidth": 40 * MBPS});
    let (r_red, d_red) = ratio(red);
    let (r_dq, d_dq) = ratio(json!({"kind": "dualpi2", "ecn_mask": "any_ect"}));
    println!("dctcp/cubic: red {r_red:.2} ({d_red:.1} ms), dualpi2 {r_dq:.2} ({d_dq:.1} ms)");
    assert!(r_red > 10.0, "RED ratio {r_red}");
    assert!(r_dq < 3.0, "DualPI2 ratio {r_dq}");
    assert!(d_dq < 10.0, "DualPI2 mean sojourn {d_dq} ms");
}

/// DualPI2 (Linux defaults, `any_ect`) at 40 Mbit/s with 2 scalable + 2 classic flows of one
/// base RTT: (scalable/classic goodput ratio, scalable mean sojourn ms, classic mean sojourn ms).
fn dualpi2_pair(scalable: &str, classic: &str, rtt_ms: f64, seed: u64) -> (f64, f64, f64) {
    let classes = [class(scalable, 2, rtt_ms), class(classic, 2, rtt_ms)];
    let aqm = json!({"kind": "dualpi2", "ecn_mask": "any_ect"});
    let r = run(&config(
        40 * MBPS,
        Some(1_250_000),
        None,
        aqm,
        &classes,
        60.0,
        10.0,
        seed,
    ));
    let g = col_f64(&r, "classes", "goodput_bps");
    let soj = col_opt(&r, "classes", "sojourn_mean_ms");
    (g[0] / g[1], soj[0].unwrap(), soj[1].unwrap())
}

#[test]
fn dualpi2_coupling_equalizes_windows_so_rates_are_equal_where_rtts_are() {
    // What the coupling promises (RFC 9332 §2.1): with p_C = (p_L/k)², k = 2, a
    // DCTCP flow (W = 2/p_L, De Schepper et al., PI2, CoNEXT 2016) and a Reno-friendly classic flow (W = 1.22/√p_C =
    // 2.44/p_L, Mathis) get roughly equal *windows*. Their rates then differ by their RTTs —
    // base RTT plus their own queue: the classic queue sits at DualPI2's 15 ms target, the L
    // queue below its 1 ms step — so the fluid prediction of the DCTCP/classic rate ratio is
    // RTT_C / (1.22 · RTT_L). At the 7 ms of De Schepper et al. (DualQ) that is ≈ 2.4 (the RTTs differ threefold); at
    // 50 ms it is ≈ 1 ("roughly equal throughput"). Tolerances: ±35 % around the prediction at
    // 7 ms (the fluid model ignores DCTCP's W·p below 2 under random marks — 1.75–1.85 in
    // `dctcp_under_fixed_marking_lands_in_the_linux_band` — and delayed ACKs), [2/3, 3/2] for
    // "roughly equal". Over seeds 1–3 the 7 ms ratios measured 0.73–0.83 of the prediction and
    // the 50 ms ones 0.89–1.03.
    for classic in ["cubic", "reno"] {
        let (r7, l7, c7) = dualpi2_pair("dctcp", classic, 7.0, 2);
        let pred7 = (7.0 + c7) / (1.22 * (7.0 + l7));
        let (r50, l50, c50) = dualpi2_pair("dctcp", classic, 50.0, 2);
        let pred50 = (50.0 + c50) / (1.22 * (50.0 + l50));
        println!("dctcp/{classic}: 7 ms ratio {r7:.2} (fluid {pred7:.2}; L {l7:.2} ms, C {c7:.2} ms), 50 ms ratio {r50:.2} (fluid {pred50:.2})");
        assert!(
            l7 < 1.0 && (12.0..=18.0).contains(&c7),
            "7 ms: L {l7:.2} ms, C {c7:.2} ms (step 1 ms, target 15 ms)"
        );
        assert!(
            (0.65..=1.35).contains(&(r7 / pred7)),
            "7 ms: ratio {r7:.2} vs fluid {pred7:.2}"
        );
        assert!((2.0 / 3.0..=1.5).contains(&r50), "50 ms: ratio {r50:.2}");
    }
}

#[test]
fn dualpi2_gives_prague_and_cubic_equal_rates_at_a_short_rtt() {
    // L4S's partner for DualPI2 is a scalable CC that is RTT-independent below 25 ms (TCP
    // Prague's reference RTT, `prague_rtt_target` in Linux `tcp_prague.c`; RFC 9331 §4.3 "reduce RTT
    // dependence"): at De Schepper et al. (DualQ)'s
    // 40 Mbit/s, 7 ms, where DCTCP's rate exceeds Cubic's by the RTT ratio (test above), Prague
    // and Cubic get roughly equal rates ([2/3, 3/2]; measured 0.87–1.01 over seeds 1–3) and
    // Prague's queue stays under the 1 ms step.
    let (r, l, c) = dualpi2_pair("prague", "cubic", 7.0, 2);
    println!("prague/cubic at 7 ms: ratio {r:.2}, L {l:.2} ms, C {c:.2} ms");
    assert!((2.0 / 3.0..=1.5).contains(&r), "ratio {r:.2}");
    assert!(l < 1.0 && c > 10.0 * l, "L {l:.2} ms, C {c:.2} ms");
}

// ---------------------------------------------------------------------------------------------
// Packet-value disciplines (PPV, CSAQM) and the marker
// ---------------------------------------------------------------------------------------------

/// Flows of a class starting uniformly in the first second (as the seeds' iperf3 flows).
fn spread(mut c: Class) -> Class {
    c.start = json!({"kind": "uniform", "lo_ns": 0, "hi_ns": 1_000_000_000u64});
    c
}

#[test]
fn ppv_evens_out_a_cubic_flow_and_an_unresponsive_cbr_flow_unlike_taildrop() {
    // The marker requirement (ppv.elte.hu): with equal TVFs, a node that drops the packets
    // valued below a threshold leaves each flow the same throughput, whatever its CC — Fejes
    // et al. 2019 §3: PPV "can provide fairness between connections even with different CCs". Here
    // one CUBIC flow beside a 150 Mbit/s CBR flow on 100 Mbit/s, 20 ms, a 1-BDP buffer
    // (250 000 B). TailDrop: the CBR flow takes the link (share > 0.95). PPV: the CBR flow
    // keeps its packets valued above the common threshold only; CUBIC's sawtooth under that
    // threshold (β = 0.7, so it averages ≈ 0.8–0.9 of its cap) leaves the CBR flow somewhat
    // more than half: expect a share in [0.45, 0.65] (measured 0.584–0.593 over seeds 1–5).
    let classes = [class("cubic", 1, 20.0), cbr(1, 20.0, 150 * MBPS)];
    let share = |aqm: serde_json::Value| {
        let r = run(&config(
            100 * MBPS,
            Some(250_000),
            None,
            aqm,
            &classes,
            20.0,
            5.0,
            3,
        ));
        let g = col_f64(&r, "flows", "goodput_bps");
        (g[1] / (g[0] + g[1]), metric(&r, "utilization"))
    };
    let (td, _) = share(taildrop());
    let (ppv, u) = share(json!({"kind": "ppv"}));
    println!("cbr share: taildrop {td:.3}, ppv {ppv:.3} (utilization {u:.4})");
    assert!(td > 0.95, "TailDrop CBR share {td:.3}");
    assert!((0.45..=0.65).contains(&ppv), "PPV CBR share {ppv:.3}");
    assert!(u > 0.98);
}

#[test]
fn ppv_brings_bbr_and_cubic_close_in_a_small_buffer() {
    // Fejes et al. 2019 §5: with small buffers BBR suppresses Cubic under TailDrop ("16 times or more"
    // in the 1 Gbit/s cases), while "PPV shows very good fairness even with small buffer
    // sizes". 2 BBR + 2 CUBIC flows, 100 Mbit/s, 10 ms, buffer 0.2 BDP (25 000 B). This BBR is
    // v1 (the paper ran BBRv2, which backs off on loss and is gentler), so TailDrop's ratio is
    // larger than the paper's; expect BBR/CUBIC above 8 under TailDrop and below 2 under PPV
    // (measured ≈ 19–23 and 1.50–1.56 over seeds 1–5).
    let classes = [
        spread(class("cubic", 2, 10.0)),
        spread(class("bbr", 2, 10.0)),
    ];
    let ratio = |aqm: serde_json::Value| {
        let r = run(&config(
            100 * MBPS,
            Some(25_000),
            None,
            aqm,
            &classes,
            20.0,
            5.0,
            3,
        ));
        let g = col_f64(&r, "flows", "goodput_bps");
        ((g[2] + g[3]) / (g[0] + g[1]), metric(&r, "utilization"))
    };
    let (td, _) = ratio(taildrop());
    let (ppv, u) = ratio(json!({"kind": "ppv"}));
    println!("bbr/cubic: taildrop {td:.2}, ppv {ppv:.2} (utilization {u:.4})");
    assert!(td > 8.0, "TailDrop BBR/CUBIC {td:.2}");
    assert!(ppv < 2.0, "PPV BBR/CUBIC {ppv:.2}");
    assert!(u > 0.98);
}

#[test]
fn csaqm_holds_the_dctcp_sojourn_near_k_rtt_and_spares_flows_below_their_share() {
    // Fejes et al. 2020 §III–IV: CSAQM marks the lowest-valued packets so that the unmarked ones fit
    // D_target = K·RTT, and "the target delay is properly kept by STEP and CSAQM". 10 DCTCP
    // flows, 1 Gbit/s, 5 ms, 500 ms buffer, K = 0.5: D_target = 2.5 ms, L_target = 312 500 B,
    // CTV every 5 ms. Expect the mean sojourn within ±30 % of 2.5 ms and a full link
    // (measured 2.59–2.61 ms and 1.000 over seeds 1–5), and equal shares (Jain > 0.99).
    let aqm = json!({"kind": "csaqm", "target": 2_500_000u64});
    let r = run(&config(
        GBPS,
        Some(62_500_000),
        None,
        aqm.clone(),
        &[spread(class("dctcp", 10, 5.0))],
        10.0,
        3.0,
        3,
    ));
    let mean = r.summary["metrics"]["sojourn_ms"]["mean"].as_f64().unwrap();
    let (u, j) = (metric(&r, "utilization"), metric(&r, "jain"));
    println!("csaqm: mean sojourn {mean:.3} ms (target 2.5), utilization {u:.4}, jain {j:.4}");
    assert!((1.75..=3.25).contains(&mean), "mean sojourn {mean} ms");
    assert!(u > 0.99, "utilization {u}");
    assert!(j > 0.99, "Jain {j}");
    assert!(col_u64(&r, "flows", "marks_ctv").iter().all(|&m| m > 0));
    // "CSAQM by design does not mark packets from connections with throughput below their
    // fair share" (Fejes et al. 2020 §III): a 20 Mbit/s CBR flow (fair share ≈ 100 Mbit/s) beside 9
    // DCTCP flows loses nothing in the window (its Not-ECT packets would be dropped, not
    // marked, below the CTV).
    let r = run(&config(
        GBPS,
        Some(62_500_000),
        None,
        aqm,
        &[spread(class("dctcp", 9, 5.0)), cbr(1, 5.0, 20 * MBPS)],
        10.0,
        3.0,
        3,
    ));
    let value_drops = col_u64(&r, "flows", "drops_value");
    println!("csaqm: cbr value drops in the window {}", value_drops[9]);
    assert_eq!(value_drops[9], 0);
    assert!(
        value_drops[..9].iter().all(|&d| d == 0),
        "DCTCP packets are ECT: marked, never dropped"
    );
}

#[test]
fn a_two_to_one_tvf_splits_the_link_two_to_one() {
    // The marker requirement with V_gold(x) = V(x/2), V_silver(x) = V(x) (ppv.elte.hu): at the
    // common threshold value a gold flow keeps twice a silver flow's throughput. Two classes of
    // two flows each, same CC and RTT; expect the gold/silver ratio within ±20 % of 2.
    // PPV (drop-based, Fejes et al. 2019): CUBIC, 100 Mbit/s, 20 ms, 1-BDP buffer — measured 1.77–1.89
    // over seeds 1–5. CSAQM (ECN, Fejes et al. 2020): DCTCP, 1 Gbit/s, 5 ms, K = 0.5 — measured
    // 1.95–2.01.
    let weights = json!({"class_weights": [2.0, 1.0]});
    let cases = [
        (
            "ppv",
            "cubic",
            100 * MBPS,
            20.0,
            250_000u64,
            json!({"kind": "ppv"}),
        ),
        (
            "csaqm",
            "dctcp",
            GBPS,
            5.0,
            62_500_000u64,
            json!({"kind": "csaqm", "target": 2_500_000u64}),
        ),
    ];
    for (name, cc, rate, rtt, buffer, aqm) in cases {
        let classes = [spread(class(cc, 2, rtt)), spread(class(cc, 2, rtt))];
        let cfg = with_marker(
            &config(rate, Some(buffer), None, aqm, &classes, 20.0, 5.0, 5),
            weights.clone(),
        );
        let r = run(&cfg);
        let g = col_f64(&r, "flows", "goodput_bps");
        let ratio = (g[0] + g[1]) / (g[2] + g[3]);
        println!(
            "{name}: gold/silver {ratio:.3}, utilization {:.4}",
            metric(&r, "utilization")
        );
        assert!(
            (1.6..=2.4).contains(&ratio),
            "{name}: gold/silver {ratio:.3}"
        );
        // The marker draws from per-flow streams of the run seed: a rerun is identical.
        assert_eq!(run(&cfg).tables, r.tables);
    }
}

#[test]
fn a_marker_is_refused_for_a_discipline_that_ignores_values() {
    let cfg = with_marker(
        &config(
            100 * MBPS,
            Some(250_000),
            None,
            taildrop(),
            &[class("cubic", 1, 20.0)],
            1.0,
            0.0,
            1,
        ),
        json!({}),
    );
    let err = sim::run_json(&cfg, &mut |_| true)
        .expect_err("refused")
        .to_string();
    assert!(
        err.starts_with("marker: only disciplines that read packet values"),
        "{err}"
    );
    let ppv = json!({"kind": "ppv"});
    let cfg = with_marker(
        &config(
            100 * MBPS,
            Some(250_000),
            None,
            ppv,
            &[class("cubic", 1, 20.0)],
            1.0,
            0.0,
            1,
        ),
        json!({"class_weights": [1.0, 2.0]}),
    );
    let err = sim::run_json(&cfg, &mut |_| true)
        .expect_err("refused")
        .to_string();
    assert!(
        err.starts_with("marker.weights: 2 weights for 1 flow classes"),
        "{err}"
    );
}
