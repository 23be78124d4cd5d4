//! The router's pipeline cost per packet, without
//! the TUN device: parse, classify, flow lookup, discipline, link, delay line and emission,
//! under a virtual clock.
//!
//!   cargo bench -p router --bench pipeline
//!
//! Workload: 16 TCP-sized (1500 B) flows from two classes (half ECT(0)), a 1 Gbit/s link (one
//! packet every 12 µs), arrivals every 12 µs so the queue stays short and steady, RTTs 10 and
//! 20 ms; every packet is received, the clock advanced and due packets popped and recycled,
//! as the binary's loop does. Compare disciplines as ratios (the machine is shared and noisy).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use link::LinkConfig;
use router::config::Prefix;
use router::ipv4::header_checksum;
use router::Pipeline;

const BATCH: u64 = 10_000;

fn engine(aqm: &str) -> LinkConfig {
    let class = |i: usize, rtt: u64| {
        format!(
            r#"{{"name": "c{i}", "cc": {{"name": "cubic"}}, "count": 8, "rtt_ns": {rtt}, "ecn": true,
                "start": {{"kind": "fixed", "at_ns": 0}}, "size_bytes": null, "fq_pacing": false}}"#
        )
    };
    LinkConfig::from_json(&format!(
        r#"{{"name": "bench", "seed": 1, "duration_ns": 1000000000000, "warmup_ns": 0,
            "bottleneck": {{"rate_bps": 1000000000, "buffer_packets": 1000, "buffer_bytes": null, "aqm": {aqm}, "rtt_ref_ns": 10000000}},
            "classes": [{}, {}], "measure": {{"interval_ns": 100000000, "hist_bin_ns": 1000000}}}}"#,
        class(0, 10_000_000),
        class(1, 20_000_000)
    ))
    .unwrap()
}

fn packet(flow: u16) -> Vec<u8> {
    let mut b = vec![0u8; 1500];
    b[0] = 0x45;
    b[1] = if flow % 2 == 0 { 0x02 } else { 0x00 };
    b[2..4].copy_from_slice(&1500u16.to_be_bytes());
    b[8] = 64;
    b[9] = 6;
    b[12..16].copy_from_slice(&[10, 77, 1 + (flow % 2) as u8, 2]);
    b[16..20].copy_from_slice(&[10, 77, 200, 2]);
    b[20..22].copy_from_slice(&(40_000 + flow).to_be_bytes());
    b[22..24].copy_from_slice(&5201u16.to_be_bytes());
    let c = header_checksum(&b[..20]);
    b[10..12].copy_from_slice(&c.to_be_bytes());
    b
}

fn bench(c: &mut Criterion) {
    let templates: Vec<Vec<u8>> = (0..16).map(packet).collect();
    let mut g = c.benchmark_group("router_pipeline");
    g.throughput(Throughput::Elements(BATCH));
    for (name, aqm) in [
        ("taildrop", r#"{"kind": "taildrop"}"#),
        ("fq_codel", r#"{"kind": "fq_codel"}"#),
        ("step", r#"{"kind": "step", "threshold": {"bytes": 30000}}"#),
        ("ppv", r#"{"kind": "ppv"}"#),
    ] {
        let sources = vec![
            Prefix::parse("10.77.1.0/24").unwrap(),
            Prefix::parse("10.77.2.0/24").unwrap(),
        ];
        let mut p = Pipeline::new(&engine(aqm), sources).unwrap();
        let mut t: u64 = 0;
        let mut k: usize = 0;
        g.bench_function(name, |b| {
            b.iter(|| {
                for _ in 0..BATCH {
                    t += 12_000;
                    let mut buf = p.take_buf();
                    buf.extend_from_slice(&templates[k % 16]);
                    k += 1;
                    p.receive(buf, t);
                    p.advance(t);
                    while let Some(e) = p.pop_due(t) {
                        p.recycle(black_box(e.buf));
                    }
                }
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
