//! The engine config: a scenario with every unit resolved to integers (ns, bit/s, bytes).
//!
//! The Python front validates the human-written TOML scenario (units such as `"10ms"`,
//! `"0.5bdp"`, `"0.17rtt"`) and lowers it to this JSON form; the engine never parses units.
//! Unknown keys are refused here too (`deny_unknown_fields`), so a front-end bug cannot
//! silently drop a setting. Errors name the dotted key path.

use serde::Deserialize;

use crate::cc::CcConfig;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineConfig {
    pub name: String,
    pub seed: u64,
    /// Simulated time, ns.
    pub duration_ns: u64,
    /// Start of the measurement window, ns (excluded from summary metrics).
    pub warmup_ns: u64,
    pub bottleneck: BottleneckConfig,
    pub classes: Vec<ClassConfig>,
    /// The packet-value marker at the flows' edge; only for disciplines that read packet
    /// values (PPV, CSAQM), which get the equal-share default when it is absent.
    #[serde(default)]
    pub marker: Option<MarkerConfig>,
    pub measure: MeasureConfig,
}

/// The packet-value marker (crates/sim/src/marker.rs; aqm.md §9.2).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MarkerConfig {
    /// T_m of the per-flow rate estimator, ns.
    #[serde(default = "default_rate_window")]
    pub rate_window_ns: u64,
    /// The TVF weight w_c of each class, in class order (V_c(x) = V(x / w_c)); empty = 1 for
    /// every class, i.e. equal sharing.
    #[serde(default)]
    pub class_weights: Vec<f64>,
    /// A custom TVF per class, in class order: (throughput bit/s, packet value) points,
    /// throughput increasing and value decreasing, interpolated log-linearly in throughput
    /// (`marker::Tvf`); `None` (or an empty list) = the default log-linear TVF with the class's
    /// weight. Not combined with `class_weights` (the front refuses both at once).
    #[serde(default)]
    pub class_curves: Vec<Option<Vec<(f64, f64)>>>,
}

impl MarkerConfig {
    /// The TVF of flow class `class`.
    pub fn tvf(&self, class: usize) -> crate::marker::Tvf {
        match self.class_curves.get(class) {
            Some(Some(points)) => crate::marker::Tvf::curve(points),
            _ => crate::marker::Tvf::log_linear(self.class_weights.get(class).copied().unwrap_or(1.0)),
        }
    }
}

fn default_rate_window() -> u64 {
    crate::marker::DEFAULT_RATE_WINDOW_NS
}

