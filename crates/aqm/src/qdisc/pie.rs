//! PIE — Proportional Integral controller Enhanced.
//!
//! Sources: R. Pan et al., IEEE HPSR 2013; RFC 8033 §4–5; Linux net/sched/sch_pie.c
//! (`pie_qdisc_enqueue`) and include/net/pie.h with sch_pie.c's exported helpers
//! (`pie_drop_early`, `pie_process_dequeue`, `pie_calculate_probability`, `pie_vars_init`) —
//! Linux behaviour where the two differ, since Linux is what a testbed runs.
//!
//! Every `tupdate` the drop probability moves by α·(qdelay − target) + β·(qdelay − qdelay_old),
//! with α and β scaled down while p is small (÷2 below 10 %, then ÷4 per decade down to
//! 10⁻⁶: RFC 8033 §4.2's table), the step capped at +2 % once p ≥ 10 % (RFC §5.5), +2 % extra
//! while qdelay > 250 ms (Linux), and ×(1 − 1/64) decay after two updates with no delay. The
//! delay is the sojourn of the last dequeued packet (timestamps, Linux's default) or
//! backlog / drain rate (`dq_rate_estimator`, RFC §5.2 as Linux averages it). Arrivals are
//! dropped early — not within the 150 ms burst allowance, nor while qdelay < target/2 and
//! p < 20 %, nor below two MTUs of backlog — with RFC §5.4's derandomisation; with `ecn`, ECT
//! packets are marked instead while p ≤ 10 %.
//!
//! Deviations: f64 probability instead of Linux's 56-bit fixed point; the controller runs
//! lazily from `now` (every missed `tupdate` is replayed at its own time, since the state a
//! tick reads — the last measured delay, the backlog — is constant between calls), starting at
//! t = tupdate rather than 500 ms after qdisc creation (aqmlab's choice).

use crate::fifo::{fifo_accessors, Fifo};
use crate::options::{About, Link, Lowered, Opt, OptionError, Range, ScenarioOptions, Unit};
use crate::{uniform01, DropReason, MarkReason, Nanos, Packet, Qdisc, Rng, Verdicts};

/// `QUEUE_THRESHOLD`: bytes per drain-rate sample (include/net/pie.h).
const QUEUE_THRESHOLD: u64 = 16_384;
/// Burst allowance restored by `pie_vars_init`: 150 ms.
const MAX_BURST_NS: Nanos = 150_000_000;
/// Missed updates replayed one by one per call at most; beyond that the controller is at its
/// fixed point (p decays by 1/64 per tick with no delay: after 5 000 ticks p < 10⁻³⁴), so the
/// rest are skipped.
const MAX_CATCHUP: u32 = 5_000;

#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields, default)
)]
pub struct Params {
    /// `target`: queueing-delay reference, ns (15 ms).
    pub target_ns: Nanos,
    /// `tupdate`: controller period, ns (15 ms).
    pub tupdate_ns: Nanos,
    /// `limit`: packets (1000).
    pub limit: u64,
    /// `alpha` in tc's units of 1/16 Hz (2 ⇒ 0.125 Hz).
    pub alpha: u32,
    /// `beta` in 1/16 Hz (20 ⇒ 1.25 Hz).
    pub beta: u32,
    pub ecn: bool,
    /// Scale p by len/MTU (Linux `bytemode`).
    pub bytemode: bool,
    /// Little's-law delay from the drain rate instead of timestamps.
    pub dq_rate_estimator: bool,
    /// `psched_mtu`, bytes (1514).
    pub mtu_bytes: u64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            target_ns: 15_000_000,
            tupdate_ns: 15_000_000,
            limit: 1000,
            alpha: 2,
            beta: 20,
            ecn: false,
            bytemode: false,
            dq_rate_estimator: false,
            mtu_bytes: 1514,
        }
    }
}

impl Params {
    pub fn validate(&self) -> Result<(), OptionError> {
        if self.target_ns == 0 {
            return Err(OptionError::new("target", "must be positive"));
        }
        if self.tupdate_ns == 0 {
            return Err(OptionError::new("tupdate", "must be positive"));
        }
        if self.alpha > 32 {
            return Err(OptionError::new(
                "alpha",
                format!("{} must be 0..=32 (units of 1/16 Hz, as tc)", self.alpha),
            ));
        }
        if self.beta > 32 {
            return Err(OptionError::new(
                "beta",
                format!("{} must be 0..=32 (units of 1/16 Hz, as tc)", self.beta),
            ));
        }
        if self.limit == 0 {
            return Err(OptionError::new("limit", "must be positive"));
        }
        Ok(())
    }
}

