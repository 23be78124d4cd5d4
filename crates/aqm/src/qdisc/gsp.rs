//! GSP — Global Synchronization Protection.
//!
//! Sources: W. Lautenschlaeger, A. Francini, "Global Synchronization Protection for Bandwidth
//! Sharing TCP Flows in High-Speed Links", IEEE HPSR 2015 (arXiv 1602.05333; only the abstract
//! and third-party restatements of its pseudo-code, such as its ns-3 port, were available);
//! Fejes et al. 2019 §3 (GSP configured by a target delay = 0.75 × buffer time, "parameters derived from
//! link capacity").
//!
//! A tail-drop queue with a threshold θ below the buffer limit: the first arrival that finds
//! the backlog above θ is dropped, and further violations are ignored for a "blind" interval
//! I, so one loss, not a burst of them, answers each congestion episode and flows do not
//! synchronise. In the adaptive variant (the default (aqmlab's choice)) I shrinks as the queue
//! spends more time above θ than below: cumul += α·(time above) − (time below), clamped to
//! [0, max_time], I = I_preset / (1 + cumul/τ). After a buffer overflow the accumulation of
//! time below θ is suspended until the queue has emptied and crossed θ again (the paper's
//! STABLE → WAIT_EMPTY → WAIT_THRESH → STABLE machine).
//!
//! Choices the sources leave open (aqmlab's choice): the backlog *before* the arrival is compared with
//! `> θ` (as STEP); the arrival is the packet dropped (`DropReason::Early`); time above/below θ
//! is integrated exactly, since the backlog the discipline sees is piecewise constant between
//! its enqueue and dequeue calls; α defaults to 1 (the paper's guidance "not much larger than
//! 1"; an ns-3 port uses 2), I_preset to 200 ms and τ to 5·I_preset (the ns-3 port and the
//! paper's ratio), max_time to 10·τ.

use crate::fifo::{fifo_accessors, Fifo};
use crate::options::{About, Link, Lowered, Opt, OptionError, Range, ScenarioOptions, Size, Unit};
use crate::{DropReason, Nanos, Packet, Qdisc, Verdicts};

#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields)
)]
pub struct Params {
    /// θ, bytes (a delay target converted at line rate by the caller).
    pub threshold_bytes: u64,
    /// I_preset: the blind interval after a drop, ns.
    #[cfg_attr(feature = "serde", serde(default = "default_interval"))]
    pub interval_ns: Nanos,
    /// τ: the adaptation time constant, ns.
    #[cfg_attr(feature = "serde", serde(default = "default_tau"))]
    pub tau_ns: Nanos,
    /// α: weight of time above θ against time below.
    #[cfg_attr(feature = "serde", serde(default = "default_alpha"))]
    pub alpha: f64,
    /// Clamp of the accumulated time, ns (None = 10·τ).
    #[cfg_attr(feature = "serde", serde(default))]
    pub max_time_ns: Option<Nanos>,
    /// Adapt the interval (the paper's adaptive GSP); false = basic GSP.
    #[cfg_attr(feature = "serde", serde(default = "default_adaptive"))]
    pub adaptive: bool,
    /// The buffer limit GSP enforces itself, so that it sees overflows (the adaptive
    /// variant's state machine needs them): packets and/or bytes.
    #[cfg_attr(feature = "serde", serde(default))]
    pub limit_packets: Option<u64>,
    #[cfg_attr(feature = "serde", serde(default))]
    pub limit_bytes: Option<u64>,
}

#[cfg(feature = "serde")]
fn default_interval() -> Nanos {
    200_000_000
}
#[cfg(feature = "serde")]
fn default_tau() -> Nanos {
    5 * default_interval()
}
#[cfg(feature = "serde")]
fn default_alpha() -> f64 {
    1.0
}
#[cfg(feature = "serde")]
fn default_adaptive() -> bool {
    true
}

impl Params {
    pub fn validate(&self) -> Result<(), OptionError> {
        if self.interval_ns == 0 {
            return Err(OptionError::new("interval", "must be positive"));
        }
        if self.tau_ns == 0 {
            return Err(OptionError::new("tau", "must be positive"));
        }
        if !(self.alpha.is_finite() && self.alpha > 0.0) {
            return Err(OptionError::new(
                "alpha",
                format!("{} must be positive", self.alpha),
            ));
        }
        Ok(())
    }

