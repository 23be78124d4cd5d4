//! The bottleneck's part of the engine config, shared by the simulator (whose
//! `sim::EngineConfig` holds these types) and the emulator's router (which reads the same
//! JSON as [`LinkConfig`]).
//!
//! The engine config is a scenario with every unit resolved to integers (ns, bit/s, bytes);
//! the Python front validates the TOML scenario and lowers it to this JSON form. Unknown keys
//! are refused (`deny_unknown_fields`), so a front-end bug cannot silently drop a setting.
//! Errors name the dotted key path.

use serde::{Deserialize, Serialize};

use crate::discipline::{DisciplineConfig, PluginConfig, PluginSpec};
use crate::marker::{Tvf, DEFAULT_RATE_WINDOW_NS};

/// The bottleneck: a link of rate C behind a buffer and a queue discipline, the discipline
/// given as a scenario gives it (`{"kind": "red", option: value}`, units resolved to integers)
/// and lowered here to its engine parameters by `aqm::QdiscOptions::lower`, so the simulator
/// and the router lower the same options the same way; or a plugin
/// (`{"kind": "plugin", "module": "x.wasm", "options": {name: value}}`, [`PluginSpec`]),
/// loaded and its options checked here.
#[derive(Clone, Debug, Deserialize)]
#[serde(try_from = "BottleneckOptions")]
pub struct BottleneckConfig {
    /// Link rate C, bit/s.
    pub rate_bps: u64,
    /// Physical buffer beneath the discipline: at most this many packets...
    pub buffer_packets: Option<u64>,
    /// ...and at most this many bytes (a time-sized buffer arrives here converted at line rate).
    pub buffer_bytes: Option<u64>,
    /// The queue discipline: a built-in's engine parameters (see `aqm::QdiscConfig`) or a
    /// loaded plugin.
    pub aqm: DisciplineConfig,
    /// The discipline's delay target, ns, where it has one (for "mean delay / target").
    pub delay_target_ns: Option<u64>,
}

/// The bottleneck as the engine config's JSON states it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BottleneckOptions {
    rate_bps: u64,
    buffer_packets: Option<u64>,
    buffer_bytes: Option<u64>,
    /// The reference RTT of the options' `bdp` sizes and `K rtt` targets, ns.
    rtt_ref_ns: u64,
    /// `aqm::QdiscOptions`, or a [`PluginSpec`] under `"kind": "plugin"`.
    aqm: serde_json::Value,
}

/// Prefix of every error of lowering the discipline's options: `bottleneck.aqm.<key>: why`.
pub const AQM_ERROR_PREFIX: &str = "bottleneck.aqm";

impl TryFrom<BottleneckOptions> for BottleneckConfig {
    type Error = String;

    fn try_from(b: BottleneckOptions) -> Result<Self, String> {
        let link = aqm::Link {
            rate_bps: b.rate_bps,
            buffer_packets: b.buffer_packets,
            buffer_bytes: b.buffer_bytes,
            rtt_ref_ns: b.rtt_ref_ns,
        };
        let aqm_error = |key: &str, message: &str| {
            let dot = if key.is_empty() { "" } else { "." };
            format!("{AQM_ERROR_PREFIX}{dot}{key}: {message}")
        };
        let serde_error = |e: serde_json::Error| {
            let m = e.to_string();
            aqm_error("", m.split(" at line ").next().unwrap_or(&m))
        };
        let (aqm, delay_target_ns) = if b.aqm.get("kind").and_then(|k| k.as_str()) == Some("plugin")
        {
            let mut spec = b.aqm.clone();
            spec.as_object_mut().map(|o| o.remove("kind"));
            let spec: PluginSpec = serde_json::from_value(spec).map_err(serde_error)?;
            let p = PluginConfig::load(&spec).map_err(|e| aqm_error("", &e.to_string()))?;
            let target = p.delay_target_ns();
            (DisciplineConfig::Plugin(p), target)
        } else {
            let options: aqm::QdiscOptions = serde_json::from_value(b.aqm).map_err(serde_error)?;
            let lowered = options
                .lower(&link)
                .map_err(|e| aqm_error(&e.key, &e.message))?;
            (
                DisciplineConfig::Builtin(lowered.config),
                lowered.delay_target_ns,
            )
        };
        Ok(BottleneckConfig {
            rate_bps: b.rate_bps,
            buffer_packets: b.buffer_packets,
            buffer_bytes: b.buffer_bytes,
            aqm,
            delay_target_ns,
        })
    }
}

