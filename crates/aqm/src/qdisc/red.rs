//! RED — Random Early Detection, with Linux sch_red semantics.
//!
//! Sources: Floyd & Jacobson, "Random Early Detection Gateways for Congestion Avoidance",
//! IEEE/ACM ToN 1(4), 1993; Linux include/net/red.h (`red_calc_qavg`, `red_action`,
//! `red_mark_probability`, `red_adaptative_algo`), net/sched/sch_red.c (`red_enqueue`,
//! `red_dequeue`); iproute2 tc/q_red.c (`red_parse_opt`) and tc/tc_red.c (`tc_red_eval_ewma`)
//! for how tc derives the kernel parameters from its options, so a tc line transcribes
//! directly: `red limit 1600000 min 120000 max 360000 avpkt 1000 burst 220 ecn bandwidth 40Mbit`.
//!
//! On every arrival: avg ← (1 − W)·avg + W·backlog (bytes, as sch_red); after an idle period
//! the average instead decays as avg·(1 − W)^m, m = idle time / (avpkt at `bandwidth`).
//! Below min nothing happens; between min and max the packet is marked with the spacing of
//! Linux's divisionless rule (mark when p_b·count ≥ U, U uniform, redrawn after each mark —
//! inter-mark gaps uniform on [1, 1/p_b]), p_b = max_p·(avg − min)/(max − min); at or above
//! max every arrival is hard-marked. Marking sets CE on ECT packets when `ecn` is on; otherwise
//! (or with `harddrop` above max) the packet is dropped.
//!
//! Deviations from Linux, each deliberate: the average and probabilities are f64, not Linux's
//! fixed point (no 32-bit limit on thresholds·2^Wlog, which the kernel's `red_check_params`
//! enforces); the idle decay is computed exactly instead of through tc's 256-entry `Stab`
//! table; Floyd's **gentle** mode (`gentle`, off by default) exists although Linux lacks it:
//! between max and 2·max, p_b = max_p + (1 − max_p)(avg − max)/max with the same spacing,
//! hard marks only from 2·max. Adaptive RED runs lazily from `now` (every 500 ms), not from a
//! timer.

use crate::fifo::{fifo_accessors, Fifo};
use crate::options::{About, Link, Lowered, Opt, OptionError, Range, ScenarioOptions, Size, Unit};
use crate::{uniform01, DropReason, MarkReason, Nanos, Packet, Qdisc, Rng, Verdicts};

/// tc's default `probability` (tc/q_red.c).
pub const DEFAULT_PROBABILITY: f64 = 0.02;
/// tc's default `bandwidth`, bit/s (tc/q_red.c: "10Mbit").
pub const DEFAULT_BANDWIDTH_BPS: u64 = 10_000_000;
/// Adaptive RED period: 500 ms (`red_adaptative_timer`, HZ/2).
pub const ADAPTIVE_INTERVAL_NS: Nanos = 500_000_000;
/// Adaptive RED bounds on max_p (include/net/red.h `MAX_P_MIN`, `MAX_P_MAX`).
const MAX_P_MIN: f64 = 0.01;
const MAX_P_MAX: f64 = 0.5;
/// At most this many missed adaptive periods are replayed per call; after a long idle gap the
/// decrease converges to its floor long before (0.9^64 < 0.01), so more would change nothing.
const ADAPTIVE_MAX_CATCHUP: u32 = 64;

/// RED's options exactly as tc names them (tc-red(8)); sizes in bytes, `burst` in packets.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields, default)
)]
pub struct TcOptions {
    /// Hard byte limit of the child FIFO (required by tc).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub limit: Option<u64>,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub min: Option<u64>,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub max: Option<u64>,
    /// Average packet size, bytes (required by tc).
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub avpkt: Option<u64>,
    /// Burst tolerated when computing the EWMA weight, packets.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub burst: Option<u64>,
    /// max_p, the marking probability at max.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub probability: Option<f64>,
    /// Link rate, bit/s, for the idle-time decay.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub bandwidth: Option<u64>,
    pub ecn: bool,
    pub harddrop: bool,
    /// Linux 5.7+: with `ecn`, queue Not-ECT packets instead of dropping them.
    pub nodrop: bool,
    pub adaptive: bool,
    /// Floyd's gentle RED (not in Linux).
    pub gentle: bool,
}

