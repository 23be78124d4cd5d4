//! Every discipline behind one type: `QdiscConfig` (what a scenario names, deserialized with
//! unknown keys refused) and `AnyQdisc` (static dispatch — a match per call, no `Box<dyn>`).

use crate::{bernoulli, choke, ckcd, codel, csaqm, dualpi2, fq_codel, fq_pie, gsp, pi2, pie, ppv, red, step, taildrop, Nanos, Packet, PhysicalLimit, Qdisc, Verdicts};

#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(tag = "kind", rename_all = "snake_case"))]
pub enum QdiscConfig {
    Taildrop(taildrop::Params),
    Red(red::TcOptions),
    Step(step::Params),
    Bernoulli(bernoulli::Params),
    Choke(choke::TcOptions),
    Gsp(gsp::Params),
    Ckcd(ckcd::Params),
    Codel(codel::Params),
    FqCodel(fq_codel::Params),
    Pie(pie::Params),
    Pi2(pi2::Params),
    FqPie(fq_pie::Params),
    Dualpi2(dualpi2::Params),
    Ppv(ppv::Params),
    Csaqm(csaqm::Params),
}

pub enum AnyQdisc<P> {
    Taildrop(taildrop::TailDrop<P>),
    Red(red::Red<P>),
    Step(step::Step<P>),
    Bernoulli(bernoulli::Bernoulli<P>),
    Choke(choke::Choke<P>),
    Gsp(gsp::Gsp<P>),
    Ckcd(ckcd::Ckcd<P>),
    Codel(codel::Codel<P>),
    FqCodel(fq_codel::FqCodel<P>),
    Pie(pie::Pie<P>),
    Pi2(pi2::Pi2<P>),
    FqPie(fq_pie::FqPie<P>),
    Dualpi2(dualpi2::DualPi2<P>),
    Ppv(ppv::Ppv<P>),
    Csaqm(csaqm::Csaqm<P>),
}

impl QdiscConfig {
    /// The discipline kinds this build provides.
    pub fn names() -> &'static [&'static str] {
        &["taildrop", "red", "step", "pie", "fq_pie", "pi2", "dualpi2", "codel", "fq_codel", "choke", "ckcd", "gsp", "ppv", "csaqm", "bernoulli"]
    }

    /// Whether the discipline reads packet values, so the flows need a packet-value marker.
    pub fn reads_packet_values(&self) -> bool {
        matches!(self, QdiscConfig::Ppv(_) | QdiscConfig::Csaqm(_))
    }

    /// Build the discipline; `seed` seeds its random stream. Errors start with the option
    /// name ("burst: ...").
    pub fn build<P: Packet>(&self, seed: u64) -> Result<AnyQdisc<P>, String> {
        Ok(match self {
            QdiscConfig::Taildrop(p) => AnyQdisc::Taildrop(taildrop::TailDrop::new(p.clone())),
            QdiscConfig::Red(o) => AnyQdisc::Red(red::Red::new(o.derive()?, crate::rng_from_seed(seed))),
            QdiscConfig::Step(p) => AnyQdisc::Step(step::Step::new(p.threshold()?)),
            QdiscConfig::Bernoulli(p) => {
                p.validate()?;
                AnyQdisc::Bernoulli(bernoulli::Bernoulli::new(p.clone(), crate::rng_from_seed(seed)))
            }
            QdiscConfig::Choke(o) => AnyQdisc::Choke(choke::Choke::new(o.derive()?, crate::rng_from_seed(seed))),
            QdiscConfig::Gsp(p) => {
                p.validate()?;
                AnyQdisc::Gsp(gsp::Gsp::new(p.clone()))
            }
            QdiscConfig::Codel(p) => {
                p.validate()?;
                AnyQdisc::Codel(codel::Codel::new(p.clone()))
            }
            QdiscConfig::Pie(p) => {
                p.validate()?;
                AnyQdisc::Pie(pie::Pie::new(p.clone(), crate::rng_from_seed(seed)))
            }
            QdiscConfig::Pi2(p) => {
                p.validate()?;
                AnyQdisc::Pi2(pi2::Pi2::new(p.clone(), crate::rng_from_seed(seed)))
            }
            QdiscConfig::FqPie(p) => {
                p.validate()?;
                AnyQdisc::FqPie(fq_pie::FqPie::new(p.clone(), seed, crate::rng_from_seed(seed ^ 0xF0)))
            }
            QdiscConfig::Dualpi2(p) => {
                p.validate()?;
                AnyQdisc::Dualpi2(dualpi2::DualPi2::new(p.clone(), crate::rng_from_seed(seed)))
            }
            QdiscConfig::FqCodel(p) => {
                p.validate()?;
                AnyQdisc::FqCodel(fq_codel::FqCodel::new(p.clone(), seed))
            }
            QdiscConfig::Ckcd(p) => {
                p.validate()?;
                AnyQdisc::Ckcd(ckcd::Ckcd::new(p.clone(), crate::rng_from_seed(seed)))
            }
            QdiscConfig::Ppv(p) => {
                p.validate()?;
                AnyQdisc::Ppv(ppv::Ppv::new(p.clone()))
            }
            QdiscConfig::Csaqm(p) => {
                p.validate()?;
                AnyQdisc::Csaqm(csaqm::Csaqm::new(p.clone()))
            }
        })
    }
}

