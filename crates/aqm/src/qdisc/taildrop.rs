//! TailDrop: a FIFO that drops arrivals once full.
//!
//! Linux: net/sched/sch_fifo.c (`pfifo_enqueue`: admit iff qlen < limit; `bfifo_enqueue`:
//! admit iff backlog + len ≤ limit). Fejes et al. 2019 and 2020: "drops the incoming packet once the queue is
//! full; not ECN capable". The discipline's own limit is optional: the physical buffer beneath
//! every discipline ([`crate::PhysicalLimit`]) is usually the one that bites. A time limit is a
//! byte limit at line rate, converted by the caller.

use crate::fifo::{fifo_accessors, fifo_dequeue_and_reset, Fifo};
use crate::options::{About, Link, Lowered, Opt, OptionError, Range, ScenarioOptions, Size, Unit};
use crate::{DropReason, Nanos, Packet, PhysicalLimit, Qdisc, Verdicts};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields)
)]
pub struct Params {
    /// pfifo limit, packets (None: no limit of its own).
    #[cfg_attr(feature = "serde", serde(default))]
    pub limit_packets: Option<u64>,
    /// bfifo limit, bytes (None: no limit of its own).
    #[cfg_attr(feature = "serde", serde(default))]
    pub limit_bytes: Option<u64>,
}

/// The scenario's options (tc-pfifo(8)/tc-bfifo(8)).
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields, default)
)]
pub struct Options {
    pub limit: Option<Size>,
}

impl ScenarioOptions for Options {
    type Config = Params;
    const ABOUT: About = About {
        kind: "taildrop",
        summary: "FIFO that drops arrivals when full",
        source: "Linux net/sched/sch_fifo.c (pfifo, bfifo)",
        one_of: &[],
        reads_packet_values: false,
        options: &[Opt::new(
            "limit",
            Unit::Size,
            Range::POSITIVE,
            "a limit of its own beneath the physical buffer (none: only the buffer's)",
            "tc-pfifo(8) limit (packets), tc-bfifo(8) limit (bytes)",
        )],
    };

    fn lower(&self, _link: &Link) -> Result<Lowered<Self::Config>, OptionError> {
        let (limit_packets, limit_bytes) = Size::limit(self.limit);
        Ok(Lowered {
            config: Params {
                limit_packets,
                limit_bytes,
            },
            delay_target_ns: None,
        })
    }
}

/// Linux's tc -s names: `dropped` counts overlimit drops.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub dropped: u64,
}

#[derive(Clone, Debug)]
pub struct TailDrop<P> {
    pub params: Params,
    pub stats: Stats,
    queue: Fifo<P>,
}

impl<P: Packet> TailDrop<P> {
    pub fn build(params: &Params, _seed: u64) -> Result<Self, OptionError> {
        Ok(Self::new(params.clone()))
    }

    pub fn new(params: Params) -> Self {
        TailDrop {
            params,
            stats: Stats::default(),
            queue: Fifo::default(),
        }
    }
}

impl<P: Packet> Qdisc<P> for TailDrop<P> {
    fn enqueue(&mut self, mut pkt: P, now: Nanos, out: &mut impl Verdicts<P>) {
        let limit = PhysicalLimit {
            packets: self.params.limit_packets,
            bytes: self.params.limit_bytes,
        };
        if !limit.admits(self.queue.len(), self.queue.bytes(), pkt.wire_len()) {
            self.stats.dropped += 1;
            out.dropped(pkt, DropReason::Overflow, now);
            return;
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
    fn pfifo_keeps_exactly_limit_packets() {
        let mut q = TailDrop::new(Params {
            limit_packets: Some(3),
            limit_bytes: None,
        });
        let mut r = Recorder::default();
        for i in 0..5 {
            q.enqueue(pkt(i, 1500, Ecn::Ect0), 10, &mut r);
        }
        assert_eq!(q.len(), 3);
        assert_eq!(r.drops.len(), 2);
        assert!(r
            .drops
            .iter()
            .all(|(_, reason)| *reason == DropReason::Overflow));
        assert!(r.marks.is_empty(), "TailDrop never marks");
        // FIFO order and enqueue stamps.
        let first = q.dequeue(20, &mut r).unwrap();
        assert_eq!((first.flow, first.enqueued), (0, 10));
    }

    #[test]
    fn bfifo_admits_up_to_the_byte_limit() {
        let mut q = TailDrop::new(Params {
            limit_packets: None,
            limit_bytes: Some(3000),
        });
        let mut r = Recorder::default();
        q.enqueue(pkt(0, 1500, Ecn::NotEct), 0, &mut r);
        q.enqueue(pkt(1, 1500, Ecn::NotEct), 0, &mut r);
        q.enqueue(pkt(2, 64, Ecn::NotEct), 0, &mut r);
        assert_eq!(q.backlog_bytes(), 3000);
        assert_eq!(r.drops.len(), 1);
    }
}