/// The scenario's options: tc's, with sizes as [`Size`] (packets count as 1500 bytes) and the
/// child limit defaulting to the physical buffer.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields, default)
)]
pub struct Options {
    pub limit: Option<Size>,
    pub min: Option<Size>,
    pub max: Option<Size>,
    pub avpkt: Option<Size>,
    pub burst: Option<u64>,
    pub probability: Option<f64>,
    pub bandwidth: Option<u64>,
    pub ecn: bool,
    pub harddrop: bool,
    pub nodrop: bool,
    pub adaptive: bool,
    pub gentle: bool,
}

impl ScenarioOptions for Options {
    type Config = TcOptions;
    const ABOUT: About = About {
        kind: "red",
        summary: "RED with tc's option names and derivations, so a tc line transcribes directly",
        source: "Floyd & Jacobson 1993; Linux net/sched/sch_red.c, include/net/red.h; iproute2 tc/q_red.c",
        one_of: &[],
        reads_packet_values: false,
        options: &[
            Opt::new("limit", Unit::Size, Range::POSITIVE, "hard byte limit of the child FIFO (none: the physical buffer)", "tc-red(8) limit"),
            Opt::new("min", Unit::Size, Range::NON_NEGATIVE, "average queue size where marking starts (none: max/3)", "tc-red(8) min; tc/q_red.c red_parse_opt"),
            Opt::new("max", Unit::Size, Range::POSITIVE, "average queue size where marking becomes certain (none: 3·min, or limit/4)", "tc-red(8) max; tc/q_red.c red_parse_opt"),
            Opt::new("avpkt", Unit::Size, Range::POSITIVE, "average packet size, for the EWMA weight and the idle decay", "tc-red(8) avpkt (required by tc)").required(),
            Opt::new("burst", Unit::Int, Range::at_least(1.0), "burst tolerated by the EWMA weight, packets (none: (2·min + max)/(3·avpkt))", "tc-red(8) burst; tc/tc_red.c tc_red_eval_ewma"),
            Opt::new("probability", Unit::Float, Range::POSITIVE_PROBABILITY, "max_p, the marking probability at max (none: 0.02)", "tc-red(8) probability; tc/q_red.c"),
            Opt::new("bandwidth", Unit::Rate, Range::POSITIVE, "rate for the idle-time decay of the average (none: 10Mbit)", "tc-red(8) bandwidth; tc/q_red.c"),
            Opt::new("ecn", Unit::Bool, Range::ANY, "CE-mark ECT packets instead of dropping them", "tc-red(8) ecn"),
            Opt::new("harddrop", Unit::Bool, Range::ANY, "with ecn: drop rather than mark above max", "tc-red(8) harddrop"),
            Opt::new("nodrop", Unit::Bool, Range::ANY, "with ecn: queue Not-ECT packets instead of dropping them", "tc-red(8) nodrop (Linux 5.7)"),
            Opt::new("adaptive", Unit::Bool, Range::ANY, "adaptive RED: max_p adapted every 500 ms", "tc-red(8) adaptive; include/net/red.h red_adaptative_algo"),
            Opt::new("gentle", Unit::Bool, Range::ANY, "gentle RED between max and 2·max (not in Linux)", "Floyd, \"Recommendation on using the gentle_ variant of RED\", 2000 (not in Linux)"),
        ],
    };

    fn lower(&self, link: &Link) -> Result<Lowered<Self::Config>, OptionError> {
        let bytes = |s: Option<Size>| s.map(Size::bytes);
        let options = TcOptions {
            // Default child limit: the physical buffer.
            limit: Some(bytes(self.limit).unwrap_or_else(|| link.buffer_in_bytes())),
            min: bytes(self.min),
            max: bytes(self.max),
            avpkt: bytes(self.avpkt),
            burst: self.burst,
            probability: self.probability,
            bandwidth: self.bandwidth,
            ecn: self.ecn,
            harddrop: self.harddrop,
            nodrop: self.nodrop,
            adaptive: self.adaptive,
            gentle: self.gentle,
        };
        options.derive()?;
        Ok(Lowered {
            config: options,
            delay_target_ns: None,
        })
    }
}

