//! The engine config: a scenario with every unit resolved to integers (ns, bit/s, bytes).
//!
//! The Python front validates the human-written TOML scenario (units such as `"10ms"`,
//! `"0.5bdp"`, `"0.17rtt"`) and lowers it to this JSON form; the engine never parses units.
//! Unknown keys are refused here too (`deny_unknown_fields`), so a front-end bug cannot
//! silently drop a setting. Errors name the dotted key path.
//!
//! The bottleneck's part (its config, the marker, the measurement settings, and the checks
//! that concern them) is `link::config`, which the emulator's router reads from the same JSON.

use serde::Deserialize;

pub use link::config::{BottleneckConfig, HostConfig, MarkerConfig, MeasureConfig};

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
    /// Every end host's network stack: offloads (TSO/GSO, GRO) and the NIC. Required, so the
    /// front always states whether the hosts are Linux's or ideal.
    pub host: HostConfig,
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
    /// A CBR class's ECN codepoint, carried by every datagram; the source ignores CE as it
    /// ignores loss (an unresponsive ECN-capable flow, what RFC 9332 §4.2 asks a DualQ to
    /// withstand). None = Not-ECT.
    #[serde(default)]
    pub cbr_ecn: Option<CbrEcn>,
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

/// The ECN codepoint of an unresponsive CBR class (RFC 3168 §5: ECT(0); RFC 9331 §4.1: ECT(1)
/// identifies L4S traffic).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CbrEcn {
    Ect0,
    Ect1,
}

impl CbrEcn {
    pub fn codepoint(self) -> aqm::Ecn {
        match self {
            CbrEcn::Ect0 => aqm::Ecn::Ect0,
            CbrEcn::Ect1 => aqm::Ecn::Ect1,
        }
    }
}

/// Poisson arrivals of finite flows (as the dynamic case of De Schepper et al. (DualQ): 10 or
/// 100 flows/s, bounded Pareto sizes 1 KB–1 MB).
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
    Fixed {
        bytes: u64,
    },
    Uniform {
        lo: u64,
        hi: u64,
    },
    Exponential {
        mean: f64,
    },
    /// Bounded Pareto on [lo, hi] with shape `alpha` (inverse-CDF sampling).
    Pareto {
        alpha: f64,
        lo: u64,
        hi: u64,
    },
    /// exp(N(mu, sigma²)) bytes.
    Lognormal {
        mu: f64,
        sigma: f64,
    },
    /// An empirical CDF: (size in bytes, cumulative probability) points, increasing in both,
    /// the last at probability 1; sizes between points are interpolated linearly (the format
    /// of the published web-search / data-mining flow-size CDFs).
    Empirical {
        points: Vec<(f64, f64)>,
    },
}

