//! Model test over the `Qdisc` trait (after s2n-quic's congestion-controller fuzz target):
//! random enqueue / dequeue / advance-time sequences on every discipline, checking after each
//! step that nothing is created or lost (arrived = dequeued + dropped + queued, in packets and
//! bytes), that the backlog equals the bytes of the queued packets, that sojourns are
//! non-negative, and that only ECN-capable packets are ever marked.

use proptest::prelude::*;

use crate::testing::{Recorder, TestPkt};
use crate::{Ecn, Qdisc, QdiscConfig};

#[derive(Clone, Debug)]
enum Op {
    Enqueue {
        flow: u64,
        len: u32,
        ecn: u8,
        value: u32,
    },
    Dequeue,
    Advance(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        // Packet values (PPV, CSAQM): mostly a few small ones, so ties are common, sometimes
        // anything up to beyond the u16 range.
        3 => (0u64..8, 40u32..1600, 0u8..4, prop_oneof![4 => 0u32..12, 1 => 0u32..70_000])
            .prop_map(|(flow, len, ecn, value)| Op::Enqueue { flow, len, ecn, value }),
        2 => Just(Op::Dequeue),
        1 => (0u64..5_000_000).prop_map(Op::Advance),
    ]
}

fn configs() -> Vec<QdiscConfig> {
    let red = |ecn, adaptive, gentle| {
        QdiscConfig::Red(crate::red::TcOptions {
            limit: Some(60_000),
            min: Some(6_000),
            max: Some(18_000),
            avpkt: Some(1000),
            ecn,
            adaptive,
            gentle,
            ..Default::default()
        })
    };
    vec![
        QdiscConfig::Taildrop(crate::taildrop::Params {
            limit_packets: Some(20),
            limit_bytes: None,
        }),
        QdiscConfig::Taildrop(crate::taildrop::Params {
            limit_packets: None,
            limit_bytes: Some(20_000),
        }),
        red(false, false, false),
        red(true, true, false),
        red(true, false, true),
        QdiscConfig::Step(crate::step::Params {
            threshold_bytes: Some(5_000),
            threshold_packets: None,
        }),
        QdiscConfig::Bernoulli(crate::bernoulli::Params {
            drop: 0.1,
            mark: 0.3,
        }),
        QdiscConfig::Gsp(crate::gsp::Params {
            threshold_bytes: 5_000,
            interval_ns: 2_000_000,
            tau_ns: 10_000_000,
            alpha: 1.0,
            max_time_ns: None,
            adaptive: true,
            limit_packets: Some(20),
            limit_bytes: None,
        }),
        QdiscConfig::Codel(crate::codel::Params {
            target_ns: 1_000_000,
            interval_ns: 5_000_000,
            ecn: true,
            ce_threshold_ns: Some(3_000_000),
            limit: 30,
            ..Default::default()
        }),
        QdiscConfig::Codel(crate::codel::Params {
            target_ns: 1_000_000,
            interval_ns: 5_000_000,
            limit: 30,
            ..Default::default()
        }),
        QdiscConfig::Pie(crate::pie::Params {
            target_ns: 1_000_000,
            tupdate_ns: 1_000_000,
            limit: 30,
            ecn: true,
            ..Default::default()
        }),
        QdiscConfig::Pie(crate::pie::Params {
            target_ns: 1_000_000,
            tupdate_ns: 1_000_000,
            limit: 30,
            dq_rate_estimator: true,
            bytemode: true,
            ..Default::default()
        }),
        QdiscConfig::Pi2(crate::pi2::Params {
            target_ns: 1_000_000,
            tupdate_ns: 1_000_000,
            limit: 30,
            ecn_mask: crate::pi2::EcnMask::AnyEct,
            ..Default::default()
        }),
        QdiscConfig::FqPie(crate::fq_pie::Params {
            flows: 4,
            limit: 25,
            pie: crate::pie::Params {
                target_ns: 1_000_000,
                tupdate_ns: 1_000_000,
                ecn: true,
                ..Default::default()
            },
            ..Default::default()
        }),
        QdiscConfig::Dualpi2(crate::dualpi2::Params {
            target_ns: 1_000_000,
            tupdate_ns: 1_000_000,
            step_ns: 500_000,
            limit: 30,
            ..Default::default()
        }),
        QdiscConfig::FqCodel(crate::fq_codel::Params {
            flows: 4,
            limit: 25,
            memory_limit: 30_000,
            drop_batch: 3,
            target_ns: 1_000_000,
            interval_ns: 5_000_000,
            ..Default::default()
        }),
        QdiscConfig::Ckcd(crate::ckcd::Params {
            rate_bps: 10_000_000,
            packet_bytes: 1500,
            q_min: 2.0,
            q_max: 8.0,
            omega: 0.2,
            d_ns: 1_000_000,
            delta_ns: 2_000_000,
            d_max_ns: 50_000_000,
            threshold: crate::ckcd::ThresholdLaw::Paper,
            k: None,
            t_mu_ns: 10_000_000,
            flow_expiry_ns: 100_000_000,
        }),
        QdiscConfig::Choke(crate::choke::TcOptions {
            limit: Some(30),
            min: Some(2),
            max: Some(8),
            bandwidth: Some(10_000_000),
            ecn: true,
            ..Default::default()
        }),
        QdiscConfig::Ppv(crate::ppv::Params {
            limit_packets: Some(12),
            limit_bytes: None,
        }),
        QdiscConfig::Ppv(crate::ppv::Params {
            limit_packets: Some(20),
            limit_bytes: Some(9_000),
        }),
        QdiscConfig::Csaqm(crate::csaqm::Params {
            target_bytes: 4_000,
            interval_ns: 1_000_000,
        }),
    ]
}

