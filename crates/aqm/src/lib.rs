//! # aqm — queue disciplines as pure algorithms
//!
//! Every discipline here is a plain state machine over packets it owns, modelled on a Linux
//! qdisc (`net/sched/sch_*.c`): [`Qdisc::enqueue`] may accept, mark (set CE) or drop the
//! arriving packet *and/or* packets already queued; [`Qdisc::dequeue`] returns the next packet
//! and may drop packets on the way out. Nothing here does I/O, reads a clock or knows whether it
//! runs in the simulator (`crates/sim`) or the emulator's router: the caller passes `now` in
//! (smoltcp's sans-IO rule) and receives every drop and mark, with its reason, through a
//! [`Verdicts`] sink, so measurement outside the discipline is exact.
//!
//! Periodic controllers (PIE, PI2, adaptive RED, ...) run lazily from `now`; no discipline needs
//! a timer of its own. Disciplines that draw random numbers own a PCG stream seeded by the
//! caller ([`rng_from_seed`]); there is no global RNG.
//!
//! Layout: `qdisc/` holds one discipline per file, `support/` what they are built from
//! (FIFOs, the hole ring, the DRR scheduler and its pool, the CoDel law, slotted rate
//! averages, ln/exp and the ziggurat, the physical limit). Each discipline's file is in the
//! same order — header with sources, `Params`
//! (its `Default` = Linux/RFC defaults), the scenario's `Options` with their description and
//! lowering to `Params` ([`options`]), `Vars`, `Stats`, the discipline and its `Qdisc` impl,
//! tests. [`any`] registers every discipline in one line.
//!
//! Beneath every discipline the caller applies a physical buffer limit ([`PhysicalLimit`]),
//! as the papers distinguish "buffer length 500 ms" from an AQM's delay target.

pub mod any;
pub mod options;

/// The disciplines, one per file (re-exported at the crate root: `aqm::red`, `aqm::pi2`, ...).
pub mod qdisc {
    pub mod bernoulli;
    pub mod choke;
    pub mod ckcd;
    pub mod codel;
    pub mod csaqm;
    pub mod dualpi2;
    pub mod fq_codel;
    pub mod fq_pie;
    pub mod gsp;
    pub mod pi2;
    pub mod pie;
    pub mod ppv;
    pub mod red;
    pub mod step;
    pub mod taildrop;
}

/// What the disciplines are built from: queues, schedulers, rate averages, arithmetic.
pub mod support {
    pub mod codel_law;
    pub mod drr;
    pub mod fifo;
    pub mod limit;
    pub mod math;
    pub mod pool;
    pub mod rate;
    pub mod ring;
    pub mod ziggurat;
}

pub use qdisc::{
    bernoulli, choke, ckcd, codel, csaqm, dualpi2, fq_codel, fq_pie, gsp, pi2, pie, ppv, red, step,
    taildrop,
};
pub use support::{codel_law, drr, fifo, limit, math, pool, rate, ring, ziggurat};
#[cfg(test)]
mod proptests;
#[cfg(test)]
pub mod testing;

pub use any::{AnyQdisc, QdiscConfig, QdiscOptions};
pub use limit::PhysicalLimit;
pub use options::{Link, Lowered, OptionError, ScenarioOptions};

/// Time in nanoseconds since the start of the run. Never wraps (u64 ns = 584 years).
pub type Nanos = u64;

/// ECN codepoint of the IP header (RFC 3168 §5): the two low bits of the TOS/traffic-class byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Ecn {
    NotEct = 0b00,
    /// ECT(1): used by L4S senders (RFC 9331).
    Ect1 = 0b01,
    /// ECT(0): classic ECN senders (RFC 3168) and Linux DCTCP.
    Ect0 = 0b10,
    Ce = 0b11,
}

impl Ecn {
    /// Whether a router may mark this packet instead of dropping it.
    #[inline]
    pub fn is_ect_or_ce(self) -> bool {
        self != Ecn::NotEct
    }
}

/// What a discipline needs to know about a packet. Implemented by the simulator's packet and by
/// the router's view of a real IP packet.
pub trait Packet {
    /// Bytes the packet occupies in the queue and on the link (what Linux's `qdisc_pkt_len`
    /// reports for the simulator's packet model: the IP packet length).
    fn wire_len(&self) -> u32;
    fn ecn(&self) -> Ecn;
    /// Set the CE codepoint. Only called on ECT or CE packets.
    fn set_ce(&mut self);
    /// A key identifying the packet's flow (5-tuple hash or flow index).
    fn flow_key(&self) -> u64;
    /// The packet value for PPV/CSAQM (higher = more important; the simulator's marker uses
    /// 1..=65535); 0 if the packet carries none.
    fn value(&self) -> u32 {
        0
    }
    /// Time the packet entered the queue (set by the discipline at enqueue).
    fn enqueue_ns(&self) -> Nanos;
    fn set_enqueue_ns(&mut self, now: Nanos);
}