/// The scenario's options (tc-pie(8)'s names; times in ns).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields, default)
)]
pub struct Options {
    pub target: Nanos,
    pub tupdate: Nanos,
    pub limit: u64,
    pub alpha: u32,
    pub beta: u32,
    pub ecn: bool,
    pub bytemode: bool,
    pub dq_rate_estimator: bool,
}

impl Default for Options {
    fn default() -> Self {
        let p = Params::default();
        Options {
            target: p.target_ns,
            tupdate: p.tupdate_ns,
            limit: p.limit,
            alpha: p.alpha,
            beta: p.beta,
            ecn: p.ecn,
            bytemode: p.bytemode,
            dq_rate_estimator: p.dq_rate_estimator,
        }
    }
}

/// PIE's options, shared with FQ-PIE.
pub(crate) const PIE_OPTIONS: [Opt; 7] = [
    Opt::new(
        "target",
        Unit::DelayTarget,
        Range::POSITIVE,
        "queueing-delay reference (also the summary's delay target)",
        "RFC 8033 §4.1 QDELAY_REF; tc-pie(8) target",
    ),
    Opt::new(
        "tupdate",
        Unit::Time,
        Range::POSITIVE,
        "drop-probability update period",
        "RFC 8033 §4.1 T_UPDATE; tc-pie(8) tupdate",
    ),
    Opt::new(
        "alpha",
        Unit::Int,
        Range::closed(0.0, 32.0),
        "integral gain in 1/16 Hz (2 = 0.125 Hz)",
        "tc-pie(8) alpha; net/sched/sch_pie.c pie_change",
    ),
    Opt::new(
        "beta",
        Unit::Int,
        Range::closed(0.0, 32.0),
        "proportional gain in 1/16 Hz (20 = 1.25 Hz)",
        "tc-pie(8) beta; net/sched/sch_pie.c pie_change",
    ),
    Opt::new(
        "ecn",
        Unit::Bool,
        Range::ANY,
        "CE-mark ECT packets instead of dropping while p ≤ 10 %",
        "RFC 8033 §5.1; tc-pie(8) ecn",
    ),
    Opt::new(
        "bytemode",
        Unit::Bool,
        Range::ANY,
        "scale the drop probability by packet size / MTU",
        "tc-pie(8) bytemode; include/net/pie.h pie_drop_early",
    ),
    Opt::new(
        "dq_rate_estimator",
        Unit::Bool,
        Range::ANY,
        "queue delay from the drain rate (Little's law) instead of timestamps",
        "RFC 8033 §5.2; tc-pie(8) dq_rate_estimator",
    ),
];

impl ScenarioOptions for Options {
    type Config = Params;
    const ABOUT: About = About {
        kind: "pie",
        summary: "PIE: a PI controller on the queue delay drops (or marks) arrivals early",
        source: "Pan et al., HPSR 2013; RFC 8033; Linux net/sched/sch_pie.c, include/net/pie.h",
        one_of: &[],
        reads_packet_values: false,
        options: &[
            PIE_OPTIONS[0],
            PIE_OPTIONS[1],
            Opt::new(
                "limit",
                Unit::Packets,
                Range::POSITIVE,
                "packet limit of the queue",
                "tc-pie(8) limit; sch_pie.c pie_init (1000)",
            ),
            PIE_OPTIONS[2],
            PIE_OPTIONS[3],
            PIE_OPTIONS[4],
            PIE_OPTIONS[5],
            PIE_OPTIONS[6],
        ],
    };

    fn lower(&self, _link: &Link) -> Result<Lowered<Self::Config>, OptionError> {
        let params = Params {
            target_ns: self.target,
            tupdate_ns: self.tupdate,
            limit: self.limit,
            alpha: self.alpha,
            beta: self.beta,
            ecn: self.ecn,
            bytemode: self.bytemode,
            dq_rate_estimator: self.dq_rate_estimator,
            ..Params::default()
        };
        params.validate()?;
        Ok(Lowered {
            config: params,
            delay_target_ns: Some(self.target),
        })
    }
}