/// The kernel-side parameters tc derives.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    pub limit_bytes: u64,
    pub min_bytes: f64,
    pub max_bytes: f64,
    pub avpkt_bytes: u64,
    pub burst_pkts: u64,
    /// EWMA weight W = 2^−Wlog.
    pub wlog: u32,
    pub max_p: f64,
    pub bandwidth_bps: u64,
    pub ecn: bool,
    pub harddrop: bool,
    pub nodrop: bool,
    pub adaptive: bool,
    pub gentle: bool,
}

/// `tc_red_eval_ewma`: the smallest Wlog ≥ 1 with burst + 1 − min/avpkt ≤ (1 − (1−W)^burst)/W.
pub(crate) fn eval_ewma(min: u64, burst: u64, avpkt: u64) -> Result<u32, OptionError> {
    let a = burst as f64 + 1.0 - min as f64 / avpkt as f64;
    if a < 1.0 {
        return Err(OptionError::new(
            "burst",
            format!(
                "{burst} is too small for min {min} and avpkt {avpkt}; try burst {}",
                1 + min / avpkt
            ),
        ));
    }
    let mut w: f64 = 0.5;
    for wlog in 1..32 {
        if a <= (1.0 - (1.0 - w).powf(burst as f64)) / w {
            return Ok(wlog);
        }
        w /= 2.0;
    }
    Err(OptionError::new(
        "burst",
        format!("{burst} is too large to compute an EWMA weight"),
    ))
}

impl TcOptions {
    /// Derive the kernel parameters as tc/q_red.c does. Errors name the option.
    pub fn derive(&self) -> Result<Params, OptionError> {
        let limit = self.limit.ok_or_else(|| {
            OptionError::new("limit", "required (the child FIFO's byte limit, as in tc)")
        })?;
        let avpkt = self.avpkt.ok_or_else(|| {
            OptionError::new(
                "avpkt",
                "required (the average packet size in bytes, as in tc)",
            )
        })?;
        if avpkt == 0 {
            return Err(OptionError::new("avpkt", "must be positive"));
        }
        // Floyd's recommendations (tc/q_red.c): max = 3·min, or limit/4; min = max/3.
        let max = match (self.max, self.min) {
            (Some(m), _) => m,
            (None, Some(min)) => min * 3,
            (None, None) => limit / 4,
        };
        let min = self.min.unwrap_or(max / 3);
        if max < min {
            return Err(OptionError::new("max", format!("{max} is below min {min}")));
        }
        let burst = self.burst.unwrap_or((2 * min + max) / (3 * avpkt));
        let wlog = eval_ewma(min, burst, avpkt)?;
        let max_p = self.probability.unwrap_or(DEFAULT_PROBABILITY);
        if !(max_p > 0.0 && max_p <= 1.0) {
            return Err(OptionError::new(
                "probability",
                format!("{max_p} is not in (0, 1]"),
            ));
        }
        let bandwidth = self.bandwidth.unwrap_or(DEFAULT_BANDWIDTH_BPS);
        if bandwidth == 0 {
            return Err(OptionError::new("bandwidth", "must be positive"));
        }
        Ok(Params {
            limit_bytes: limit,
            min_bytes: min as f64,
            max_bytes: max as f64,
            avpkt_bytes: avpkt,
            burst_pkts: burst,
            wlog,
            max_p,
            bandwidth_bps: bandwidth,
            ecn: self.ecn,
            harddrop: self.harddrop,
            nodrop: self.nodrop,
            adaptive: self.adaptive,
            gentle: self.gentle,
        })
    }
}

/// Control state (`struct red_vars`), cleared by reset.
#[derive(Clone, Debug)]
pub struct Vars {
    /// Average backlog, bytes.
    pub avg: f64,
    /// Arrivals since the last mark while in the band; −1 outside it (`qcount`).
    pub count: i64,
    /// The uniform draw the next mark waits for (`qR`).
    pub u: f64,
    /// Start of the current idle period, if idle.
    pub idle_since: Option<Nanos>,
    /// max_p as adapted (adaptive RED), else the configured one.
    pub max_p: f64,
    pub next_adapt: Option<Nanos>,
}

