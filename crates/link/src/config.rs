//! The bottleneck's part of the engine config, shared by the simulator (whose
//! `sim::EngineConfig` holds these types) and the emulator's router (which reads the same
//! JSON as [`LinkConfig`]).
//!
//! The engine config is a scenario with every unit resolved to integers (ns, bit/s, bytes);
//! the Python front validates the TOML scenario and lowers it to this JSON form. Unknown keys
//! are refused (`deny_unknown_fields`), so a front-end bug cannot silently drop a setting.
//! Errors name the dotted key path.

use serde::Deserialize;

use crate::marker::{Tvf, DEFAULT_RATE_WINDOW_NS};

/// The bottleneck: a link of rate C behind a buffer and a queue discipline.
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

/// The packet-value marker ([`crate::marker`]).
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
    /// ([`Tvf`]); `None` (or an empty list) = the default log-linear TVF with the class's
    /// weight. Not combined with `class_weights` (the front refuses both at once).
    #[serde(default)]
    pub class_curves: Vec<Option<Vec<(f64, f64)>>>,
}

impl MarkerConfig {
    /// The TVF of flow class `class`.
    pub fn tvf(&self, class: usize) -> Tvf {
        match self.class_curves.get(class) {
            Some(Some(points)) => Tvf::curve(points),
            _ => Tvf::log_linear(self.class_weights.get(class).copied().unwrap_or(1.0)),
        }
    }

    /// Range checks; `aqm` is the bottleneck's discipline, `classes` the class names in order.
    pub fn check(&self, aqm: &aqm::QdiscConfig, classes: &[&str]) -> Result<(), String> {
        if !aqm.reads_packet_values() {
            return Err("marker: only the ppv and csaqm disciplines read packet values; remove the marker or use one of them".into());
        }
        if self.rate_window_ns == 0 {
            return Err("marker.rate_window: must be positive".into());
        }
        if !self.class_weights.is_empty() && self.class_weights.len() != classes.len() {
            return Err(format!("marker.weights: {} weights for {} flow classes", self.class_weights.len(), classes.len()));
        }
        if let Some(w) = self.class_weights.iter().find(|w| !(w.is_finite() && **w > 0.0)) {
            return Err(format!("marker.weights: {w} must be positive"));
        }
        if !self.class_curves.is_empty() && self.class_curves.len() != classes.len() {
            return Err(format!("marker.curves: {} curves for {} flow classes", self.class_curves.len(), classes.len()));
        }
        for (c, points) in self.class_curves.iter().enumerate() {
            if let Some(points) = points {
                Tvf::check_curve(points).map_err(|e| format!("marker.curves.{}: {e}", classes[c]))?;
            }
        }
        Ok(())
    }
}

fn default_rate_window() -> u64 {
    DEFAULT_RATE_WINDOW_NS
}

impl Default for MarkerConfig {
    fn default() -> Self {
        MarkerConfig { rate_window_ns: default_rate_window(), class_weights: Vec::new(), class_curves: Vec::new() }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasureConfig {
    /// Time-series sampling interval, ns (0 = no time series).
    pub interval_ns: u64,
    /// Bin width of the reported sojourn histogram, ns (the front's default is 1 ms).
    pub hist_bin_ns: u64,
    /// Upper edges of the flow-size bins the completion-time summary uses, bytes (the last
    /// bin is open: default < 100 KB, 100 KB–1 MB, ≥ 1 MB).
    #[serde(default = "default_fct_bins")]
    pub fct_bins_bytes: Vec<u64>,
}

fn default_fct_bins() -> Vec<u64> {
    vec![100_000, 1_000_000]
}

impl MeasureConfig {
    pub fn check(&self) -> Result<(), String> {
        if self.hist_bin_ns == 0 {
            return Err("measure.hist_bin: must be positive".into());
        }
        if self.fct_bins_bytes.windows(2).any(|w| w[0] >= w[1]) || self.fct_bins_bytes.first() == Some(&0) {
            return Err("measure.fct_bins: must be increasing positive sizes".into());
        }
        Ok(())
    }
}

/// The run-wide checks of the bottleneck's part, before any class is looked at.
pub fn check_run(duration_ns: u64, warmup_ns: u64, bottleneck: &BottleneckConfig, n_classes: usize) -> Result<(), String> {
    if duration_ns == 0 {
        return Err("duration: must be positive".into());
    }
    if warmup_ns >= duration_ns {
        return Err(format!("warmup: must be shorter than duration ({} s ≥ {} s)", warmup_ns as f64 / 1e9, duration_ns as f64 / 1e9));
    }
    if bottleneck.rate_bps == 0 {
        return Err("bottleneck.rate: must be positive".into());
    }
    if n_classes == 0 {
        return Err("flows: at least one flow class is needed".into());
    }
    Ok(())
}

/// The check of class `i`'s base RTT.
pub fn check_rtt(i: usize, rtt_ns: u64) -> Result<(), String> {
    if rtt_ns == 0 {
        return Err(format!("flows[{i}].rtt: must be positive"));
    }
    Ok(())
}

/// A flow class as the bottleneck sees it: its name and base RTT. The rest of a class (its
/// congestion control, count, schedule, sizes) is the traffic's business and is not read.
#[derive(Clone, Debug, Deserialize)]
pub struct LinkClass {
    pub name: String,
    /// Base (propagation) RTT of the class, ns.
    pub rtt_ns: u64,
}

/// An engine config read for the bottleneck alone: the same JSON as `sim::EngineConfig`, with
/// the classes reduced to [`LinkClass`]. The emulator's router runs on this.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkConfig {
    pub name: String,
    pub seed: u64,
    /// Scenario time, ns.
    pub duration_ns: u64,
    /// Start of the measurement window, ns.
    pub warmup_ns: u64,
    pub bottleneck: BottleneckConfig,
    pub classes: Vec<LinkClass>,
    /// The packet-value marker; only for disciplines that read packet values (PPV, CSAQM),
    /// which get the equal-share default when it is absent.
    #[serde(default)]
    pub marker: Option<MarkerConfig>,
    pub measure: MeasureConfig,
}

impl LinkConfig {
    pub fn from_json(s: &str) -> Result<Self, String> {
        let cfg: LinkConfig = serde_json::from_str(s).map_err(|e| format!("engine config: {e}"))?;
        cfg.check()?;
        Ok(cfg)
    }

