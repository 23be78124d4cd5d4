//! Every discipline behind one type, from one registry line each (`disciplines!`):
//! `QdiscConfig` (the engine's parameters, deserialized with unknown keys refused),
//! `QdiscOptions` (what a scenario sets, [`crate::options`]) and `AnyQdisc` (static dispatch —
//! a match per call, no `Box<dyn>`).

use crate::options::{About, Link, Lowered, OptionError, ScenarioOptions};
use crate::{
    bernoulli, choke, ckcd, codel, csaqm, dualpi2, fq_codel, fq_pie, gsp, pi2, pie, ppv, red, step,
    taildrop, Nanos, Packet, PhysicalLimit, Qdisc, Verdicts,
};

/// One line per discipline: `Variant("kind") => module::Qdisc(EngineParams)`. The module
/// provides `Options` (implementing [`ScenarioOptions`]) and `Qdisc::build(&EngineParams,
/// seed)`.
macro_rules! disciplines {
    ($($variant:ident($kind:literal) => $module:ident :: $qdisc:ident($config:ty);)*) => {
        /// The engine's parameters of a discipline, `{"kind": "red", ...}`.
        #[derive(Clone, Debug, PartialEq)]
        #[cfg_attr(feature = "serde", derive(serde::Deserialize, serde::Serialize), serde(tag = "kind"))]
        pub enum QdiscConfig {
            $(#[cfg_attr(feature = "serde", serde(rename = $kind))] $variant($config),)*
        }

        /// A scenario's options of a discipline, `{"kind": "red", ...}`, units resolved.
        #[derive(Clone, Debug, PartialEq)]
        #[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(tag = "kind"))]
        pub enum QdiscOptions {
            $(#[cfg_attr(feature = "serde", serde(rename = $kind))] $variant($module::Options),)*
        }

        pub enum AnyQdisc<P> {
            $($variant($module::$qdisc<P>),)*
        }

        impl QdiscConfig {
            /// The discipline kinds this build provides.
            pub fn names() -> &'static [&'static str] {
                &[$($kind),*]
            }

            /// Whether the discipline reads packet values, so the flows need a packet-value marker.
            pub fn reads_packet_values(&self) -> bool {
                match self {
                    $(QdiscConfig::$variant(_) => <$module::Options as ScenarioOptions>::ABOUT.reads_packet_values,)*
                }
            }

            /// Build the discipline; `seed` seeds its random stream. Errors start with the
            /// option name ("burst: ...").
            pub fn build<P: Packet>(&self, seed: u64) -> Result<AnyQdisc<P>, String> {
                Ok(match self {
                    $(QdiscConfig::$variant(c) => AnyQdisc::$variant($module::$qdisc::build(c, seed)?),)*
                })
            }
        }

        impl QdiscOptions {
            /// Every discipline's description, in registry order.
            pub fn about() -> &'static [About] {
                &[$(<$module::Options as ScenarioOptions>::ABOUT),*]
            }

            /// The engine's parameters for these options on `link` (errors name the scenario key).
            pub fn lower(&self, link: &Link) -> Result<Lowered<QdiscConfig>, OptionError> {
                match self {
                    $(QdiscOptions::$variant(o) => {
                        let l = o.lower(link)?;
                        Ok(Lowered { config: QdiscConfig::$variant(l.config), delay_target_ns: l.delay_target_ns })
                    })*
                }
            }

            /// Every discipline's description with its defaults in scenario terms, as JSON
            /// (what `aqmlab._native.describe_aqms` returns).
            #[cfg(feature = "serde")]
            pub fn describe() -> serde_json::Value {
                serde_json::Value::Array(vec![$(crate::options::describe(
                    &<$module::Options as ScenarioOptions>::ABOUT,
                    serde_json::to_value(<$module::Options>::default()).expect("Options serialize"),
                )),*])
            }
        }

        impl<P: Packet> AnyQdisc<P> {
            /// An arrival through the physical buffer beneath ([`PhysicalLimit::offer`]),
            /// dispatched once: inside, the discipline's `owns_limit`, `len` and
            /// `backlog_bytes` are its own, known statically, where offering to the `AnyQdisc`
            /// itself matches on the kind four times per packet.
            #[inline]
            pub fn offer(&mut self, limit: &PhysicalLimit, pkt: P, now: Nanos, out: &mut impl Verdicts<P>) {
                match self {
                    $(AnyQdisc::$variant(q) => limit.offer(q, pkt, now, out),)*
                }
            }
        }

        impl<P: Packet> Qdisc<P> for AnyQdisc<P> {
            #[inline]
            fn enqueue(&mut self, pkt: P, now: Nanos, out: &mut impl Verdicts<P>) {
                match self {
                    $(AnyQdisc::$variant(q) => q.enqueue(pkt, now, out),)*
                }
            }
            #[inline]
            fn dequeue(&mut self, now: Nanos, out: &mut impl Verdicts<P>) -> Option<P> {
                match self {
                    $(AnyQdisc::$variant(q) => q.dequeue(now, out),)*
                }
            }
            #[inline]
            fn len(&self) -> usize {
                match self {
                    $(AnyQdisc::$variant(q) => q.len(),)*
                }
            }
            #[inline]
            fn backlog_bytes(&self) -> u64 {
                match self {
                    $(AnyQdisc::$variant(q) => q.backlog_bytes(),)*
                }
            }
            fn head_enqueue_ns(&self) -> Option<Nanos> {
                match self {
                    $(AnyQdisc::$variant(q) => q.head_enqueue_ns(),)*
                }
            }
            fn reset(&mut self) -> Vec<P> {
                match self {
                    $(AnyQdisc::$variant(q) => q.reset(),)*
                }
            }
            fn owns_limit(&self) -> bool {
                match self {
                    $(AnyQdisc::$variant(q) => q.owns_limit(),)*
                }
            }
        }
    };
}