/// `struct red_stats` / tc -s names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub prob_drop: u64,
    pub prob_mark: u64,
    pub forced_drop: u64,
    pub forced_mark: u64,
    /// Drops by the child FIFO's byte limit.
    pub pdrop: u64,
}

/// What `red_action` decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    DontMark,
    ProbMark,
    HardMark,
}

/// The RED control law, shared by RED (queue measured in bytes, as sch_red) and CHOKe
/// (packets, as sch_choke): the EWMA with idle decay, the count/U spacing of marks, Floyd's
/// gentle ramp and adaptive max_p (include/net/red.h).
#[derive(Clone, Debug)]
pub struct RedLaw {
    /// Thresholds on the average, in the queue's unit.
    pub min: f64,
    pub max: f64,
    /// EWMA weight W = 2^−Wlog.
    pub wlog: u32,
    /// The configured max_p (adaptive RED starts from it).
    pub max_p: f64,
    pub gentle: bool,
    pub adaptive: bool,
    /// Transmission time of an average packet at `bandwidth`, ns: the idle-decay unit.
    pub xmit_ns: f64,
    pub vars: Vars,
    rng: Rng,
}

impl RedLaw {
    // The arguments of tc's red options as `red_set_parms` takes them (qth_min, qth_max,
    // Wlog, max_P, ...), one to one.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        min: f64,
        max: f64,
        wlog: u32,
        max_p: f64,
        avpkt_bytes: u64,
        bandwidth_bps: u64,
        gentle: bool,
        adaptive: bool,
        rng: Rng,
    ) -> Self {
        RedLaw {
            min,
            max,
            wlog,
            max_p,
            gentle,
            adaptive,
            xmit_ns: avpkt_bytes as f64 * 8.0 * 1e9 / bandwidth_bps as f64,
            vars: Vars {
                avg: 0.0,
                count: -1,
                u: 0.0,
                idle_since: Some(0),
                max_p,
                next_adapt: None,
            },
            rng,
        }
    }

    /// Clear the control state, keep the parameters (`red_restart`).
    pub fn reset(&mut self) {
        self.vars = Vars {
            avg: 0.0,
            count: -1,
            u: 0.0,
            idle_since: Some(0),
            max_p: self.max_p,
            next_adapt: None,
        };
    }

    fn w(&self) -> f64 {
        (-(self.wlog as f64)).exp2()
    }

    /// `red_calc_qavg`: the EWMA of `q`, or the idle decay when the queue has been idle.
    pub fn calc_avg(&self, now: Nanos, q: f64) -> f64 {
        match self.vars.idle_since {
            Some(t0) => {
                // m = idle time / transmission time of an average packet at `bandwidth`.
                let m = (now - t0) as f64 / self.xmit_ns;
                self.vars.avg * (1.0 - self.w()).powf(m)
            }
            None => self.vars.avg + (q - self.vars.avg) * self.w(),
        }
    }

    /// p_b at the current average, with the gentle extension above max.
    pub fn prob(&self, avg: f64) -> f64 {
        let (min, max) = (self.min, self.max);
        if avg < max {
            // Linux: a band of width 0 (min == max) is treated as 1 unit wide.
            let delta = (max - min).max(1.0);
            self.vars.max_p * (avg - min) / delta
        } else {
            // Gentle: a ramp from max_p at max to 1 at 2·max (Floyd 2000).
            self.vars.max_p + (1.0 - self.vars.max_p) * (avg - max) / max
        }
    }

    /// `red_action`.
    pub fn action(&mut self, avg: f64) -> Action {
        let (min, max) = (self.min, self.max);
        let hard_from = if self.gentle { 2.0 * max } else { max };
        if avg < min {
            self.vars.count = -1;
            return Action::DontMark;
        }
        if avg >= hard_from {
            self.vars.count = -1;
            return Action::HardMark;
        }
        if self.band_step(avg) {
            Action::ProbMark
        } else {
            Action::DontMark
        }
    }

    /// One arrival in the band between the thresholds: the divisionless spacing of
    /// `red_action`/`red_mark_probability`. Returns whether to mark.
    pub fn band_step(&mut self, avg: f64) -> bool {
        self.vars.count += 1;
        if self.vars.count > 0 {
            // red_mark_probability: mark when p_b·count ≥ U.
            if self.prob(avg) * self.vars.count as f64 >= self.vars.u {
                self.vars.count = 0;
                self.vars.u = uniform01(&mut self.rng);
                return true;
            }
        } else {
            // First arrival in the band: draw U, never mark.
            self.vars.u = uniform01(&mut self.rng);
        }
        false
    }

    /// A uniform index in [0, n) from the law's random stream (CHOKe's victim draw).
    pub fn random_index(&mut self, n: usize) -> usize {
        use rand_core::Rng as _;
        (self.rng.next_u64() % n as u64) as usize
    }

    /// `red_adaptative_algo`, run for every 500 ms tick up to `now`; `q` is the queue now.
    pub fn adapt(&mut self, now: Nanos, q: f64) {
        if !self.adaptive {
            return;
        }
        let next = *self.vars.next_adapt.get_or_insert(ADAPTIVE_INTERVAL_NS);
        if next > now {
            return;
        }
        let delta = self.max - self.min;
        let (target_min, target_max) = (self.min + 2.0 * delta / 5.0, self.min + 3.0 * delta / 5.0);
        let mut t = next;
        let mut n = 0;
        while t <= now {
            if n < ADAPTIVE_MAX_CATCHUP {
                let avg = self.calc_avg(t, q);
                if avg > target_max && self.vars.max_p <= MAX_P_MAX {
                    // max_p += alpha, alpha = min(0.01, max_p/4).
                    self.vars.max_p += MAX_P_MIN.min(self.vars.max_p / 4.0);
                } else if avg < target_min && self.vars.max_p >= MAX_P_MIN {
                    // max_p *= beta = 0.9.
                    self.vars.max_p *= 0.9;
                }
                n += 1;
            }
            t += ADAPTIVE_INTERVAL_NS;
        }
        self.vars.next_adapt = Some(t);
    }

    /// An arrival finds the queue at `q`: adapt, update the average, end any idle period,
    /// and decide.
    pub fn on_arrival(&mut self, now: Nanos, q: f64) -> Action {
        self.adapt(now, q);
        self.vars.avg = self.calc_avg(now, q);
        self.vars.idle_since = None;
        self.action(self.vars.avg)
    }

    /// A dequeue found the queue empty (`red_start_of_idle_period`).
    pub fn start_idle(&mut self, now: Nanos) {
        if self.vars.idle_since.is_none() {
            self.vars.idle_since = Some(now);
        }
    }
}

