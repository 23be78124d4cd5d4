//! The metrics of a run, defined once for both backends (docs/model.md §Metrics): Jain's
//! index, fair shares, the nearest-rank quantile, completion times by flow-size bin, and the
//! harm one flow class does to another.

use serde_json::{json, Value};

/// Jain's fairness index (Σx)² / (n·Σx²) (Jain, Chiu & Hawe, DEC-TR-301, 1984); None for no
/// flows or all-zero throughput.
pub fn jain(xs: &[f64]) -> Option<f64> {
    let n = xs.len() as f64;
    let s: f64 = xs.iter().sum();
    let s2: f64 = xs.iter().map(|x| x * x).sum();
    (n > 0.0 && s2 > 0.0).then(|| s * s / (n * s2))
}

/// `a / b`, None when b is 0.
pub fn ratio(a: u64, b: u64) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}

/// The nearest-rank q-quantile of sorted `v`: its ⌈q·n⌉-th smallest element (the first for
/// q·n ≤ 1). `v` must not be empty.
pub fn nearest_rank<T: Copy>(v: &[T], q: f64) -> T {
    v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1]
}

/// Each flow's fair share of the link, bit/s averaged over the window [lo, hi) (0 for a flow
/// that is not `scheduled`): wherever N scheduled flows are active — started and not yet
/// stopped, by their schedule `spans[f]` = (start, stop) — each of them is due C/N. A flow
/// active the whole window beside N − 1 others that are too gets C/N; one that runs alone for
/// half the window and shares with another for the other half gets (C + C/2)/2. A finite
/// scheduled flow counts as active from its start on (its yardstick is the completion time,
/// as for workloads); a stopped flow's share ends at its stop, though what it had in flight is
/// delivered after it. A workload's flows come and go and are not scheduled.
pub fn fair_shares(
    spans: &[(u64, Option<u64>)],
    scheduled: &[usize],
    window: (u64, u64),
    c_bps: f64,
) -> Vec<f64> {
    let (lo, hi) = window;
    let width = (hi - lo) as f64;
    let span = |f: usize| {
        let (start, stop) = spans[f];
        (start.clamp(lo, hi), stop.unwrap_or(hi).clamp(lo, hi))
    };
    let mut edges: Vec<u64> = scheduled
        .iter()
        .flat_map(|&f| {
            let (a, b) = span(f);
            [a, b]
        })
        .collect();
    edges.sort_unstable();
    edges.dedup();
    let mut share = vec![0.0; spans.len()];
    for e in edges.windows(2) {
        let (t0, t1) = (e[0], e[1]);
        let active: Vec<usize> = scheduled
            .iter()
            .copied()
            .filter(|&f| {
                let (a, b) = span(f);
                a <= t0 && t1 <= b
            })
            .collect();
        for &f in &active {
            share[f] += c_bps / active.len() as f64 * ((t1 - t0) as f64 / width);
        }
    }
    share
}

/// Throughput harm (Ware, Mukerjee, Seshan, Sherry, "Beyond Jain's Fairness Index: Setting the
/// Bar for the Deployment of Congestion Control Algorithms", HotNets 2019): for a metric where
/// more is better, (baseline − mixed) / baseline; 0 is no harm, negative means the class does
/// better than against its own kind. None when the baseline is 0.
pub fn throughput_harm(mixed: f64, baseline: f64) -> Option<f64> {
    (baseline != 0.0).then(|| (baseline - mixed) / baseline)
}

/// Delay harm (Ware et al., HotNets 2019): for a metric where less is better,
/// (mixed − baseline) / mixed. None when the mixed value is 0.
pub fn delay_harm(mixed: f64, baseline: f64) -> Option<f64> {
    (mixed != 0.0).then(|| (mixed - baseline) / mixed)
}

/// What the completion-time summary needs of one finite flow.
pub struct Finite {
    pub size: u64,
    /// Completion time, s; None while unfinished.
    pub fct_s: Option<f64>,
    /// Ideal completion time, s: size/C + base RTT.
    pub ideal_s: f64,
}

/// The label of a size-bin edge: 100KB, 1MB, 1500B.
fn size_label(b: u64) -> String {
    if b >= 1_000_000 && b % 1_000_000 == 0 {
        format!("{}MB", b / 1_000_000)
    } else if b % 1000 == 0 {
        format!("{}KB", b / 1000)
    } else {
        format!("{b}B")
    }
}