macro_rules! dispatch {
    ($self:ident, $q:ident => $e:expr) => {
        match $self {
            AnyQdisc::Taildrop($q) => $e,
            AnyQdisc::Red($q) => $e,
            AnyQdisc::Step($q) => $e,
            AnyQdisc::Bernoulli($q) => $e,
            AnyQdisc::Choke($q) => $e,
            AnyQdisc::Gsp($q) => $e,
            AnyQdisc::Ckcd($q) => $e,
            AnyQdisc::Codel($q) => $e,
            AnyQdisc::FqCodel($q) => $e,
            AnyQdisc::Pie($q) => $e,
            AnyQdisc::Pi2($q) => $e,
            AnyQdisc::FqPie($q) => $e,
            AnyQdisc::Dualpi2($q) => $e,
            AnyQdisc::Ppv($q) => $e,
            AnyQdisc::Csaqm($q) => $e,
        }
    };
}

impl<P: Packet> AnyQdisc<P> {
    /// An arrival through the physical buffer beneath ([`PhysicalLimit::offer`]), dispatched
    /// once: inside, the discipline's `owns_limit`, `len` and `backlog_bytes` are its own,
    /// known statically, where offering to the `AnyQdisc` itself matches on the kind four times
    /// per packet.
    #[inline]
    pub fn offer(&mut self, limit: &PhysicalLimit, pkt: P, now: Nanos, out: &mut impl Verdicts<P>) {
        dispatch!(self, q => limit.offer(q, pkt, now, out))
    }
}

impl<P: Packet> Qdisc<P> for AnyQdisc<P> {
    #[inline]
    fn enqueue(&mut self, pkt: P, now: Nanos, out: &mut impl Verdicts<P>) {
        dispatch!(self, q => q.enqueue(pkt, now, out))
    }
    #[inline]
    fn dequeue(&mut self, now: Nanos, out: &mut impl Verdicts<P>) -> Option<P> {
        dispatch!(self, q => q.dequeue(now, out))
    }
    #[inline]
    fn len(&self) -> usize {
        dispatch!(self, q => q.len())
    }
    #[inline]
    fn backlog_bytes(&self) -> u64 {
        dispatch!(self, q => q.backlog_bytes())
    }
    fn head_enqueue_ns(&self) -> Option<Nanos> {
        dispatch!(self, q => q.head_enqueue_ns())
    }
    fn reset(&mut self) -> Vec<P> {
        dispatch!(self, q => q.reset())
    }
    fn owns_limit(&self) -> bool {
        dispatch!(self, q => q.owns_limit())
    }
}

#[cfg(all(test, feature = "serde"))]
mod tests {
    use super::*;

    #[test]
    fn unknown_options_are_refused_inside_a_tagged_variant() {
        let ok: QdiscConfig = serde_json::from_str(r#"{"kind": "step", "threshold_bytes": 1000}"#).unwrap();
        assert_eq!(ok, QdiscConfig::Step(step::Params { threshold_bytes: Some(1000), threshold_packets: None }));
        let err = serde_json::from_str::<QdiscConfig>(r#"{"kind": "step", "treshold_bytes": 1000}"#).unwrap_err();
        assert!(err.to_string().contains("treshold_bytes"), "{err}");
        let err = serde_json::from_str::<QdiscConfig>(r#"{"kind": "red", "limit": 1, "avpkt": 1, "burts": 3}"#).unwrap_err();
        assert!(err.to_string().contains("burts"), "{err}");
        assert!(serde_json::from_str::<QdiscConfig>(r#"{"kind": "ppvv"}"#).is_err());
        // CSAQM's interval defaults to seed 003's 5 ms; its byte target is required.
        let c: QdiscConfig = serde_json::from_str(r#"{"kind": "csaqm", "target_bytes": 312500}"#).unwrap();
        assert_eq!(c, QdiscConfig::Csaqm(csaqm::Params { target_bytes: 312_500, interval_ns: 5_000_000 }));
        assert!(serde_json::from_str::<QdiscConfig>(r#"{"kind": "csaqm"}"#).is_err());
        assert!(c.reads_packet_values());
        let p: QdiscConfig = serde_json::from_str(r#"{"kind": "ppv", "limit_bytes": 1000}"#).unwrap();
        assert!(p.reads_packet_values() && p.build::<crate::testing::TestPkt>(0).unwrap().owns_limit());
        assert!(serde_json::from_str::<QdiscConfig>(r#"{"kind": "ppv"}"#).unwrap().build::<crate::testing::TestPkt>(0).is_err());
    }
}