/// An engine config's deserialization error as one line: a refused discipline option as
/// lowering states it (`bottleneck.aqm.target: must be positive`), anything else (a front-end
/// bug: the front validates the scenario first) with serde's position.
pub fn json_error(e: serde_json::Error) -> String {
    let text = e.to_string();
    match text.rsplit_once(" at line ") {
        Some((message, _)) if message.starts_with(AQM_ERROR_PREFIX) => message.to_string(),
        _ => format!("engine config: {text}"),
    }
}

/// The end hosts' network stack, for every host of the run (`[host]` of a scenario): Linux
/// hosts, whose TCP sends autosized GSO skbs through a NIC, with or without their NICs'
/// offloads, and the knobs of both. The defaults ([`HostConfig::linux`]) are Linux's; each
/// says where it comes from. With `ideal` the hosts are ideal instead: every segment is its
/// own transmission, reaches the bottleneck the instant TCP sends it, and is received on its
/// own.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    /// Ideal hosts (ns-3-like): no TSO/GSO, no write queue, no deferral, no TSQ, no NIC, no
    /// timing noise, no GRO; every other field is unused. Requires `offloads` false.
    #[serde(default)]
    pub ideal: bool,
    /// The NICs' offloads (`ethtool -K tso gso gro`; on by default in Linux on every device
    /// that can). Off, the senders are unchanged: net/core/sock.c `sk_setup_caps` gives every
    /// TCP socket NETIF_F_GSO whatever the device supports (Linux 4.19+, "tcp: switch to GSO
    /// being always on"), so TCP still builds autosized GSO skbs and net/core/dev.c
    /// `validate_xmit_skb` segments them in software just before the driver, back to back.
    /// What changes is the receiver: without GRO every packet is its own skb.
    pub offloads: bool,
    /// Line rate of each sender's NIC, bit/s: a TSO burst leaves the host as back-to-back MTU
    /// packets at this rate.
    #[serde(default = "HostConfig::default_nic_rate")]
    pub nic_rate_bps: u64,
    /// Largest GSO/TSO burst, bytes of IP packet (`GSO_LEGACY_MAX_SIZE`, 65536, the default
    /// `gso_max_size` of a device, include/linux/netdevice.h).
    #[serde(default = "HostConfig::default_gso_max")]
    pub gso_max_bytes: u32,
    /// Fewest segments per TSO burst (`net.ipv4.tcp_min_tso_segs`, default 2,
    /// net/ipv4/tcp_ipv4.c `tcp_sk_init`); a CC with its own `min_tso_segs` (BBR) overrides it.
    #[serde(default = "HostConfig::default_min_tso_segs")]
    pub min_tso_segs: u32,
    /// TSO autosizing aims at pacing_rate >> this shift bytes per burst (`sk_pacing_shift`,
    /// 10, i.e. about 1 ms of data: net/core/sock.c `sock_init_data`; used by
    /// net/ipv4/tcp_output.c `tcp_tso_autosize`).
    #[serde(default = "HostConfig::default_pacing_shift")]
    pub pacing_shift: u32,
    /// Largest GRO packet, bytes of IP packet (`GRO_LEGACY_MAX_SIZE`, 65536, the default
    /// `gro_max_size`; net/core/gro.c `skb_gro_receive` stops merging at it). Used with
    /// `offloads`.
    #[serde(default = "HostConfig::default_gro_max")]
    pub gro_max_bytes: u32,
    /// Receiver interrupt moderation, ns: at most one interrupt (one NAPI poll, after which
    /// GRO flushes) per this interval (`ethtool -C rx-usecs`; 50 µs is i40e's default,
    /// `I40E_ITR_RX_DEF` = `I40E_ITR_20K`, drivers/net/ethernet/intel/i40e/i40e_txrx.h).
    #[serde(default = "HostConfig::default_rx_coalesce")]
    pub rx_coalesce_ns: u64,
    /// The sender host's timing noise, ns: each packet reaches the NIC after a delay drawn
    /// uniformly from [0, jitter_ns], in order (a packet never overtakes the one before it).
    /// A real host's softirqs, timers and interrupts never run at exact times; without such
    /// noise a simulated drop-tail queue locks onto the flows' phases (Floyd and Jacobson,
    /// "On Traffic Phase Effects in Packet-Switched Gateways", 1992; ns-2's TCP agents add a
    /// random `overhead_` per packet for this reason). The default matches the time the
    /// emulator's real hosts take from a data segment's arrival to the segment its ACK
    /// releases (46 µs median, IQR 29–60 µs; docs/model.md, "Host model").
    #[serde(default = "HostConfig::default_jitter")]
    pub jitter_ns: u64,
    /// Stalls of the end hosts' CPU, ns at a time: none by default (a Linux host with a core
    /// of its own runs its softirqs within microseconds). A host on a virtual machine does not:
    /// the hypervisor preempts its vCPU for milliseconds at a time (the emulator's testbed,
    /// docs/model.md "Host stalls"). Every end host stalls at once, as on the emulator, whose
    /// senders and receiver share one core: what reaches a host during a stall (a data packet
    /// at a receiver, an ACK at a sender) and every TCP timer due in it wait for its end, then
    /// run in order. The NICs keep sending what they hold.
    #[serde(default)]
    pub stall_ns: u64,
    /// Mean time between the starts of two stalls, ns (a Poisson process; 0 with no stalls).
    #[serde(default)]
    pub stall_every_ns: u64,
}

