//! Convergence: how long after a flow joins or leaves the shares settle (the flows of Liu et
//! al. (CKCD) Fig. 8 join in turn).
//!
//! Definition (documented, configurable): at each time-series sample t, the *windowed Jain
//! index* is Jain's index ([`jain`]) over the flows active at t of their mean throughput over
//! (t − window, t]. The window is n = round(window/dt) samples (at least one; ties to even),
//! dt being the median spacing of the sample times; a flow's windowed mean is over the samples
//! it has in those n (none missing required: a rolling mean with at least one sample), and
//! samples of a flow where it was not active do not count. A flow is active at t if the engine
//! sampled it there (it samples only flows under way), it started before t (a sample at its
//! very start covers an interval before it) and it did not stop before t (a sample covers the
//! interval that ends at t; after its stop a flow only drains what it had in flight, and is no
//! longer counted). Times are compared with a tolerance of [`EPS`] s.
//!
//! Events are the joins (every start after the first) and the leaves (every scheduled stop
//! before the end of the series). After an event at t_e the shares have converged at the first
//! sample t_c ≥ t_e + window such that the windowed index stays ≥ `threshold` for every sample
//! in [t_c, t_c + hold], all before the next event (or the end of the run). The convergence
//! time is t_c − t_e; None if the shares never settle before the next event or the end
//! (reported, never dropped). An event is reported when at least two flows are active right
//! after it: with one flow left there are no shares to settle (Jain's index of one flow is 1
//! by definition).

use std::collections::BTreeMap;

use crate::metrics::jain;

/// Tolerance for comparing times, s: sample times and schedule times come from different
/// roundings of the same nanosecond clock.
pub const EPS: f64 = 1e-9;

/// One flow's schedule, from the run's flows table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Span {
    pub flow: i64,
    pub start_s: f64,
    /// Scheduled stop, s; None for a flow that runs to the end.
    pub stop_s: Option<f64>,
}

/// The time-series columns the index reads: sample time, flow, throughput (one entry per
/// sample; a flow sampled twice at the same time counts with the mean of its samples).
#[derive(Clone, Copy, Debug)]
pub struct Series<'a> {
    pub t_s: &'a [f64],
    pub flow: &'a [i64],
    pub throughput_bps: &'a [f64],
}

/// flow → scheduled stop (the last row wins for a flow listed twice).
fn stops(flows: &[Span]) -> BTreeMap<i64, f64> {
    flows
        .iter()
        .filter_map(|s| s.stop_s.filter(|x| !x.is_nan()).map(|x| (s.flow, x)))
        .collect()
}

/// The median of `v` (not empty), the mean of the two middle values for an even count.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// The windowed Jain index per sample time, in time order: `(t, index)` for every sample time
/// with at least one active flow; the index is None where every active flow's windowed mean
/// is 0. With `flows` (the run's schedule), flows are active from their start to their stop;
/// without it, wherever they have a sample.
pub fn windowed_jain(
    ts: Series<'_>,
    window_s: f64,
    flows: Option<&[Span]>,
) -> Vec<(f64, Option<f64>)> {
    // The samples as a time × flow table (NaN where a flow has no sample).
    let valid = |i: &usize| !ts.throughput_bps[*i].is_nan();
    let mut times: Vec<f64> = (0..ts.t_s.len()).filter(valid).map(|i| ts.t_s[i]).collect();
    times.sort_by(|a, b| a.total_cmp(b));
    times.dedup();
    let mut ids: Vec<i64> = (0..ts.flow.len())
        .filter(valid)
        .map(|i| ts.flow[i])
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let (rows, cols) = (times.len(), ids.len());
    let mut sum = vec![0.0; rows * cols];
    let mut count = vec![0u32; rows * cols];
    for i in (0..ts.t_s.len()).filter(valid) {
        let r = times.binary_search_by(|t| t.total_cmp(&ts.t_s[i])).unwrap();
        let c = ids.binary_search(&ts.flow[i]).unwrap();
        sum[r * cols + c] += ts.throughput_bps[i];
        count[r * cols + c] += 1;
    }
    let cell: Vec<f64> = sum
        .iter()
        .zip(&count)
        .map(|(s, &k)| if k > 0 { s / k as f64 } else { f64::NAN })
        .collect();

    let dt = if rows > 1 {
        median(times.windows(2).map(|w| w[1] - w[0]).collect())
    } else {
        window_s
    };
    let n = ((window_s / dt).round_ties_even() as i64).max(1) as usize;

    // Active: sampled, and (with the schedule) started before t and not stopped before t.
    let stop = flows.map(stops).unwrap_or_default();
    let start: BTreeMap<i64, f64> = flows
        .unwrap_or(&[])
        .iter()
        .map(|s| (s.flow, s.start_s))
        .collect();
    let active = |r: usize, c: usize| {
        let t = times[r];
        let f = ids[c];
        !cell[r * cols + c].is_nan()
            && (flows.is_none()
                || (t > start.get(&f).copied().unwrap_or(f64::NEG_INFINITY) + EPS
                    && stop.get(&f).map_or(true, |&s| t <= s + EPS)))
    };
    let act: Vec<bool> = (0..rows * cols)
        .map(|i| active(i / cols.max(1), i % cols.max(1)))
        .collect();

    let mut out = Vec::new();
    let mut xs = Vec::with_capacity(cols);
    for r in 0..rows {
        xs.clear();
        for c in 0..cols {
            if !act[r * cols + c] {
                continue;
            }
            // The flow's mean over its active samples among the last n.
            let (mut s, mut k) = (0.0, 0u32);
            for q in r.saturating_sub(n - 1)..=r {
                if act[q * cols + c] {
                    s += cell[q * cols + c];
                    k += 1;
                }
            }
            xs.push(s / k as f64);
        }
        if !xs.is_empty() {
            out.push((times[r], jain(&xs)));
        }
    }
    out
}

