//! Per-packet cost of the plugin STEP and CoDel (examples/plugins/*.c) against the built-ins
//! they port, on one packet trace shaped like the bottleneck of `crates/sim/examples/bench.rs`
//! scenario (a): 1 Gbit/s (a 1500-byte packet leaves every 12 µs), 20 flows, a 1-BDP buffer
//! (1.25 MB) beneath, the load swinging around the link rate so that the queue fills, stands
//! and drains; STEP at K = 212 500 B and CoDel with limit 833, as `bench a step|codel`.
//!
//!   cargo run --release -p plugin --example perpacket [-- WHOLE_STEP_NS WHOLE_CODEL_NS]
//!
//! Prints, per discipline, CPU ns per packet (one enqueue and one dequeue; the best of 7
//! runs over 1.7 M arrivals), and the plugin's ratio to its built-in. With the whole-run cost of a bottleneck
//! packet under each built-in (`cargo run --release -p sim --example bench a step`:
//! 1e9 / pkts_per_cpu_s), it also estimates the plugin's whole-run ratio, the target
//! (≤ 1.5): (whole + plugin − built-in) / whole.
//!
//! What chose the runtime (2 cores shared with other builds; CPU ns per packet, ranges over
//! runs; whole runs of `bench a step|codel`: 248 and 241 ns per bottleneck packet at best):
//!
//! | runtime                          | STEP plugin   | CoDel plugin  | est. whole run     |
//! |----------------------------------|---------------|---------------|--------------------|
//! | built-in                         | 5-10          | 11-17         | 1                  |
//! | wasmi 2.0.0 (interpreter)        | +95 to +134   | +187 to +252  | 1.39-1.54, 1.78-2.05 |
//! | wasmtime 48.0.8 (Cranelift, fuel) | +48 to +53    | +77 to +92    | 1.19-1.21, 1.32-1.38 |
//!
//! wasmi misses the target for CoDel (two calls per packet at about 90 ns each); wasmtime
//! meets it for both. Its price is build time: `cargo test -p plugin` from scratch (after
//! aqm) takes 292 s with wasmtime against 52 s with wasmi, clippy 58 s more; a release build
//! about 5.5 min. (wasmi's tail-call dispatch also overflowed the host's stack on a long
//! loop in the test profile: it needed its slower portable dispatch to be safe.)

use std::hint::black_box;

use aqm::codel::{self, Codel};
use aqm::step::{Step, Threshold};
use aqm::{DropReason, Ecn, MarkReason, Nanos, Packet, PhysicalLimit, Qdisc, Verdicts};
use plugin::{Plugin, PluginQdisc};
use rand_core::Rng as _;

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
    fn dropped(&mut self, _: Pkt, _: DropReason, _: Nanos) {
        self.drops += 1;
    }
    fn marked(&mut self, _: &Pkt, _: MarkReason, _: Nanos) {
        self.marks += 1;
    }
}

enum Op {
    Arrive(Pkt),
    Serve,
}

/// 20 s of the bottleneck: a dequeue every 12 µs; arrivals at 0.9 to 1.1 times the link
/// rate, the factor redrawn every 50 ms; a quarter of the flows ECN-capable (ECT(0)).
fn trace() -> Vec<(Nanos, Op)> {
    let mut rng = aqm::rng_from_seed(1);
    let mut ops = Vec::new();
    let (mut t, mut credit, mut load) = (0u64, 0.0f64, 1.0f64);
    while t < 20_000_000_000 {
        if t % 50_000_000 < 12_000 {
            load = 0.9 + 0.2 * aqm::uniform01(&mut rng);
        }
        credit += load;
        while credit >= 1.0 {
            credit -= 1.0;
            let flow = rng.next_u64() % 20;
            let ecn = if flow % 4 == 0 {
                Ecn::Ect0
            } else {
                Ecn::NotEct
            };
            ops.push((
                t,
                Op::Arrive(Pkt {
                    flow,
                    len: 1500,
                    ecn,
                    enq: 0,
                }),
            ));
        }
        ops.push((t, Op::Serve));
        t += 12_000;
    }
    ops
}

/// CPU time of this thread, ns (`/proc/thread-self/schedstat`: waiting for a core on a busy
/// machine does not count).
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Best CPU ns per arrival over 7 runs of `make()` through the trace.
fn measure<Q: Qdisc<Pkt>>(ops: &[(Nanos, Op)], mut make: impl FnMut() -> Q) -> (f64, Count) {
    let limit = PhysicalLimit {
        packets: None,
        bytes: Some(1_250_000),
    };
    let arrivals = ops.iter().filter(|o| matches!(o.1, Op::Arrive(_))).count() as f64;
    let mut best = f64::INFINITY;
    let mut count = Count::default();
    for _ in 0..7 {
        let mut q = make();
        let mut c = Count::default();
        let t0 = cpu_ns();
        for (now, op) in ops {
            match op {
                Op::Arrive(p) => limit.offer(&mut q, *p, *now, &mut c),
                Op::Serve => {
                    black_box(q.dequeue(*now, &mut c));
                }
            }
        }
        best = best.min((cpu_ns() - t0) as f64 / arrivals);
        count = c;
    }
    (best, count)
}

fn build(name: &str) -> Plugin {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = std::env::temp_dir().join(format!("aqmlab-perpacket-{name}.wasm"));
    let wasm = plugin::compile_c(&root.join(format!("examples/plugins/{name}.c")), &out)
        .unwrap_or_else(|e| panic!("{e}"));
    Plugin::load(&format!("{name}.wasm"), &wasm).unwrap()
}

fn main() {
    let whole: Vec<f64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let ops = trace();
    let arrivals = ops.iter().filter(|o| matches!(o.1, Op::Arrive(_))).count();
    println!("trace: {} operations, {arrivals} arrivals", ops.len());
    let (step, codel) = (build("step"), build("codel"));
    let codel_params = codel::Params {
        limit: 833,
        ..codel::Params::default()
    };
    let rows = [
        (
            "step",
            measure(&ops, || Step::<Pkt>::new(Threshold::Bytes(212_500))),
            measure(&ops, || {
                step.build::<Pkt>(&[("threshold_bytes", 212_500.0)], 1)
                    .unwrap()
            }),
        ),
        (
            "codel",
            measure(&ops, || Codel::<Pkt>::new(codel_params.clone())),
            measure(&ops, || {
                let q: PluginQdisc<Pkt> = codel.build(&[("limit", 833.0)], 1).unwrap();
                q
            }),
        ),
    ];
    for (i, (name, (b, bc), (p, pc))) in rows.iter().enumerate() {
        assert_eq!(
            (bc.drops, bc.marks),
            (pc.drops, pc.marks),
            "{name}: the plugin's verdicts differ"
        );
        print!(
            "{name}: built-in {b:.1} ns/pkt, plugin {p:.1} ns/pkt ({:.2}x, +{:.1} ns; {} drops, {} marks)",
            p / b,
            p - b,
            bc.drops,
            bc.marks
        );
        match whole.get(i) {
            Some(w) => println!(
                "; whole run {w:.0} ns/pkt -> est. {:.0} ns/pkt with the plugin, {:.3}x",
                w + p - b,
                (w + p - b) / w
            ),
            None => println!(),
        }
    }
}
