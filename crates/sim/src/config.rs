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
}

fn default_rate_window() -> u64 {
    crate::marker::DEFAULT_RATE_WINDOW_NS
}

impl Default for MarkerConfig {
    fn default() -> Self {
        MarkerConfig { rate_window_ns: default_rate_window(), class_weights: Vec::new() }
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
    /// Finite flows: payload bytes each flow sends, then completes. `None` = bulk (infinite).
    pub size_bytes: Option<u64>,
    /// Pace every flow of this class at Linux's default rate (as the `fq` qdisc does), even if
    /// its CC does not ask for pacing.
    pub fq_pacing: bool,
}

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

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasureConfig {
    /// Time-series sampling interval, ns (0 = no time series).
    pub interval_ns: u64,
    /// Bin width of the reported sojourn histogram, ns (1 ms like the seeds by default).
    pub hist_bin_ns: u64,
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
            match (&c.cc, c.cbr_rate_bps) {
                (Some(cc), None) => cc.validate().map_err(|e| format!("flows[{i}].cc_params.{e}"))?,
                (None, Some(r)) if r > 0 => {}
                (None, Some(_)) => return Err(format!("flows[{i}].rate: must be positive")),
                _ => return Err(format!("flows[{i}].cc: a class is either TCP (a cc) or CBR (a rate)")),
            }
            if c.size_bytes == Some(0) {
                return Err(format!("flows[{i}].size: must be positive"));
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
        }
        if self.measure.hist_bin_ns == 0 {
            return Err("measure.hist_bin: must be positive".into());
        }
        Ok(())
    }
}
