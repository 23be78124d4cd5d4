//! CHOKe — "CHOose and Keep for responsive flows, CHOose and Kill for unresponsive flows".
//!
//! Sources: Pan, Prabhakar, Psounis, "CHOKe: A Stateless Active Queue Management Scheme for
//! Approximating Fair Bandwidth Allocation", IEEE INFOCOM 2000; Linux net/sched/sch_choke.c
//! (`choke_enqueue`, `choke_match_random`, `choke_peek_random`, `choke_drop_by_idx`,
//! `choke_dequeue`); iproute2 tc/q_choke.c for the parameter derivation (in packets).
//!
//! Per arrival, with RED's average of the queue length in **packets** ([`crate::red::RedLaw`]):
//! at or below min nothing happens; above it one queued packet is drawn at random and, if it
//! belongs to the arrival's flow, both are dropped (`FlowMatch`); otherwise RED applies —
//! above max a forced mark/drop, in the band the probabilistic one. Then the packet limit.
//! Linux's comparisons are kept: `avg ≤ min` skips, `avg > max` forces (RED itself uses `<` and
//! `≥`). Like Linux, the queue is a ring whose victim slots become holes skipped at dequeue; a
//! draw that hits a hole is retried up to 3 times, then the head is taken. ECN marks replace
//! only RED's drops, never the flow-match drops. One candidate per arrival (Linux; the paper's
//! m > 1 variant is not offered).

use crate::options::{About, Link, Lowered, Opt, OptionError, Range, ScenarioOptions, Unit};
use crate::red::{RedLaw, DEFAULT_PROBABILITY};
use crate::ring::HoleRing;
use crate::{DropReason, MarkReason, Nanos, Packet, Qdisc, Rng, Verdicts};

/// `avpkt` tc choke uses internally; thresholds are packets, so it cancels out (q_choke.c).
const CHOKE_AVPKT: u64 = 1000;

/// tc-choke's options (packets; `bandwidth` in bit/s, required by tc choke).
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields, default)
)]
pub struct TcOptions {
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub limit: Option<u64>,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub min: Option<u64>,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub max: Option<u64>,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub burst: Option<u64>,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub probability: Option<f64>,
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub bandwidth: Option<u64>,
    pub ecn: bool,
    /// Kernel flag (not exposed by tc choke): drop instead of marking above max.
    pub harddrop: bool,
}

/// The scenario's options: tc choke's, with `limit` defaulting to the physical buffer and
/// `bandwidth` to the link rate.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields, default)
)]
pub struct Options {
    pub limit: Option<u64>,
    pub min: Option<u64>,
    pub max: Option<u64>,
    pub burst: Option<u64>,
    pub probability: Option<f64>,
    pub bandwidth: Option<u64>,
    pub ecn: bool,
    pub harddrop: bool,
}

impl ScenarioOptions for Options {
    type Config = TcOptions;
    const ABOUT: About = About {
        kind: "choke",
        summary: "RED on the average queue length in packets, plus a random queued packet compared with each arrival: same flow, both dropped",
        source: "Pan, Prabhakar, Psounis, INFOCOM 2000; Linux net/sched/sch_choke.c; iproute2 tc/q_choke.c",
        one_of: &[],
        reads_packet_values: false,
        options: &[
            Opt::new("limit", Unit::Packets, Range::POSITIVE, "packet limit (none: the physical buffer in packets, 1500-byte packets if it is in bytes)", "tc-choke(8) limit"),
            Opt::new("min", Unit::Packets, Range::POSITIVE, "average queue length where dropping starts (none: max/3)", "tc-choke(8) min; tc/q_choke.c"),
            Opt::new("max", Unit::Packets, Range::POSITIVE, "average queue length where dropping becomes certain (none: limit/4)", "tc-choke(8) max; tc/q_choke.c"),
            Opt::new("burst", Unit::Int, Range::at_least(1.0), "burst tolerated by the EWMA weight, packets (none: (2·min + max)/3)", "tc-choke(8) burst; tc/tc_red.c tc_red_eval_ewma"),
            Opt::new("probability", Unit::Float, Range::POSITIVE_PROBABILITY, "max_p (none: 0.02)", "tc-choke(8) probability"),
            Opt::new("bandwidth", Unit::Rate, Range::POSITIVE, "rate for the idle-time decay (none: the link rate; tc requires it)", "tc-choke(8) bandwidth"),
            Opt::new("ecn", Unit::Bool, Range::ANY, "CE-mark instead of RED's drops (never instead of the flow-match drops)", "tc-choke(8) ecn"),
            Opt::new("harddrop", Unit::Bool, Range::ANY, "with ecn: drop rather than mark above max", "net/sched/sch_choke.c TC_RED_HARDDROP"),
        ],
    };