impl Default for MarkerConfig {
    fn default() -> Self {
        MarkerConfig { rate_window_ns: default_rate_window(), class_weights: Vec::new(), class_curves: Vec::new() }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BottleneckConfig {
    /// Link rate C, bit/s.
    pub rate_bps: u64,
    /// Physical buffer beneath the discipline: at most this many packets...
    pub buffer_packets: Option<u64>,
    /// ...and at most this many bytes (a time-sized buffer arrives here converted at line rate).
    pub buffer_bytes: Option<u64>,
    /// The queue discipline and its parameters, `{"kind": "red", ...}` (see `aqm::QdiscConfig`).
    pub aqm: aqm::QdiscConfig,
    /// The discipline's delay target, ns, where it has one (for "mean delay / target").
    pub delay_target_ns: Option<u64>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassConfig {
    /// Display name, e.g. `"cubic-10ms"`.
    pub name: String,
    /// The congestion control of a TCP class; None for an unresponsive CBR class.
    #[serde(default)]
    pub cc: Option<CcConfig>,
    /// An unresponsive constant-bit-rate (UDP-like) class: each flow sends 1500-byte packets
    /// at this rate, bit/s, whatever happens to them.
    #[serde(default)]
    pub cbr_rate_bps: Option<u64>,
    pub count: u32,
    /// Base (propagation) RTT of the class, ns.
    pub rtt_ns: u64,
    /// Whether the flows negotiate ECN. CCs that need ECN (DCTCP) force it.
    pub ecn: bool,
    /// When the flows of the class start (random draws come from the run's seeded RNG).
    pub start: StartConfig,
    /// When the flows of the class stop (bulk and CBR classes only; None = they run to the
    /// end). A stopping TCP flow's application stops writing: no new data after the stop,
    /// what is in flight is still delivered. A CBR flow sends no datagram due at or after it.
    /// Uniform draws come from a stream of their own, so adding stops never moves the starts.
    #[serde(default)]
    pub stop: Option<StartConfig>,
    /// Finite flows: payload bytes each flow sends, then completes. `None` = bulk (infinite).
    pub size_bytes: Option<u64>,
    /// Pace every flow of this class at Linux's default rate (as the `fq` qdisc does), even if
    /// its CC does not ask for pacing.
    pub fq_pacing: bool,
    /// An arrival workload instead of `count` scheduled flows: finite flows arriving as a
    /// Poisson process (`count`, `start` and `size_bytes` are then unused and must be 0/fixed/None).
    #[serde(default)]
    pub workload: Option<WorkloadConfig>,
}

/// Poisson arrivals of finite flows (issue "Traffic beyond bulk flows"; seed 002's dynamic
/// case: 10 or 100 flows/s, bounded Pareto sizes 1 KB–1 MB).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadConfig {
    /// Mean arrivals per second.
    pub rate_per_s: f64,
    /// Payload size of each flow.
    pub size: SizeDist,
    /// Arrivals from this time, ns...
    pub start_ns: u64,
    /// ...until this time, ns (None: the end of the run).
    pub stop_ns: Option<u64>,
}

/// A flow-size distribution, bytes. Draws come from the run's seeded RNG.
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "dist", rename_all = "snake_case", deny_unknown_fields)]
pub enum SizeDist {
    Fixed { bytes: u64 },
    Uniform { lo: u64, hi: u64 },
    Exponential { mean: f64 },
    /// Bounded Pareto on [lo, hi] with shape `alpha` (inverse-CDF sampling).
    Pareto { alpha: f64, lo: u64, hi: u64 },
    /// exp(N(mu, sigma²)) bytes.
    Lognormal { mu: f64, sigma: f64 },
    /// An empirical CDF: (size in bytes, cumulative probability) points, increasing in both,
    /// the last at probability 1; sizes between points are interpolated linearly (the format
    /// of the published web-search / data-mining flow-size CDFs).
    Empirical { points: Vec<(f64, f64)> },
}

