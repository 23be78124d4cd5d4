//! Scenario-level checks of the model-based and scalable CCs (BBR v1/v2/v3, Prague): each
//! assertion names the documented behaviour it reproduces and its tolerance.

mod common;

use common::*;
use serde_json::json;
use sim::results::Column;

const MBPS: u64 = 1_000_000;

fn taildrop() -> serde_json::Value {
    json!({"kind": "taildrop"})
}

fn bdp_bytes(rate: u64, rtt_ms: f64) -> u64 {
    (rate as f64 / 8.0 * rtt_ms / 1000.0) as u64
}

fn phases(r: &sim::RunResult) -> Vec<Option<String>> {
    match r.table("timeseries").get("cc_phase") {
        Some(Column::OptStr(v)) => v.clone(),
        other => panic!("cc_phase: {other:?}"),
    }
}

fn sojourn_mean_ms(r: &sim::RunResult) -> f64 {
    r.summary["metrics"]["sojourn_ms"]["mean"]
        .as_f64()
        .expect("sojourn mean")
}

/// Share of the link's goodput taken by the flows of class 0.
fn share_of_first_class(r: &sim::RunResult) -> f64 {
    let g = col_f64(r, "classes", "goodput_bps");
    g[0] / g.iter().sum::<f64>()
}

#[test]
fn each_model_based_cc_alone_fills_a_deep_buffered_path() {
    // Alone on 100 Mbps, 20 ms with a deep buffer, a model-based CC keeps the link ≥ 95 % busy
    // (BBR pays ≈ 2 % for PROBE_RTT — 200 ms of every 10 s — and paces 1 % below its estimate).
    for cc in ["bbr", "bbr2", "bbr3", "prague"] {
        let cfg = config(
            100 * MBPS,
            Some(10 * bdp_bytes(100 * MBPS, 20.0)),
            None,
            taildrop(),
            &[class(cc, 1, 20.0)],
            30.0,
            5.0,
            1,
        );
        let r = run(&cfg);
        let u = metric(&r, "utilization");
        println!(
            "{cc}: utilization {u:.4}, mean sojourn {:.2} ms",
            sojourn_mean_ms(&r)
        );
        assert!(u >= 0.95, "{cc}: utilization {u:.3}");
    }
}

#[test]
fn bbr_enters_probe_rtt_every_ten_seconds_at_four_packets() {
    // tcp_bbr.c: min_rtt expires after bbr_min_rtt_win_sec = 10 s without a lower sample;
    // PROBE_RTT then holds cwnd at bbr_cwnd_min_target = 4 for ≥ 200 ms and one round. On a
    // path where the flow alone sets the RTT, nothing lowers min_rtt between probes, so
    // episodes recur every 10 s plus the episode itself (≈ 0.2–0.3 s).
    let cfg = config(
        100 * MBPS,
        Some(10 * bdp_bytes(100 * MBPS, 20.0)),
        None,
        taildrop(),
        &[class("bbr", 1, 20.0)],
        35.0,
        0.0,
        1,
    );
    let r = run(&cfg);
    let t = col_f64(&r, "timeseries", "t_s");
    let cwnd = col_u64(&r, "timeseries", "cwnd");
    let ph = phases(&r);
    let mut starts = Vec::new();
    let mut prev = false;
    for i in 0..t.len() {
        let in_probe = ph[i].as_deref() == Some("probe_rtt");
        if in_probe {
            assert_eq!(cwnd[i], 4, "cwnd in PROBE_RTT at t={}", t[i]);
            if !prev {
                starts.push(t[i]);
            }
        }
        prev = in_probe;
    }
    println!("PROBE_RTT starts: {starts:?}");
    assert_eq!(starts.len(), 3, "{starts:?}");
    for w in starts.windows(2) {
        let gap = w[1] - w[0];
        assert!(
            (10.0..=10.6).contains(&gap),
            "gap {gap:.2} s between PROBE_RTT episodes"
        );
    }
}