disciplines! {
    Taildrop("taildrop") => taildrop::TailDrop(taildrop::Params);
    Red("red") => red::Red(red::TcOptions);
    Step("step") => step::Step(step::Params);
    Pie("pie") => pie::Pie(pie::Params);
    FqPie("fq_pie") => fq_pie::FqPie(fq_pie::Params);
    Pi2("pi2") => pi2::Pi2(pi2::Params);
    Dualpi2("dualpi2") => dualpi2::DualPi2(dualpi2::Params);
    Codel("codel") => codel::Codel(codel::Params);
    FqCodel("fq_codel") => fq_codel::FqCodel(fq_codel::Params);
    Choke("choke") => choke::Choke(choke::TcOptions);
    Ckcd("ckcd") => ckcd::Ckcd(ckcd::Params);
    Gsp("gsp") => gsp::Gsp(gsp::Params);
    Ppv("ppv") => ppv::Ppv(ppv::Params);
    Csaqm("csaqm") => csaqm::Csaqm(csaqm::Params);
    Bernoulli("bernoulli") => bernoulli::Bernoulli(bernoulli::Params);
}

#[cfg(all(test, feature = "serde"))]
mod tests {
    use super::*;

    #[test]
    fn unknown_options_are_refused_inside_a_tagged_variant() {
        let ok: QdiscConfig =
            serde_json::from_str(r#"{"kind": "step", "threshold_bytes": 1000}"#).unwrap();
        assert_eq!(
            ok,
            QdiscConfig::Step(step::Params {
                threshold_bytes: Some(1000),
                threshold_packets: None
            })
        );
        let err =
            serde_json::from_str::<QdiscConfig>(r#"{"kind": "step", "treshold_bytes": 1000}"#)
                .unwrap_err();
        assert!(err.to_string().contains("treshold_bytes"), "{err}");
        let err = serde_json::from_str::<QdiscConfig>(
            r#"{"kind": "red", "limit": 1, "avpkt": 1, "burts": 3}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("burts"), "{err}");
        assert!(serde_json::from_str::<QdiscConfig>(r#"{"kind": "ppvv"}"#).is_err());
        // CSAQM's interval defaults to Fejes et al. 2020's 5 ms; its byte target is required.
        let c: QdiscConfig =
            serde_json::from_str(r#"{"kind": "csaqm", "target_bytes": 312500}"#).unwrap();
        assert_eq!(
            c,
            QdiscConfig::Csaqm(csaqm::Params {
                target_bytes: 312_500,
                interval_ns: 5_000_000
            })
        );
        assert!(serde_json::from_str::<QdiscConfig>(r#"{"kind": "csaqm"}"#).is_err());
        assert!(c.reads_packet_values());
        let p: QdiscConfig =
            serde_json::from_str(r#"{"kind": "ppv", "limit_bytes": 1000}"#).unwrap();
        assert!(
            p.reads_packet_values() && p.build::<crate::testing::TestPkt>(0).unwrap().owns_limit()
        );
        assert!(serde_json::from_str::<QdiscConfig>(r#"{"kind": "ppv"}"#)
            .unwrap()
            .build::<crate::testing::TestPkt>(0)
            .is_err());
    }
}

#[cfg(all(test, feature = "serde"))]
mod option_tests {
    use super::*;
    use crate::options::Link;

    fn lower(options: &str, link: &Link) -> Result<Lowered<QdiscConfig>, OptionError> {
        serde_json::from_str::<QdiscOptions>(options)
            .unwrap()
            .lower(link)
    }

    const LINK: Link = Link {
        rate_bps: 100_000_000,
        buffer_packets: Some(80),
        buffer_bytes: None,
        rtt_ref_ns: 20_000_000,
    };

    #[test]
    fn every_discipline_is_described_with_the_fields_of_its_options() {
        // `describe` asserts that the description and `Options` name the same fields.
        let d = QdiscOptions::describe();
        let kinds: Vec<&str> = d
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, QdiscConfig::names());
        let pi2 = &d[5];
        assert_eq!(pi2["kind"], "pi2");
        let opt = |name: &str| {
            pi2["options"]
                .as_array()
                .unwrap()
                .iter()
                .find(|o| o["name"] == name)
                .unwrap()
                .clone()
        };
        assert_eq!(opt("alpha")["default"], 0.16015625);
        assert_eq!(opt("beta")["default"], 3.19921875);
        assert_eq!(opt("target")["default"], "15ms");
        assert_eq!(opt("limit")["default"], "10000pkt");
        assert_eq!(
            opt("ecn_mask")["choices"],
            serde_json::json!(["l4s_ect", "any_ect"])
        );
        assert_eq!(opt("k")["range_text"], "≥ 1");
        let csaqm = &d[13];
        assert_eq!(csaqm["options"][0]["required"], true);
        assert_eq!(d[2]["one_of"], serde_json::json!([["target", "threshold"]]));
    }

    #[test]
    fn default_options_lower_to_the_linux_defaults() {
        let pi2 = lower(r#"{"kind": "pi2"}"#, &LINK).unwrap();
        assert_eq!(pi2.config, QdiscConfig::Pi2(pi2::Params::default()));
        assert_eq!(pi2.delay_target_ns, Some(15_000_000));
        assert_eq!(
            lower(r#"{"kind": "dualpi2"}"#, &LINK).unwrap().config,
            QdiscConfig::Dualpi2(dualpi2::Params::default())
        );
        assert_eq!(
            lower(r#"{"kind": "pie"}"#, &LINK).unwrap().config,
            QdiscConfig::Pie(pie::Params::default())
        );
        assert_eq!(
            lower(r#"{"kind": "codel"}"#, &LINK).unwrap().config,
            QdiscConfig::Codel(codel::Params::default())
        );
        let big = Link {
            buffer_packets: None,
            buffer_bytes: Some(1 << 40),
            ..LINK
        };
        assert_eq!(
            lower(r#"{"kind": "fq_codel"}"#, &big).unwrap().config,
            QdiscConfig::FqCodel(fq_codel::Params::default())
        );
        assert_eq!(
            lower(r#"{"kind": "fq_pie"}"#, &big).unwrap().config,
            QdiscConfig::FqPie(fq_pie::Params::default())
        );
    }

    #[test]
    fn link_derivations() {
        // STEP: 850 µs at 1 Gbit/s = 106 250 B.
        let gig = Link {
            rate_bps: 1_000_000_000,
            buffer_packets: None,
            buffer_bytes: Some(62_500_000),
            rtt_ref_ns: 5_000_000,
        };
        let step = lower(r#"{"kind": "step", "target": 850000}"#, &gig).unwrap();
        assert_eq!(
            step.config,
            QdiscConfig::Step(step::Params {
                threshold_bytes: Some(106_250),
                threshold_packets: None
            })
        );
        assert_eq!(step.delay_target_ns, Some(850_000));
        // CHOKe: limit = the 80-packet buffer, bandwidth = the link.
        let choke = lower(r#"{"kind": "choke"}"#, &LINK).unwrap().config;
        assert_eq!(
            choke,
            QdiscConfig::Choke(choke::TcOptions {
                limit: Some(80),
                bandwidth: Some(100_000_000),
                ..Default::default()
            })
        );
        // CKCD as Liu et al.: BDP = 100e6 × 0.02 / 8 / 1500 = 166.7 packets > the 80-packet
        // buffer, so q_min = 80/3 and q_max = 80; d_max = 80 × 1500 × 8 / 100e6 = 9.6 ms.
        let QdiscConfig::Ckcd(c) = lower(r#"{"kind": "ckcd"}"#, &LINK).unwrap().config else {
            panic!()
        };
        assert_eq!(
            (c.q_min, c.q_max, c.d_max_ns),
            (80.0 / 3.0, 80.0, 9_600_000)
        );
        // GSP: τ = 5·interval; the buffer handed to it.
        let QdiscConfig::Gsp(g) = lower(r#"{"kind": "gsp", "threshold": {"bytes": 46875}}"#, &LINK)
            .unwrap()
            .config
        else {
            panic!()
        };
        assert_eq!(
            (g.threshold_bytes, g.tau_ns, g.limit_packets),
            (46_875, 1_000_000_000, Some(80))
        );
        // FQ-CoDel's packet limit is capped by the buffer.
        let QdiscConfig::FqCodel(f) = lower(r#"{"kind": "fq_codel"}"#, &LINK).unwrap().config
        else {
            panic!()
        };
        assert_eq!(f.limit, 80);
    }

    #[test]
    fn errors_name_the_scenario_key() {
        let e = |s: &str| lower(s, &LINK).unwrap_err();
        assert_eq!(e(r#"{"kind": "step"}"#).key, "");
        assert_eq!(
            e(r#"{"kind": "csaqm"}"#),
            OptionError::new("target", "required key is missing")
        );
        assert_eq!(e(r#"{"kind": "red", "min": {"bytes": 30000}, "max": {"bytes": 20000}, "avpkt": {"bytes": 1500}}"#).key, "max");
        assert_eq!(e(r#"{"kind": "choke", "min": 30, "max": 20}"#).key, "min");
        assert_eq!(
            e(r#"{"kind": "pie", "alpha": 33}"#).to_string(),
            "alpha: 33 must be 0..=32 (units of 1/16 Hz, as tc)"
        );
        assert!(serde_json::from_str::<QdiscOptions>(r#"{"kind": "pie", "alhpa": 3}"#).is_err());
    }
}