    fn lower(&self, link: &Link) -> Result<Lowered<Self::Config>, OptionError> {
        let options = TcOptions {
            limit: Some(self.limit.unwrap_or_else(|| {
                link.buffer_packets.unwrap_or_else(|| {
                    (link.buffer_bytes.unwrap_or(0) / crate::options::PACKET_BYTES).max(1)
                })
            })),
            min: self.min,
            max: self.max,
            burst: self.burst,
            probability: self.probability,
            // tc choke requires a bandwidth; the natural one is the link's.
            bandwidth: Some(self.bandwidth.unwrap_or(link.rate_bps)),
            ecn: self.ecn,
            harddrop: self.harddrop,
        };
        options.derive()?;
        Ok(Lowered {
            config: options,
            delay_target_ns: None,
        })
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    pub limit: u64,
    pub min: u64,
    pub max: u64,
    pub burst: u64,
    pub wlog: u32,
    pub max_p: f64,
    pub bandwidth_bps: u64,
    pub ecn: bool,
    pub harddrop: bool,
}

impl TcOptions {
    /// Derive as tc/q_choke.c: max = limit/4, min = max/3, burst = (2·min + max)/3, the EWMA
    /// weight by tc's RED rule. Errors name the option.
    pub fn derive(&self) -> Result<Params, OptionError> {
        let limit = self
            .limit
            .ok_or_else(|| OptionError::new("limit", "required (packets, as in tc choke)"))?;
        let bandwidth = self
            .bandwidth
            .ok_or_else(|| OptionError::new("bandwidth", "required (as in tc choke)"))?;
        if bandwidth == 0 {
            return Err(OptionError::new("bandwidth", "must be positive"));
        }
        let max = self.max.unwrap_or(limit / 4);
        let min = self.min.unwrap_or(max / 3);
        if min >= max {
            return Err(OptionError::new(
                "min",
                format!("{min} must be below max {max}"),
            ));
        }
        if max > limit {
            return Err(OptionError::new(
                "max",
                format!("{max} must not exceed limit {limit}"),
            ));
        }
        let burst = self.burst.unwrap_or((2 * min + max) / 3);
        let wlog = crate::red::eval_ewma(min * CHOKE_AVPKT, burst, CHOKE_AVPKT)?;
        let max_p = self.probability.unwrap_or(DEFAULT_PROBABILITY);
        if !(max_p > 0.0 && max_p <= 1.0) {
            return Err(OptionError::new(
                "probability",
                format!("{max_p} is not in (0, 1]"),
            ));
        }
        Ok(Params {
            limit,
            min,
            max,
            burst,
            wlog,
            max_p,
            bandwidth_bps: bandwidth,
            ecn: self.ecn,
            harddrop: self.harddrop,
        })
    }
}

/// `struct choke_sched_data` statistics (tc -s names).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub prob_drop: u64,
    pub prob_mark: u64,
    pub forced_drop: u64,
    pub forced_mark: u64,
    pub pdrop: u64,
    /// Arrivals that matched a random queued packet (each drops two packets).
    pub matched: u64,
}

#[derive(Clone, Debug)]
pub struct Choke<P> {
    pub params: Params,
    pub law: RedLaw,
    pub stats: Stats,
    /// The ring with holes left by victims.
    ring: HoleRing<P>,
    /// The random stream for victim draws.
    rng: Rng,
}

impl<P: Packet> Choke<P> {
    /// The discipline for engine parameters `options`, checked; `seed` seeds its random stream.
    pub fn build(options: &TcOptions, seed: u64) -> Result<Self, OptionError> {
        Ok(Self::new(options.derive()?, crate::rng_from_seed(seed)))
    }