fn ecn_of(x: u8) -> Ecn {
    [Ecn::NotEct, Ecn::Ect1, Ecn::Ect0, Ecn::Ce][x as usize]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn every_discipline_conserves_packets(ops in proptest::collection::vec(op(), 1..400), seed in 0u64..1000) {
        for cfg in configs() {
            let mut q = cfg.build::<TestPkt>(seed).unwrap();
            let mut rec = Recorder::default();
            let mut now = 0u64;
            let (mut arrived, mut arrived_bytes) = (0u64, 0u64);
            let (mut departed, mut departed_bytes) = (0u64, 0u64);
            for o in &ops {
                match *o {
                    Op::Enqueue { flow, len, ecn, value } => {
                        arrived += 1;
                        arrived_bytes += len as u64;
                        let p = TestPkt { flow, len, ecn: ecn_of(ecn), enqueued: u64::MAX, value };
                        q.enqueue(p, now, &mut rec);
                    }
                    Op::Dequeue => {
                        if let Some(p) = q.dequeue(now, &mut rec) {
                            prop_assert!(p.enqueued <= now, "sojourn must be non-negative");
                            departed += 1;
                            departed_bytes += p.len as u64;
                        }
                    }
                    Op::Advance(dt) => now += dt,
                }
                let dropped = rec.drops.len() as u64;
                let dropped_bytes: u64 = rec.drops.iter().map(|(p, _)| p.len as u64).sum();
                prop_assert_eq!(arrived, departed + dropped + q.len() as u64, "{:?}", cfg);
                prop_assert_eq!(arrived_bytes, departed_bytes + dropped_bytes + q.backlog_bytes(), "{:?}", cfg);
                prop_assert!(rec.marks.iter().all(|(p, _)| p.ecn == Ecn::Ce));
            }
            let rest = q.reset();
            prop_assert_eq!(rest.iter().map(|p| p.len as u64).sum::<u64>() + departed_bytes + rec.drops.iter().map(|(p, _)| p.len as u64).sum::<u64>(), arrived_bytes);
            prop_assert_eq!(q.len(), 0);
            prop_assert_eq!(q.backlog_bytes(), 0);
        }
    }
}
