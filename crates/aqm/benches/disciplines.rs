//! Per-discipline cost at the packet level: nanoseconds per
//! packet for one enqueue + one dequeue, every discipline on the same workload, side by side
//! in one run (compare ratios to `taildrop`: these machines are noisy).
//!
//!   cargo bench -p aqm --bench disciplines
//!
//! Workload: 16 flows (half ECT(0), a quarter ECT(1)), 1500-byte packets with spread packet
//! values, a 1 Gbps link (one packet every 12 µs), the queue held at a standing 1000 packets
//! (12 ms; the setting): every iteration enqueues one packet and dequeues one, refills
//! what the discipline dropped (up to 8 arrivals) and serves a second packet when the queue
//! runs above 1020; the queue each discipline ends with is printed. Every
//! control law runs its congested path (estimates, probabilities, marks, drops, evictions).

use std::hint::black_box;

use aqm::{DropReason, Ecn, MarkReason, Nanos, Packet, Qdisc, QdiscConfig, Verdicts};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

#[derive(Clone, Copy, Debug)]
struct Pkt {
    flow: u64,
    len: u32,
    value: u32,
    ecn: Ecn,
    enq: Nanos,
}

impl Packet for Pkt {
    fn wire_len(&self) -> u32 {
        self.len
    }
    fn ecn(&self) -> Ecn {
        self.ecn
    }
    fn set_ce(&mut self) {
        self.ecn = Ecn::Ce;
    }
    fn flow_key(&self) -> u64 {
        self.flow
    }
    fn value(&self) -> u32 {
        self.value
    }
    fn enqueue_ns(&self) -> Nanos {
        self.enq
    }
    fn set_enqueue_ns(&mut self, now: Nanos) {
        self.enq = now;
    }
}

#[derive(Default)]
struct Count {
    drops: u64,
    marks: u64,
}

impl Verdicts<Pkt> for Count {
    fn dropped(&mut self, _pkt: Pkt, _reason: DropReason, _now: Nanos) {
        self.drops += 1;
    }
    fn marked(&mut self, _pkt: &Pkt, _reason: MarkReason, _now: Nanos) {
        self.marks += 1;
    }
}

/// Every discipline at 1 Gbps with room for the 1000-packet standing queue (2000-packet /
/// 3 MB limits) and its delay or size target at 10 ms / 1.25 MB, below the standing 12 ms, so
/// each law is active.
fn configs() -> Vec<(&'static str, QdiscConfig)> {
    use aqm::*;
    const LIMIT: u64 = 2000;
    const TARGET_NS: Nanos = 10_000_000;
    vec![
        (
            "taildrop",
            QdiscConfig::Taildrop(taildrop::Params {
                limit_packets: Some(LIMIT),
                limit_bytes: None,
            }),
        ),
        (
            "red",
            QdiscConfig::Red(red::TcOptions {
                limit: Some(3_000_000),
                min: Some(900_000),
                max: Some(2_400_000),
                avpkt: Some(1500),
                bandwidth: Some(1_000_000_000),
                ecn: true,
                ..Default::default()
            }),
        ),
        (
            "step",
            QdiscConfig::Step(step::Params {
                threshold_bytes: Some(1_250_000),
                threshold_packets: None,
            }),
        ),
        (
            "pie",
            QdiscConfig::Pie(pie::Params {
                target_ns: TARGET_NS,
                limit: LIMIT,
                ecn: true,
                ..Default::default()
            }),
        ),
        (
            "fq_pie",
            QdiscConfig::FqPie(fq_pie::Params {
                limit: LIMIT,
                pie: pie::Params {
                    target_ns: TARGET_NS,
                    ecn: true,
                    ..Default::default()
                },
                ..Default::default()
            }),
        ),
        (
            "pi2",
            QdiscConfig::Pi2(pi2::Params {
                target_ns: TARGET_NS,
                limit: LIMIT,
                ecn_mask: pi2::EcnMask::AnyEct,
                ..Default::default()
            }),
        ),
        (
            "dualpi2",
            QdiscConfig::Dualpi2(dualpi2::Params {
                target_ns: TARGET_NS,
                limit: LIMIT,
                ..Default::default()
            }),
        ),
        (
            "codel",
            QdiscConfig::Codel(codel::Params {
                target_ns: TARGET_NS,
                limit: LIMIT,
                ecn: true,
                ..Default::default()
            }),
        ),
        (
            "fq_codel",
            QdiscConfig::FqCodel(fq_codel::Params {
                limit: LIMIT,
                memory_limit: 3_000_000,
                target_ns: TARGET_NS,
                ..Default::default()
            }),
        ),
        (
            "choke",
            QdiscConfig::Choke(choke::TcOptions {
                limit: Some(LIMIT),
                min: Some(600),
                max: Some(1800),
                bandwidth: Some(1_000_000_000),
                ecn: true,
                ..Default::default()
            }),
        ),
        (
            "ckcd",
            QdiscConfig::Ckcd(ckcd::Params {
                rate_bps: 1_000_000_000,
                packet_bytes: 1500,
                q_min: 600.0,
                q_max: 1800.0,
                omega: 0.002,
                d_ns: TARGET_NS,
                delta_ns: 100_000_000,
                d_max_ns: 30_000_000,
                threshold: ckcd::ThresholdLaw::Paper,
                k: None,
                t_mu_ns: 100_000_000,
                flow_expiry_ns: 1_000_000_000,
            }),
        ),
        (
            "gsp",
            QdiscConfig::Gsp(gsp::Params {
                threshold_bytes: 1_250_000,
                interval_ns: 200_000_000,
                tau_ns: 10_000_000,
                alpha: 1.0,
                max_time_ns: None,
                adaptive: true,
                limit_packets: Some(LIMIT),
                limit_bytes: None,
            }),
        ),
        // PPV's buffer *is* the standing queue: full at 1000 packets, every arrival evicts.
        (
            "ppv",
            QdiscConfig::Ppv(ppv::Params {
                limit_packets: Some(1000),
                limit_bytes: None,
            }),
        ),
        (
            "csaqm",
            QdiscConfig::Csaqm(csaqm::Params {
                target_bytes: 1_250_000,
                interval_ns: 5_000_000,
            }),
        ),
    ]
}