#[derive(Clone, Debug)]
pub struct Red<P> {
    pub params: Params,
    pub law: RedLaw,
    pub stats: Stats,
    queue: Fifo<P>,
}

impl<P: Packet> Red<P> {
    /// The discipline for engine parameters `options`, checked; `seed` seeds its random stream.
    pub fn build(options: &TcOptions, seed: u64) -> Result<Self, OptionError> {
        Ok(Self::new(options.derive()?, crate::rng_from_seed(seed)))
    }

    pub fn new(params: Params, rng: Rng) -> Self {
        let law = RedLaw::new(
            params.min_bytes,
            params.max_bytes,
            params.wlog,
            params.max_p,
            params.avpkt_bytes,
            params.bandwidth_bps,
            params.gentle,
            params.adaptive,
            rng,
        );
        Red {
            params,
            law,
            stats: Stats::default(),
            queue: Fifo::default(),
        }
    }

    fn mark_or_drop(
        &mut self,
        mut pkt: P,
        now: Nanos,
        hard: bool,
        out: &mut impl Verdicts<P>,
    ) -> Option<P> {
        let may_mark = self.params.ecn && !(hard && self.params.harddrop);
        if may_mark && pkt.ecn().is_ect_or_ce() {
            pkt.set_ce();
            if hard {
                self.stats.forced_mark += 1;
                out.marked(&pkt, MarkReason::Forced, now);
            } else {
                self.stats.prob_mark += 1;
                out.marked(&pkt, MarkReason::Prob, now);
            }
            return Some(pkt);
        }
        if may_mark && self.params.nodrop {
            // Not-ECT packet in ECN nodrop mode: queue it unmarked.
            return Some(pkt);
        }
        if hard {
            self.stats.forced_drop += 1;
            out.dropped(pkt, DropReason::Forced, now);
        } else {
            self.stats.prob_drop += 1;
            out.dropped(pkt, DropReason::Early, now);
        }
        None
    }
}