impl SizeDist {
    pub fn check(&self) -> Result<(), String> {
        match *self {
            SizeDist::Fixed { bytes: 0 } => Err("bytes: must be positive".into()),
            SizeDist::Uniform { lo, hi } if lo == 0 || lo > hi => Err(format!("uniform: needs 0 < lo <= hi (got {lo}, {hi})")),
            SizeDist::Exponential { mean } if !(mean >= 1.0 && mean.is_finite()) => Err(format!("mean: {mean} must be at least 1 byte")),
            SizeDist::Pareto { alpha, lo, hi } if !(alpha > 0.0 && alpha.is_finite()) || lo == 0 || lo >= hi => Err(format!("pareto: needs alpha > 0 and 0 < lo < hi (got alpha {alpha}, {lo}, {hi})")),
            SizeDist::Lognormal { mu, sigma } if !(mu.is_finite() && sigma > 0.0 && sigma.is_finite()) => Err(format!("lognormal: needs a finite mu and sigma > 0 (got {mu}, {sigma})")),
            SizeDist::Empirical { ref points } => {
                if points.len() < 2 {
                    return Err("empirical: needs at least two (size, cdf) points".into());
                }
                for w in points.windows(2) {
                    if !(w[1].0 >= w[0].0 && w[1].1 >= w[0].1) {
                        return Err(format!("empirical: sizes and probabilities must not decrease ({:?} then {:?})", w[0], w[1]));
                    }
                }
                let (first, last) = (points[0], points[points.len() - 1]);
                if first.0 < 1.0 || first.1 < 0.0 || (last.1 - 1.0).abs() > 1e-9 {
                    return Err("empirical: sizes must be ≥ 1 byte, probabilities in [0, 1] ending at 1".into());
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// One size, bytes (≥ 1), from a uniform draw `u` in [0, 1) and, for the lognormal, a
    /// second one `v` (Box–Muller).
    pub fn sample(&self, u: f64, v: f64) -> u64 {
        let x = match *self {
            SizeDist::Fixed { bytes } => bytes as f64,
            SizeDist::Uniform { lo, hi } => lo as f64 + u * (hi - lo + 1) as f64,
            SizeDist::Exponential { mean } => -mean * (1.0 - u).ln(),
            SizeDist::Pareto { alpha, lo, hi } => {
                // Inverse CDF of the bounded Pareto: F(x) = (1 − (L/x)^α) / (1 − (L/H)^α).
                let (l, h) = (lo as f64, hi as f64);
                let r = (l / h).powf(alpha);
                l / (1.0 - u * (1.0 - r)).powf(1.0 / alpha)
            }
            SizeDist::Lognormal { mu, sigma } => {
                let z = (-2.0 * (1.0 - u).ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos();
                (mu + sigma * z).exp()
            }
            SizeDist::Empirical { ref points } => {
                let i = points.partition_point(|p| p.1 < u);
                if i == 0 {
                    points[0].0
                } else if i >= points.len() {
                    points[points.len() - 1].0
                } else {
                    let (a, b) = (points[i - 1], points[i]);
                    if b.1 > a.1 {
                        a.0 + (b.0 - a.0) * (u - a.1) / (b.1 - a.1)
                    } else {
                        b.0
                    }
                }
            }
        };
        x.floor().max(1.0) as u64
    }
}

/// A schedule: when each flow of a class starts (or stops).
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum StartConfig {
    /// Every flow starts at `at_ns`.
    Fixed { at_ns: u64 },
    /// Each flow draws its start uniformly from [lo_ns, hi_ns] with the run's RNG.
    Uniform { lo_ns: u64, hi_ns: u64 },
    /// Flow i starts at `first_ns + i·spacing_ns`.
    Staggered { first_ns: u64, spacing_ns: u64 },
}

impl StartConfig {
    /// The earliest and latest time flow `i` of the class can get from this schedule.
    pub fn bounds(&self, i: u64) -> (u64, u64) {
        match *self {
            StartConfig::Fixed { at_ns } => (at_ns, at_ns),
            StartConfig::Uniform { lo_ns, hi_ns } => (lo_ns, hi_ns),
            StartConfig::Staggered { first_ns, spacing_ns } => {
                let t = first_ns.saturating_add(i.saturating_mul(spacing_ns));
                (t, t)
            }
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasureConfig {
    /// Time-series sampling interval, ns (0 = no time series).
    pub interval_ns: u64,
    /// Bin width of the reported sojourn histogram, ns (1 ms like the seeds by default).
    pub hist_bin_ns: u64,
    /// Upper edges of the flow-size bins the completion-time summary uses, bytes (the last
    /// bin is open: default < 100 KB, 100 KB–1 MB, ≥ 1 MB).
    #[serde(default = "default_fct_bins")]
    pub fct_bins_bytes: Vec<u64>,
}

fn default_fct_bins() -> Vec<u64> {
    vec![100_000, 1_000_000]
}

impl EngineConfig {
    pub fn from_json(s: &str) -> Result<Self, String> {
        let cfg: EngineConfig = serde_json::from_str(s).map_err(|e| format!("engine config: {e}"))?;
        cfg.check()?;
        Ok(cfg)
    }

    /// Range checks the type system cannot express. Messages name the dotted key.
    pub fn check(&self) -> Result<(), String> {
        if self.duration_ns == 0 {
            return Err("duration: must be positive".into());
        }
        if self.warmup_ns >= self.duration_ns {
            return Err("warmup: must be shorter than duration".into());
        }
        if self.bottleneck.rate_bps == 0 {
            return Err("bottleneck.rate: must be positive".into());
        }
        if self.classes.is_empty() {
            return Err("flows: at least one flow class is needed".into());
        }
        for (i, c) in self.classes.iter().enumerate() {
            if c.rtt_ns == 0 {
                return Err(format!("flows[{i}].rtt: must be positive"));
            }
            if let StartConfig::Uniform { lo_ns, hi_ns } = c.start {
                if lo_ns > hi_ns {
                    return Err(format!("flows[{i}].start: uniform(a, b) needs a <= b"));
                }
            }
            if let Some(stop) = &c.stop {
                if let StartConfig::Uniform { lo_ns, hi_ns } = *stop {
                    if lo_ns > hi_ns {
                        return Err(format!("flows[{i}].stop: uniform(a, b) needs a <= b"));
                    }
                }
                if c.size_bytes.is_some() || c.workload.is_some() {
                    return Err(format!("flows[{i}].stop: a stop is for bulk and cbr flows (a finite flow ends when its data is delivered; a workload has its own stop)"));
                }
                // Every flow must stop after it starts, whatever the draws.
                for k in 0..c.count as u64 {
                    let (_, latest_start) = c.start.bounds(k);
                    let (earliest_stop, _) = stop.bounds(k);
                    if earliest_stop <= latest_start {
                        return Err(format!(
                            "flows[{i}].stop: flow {k} of the class could stop at {} s, not after its start at {} s",
                            earliest_stop as f64 / 1e9,
                            latest_start as f64 / 1e9
                        ));
                    }
                }
            }
            match (&c.cc, c.cbr_rate_bps) {
                (Some(cc), None) => cc.validate().map_err(|e| format!("flows[{i}].cc_params.{e}"))?,
                (None, Some(r)) if r > 0 => {}
                (None, Some(_)) => return Err(format!("flows[{i}].rate: must be positive")),
                _ => return Err(format!("flows[{i}].cc: a class is either TCP (a cc) or CBR (a rate)")),
            }
            if c.size_bytes == Some(0) {
                return Err(format!("flows[{i}].size: must be positive"));
            }
            if let Some(wl) = &c.workload {
                if !(wl.rate_per_s > 0.0 && wl.rate_per_s.is_finite()) {
                    return Err(format!("flows[{i}].workload.rate: {} must be positive", wl.rate_per_s));
                }
                wl.size.check().map_err(|e| format!("flows[{i}].workload.size.{e}"))?;
                if c.count != 0 || c.size_bytes.is_some() || c.cc.is_none() {
                    return Err(format!("flows[{i}]: a workload class has TCP flows and no count or size of its own"));
                }
                if wl.stop_ns.is_some_and(|s| s <= wl.start_ns) {
                    return Err(format!("flows[{i}].workload.stop: must be after its start"));
                }
            }
        }
        if let Some(m) = &self.marker {
            if !self.bottleneck.aqm.reads_packet_values() {
                return Err("marker: only the ppv and csaqm disciplines read packet values; remove the marker or use one of them".into());
            }
            if m.rate_window_ns == 0 {
                return Err("marker.rate_window: must be positive".into());
            }
            if !m.class_weights.is_empty() && m.class_weights.len() != self.classes.len() {
                return Err(format!("marker.weights: {} weights for {} flow classes", m.class_weights.len(), self.classes.len()));
            }
            if let Some(w) = m.class_weights.iter().find(|w| !(w.is_finite() && **w > 0.0)) {
                return Err(format!("marker.weights: {w} must be positive"));
            }
            if !m.class_curves.is_empty() && m.class_curves.len() != self.classes.len() {
                return Err(format!("marker.curves: {} curves for {} flow classes", m.class_curves.len(), self.classes.len()));
            }
            for (c, points) in m.class_curves.iter().enumerate() {
                if let Some(points) = points {
                    crate::marker::Tvf::check_curve(points).map_err(|e| format!("marker.curves.{}: {e}", self.classes[c].name))?;
                }
            }
        }
        if self.measure.hist_bin_ns == 0 {
            return Err("measure.hist_bin: must be positive".into());
        }
        if self.measure.fct_bins_bytes.windows(2).any(|w| w[0] >= w[1]) || self.measure.fct_bins_bytes.first() == Some(&0) {
            return Err("measure.fct_bins: must be increasing positive sizes".into());
        }
        Ok(())
    }
}
