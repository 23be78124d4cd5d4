//! An ideal random dropper and marker for validation scenarios: each arriving packet is
//! dropped with probability `drop`; otherwise an ECN-capable packet is CE-marked with
//! probability `mark`; the rest is a FIFO. It models no real AQM. It exists to impose a known,
//! independent per-packet loss or marking probability p, the assumption of the analytic
//! oracles (Mathis et al. 1997 for Reno; RFC 9438 §5.1 for CUBIC; the DCTCP/PI2 "2/p" law of
//! De Schepper et al., CoNEXT 2016 §3).

use crate::fifo::{fifo_accessors, fifo_dequeue_and_reset, Fifo};
use crate::options::{About, Link, Lowered, Opt, OptionError, Range, ScenarioOptions, Unit};
use crate::{uniform01, DropReason, MarkReason, Nanos, Packet, Qdisc, Rng, Verdicts};

#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields)
)]
pub struct Params {
    /// Per-packet drop probability.
    #[cfg_attr(feature = "serde", serde(default))]
    pub drop: f64,
    /// Per-packet CE-marking probability for ECT packets that were not dropped.
    #[cfg_attr(feature = "serde", serde(default))]
    pub mark: f64,
}

impl Params {
    pub fn validate(&self) -> Result<(), OptionError> {
        if !(0.0..=1.0).contains(&self.drop) {
            return Err(OptionError::new(
                "drop",
                format!("{} is not a probability in [0, 1]", self.drop),
            ));
        }
        if !(0.0..=1.0).contains(&self.mark) {
            return Err(OptionError::new(
                "mark",
                format!("{} is not a probability in [0, 1]", self.mark),
            ));
        }
        Ok(())
    }
}

/// The scenario's options: the two probabilities.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields, default)
)]
pub struct Options {
    pub drop: f64,
    pub mark: f64,
}

impl ScenarioOptions for Options {
    type Config = Params;
    const ABOUT: About = About {
        kind: "bernoulli",
        summary: "ideal random dropper/marker for validation: drop with `drop`, else mark ECT with `mark`",
        source: "no real AQM: the independent per-packet loss of the analytic models (Mathis et al. 1997; RFC 9438 §5.1; De Schepper et al., CoNEXT 2016)",
        one_of: &[],
        reads_packet_values: false,
        options: &[
            Opt::new("drop", Unit::Float, Range::PROBABILITY, "probability that an arrival is dropped", "aqmlab (validation)"),
            Opt::new("mark", Unit::Float, Range::PROBABILITY, "probability that an ECN-capable arrival not dropped is CE-marked", "aqmlab (validation)"),
        ],
    };

    fn lower(&self, _link: &Link) -> Result<Lowered<Self::Config>, OptionError> {
        let params = Params {
            drop: self.drop,
            mark: self.mark,
        };
        params.validate()?;
        Ok(Lowered {
            config: params,
            delay_target_ns: None,
        })
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub dropped: u64,
    pub marked: u64,
}

#[derive(Clone, Debug)]
pub struct Bernoulli<P> {
    pub params: Params,
    pub stats: Stats,
    rng: Rng,
    queue: Fifo<P>,
}

impl<P: Packet> Bernoulli<P> {
    pub fn build(params: &Params, seed: u64) -> Result<Self, OptionError> {
        params.validate()?;
        Ok(Self::new(params.clone(), crate::rng_from_seed(seed)))
    }

    pub fn new(params: Params, rng: Rng) -> Self {
        Bernoulli {
            params,
            stats: Stats::default(),
            rng,
            queue: Fifo::default(),
        }
    }
}

impl<P: Packet> Qdisc<P> for Bernoulli<P> {
    fn enqueue(&mut self, mut pkt: P, now: Nanos, out: &mut impl Verdicts<P>) {
        if self.params.drop > 0.0 && uniform01(&mut self.rng) < self.params.drop {
            self.stats.dropped += 1;
            out.dropped(pkt, DropReason::Random, now);
            return;
        }
        if self.params.mark > 0.0
            && pkt.ecn().is_ect_or_ce()
            && uniform01(&mut self.rng) < self.params.mark
        {
            pkt.set_ce();
            self.stats.marked += 1;
            out.marked(&pkt, MarkReason::Random, now);
        }
        pkt.set_enqueue_ns(now);
        self.queue.push(pkt);
    }

    fifo_dequeue_and_reset!();
    fifo_accessors!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng_from_seed;
    use crate::testing::{pkt, Recorder};
    use crate::Ecn;

    #[test]
    fn empirical_rates_match_the_probabilities() {
        // n = 200 000 Bernoulli trials: the standard deviation of the drop fraction at
        // p = 0.01 is √(p(1−p)/n) ≈ 0.00022, so ±0.001 is more than 4 σ.
        let mut q = Bernoulli::new(
            Params {
                drop: 0.01,
                mark: 0.05,
            },
            rng_from_seed(3),
        );
        let mut r = Recorder::default();
        let n = 200_000;
        for i in 0..n {
            q.enqueue(pkt(i, 100, Ecn::Ect0), 0, &mut r);
            q.dequeue(0, &mut r);
        }
        let drop = r.drops.len() as f64 / n as f64;
        let mark = r.marks.len() as f64 / (n as f64 - r.drops.len() as f64);
        assert!((drop - 0.01).abs() < 0.001, "drop fraction {drop}");
        assert!((mark - 0.05).abs() < 0.002, "mark fraction {mark}");
    }

    #[test]
    fn not_ect_packets_are_never_marked() {
        let mut q = Bernoulli::new(
            Params {
                drop: 0.0,
                mark: 1.0,
            },
            rng_from_seed(1),
        );
        let mut r = Recorder::default();
        q.enqueue(pkt(0, 100, Ecn::NotEct), 0, &mut r);
        assert!(r.marks.is_empty() && r.drops.is_empty());
    }

    #[test]
    fn probabilities_outside_unit_interval_are_refused() {
        assert!(
            Params {
                drop: 1.5,
                mark: 0.0
            }
            .validate()
            .unwrap_err()
            .key == "drop"
        );
        assert!(
            Params {
                drop: 0.0,
                mark: -0.1
            }
            .validate()
            .unwrap_err()
            .key == "mark"
        );
    }
}