#[test]
fn several_bbr_flows_keep_a_standing_queue_of_about_one_bdp() {
    // Hock, Bless, Zitterbart, "Experimental evaluation of BBR congestion control", ICNP 2017,
    // §IV-B: several BBR flows overestimate the bottleneck jointly and become cwnd-limited at
    // cwnd_gain·BDP = 2·BDP in flight, i.e. a standing queue of about one BDP. Here the cwnd
    // also holds 3 TSO skbs and the ACK-aggregation allowance, so accept 0.5–1.75 BDP
    // (10–35 ms of queueing on a 20 ms path) — versus ≈ 0 for one paced flow.
    let mut c = class("bbr", 4, 20.0);
    c.start = json!({"kind": "uniform", "lo_ns": 0, "hi_ns": 1_000_000_000u64});
    let cfg = config(
        100 * MBPS,
        Some(10 * bdp_bytes(100 * MBPS, 20.0)),
        None,
        taildrop(),
        &[c],
        30.0,
        10.0,
        1,
    );
    let r = run(&cfg);
    let q = sojourn_mean_ms(&r);
    let alone = run(&config(
        100 * MBPS,
        Some(10 * bdp_bytes(100 * MBPS, 20.0)),
        None,
        taildrop(),
        &[class("bbr", 1, 20.0)],
        30.0,
        10.0,
        1,
    ));
    let q1 = sojourn_mean_ms(&alone);
    println!(
        "4 bbr: mean sojourn {q:.2} ms; 1 bbr: {q1:.2} ms; utilization {:.4}",
        metric(&r, "utilization")
    );
    assert!(
        (10.0..=35.0).contains(&q),
        "4 BBR flows: mean sojourn {q:.2} ms"
    );
    assert!(q1 < 5.0, "one paced BBR flow: mean sojourn {q1:.2} ms");
    assert!(metric(&r, "jain") > 0.9);
}

#[test]
fn bbr_takes_most_of_a_shallow_buffer_from_cubic_and_cubic_wins_a_deep_one() {
    // Hock et al., ICNP 2017, §IV-C (Fig. 7), and Cardwell et al., IETF 97 ICCRG slides: BBR
    // v1 ignores loss, so in a shallow drop-tail buffer it keeps its rate and CUBIC backs off
    // (BBR ≳ 80 % of the link); in a deep buffer CUBIC fills the queue, BBR's min_rtt probe
    // and 2·BDP cap leave it the smaller share (CUBIC > 50 %).
    let shallow = run(&config(
        100 * MBPS,
        Some(bdp_bytes(100 * MBPS, 20.0) / 4),
        None,
        taildrop(),
        &[class("bbr", 1, 20.0), class("cubic", 1, 20.0)],
        40.0,
        10.0,
        1,
    ));
    let deep = run(&config(
        100 * MBPS,
        Some(8 * bdp_bytes(100 * MBPS, 20.0)),
        None,
        taildrop(),
        &[class("bbr", 1, 20.0), class("cubic", 1, 20.0)],
        40.0,
        10.0,
        1,
    ));
    let (s, d) = (share_of_first_class(&shallow), share_of_first_class(&deep));
    println!("BBR share vs CUBIC: 0.25 BDP {s:.3}, 8 BDP {d:.3}");
    assert!(s > 0.8, "shallow: BBR share {s:.3}");
    assert!(d < 0.5, "deep: BBR share {d:.3}");
}

#[test]
fn bbr_runs_are_reproducible_and_the_seed_moves_the_gain_cycle() {
    // The gain cycle's start phase (prandom_u32_max in bbr_reset_probe_bw_mode) comes from the
    // run seed: the same seed gives identical results, another seed a different trajectory.
    let mk = |seed| {
        config(
            100 * MBPS,
            Some(bdp_bytes(100 * MBPS, 20.0)),
            None,
            taildrop(),
            &[class("bbr", 3, 20.0)],
            5.0,
            0.0,
            seed,
        )
    };
    let (a, b, c) = (run(&mk(7)), run(&mk(7)), run(&mk(8)));
    assert_eq!(a.table("timeseries"), b.table("timeseries"));
    assert_eq!(a.table("flows"), b.table("flows"));
    assert_ne!(a.table("timeseries"), c.table("timeseries"));
}

#[test]
fn prague_over_a_1ms_step_fills_the_link_with_a_queue_near_the_threshold() {
    // RFC 9330 §1 / RFC 9332 §1: a scalable CC over an immediate step at 1 ms keeps the link
    // full with about 1 ms of queue. Accept ≥ 95 % utilization and a mean sojourn ≤ 1.5 ms.
    let step = json!({"kind": "step", "threshold": {"bytes": 12_500u64}});
    let r = run(&config(
        100 * MBPS,
        Some(10 * bdp_bytes(100 * MBPS, 20.0)),
        None,
        step,
        &[class("prague", 1, 20.0)],
        20.0,
        5.0,
        1,
    ));
    let (u, q) = (metric(&r, "utilization"), sojourn_mean_ms(&r));
    println!("prague over step 1 ms: utilization {u:.4}, mean sojourn {q:.3} ms");
    assert!(u >= 0.95, "utilization {u:.3}");
    assert!(q <= 1.5, "mean sojourn {q:.3} ms");
}

