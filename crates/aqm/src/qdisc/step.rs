//! STEP: the DCTCP reference marker.
//!
//! Alizadeh et al., "Data Center TCP (DCTCP)", SIGCOMM 2010, §3.1: mark the arriving packet
//! with CE if the *instantaneous* queue exceeds K (RFC 8257 §3.1 says the same). Fejes et al. 2020 §III:
//! "STEP AQM marks all incoming packets when the queue size is above L_target = D_target·C".
//! Choices the sources leave open (aqmlab's choices): the comparison is strict (`>`, "above"), on
//! the backlog *before* the arrival is added; a Not-ECT packet that would be marked is dropped
//! (as RED with `ecn` and Linux's dualpi2 step do), counted as `Forced`. No averaging, no
//! randomness. Unlike a tc RED configured as a step (which cannot set W = 1, so it is an EWMA
//! with w = 1/2), this is the exact instantaneous rule.

use crate::fifo::{fifo_accessors, fifo_dequeue_and_reset, Fifo};
use crate::options::{About, Link, Lowered, Opt, OptionError, Range, ScenarioOptions, Size, Unit};
use crate::{DropReason, MarkReason, Nanos, Packet, Qdisc, Verdicts};

/// The marking threshold on the instantaneous queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Threshold {
    Bytes(u64),
    Packets(u64),
}

#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields)
)]
pub struct Params {
    /// K in bytes (Fejes et al. 2020: K·RTT·C). Exactly one of the two is set.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub threshold_bytes: Option<u64>,
    /// K in packets (the DCTCP paper's unit: 20 at 1 Gbps, 65 at 10 Gbps).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub threshold_packets: Option<u64>,
}

impl Params {
    pub fn threshold(&self) -> Result<Threshold, OptionError> {
        match (self.threshold_bytes, self.threshold_packets) {
            (Some(b), None) => Ok(Threshold::Bytes(b)),
            (None, Some(p)) => Ok(Threshold::Packets(p)),
            (Some(_), Some(_)) => Err(OptionError::new(
                "threshold",
                "give it in bytes or in packets, not both",
            )),
            (None, None) => Err(OptionError::new(
                "threshold",
                "missing (a delay target, bytes or packets)",
            )),
        }
    }
}

/// The scenario's options: the threshold as a delay at line rate or as a size.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields, default)
)]
pub struct Options {
    /// ns.
    pub target: Option<Nanos>,
    pub threshold: Option<Size>,
}

impl ScenarioOptions for Options {
    type Config = Params;
    const ABOUT: About = About {
        kind: "step",
        summary: "DCTCP's marker: CE-mark (drop if Not-ECT) every arrival while the instantaneous queue exceeds the threshold",
        source: "Alizadeh et al., DCTCP, SIGCOMM 2010 §3.1; RFC 8257 §3.1; Fejes et al. 2020 §III",
        one_of: &[&["target", "threshold"]],
        reads_packet_values: false,
        options: &[
            Opt::new("target", Unit::DelayTarget, Range::POSITIVE, "threshold as a queueing delay: target × link rate bytes (also the summary's delay target)", "Fejes et al. 2020 §III: L_target = D_target·C"),
            Opt::new("threshold", Unit::Size, Range::POSITIVE, "threshold as a size (packets are counted as packets)", "Alizadeh et al. 2010 §3.1: K packets"),
        ],
    };