    fn max_time_ns(&self) -> f64 {
        self.max_time_ns.unwrap_or(10 * self.tau_ns) as f64
    }
}

/// The scenario's options (times in ns).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields, default)
)]
pub struct Options {
    pub target: Option<Nanos>,
    pub threshold: Option<Size>,
    pub interval: Nanos,
    pub tau: Option<Nanos>,
    pub alpha: f64,
    pub max_time: Option<Nanos>,
    pub adaptive: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            target: None,
            threshold: None,
            interval: 200_000_000,
            tau: None,
            alpha: 1.0,
            max_time: None,
            adaptive: true,
        }
    }
}

impl ScenarioOptions for Options {
    type Config = Params;
    const ABOUT: About = About {
        kind: "gsp",
        summary: "Global Synchronization Protection: drop the first arrival above a threshold, then ignore violations for a blind interval (adaptive by default)",
        source: "Lautenschlaeger & Francini, HPSR 2015 (arXiv 1602.05333); Fejes et al. 2019 §3",
        one_of: &[&["target", "threshold"]],
        reads_packet_values: false,
        options: &[
            Opt::new("target", Unit::DelayTarget, Range::POSITIVE, "threshold θ as a queueing delay: target × link rate bytes (also the summary's delay target)", "Fejes et al. 2019 §3: 0.75 × the buffer time, \"parameters derived from link capacity\""),
            Opt::new("threshold", Unit::Size, Range::POSITIVE, "threshold θ as a size (packets count as 1500 bytes)", "Lautenschlaeger & Francini 2015"),
            Opt::new("interval", Unit::Time, Range::POSITIVE, "I_preset, the blind interval after a drop", "aqmlab's choice (200 ms, as the ns-3 port): the paper's value was not available"),
            Opt::new("tau", Unit::Time, Range::POSITIVE, "τ, the adaptation time constant (none: 5·interval)", "aqmlab's choice (the ns-3 port's ratio)"),
            Opt::new("alpha", Unit::Float, Range::POSITIVE, "α, weight of time above θ against time below", "Lautenschlaeger & Francini 2015 (\"not much larger than 1\")"),
            Opt::new("max_time", Unit::Time, Range::POSITIVE, "clamp of the accumulated time (none: 10·tau)", "aqmlab's choice"),
            Opt::new("adaptive", Unit::Bool, Range::ANY, "adaptive GSP (the interval shrinks while the queue stays above θ); false: basic GSP", "Lautenschlaeger & Francini 2015"),
        ],
    };

    /// GSP enforces the buffer itself, so that its state machine sees overflows.
    fn lower(&self, link: &Link) -> Result<Lowered<Self::Config>, OptionError> {
        let (threshold_bytes, delay_target_ns) = match (self.target, self.threshold) {
            (Some(t), None) => (link.bytes_in(t), Some(t)),
            (None, Some(s)) => (s.bytes(), None),
            _ => return Err(OptionError::new(
                "",
                "give exactly one of target (a delay such as 10ms or 0.5rtt) or threshold (a size)",
            )),
        };
        let params = Params {
            threshold_bytes,
            interval_ns: self.interval,
            tau_ns: self.tau.unwrap_or(5 * self.interval),
            alpha: self.alpha,
            max_time_ns: self.max_time,
            adaptive: self.adaptive,
            limit_packets: link.buffer_packets,
            limit_bytes: link.buffer_bytes,
        };
        params.validate()?;
        Ok(Lowered {
            config: params,
            delay_target_ns,
        })
    }
}

/// The paper's overflow state machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Stable,
    /// After an overflow: wait for the queue to empty.
    WaitEmpty,
    /// Then wait for it to cross θ again.
    WaitThresh,
}

#[derive(Clone, Debug)]
pub struct Vars {
    /// End of the current blind interval.
    pub expiry_ns: Nanos,
    /// Accumulated α·(time above) − (time below), ns.
    pub cumul_ns: f64,
    /// Time of the last enqueue/dequeue (the backlog is constant since).
    pub last_ns: Nanos,
    pub phase: Phase,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Threshold drops.
    pub gsp_drops: u64,
    /// Overflow drops (the discipline's own view; the physical limit usually takes them).
    pub overflows: u64,
}