impl HostConfig {
    /// A 10 Gbit/s Ethernet NIC.
    pub const NIC_RATE_BPS: u64 = 10_000_000_000;
    pub const GSO_MAX_BYTES: u32 = 65_536;
    pub const MIN_TSO_SEGS: u32 = 2;
    pub const PACING_SHIFT: u32 = 10;
    pub const GRO_MAX_BYTES: u32 = 65_536;
    pub const RX_COALESCE_NS: u64 = 50_000;
    pub const JITTER_NS: u64 = 100_000;

    fn default_nic_rate() -> u64 {
        Self::NIC_RATE_BPS
    }
    fn default_gso_max() -> u32 {
        Self::GSO_MAX_BYTES
    }
    fn default_min_tso_segs() -> u32 {
        Self::MIN_TSO_SEGS
    }
    fn default_pacing_shift() -> u32 {
        Self::PACING_SHIFT
    }
    fn default_gro_max() -> u32 {
        Self::GRO_MAX_BYTES
    }
    fn default_rx_coalesce() -> u64 {
        Self::RX_COALESCE_NS
    }
    fn default_jitter() -> u64 {
        Self::JITTER_NS
    }

    /// A Linux host as it comes: offloads on, every knob at its default.
    pub fn linux() -> Self {
        HostConfig {
            ideal: false,
            offloads: true,
            nic_rate_bps: Self::NIC_RATE_BPS,
            gso_max_bytes: Self::GSO_MAX_BYTES,
            min_tso_segs: Self::MIN_TSO_SEGS,
            pacing_shift: Self::PACING_SHIFT,
            gro_max_bytes: Self::GRO_MAX_BYTES,
            rx_coalesce_ns: Self::RX_COALESCE_NS,
            jitter_ns: Self::JITTER_NS,
            stall_ns: 0,
            stall_every_ns: 0,
        }
    }

    /// The ideal host: every packet sent and received on its own, at exact times, no NIC.
    pub fn ideal() -> Self {
        HostConfig {
            ideal: true,
            offloads: false,
            ..Self::linux()
        }
    }

    /// Linux's receiver: the largest packet GRO hands TCP, bytes of IP packet. Without
    /// offloads, one packet of `mtu` bytes: with GRO off net/core/gro.c `dev_gro_receive`
    /// passes every skb up unmerged (include/linux/netdevice.h `netif_elide_gro`).
    pub fn gro_limit(&self, mtu: u32) -> u32 {
        if self.offloads {
            self.gro_max_bytes
        } else {
            mtu
        }
    }