    fn lower(&self, link: &Link) -> Result<Lowered<Self::Config>, OptionError> {
        let (params, delay_target_ns) = match (self.target, self.threshold) {
            (Some(t), None) => (
                Params {
                    threshold_bytes: Some(link.bytes_in(t)),
                    threshold_packets: None,
                },
                Some(t),
            ),
            (None, Some(Size::Packets(n))) => (
                Params {
                    threshold_bytes: None,
                    threshold_packets: Some(n),
                },
                None,
            ),
            (None, Some(Size::Bytes(b))) => (
                Params {
                    threshold_bytes: Some(b),
                    threshold_packets: None,
                },
                None,
            ),
            _ => return Err(OptionError::new(
                "",
                "give exactly one of target (a delay such as 1ms or 0.17rtt) or threshold (a size)",
            )),
        };
        Ok(Lowered {
            config: params,
            delay_target_ns,
        })
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Packets CE-marked above the threshold.
    pub marked: u64,
    /// Not-ECT packets dropped above the threshold.
    pub dropped: u64,
}

#[derive(Clone, Debug)]
pub struct Step<P> {
    pub threshold: Threshold,
    pub stats: Stats,
    queue: Fifo<P>,
}

impl<P: Packet> Step<P> {
    pub fn build(params: &Params, _seed: u64) -> Result<Self, OptionError> {
        Ok(Self::new(params.threshold()?))
    }

    pub fn new(threshold: Threshold) -> Self {
        Step {
            threshold,
            stats: Stats::default(),
            queue: Fifo::default(),
        }
    }

    #[inline]
    fn above_threshold(&self) -> bool {
        match self.threshold {
            Threshold::Bytes(k) => self.queue.bytes() > k,
            Threshold::Packets(k) => self.queue.len() as u64 > k,
        }
    }
}

impl<P: Packet> Qdisc<P> for Step<P> {
    fn enqueue(&mut self, mut pkt: P, now: Nanos, out: &mut impl Verdicts<P>) {
        if self.above_threshold() {
            if pkt.ecn().is_ect_or_ce() {
                pkt.set_ce();
                self.stats.marked += 1;
                out.marked(&pkt, MarkReason::Step, now);
            } else {
                self.stats.dropped += 1;
                out.dropped(pkt, DropReason::Forced, now);
                return;
            }
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
    use crate::testing::{pkt, Recorder};
    use crate::Ecn;

    #[test]
    fn marks_every_arrival_while_the_backlog_is_above_k() {
        // K = 3000 B: the 1st and 2nd 1500 B packets find 0 and 1500 B (not above), the 3rd
        // finds exactly 3000 B (not *above*), the 4th and 5th find 4500 and 6000 B: marked.
        let mut q = Step::new(Threshold::Bytes(3000));
        let mut r = Recorder::default();
        for i in 0..5 {
            q.enqueue(pkt(i, 1500, Ecn::Ect0), 0, &mut r);
        }
        assert_eq!(
            r.marks.iter().map(|(p, _)| p.flow).collect::<Vec<_>>(),
            vec![3, 4]
        );
        assert!(r
            .marks
            .iter()
            .all(|(p, why)| p.ecn == Ecn::Ce && *why == MarkReason::Step));
        // Draining below K stops the marking at once (no averaging).
        q.dequeue(0, &mut r);
        q.dequeue(0, &mut r);
        q.dequeue(0, &mut r);
        q.enqueue(pkt(9, 1500, Ecn::Ect1), 0, &mut r);
        assert_eq!(r.marks.len(), 2);
    }

    #[test]
    fn not_ect_above_k_is_dropped_and_packet_threshold_works() {
        let mut q = Step::new(Threshold::Packets(1));
        let mut r = Recorder::default();
        q.enqueue(pkt(0, 100, Ecn::NotEct), 0, &mut r);
        q.enqueue(pkt(1, 100, Ecn::NotEct), 0, &mut r); // 1 queued: not above 1
        q.enqueue(pkt(2, 100, Ecn::NotEct), 0, &mut r); // 2 queued: above
        assert_eq!(q.len(), 2);
        assert_eq!(
            r.drops
                .iter()
                .map(|(p, why)| (p.flow, *why))
                .collect::<Vec<_>>(),
            vec![(2, DropReason::Forced)]
        );
    }

    #[test]
    fn threshold_must_be_given_once() {
        assert!(Params {
            threshold_bytes: Some(1),
            threshold_packets: Some(1)
        }
        .threshold()
        .is_err());
        assert!(Params {
            threshold_bytes: None,
            threshold_packets: None
        }
        .threshold()
        .is_err());
    }
}