#[test]
fn prague_is_rtt_independent_below_its_25ms_reference_where_dctcp_is_not() {
    // tcp_prague.c (prague_rtt_target = 25 ms): below the reference RTT the additive increase is
    // scaled by (srtt/25 ms)², so flows of 5 and 20 ms grow their *rate* alike and share the
    // link about evenly over DualPI2's L queue; DCTCP's +1 segment per RTT gives the 5 ms flow
    // several times the 20 ms flow's rate (≈ RTT ratio). Accept Prague's ratio in [0.75, 1.33]
    // and DCTCP's above 3.
    let ratio = |cc: &str| {
        let aqm = json!({"kind": "dualpi2", "ecn_mask": "any_ect"});
        let r = run(&config(
            100 * MBPS,
            Some(2 * bdp_bytes(100 * MBPS, 20.0)),
            None,
            aqm,
            &[class(cc, 1, 5.0), class(cc, 1, 20.0)],
            40.0,
            10.0,
            1,
        ));
        let g = col_f64(&r, "flows", "goodput_bps");
        g[0] / g[1]
    };
    let (p, d) = (ratio("prague"), ratio("dctcp"));
    println!("5 ms / 20 ms throughput: prague {p:.3}, dctcp {d:.3}");
    assert!((0.75..=1.33).contains(&p), "prague ratio {p:.3}");
    assert!(d > 3.0, "dctcp ratio {d:.3}");
}

#[test]
fn bbr2_and_bbr3_keep_a_lower_queue_than_bbr_and_bbr2_shares_more_evenly_with_cubic_in_one_bdp() {
    // Cardwell et al., "BBR v2", IETF 104/105 ICCRG: v2 bounds inflight with inflight_hi/lo and
    // drains in PROBE_BW:DOWN until inflight ≤ BDP with 15 % headroom, so alone it keeps a
    // smaller queue than v1 (which cruises at cwnd_gain·BDP); and it reacts to loss (β = 0.7),
    // so against CUBIC in a 1-BDP drop-tail buffer its share is nearer the fair 0.5 than v1's.
    let deep = |cc: &str| {
        run(&config(
            100 * MBPS,
            Some(10 * bdp_bytes(100 * MBPS, 20.0)),
            None,
            taildrop(),
            &[class(cc, 1, 20.0)],
            30.0,
            10.0,
            1,
        ))
    };
    let (q1, q2, q3) = (
        sojourn_mean_ms(&deep("bbr")),
        sojourn_mean_ms(&deep("bbr2")),
        sojourn_mean_ms(&deep("bbr3")),
    );
    let mix = |cc: &str| {
        share_of_first_class(&run(&config(
            100 * MBPS,
            Some(bdp_bytes(100 * MBPS, 20.0)),
            None,
            taildrop(),
            &[class(cc, 1, 20.0), class("cubic", 1, 20.0)],
            60.0,
            10.0,
            1,
        )))
    };
    let (s1, s2) = (mix("bbr"), mix("bbr2"));
    println!("alone: mean sojourn bbr {q1:.2} ms, bbr2 {q2:.2} ms, bbr3 {q3:.2} ms; share vs cubic at 1 BDP: bbr {s1:.3}, bbr2 {s2:.3}");
    assert!(q2 < q1, "bbr2 {q2:.2} ms vs bbr {q1:.2} ms");
    // draft-ietf-ccwg-bbr / google/bbr v3: the same bounds, DOWN at 0.9 (v3's source: 232/256).
    assert!(q3 < q1, "bbr3 {q3:.2} ms vs bbr {q1:.2} ms");
    assert!(
        (s2 - 0.5).abs() < (s1 - 0.5).abs(),
        "bbr2 share {s2:.3} vs bbr {s1:.3}"
    );
}