/// `struct pie_vars`.
#[derive(Clone, Debug)]
pub struct Vars {
    /// Drop probability.
    pub prob: f64,
    /// Current queue delay, ns.
    pub qdelay_ns: Nanos,
    pub qdelay_old_ns: Nanos,
    pub burst_ns: Nanos,
    pub accu_prob: f64,
    /// Time of the last dequeue (timestamp mode) or measurement start (rate mode).
    pub dq_tstamp: Option<Nanos>,
    /// Bytes counted in the current drain-rate measurement (None: not measuring).
    pub dq_count: Option<u64>,
    /// Average drain rate, bytes/ns.
    pub avg_dq_rate: f64,
    pub next_update_ns: Nanos,
}

impl Vars {
    fn new(tupdate_ns: Nanos) -> Self {
        Vars {
            prob: 0.0,
            qdelay_ns: 0,
            qdelay_old_ns: 0,
            burst_ns: MAX_BURST_NS,
            accu_prob: 0.0,
            dq_tstamp: None,
            dq_count: None,
            avg_dq_rate: 0.0,
            next_update_ns: tupdate_ns,
        }
    }

    /// `pie_vars_init`: restore the burst allowance and restart measurement (p and the
    /// delays are kept).
    fn reinit(&mut self) {
        self.burst_ns = MAX_BURST_NS;
        self.dq_tstamp = None;
        self.accu_prob = 0.0;
        self.dq_count = None;
        self.avg_dq_rate = 0.0;
    }
}

/// tc -s names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub dropped: u64,
    pub overlimit: u64,
    pub ecn_mark: u64,
}

/// PIE's controller and early-drop state for one queue, shared by PIE and FQ-PIE (one per
/// bucket there, as `sch_fq_pie.c` reuses sch_pie's exported helpers).
#[derive(Clone, Debug)]
pub struct PieLaw {
    pub vars: Vars,
}

impl PieLaw {
    pub fn new(params: &Params) -> Self {
        PieLaw {
            vars: Vars::new(params.tupdate_ns),
        }
    }

    /// Run every controller tick due by `now`; `backlog` (bytes) is constant since the last
    /// call, so each tick sees exactly what a timer would have.
    #[inline]
    pub fn catch_up(&mut self, p: &Params, now: Nanos, backlog: u64) {
        let mut n = 0;
        while self.vars.next_update_ns <= now {
            if n < MAX_CATCHUP {
                self.calculate_probability(p, backlog);
            }
            n += 1;
            self.vars.next_update_ns += p.tupdate_ns;
        }
    }

    /// α and β in 1/s per second of delay error, scaled down for small p (RFC 8033 §4.2).
    pub fn gains(&self, params: &Params) -> (f64, f64) {
        let mut alpha = params.alpha as f64 / 16.0;
        let mut beta = params.beta as f64 / 16.0;
        let p = self.vars.prob;
        if p < 0.1 {
            alpha /= 2.0;
            beta /= 2.0;
            let mut power = 100.0;
            while p < 1.0 / power && power <= 1e6 {
                alpha /= 4.0;
                beta /= 4.0;
                power *= 10.0;
            }
        }
        (alpha, beta)
    }

    /// `pie_calculate_probability`.
    pub fn calculate_probability(&mut self, params: &Params, backlog: u64) {
        let (qdelay, qdelay_old) = if params.dq_rate_estimator {
            self.vars.qdelay_old_ns = self.vars.qdelay_ns;
            let q = if self.vars.avg_dq_rate > 0.0 {
                (backlog as f64 / self.vars.avg_dq_rate) as Nanos
            } else {
                0
            };
            (q, self.vars.qdelay_old_ns)
        } else {
            (self.vars.qdelay_ns, self.vars.qdelay_old_ns)
        };
        // A zero delay with a backlog means a very small queue: no decay this round.
        let mut update_prob = !(qdelay == 0 && backlog != 0);
        let (alpha, beta) = self.gains(params);
        let secs = |ns: i64| ns as f64 / 1e9;
        let mut delta = alpha * secs(qdelay as i64 - params.target_ns as i64)
            + beta * secs(qdelay as i64 - qdelay_old as i64);
        // At most +2 % per update once p ≥ 10 % (RFC 8033 §5.5).
        if delta > 0.02 && self.vars.prob >= 0.1 {
            delta = 0.02;
        }
        // Linux: beyond 250 ms of delay, +2 % each update.
        if qdelay > 250_000_000 {
            delta += 0.02;
        }
        let p = self.vars.prob + delta;
        if p >= 1.0 {
            self.vars.prob = 1.0;
            update_prob = false;
        } else {
            self.vars.prob = p.max(0.0);
        }
        // Two updates with no delay: decay to 98.4 %.
        if qdelay == 0 && qdelay_old == 0 && update_prob {
            self.vars.prob -= self.vars.prob / 64.0;
        }
        self.vars.qdelay_ns = qdelay;
        // Restart the measurement cycle once the delay has been low for two updates with p = 0.
        if self.vars.qdelay_ns < params.target_ns / 2
            && self.vars.qdelay_old_ns < params.target_ns / 2
            && self.vars.prob == 0.0
            && (!params.dq_rate_estimator || self.vars.avg_dq_rate > 0.0)
        {
            self.vars.reinit();
        }
        if !params.dq_rate_estimator {
            self.vars.qdelay_old_ns = qdelay;
        }
    }

