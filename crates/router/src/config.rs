//! `router.json`: the router's configuration (the router ⇄ orchestrator contract).
//!
//! ```json
//! { "tun": "aqtun", "engine": { ...the simulator's engine config... },
//!   "class_sources": ["10.77.1.0/24", "10.77.2.0/24"],
//!   "t0_monotonic_ns": 123456789, "output": "/abs/path/router.json" }
//! ```
//!
//! `engine` is the simulator's engine config, read as [`link::LinkConfig`]: the bottleneck's part
//! with the simulator's own types and range checks (unknown keys refused); of each class only
//! the name and base RTT, the rest being the traffic's business. Every error names the key it
//! is about.

use link::LinkConfig;
use serde_json::Value;

/// An IPv4 prefix `a.b.c.d/len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefix {
    pub addr: u32,
    pub len: u8,
}

impl Prefix {
    pub fn parse(s: &str) -> Result<Prefix, String> {
        let (a, l) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?} is not a.b.c.d/len"))?;
        let addr: std::net::Ipv4Addr = a
            .parse()
            .map_err(|_| format!("{a:?} is not an IPv4 address"))?;
        let len: u8 = l
            .parse()
            .map_err(|_| format!("{l:?} is not a prefix length"))?;
        if len > 32 {
            return Err(format!("prefix length {len} is above 32"));
        }
        let addr = u32::from(addr);
        if addr & !Self::mask(len) != 0 {
            return Err(format!("{s:?} has host bits set"));
        }
        Ok(Prefix { addr, len })
    }

    #[inline]
    fn mask(len: u8) -> u32 {
        if len == 0 {
            0
        } else {
            u32::MAX << (32 - len)
        }
    }

    #[inline]
    pub fn contains(&self, ip: u32) -> bool {
        ip & Self::mask(self.len) == self.addr
    }
}

#[derive(Clone, Debug)]
pub struct RouterConfig {
    /// TUN device name (≤ 15 bytes, Linux IFNAMSIZ − 1).
    pub tun: String,
    pub engine: LinkConfig,
    /// Source prefix of each class, in `engine.classes` order. The first matching prefix wins.
    pub class_sources: Vec<Prefix>,
    /// Classes whose ECT(0) packets the router turns into ECT(1) as they arrive: L4S senders
    /// whose kernel cannot send ECT(1) itself (a BPF CC cannot set the socket's codepoint
    /// after the handshake; docs/emulator.md, "TCP Prague").
    pub ect1_classes: Vec<u16>,
    /// CLOCK_MONOTONIC of scenario time 0; None = the router's start.
    pub t0_monotonic_ns: Option<u64>,
    /// Absolute path of the results file.
    pub output: std::path::PathBuf,
}

const KEYS: [&str; 6] = [
    "tun",
    "engine",
    "class_sources",
    "ect1_classes",
    "t0_monotonic_ns",
    "output",
];

impl RouterConfig {
    /// The hosts' offloads, if the engine config has hosts with them: the router then takes
    /// super-packets, spaces their segments at the senders' NIC rate, and writes runs back
    /// coalesced every `rx_coalesce` (crates/router/src/main.rs).
    pub fn offloads(&self) -> Option<&link::config::HostConfig> {
        self.engine.host.as_ref().filter(|h| h.offloads)
    }