#[test]
fn fq_codel_gives_bbr_and_cubic_equal_shares_where_taildrop_does_not() {
    // RFC 8290 §1 / Hoeiland-Joergensen et al.: flow queueing isolates flows whatever their
    // CC, so BBRv1 and CUBIC get about half each (±0.1), where a shallow drop-tail queue lets
    // BBR take most of the link (Hock et al., ICNP 2017).
    let buf = Some(bdp_bytes(100 * MBPS, 20.0) / 4);
    let fq = json!({"kind": "fq_codel", "limit": 10240, "memory_limit": {"bytes": 33_554_432u64}});
    let s_fq = share_of_first_class(&run(&config(
        100 * MBPS,
        buf,
        None,
        fq,
        &[class("bbr", 1, 20.0), class("cubic", 1, 20.0)],
        40.0,
        10.0,
        1,
    )));
    let s_td = share_of_first_class(&run(&config(
        100 * MBPS,
        buf,
        None,
        taildrop(),
        &[class("bbr", 1, 20.0), class("cubic", 1, 20.0)],
        40.0,
        10.0,
        1,
    )));
    println!("BBR share vs CUBIC: fq_codel {s_fq:.3}, taildrop {s_td:.3}");
    assert!((0.4..=0.6).contains(&s_fq), "fq_codel: BBR share {s_fq:.3}");
    assert!(s_td > 0.8, "taildrop: BBR share {s_td:.3}");
}

#[test]
fn dualpi2_keeps_prague_in_a_far_shorter_queue_than_cubic_with_comparable_throughput() {
    // RFC 9332 §1 and De Schepper et al. (DualQ): the L4S queue (Prague, ECT(1)) stays below
    // the 1 ms step while the classic queue (CUBIC) sits near DualPI2's 15 ms target. The
    // coupling k = 2 makes the windows "roughly equal" (RFC 9332 §2.1): Prague's 2/p_L against
    // Reno's 1.22/√p_C = 1.22·k/p_L, so with the classic RTT 20 + 13.4 ms against 20.1 ms the
    // rate ratio is ≈ 0.82 · 33.4 / 20.1 ≈ 1.4, and CUBIC is at least Reno-friendly. The model
    // is further from it (docs/model.md "Known differences"), so this bound of 4 guards against
    // starvation only.
    let aqm = json!({"kind": "dualpi2"});
    let mut cubic = class("cubic", 1, 20.0);
    cubic.ecn = true;
    let r = run(&config(
        100 * MBPS,
        Some(10 * bdp_bytes(100 * MBPS, 20.0)),
        None,
        aqm,
        &[class("prague", 1, 20.0), cubic],
        40.0,
        10.0,
        1,
    ));
    let soj = col_opt(&r, "classes", "sojourn_mean_ms");
    let g = col_f64(&r, "classes", "goodput_bps");
    let (l, c) = (soj[0].unwrap(), soj[1].unwrap());
    println!(
        "DualPI2: Prague sojourn {l:.2} ms, CUBIC {c:.2} ms; throughput ratio {:.2}",
        g[0] / g[1]
    );
    assert!(l < 2.0 && c > 5.0 * l, "L {l:.2} ms vs C {c:.2} ms");
    assert!(
        (1.0 / 4.0..=4.0).contains(&(g[0] / g[1])),
        "ratio {:.2}",
        g[0] / g[1]
    );
}

#[test]
fn dctcp_alpha_in_the_time_series_follows_the_marked_fraction() {
    // RFC 8257 §3.3: α is a moving average (g = 1/16 per window) of the fraction of marked
    // packets, so under Bernoulli marking with p = 0.1 it settles at about 0.1; the time series
    // shows it (as `ss -ti` does, dctcp_get_info) as a fraction. Mean over 10–30 s within ±0.02.
    let marker = json!({"kind": "bernoulli", "drop": 0.0, "mark": 0.1});
    let r = run(&config(
        100 * MBPS,
        Some(4 * bdp_bytes(100 * MBPS, 20.0)),
        None,
        marker,
        &[class("dctcp", 1, 20.0)],
        30.0,
        10.0,
        1,
    ));
    let t = col_f64(&r, "timeseries", "t_s");
    let alpha = col_opt(&r, "timeseries", "cc_alpha");
    let late: Vec<f64> = (0..t.len())
        .filter(|&i| t[i] >= 10.0)
        .map(|i| alpha[i].expect("DCTCP reports α"))
        .collect();
    let mean = late.iter().sum::<f64>() / late.len() as f64;
    println!(
        "dctcp α under 10 % Bernoulli marking: mean {mean:.4} over {} samples",
        late.len()
    );
    assert!((mean - 0.1).abs() <= 0.02, "mean α {mean:.4}");
}