/// Completion times summarised by flow-size bin (`edges` are the bins' upper edges, the last
/// bin open): per bin the flows, how many completed and how many did not (never averaged
/// away), and mean / p50 / p99 of FCT and slowdown over the completed ones (nearest rank).
pub fn fct_by_size(fin: &[Finite], edges: &[u64]) -> Value {
    let mut out = Vec::new();
    for k in 0..=edges.len() {
        let lo = if k == 0 { 0 } else { edges[k - 1] };
        let hi = edges.get(k).copied();
        let name = match (k, hi) {
            (0, Some(h)) => format!("<{}", size_label(h)),
            (_, Some(h)) => format!("{}–{}", size_label(lo), size_label(h)),
            (_, None) => format!("≥{}", size_label(lo)),
        };
        let in_bin: Vec<&Finite> = fin
            .iter()
            .filter(|r| r.size >= lo && hi.map_or(true, |h| r.size < h))
            .collect();
        let mut fcts = Vec::new();
        let mut slow = Vec::new();
        for r in &in_bin {
            if let Some(fct) = r.fct_s {
                fcts.push(fct);
                slow.push(fct / r.ideal_s);
            }
        }
        let stats = |v: &mut Vec<f64>| -> Value {
            if v.is_empty() {
                return json!({"mean": null, "p50": null, "p99": null});
            }
            v.sort_by(|a, b| a.total_cmp(b));
            json!({"mean": v.iter().sum::<f64>() / v.len() as f64, "p50": nearest_rank(v, 0.5), "p99": nearest_rank(v, 0.99)})
        };
        out.push(json!({
            "bin": name, "lo_bytes": lo, "hi_bytes": hi, "flows": in_bin.len(), "completed": fcts.len(),
            "unfinished": in_bin.len() - fcts.len(), "fct_s": stats(&mut fcts), "slowdown": stats(&mut slow),
        }));
    }
    Value::Array(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_of_equal_shares_is_one_and_of_one_hog_is_one_over_n() {
        assert_eq!(jain(&[5.0, 5.0, 5.0, 5.0]), Some(1.0));
        // One flow takes everything: (x)²/(4·x²) = 1/4.
        assert_eq!(jain(&[8.0, 0.0, 0.0, 0.0]), Some(0.25));
        assert_eq!(jain(&[]), None);
    }

    #[test]
    fn harm_is_relative_to_the_baseline_and_undefined_at_zero() {
        // Goodput 6 against a baseline of 8: (8 − 6)/8 = 0.25; more than the baseline: −0.25.
        assert_eq!(throughput_harm(6.0, 8.0), Some(0.25));
        assert_eq!(throughput_harm(10.0, 8.0), Some(-0.25));
        assert_eq!(throughput_harm(8.0, 8.0), Some(0.0));
        assert_eq!(throughput_harm(3.0, 0.0), None);
        // Delay 8 against a baseline of 2: (8 − 2)/8 = 0.75; the ratio is over the mixed value.
        assert_eq!(delay_harm(8.0, 2.0), Some(0.75));
        assert_eq!(delay_harm(2.0, 8.0), Some(-3.0));
        assert_eq!(delay_harm(0.0, 2.0), None);
    }

    #[test]
    fn fair_shares_follow_who_is_active() {
        // Window [0, 10 s), C = 30: flow 0 all along, flow 1 from 5 s, flow 2 stops at 5 s,
        // flow 3 not scheduled (a workload's). [0, 5): flows 0 and 2 → 15 each; [5, 10): 0 and
        // 1 → 15 each. Averaged: 0 → 15, 1 → 7.5, 2 → 7.5, 3 → 0.
        let s = 1_000_000_000;
        let spans = [(0, None), (5 * s, None), (0, Some(5 * s)), (0, None)];
        assert_eq!(
            fair_shares(&spans, &[0, 1, 2], (0, 10 * s), 30.0),
            vec![15.0, 7.5, 7.5, 0.0]
        );
        // A start before the window counts from its beginning.
        assert_eq!(
            fair_shares(&[(0, None)], &[0], (2 * s, 4 * s), 8.0),
            vec![8.0]
        );
    }

    #[test]
    fn completion_times_by_size_bin() {
        let f = |size, fct: Option<f64>| Finite {
            size,
            fct_s: fct,
            ideal_s: 0.5,
        };
        let fin = [
            f(50_000, Some(1.0)),
            f(50_000, Some(3.0)),
            f(60_000, None),
            f(2_000_000, Some(2.0)),
        ];
        let v = fct_by_size(&fin, &[100_000, 1_000_000]);
        let b = v.as_array().unwrap();
        assert_eq!(
            b.iter()
                .map(|x| x["bin"].as_str().unwrap())
                .collect::<Vec<_>>(),
            ["<100KB", "100KB–1MB", "≥1MB"]
        );
        assert_eq!(
            (
                b[0]["flows"].as_u64(),
                b[0]["completed"].as_u64(),
                b[0]["unfinished"].as_u64()
            ),
            (Some(3), Some(2), Some(1))
        );
        // Nearest rank of {1, 3}: p50 is the 1st, p99 the 2nd; slowdown = FCT / 0.5.
        assert_eq!(b[0]["fct_s"], json!({"mean": 2.0, "p50": 1.0, "p99": 3.0}));
        assert_eq!(
            b[0]["slowdown"],
            json!({"mean": 4.0, "p50": 2.0, "p99": 6.0})
        );
        assert_eq!(
            b[1]["fct_s"],
            json!({"mean": null, "p50": null, "p99": null})
        );
        assert_eq!(b[2]["hi_bytes"], Value::Null);
        assert_eq!(nearest_rank(&[10, 20, 30, 40], 0.5), 20);
        assert_eq!(nearest_rank(&[10, 20, 30, 40], 0.99), 40);
    }
}
