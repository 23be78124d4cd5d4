//! Building the world from its config: the flow plan (who starts and stops when, and how much
//! a finite flow sends), the routes of each class, the flows' senders and receivers, their
//! markers, hosts and stalls, each drawn from its own seed stream.

use aqm::PhysicalLimit;
use rand_core::Rng as _;

use super::{derive_seed, filled, reserve, Flow, Offloads, RunError, World};
use crate::config::{EngineConfig, StartConfig};
use crate::engine::{Nanos, Scheduler};
use crate::host::{Gro, Nic, Stalls};
use crate::marker::FlowMarker;
use crate::measure::{FlowMeasure, QueueMeasure};
use crate::net::{Bottleneck, DelayLine, Hop};
use crate::packet::DataPkt;
use crate::tcp::{AnySender, CbrSender, EcnFeedback, Receiver, Sender, SenderConfig, TsoConfig};
use link::seed::{
    SEED_CC, SEED_CC_PLUGIN, SEED_HOST, SEED_MARKER, SEED_QDISC, SEED_STALLS, SEED_STARTS,
    SEED_STOPS, SEED_WORKLOAD,
};

/// The time flow `i` of a class gets from a start or stop schedule; uniform draws come from
/// `rng` as integers in [lo, hi] (exact and platform-independent).
fn schedule_time(s: &StartConfig, i: u64, rng: &mut aqm::Rng) -> Nanos {
    match *s {
        StartConfig::Fixed { at_ns } => at_ns,
        StartConfig::Uniform { lo_ns, hi_ns } => {
            let span = hi_ns - lo_ns;
            if span == 0 {
                lo_ns
            } else {
                lo_ns + rng.next_u64() % (span + 1)
            }
        }
        StartConfig::Staggered {
            first_ns,
            spacing_ns,
        } => first_ns + i * spacing_ns,
    }
}

/// One flow as the run plans it before anything is simulated: its class, when it starts and
/// (bulk and CBR classes with a `stop`) stops, and its size (finite flows; None = bulk).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlannedFlow {
    pub class: usize,
    pub start_ns: Nanos,
    pub stop_ns: Option<Nanos>,
    pub size_bytes: Option<u64>,
}

/// Every flow of the run in flow-id order, exactly as [`World::new`] creates them (it calls
/// this): per class, a workload's Poisson arrivals with their size draws (the class's own
/// stream, SEED_WORKLOAD + class), else `count` flows whose starts come from the run's start
/// stream and stops from its stop stream, class by class and flow by flow. The emulator
/// (`aqmlab._native.flow_plan`) starts the same flows at the same times with the same sizes.
/// `cfg` must have passed [`EngineConfig::check`]. Fails, rather than aborting, when the
/// plan cannot be allocated.
pub fn flow_plan(cfg: &EngineConfig) -> Result<Vec<PlannedFlow>, RunError> {
    let mut start_rng = aqm::rng_from_seed(derive_seed(cfg.seed, SEED_STARTS));
    let mut stop_rng = aqm::rng_from_seed(derive_seed(cfg.seed, SEED_STOPS));
    let mut out = Vec::new();
    let scheduled: usize = cfg
        .classes
        .iter()
        .filter(|c| c.workload.is_none())
        .map(|c| c.count as usize)
        .sum();
    reserve(&mut out, scheduled, "the flow plan")?;
    for (c, class) in cfg.classes.iter().enumerate() {
        if let Some(wl) = &class.workload {
            // Each class's workload has its own RNG stream: exponential inter-arrival times (a
            // Poisson process of rate λ), then two uniforms for the size.
            let mut rng =
                aqm::rng_from_seed(derive_seed(cfg.seed, SEED_WORKLOAD.wrapping_add(c as u64)));
            let stop = wl.stop_ns.unwrap_or(cfg.duration_ns).min(cfg.duration_ns);
            let mut t = wl.start_ns as f64;
            loop {
                t += -(1.0 - aqm::uniform01(&mut rng)).ln() / wl.rate_per_s * 1e9;
                if t >= stop as f64 {
                    break;
                }
                let (u, v) = (aqm::uniform01(&mut rng), aqm::uniform01(&mut rng));
                // A workload class has no stop schedule (EngineConfig::check).
                if out.len() == out.capacity() {
                    out.try_reserve(1).map_err(|_| {
                        RunError::OutOfMemory(format!(
                            "cannot allocate the flow plan beyond {} flows",
                            out.len()
                        ))
                    })?;
                }
                out.push(PlannedFlow {
                    class: c,
                    start_ns: t as Nanos,
                    stop_ns: None,
                    size_bytes: Some(wl.size.sample(u, v)),
                });
            }
            continue;
        }
        for i in 0..class.count as u64 {
            let start_ns = schedule_time(&class.start, i, &mut start_rng);
            let stop_ns = class
                .stop
                .as_ref()
                .map(|s| schedule_time(s, i, &mut stop_rng));
            out.push(PlannedFlow {
                class: c,
                start_ns,
                stop_ns,
                size_bytes: class.size_bytes,
            });
        }
    }
    Ok(out)
}