    pub fn new(params: Params, rng: Rng) -> Self {
        // Two streams from one seed: the RED law's and the victim draws'.
        let mut rng = rng;
        let draw_seed = {
            use rand_core::Rng as _;
            rng.next_u64()
        };
        let law = RedLaw::new(
            params.min as f64,
            params.max as f64,
            params.wlog,
            params.max_p,
            CHOKE_AVPKT,
            params.bandwidth_bps,
            false,
            false,
            rng,
        );
        Choke {
            params,
            law,
            stats: Stats::default(),
            ring: HoleRing::default(),
            rng: crate::rng_from_seed(draw_seed),
        }
    }

    fn drop_arrival(&mut self, pkt: P, reason: DropReason, now: Nanos, out: &mut impl Verdicts<P>) {
        out.dropped(pkt, reason, now);
    }
}

impl<P: Packet> Qdisc<P> for Choke<P> {
    fn enqueue(&mut self, mut pkt: P, now: Nanos, out: &mut impl Verdicts<P>) {
        let qlen = self.ring.len() as f64;
        self.law.adapt(now, qlen);
        self.law.vars.avg = self.law.calc_avg(now, qlen);
        self.law.vars.idle_since = None;
        let avg = self.law.vars.avg;
        if avg <= self.law.min {
            self.law.vars.count = -1;
        } else {
            // Draw a packet at random from the queue and compare flows.
            if let Some(i) = self.ring.random_slot(&mut self.rng) {
                if self
                    .ring
                    .get(i)
                    .is_some_and(|v| v.flow_key() == pkt.flow_key())
                {
                    let victim = self.ring.take(i).expect("occupied slot");
                    self.stats.matched += 1;
                    out.dropped(victim, DropReason::FlowMatch, now);
                    self.drop_arrival(pkt, DropReason::FlowMatch, now, out);
                    return;
                }
            }
            if avg > self.law.max {
                // Queue is large: always mark/drop.
                self.law.vars.count = -1;
                if self.params.harddrop || !self.params.ecn || !pkt.ecn().is_ect_or_ce() {
                    self.stats.forced_drop += 1;
                    self.drop_arrival(pkt, DropReason::Forced, now, out);
                    return;
                }
                pkt.set_ce();
                self.stats.forced_mark += 1;
                out.marked(&pkt, MarkReason::Forced, now);
            } else if self.law.band_step(avg) {
                if !self.params.ecn || !pkt.ecn().is_ect_or_ce() {
                    self.stats.prob_drop += 1;
                    self.drop_arrival(pkt, DropReason::Early, now, out);
                    return;
                }
                pkt.set_ce();
                self.stats.prob_mark += 1;
                out.marked(&pkt, MarkReason::Prob, now);
            }
        }
        // Admit the new packet.
        if (self.ring.len() as u64) < self.params.limit {
            pkt.set_enqueue_ns(now);
            self.ring.push(pkt);
            return;
        }
        self.stats.pdrop += 1;
        self.drop_arrival(pkt, DropReason::Overflow, now, out);
    }

    fn dequeue(&mut self, now: Nanos, _out: &mut impl Verdicts<P>) -> Option<P> {
        self.law.adapt(now, self.ring.len() as f64);
        let p = self.ring.pop();
        if p.is_none() {
            self.law.start_idle(now);
        }
        p
    }

    fn len(&self) -> usize {
        self.ring.len()
    }

    fn backlog_bytes(&self) -> u64 {
        self.ring.bytes()
    }

    fn head_enqueue_ns(&self) -> Option<Nanos> {
        self.ring.head_enqueue_ns()
    }

