//! Turning a finished world into results: the summary metrics of DESIGN.md §Metrics and the
//! tables of §Results store (`flows`, `classes`, `timeseries`, `queue`, `sojourn_hist`,
//! `fct`), as plain columns the Python front writes to Parquet.

use aqm::Qdisc;
use serde_json::{json, Value};

use crate::cc::CaState;
use crate::config::EngineConfig;
use crate::measure::{jain, DROP_REASONS, MARK_REASONS};
use crate::world::World;

/// One column of a table.
#[derive(Clone, Debug, PartialEq)]
pub enum Column {
    F64(Vec<f64>),
    OptF64(Vec<Option<f64>>),
    U64(Vec<u64>),
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
            Column::Str(v) => v.len(),
            Column::OptStr(v) => v.len(),
            Column::Bool(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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

/// A per-flow time-series sample.
#[derive(Clone, Debug)]
pub struct SampleRow {
    pub t_ns: u64,
    pub flow: u32,
    pub class: u32,
    pub throughput_bps: f64,
    pub cwnd: u32,
    pub ssthresh: u32,
    pub inflight: u32,
    pub srtt_us: u64,
    pub pacing_rate_bps: f64,
    pub ca_state: CaState,
    /// The CC's own state (BBR mode and bw estimate, inflight_hi, α).
    pub cc: crate::cc::CcProbe,
}

pub use link::measure::QueueRow;

#[derive(Clone, Debug)]
pub struct RunResult {
    /// `{"metrics": {...}, "classes": [...]}` shaped as DESIGN.md §Results store.
    pub summary: Value,
    pub tables: Vec<(String, Table)>,
    /// Engine counters: events run, bottleneck packets, and conservation totals.
    pub counters: Value,
}

impl RunResult {
    pub fn table(&self, name: &str) -> &Table {
        &self.tables.iter().find(|(n, _)| n == name).expect("table exists").1
    }
}

fn ns_to_ms(x: f64) -> f64 {
    x / 1e6
}

pub fn collect(mut w: World) -> RunResult {
    let cfg = w.cfg.clone();
    let c_bps = cfg.bottleneck.rate_bps as f64;
    let window_s = (cfg.duration_ns - cfg.warmup_ns) as f64 / 1e9;
    let n_flows = w.flows.len();

    // Packets still in the network at the end, per flow (for the conservation identity
    // sent = received + dropped + in network).
    let mut in_network = vec![0u64; n_flows];
    for p in w.bottleneck.qdisc.reset() {
        in_network[p.flow as usize] += 1;
    }
    if let Some(p) = w.bottleneck.in_tx() {
        in_network[p.flow as usize] += 1;
        // The part of the transmission in progress that falls inside the window.
        let (s, e, len) = (w.bottleneck.tx_start_ns, w.bottleneck.tx_end_ns, p.wire_len);
        w.qm.record_tx(len, s, e, cfg.warmup_ns, cfg.duration_ns);
    }
    for line in &w.fwd_lines {
        for p in line.iter() {
            in_network[p.flow as usize] += 1;
        }
    }

    // Fair shares and Jain's index are over the scheduled flows: a workload's short flows come
    // and go and have no share to be fair to (their yardstick is the completion time).
    let scheduled: Vec<usize> = (0..n_flows).filter(|&f| cfg.classes[w.flows[f].class].workload.is_none()).collect();
    let fair = fair_shares(&w, &scheduled, c_bps);

    // Per-flow table.
    let mut flows = Table::default();
    let mut goodput = Vec::with_capacity(n_flows);
    let mut col_flow = Vec::with_capacity(n_flows);
    let mut col_class = Vec::with_capacity(n_flows);
    let mut col_cc = Vec::with_capacity(n_flows);
    let mut col_rtt = Vec::with_capacity(n_flows);
    let mut col_start = Vec::with_capacity(n_flows);
    let mut col_delivered = Vec::with_capacity(n_flows);
    let mut col_arrived = Vec::with_capacity(n_flows);
    let mut col_dropped = Vec::with_capacity(n_flows);
    let mut col_marked = Vec::with_capacity(n_flows);
    let mut col_mark_ratio = Vec::with_capacity(n_flows);
    let mut col_drop_ratio = Vec::with_capacity(n_flows);
    let mut col_sent = Vec::with_capacity(n_flows);
    let mut col_wire = Vec::with_capacity(n_flows);
    let mut col_retrans = Vec::with_capacity(n_flows);
    let mut col_rto = Vec::with_capacity(n_flows);
    let mut col_tlp = Vec::with_capacity(n_flows);
    let mut col_rec = Vec::with_capacity(n_flows);
    let mut col_cwr = Vec::with_capacity(n_flows);
    let mut col_recv = Vec::with_capacity(n_flows);
    let mut col_total_drops = Vec::with_capacity(n_flows);
    let mut col_total_marks = Vec::with_capacity(n_flows);
    let mut col_innet = Vec::with_capacity(n_flows);
    let mut col_fct = Vec::with_capacity(n_flows);
    let mut drops_by: Vec<Vec<u64>> = (0..DROP_REASONS.len()).map(|_| Vec::with_capacity(n_flows)).collect();
    let mut marks_by: Vec<Vec<u64>> = (0..MARK_REASONS.len()).map(|_| Vec::with_capacity(n_flows)).collect();
    for (f, flow) in w.flows.iter().enumerate() {
        let m = &w.fm[f];
        let class = &cfg.classes[flow.class];
        let delivered = flow.receiver.delivered_bytes - m.delivered_at_warmup.unwrap_or(0);
        let g = delivered as f64 * 8.0 / window_s;
        goodput.push(g);
        col_flow.push(f as u64);
        col_class.push(class.name.clone());
        col_cc.push(flow.sender.kind_name().to_string());
        col_rtt.push(class.rtt_ns as f64 / 1e6);
        col_start.push(flow.start_ns as f64 / 1e9);
        col_delivered.push(delivered);
        col_arrived.push(m.arrived_bytes);
        col_dropped.push(m.dropped_bytes);
        col_marked.push(m.marked_bytes);
        col_mark_ratio.push(ratio(m.marked_bytes, m.arrived_bytes));
        col_drop_ratio.push(ratio(m.dropped_bytes, m.arrived_bytes));
        let st = &flow.sender.stats;
        col_sent.push(st.segs_sent);
        col_wire.push(st.wire_bytes_sent);
        col_retrans.push(st.retrans_segs);
        col_rto.push(st.rto_count);
        col_tlp.push(st.tlp_count);
        col_rec.push(st.recoveries);
        col_cwr.push(st.cwr_count);
        col_recv.push(flow.receiver.segs_received);
        col_total_drops.push(m.total_dropped_pkts);
        col_total_marks.push(m.total_marked_pkts);
        col_innet.push(in_network[f]);
        col_fct.push(flow.sender.finished_at.map(|t| (t - flow.start_ns) as f64 / 1e9));
        for (k, v) in drops_by.iter_mut().enumerate() {
            v.push(m.drops[k]);
        }
        for (k, v) in marks_by.iter_mut().enumerate() {
            v.push(m.marks[k]);
        }
    }
    flows.push("flow", Column::U64(col_flow));
    flows.push("class", Column::Str(col_class));
    flows.push("cc", Column::Str(col_cc));
    flows.push("rtt_ms", Column::F64(col_rtt));
    flows.push("start_s", Column::F64(col_start));
    flows.push("stop_s", Column::OptF64(w.flows.iter().map(|f| f.stop_ns.map(|t| t as f64 / 1e9)).collect()));
    flows.push("fair_share_bps", Column::F64(fair.clone()));
    flows.push("goodput_bps", Column::F64(goodput.clone()));
    flows.push("delivered_bytes", Column::U64(col_delivered));
    flows.push("arrived_bytes", Column::U64(col_arrived));
    flows.push("dropped_bytes", Column::U64(col_dropped));
    flows.push("marked_bytes", Column::U64(col_marked));
    flows.push("mark_ratio", Column::OptF64(col_mark_ratio));
    flows.push("drop_ratio", Column::OptF64(col_drop_ratio));
    for ((_, name), v) in DROP_REASONS.iter().zip(drops_by) {
        flows.push(&format!("drops_{name}"), Column::U64(v));
    }
    for ((_, name), v) in MARK_REASONS.iter().zip(marks_by) {
        flows.push(&format!("marks_{name}"), Column::U64(v));
    }
    flows.push("segs_sent", Column::U64(col_sent));
    flows.push("wire_bytes_sent", Column::U64(col_wire));
    flows.push("retrans_segs", Column::U64(col_retrans));
    flows.push("rto_count", Column::U64(col_rto));
    flows.push("tlp_count", Column::U64(col_tlp));
    flows.push("recoveries", Column::U64(col_rec));
    flows.push("cwr_count", Column::U64(col_cwr));
    flows.push("segs_received", Column::U64(col_recv));
    flows.push("total_dropped_pkts", Column::U64(col_total_drops));
    flows.push("total_marked_pkts", Column::U64(col_total_marks));
    flows.push("end_in_network_pkts", Column::U64(col_innet));
    flows.push("fct_s", Column::OptF64(col_fct));

    // Classes. Relative throughput and Jain's index compare each flow with its fair share
    // (`fair_shares`): x_i = goodput_i / share_i, Jain's normalized allocation (Jain, Chiu &
    // Hawe, DEC-TR-301, 1984, §4: x_i = T_i/O_i). With every flow active the whole window
    // the share is C/N for all, so this is DESIGN.md's mean goodput ÷ (C/N) and Jain's index
    // of the goodputs. Flows with no share (never active in the window) are left out.
    let normalized = |f: usize| (fair[f] > 0.0).then(|| goodput[f] / fair[f]);
    let mut classes_json = Vec::new();
    let mut classes = Table::default();
    let (mut k_name, mut k_cc, mut k_rtt, mut k_count, mut k_good, mut k_rel, mut k_jain, mut k_mr, mut k_dr) =
        (vec![], vec![], vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
    let mut k_soj: Vec<Option<f64>> = vec![];
    for (c, class) in cfg.classes.iter().enumerate() {
        let idx: Vec<usize> = (0..n_flows).filter(|&f| w.flows[f].class == c).collect();
        let g: Vec<f64> = idx.iter().map(|&f| goodput[f]).collect();
        let sum: f64 = g.iter().sum();
        let mean = if g.is_empty() { 0.0 } else { sum / g.len() as f64 };
        let arrived: u64 = idx.iter().map(|&f| w.fm[f].arrived_bytes).sum();
        let marked: u64 = idx.iter().map(|&f| w.fm[f].marked_bytes).sum();
        let dropped: u64 = idx.iter().map(|&f| w.fm[f].dropped_bytes).sum();
        let soj_sum: u128 = idx.iter().map(|&f| w.fm[f].sojourn_sum_ns).sum();
        let soj_n: u64 = idx.iter().map(|&f| w.fm[f].sojourn_count).sum();
        let class_sojourn_ms = (soj_n > 0).then(|| soj_sum as f64 / soj_n as f64 / 1e6);
        let is_workload = class.workload.is_some();
        let shared: Vec<usize> = idx.iter().copied().filter(|&f| fair[f] > 0.0).collect();
        // The class's delivered bytes over the bytes its fair shares would have given it.
        let rel = (!is_workload && !shared.is_empty())
            .then(|| shared.iter().map(|&f| goodput[f]).sum::<f64>() / shared.iter().map(|&f| fair[f]).sum::<f64>());
        let j = if is_workload { None } else { jain(&shared.iter().filter_map(|&f| normalized(f)).collect::<Vec<_>>()) };
        let cc_name = w.flows.get(*idx.first().unwrap_or(&0)).map(|f| f.sender.kind_name()).unwrap_or("");
        classes_json.push(json!({
            "name": class.name, "cc": cc_name, "rtt_ms": class.rtt_ns as f64 / 1e6, "count": idx.len(),
            "goodput_bps": sum, "mean_goodput_bps": mean, "rel_throughput": rel, "jain": j,
            "mark_ratio": ratio(marked, arrived), "drop_ratio": ratio(dropped, arrived),
            "sojourn_mean_ms": class_sojourn_ms,
        }));
        k_name.push(class.name.clone());
        k_cc.push(cc_name.to_string());
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
    let arrived: u64 = w.fm.iter().map(|m| m.arrived_bytes).sum();
    let marked: u64 = w.fm.iter().map(|m| m.marked_bytes).sum();
    let dropped: u64 = w.fm.iter().map(|m| m.dropped_bytes).sum();
    let utilization = w.qm.link_bytes * 8.0 / (c_bps * window_s);
    let mean = w.qm.mean_ns();
    let target = cfg.bottleneck.delay_target_ns;
    let metrics = json!({
        "utilization": utilization,
        "jain": jain(&scheduled.iter().filter_map(|&f| normalized(f)).collect::<Vec<_>>()),
        "goodput_bps": goodput.iter().sum::<f64>(),
        "sojourn_ms": {
            "mean": mean.map(ns_to_ms),
            "p50": w.qm.quantile_ns(0.5).map(ns_to_ms),
            "p99": w.qm.quantile_ns(0.99).map(ns_to_ms),
            "max": (w.qm.sojourn_count > 0).then(|| w.qm.sojourn_max_ns as f64 / 1e6),
        },
        "sojourn_mean_rel_target": match (mean, target) { (Some(m), Some(t)) if t > 0 => Some(m / t as f64), _ => None },
        "sojourn_max_rel_target": match target { Some(t) if t > 0 && w.qm.sojourn_count > 0 => Some(w.qm.sojourn_max_ns as f64 / t as f64), _ => None },
        "mark_ratio": ratio(marked, arrived),
        "drop_ratio": ratio(dropped, arrived),
        "flows": n_flows,
        "window_s": window_s,
    });

    // Time series.
    let mut ts = Table::default();
    let rows = &w.samples;
    ts.push("t_s", Column::F64(rows.iter().map(|r| r.t_ns as f64 / 1e9).collect()));
    ts.push("flow", Column::U64(rows.iter().map(|r| r.flow as u64).collect()));
    ts.push("class", Column::Str(rows.iter().map(|r| cfg.classes[r.class as usize].name.clone()).collect()));
    ts.push("throughput_bps", Column::F64(rows.iter().map(|r| r.throughput_bps).collect()));
    ts.push("cwnd", Column::U64(rows.iter().map(|r| r.cwnd as u64).collect()));
    ts.push("ssthresh", Column::U64(rows.iter().map(|r| r.ssthresh as u64).collect()));
    ts.push("inflight", Column::U64(rows.iter().map(|r| r.inflight as u64).collect()));
    ts.push("srtt_ms", Column::F64(rows.iter().map(|r| r.srtt_us as f64 / 1e3).collect()));
    ts.push("pacing_rate_bps", Column::F64(rows.iter().map(|r| r.pacing_rate_bps).collect()));
    ts.push("ca_state", Column::Str(rows.iter().map(|r| r.ca_state.to_string()).collect()));
    ts.push("cc_phase", Column::OptStr(rows.iter().map(|r| r.cc.phase.map(str::to_string)).collect()));
    ts.push("cc_bw_bps", Column::OptF64(rows.iter().map(|r| r.cc.bw_bps).collect()));
    ts.push("inflight_hi", Column::OptF64(rows.iter().map(|r| r.cc.inflight_hi.map(f64::from)).collect()));
    ts.push("cc_alpha", Column::OptF64(rows.iter().map(|r| r.cc.alpha).collect()));

    let mut queue = Table::default();
    let iv_s = cfg.measure.interval_ns as f64 / 1e9;
    let q = &w.queue_samples;
    queue.push("t_s", Column::F64(q.iter().map(|r| r.t_ns as f64 / 1e9).collect()));
    queue.push("qlen_pkts", Column::U64(q.iter().map(|r| r.qlen_pkts).collect()));
    queue.push("backlog_bytes", Column::U64(q.iter().map(|r| r.backlog_bytes).collect()));
    queue.push("sojourn_mean_ms", Column::OptF64(q.iter().map(|r| r.sojourn_mean_ns.map(ns_to_ms)).collect()));
    queue.push("sojourn_max_ms", Column::OptF64(q.iter().map(|r| r.sojourn_max_ns.map(|x| x as f64 / 1e6)).collect()));
    queue.push("utilization", Column::F64(q.iter().map(|r| r.link_bytes * 8.0 / (c_bps * iv_s)).collect()));
    queue.push("drops", Column::U64(q.iter().map(|r| r.drops).collect()));
    queue.push("marks", Column::U64(q.iter().map(|r| r.marks).collect()));

    let mut hist = Table::default();
    let bins = w.qm.rebinned(cfg.measure.hist_bin_ns);
    let total = w.qm.sojourn_count.max(1) as f64;
    let bin_ms = cfg.measure.hist_bin_ns as f64 / 1e6;
    hist.push("bin_lo_ms", Column::F64(bins.iter().map(|(lo, _)| *lo as f64 / 1e6).collect()));
    hist.push("bin_hi_ms", Column::F64(bins.iter().map(|(lo, _)| *lo as f64 / 1e6 + bin_ms).collect()));
    hist.push("count", Column::U64(bins.iter().map(|(_, c)| *c).collect()));
    hist.push("fraction", Column::F64(bins.iter().map(|(_, c)| *c as f64 / total).collect()));

    // Flow completion times (finite flows only); unfinished flows stay in the table.
    // One pass over the ~1 KB flow records picks out what the table and the size bins need,
    // so the columns below read a compact copy instead of striding through every flow again
    // (a workload has thousands of finite flows: issue 7's dynamic case).
    let fin: Vec<Finite> = w
        .flows
        .iter()
        .enumerate()
        .filter_map(|(f, flow)| {
            flow.size_bytes.map(|size| Finite {
                flow: f,
                class: flow.class,
                size,
                start_ns: flow.start_ns,
                fct_s: flow.sender.finished_at.map(|t| (t - flow.start_ns) as f64 / 1e9),
            })
        })
        .collect();
    let mut fct = Table::default();
    fct.push("flow", Column::U64(fin.iter().map(|r| r.flow as u64).collect()));
    fct.push("class", Column::Str(fin.iter().map(|r| cfg.classes[r.class].name.clone()).collect()));
    fct.push("size_bytes", Column::U64(fin.iter().map(|r| r.size).collect()));
    fct.push("start_s", Column::F64(fin.iter().map(|r| r.start_ns as f64 / 1e9).collect()));
    fct.push("fct_s", Column::OptF64(fin.iter().map(|r| r.fct_s).collect()));
    fct.push(
        "slowdown",
        Column::OptF64(fin.iter().map(|r| r.fct_s.map(|fct| fct / r.ideal_s(&cfg, c_bps))).collect()),
    );
    fct.push("completed", Column::Bool(fin.iter().map(|r| r.fct_s.is_some()).collect()));
    let unfinished = fin.iter().filter(|r| r.fct_s.is_none()).count();
    let fct_summary = fct_by_size(&cfg, &fin, &cfg.measure.fct_bins_bytes, c_bps);

    let counters = json!({
        "events": w.sched.events_run,
        "bottleneck_pkts": w.bottleneck_pkts,
        "dropped_pkts": w.dropped_total,
        "finite_flows": fin.len(),
        "unfinished_flows": unfinished,
    });
    RunResult {
        summary: json!({"metrics": metrics, "classes": classes_json, "fct": fct_summary}),
        tables: vec![
            ("flows".into(), flows),
            ("classes".into(), classes),
            ("timeseries".into(), ts),
            ("queue".into(), queue),
            ("sojourn_hist".into(), hist),
            ("fct".into(), fct),
        ],
        counters,
    }
}

/// What the completion-time outputs need of one finite flow.
struct Finite {
    flow: usize,
    class: usize,
    size: u64,
    start_ns: u64,
    /// Completion time, s; None while unfinished.
    fct_s: Option<f64>,
}

impl Finite {
    /// Ideal completion time: size/C + base RTT (DESIGN.md §Metrics).
    fn ideal_s(&self, cfg: &EngineConfig, c_bps: f64) -> f64 {
        self.size as f64 * 8.0 / c_bps + cfg.classes[self.class].rtt_ns as f64 / 1e9
    }
}

/// Each flow's fair share of the link, bit/s averaged over the window (0 for workload flows):
/// wherever N scheduled flows are active — started and not yet stopped, by their schedule —
/// each of them is due C/N. A flow active the whole window beside N − 1 others that are too
/// gets C/N (DESIGN.md's C/N); one that runs alone for half the window and shares with
/// another for the other half gets (C + C/2)/2. A finite scheduled flow counts as active
/// from its start on (its yardstick is the completion time, as for workloads); a stopped
/// flow's share ends at its stop, though what it had in flight is delivered after it.
fn fair_shares(w: &World, scheduled: &[usize], c_bps: f64) -> Vec<f64> {
    let (lo, hi) = (w.cfg.warmup_ns, w.cfg.duration_ns);
    let window = (hi - lo) as f64;
    let span = |f: usize| {
        let flow = &w.flows[f];
        let a = flow.start_ns.clamp(lo, hi);
        let b = flow.stop_ns.unwrap_or(hi).clamp(lo, hi);
        (a, b)
    };
    let mut edges: Vec<u64> = scheduled.iter().flat_map(|&f| {
        let (a, b) = span(f);
        [a, b]
    }).collect();
    edges.sort_unstable();
    edges.dedup();
    let mut share = vec![0.0; w.flows.len()];
    for e in edges.windows(2) {
        let (t0, t1) = (e[0], e[1]);
        let active: Vec<usize> = scheduled.iter().copied().filter(|&f| {
            let (a, b) = span(f);
            a <= t0 && t1 <= b
        }).collect();
        for &f in &active {
            share[f] += c_bps / active.len() as f64 * ((t1 - t0) as f64 / window);
        }
    }
    share
}

fn ratio(a: u64, b: u64) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}

/// Completion times summarised by flow-size bin (DESIGN.md §Metrics; issue "Traffic beyond bulk
/// flows" §3): per bin the flows, how many completed and how many did not (never averaged
/// away), and mean / p50 / p99 of FCT and slowdown over the completed ones (nearest-rank
/// quantiles).
fn fct_by_size(cfg: &EngineConfig, fin: &[Finite], edges: &[u64], c_bps: f64) -> Value {
    let label = |b: u64| if b >= 1_000_000 && b.is_multiple_of(1_000_000) { format!("{}MB", b / 1_000_000) } else if b.is_multiple_of(1000) { format!("{}KB", b / 1000) } else { format!("{b}B") };
    let mut out = Vec::new();
    for k in 0..=edges.len() {
        let lo = if k == 0 { 0 } else { edges[k - 1] };
        let hi = edges.get(k).copied();
        let name = match (k, hi) {
            (0, Some(h)) => format!("<{}", label(h)),
            (_, Some(h)) => format!("{}–{}", label(lo), label(h)),
            (_, None) => format!("≥{}", label(lo)),
        };
        let in_bin: Vec<&Finite> = fin.iter().filter(|r| r.size >= lo && hi.is_none_or(|h| r.size < h)).collect();
        let mut fcts = Vec::new();
        let mut slow = Vec::new();
        for r in &in_bin {
            if let Some(fct) = r.fct_s {
                fcts.push(fct);
                slow.push(fct / r.ideal_s(cfg, c_bps));
            }
        }
        let stats = |v: &mut Vec<f64>| -> Value {
            if v.is_empty() {
                return json!({"mean": null, "p50": null, "p99": null});
            }
            v.sort_by(|a, b| a.total_cmp(b));
            let q = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
            json!({"mean": v.iter().sum::<f64>() / v.len() as f64, "p50": q(0.5), "p99": q(0.99)})
        };
        out.push(json!({
            "bin": name, "lo_bytes": lo, "hi_bytes": hi, "flows": in_bin.len(), "completed": fcts.len(),
            "unfinished": in_bin.len() - fcts.len(), "fct_s": stats(&mut fcts), "slowdown": stats(&mut slow),
        }));
    }
    Value::Array(out)
}