    /// Parse and check `router.json`. Errors are one line starting with the key.
    pub fn from_json(text: &str) -> Result<RouterConfig, String> {
        let v: Value =
            serde_json::from_str(text).map_err(|e| format!("router config: not JSON: {e}"))?;
        let obj = v
            .as_object()
            .ok_or("router config: must be a JSON object")?;
        if let Some(k) = obj.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(format!(
                "{k}: unknown key (expected one of {})",
                KEYS.join(", ")
            ));
        }
        let tun = match obj.get("tun") {
            Some(Value::String(s))
                if !s.is_empty() && s.len() <= 15 && !s.contains(['/', ' ', '\0']) =>
            {
                s.clone()
            }
            Some(_) => return Err("tun: must be an interface name of 1 to 15 characters".into()),
            None => return Err("tun: missing".into()),
        };
        let engine = match obj.get("engine") {
            Some(e @ Value::Object(_)) => {
                LinkConfig::from_json(&e.to_string()).map_err(|m| {
                    // A refused discipline option is already a dotted key; the rest is a message.
                    if m.starts_with(link::config::AQM_ERROR_PREFIX) {
                        format!("engine.{m}")
                    } else {
                        format!("engine: {m}")
                    }
                })?
            }
            Some(_) => {
                return Err("engine: must be an object (the simulator's engine config)".into())
            }
            None => return Err("engine: missing".into()),
        };
        // The discipline must build (its options are checked there, as the simulator does).
        engine
            .bottleneck
            .aqm
            .build::<crate::packet::RouterPkt>(0)
            .map_err(|e| format!("engine.bottleneck.aqm{e}"))?;
        let class_sources = match obj.get("class_sources") {
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, s)| match s {
                    Value::String(s) => {
                        Prefix::parse(s).map_err(|e| format!("class_sources[{i}]: {e}"))
                    }
                    _ => Err(format!("class_sources[{i}]: must be a string a.b.c.d/len")),
                })
                .collect::<Result<Vec<_>, _>>()?,
            Some(_) => return Err("class_sources: must be a list of prefixes".into()),
            None => return Err("class_sources: missing".into()),
        };
        if class_sources.len() != engine.classes.len() {
            return Err(format!(
                "class_sources: {} prefixes for {} classes in engine.classes",
                class_sources.len(),
                engine.classes.len()
            ));
        }
        let ect1_classes = match obj.get("ect1_classes") {
            None => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, v)| match v.as_u64() {
                    Some(c) if (c as usize) < class_sources.len() => Ok(c as u16),
                    _ => Err(format!(
                        "ect1_classes[{i}]: must be a class index below {}",
                        class_sources.len()
                    )),
                })
                .collect::<Result<Vec<_>, _>>()?,
            Some(_) => return Err("ect1_classes: must be a list of class indices".into()),
        };
        let t0_monotonic_ns = match obj.get("t0_monotonic_ns") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .ok_or("t0_monotonic_ns: must be a non-negative integer (ns)")?,
            ),
        };
        let output = match obj.get("output") {
            Some(Value::String(s)) if s.starts_with('/') => std::path::PathBuf::from(s),
            Some(_) => return Err("output: must be an absolute path".into()),
            None => return Err("output: missing".into()),
        };
        if output.file_name().is_none() {
            return Err("output: must name a file".into());
        }
        Ok(RouterConfig {
            tun,
            engine,
            class_sources,
            ect1_classes,
            t0_monotonic_ns,
            output,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_match_by_mask() {
        let p = Prefix::parse("10.77.1.0/24").unwrap();
        assert!(p.contains(u32::from_be_bytes([10, 77, 1, 2])));
        assert!(!p.contains(u32::from_be_bytes([10, 77, 2, 2])));
        assert!(Prefix::parse("0.0.0.0/0").unwrap().contains(0xdead_beef));
        assert!(Prefix::parse("10.77.1.2/32")
            .unwrap()
            .contains(u32::from_be_bytes([10, 77, 1, 2])));
        assert!(Prefix::parse("10.77.1.1/24")
            .unwrap_err()
            .contains("host bits"));
        assert!(Prefix::parse("10.77.1.0/33").is_err());
        assert!(Prefix::parse("10.77.1.0").is_err());
    }

    pub(crate) fn engine_json(aqm: &str, rtts_ns: &[u64]) -> String {
        let classes: Vec<String> = rtts_ns
            .iter()
            .enumerate()
            .map(|(i, r)| {
                format!(
                    r#"{{"name": "c{i}", "cc": {{"name": "cubic"}}, "count": 1, "rtt_ns": {r}, "ecn": true,
                        "start": {{"kind": "fixed", "at_ns": 0}}, "size_bytes": null, "fq_pacing": false}}"#
                )
            })
            .collect();
        format!(
            r#"{{"name": "t", "seed": 1, "duration_ns": 1000000000, "warmup_ns": 0,
                "bottleneck": {{"rate_bps": 12000000, "buffer_packets": 100, "buffer_bytes": null, "aqm": {aqm}, "rtt_ref_ns": 10000000}},
                "classes": [{}], "measure": {{"interval_ns": 100000000, "hist_bin_ns": 1000000}}}}"#,
            classes.join(",")
        )
    }

    fn cfg(engine: &str, extra: &str) -> String {
        format!(
            r#"{{"tun": "aqtun", "engine": {engine}, "class_sources": ["10.77.1.0/24"], "output": "/tmp/r.json"{extra}}}"#
        )
    }

    #[test]
    fn a_good_config_and_each_bad_key_named() {
        let e = engine_json(r#"{"kind": "taildrop"}"#, &[10_000_000]);
        let c = RouterConfig::from_json(&cfg(&e, r#", "t0_monotonic_ns": 5"#)).unwrap();
        assert_eq!(c.tun, "aqtun");
        assert_eq!(c.t0_monotonic_ns, Some(5));
        assert_eq!(c.engine.classes[0].rtt_ns, 10_000_000);
        let err = |s: &str| RouterConfig::from_json(s).unwrap_err();
        assert!(err(&cfg(&e, r#", "tunn": 1"#)).starts_with("tunn:"));
        assert!(err(&cfg(&e, r#", "t0_monotonic_ns": -1"#)).starts_with("t0_monotonic_ns:"));
        assert_eq!(c.ect1_classes, Vec::<u16>::new());
        let c = RouterConfig::from_json(&cfg(&e, r#", "ect1_classes": [0]"#)).unwrap();
        assert_eq!(c.ect1_classes, vec![0]);
        assert_eq!(
            err(&cfg(&e, r#", "ect1_classes": [1]"#)),
            "ect1_classes[0]: must be a class index below 1"
        );
        assert!(err(&cfg(&e, "").replace("/tmp/r.json", "rel.json")).starts_with("output:"));
        assert!(err(&cfg(&e, "").replace("10.77.1.0/24", "10.77.1.0/99"))
            .starts_with("class_sources[0]:"));
        assert!(
            err(&cfg(&e, "").replace(r#"["10.77.1.0/24"]"#, "[]")).starts_with("class_sources:")
        );
        assert!(
            err(&cfg(&e, "").replace("aqtun", "a-very-long-interface-name")).starts_with("tun:")
        );
        let bad_engine = e.replace("\"rate_bps\": 12000000", "\"rate_bps\": 0");
        assert!(err(&cfg(&bad_engine, "")).starts_with("engine:"));
        let bad_aqm = engine_json(r#"{"kind": "step"}"#, &[10_000_000]);
        assert!(
            err(&cfg(&bad_aqm, ""))
                .starts_with("engine.bottleneck.aqm: give exactly one of target"),
            "{}",
            err(&cfg(&bad_aqm, ""))
        );
        assert!(err("[1]").contains("object"));
    }
}