/// A join or a leave.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Join,
    Leave,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Join => "join",
            Kind::Leave => "leave",
        }
    }
}

/// One event, with the number of flows active right after it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Event {
    pub kind: Kind,
    pub flow: i64,
    pub event_s: f64,
    pub active_after: usize,
}

/// The joins (starts after the first) and leaves (stops before `end_s`) in time order (then
/// joins before leaves, then by flow), with the number of flows active right after each.
pub fn events(flows: &[Span], end_s: f64) -> Vec<Event> {
    let first = flows
        .iter()
        .map(|s| s.start_s)
        .reduce(f64::min)
        .unwrap_or(0.0);
    let stop = stops(flows);
    let mut evs: Vec<(f64, Kind, i64)> = flows
        .iter()
        .filter(|s| s.start_s > first + EPS)
        .map(|s| (s.start_s, Kind::Join, s.flow))
        .collect();
    evs.extend(
        stop.iter()
            .filter(|(_, &s)| s < end_s - EPS)
            .map(|(&f, &s)| (s, Kind::Leave, f)),
    );
    evs.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    evs.into_iter()
        .map(|(t, kind, flow)| {
            let active_after = flows
                .iter()
                .filter(|s| {
                    s.start_s <= t + EPS && stop.get(&s.flow).map_or(true, |&x| x > t + EPS)
                })
                .count();
            Event {
                kind,
                flow,
                event_s: t,
                active_after,
            }
        })
        .collect()
}

/// One reported event and when its shares settled (None: not before the next event or the
/// end); the convergence time is `converged_s − event.event_s`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Convergence {
    pub event: Event,
    pub converged_s: Option<f64>,
}

