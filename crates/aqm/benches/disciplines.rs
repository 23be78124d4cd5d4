//! Per-discipline cost at the packet level (issue "AQM library", §Speed): nanoseconds per
//! packet for one enqueue + one dequeue, every discipline on the same workload, side by side
//! in one run (compare ratios to `taildrop`: these machines are noisy).
//!
//!   cargo bench -p aqm --bench disciplines
//!
//! Workload: 16 flows (half ECT(0), a quarter ECT(1)), 1500-byte packets, a 1 Gbps link (one
//! packet every 12 µs), the queue held at about 200 packets (arrivals = departures), so every
//! control law runs its steady-state path (estimates, probabilities, marks, some drops).

use std::hint::black_box;

use aqm::{DropReason, Ecn, MarkReason, Nanos, Packet, Qdisc, QdiscConfig, Verdicts};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

#[derive(Clone, Copy, Debug)]
struct Pkt {
    flow: u64,
    len: u32,
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

/// Each discipline as scenario (a) of the simulator benchmark configures it (1 Gbps, 10 ms,
/// 1-BDP = 833-packet buffer); targets of a few ms so the laws are active at 200 packets.
fn configs() -> Vec<(&'static str, QdiscConfig)> {
    use aqm::*;
    vec![
        ("taildrop", QdiscConfig::Taildrop(taildrop::Params { limit_packets: Some(833), limit_bytes: None })),
        ("red", QdiscConfig::Red(red::TcOptions { limit: Some(1_250_000), avpkt: Some(1500), bandwidth: Some(1_000_000_000), ecn: true, ..Default::default() })),
        ("step", QdiscConfig::Step(step::Params { threshold_bytes: Some(212_500), threshold_packets: None })),
        ("pie", QdiscConfig::Pie(pie::Params { target_ns: 2_000_000, limit: 833, ecn: true, ..Default::default() })),
        ("fq_pie", QdiscConfig::FqPie(fq_pie::Params { limit: 833, pie: pie::Params { target_ns: 2_000_000, ecn: true, ..Default::default() }, ..Default::default() })),
        ("pi2", QdiscConfig::Pi2(pi2::Params { target_ns: 2_000_000, limit: 833, ecn_mask: pi2::EcnMask::AnyEct, ..Default::default() })),
        ("dualpi2", QdiscConfig::Dualpi2(dualpi2::Params { target_ns: 2_000_000, limit: 833, ..Default::default() })),
        ("codel", QdiscConfig::Codel(codel::Params { target_ns: 1_000_000, limit: 833, ecn: true, ..Default::default() })),
        ("fq_codel", QdiscConfig::FqCodel(fq_codel::Params { limit: 833, memory_limit: 1_250_000, target_ns: 1_000_000, ..Default::default() })),
        ("choke", QdiscConfig::Choke(choke::TcOptions { limit: Some(833), bandwidth: Some(1_000_000_000), ecn: true, ..Default::default() })),
        (
            "ckcd",
            QdiscConfig::Ckcd(ckcd::Params {
                rate_bps: 1_000_000_000,
                packet_bytes: 1500,
                q_min: 100.0,
                q_max: 833.0,
                omega: 0.002,
                d_ns: 1_000_000,
                delta_ns: 100_000_000,
                d_max_ns: 10_000_000,
                threshold: ckcd::ThresholdLaw::Paper,
                k: None,
                t_mu_ns: 100_000_000,
                flow_expiry_ns: 1_000_000_000,
            }),
        ),
        ("gsp", QdiscConfig::Gsp(gsp::Params { threshold_bytes: 150_000, interval_ns: 200_000_000, tau_ns: 10_000_000, alpha: 1.0, max_time_ns: None, adaptive: true, limit_packets: Some(833), limit_bytes: None })),
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

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("enqueue+dequeue per packet");
    g.throughput(Throughput::Elements(BATCH));
    for (name, cfg) in configs() {
        let mut q = cfg.build::<Pkt>(1).expect("valid config");
        let mut out = Count::default();
        let mut now: Nanos = 0;
        let mut seq: u64 = 0;
        // Fill to about 200 packets.
        while q.len() < 200 && seq < 10_000 {
            let flow = seq % FLOWS;
            q.enqueue(Pkt { flow, len: 1500, ecn: ecn_of(flow), enq: 0 }, now, &mut out);
            seq += 1;
        }
        g.bench_function(name, |b| {
            b.iter(|| {
                for _ in 0..BATCH {
                    let flow = (seq * 7) % FLOWS;
                    q.enqueue(Pkt { flow, len: 1500, ecn: ecn_of(flow), enq: 0 }, now, &mut out);
                    // Keep the standing queue: serve one packet per arrival, and a second one
                    // when drops have not kept it below 200.
                    black_box(q.dequeue(now, &mut out));
                    if q.len() > 220 {
                        black_box(q.dequeue(now, &mut out));
                    }
                    seq += 1;
                    now += SERVICE_NS;
                }
            })
        });
        eprintln!("{name}: queue {} packets at the end, {} drops, {} marks", q.len(), out.drops, out.marks);
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