    /// The range checks of `sim::EngineConfig::check` that concern the bottleneck, with the
    /// same messages.
    pub fn check(&self) -> Result<(), String> {
        check_run(self.duration_ns, self.warmup_ns, &self.bottleneck, self.classes.len())?;
        for (i, c) in self.classes.iter().enumerate() {
            check_rtt(i, c.rtt_ns)?;
        }
        if let Some(m) = &self.marker {
            let names: Vec<&str> = self.classes.iter().map(|c| c.name.as_str()).collect();
            m.check(&self.bottleneck.aqm, &names)?;
        }
        self.measure.check()
    }

    /// The marker every flow gets, if the discipline reads packet values: the configured one,
    /// else equal sharing.
    pub fn marker(&self) -> Option<MarkerConfig> {
        self.bottleneck.aqm.reads_packet_values().then(|| self.marker.clone().unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine(extra: &str, class_extra: &str) -> String {
        format!(
            r#"{{"name": "t", "seed": 1, "duration_ns": 1000000000, "warmup_ns": 0,
                "bottleneck": {{"rate_bps": 12000000, "buffer_packets": 100, "buffer_bytes": null, "aqm": {{"kind": "ppv"}}, "delay_target_ns": null}},
                "classes": [{{"name": "a", "rtt_ns": 10000000, "cc": {{"name": "cubic"}}, "count": 3{class_extra}}}],
                "measure": {{"interval_ns": 100000000, "hist_bin_ns": 1000000}}{extra}}}"#
        )
    }

    #[test]
    fn the_traffic_keys_of_a_class_are_not_read_but_unknown_run_keys_are_refused() {
        let c = LinkConfig::from_json(&engine("", r#", "whatever": [1]"#)).unwrap();
        assert_eq!((c.classes[0].name.as_str(), c.classes[0].rtt_ns), ("a", 10_000_000));
        assert_eq!(c.measure.fct_bins_bytes, vec![100_000, 1_000_000]);
        // PPV without a marker section: equal sharing at the default window.
        assert_eq!(c.marker().unwrap().rate_window_ns, DEFAULT_RATE_WINDOW_NS);
        assert!(LinkConfig::from_json(&engine(r#", "extra": 1"#, "")).unwrap_err().contains("unknown field `extra`"));
    }

    #[test]
    fn each_check_names_its_key() {
        let err = |e: String| LinkConfig::from_json(&e).unwrap_err();
        assert_eq!(err(engine("", "").replace("\"duration_ns\": 1000000000", "\"duration_ns\": 0")), "duration: must be positive");
        assert_eq!(err(engine("", "").replace("\"warmup_ns\": 0", "\"warmup_ns\": 1000000000")), "warmup: must be shorter than duration (1 s ≥ 1 s)");
        assert_eq!(err(engine("", "").replace("12000000", "0")), "bottleneck.rate: must be positive");
        assert_eq!(err(engine("", "").replace("10000000,", "0,")), "flows[0].rtt: must be positive");
        assert_eq!(err(engine(r#", "marker": {"class_weights": [1, 2]}"#, "")), "marker.weights: 2 weights for 1 flow classes");
        assert!(err(engine(r#", "marker": {"class_curves": [[[1e6, 10.0], [1e7, 20.0]]]}"#, "")).starts_with("marker.curves.a: "));
        assert_eq!(err(engine("", "").replace("\"hist_bin_ns\": 1000000", "\"hist_bin_ns\": 0")), "measure.hist_bin: must be positive");
        let taildrop = engine(r#", "marker": {}"#, "").replace(r#""kind": "ppv""#, r#""kind": "taildrop""#);
        assert!(err(taildrop).starts_with("marker: only the ppv and csaqm"));
    }
}