impl<P: Packet> Qdisc<P> for Red<P> {
    fn enqueue(&mut self, pkt: P, now: Nanos, out: &mut impl Verdicts<P>) {
        let pkt = match self.law.on_arrival(now, self.queue.bytes() as f64) {
            Action::DontMark => Some(pkt),
            Action::ProbMark => self.mark_or_drop(pkt, now, false, out),
            Action::HardMark => self.mark_or_drop(pkt, now, true, out),
        };
        let Some(mut pkt) = pkt else { return };
        // The child bfifo.
        if self.queue.bytes() + pkt.wire_len() as u64 > self.params.limit_bytes {
            self.stats.pdrop += 1;
            out.dropped(pkt, DropReason::Overflow, now);
            return;
        }
        pkt.set_enqueue_ns(now);
        self.queue.push(pkt);
    }

    fn dequeue(&mut self, now: Nanos, _out: &mut impl Verdicts<P>) -> Option<P> {
        self.law.adapt(now, self.queue.bytes() as f64);
        let p = self.queue.pop();
        if p.is_none() {
            self.law.start_idle(now);
        }
        p
    }

    fifo_accessors!();

    fn reset(&mut self) -> Vec<P> {
        self.law.reset();
        self.queue.drain()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng_from_seed;
    use crate::testing::{pkt, Recorder};
    use crate::Ecn;

    fn opts(limit: u64, avpkt: u64) -> TcOptions {
        TcOptions {
            limit: Some(limit),
            avpkt: Some(avpkt),
            ..Default::default()
        }
    }

    #[test]
    fn tc_line_derives_wlog_7_default_max_p_and_byte_thresholds() {
        // `red limit 1600000 min 120000 max 360000 avpkt 1000 burst 220 ecn bandwidth 40Mbit`:
        // a = 220 + 1 − 120 = 101. At W = 1/64: (1 − (63/64)^220)/W = 64·(1 − 0.0312) = 62.0
        // < 101; at W = 1/128: 128·(1 − (127/128)^220) = 128·(1 − 0.1784) = 105.2 ≥ 101 ⇒ 7.
        let o = TcOptions {
            min: Some(120_000),
            max: Some(360_000),
            burst: Some(220),
            ecn: true,
            bandwidth: Some(40_000_000),
            ..opts(1_600_000, 1000)
        };
        let p = o.derive().unwrap();
        assert_eq!(p.wlog, 7);
        assert_eq!(p.max_p, 0.02);
        assert_eq!((p.min_bytes, p.max_bytes), (120_000.0, 360_000.0));
    }

    #[test]
    fn ckcd_defaults_from_limit_and_avpkt() {
        // limit 120000, avpkt 1500: max = limit/4 = 30000, min = max/3 = 10000,
        // burst = (2·10000 + 30000)/(3·1500) = 50000/4500 = 11; a = 11 + 1 − 6.67 = 5.33;
        // W = 1/4: 4·(1 − 0.75^11) = 3.83 < 5.33; W = 1/8: 8·(1 − 0.875^11) = 6.16 ⇒ Wlog 3.
        let p = opts(120_000, 1500).derive().unwrap();
        assert_eq!(
            (p.max_bytes, p.min_bytes, p.burst_pkts, p.wlog),
            (30_000.0, 10_000.0, 11, 3)
        );
    }

    #[test]
    fn derivation_errors_name_the_option() {
        assert!(
            TcOptions {
                limit: None,
                ..opts(1, 1)
            }
            .derive()
            .unwrap_err()
            .key == "limit"
        );
        assert!(
            TcOptions {
                avpkt: None,
                ..opts(1, 1)
            }
            .derive()
            .unwrap_err()
            .key == "avpkt"
        );
        let bad = TcOptions {
            min: Some(300),
            max: Some(200),
            ..opts(10_000, 100)
        };
        assert!(bad.derive().unwrap_err().key == "max");
        // a = burst + 1 − min/avpkt = 1 + 1 − 10 < 1.
        let small = TcOptions {
            min: Some(1000),
            max: Some(3000),
            burst: Some(1),
            ..opts(10_000, 100)
        };
        assert!(small.derive().unwrap_err().key == "burst");
        let p = TcOptions {
            probability: Some(1.5),
            ..opts(10_000, 100)
        };
        assert!(p.derive().unwrap_err().key == "probability");
    }

    /// A RED whose average tracks the instantaneous backlog closely (W = 1/2) for behaviour
    /// tests; thresholds 3000/6000 B.
    fn red(ecn: bool, harddrop: bool, gentle: bool) -> Red<crate::testing::TestPkt> {
        let o = TcOptions {
            min: Some(3000),
            max: Some(6000),
            burst: Some(4),
            probability: Some(0.1),
            ecn,
            harddrop,
            gentle,
            ..opts(1_000_000, 1000)
        };
        let mut p = o.derive().unwrap();
        p.wlog = 1;
        Red::new(p, rng_from_seed(1))
    }

    #[test]
    fn below_min_nothing_happens() {
        let mut q = red(true, false, false);
        let mut r = Recorder::default();
        for i in 0..2 {
            q.enqueue(pkt(i, 1000, Ecn::Ect0), 0, &mut r);
        }
        assert!(r.marks.is_empty() && r.drops.is_empty());
        assert_eq!(q.law.vars.count, -1);
    }

    #[test]
    fn above_max_ecn_marks_ect_and_drops_not_ect_unless_harddrop() {
        // Fill to a backlog far above max so avg (W = 1/2) exceeds 6000 B.
        let mut q = red(true, false, false);
        q.law.vars.avg = 50_000.0;
        q.law.vars.idle_since = None;
        let mut r = Recorder::default();
        q.enqueue(pkt(0, 1000, Ecn::Ect0), 0, &mut r);
        q.enqueue(pkt(1, 1000, Ecn::NotEct), 0, &mut r);
        assert_eq!(
            r.marks
                .iter()
                .map(|(p, w)| (p.flow, *w))
                .collect::<Vec<_>>(),
            vec![(0, MarkReason::Forced)]
        );
        assert_eq!(
            r.drops
                .iter()
                .map(|(p, w)| (p.flow, *w))
                .collect::<Vec<_>>(),
            vec![(1, DropReason::Forced)]
        );
        let mut q = red(true, true, false);
        q.law.vars.avg = 50_000.0;
        q.law.vars.idle_since = None;
        let mut r = Recorder::default();
        q.enqueue(pkt(0, 1000, Ecn::Ect0), 0, &mut r);
        assert!(r.marks.is_empty());
        assert_eq!(r.drops.len(), 1, "harddrop drops ECT too");
    }

    #[test]
    fn long_run_mark_rate_in_the_band_follows_the_divisionless_spacing() {
        // Hold avg in the band at p_b = 0.1·(12000 − 2000)/20000 = 0.05. After a mark, count restarts
        // at 0 and U is redrawn; the k-th arrival after it is marked when k·p_b ≥ U, so the
        // gap is G = ⌈U/p_b⌉ with U/p_b uniform on [0, 20): G uniform on {1, …, 20}, E[G] =
        // 10.5, mark rate 1/10.5 = 0.0952 (= 2p_b/(1 + p_b): gaps uniform on [1, 1/p_b]). Over 200 000
        // arrivals σ ≈ 0.0006; allow ±0.003.
        // (tc needs min/avpkt > 1 to derive a weight; burst 1000 gives W = 1/512.)
        let o = TcOptions {
            min: Some(2000),
            max: Some(22_000),
            burst: Some(1000),
            probability: Some(0.1),
            ecn: true,
            ..opts(100_000_000, 1000)
        };
        let p = o.derive().unwrap();
        let mut q = Red::new(p, rng_from_seed(7));
        let mut r = Recorder::default();
        let n = 200_000;
        for i in 0..n {
            q.law.vars.avg = 12_000.0;
            q.law.vars.idle_since = None;
            // Zero-byte packets leave the backlog (and so the EWMA input) at 0; the average is
            // re-pinned before each arrival.
            q.enqueue(pkt(i, 0, Ecn::Ect0), 0, &mut r);
            q.queue.pop();
        }
        // The EWMA step moves avg by W·12000 ≈ 23 B per arrival: p_b ≥ 0.0499.
        let rate = r.marks.len() as f64 / n as f64;
        assert!((rate - 1.0 / 10.5).abs() < 0.003, "mark rate {rate}");
    }

    #[test]
    fn idle_period_decays_the_average_exactly() {
        // W = 1/2, avpkt 1000 B at 8 Mbit/s = 1 ms per packet: after 3 ms idle the average is
        // multiplied by (1/2)^3.
        let o = TcOptions {
            min: Some(3000),
            max: Some(6000),
            burst: Some(4),
            bandwidth: Some(8_000_000),
            ..opts(1_000_000, 1000)
        };
        let mut p = o.derive().unwrap();
        p.wlog = 1;
        let mut q: Red<crate::testing::TestPkt> = Red::new(p, rng_from_seed(1));
        let mut r = Recorder::default();
        q.law.vars.avg = 8000.0;
        q.law.vars.idle_since = None;
        assert!(q.dequeue(1_000_000, &mut r).is_none()); // empty: idle from t = 1 ms
        q.enqueue(pkt(0, 1000, Ecn::NotEct), 4_000_000, &mut r);
        assert!(
            (q.law.vars.avg - 1000.0).abs() < 1e-9,
            "avg {}",
            q.law.vars.avg
        );
    }

    #[test]
    fn adaptive_red_raises_max_p_when_above_target_and_lowers_it_when_below() {
        let mut q = red(true, false, false);
        q.law.adaptive = true;
        let mut r = Recorder::default();
        q.law.vars.idle_since = None;
        // Target band: [3000 + 1200, 3000 + 1800] = [4200, 4800]. Above it at the 500 ms tick:
        q.law.vars.avg = 5500.0;
        q.queue.push(pkt(0, 5500, Ecn::Ect0));
        q.dequeue(499_999_999, &mut r);
        q.queue.push(pkt(0, 5500, Ecn::Ect0));
        let before = q.law.vars.max_p;
        q.enqueue(pkt(1, 1, Ecn::Ect0), 500_000_000, &mut r);
        // alpha = min(0.01, 0.1/4) = 0.01.
        assert!((q.law.vars.max_p - (before + 0.01)).abs() < 1e-12);
        // Below the band: ×0.9 at the next tick.
        q.reset();
        q.law.vars.avg = 0.0;
        q.law.vars.idle_since = None;
        q.law.vars.next_adapt = Some(1_000_000_000);
        q.law.vars.max_p = 0.2;
        q.enqueue(pkt(2, 1, Ecn::Ect0), 1_000_000_000, &mut r);
        assert!((q.law.vars.max_p - 0.18).abs() < 1e-12);
    }

    #[test]
    fn gentle_ramps_from_max_p_to_one_between_max_and_twice_max() {
        // At 1.5·max = 9000 B: p_b = 0.1 + 0.9·(9000 − 6000)/6000 = 0.55; hard marks only from
        // 12000 B.
        let q = red(true, false, true);
        assert!((q.law.prob(9000.0) - 0.55).abs() < 1e-12);
        let mut q = red(true, false, true);
        q.law.vars.avg = 11_000.0;
        q.law.vars.idle_since = None;
        assert_eq!(
            q.law.action(11_000.0),
            Action::DontMark,
            "first arrival in the band is never marked"
        );
        assert_eq!(q.law.action(12_000.0), Action::HardMark);
    }
}