impl SizeDist {
    pub fn check(&self) -> Result<(), String> {
        match *self {
            SizeDist::Fixed { bytes: 0 } => Err("bytes: must be positive".into()),
            SizeDist::Uniform { lo, hi } if lo == 0 || lo > hi => {
                Err(format!("uniform: needs 0 < lo <= hi (got {lo}, {hi})"))
            }
            SizeDist::Exponential { mean } if !(mean >= 1.0 && mean.is_finite()) => {
                Err(format!("mean: {mean} must be at least 1 byte"))
            }
            SizeDist::Pareto { alpha, lo, hi }
                if !(alpha > 0.0 && alpha.is_finite()) || lo == 0 || lo >= hi =>
            {
                Err(format!(
                    "pareto: needs alpha > 0 and 0 < lo < hi (got alpha {alpha}, {lo}, {hi})"
                ))
            }
            SizeDist::Lognormal { mu, sigma }
                if !(mu.is_finite() && sigma > 0.0 && sigma.is_finite()) =>
            {
                Err(format!(
                    "lognormal: needs a finite mu and sigma > 0 (got {mu}, {sigma})"
                ))
            }
            SizeDist::Empirical { ref points } => {
                if points.len() < 2 {
                    return Err("empirical: needs at least two (size, cdf) points".into());
                }
                for w in points.windows(2) {
                    if !(w[1].0 >= w[0].0 && w[1].1 >= w[0].1) {
                        return Err(format!(
                            "empirical: sizes and probabilities must not decrease ({:?} then {:?})",
                            w[0], w[1]
                        ));
                    }
                }
                let (first, last) = (points[0], points[points.len() - 1]);
                if first.0 < 1.0 || first.1 < 0.0 || (last.1 - 1.0).abs() > 1e-9 {
                    return Err(
                        "empirical: sizes must be ≥ 1 byte, probabilities in [0, 1] ending at 1"
                            .into(),
                    );
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
            StartConfig::Staggered {
                first_ns,
                spacing_ns,
            } => {
                let t = first_ns.saturating_add(i.saturating_mul(spacing_ns));
                (t, t)
            }
        }
    }
}

impl EngineConfig {
    pub fn from_json(s: &str) -> Result<Self, String> {
        let cfg: EngineConfig = serde_json::from_str(s).map_err(link::config::json_error)?;
        cfg.check()?;
        Ok(cfg)
    }

    /// Range checks the type system cannot express. Messages name the dotted key.
    pub fn check(&self) -> Result<(), String> {
        link::config::check_run(
            self.duration_ns,
            self.warmup_ns,
            &self.bottleneck,
            self.classes.len(),
        )?;
        for (i, c) in self.classes.iter().enumerate() {
            link::config::check_rtt(i, c.rtt_ns)?;
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
                (Some(cc), None) => cc
                    .validate()
                    .map_err(|e| format!("flows[{i}].cc_params.{e}"))?,
                (Some(_), _) if c.cbr_ecn.is_some() => {
                    return Err(format!(
                        "flows[{i}].cbr_ecn: a codepoint is for CBR classes (a TCP class's CC chooses its own)"
                    ))
                }
                (None, Some(r)) if r > 0 => {}
                (None, Some(_)) => return Err(format!("flows[{i}].rate: must be positive")),
                _ => {
                    return Err(format!(
                        "flows[{i}].cc: a class is either TCP (a cc) or CBR (a rate)"
                    ))
                }
            }
            if c.size_bytes == Some(0) {
                return Err(format!("flows[{i}].size: must be positive"));
            }
            if let Some(wl) = &c.workload {
                if !(wl.rate_per_s > 0.0 && wl.rate_per_s.is_finite()) {
                    return Err(format!(
                        "flows[{i}].workload.rate: {} must be positive",
                        wl.rate_per_s
                    ));
                }
                wl.size
                    .check()
                    .map_err(|e| format!("flows[{i}].workload.size.{e}"))?;
                if c.count != 0 || c.size_bytes.is_some() || c.cc.is_none() {
                    return Err(format!("flows[{i}]: a workload class has TCP flows and no count or size of its own"));
                }
                if wl.stop_ns.is_some_and(|s| s <= wl.start_ns) {
                    return Err(format!("flows[{i}].workload.stop: must be after its start"));
                }
            }
        }
        if let Some(m) = &self.marker {
            let names: Vec<&str> = self.classes.iter().map(|c| c.name.as_str()).collect();
            m.check(&self.bottleneck.aqm, &names)?;
        }
        self.host.check(crate::packet::MTU_BYTES)?;
        self.measure.check()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_routers_view_of_an_engine_config_is_its_bottleneck_part() {
        // A config with every kind of class (TCP with a stop, CBR, workload) and a marker: the
        // emulator's router reads the same JSON as `link::LinkConfig`, and both agree on what
        // the bottleneck needs.
        let json = r#"{"name": "t", "seed": 9, "duration_ns": 3000000000, "warmup_ns": 1000000000,
            "bottleneck": {"rate_bps": 20000000, "buffer_packets": null, "buffer_bytes": 50000, "aqm": {"kind": "ppv"}, "rtt_ref_ns": 10000000},
            "classes": [
              {"name": "a", "cc": {"name": "cubic"}, "count": 2, "rtt_ns": 10000000, "ecn": false, "start": {"kind": "fixed", "at_ns": 0},
               "stop": {"kind": "fixed", "at_ns": 2000000000}, "size_bytes": null, "fq_pacing": false},
              {"name": "b", "cbr_rate_bps": 1000000, "count": 1, "rtt_ns": 30000000, "ecn": false, "start": {"kind": "fixed", "at_ns": 0}, "size_bytes": null, "fq_pacing": false},
              {"name": "c", "cc": {"name": "reno"}, "count": 0, "rtt_ns": 20000000, "ecn": true, "start": {"kind": "fixed", "at_ns": 0}, "size_bytes": null, "fq_pacing": false,
               "workload": {"rate_per_s": 10.0, "size": {"dist": "fixed", "bytes": 10000}, "start_ns": 0, "stop_ns": null}}],
            "marker": {"rate_window_ns": 50000000, "class_weights": [1.0, 2.0, 3.0]},
            "measure": {"interval_ns": 100000000, "hist_bin_ns": 1000000, "fct_bins_bytes": [5000]},
            "host": {"offloads": true, "nic_rate_bps": 1000000000}}"#;
        let e = EngineConfig::from_json(json).unwrap();
        let l = link::LinkConfig::from_json(json).unwrap();
        assert_eq!(
            (l.seed, l.duration_ns, l.warmup_ns),
            (e.seed, e.duration_ns, e.warmup_ns)
        );
        assert_eq!(
            l.classes
                .iter()
                .map(|c| (c.name.as_str(), c.rtt_ns))
                .collect::<Vec<_>>(),
            [("a", 10_000_000), ("b", 30_000_000), ("c", 20_000_000)]
        );
        assert_eq!(l.bottleneck.buffer_bytes, Some(50_000));
        assert_eq!(l.marker().unwrap().class_weights, [1.0, 2.0, 3.0]);
        assert_eq!(l.measure.fct_bins_bytes, e.measure.fct_bins_bytes);
        // Both read the hosts alike; the knobs left out take Linux's defaults.
        assert_eq!(
            e.host,
            HostConfig {
                nic_rate_bps: 1_000_000_000,
                ..HostConfig::linux()
            }
        );
        assert_eq!(l.host.as_ref(), Some(&e.host));
        // The same bottleneck errors, word for word.
        let bad = json.replace("\"rate_window_ns\": 50000000", "\"rate_window_ns\": 0");
        assert_eq!(
            EngineConfig::from_json(&bad).unwrap_err(),
            "marker.rate_window: must be positive"
        );
        assert_eq!(
            link::LinkConfig::from_json(&bad).unwrap_err(),
            "marker.rate_window: must be positive"
        );
        let bad = json.replace("\"nic_rate_bps\": 1000000000", "\"gso_max_bytes\": 1000");
        assert_eq!(
            EngineConfig::from_json(&bad).unwrap_err(),
            "host.gso_max_size: 1000 B is less than one 1500 B packet"
        );
        assert_eq!(
            link::LinkConfig::from_json(&bad).unwrap_err(),
            "host.gso_max_size: 1000 B is less than one 1500 B packet"
        );
        // The engine needs the hosts stated; an unknown host key is refused.
        let (head, _) = json.split_once(",\n            \"host\"").unwrap();
        assert!(EngineConfig::from_json(&format!("{head}}}"))
            .unwrap_err()
            .contains("missing field `host`"));
        assert!(EngineConfig::from_json(
            &json.replace("\"offloads\": true", "\"offloads\": true, \"tso\": 1")
        )
        .unwrap_err()
        .contains("unknown field `tso`"));
        // Ideal hosts have no offloads; without offloads a receiver merges nothing (a GRO
        // limit of one 1500 B packet: 1500 + 1448 is over it), with them up to gro_max_size.
        let both = json.replace("\"offloads\": true", "\"offloads\": true, \"ideal\": true");
        assert_eq!(
            EngineConfig::from_json(&both).unwrap_err(),
            "host.ideal: ideal hosts have no offloads (offloads must be false)"
        );
        let ideal = EngineConfig::from_json(
            &json.replace("\"offloads\": true", "\"offloads\": false, \"ideal\": true"),
        )
        .unwrap();
        assert_eq!(
            ideal.host,
            HostConfig {
                nic_rate_bps: 1_000_000_000,
                ..HostConfig::ideal()
            }
        );
        assert_eq!(
            HostConfig {
                offloads: false,
                ..HostConfig::linux()
            }
            .gro_limit(1500),
            1500
        );
        assert_eq!(HostConfig::linux().gro_limit(1500), 65_536);
    }
}