    fn reset(&mut self) -> Vec<P> {
        self.law.reset();
        self.ring.drain()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng_from_seed;
    use crate::testing::{pkt, Recorder};
    use crate::Ecn;

    fn opts(limit: u64) -> TcOptions {
        TcOptions {
            limit: Some(limit),
            bandwidth: Some(100_000_000),
            ..Default::default()
        }
    }

    #[test]
    fn max_min_burst_wlog_and_max_p_default_from_the_limit() {
        // limit 80: max = 80/4 = 20, min = 20/3 = 6, burst = (12 + 20)/3 = 10; Wlog: a =
        // 10 + 1 − 6 = 5; W = 1/4: 4·(1 − 0.75^10) = 3.77 < 5; W = 1/8: 8·(1 − 0.875^10) = 5.90
        // ≥ 5 ⇒ Wlog 3.
        let p = opts(80).derive().unwrap();
        assert_eq!(
            (p.max, p.min, p.burst, p.wlog, p.max_p),
            (20, 6, 10, 3, 0.02)
        );
    }

    #[test]
    fn derivation_errors() {
        assert!(
            TcOptions {
                limit: None,
                ..opts(1)
            }
            .derive()
            .unwrap_err()
            .key == "limit"
        );
        assert!(
            TcOptions {
                bandwidth: None,
                ..opts(80)
            }
            .derive()
            .unwrap_err()
            .key == "bandwidth"
        );
        assert!(
            TcOptions {
                min: Some(20),
                max: Some(20),
                ..opts(80)
            }
            .derive()
            .unwrap_err()
            .key == "min"
        );
        assert!(
            TcOptions {
                max: Some(100),
                ..opts(80)
            }
            .derive()
            .unwrap_err()
            .key == "max"
        );
    }

    #[test]
    fn a_match_drops_both_the_arrival_and_the_victim() {
        // A queue holding only flow 7, average above min: the random draw always finds flow 7,
        // so a flow-7 arrival kills itself and one queued packet.
        let mut q: Choke<crate::testing::TestPkt> =
            Choke::new(opts(80).derive().unwrap(), rng_from_seed(1));
        let mut r = Recorder::default();
        for _ in 0..10 {
            q.ring.push(pkt(7, 1000, Ecn::NotEct));
        }
        q.law.vars.avg = 10.0;
        q.law.vars.idle_since = None;
        q.enqueue(pkt(7, 1000, Ecn::NotEct), 0, &mut r);
        assert_eq!(r.drops.len(), 2);
        assert!(r
            .drops
            .iter()
            .all(|(p, why)| p.flow == 7 && *why == DropReason::FlowMatch));
        assert_eq!((q.len(), q.backlog_bytes()), (9, 9000));
        // Another flow's arrival never matches.
        q.enqueue(pkt(8, 1000, Ecn::NotEct), 0, &mut r);
        assert!(
            r.drops.iter().all(|(p, _)| p.flow == 7)
                || r.drops.last().unwrap().1 != DropReason::FlowMatch
        );
    }

    #[test]
    fn below_min_no_comparison_happens() {
        let mut q: Choke<crate::testing::TestPkt> =
            Choke::new(opts(80).derive().unwrap(), rng_from_seed(1));
        let mut r = Recorder::default();
        for _ in 0..5 {
            q.enqueue(pkt(1, 1000, Ecn::NotEct), 0, &mut r);
        }
        // avg of 0..4 packets with W = 1/8 stays far below min = 6.
        assert!(r.drops.is_empty());
        assert_eq!(q.len(), 5);
    }

    #[test]
    fn a_flow_is_hit_in_proportion_to_its_share_of_the_queue() {
        // Pan et al. §III: the random draw matches an arrival's flow with probability equal to
        // that flow's share of the queue. Queue: 18 packets of flow 0, 2 of flow 1 (average
        // pinned at 10, between min 6 and max 20). Over 5 000 single arrivals per flow the match
        // fractions should be 18/20 = 0.9 and 2/20 = 0.1 (binomial σ ≈ 0.004; allow ±0.02).
        let params = opts(80).derive().unwrap();
        let mut q: Choke<crate::testing::TestPkt> = Choke::new(params, rng_from_seed(5));
        let trials = 5_000;
        let mut matched = [0u32; 2];
        for f in 0..2u64 {
            for _ in 0..trials {
                q.reset();
                for i in 0..20 {
                    q.ring
                        .push(pkt(if i < 18 { 0 } else { 1 }, 1000, Ecn::NotEct));
                }
                q.law.vars.avg = 10.0;
                q.law.vars.idle_since = None;
                let mut r = Recorder::default();
                // The EWMA moves avg toward 20 by W = 1/8: 11.25, still in the band.
                q.enqueue(pkt(f, 1000, Ecn::NotEct), 0, &mut r);
                if r.drops.iter().any(|(_, why)| *why == DropReason::FlowMatch) {
                    matched[f as usize] += 1;
                }
            }
        }
        let m0 = matched[0] as f64 / trials as f64;
        let m1 = matched[1] as f64 / trials as f64;
        assert!((m0 - 0.9).abs() < 0.02, "flow 0 matched {m0:.3}");
        assert!((m1 - 0.1).abs() < 0.02, "flow 1 matched {m1:.3}");
    }
}