/// Why a packet was dropped. Mirrors Linux's `SKB_DROP_REASON_QDISC_*` and `red_stats`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The physical buffer or the discipline's own limit was full (Linux `pdrop`/overlimit).
    Overflow,
    /// Probabilistic early drop (RED `prob_drop`, PIE, PI2).
    Early,
    /// Forced drop above a hard threshold (RED `forced_drop` above max_th).
    Forced,
    /// Dropped at dequeue by a delay rule (CoDel, DualPI2 drop-at-dequeue, CKCD).
    HeadDrop,
    /// Dropped because a random queued packet matched its flow (CHOKe, CKCD).
    FlowMatch,
    /// Dropped for its low packet value: evicted from (or refused by) a full PPV buffer, or a
    /// Not-ECT packet below CSAQM's congestion threshold value.
    Value,
    /// An ECN-capable packet dropped because the marking probability was too high (overload).
    Overload,
    /// Bernoulli loss of the ideal random dropper used by validation scenarios.
    Random,
}

/// Why a packet was CE-marked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MarkReason {
    /// Probabilistic mark (RED `prob_mark`, PIE, PI2 classic).
    Prob,
    /// Forced mark above a hard threshold (RED `forced_mark`).
    Forced,
    /// Instantaneous-threshold mark (STEP, DualPI2 L4S step).
    Step,
    /// Coupled mark (PI2/DualPI2 scalable traffic).
    Coupled,
    /// Packet value below the congestion threshold value (CSAQM).
    Ctv,
    /// Bernoulli mark of the ideal random marker used by validation scenarios.
    Random,
    /// Marked instead of dropped by a delay-based law (CoDel's `ecn_mark`).
    Delay,
}

/// Receives every drop and mark a discipline performs, as it performs it.
///
/// `dropped` takes the packet by value: the discipline gives it up. `marked` sees the packet
/// after CE was set; the packet stays queued (or is enqueued).
pub trait Verdicts<P> {
    fn dropped(&mut self, pkt: P, reason: DropReason, now: Nanos);
    fn marked(&mut self, pkt: &P, reason: MarkReason, now: Nanos);
}

/// The ops table every discipline implements (Linux `struct Qdisc_ops`).
pub trait Qdisc<P: Packet> {
    /// Offer an arriving packet. The discipline stamps `enqueue_ns`, then keeps it, marks it or
    /// hands it to `out.dropped`; it may also drop packets already queued.
    fn enqueue(&mut self, pkt: P, now: Nanos, out: &mut impl Verdicts<P>);
    /// The next packet to transmit, or `None` if the queue is empty. May drop packets first.
    fn dequeue(&mut self, now: Nanos, out: &mut impl Verdicts<P>) -> Option<P>;
    /// Packets queued.
    fn len(&self) -> usize;
    /// Bytes queued (sum of `wire_len`).
    fn backlog_bytes(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Enqueue time of the head packet, if any (for "head-of-queue age" measurements).
    fn head_enqueue_ns(&self) -> Option<Nanos>;
    /// Remove every packet (handed to `out.dropped` as `Overflow` is *not* done: they are
    /// returned) and clear the control state, keeping the parameters (Linux `qdisc_reset`).
    fn reset(&mut self) -> Vec<P>;
    /// Whether the discipline enforces its buffer limit itself and must see overflowing
    /// arrivals (PPV, GSP, FQ-CoDel, FQ-PIE). If false, [`PhysicalLimit`] drops them before the
    /// discipline sees them.
    fn owns_limit(&self) -> bool {
        false
    }
}

/// A seeded PCG stream for one discipline. The caller derives `seed` from the run seed.
pub type Rng = rand_pcg::Pcg64Mcg;

pub fn rng_from_seed(seed: u64) -> Rng {
    use rand_core::SeedableRng;
    rand_pcg::Pcg64Mcg::seed_from_u64(seed)
}

/// A uniform draw in [0, 1) with 53 bits of precision.
#[inline]
pub fn uniform01(rng: &mut Rng) -> f64 {
    use rand_core::Rng as _;
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}