    /// Range checks. `mtu` is the hosts' IP MTU: a burst or a GRO packet holds at least one.
    pub fn check(&self, mtu: u32) -> Result<(), String> {
        if self.ideal && self.offloads {
            return Err("host.ideal: ideal hosts have no offloads (offloads must be false)".into());
        }
        if self.nic_rate_bps == 0 {
            return Err("host.nic_rate: must be positive".into());
        }
        if self.gso_max_bytes < mtu {
            return Err(format!(
                "host.gso_max_size: {} B is less than one {mtu} B packet",
                self.gso_max_bytes
            ));
        }
        if self.gro_max_bytes < mtu {
            return Err(format!(
                "host.gro_max_size: {} B is less than one {mtu} B packet",
                self.gro_max_bytes
            ));
        }
        if self.min_tso_segs == 0 {
            return Err("host.min_tso_segs: must be at least 1".into());
        }
        if (self.stall_ns == 0) != (self.stall_every_ns == 0) {
            return Err("host.stall: a stall needs both its length (stall) and its mean interval (stall_every)".into());
        }
        if self.stall_ns > 0 && self.ideal {
            return Err("host.stall: ideal hosts never stall".into());
        }
        if self.stall_ns > 0 && self.stall_ns >= self.stall_every_ns {
            return Err(format!(
                "host.stall: {} ns is not shorter than stall_every ({} ns)",
                self.stall_ns, self.stall_every_ns
            ));
        }
        // sk_pacing_shift is a u8 in Linux; beyond 32 the burst target is below one byte for any rate.
        if self.pacing_shift > 32 {
            return Err(format!(
                "host.pacing_shift: {} must be at most 32",
                self.pacing_shift
            ));
        }
        Ok(())
    }
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
    pub fn check(&self, aqm: &DisciplineConfig, classes: &[&str]) -> Result<(), String> {
        if !aqm.reads_packet_values() {
            return Err("marker: only disciplines that read packet values use it (ppv, csaqm, a plugin with AQMLAB_READS_VALUES); remove the marker or use one of them".into());
        }
        if self.rate_window_ns == 0 {
            return Err("marker.rate_window: must be positive".into());
        }
        if !self.class_weights.is_empty() && self.class_weights.len() != classes.len() {
            return Err(format!(
                "marker.weights: {} weights for {} flow classes",
                self.class_weights.len(),
                classes.len()
            ));
        }
        if let Some(w) = self
            .class_weights
            .iter()
            .find(|w| !(w.is_finite() && **w > 0.0))
        {
            return Err(format!("marker.weights: {w} must be positive"));
        }
        if !self.class_curves.is_empty() && self.class_curves.len() != classes.len() {
            return Err(format!(
                "marker.curves: {} curves for {} flow classes",
                self.class_curves.len(),
                classes.len()
            ));
        }
        for (c, points) in self.class_curves.iter().enumerate() {
            if let Some(points) = points {
                Tvf::check_curve(points)
                    .map_err(|e| format!("marker.curves.{}: {e}", classes[c]))?;
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
        MarkerConfig {
            rate_window_ns: default_rate_window(),
            class_weights: Vec::new(),
            class_curves: Vec::new(),
        }
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
        if self.fct_bins_bytes.windows(2).any(|w| w[0] >= w[1])
            || self.fct_bins_bytes.first() == Some(&0)
        {
            return Err("measure.fct_bins: must be increasing positive sizes".into());
        }
        Ok(())
    }
}

/// The run-wide checks of the bottleneck's part, before any class is looked at.
pub fn check_run(
    duration_ns: u64,
    warmup_ns: u64,
    bottleneck: &BottleneckConfig,
    n_classes: usize,
) -> Result<(), String> {
    if duration_ns == 0 {
        return Err("duration: must be positive".into());
    }
    if warmup_ns >= duration_ns {
        return Err(format!(
            "warmup: must be shorter than duration ({} s ≥ {} s)",
            warmup_ns as f64 / 1e9,
            duration_ns as f64 / 1e9
        ));
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
    /// The hosts (the router forwards whatever they send; the emulator's orchestration sets
    /// their offloads).
    #[serde(default)]
    pub host: Option<HostConfig>,
}

impl LinkConfig {
    pub fn from_json(s: &str) -> Result<Self, String> {
        let cfg: LinkConfig = serde_json::from_str(s).map_err(json_error)?;
        cfg.check()?;
        Ok(cfg)
    }

    /// The range checks of `sim::EngineConfig::check` that concern the bottleneck, with the
    /// same messages.
    pub fn check(&self) -> Result<(), String> {
        check_run(
            self.duration_ns,
            self.warmup_ns,
            &self.bottleneck,
            self.classes.len(),
        )?;
        for (i, c) in self.classes.iter().enumerate() {
            check_rtt(i, c.rtt_ns)?;
        }
        if let Some(m) = &self.marker {
            let names: Vec<&str> = self.classes.iter().map(|c| c.name.as_str()).collect();
            m.check(&self.bottleneck.aqm, &names)?;
        }
        if let Some(h) = &self.host {
            h.check(aqm::options::PACKET_BYTES as u32)?;
        }
        self.measure.check()
    }

    /// The marker every flow gets, if the discipline reads packet values: the configured one,
    /// else equal sharing.
    pub fn marker(&self) -> Option<MarkerConfig> {
        self.bottleneck
            .aqm
            .reads_packet_values()
            .then(|| self.marker.clone().unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine(extra: &str, class_extra: &str) -> String {
        format!(
            r#"{{"name": "t", "seed": 1, "duration_ns": 1000000000, "warmup_ns": 0,
                "bottleneck": {{"rate_bps": 12000000, "buffer_packets": 100, "buffer_bytes": null, "aqm": {{"kind": "ppv"}}, "rtt_ref_ns": 10000000}},
                "classes": [{{"name": "a", "rtt_ns": 10000000, "cc": {{"name": "cubic"}}, "count": 3{class_extra}}}],
                "measure": {{"interval_ns": 100000000, "hist_bin_ns": 1000000}}{extra}}}"#
        )
    }

    #[test]
    fn the_traffic_keys_of_a_class_are_not_read_but_unknown_run_keys_are_refused() {
        let c = LinkConfig::from_json(&engine("", r#", "whatever": [1]"#)).unwrap();
        assert_eq!(
            (c.classes[0].name.as_str(), c.classes[0].rtt_ns),
            ("a", 10_000_000)
        );
        assert_eq!(c.measure.fct_bins_bytes, vec![100_000, 1_000_000]);
        // PPV without a marker section: equal sharing at the default window.
        assert_eq!(c.marker().unwrap().rate_window_ns, DEFAULT_RATE_WINDOW_NS);
        assert!(LinkConfig::from_json(&engine(r#", "extra": 1"#, ""))
            .unwrap_err()
            .contains("unknown field `extra`"));
    }

    #[test]
    fn each_check_names_its_key() {
        let err = |e: String| LinkConfig::from_json(&e).unwrap_err();
        assert_eq!(
            err(engine("", "").replace("\"duration_ns\": 1000000000", "\"duration_ns\": 0")),
            "duration: must be positive"
        );
        assert_eq!(
            err(engine("", "").replace("\"warmup_ns\": 0", "\"warmup_ns\": 1000000000")),
            "warmup: must be shorter than duration (1 s ≥ 1 s)"
        );
        assert_eq!(
            err(engine("", "").replace("12000000", "0")),
            "bottleneck.rate: must be positive"
        );
        assert_eq!(
            err(engine("", "").replace("10000000,", "0,")),
            "flows[0].rtt: must be positive"
        );
        assert_eq!(
            err(engine(r#", "marker": {"class_weights": [1, 2]}"#, "")),
            "marker.weights: 2 weights for 1 flow classes"
        );
        assert!(err(engine(
            r#", "marker": {"class_curves": [[[1e6, 10.0], [1e7, 20.0]]]}"#,
            ""
        ))
        .starts_with("marker.curves.a: "));
        assert_eq!(
            err(engine("", "").replace("\"hist_bin_ns\": 1000000", "\"hist_bin_ns\": 0")),
            "measure.hist_bin: must be positive"
        );
        let taildrop =
            engine(r#", "marker": {}"#, "").replace(r#""kind": "ppv""#, r#""kind": "taildrop""#);
        assert!(err(taildrop).starts_with("marker: only disciplines that read packet values"));
    }
}