/// One entry per join or leave after which two or more flows share the link (the module's
/// definition); empty when no sample has an active flow.
pub fn convergence(
    ts: Series<'_>,
    flows: &[Span],
    threshold: f64,
    window_s: f64,
    hold_s: f64,
) -> Vec<Convergence> {
    let j = windowed_jain(ts, window_s, Some(flows));
    let Some(&(end, _)) = j.last() else {
        return Vec::new();
    };
    let ev = events(flows, end);
    let mut times: Vec<f64> = ev.iter().map(|e| e.event_s).collect();
    times.sort_by(|a, b| a.total_cmp(b));
    times.dedup();
    let settled = |x: &Option<f64>| x.is_some_and(|v| v >= threshold);
    ev.into_iter()
        .filter(|e| e.active_after >= 2)
        .map(|e| {
            let t_e = e.event_s;
            let horizon = times
                .iter()
                .copied()
                .find(|&t| t > t_e + EPS)
                .unwrap_or(end);
            let cand: Vec<&(f64, Option<f64>)> = j
                .iter()
                .filter(|(t, _)| *t >= t_e + window_s - EPS && *t <= horizon + EPS)
                .collect();
            let mut converged_s = None;
            for (i, &&(t, _)) in cand.iter().enumerate() {
                if t + hold_s > horizon + EPS {
                    break;
                }
                if cand[i..]
                    .iter()
                    .take_while(|(u, _)| *u <= t + hold_s + EPS)
                    .all(|(_, x)| settled(x))
                {
                    converged_s = Some(t);
                    break;
                }
            }
            Convergence {
                event: e,
                converged_s,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(rows: &[(f64, i64, f64)]) -> (Vec<f64>, Vec<i64>, Vec<f64>) {
        (
            rows.iter().map(|r| r.0).collect(),
            rows.iter().map(|r| r.1).collect(),
            rows.iter().map(|r| r.2).collect(),
        )
    }

    fn span(flow: i64, start_s: f64, stop_s: Option<f64>) -> Span {
        Span {
            flow,
            start_s,
            stop_s,
        }
    }

    #[test]
    fn equal_rates_give_one_and_rates_one_and_three_give_four_fifths() {
        // Two flows at 1 s spacing; window 1 s = 1 sample. t = 1: equal (5, 5) → 1; t = 2:
        // (1, 3) → 4²/(2·(1 + 9)) = 0.8; t = 3: flow 1 alone → 1.
        let (t, f, x) = series(&[
            (1.0, 0, 5.0),
            (1.0, 1, 5.0),
            (2.0, 0, 1.0),
            (2.0, 1, 3.0),
            (3.0, 1, 7.0),
        ]);
        let j = windowed_jain(
            Series {
                t_s: &t,
                flow: &f,
                throughput_bps: &x,
            },
            1.0,
            None,
        );
        assert_eq!(
            j,
            vec![(1.0, Some(1.0)), (2.0, Some(0.8)), (3.0, Some(1.0))]
        );
        // A 2 s window (2 samples): at 2, flow 0 (5 + 1)/2 = 3, flow 1 (5 + 3)/2 = 4 ⇒
        // 49/(2·25) = 0.98; at 3 flow 0 has no sample, so only flow 1 counts.
        let j = windowed_jain(
            Series {
                t_s: &t,
                flow: &f,
                throughput_bps: &x,
            },
            2.0,
            None,
        );
        assert_eq!(
            j,
            vec![(1.0, Some(1.0)), (2.0, Some(0.98)), (3.0, Some(1.0))]
        );
    }

    #[test]
    fn a_flow_not_yet_started_or_already_stopped_does_not_count() {
        // Flow 1 starts at 1 (its sample at 1 covers time before it) and stops at 2 (its
        // sample at 3 is what it drained). Only t = 2 has both: (4, 2) → 36/(2·20) = 0.9.
        let (t, f, x) = series(&[
            (1.0, 0, 4.0),
            (1.0, 1, 1.0),
            (2.0, 0, 4.0),
            (2.0, 1, 2.0),
            (3.0, 0, 4.0),
            (3.0, 1, 1.0),
        ]);
        let fl = [span(0, 0.0, None), span(1, 1.0, Some(2.0))];
        let j = windowed_jain(
            Series {
                t_s: &t,
                flow: &f,
                throughput_bps: &x,
            },
            1.0,
            Some(&fl),
        );
        assert_eq!(
            j,
            vec![(1.0, Some(1.0)), (2.0, Some(0.9)), (3.0, Some(1.0))]
        );
        // All-zero throughput: no index, but the sample time is kept.
        let (t, f, x) = series(&[(1.0, 0, 0.0), (1.0, 1, 0.0)]);
        assert_eq!(
            windowed_jain(
                Series {
                    t_s: &t,
                    flow: &f,
                    throughput_bps: &x
                },
                1.0,
                None
            ),
            vec![(1.0, None)]
        );
    }

    #[test]
    fn events_are_later_joins_and_leaves_before_the_end() {
        let fl = [
            span(0, 0.0, None),
            span(1, 0.0, Some(5.0)),
            span(2, 2.0, Some(9.0)),
        ];
        let ev = events(&fl, 8.0);
        assert_eq!(
            ev,
            vec![
                Event {
                    kind: Kind::Join,
                    flow: 2,
                    event_s: 2.0,
                    active_after: 3
                },
                Event {
                    kind: Kind::Leave,
                    flow: 1,
                    event_s: 5.0,
                    active_after: 2
                },
            ]
        );
    }

    #[test]
    fn shares_that_settle_after_k_samples_converge_there() {
        // Flow 0 alone at 10 from 0.1 s; flow 1 joins at 1 s; 0.1 s samples to 3 s, window
        // 0.1 s (one sample), hold 0.5 s, threshold 0.9. From 1.1 s the rates are (9, 1),
        // (8, 2), (7, 3), then (5, 5): Jain 100/(2·82) = 0.61, 100/(2·68) = 0.74,
        // 100/(2·58) = 0.86, then 1. So the shares settle k = 3 samples after the first one
        // past the join: t_c = 1.4 s, 0.4 s after the join.
        let mut rows = Vec::new();
        for k in 1..=30 {
            let t = k as f64 / 10.0;
            if k <= 10 {
                rows.push((t, 0, 10.0));
            } else {
                let b = match k {
                    11 => 1.0,
                    12 => 2.0,
                    13 => 3.0,
                    _ => 5.0,
                };
                rows.push((t, 0, 10.0 - b));
                rows.push((t, 1, b));
            }
        }
        let (t, f, x) = series(&rows);
        let fl = [span(0, 0.0, None), span(1, 1.0, None)];
        let s = Series {
            t_s: &t,
            flow: &f,
            throughput_bps: &x,
        };
        let c = convergence(s, &fl, 0.9, 0.1, 0.5);
        assert_eq!(c.len(), 1);
        assert_eq!(
            c[0].event,
            Event {
                kind: Kind::Join,
                flow: 1,
                event_s: 1.0,
                active_after: 2
            }
        );
        assert_eq!(c[0].converged_s, Some(1.4));
        // A threshold never reached is reported, with no convergence.
        let c = convergence(s, &fl, 1.01, 0.1, 0.5);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].converged_s, None);
        // A hold longer than what is left of the run: never settled.
        assert_eq!(convergence(s, &fl, 0.9, 0.1, 1.7)[0].converged_s, None);
        assert_eq!(convergence(s, &fl, 0.9, 0.1, 1.6)[0].converged_s, Some(1.4));
    }
}
