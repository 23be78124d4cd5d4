//! The bottleneck's discipline, built-in or a user's plugin: what the simulator and the router
//! hold behind `aqm::Qdisc`. A built-in is an [`aqm::AnyQdisc`]; a plugin is a WebAssembly
//! module run by [`plugin::PluginQdisc`] (crates/plugin). One `match` per call keeps the
//! built-ins' static dispatch.

use std::collections::BTreeMap;
use std::path::PathBuf;

use aqm::{AnyQdisc, Nanos, Packet, PhysicalLimit, Qdisc, Verdicts};
use serde::Deserialize;

/// A plugin discipline as the engine config states it: the compiled module (a `.wasm` file;
/// the front compiles `.c` sources and caches them by content) and its option values by name,
/// in the units the module declares.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginSpec {
    pub module: PathBuf,
    #[serde(default)]
    pub options: BTreeMap<String, f64>,
}

/// A loaded plugin and the option values of this run.
#[derive(Clone, Debug)]
pub struct PluginConfig {
    pub plugin: plugin::Plugin,
    pub options: Vec<(String, f64)>,
}

impl PluginConfig {
    /// Load the module and check the option values against its declaration. Errors name the
    /// module and, for an option, the option.
    pub fn load(spec: &PluginSpec) -> Result<PluginConfig, plugin::PluginError> {
        let plugin = plugin::Plugin::from_file(&spec.module)?;
        let options: Vec<(String, f64)> =
            spec.options.iter().map(|(k, v)| (k.clone(), *v)).collect();
        plugin.option_values(&Self::by_name(&options))?;
        Ok(PluginConfig { plugin, options })
    }

    fn by_name(options: &[(String, f64)]) -> Vec<(&str, f64)> {
        options.iter().map(|(k, v)| (k.as_str(), *v)).collect()
    }

    /// The delay target the module declares (one of its options, in ns), for "mean delay /
    /// target".
    pub fn delay_target_ns(&self) -> Option<u64> {
        let info = self.plugin.info();
        let i = info.delay_target_option?;
        let values = self
            .plugin
            .option_values(&Self::by_name(&self.options))
            .ok()?;
        values
            .get(i)
            .filter(|v| v.is_finite() && **v >= 0.0)
            .map(|v| *v as u64)
    }
}

/// The engine's discipline of a run.
#[derive(Clone, Debug)]
pub enum DisciplineConfig {
    Builtin(aqm::QdiscConfig),
    Plugin(PluginConfig),
}

impl DisciplineConfig {
    /// Whether the discipline reads packet values, so the flows need a packet-value marker: a
    /// built-in's declaration, a plugin's `AQMLAB_READS_VALUES`.
    pub fn reads_packet_values(&self) -> bool {
        match self {
            DisciplineConfig::Builtin(c) => c.reads_packet_values(),
            DisciplineConfig::Plugin(p) => p.plugin.info().reads_values,
        }
    }

    /// Build the discipline of one run, its random stream seeded by `seed`. An error is what
    /// follows `bottleneck.aqm` in its message: `.burst: ...` for a built-in's option,
    /// `: plugin x.wasm: ...` for a plugin.
    pub fn build<P: Packet + 'static>(&self, seed: u64) -> Result<Discipline<P>, String> {
        match self {
            DisciplineConfig::Builtin(c) => c
                .build(seed)
                .map(Discipline::Builtin)
                .map_err(|e| format!(".{e}")),
            DisciplineConfig::Plugin(p) => p
                .plugin
                .build(&PluginConfig::by_name(&p.options), seed)
                .map(Discipline::Plugin)
                .map_err(|e| format!(": {e}")),
        }
    }
}

/// What the engine runs: a built-in's parameters (`{"kind": "red", ...}`), or a plugin's
/// module name and every option value, defaults included (`{"kind": "plugin", "module":
/// "x.wasm", "options": {name: value}}`).
impl serde::Serialize for DisciplineConfig {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            DisciplineConfig::Builtin(c) => c.serialize(s),
            DisciplineConfig::Plugin(p) => {
                let values = p
                    .plugin
                    .option_values(&PluginConfig::by_name(&p.options))
                    .map_err(serde::ser::Error::custom)?;
                let options: BTreeMap<&str, Option<f64>> = p
                    .plugin
                    .info()
                    .options
                    .iter()
                    .zip(values)
                    .map(|(o, v)| (o.name.as_str(), v.is_finite().then_some(v)))
                    .collect();
                serde_json::json!({"kind": "plugin", "module": p.plugin.name(), "options": options})
                    .serialize(s)
            }
        }
    }
}

/// The discipline of one run.
pub enum Discipline<P: 'static> {
    Builtin(AnyQdisc<P>),
    Plugin(plugin::PluginQdisc<P>),
}

impl<P: Packet + 'static> Discipline<P> {
    /// An arrival through the physical buffer beneath (`aqm::PhysicalLimit::offer`),
    /// dispatched once, as `AnyQdisc::offer`.
    #[inline]
    pub fn offer(&mut self, limit: &PhysicalLimit, pkt: P, now: Nanos, out: &mut impl Verdicts<P>) {
        match self {
            Discipline::Builtin(q) => q.offer(limit, pkt, now, out),
            Discipline::Plugin(q) => limit.offer(q, pkt, now, out),
        }
    }

    /// A plugin's first failed call (a trap, a runaway, a broken ABI rule): the run must end
    /// with it. Built-ins never fail.
    #[inline]
    pub fn error(&self) -> Option<&plugin::PluginError> {
        match self {
            Discipline::Builtin(_) => None,
            Discipline::Plugin(q) => q.error(),
        }
    }
}

macro_rules! forward {
    ($self:ident, $q:ident => $e:expr) => {
        match $self {
            Discipline::Builtin($q) => $e,
            Discipline::Plugin($q) => $e,
        }
    };
}

impl<P: Packet + 'static> Qdisc<P> for Discipline<P> {
    #[inline]
    fn enqueue(&mut self, pkt: P, now: Nanos, out: &mut impl Verdicts<P>) {
        forward!(self, q => q.enqueue(pkt, now, out))
    }
    #[inline]
    fn dequeue(&mut self, now: Nanos, out: &mut impl Verdicts<P>) -> Option<P> {
        forward!(self, q => q.dequeue(now, out))
    }
    #[inline]
    fn len(&self) -> usize {
        forward!(self, q => q.len())
    }
    #[inline]
    fn backlog_bytes(&self) -> u64 {
        forward!(self, q => q.backlog_bytes())
    }
    #[inline]
    fn is_empty(&self) -> bool {
        forward!(self, q => q.is_empty())
    }
    #[inline]
    fn head_enqueue_ns(&self) -> Option<Nanos> {
        forward!(self, q => q.head_enqueue_ns())
    }
    fn reset(&mut self) -> Vec<P> {
        forward!(self, q => q.reset())
    }
    #[inline]
    fn owns_limit(&self) -> bool {
        forward!(self, q => q.owns_limit())
    }
}