    /// `pie_drop_early` for an arrival of `pkt_len` bytes finding `backlog` bytes queued.
    #[inline]
    pub fn drop_early(
        &mut self,
        params: &Params,
        backlog: u64,
        pkt_len: u32,
        rng: &mut Rng,
    ) -> bool {
        if self.vars.burst_ns > 0 {
            return false;
        }
        if self.vars.qdelay_ns < params.target_ns / 2 && self.vars.prob < 0.2 {
            return false;
        }
        if backlog < 2 * params.mtu_bytes {
            return false;
        }
        let local = if params.bytemode && pkt_len as u64 <= params.mtu_bytes {
            self.vars.prob * pkt_len as f64 / params.mtu_bytes as f64
        } else {
            self.vars.prob
        };
        // Derandomisation (RFC 8033 §5.4).
        if local == 0.0 {
            self.vars.accu_prob = 0.0;
        } else {
            self.vars.accu_prob += local;
        }
        if self.vars.accu_prob < 0.85 {
            return false;
        }
        if self.vars.accu_prob >= 8.5 {
            return true;
        }
        if uniform01(rng) < local {
            self.vars.accu_prob = 0.0;
            return true;
        }
        false
    }

    /// `pie_process_dequeue` for a packet of `pkt_len` bytes enqueued at `enqueued_ns` that
    /// just left, `backlog` bytes remaining.
    #[inline]
    pub fn process_dequeue(
        &mut self,
        params: &Params,
        enqueued_ns: Nanos,
        pkt_len: u32,
        backlog: u64,
        now: Nanos,
    ) {
        let dtime;
        if !params.dq_rate_estimator {
            self.vars.qdelay_ns = now - enqueued_ns;
            dtime = self.vars.dq_tstamp.map_or(0, |t| now - t);
            self.vars.dq_tstamp = Some(now);
            if backlog == 0 {
                self.vars.qdelay_ns = 0;
            }
            if dtime == 0 {
                return;
            }
        } else {
            if backlog >= QUEUE_THRESHOLD && self.vars.dq_count.is_none() {
                self.vars.dq_tstamp = Some(now);
                self.vars.dq_count = Some(0);
            }
            let Some(count) = self.vars.dq_count else {
                return;
            };
            let count = count + pkt_len as u64;
            self.vars.dq_count = Some(count);
            if count < QUEUE_THRESHOLD {
                return;
            }
            let start = self.vars.dq_tstamp.unwrap_or(now);
            dtime = now - start;
            if dtime == 0 {
                return;
            }
            let rate = count as f64 / dtime as f64;
            // Linux averages the rate with weight 1/8; the first sample is taken as is.
            self.vars.avg_dq_rate = if self.vars.avg_dq_rate == 0.0 {
                rate
            } else {
                self.vars.avg_dq_rate * 7.0 / 8.0 + rate / 8.0
            };
            if backlog < QUEUE_THRESHOLD {
                self.vars.dq_count = None;
            } else {
                self.vars.dq_count = Some(0);
                self.vars.dq_tstamp = Some(now);
            }
        }
        self.vars.burst_ns = self.vars.burst_ns.saturating_sub(dtime);
    }
}

#[derive(Clone, Debug)]
pub struct Pie<P> {
    pub params: Params,
    pub law: PieLaw,
    pub stats: Stats,
    rng: Rng,
    queue: Fifo<P>,
}

impl<P: Packet> Pie<P> {
    /// The discipline for engine parameters `params`, checked; `seed` seeds its random stream.
    pub fn build(params: &Params, seed: u64) -> Result<Self, OptionError> {
        params.validate()?;
        Ok(Self::new(params.clone(), crate::rng_from_seed(seed)))
    }