#[derive(Clone, Debug)]
pub struct Gsp<P> {
    pub params: Params,
    pub vars: Vars,
    pub stats: Stats,
    queue: Fifo<P>,
}

impl<P: Packet> Gsp<P> {
    /// The discipline for engine parameters `params`, checked; `seed` seeds its random stream.
    pub fn build(params: &Params, seed: u64) -> Result<Self, OptionError> {
        let _ = seed;
        params.validate()?;
        Ok(Self::new(params.clone()))
    }

    pub fn new(params: Params) -> Self {
        Gsp {
            params,
            vars: Vars {
                expiry_ns: 0,
                cumul_ns: 0.0,
                last_ns: 0,
                phase: Phase::Stable,
            },
            stats: Stats::default(),
            queue: Fifo::default(),
        }
    }

    /// The current blind interval: I_preset / (1 + cumul/τ) when adaptive.
    pub fn interval_ns(&self) -> Nanos {
        if !self.params.adaptive {
            return self.params.interval_ns;
        }
        (self.params.interval_ns as f64 / (1.0 + self.vars.cumul_ns / self.params.tau_ns as f64))
            as Nanos
    }

    /// Integrate the time since the last event at the (constant) backlog of that period.
    fn account(&mut self, now: Nanos) {
        let dt = (now - self.vars.last_ns) as f64;
        self.vars.last_ns = now;
        if !self.params.adaptive || dt == 0.0 {
            return;
        }
        if self.queue.bytes() > self.params.threshold_bytes {
            self.vars.cumul_ns += self.params.alpha * dt;
        } else if self.vars.phase == Phase::Stable {
            self.vars.cumul_ns -= dt;
        }
        self.vars.cumul_ns = self.vars.cumul_ns.clamp(0.0, self.params.max_time_ns());
    }

    /// Advance the overflow state machine after the backlog changed.
    fn track_phase(&mut self) {
        self.vars.phase = match self.vars.phase {
            Phase::WaitEmpty if self.queue.is_empty() => Phase::WaitThresh,
            Phase::WaitThresh if self.queue.bytes() > self.params.threshold_bytes => Phase::Stable,
            p => p,
        };
    }

    /// An arrival overflowed the buffer.
    pub fn note_overflow(&mut self) {
        self.stats.overflows += 1;
        self.vars.phase = Phase::WaitEmpty;
    }
}

impl<P: Packet> Qdisc<P> for Gsp<P> {
    fn enqueue(&mut self, mut pkt: P, now: Nanos, out: &mut impl Verdicts<P>) {
        self.account(now);
        if self.queue.bytes() > self.params.threshold_bytes && now >= self.vars.expiry_ns {
            // The first violation after the blind interval: exactly one drop.
            self.stats.gsp_drops += 1;
            self.vars.expiry_ns = now + self.interval_ns();
            out.dropped(pkt, DropReason::Early, now);
            return;
        }
        let limit = crate::PhysicalLimit {
            packets: self.params.limit_packets,
            bytes: self.params.limit_bytes,
        };
        if !limit.admits(self.queue.len(), self.queue.bytes(), pkt.wire_len()) {
            self.note_overflow();
            out.dropped(pkt, DropReason::Overflow, now);
            return;
        }
        pkt.set_enqueue_ns(now);
        self.queue.push(pkt);
        self.track_phase();
    }

    fn dequeue(&mut self, now: Nanos, _out: &mut impl Verdicts<P>) -> Option<P> {
        self.account(now);
        let p = self.queue.pop();
        self.track_phase();
        p
    }

    fifo_accessors!();

    fn owns_limit(&self) -> bool {
        true
    }