const BATCH: u64 = 10_000;
const FLOWS: u64 = 16;
const SERVICE_NS: Nanos = 12_000;

fn ecn_of(flow: u64) -> Ecn {
    match flow % 4 {
        0 | 1 => Ecn::Ect0,
        2 => Ecn::Ect1,
        _ => Ecn::NotEct,
    }
}

/// A packet value spread over 1..=65535 (a multiplicative hash of the sequence number).
fn value_of(seq: u64) -> u32 {
    1 + ((seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 48) % 65_535) as u32
}

const STANDING: usize = 1000;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("enqueue+dequeue per packet");
    g.throughput(Throughput::Elements(BATCH));
    for (name, cfg) in configs() {
        let mut q = cfg.build::<Pkt>(1).expect("valid config");
        let mut out = Count::default();
        let mut now: Nanos = 0;
        let mut seq: u64 = 0;
        let arrive = |q: &mut aqm::AnyQdisc<Pkt>, seq: &mut u64, now: Nanos, out: &mut Count| {
            let flow = (*seq * 7) % FLOWS;
            q.enqueue(
                Pkt {
                    flow,
                    len: 1500,
                    value: value_of(*seq),
                    ecn: ecn_of(flow),
                    enq: 0,
                },
                now,
                out,
            );
            *seq += 1;
        };
        // Fill to the standing queue (the disciplines that drop early get more arrivals).
        while q.len() < STANDING && seq < 100_000 {
            arrive(&mut q, &mut seq, now, &mut out);
        }
        g.bench_function(name, |b| {
            b.iter(|| {
                for _ in 0..BATCH {
                    arrive(&mut q, &mut seq, now, &mut out);
                    black_box(q.dequeue(now, &mut out));
                    // Refill what was dropped (at most 8 arrivals per departure: a law that
                    // drops nearly everything — PIE at p ≈ 1, CKCD's delay rule — still drains).
                    let mut refills = 0;
                    while q.len() < STANDING && refills < 8 {
                        arrive(&mut q, &mut seq, now, &mut out);
                        refills += 1;
                    }
                    if q.len() > STANDING + 20 {
                        black_box(q.dequeue(now, &mut out));
                    }
                    now += SERVICE_NS;
                }
            })
        });
        eprintln!(
            "{name}: queue {} packets at the end, {} drops, {} marks",
            q.len(),
            out.drops,
            out.marks
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
