//! Run one engine config (the JSON `Scenario.engine_config()` produces, e.g. one point of a
//! sweep) and print its speed and a digest of everything it returned, for performance work:
//!
//!   cargo build --release -p sim --example runcfg
//!   ./target/release/examples/runcfg CONFIG.json [SECS]
//!
//! `NODIGEST=1` skips the digest (for instruction counts of the run alone).
//! `SECS` shortens the run to that many simulated seconds (the warm-up to at most half of
//! it), for profiling a point of a long sweep (e.g. under `valgrind --tool=callgrind`).
//!
//! The digest is an FNV-1a hash of the summary and counters (serde_json, whose floats print
//! in shortest round-trip form) and of every table (`Debug`, likewise exact for f64), so two
//! builds that print the same `summary=`/`tables=` digests returned bit-identical results
//! (`bench/perf/identical.sh` compares them). `events=` is printed apart: an optimisation may
//! legitimately change how many heap entries a run pops without changing any result.

fn fnv1a(h: &mut u64, bytes: &[u8]) {
    for &b in bytes {
        *h ^= b as u64;
        *h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
}

fn digest(parts: &[&str]) -> String {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for p in parts {
        fnv1a(&mut h, p.as_bytes());
        fnv1a(&mut h, &[0]);
    }
    format!("{h:016x}")
}

/// Time this thread has spent on a CPU, seconds (`/proc/thread-self/schedstat`): unlike wall
/// time it does not count waiting for a core on a shared machine.
fn cpu_s() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(f64::NAN, |ns| ns / 1e9)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: runcfg CONFIG.json [SECS]");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut cfg: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    if let Some(secs) = args.next() {
        let secs: f64 = secs.parse().expect("SECS is a number of seconds");
        let dur = (secs * 1e9) as u64;
        let warm = cfg["warmup_ns"].as_u64().unwrap_or(0).min(dur / 2);
        cfg["duration_ns"] = dur.into();
        cfg["warmup_ns"] = warm.into();
    }
    let (t, cpu0) = (std::time::Instant::now(), cpu_s());
    let r = sim::run_json(&cfg.to_string(), &mut |_| true).expect("config runs");
    let (wall, cpu) = (t.elapsed().as_secs_f64(), cpu_s() - cpu0);
    let pkts = r.counters["bottleneck_pkts"].as_u64().unwrap();
    let events = r.counters["events"].as_u64().unwrap();
    let mut counters = r.counters.clone();
    counters
        .as_object_mut()
        .expect("counters are an object")
        .remove("events");
    // NODIGEST=1 skips the digest (its formatting would weigh in an instruction count).
    let (summary, tables) = if std::env::var_os("NODIGEST").is_some() {
        ("-".to_string(), "-".to_string())
    } else {
        let tables: Vec<String> = r.tables.iter().map(|(n, t)| format!("{n}:{t:?}")).collect();
        (
            digest(&[&r.summary.to_string(), &counters.to_string()]),
            digest(&tables.iter().map(String::as_str).collect::<Vec<_>>()),
        )
    };
    println!(
        "config={path} wall_s={wall:.3} cpu_s={cpu:.3} bottleneck_pkts={pkts} pkts_per_s={:.0} events={events} summary={summary} tables={tables}",
        pkts as f64 / wall
    );
}