    fn reset(&mut self) -> Vec<P> {
        self.vars = Vars {
            expiry_ns: 0,
            cumul_ns: 0.0,
            last_ns: self.vars.last_ns,
            phase: Phase::Stable,
        };
        self.queue.drain()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{pkt, Recorder};
    use crate::Ecn;

    const MS: Nanos = 1_000_000;

    fn params(adaptive: bool) -> Params {
        Params {
            threshold_bytes: 3000,
            interval_ns: 200 * MS,
            tau_ns: 1000 * MS,
            alpha: 1.0,
            max_time_ns: None,
            adaptive,
            limit_packets: None,
            limit_bytes: None,
        }
    }

    #[test]
    fn one_drop_then_blind_for_the_interval() {
        // θ = 3000 B: the 4th 1500-B arrival finds 4500 B > θ and is dropped; later arrivals
        // within 200 ms are queued whatever the backlog; the first one at ≥ 200 ms is dropped.
        let mut q = Gsp::new(params(false));
        let mut r = Recorder::default();
        for i in 0..10 {
            q.enqueue(pkt(i, 1500, Ecn::NotEct), 0, &mut r);
        }
        assert_eq!(
            r.drops
                .iter()
                .map(|(p, w)| (p.flow, *w))
                .collect::<Vec<_>>(),
            vec![(3, DropReason::Early)]
        );
        q.enqueue(pkt(20, 1500, Ecn::NotEct), 199 * MS, &mut r);
        assert_eq!(r.drops.len(), 1);
        q.enqueue(pkt(21, 1500, Ecn::NotEct), 200 * MS, &mut r);
        assert_eq!(r.drops.len(), 2);
        assert_eq!(r.drops[1].0.flow, 21);
    }

    #[test]
    fn time_above_threshold_shortens_the_interval() {
        // Adaptive: 500 ms with the backlog above θ (α = 1) gives cumul = 500 ms, so
        // I = 200 ms / (1 + 500/1000) = 133.3 ms. Then 200 ms below θ brings cumul to 300 ms:
        // I = 200/1.3 = 153.8 ms.
        let mut q = Gsp::new(params(true));
        let mut r = Recorder::default();
        for i in 0..3 {
            q.enqueue(pkt(i, 1500, Ecn::NotEct), 0, &mut r);
        }
        assert_eq!(q.backlog_bytes(), 4500, "the 3rd found 3000 B, not above θ");
        q.enqueue(pkt(9, 1, Ecn::NotEct), 500 * MS, &mut r); // dropped: above θ, not blind
        assert_eq!(q.interval_ns(), 133_333_333);
        for _ in 0..3 {
            q.dequeue(500 * MS, &mut r);
        }
        q.dequeue(700 * MS, &mut r);
        assert_eq!((q.vars.cumul_ns / 1e6).round(), 300.0);
        assert_eq!(q.interval_ns(), 153_846_153);
    }

    #[test]
    fn after_an_overflow_time_below_is_not_counted_until_the_queue_empties_and_refills() {
        let mut q: Gsp<crate::testing::TestPkt> = Gsp::new(params(true));
        let mut r = Recorder::default();
        q.params.limit_packets = Some(0);
        q.vars.cumul_ns = 400.0 * MS as f64;
        q.enqueue(pkt(0, 1500, Ecn::NotEct), 0, &mut r);
        assert_eq!(r.drops[0].1, DropReason::Overflow);
        assert_eq!(q.vars.phase, Phase::WaitEmpty);
        q.params.limit_packets = None;
        // Empty queue for 100 ms: phase moves on at the next event, and time below is frozen.
        q.dequeue(100 * MS, &mut r);
        assert_eq!(q.vars.phase, Phase::WaitThresh);
        assert_eq!(q.vars.cumul_ns, 400.0 * MS as f64);
        q.enqueue(pkt(0, 1500, Ecn::NotEct), 150 * MS, &mut r);
        assert_eq!(q.vars.cumul_ns, 400.0 * MS as f64, "still waiting for θ");
        for i in 1..4 {
            q.enqueue(pkt(i, 1500, Ecn::NotEct), 150 * MS, &mut r);
        }
        assert_eq!(q.vars.phase, Phase::Stable, "crossed θ");
        for _ in 0..4 {
            q.dequeue(150 * MS, &mut r);
        }
        q.dequeue(250 * MS, &mut r);
        // (The 4th arrival found 4500 B > θ and was GSP-dropped; the queue emptied at 150 ms.)
        assert_eq!(
            q.vars.cumul_ns,
            300.0 * MS as f64,
            "100 ms below θ counted again"
        );
    }

    #[test]
    fn bad_parameters_name_themselves() {
        assert!(
            Params {
                interval_ns: 0,
                ..params(true)
            }
            .validate()
            .unwrap_err()
            .key == "interval"
        );
        assert!(
            Params {
                alpha: -1.0,
                ..params(true)
            }
            .validate()
            .unwrap_err()
            .key == "alpha"
        );
    }
}