/// Everything [`World::new`] checks, without building the flows: the config's own checks
/// and its discipline's (a config of a hundred million flows is checked in no time, and its
/// cost estimated, [`crate::estimate`], before anything is allocated for it).
pub fn check(cfg: &EngineConfig) -> Result<(), RunError> {
    cfg.check().map_err(RunError::Config)?;
    cfg.bottleneck
        .aqm
        .build::<DataPkt>(derive_seed(cfg.seed, SEED_QDISC))
        .map_err(|e| RunError::Config(format!("bottleneck.aqm{e}")))?;
    Ok(())
}

impl World {
    pub fn new(cfg: EngineConfig) -> Result<World, RunError> {
        cfg.check().map_err(RunError::Config)?;
        let qdisc = cfg
            .bottleneck
            .aqm
            .build::<DataPkt>(derive_seed(cfg.seed, SEED_QDISC))
            .map_err(|e| RunError::Config(format!("bottleneck.aqm{e}")))?;
        let limit = PhysicalLimit {
            packets: cfg.bottleneck.buffer_packets,
            bytes: cfg.bottleneck.buffer_bytes,
        };
        let bottleneck = Bottleneck::new(0, cfg.bottleneck.rate_bps, limit, qdisc);
        let n = cfg.classes.len();
        // PPV and CSAQM need every packet valued before the bottleneck (ppv.elte.hu: the marker
        // requirement): a marker hop at the head of each forward route, equal sharing unless
        // the config says otherwise.
        let marker_cfg = cfg
            .bottleneck
            .aqm
            .reads_packet_values()
            .then(|| cfg.marker.clone().unwrap_or_default());
        let mut fwd_lines = Vec::new();
        let mut rev_lines = Vec::new();
        let mut fwd_routes = Vec::new();
        let mut rev_routes = Vec::new();
        for (c, class) in cfg.classes.iter().enumerate() {
            let fwd = class.rtt_ns / 2;
            fwd_lines.push(DelayLine::new(c as u32, fwd));
            rev_lines.push(DelayLine::new((n + c) as u32, class.rtt_ns - fwd));
            let mut route = vec![Hop::Bottleneck(0), Hop::Line(c as u32), Hop::Host];
            if marker_cfg.is_some() {
                route.insert(0, Hop::Marker);
            }
            // Linux hosts: the sender's NIC first (the marker sits at the network's edge,
            // after it), and the NAPI poll (GRO) in front of the receiver.
            if !cfg.host.ideal {
                route.insert(0, Hop::Nic);
                let last = route.len() - 1;
                route[last] = Hop::Gro;
            }
            fwd_routes.push(route);
            rev_routes.push(vec![Hop::Line((n + c) as u32), Hop::Host]);
        }
        // Every flow's plan (class, start, stop, size) — the one definition of the draws,
        // shared with the emulator (`flow_plan`). Drawn before any flow is built so `flows` is
        // allocated once at its final size (a growing vector of a workload's thousands of
        // flows would copy them each time it doubles).
        let plan = flow_plan(&cfg)?;
        // A plugin CC is registered once per class, as a kernel registration serves every
        // socket that uses it.
        let mut cc_regs = Vec::with_capacity(n);
        for (c, class) in cfg.classes.iter().enumerate() {
            let reg = match &class.cc {
                Some(cc) => cc
                    .register(derive_seed(cfg.seed, SEED_CC_PLUGIN.wrapping_add(c as u64)))
                    .map_err(|e| RunError::Config(format!("flows[{c}].cc: {e}")))?,
                None => None,
            };
            cc_regs.push(reg);
        }
        let mut flows = Vec::new();
        reserve(&mut flows, plan.len(), "the flows")?;
        for PlannedFlow {
            class: c,
            start_ns,
            stop_ns,
            size_bytes,
        } in plan
        {
            let class = &cfg.classes[c];
            let id = flows.len() as u32;
            let scfg = SenderConfig {
                flow: id,
                size_bytes,
                ecn: class.ecn,
                fq_pacing: class.fq_pacing,
                handshake_rtt_ns: class.rtt_ns,
                // With offloads off too: TCP sockets always build GSO skbs (HostConfig::offloads).
                tso: (!cfg.host.ideal).then_some(TsoConfig {
                    gso_max_bytes: cfg.host.gso_max_bytes as u64,
                    pacing_shift: cfg.host.pacing_shift,
                    min_tso_segs: cfg.host.min_tso_segs,
                }),
            };
            let (sender, receiver) = match (&class.cc, class.cbr_rate_bps) {
                (Some(cc), _) => {
                    let cc = cc
                        .build_in(
                            derive_seed(cfg.seed, SEED_CC.wrapping_add(id as u64)),
                            cc_regs[c].as_ref(),
                        )
                        .map_err(|e| RunError::Config(format!("flows[{c}].cc: {e}")))?;
                    let sender = Sender::new(&scfg, cc);
                    let feedback = if !sender.ecn_ok() {
                        EcnFeedback::Off
                    } else {
                        match sender.ecn_use() {
                            crate::cc::EcnUse::Classic => EcnFeedback::Classic,
                            crate::cc::EcnUse::Dctcp | crate::cc::EcnUse::WantsCeEvents => {
                                EcnFeedback::Dctcp
                            }
                            crate::cc::EcnUse::L4s => EcnFeedback::Accurate,
                        }
                    };
                    (
                        AnySender::Tcp(sender),
                        Receiver::new(id, feedback, size_bytes, class.rtt_ns),
                    )
                }
                (None, Some(rate)) => (
                    AnySender::Cbr(CbrSender::new(
                        &scfg,
                        rate,
                        class.cbr_ecn.map_or(aqm::Ecn::NotEct, |e| e.codepoint()),
                    )),
                    Receiver::new_cbr(id, size_bytes, class.rtt_ns),
                ),
                (None, None) => unreachable!("checked by EngineConfig::check"),
            };
            flows.push(Flow {
                class: c,
                start_ns,
                stop_ns,
                size_bytes,
                sender,
                receiver,
            });
        }
        let mut markers = Vec::new();
        if let Some(m) = &marker_cfg {
            reserve(&mut markers, flows.len(), "the packet-value markers")?;
            markers.extend(flows.iter().enumerate().map(|(id, f)| {
                let rng =
                    aqm::rng_from_seed(derive_seed(cfg.seed, SEED_MARKER.wrapping_add(id as u64)));
                FlowMarker::new(m.tvf(f.class), m.rate_window_ns, rng)
            }));
        }
        let fm = filled(
            flows.len(),
            FlowMeasure::default(),
            "the flows' measurements",
        )?;
        let h = &cfg.host;
        let offloads = if !h.ideal {
            let (mut nics, mut gros) = (Vec::new(), Vec::new());
            reserve(&mut nics, flows.len(), "the senders' NICs")?;
            reserve(&mut gros, flows.len(), "the receivers' GRO state")?;
            nics.extend((0..flows.len()).map(|i| {
                Nic::new(
                    h.nic_rate_bps,
                    h.jitter_ns,
                    aqm::rng_from_seed(derive_seed(cfg.seed, SEED_HOST.wrapping_add(i as u64))),
                )
            }));
            // Without offloads the NIC still interrupts at most once per rx-usecs and each
            // poll hands TCP its packets one skb at a time (a GRO limit of one packet), so
            // the receiver makes one ACK decision per packet, as Linux's per-skb
            // `__tcp_ack_snd_check`.
            let gro_max = h.gro_limit(crate::packet::MTU_BYTES);
            gros.extend((0..flows.len()).map(|_| Gro::new(h.rx_coalesce_ns, gro_max)));
            Some(Offloads {
                nics,
                gros,
                units: Vec::new(),
                gro_packets: 0,
            })
        } else {
            None
        };
        let stalls = Stalls::new(
            h.stall_ns,
            h.stall_every_ns,
            cfg.duration_ns,
            &mut aqm::rng_from_seed(derive_seed(cfg.seed, SEED_STALLS)),
        );
        Ok(World {
            cfg,
            sched: Scheduler::new(),
            bottleneck,
            fwd_lines,
            rev_lines,
            fwd_routes,
            rev_routes,
            flows,
            markers,
            fm,
            qm: QueueMeasure::default(),
            dropped_total: 0,
            samples: Vec::new(),
            queue_samples: Vec::new(),
            data_buf: Vec::with_capacity(64),
            ack_buf: Vec::with_capacity(8),
            bottleneck_pkts: 0,
            offloads,
            stalls,
            start_order: Vec::new(),
            next_start: 0,
            sampled: Vec::new(),
            sample_order: Vec::new(),
            next_sampled: 0,
            cc_regs: cc_regs.into_iter().flatten().collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::world::tests::{cbr, config, engine, linux_hosts, tcp};

    #[test]
    fn a_world_has_the_configured_flows_and_each_class_its_rtt_split_in_two_lines() {
        // Three Reno flows at 10 ms, two CUBIC at 30 ms + 1 ns: the forward line takes R/2
        // (rounded down), the reverse the rest, so the two add up to R.
        let (r0, r1) = (10_000_000, 30_000_001);
        let cfg = config(
            10_000_000,
            100,
            json!({"kind": "taildrop"}),
            vec![tcp("reno", 3, r0, None), tcp("cubic", 2, r1, None)],
            1_000_000_000,
            0,
        );
        let w = World::new(engine(&cfg)).unwrap();
        assert_eq!(
            w.flows.iter().map(|f| f.class).collect::<Vec<_>>(),
            [0, 0, 0, 1, 1]
        );
        assert_eq!(
            w.flows
                .iter()
                .map(|f| f.sender.kind_name())
                .collect::<Vec<_>>(),
            ["reno", "reno", "reno", "cubic", "cubic"]
        );
        assert!(w
            .flows
            .iter()
            .all(|f| f.start_ns == 0 && f.stop_ns.is_none() && f.size_bytes.is_none()));
        assert_eq!(w.fm.len(), 5);
        let fwd: Vec<(u32, u64)> = w.fwd_lines.iter().map(|l| (l.id, l.delay_ns)).collect();
        let rev: Vec<(u32, u64)> = w.rev_lines.iter().map(|l| (l.id, l.delay_ns)).collect();
        assert_eq!(fwd, [(0, 5_000_000), (1, 15_000_000)]);
        assert_eq!(rev, [(2, 5_000_000), (3, 15_000_001)]);
        // Ideal hosts and a discipline that reads no values: bottleneck, line, receiver.
        assert_eq!(
            w.fwd_routes,
            [
                vec![Hop::Bottleneck(0), Hop::Line(0), Hop::Host],
                vec![Hop::Bottleneck(0), Hop::Line(1), Hop::Host]
            ]
        );
        assert_eq!(
            w.rev_routes,
            [vec![Hop::Line(2), Hop::Host], vec![Hop::Line(3), Hop::Host]]
        );
        assert!(w.markers.is_empty() && w.offloads.is_none());
        assert_eq!(
            (w.bottleneck.rate_bps, w.bottleneck.limit.packets),
            (10_000_000, Some(100))
        );
    }

    #[test]
    fn linux_hosts_and_a_value_reading_discipline_add_nic_marker_and_gro_hops() {
        // The NIC is the sender's, the marker at the network's edge after it, GRO in front of
        // the receiver; one marker, NIC and GRO per flow.
        let cfg = linux_hosts(config(
            10_000_000,
            100,
            json!({"kind": "ppv"}),
            vec![
                tcp("cubic", 2, 20_000_000, None),
                cbr(1, 40_000_000, 1_000_000),
            ],
            1_000_000_000,
            0,
        ));
        let w = World::new(engine(&cfg)).unwrap();
        assert_eq!(w.flows.len(), 3);
        for (c, route) in w.fwd_routes.iter().enumerate() {
            assert_eq!(
                *route,
                [
                    Hop::Nic,
                    Hop::Marker,
                    Hop::Bottleneck(0),
                    Hop::Line(c as u32),
                    Hop::Gro
                ]
            );
        }
        assert_eq!(w.markers.len(), 3);
        let off = w.offloads.as_ref().expect("Linux hosts");
        assert_eq!((off.nics.len(), off.gros.len()), (3, 3));
    }

    #[test]
    fn the_plan_follows_each_classs_schedules() {
        // Class 0: three flows staggered from 1 ms every 2 ms, each stopping 100 ms after its
        // start's schedule; class 1: two 5 kB flows drawn in [50, 60] ms; class 2: one CBR
        // flow drawn in [7, 7] ms, which can only be 7 ms.
        let mut c0 = tcp("reno", 3, 10_000_000, None);
        c0["start"] = json!({"kind": "staggered", "first_ns": 1_000_000, "spacing_ns": 2_000_000});
        c0["stop"] = json!({"kind": "staggered", "first_ns": 101_000_000, "spacing_ns": 2_000_000});
        let mut c1 = tcp("cubic", 2, 10_000_000, Some(5_000));
        c1["start"] = json!({"kind": "uniform", "lo_ns": 50_000_000, "hi_ns": 60_000_000});
        let mut c2 = cbr(1, 10_000_000, 1_000_000);
        c2["start"] = json!({"kind": "uniform", "lo_ns": 7_000_000, "hi_ns": 7_000_000});
        let cfg = engine(&config(
            10_000_000,
            100,
            json!({"kind": "taildrop"}),
            vec![c0, c1, c2],
            1_000_000_000,
            0,
        ));
        let plan = flow_plan(&cfg).unwrap();
        let ms = 1_000_000;
        let staggered: Vec<PlannedFlow> = (0..3)
            .map(|i| PlannedFlow {
                class: 0,
                start_ns: (1 + 2 * i) * ms,
                stop_ns: Some((101 + 2 * i) * ms),
                size_bytes: None,
            })
            .collect();
        assert_eq!(plan[..3], staggered[..]);
        for p in &plan[3..5] {
            assert_eq!((p.class, p.stop_ns, p.size_bytes), (1, None, Some(5_000)));
            assert!((50 * ms..=60 * ms).contains(&p.start_ns), "{p:?}");
        }
        assert_eq!(
            plan[5],
            PlannedFlow {
                class: 2,
                start_ns: 7 * ms,
                stop_ns: None,
                size_bytes: None
            }
        );
        assert_eq!(plan.len(), 6);
        // The world's flows are the plan's, in its order.
        let w = World::new(cfg).unwrap();
        let built: Vec<PlannedFlow> = w
            .flows
            .iter()
            .map(|f| PlannedFlow {
                class: f.class,
                start_ns: f.start_ns,
                stop_ns: f.stop_ns,
                size_bytes: f.size_bytes,
            })
            .collect();
        assert_eq!(built, plan);
    }

    #[test]
    fn a_workloads_arrivals_fall_in_its_window_at_its_rate() {
        // Poisson arrivals at 1000/s over [100, 500) ms: 400 expected, standard deviation 20;
        // five of them either way bounds a fixed seed's count without being loose.
        let mut c = tcp("reno", 0, 10_000_000, None);
        c["workload"] = json!({"rate_per_s": 1000.0, "size": {"dist": "fixed", "bytes": 5_000}, "start_ns": 100_000_000u64, "stop_ns": 500_000_000u64});
        let plan = flow_plan(&engine(&config(
            10_000_000,
            100,
            json!({"kind": "taildrop"}),
            vec![c],
            1_000_000_000,
            0,
        )))
        .unwrap();
        assert!((300..=500).contains(&plan.len()), "{} arrivals", plan.len());
        assert!(plan
            .iter()
            .all(|p| p.class == 0 && p.stop_ns.is_none() && p.size_bytes == Some(5_000)));
        assert!(plan
            .iter()
            .all(|p| (100_000_000..500_000_000).contains(&p.start_ns)));
        assert!(
            plan.windows(2).all(|w| w[0].start_ns <= w[1].start_ns),
            "arrival times increase"
        );
    }

    #[test]
    fn check_refuses_what_building_the_world_refuses() {
        // PIE's alpha is in 1/16 Hz up to 32 (tc). Lowering a scenario's options refuses 33;
        // engine parameters set directly (the Rust API) pass the config's own checks and fail
        // when the discipline is built, named under bottleneck.aqm.
        let mut cfg = engine(&config(
            10_000_000,
            100,
            json!({"kind": "pie"}),
            vec![tcp("reno", 1, 10_000_000, None)],
            1_000_000_000,
            0,
        ));
        cfg.bottleneck.aqm = link::discipline::DisciplineConfig::Builtin(
            serde_json::from_value(json!({"kind": "pie", "alpha": 33})).unwrap(),
        );
        assert_eq!(cfg.check(), Ok(()));
        let e = check(&cfg).unwrap_err();
        assert!(
            matches!(&e, RunError::Config(m) if m.starts_with("bottleneck.aqm.alpha")),
            "{e:?}"
        );
        assert_eq!(World::new(cfg).err(), Some(e));
    }
}