    pub fn new(params: Params, rng: Rng) -> Self {
        let law = PieLaw::new(&params);
        Pie {
            params,
            law,
            stats: Stats::default(),
            rng,
            queue: Fifo::default(),
        }
    }

    fn catch_up(&mut self, now: Nanos) {
        self.law.catch_up(&self.params, now, self.queue.bytes());
    }

    /// α and β for the current p.
    pub fn gains(&self) -> (f64, f64) {
        self.law.gains(&self.params)
    }

    pub fn calculate_probability(&mut self) {
        self.law
            .calculate_probability(&self.params, self.queue.bytes());
    }
}

impl<P: Packet> Qdisc<P> for Pie<P> {
    fn enqueue(&mut self, mut pkt: P, now: Nanos, out: &mut impl Verdicts<P>) {
        self.catch_up(now);
        if self.queue.len() as u64 >= self.params.limit {
            self.stats.overlimit += 1;
            self.stats.dropped += 1;
            self.law.vars.accu_prob = 0.0;
            out.dropped(pkt, DropReason::Overflow, now);
            return;
        }
        if self.law.drop_early(
            &self.params,
            self.queue.bytes(),
            pkt.wire_len(),
            &mut self.rng,
        ) {
            if self.params.ecn && self.law.vars.prob <= 0.1 && pkt.ecn().is_ect_or_ce() {
                pkt.set_ce();
                self.stats.ecn_mark += 1;
                out.marked(&pkt, MarkReason::Prob, now);
            } else {
                self.stats.dropped += 1;
                self.law.vars.accu_prob = 0.0;
                // ECT packets dropped because p is above 10 % are PIE's overload safeguard.
                let why = if self.params.ecn && pkt.ecn().is_ect_or_ce() {
                    DropReason::Overload
                } else {
                    DropReason::Early
                };
                out.dropped(pkt, why, now);
                return;
            }
        }
        pkt.set_enqueue_ns(now);
        self.queue.push(pkt);
    }

    fn dequeue(&mut self, now: Nanos, _out: &mut impl Verdicts<P>) -> Option<P> {
        self.catch_up(now);
        let p = self.queue.pop()?;
        self.law.process_dequeue(
            &self.params,
            p.enqueue_ns(),
            p.wire_len(),
            self.queue.bytes(),
            now,
        );
        Some(p)
    }

    fifo_accessors!();

