//! A run's results from its records: the summary (metrics, classes, completion times,
//! counters) and the tables `flows`, `classes`, `timeseries`, `queue`, `sojourn_hist`, `fct`
//! as plain columns, which the Python front writes to Parquet. Both backends' results come
//! from here (docs/model.md §Metrics, docs/scenario.md §Results).
//!
//! A column's type is its schema: a column the simulator always fills is plain (`U64`, `F64`,
//! `Str`) and becomes optional only where a value is missing (the emulator cannot know some);
//! a column that may be empty by nature (`mark_ratio` with nothing arrived) is always optional.

use serde_json::{json, Value};

use crate::metrics::{fair_shares, fct_by_size, jain, ratio, Finite};
use crate::record::RunRecord;
use link::measure::{DROP_REASONS, MARK_REASONS};

/// One column of a table.
#[derive(Clone, Debug, PartialEq)]
pub enum Column {
    F64(Vec<f64>),
    OptF64(Vec<Option<f64>>),
    U64(Vec<u64>),
    OptU64(Vec<Option<u64>>),
    Str(Vec<String>),
    OptStr(Vec<Option<String>>),
    Bool(Vec<bool>),
}

impl Column {
    pub fn len(&self) -> usize {
        match self {
            Column::F64(v) => v.len(),
            Column::OptF64(v) => v.len(),
            Column::U64(v) => v.len(),
            Column::OptU64(v) => v.len(),
            Column::Str(v) => v.len(),
            Column::OptStr(v) => v.len(),
            Column::Bool(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The Arrow type of the column's values: "int64", "double", "string" or "bool".
    pub fn arrow_type(&self) -> &'static str {
        match self {
            Column::F64(_) | Column::OptF64(_) => "double",
            Column::U64(_) | Column::OptU64(_) => "int64",
            Column::Str(_) | Column::OptStr(_) => "string",
            Column::Bool(_) => "bool",
        }
    }

    /// `U64` if every value is there, else `OptU64`.
    fn u64s(v: Vec<Option<u64>>) -> Column {
        if v.iter().all(Option::is_some) {
            Column::U64(v.into_iter().flatten().collect())
        } else {
            Column::OptU64(v)
        }
    }

    /// `F64` if every value is there, else `OptF64`.
    fn f64s(v: Vec<Option<f64>>) -> Column {
        if v.iter().all(Option::is_some) {
            Column::F64(v.into_iter().flatten().collect())
        } else {
            Column::OptF64(v)
        }
    }

    /// `Str` if every value is there, else `OptStr`.
    fn strs(v: Vec<Option<String>>) -> Column {
        if v.iter().all(Option::is_some) {
            Column::Str(v.into_iter().flatten().collect())
        } else {
            Column::OptStr(v)
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    pub columns: Vec<(String, Column)>,
}

impl Table {
    fn push(&mut self, name: &str, c: Column) {
        self.columns.push((name.to_string(), c));
    }
    pub fn get(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|(n, _)| n == name).map(|(_, c)| c)
    }
    pub fn f64(&self, name: &str) -> Vec<f64> {
        match self.get(name) {
            Some(Column::F64(v)) => v.clone(),
            Some(Column::U64(v)) => v.iter().map(|&x| x as f64).collect(),
            other => panic!("column {name}: {other:?}"),
        }
    }
    pub fn u64(&self, name: &str) -> Vec<u64> {
        match self.get(name) {
            Some(Column::U64(v)) => v.clone(),
            other => panic!("column {name}: {other:?}"),
        }
    }
}

#[derive(Clone, Debug)]
pub struct RunResult {
    /// `{"metrics": {...}, "classes": [...], "fct": [...]}` (docs/scenario.md §Results).
    pub summary: Value,
    pub tables: Vec<(String, Table)>,
    /// The backend's counters, with the finite and unfinished flows counted.
    pub counters: Value,
}

impl RunResult {
    pub fn table(&self, name: &str) -> &Table {
        &self
            .tables
            .iter()
            .find(|(n, _)| n == name)
            .expect("table exists")
            .1
    }
}

fn ns_to_ms(x: f64) -> f64 {
    x / 1e6
}

/// The summary and tables of a run from its records.
pub fn collect(rec: RunRecord) -> RunResult {
    let c_bps = rec.rate_bps as f64;
    let window_s = (rec.duration_ns - rec.warmup_ns) as f64 / 1e9;
    let n_flows = rec.flows.len();
    let ideal_s = |size: u64, class: usize| {
        size as f64 * 8.0 / c_bps + rec.classes[class].rtt_ns as f64 / 1e9
    };

    // Fair shares and Jain's index are over the scheduled flows: a workload's short flows come
    // and go and have no share to be fair to (their yardstick is the completion time).
    let scheduled: Vec<usize> = (0..n_flows)
        .filter(|&f| !rec.classes[rec.flows[f].class].workload)
        .collect();
    let spans: Vec<(u64, Option<u64>)> =
        rec.flows.iter().map(|f| (f.start_ns, f.stop_ns)).collect();
    let fair = fair_shares(&spans, &scheduled, (rec.warmup_ns, rec.duration_ns), c_bps);
    let goodput: Vec<f64> = rec
        .flows
        .iter()
        .map(|f| f.delivered_bytes as f64 * 8.0 / window_s)
        .collect();

    // Per-flow table.
    let fl = &rec.flows;
    let mut flows = Table::default();
    let u = |g: fn(&crate::record::FlowRecord) -> u64| Column::U64(fl.iter().map(g).collect());
    let o =
        |g: fn(&crate::record::FlowRecord) -> Option<u64>| Column::u64s(fl.iter().map(g).collect());
    flows.push("flow", Column::U64((0..n_flows as u64).collect()));
    flows.push(
        "class",
        Column::Str(
            fl.iter()
                .map(|f| rec.classes[f.class].name.clone())
                .collect(),
        ),
    );
    flows.push("cc", Column::Str(fl.iter().map(|f| f.cc.clone()).collect()));
    flows.push(
        "rtt_ms",
        Column::F64(
            fl.iter()
                .map(|f| rec.classes[f.class].rtt_ns as f64 / 1e6)
                .collect(),
        ),
    );
    flows.push(
        "start_s",
        Column::F64(fl.iter().map(|f| f.start_ns as f64 / 1e9).collect()),
    );
    flows.push(
        "stop_s",
        Column::OptF64(
            fl.iter()
                .map(|f| f.stop_ns.map(|t| t as f64 / 1e9))
                .collect(),
        ),
    );
    flows.push("fair_share_bps", Column::F64(fair.clone()));
    flows.push("goodput_bps", Column::F64(goodput.clone()));
    flows.push("delivered_bytes", u(|f| f.delivered_bytes));
    flows.push("arrived_bytes", u(|f| f.arrived_bytes));
    flows.push("dropped_bytes", u(|f| f.dropped_bytes));
    flows.push("marked_bytes", u(|f| f.marked_bytes));
    flows.push(
        "mark_ratio",
        Column::OptF64(
            fl.iter()
                .map(|f| ratio(f.marked_bytes, f.arrived_bytes))
                .collect(),
        ),
    );
    flows.push(
        "drop_ratio",
        Column::OptF64(
            fl.iter()
                .map(|f| ratio(f.dropped_bytes, f.arrived_bytes))
                .collect(),
        ),
    );
    for (k, (_, name)) in DROP_REASONS.iter().enumerate() {
        flows.push(
            &format!("drops_{name}"),
            Column::U64(fl.iter().map(|f| f.drops[k]).collect()),
        );
    }
    for (k, (_, name)) in MARK_REASONS.iter().enumerate() {
        flows.push(
            &format!("marks_{name}"),
            Column::U64(fl.iter().map(|f| f.marks[k]).collect()),
        );
    }
    flows.push("segs_sent", o(|f| f.segs_sent));
    flows.push("wire_bytes_sent", o(|f| f.wire_bytes_sent));
    flows.push("retrans_segs", o(|f| f.retrans_segs));
    flows.push("rto_count", o(|f| f.rto_count));
    flows.push("tlp_count", o(|f| f.tlp_count));
    flows.push("recoveries", o(|f| f.recoveries));
    flows.push("cwr_count", o(|f| f.cwr_count));
    flows.push("segs_received", o(|f| f.segs_received));
    flows.push("total_dropped_pkts", o(|f| f.total_dropped_pkts));
    flows.push("total_marked_pkts", o(|f| f.total_marked_pkts));
    flows.push("end_in_network_pkts", o(|f| f.end_in_network_pkts));
    flows.push(
        "fct_s",
        Column::OptF64(fl.iter().map(|f| f.fct_s).collect()),
    );

    // Classes. Relative throughput and Jain's index compare each flow with its fair share:
    // x_i = goodput_i / share_i, Jain's normalized allocation (Jain, Chiu & Hawe, DEC-TR-301,
    // 1984, §4: x_i = T_i/O_i). With every flow active the whole window the share is C/N for
    // all, so this is the mean goodput ÷ (C/N) and Jain's index of the goodputs. Flows with no
    // share (never active in the window) are left out.
    let normalized = |f: usize| (fair[f] > 0.0).then(|| goodput[f] / fair[f]);
    let mut classes_json = Vec::new();
    let mut classes = Table::default();
    let (
        mut k_name,
        mut k_cc,
        mut k_rtt,
        mut k_count,
        mut k_good,
        mut k_rel,
        mut k_jain,
        mut k_mr,
        mut k_dr,
    ) = (
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
    );
    let mut k_soj: Vec<Option<f64>> = vec![];
    for (c, class) in rec.classes.iter().enumerate() {
        let idx: Vec<usize> = (0..n_flows).filter(|&f| fl[f].class == c).collect();
        let g: Vec<f64> = idx.iter().map(|&f| goodput[f]).collect();
        let sum: f64 = g.iter().sum();
        let mean = if g.is_empty() {
            0.0
        } else {
            sum / g.len() as f64
        };
        let arrived: u64 = idx.iter().map(|&f| fl[f].arrived_bytes).sum();
        let marked: u64 = idx.iter().map(|&f| fl[f].marked_bytes).sum();
        let dropped: u64 = idx.iter().map(|&f| fl[f].dropped_bytes).sum();
        let class_sojourn_ms = (class.sojourn_count > 0)
            .then(|| class.sojourn_sum_ns as f64 / class.sojourn_count as f64 / 1e6);
        let shared: Vec<usize> = idx.iter().copied().filter(|&f| fair[f] > 0.0).collect();
        // The class's delivered bytes over the bytes its fair shares would have given it.
        let rel = (!class.workload && !shared.is_empty()).then(|| {
            shared.iter().map(|&f| goodput[f]).sum::<f64>()
                / shared.iter().map(|&f| fair[f]).sum::<f64>()
        });
        let j = if class.workload {
            None
        } else {
            jain(
                &shared
                    .iter()
                    .filter_map(|&f| normalized(f))
                    .collect::<Vec<_>>(),
            )
        };
        classes_json.push(json!({
            "name": class.name, "cc": class.cc, "rtt_ms": class.rtt_ns as f64 / 1e6, "count": idx.len(),
            "goodput_bps": sum, "mean_goodput_bps": mean, "rel_throughput": rel, "jain": j,
            "mark_ratio": ratio(marked, arrived), "drop_ratio": ratio(dropped, arrived),
            "sojourn_mean_ms": class_sojourn_ms,
        }));
        k_name.push(class.name.clone());
        k_cc.push(class.cc.clone());
        k_rtt.push(class.rtt_ns as f64 / 1e6);
        k_count.push(idx.len() as u64);
        k_good.push(sum);
        k_rel.push(rel);
        k_jain.push(j);
        k_mr.push(ratio(marked, arrived));
        k_dr.push(ratio(dropped, arrived));
        k_soj.push(class_sojourn_ms);
    }
    classes.push("class", Column::Str(k_name));
    classes.push("cc", Column::Str(k_cc));
    classes.push("rtt_ms", Column::F64(k_rtt));
    classes.push("count", Column::U64(k_count));
    classes.push("goodput_bps", Column::F64(k_good));
    classes.push("rel_throughput", Column::OptF64(k_rel));
    classes.push("jain", Column::OptF64(k_jain));
    classes.push("mark_ratio", Column::OptF64(k_mr));
    classes.push("drop_ratio", Column::OptF64(k_dr));
    classes.push("sojourn_mean_ms", Column::OptF64(k_soj));

    // Overall metrics.
    let arrived: u64 = fl.iter().map(|m| m.arrived_bytes).sum();
    let marked: u64 = fl.iter().map(|m| m.marked_bytes).sum();
    let dropped: u64 = fl.iter().map(|m| m.dropped_bytes).sum();
    let utilization = rec.link_bytes * 8.0 / (c_bps * window_s);
    let hist = &rec.sojourn;
    let mean =
        (rec.sojourn_count > 0).then(|| rec.sojourn_sum_ns as f64 / rec.sojourn_count as f64);
    let target = rec.delay_target_ns;
    let metrics = json!({
        "utilization": utilization,
        "jain": jain(&scheduled.iter().filter_map(|&f| normalized(f)).collect::<Vec<_>>()),
        "goodput_bps": goodput.iter().sum::<f64>(),
        "sojourn_ms": {
            "mean": mean.map(ns_to_ms),
            "p50": hist.quantile_ns(0.5).map(ns_to_ms),
            "p99": hist.quantile_ns(0.99).map(ns_to_ms),
            "max": (hist.count > 0).then(|| hist.max_ns as f64 / 1e6),
        },
        "sojourn_mean_rel_target": match (mean, target) { (Some(m), Some(t)) if t > 0 => Some(m / t as f64), _ => None },
        "sojourn_max_rel_target": match target { Some(t) if t > 0 && hist.count > 0 => Some(hist.max_ns as f64 / t as f64), _ => None },
        "mark_ratio": ratio(marked, arrived),
        "drop_ratio": ratio(dropped, arrived),
        "flows": n_flows,
        "window_s": window_s,
    });

    // Time series. The state names are moved, not copied: a long run has many samples.
    let rows = rec.samples;
    let mut ts = Table::default();
    ts.push(
        "t_s",
        Column::F64(rows.iter().map(|r| r.t_ns as f64 / 1e9).collect()),
    );
    ts.push("flow", Column::U64(rows.iter().map(|r| r.flow).collect()));
    ts.push(
        "class",
        Column::Str(
            rows.iter()
                .map(|r| rec.classes[r.class].name.clone())
                .collect(),
        ),
    );
    ts.push(
        "throughput_bps",
        Column::f64s(rows.iter().map(|r| r.throughput_bps).collect()),
    );
    ts.push("cwnd", Column::u64s(rows.iter().map(|r| r.cwnd).collect()));
    ts.push(
        "ssthresh",
        Column::u64s(rows.iter().map(|r| r.ssthresh).collect()),
    );
    ts.push(
        "inflight",
        Column::u64s(rows.iter().map(|r| r.inflight).collect()),
    );
    ts.push(
        "srtt_ms",
        Column::f64s(rows.iter().map(|r| r.srtt_ms).collect()),
    );
    ts.push(
        "pacing_rate_bps",
        Column::f64s(rows.iter().map(|r| r.pacing_rate_bps).collect()),
    );
    let cc_bw = Column::OptF64(rows.iter().map(|r| r.cc_bw_bps).collect());
    let inflight_hi = Column::OptF64(rows.iter().map(|r| r.inflight_hi).collect());
    let cc_alpha = Column::OptF64(rows.iter().map(|r| r.cc_alpha).collect());
    let (ca, phase): (Vec<Option<String>>, Vec<Option<String>>) =
        rows.into_iter().map(|r| (r.ca_state, r.cc_phase)).unzip();
    ts.push("ca_state", Column::strs(ca));
    ts.push("cc_phase", Column::OptStr(phase));
    ts.push("cc_bw_bps", cc_bw);
    ts.push("inflight_hi", inflight_hi);
    ts.push("cc_alpha", cc_alpha);

    let mut queue = Table::default();
    let iv_s = rec.interval_ns as f64 / 1e9;
    let q = &rec.queue_samples;
    queue.push(
        "t_s",
        Column::F64(q.iter().map(|r| r.t_ns as f64 / 1e9).collect()),
    );
    queue.push(
        "qlen_pkts",
        Column::U64(q.iter().map(|r| r.qlen_pkts).collect()),
    );
    queue.push(
        "backlog_bytes",
        Column::U64(q.iter().map(|r| r.backlog_bytes).collect()),
    );
    queue.push(
        "sojourn_mean_ms",
        Column::OptF64(q.iter().map(|r| r.sojourn_mean_ns.map(ns_to_ms)).collect()),
    );
    queue.push(
        "sojourn_max_ms",
        Column::OptF64(
            q.iter()
                .map(|r| r.sojourn_max_ns.map(|x| x as f64 / 1e6))
                .collect(),
        ),
    );
    queue.push(
        "utilization",
        Column::F64(
            q.iter()
                .map(|r| r.link_bytes * 8.0 / (c_bps * iv_s))
                .collect(),
        ),
    );
    queue.push("drops", Column::U64(q.iter().map(|r| r.drops).collect()));
    queue.push("marks", Column::U64(q.iter().map(|r| r.marks).collect()));

    let mut hist_t = Table::default();
    let bins = hist.rebinned(rec.hist_bin_ns);
    let total = hist.count.max(1) as f64;
    let bin_ms = rec.hist_bin_ns as f64 / 1e6;
    hist_t.push(
        "bin_lo_ms",
        Column::F64(bins.iter().map(|(lo, _)| *lo as f64 / 1e6).collect()),
    );
    hist_t.push(
        "bin_hi_ms",
        Column::F64(
            bins.iter()
                .map(|(lo, _)| *lo as f64 / 1e6 + bin_ms)
                .collect(),
        ),
    );
    hist_t.push("count", Column::U64(bins.iter().map(|(_, c)| *c).collect()));
    hist_t.push(
        "fraction",
        Column::F64(bins.iter().map(|(_, c)| *c as f64 / total).collect()),
    );

    // Flow completion times (finite flows only); unfinished flows stay in the table.
    let fin_ids: Vec<usize> = (0..n_flows)
        .filter(|&f| fl[f].size_bytes.is_some())
        .collect();
    let fin: Vec<Finite> = fin_ids
        .iter()
        .map(|&f| {
            let size = fl[f].size_bytes.expect("finite");
            Finite {
                size,
                fct_s: fl[f].fct_s,
                ideal_s: ideal_s(size, fl[f].class),
            }
        })
        .collect();
    let mut fct = Table::default();
    fct.push(
        "flow",
        Column::U64(fin_ids.iter().map(|&f| f as u64).collect()),
    );
    fct.push(
        "class",
        Column::Str(
            fin_ids
                .iter()
                .map(|&f| rec.classes[fl[f].class].name.clone())
                .collect(),
        ),
    );
    fct.push(
        "size_bytes",
        Column::U64(fin.iter().map(|r| r.size).collect()),
    );
    fct.push(
        "start_s",
        Column::F64(
            fin_ids
                .iter()
                .map(|&f| fl[f].start_ns as f64 / 1e9)
                .collect(),
        ),
    );
    fct.push(
        "fct_s",
        Column::OptF64(fin.iter().map(|r| r.fct_s).collect()),
    );
    fct.push(
        "slowdown",
        Column::OptF64(
            fin.iter()
                .map(|r| r.fct_s.map(|fct| fct / r.ideal_s))
                .collect(),
        ),
    );
    fct.push(
        "completed",
        Column::Bool(fin.iter().map(|r| r.fct_s.is_some()).collect()),
    );
    let unfinished = fin.iter().filter(|r| r.fct_s.is_none()).count();
    let fct_summary = fct_by_size(&fin, &rec.fct_bins_bytes);

    let mut counters = rec.counters;
    counters.insert("finite_flows".into(), json!(fin.len()));
    counters.insert("unfinished_flows".into(), json!(unfinished));
    RunResult {
        summary: json!({"metrics": metrics, "classes": classes_json, "fct": fct_summary}),
        tables: vec![
            ("flows".into(), flows),
            ("classes".into(), classes),
            ("timeseries".into(), ts),
            ("queue".into(), queue),
            ("sojourn_hist".into(), hist_t),
            ("fct".into(), fct),
        ],
        counters: Value::Object(counters),
    }
}