    fn reset(&mut self) -> Vec<P> {
        self.law.vars = Vars::new(self.law.vars.next_update_ns);
        self.queue.drain()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng_from_seed;
    use crate::testing::{pkt, Recorder, TestPkt};
    use crate::Ecn;

    const MS: Nanos = 1_000_000;

    fn pie() -> Pie<TestPkt> {
        Pie::new(Params::default(), rng_from_seed(1))
    }

    #[test]
    fn gains_follow_the_rfc_table() {
        // α = 2/16 = 0.125 Hz, β = 20/16 = 1.25 Hz; p ≥ 10 %: unscaled; p in [1 %, 10 %): ÷2;
        // [0.1 %, 1 %): ÷8; p = 0 (below 10⁻⁶): ÷2048.
        let mut q = pie();
        q.law.vars.prob = 0.2;
        assert_eq!(q.gains(), (0.125, 1.25));
        q.law.vars.prob = 0.05;
        assert_eq!(q.gains(), (0.0625, 0.625));
        q.law.vars.prob = 0.005;
        assert_eq!(q.gains(), (0.125 / 8.0, 1.25 / 8.0));
        q.law.vars.prob = 0.0;
        assert_eq!(q.gains(), (0.125 / 2048.0, 1.25 / 2048.0));
    }

    #[test]
    fn one_update_for_a_given_delay() {
        // p = 5 % (gains ÷2: α = 0.0625, β = 0.625), qdelay 25 ms, qdelay_old 20 ms,
        // target 15 ms: Δ = 0.0625·0.010 + 0.625·0.005 = 0.000625 + 0.003125 = 0.00375.
        let mut q = pie();
        q.law.vars.prob = 0.05;
        q.law.vars.qdelay_ns = 25 * MS;
        q.law.vars.qdelay_old_ns = 20 * MS;
        q.queue.push(pkt(0, 1500, Ecn::NotEct));
        q.calculate_probability();
        assert!(
            (q.law.vars.prob - 0.05375).abs() < 1e-12,
            "p = {}",
            q.law.vars.prob
        );
        assert_eq!(q.law.vars.qdelay_old_ns, 25 * MS);
    }

    #[test]
    fn the_step_is_capped_at_two_percent_above_ten_percent() {
        // p = 0.3, qdelay 200 ms vs target 15: Δ = 0.125·0.185 + 1.25·0.2 = 0.273 ⇒ capped 0.02.
        let mut q = pie();
        q.law.vars.prob = 0.3;
        q.law.vars.qdelay_ns = 200 * MS;
        q.queue.push(pkt(0, 1500, Ecn::NotEct));
        q.calculate_probability();
        assert!((q.law.vars.prob - 0.32).abs() < 1e-12);
    }

    #[test]
    fn decays_by_one_64th_when_the_queue_stays_empty() {
        // Two updates with qdelay = 0 and an empty queue: the first moves p by
        // α·(0 − 15 ms) (with p = 0.5: −0.001875) and already decays since qdelay_old was 0:
        // (0.5 − 0.001875)·63/64 = 0.490342...
        let mut q = pie();
        q.law.vars.prob = 0.5;
        q.calculate_probability();
        assert!(
            (q.law.vars.prob - (0.5 - 0.001875) * 63.0 / 64.0).abs() < 1e-12,
            "p = {}",
            q.law.vars.prob
        );
    }

    #[test]
    fn no_early_drop_within_the_burst_allowance_or_below_two_mtu() {
        let mut q = pie();
        let mut r = Recorder::default();
        q.law.vars.prob = 0.9;
        q.law.vars.qdelay_ns = 100 * MS;
        // Burst allowance (150 ms) still full: nothing dropped.
        for i in 0..50 {
            q.enqueue(pkt(i, 1500, Ecn::NotEct), 1, &mut r);
        }
        assert!(r.drops.is_empty());
        q.law.vars.burst_ns = 0;
        q.law.vars.next_update_ns = u64::MAX;
        for i in 0..50 {
            q.enqueue(pkt(i, 1500, Ecn::NotEct), 2, &mut r);
        }
        assert!(!r.drops.is_empty(), "p = 0.9 with no allowance drops");
        // Below two MTUs of backlog nothing is dropped whatever p.
        let mut q = pie();
        q.law.vars.burst_ns = 0;
        q.law.vars.prob = 1.0;
        q.law.vars.qdelay_ns = 100 * MS;
        q.law.vars.next_update_ns = u64::MAX;
        let mut r = Recorder::default();
        q.enqueue(pkt(0, 1500, Ecn::NotEct), 0, &mut r);
        q.enqueue(pkt(1, 1500, Ecn::NotEct), 0, &mut r);
        assert!(r.drops.is_empty());
    }

    #[test]
    fn ecn_marks_only_up_to_ten_percent() {
        let go = |prob: f64| {
            let mut q = Pie::new(
                Params {
                    ecn: true,
                    ..Params::default()
                },
                rng_from_seed(3),
            );
            q.law.vars.burst_ns = 0;
            q.law.vars.prob = prob;
            q.law.vars.qdelay_ns = 100 * MS;
            q.law.vars.next_update_ns = u64::MAX;
            let mut r = Recorder::default();
            for i in 0..2000 {
                q.enqueue(pkt(i, 1500, Ecn::Ect0), 0, &mut r);
                if q.len() > 10 {
                    q.queue.pop();
                }
            }
            (r.marks.len(), r.drops.len())
        };
        let (m, d) = go(0.08);
        assert!(m > 0 && d == 0, "p = 8 %: marks {m}, drops {d}");
        let (m, d) = go(0.3);
        assert!(m == 0 && d > 0, "p = 30 %: marks {m}, drops {d}");
    }

    #[test]
    fn the_controller_runs_lazily_at_its_own_ticks() {
        // A standing 30 ms delay (above the 15 ms target) for 1 s: p must rise from 0, and the
        // number of ticks replayed is exactly 1 s / 15 ms = 66.
        let mut q = pie();
        q.law.vars.qdelay_ns = 30 * MS;
        q.queue.push(pkt(0, 1500, Ecn::NotEct));
        q.catch_up(1000 * MS);
        assert_eq!(q.law.vars.next_update_ns, 67 * 15 * MS);
        assert!(q.law.vars.prob > 0.0);
    }
}
