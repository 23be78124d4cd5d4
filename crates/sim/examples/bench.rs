//! Simulator speed and memory benchmark:
//! bottleneck packets simulated per wall-clock second on one core, and the process's peak
//! resident memory. Run one scenario per process so peak memory is the scenario's own:
//!
//!   cargo run --release -p sim --example bench -- a
//!   cargo run --release -p sim --example bench -- b
//!
//! (a) 1 Gbps, 10 ms, 20 CUBIC flows, 1-BDP TailDrop, 30 s simulated.
//!     `bench a KIND` runs (a) with another discipline instead of TailDrop (red, step, pie,
//!     fq_pie, pi2, dualpi2, codel, fq_codel, choke, ckcd, gsp), for the per-discipline cost;
//!     `bench a plugin-step` and `bench a plugin-codel` run the plugin ports of STEP and CoDel
//!     (examples/plugins/*.c, built with Debian's clang into target/plugins) with the
//!     built-ins' parameters, for the plugins' cost.
//! (b) 10 Gbps, 5 ms, 100 DCTCP flows, STEP at K = 0.17 RTT, 500 ms buffer, 10 s simulated.
//!     `bench b plugin-dctcp` runs the emulator's DCTCP port (bpf/aqmlab_dctcp.bpf.c, built
//!     for the simulator into target/plugins) in place of the built-in, for a plugin CC's cost.
//! (c) 1 Gbps, 10 ms, 10 bbr2 + 10 CUBIC flows, 1-BDP
//!     TailDrop, 30 s simulated; `bench c CC` puts another CC (bbr, bbr3, cubic, …) in place
//!     of bbr2, so `bench c cubic` is (a) split into two classes: the baseline for BBR's cost.
//! (d) the dynamic case of De Schepper et al. (DualQ): 40 Mbps, 7 ms,
//!     2 long CUBIC flows and 100 short flows per second (bounded Pareto
//!     1 KB–1 MB, α 1.2), RED as their tc line, 60 s; `bench d bulk` runs the 2 long
//!     flows alone, the per-packet baseline.
//!
//! The hosts are ideal (`"ideal": true`), the setting of bench/README.md's speed tables;
//! `OFFLOADS=1` runs them with Linux's host model (TSO/GSO, GRO, a 10 Gbit/s NIC).
//!
//! `bench SCENARIO [ARG] --config` prints the scenario's engine config instead of running it
//! (for `examples/runcfg.rs` and the bit-identity check in `bench/perf/`).

use serde_json::json;

/// Scenario (a)'s discipline replaced by `kind`, configured for its 1-BDP (1.25 MB, 833-packet)
/// buffer.
fn aqm_for_a(kind: &str) -> serde_json::Value {
    match kind {
        "taildrop" => json!({"kind": "taildrop"}),
        "red" => json!({"kind": "red", "limit": {"bytes": 1_250_000u64}, "avpkt": {"bytes": 1500}}),
        "step" => json!({"kind": "step", "threshold": {"bytes": 212_500u64}}),
        "codel" => json!({"kind": "codel", "limit": 833}),
        "pie" => json!({"kind": "pie", "limit": 833}),
        "fq_pie" => json!({"kind": "fq_pie", "limit": 833}),
        "pi2" => json!({"kind": "pi2", "limit": 833}),
        "dualpi2" => json!({"kind": "dualpi2", "limit": 833}),
        "fq_codel" => {
            json!({"kind": "fq_codel", "limit": 833, "memory_limit": {"bytes": 1_250_000u64}})
        }
        "choke" => json!({"kind": "choke", "limit": 833, "bandwidth": 1_000_000_000u64}),
        "ckcd" => {
            json!({"kind": "ckcd", "q_min": {"packets": 277}, "q_max": {"packets": 833}})
        }
        "gsp" => json!({"kind": "gsp", "threshold": {"bytes": 937_500u64}}),
        // PPV owns the 1-BDP buffer; both read the values of the default (equal-share) marker,
        // whose per-packet cost is part of theirs. CSAQM: target 0.75 × the buffer, as GSP.
        "ppv" => json!({"kind": "ppv"}),
        "csaqm" => {
            json!({"kind": "csaqm", "target": 7_500_000u64, "interval": 5_000_000u64})
        }
        "plugin-step" => {
            json!({"kind": "plugin", "module": plugin_module("step"), "options": {"threshold_bytes": 212_500u64}})
        }
        "plugin-codel" => {
            json!({"kind": "plugin", "module": plugin_module("codel"), "options": {"limit": 833}})
        }
        other => panic!("unknown discipline {other:?}"),
    }
}

/// The CC plugin `source` (relative to the repository) built into target/plugins.
fn cc_plugin_module(source: &str) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = root.join("target/plugins");
    std::fs::create_dir_all(&out).expect("target/plugins");
    let src = root.join(source);
    let stem = src
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .replace(".bpf", "");
    let wasm = out.join(format!("{stem}.wasm"));
    plugin::compile_cc(&src, &wasm).unwrap_or_else(|e| panic!("building {source}: {e}"));
    wasm.display().to_string()
}

/// examples/plugins/NAME.c built into target/plugins/NAME.wasm.
fn plugin_module(name: &str) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = root.join("target/plugins");
    std::fs::create_dir_all(&out).expect("target/plugins");
    let wasm = out.join(format!("{name}.wasm"));
    plugin::compile_c(&root.join(format!("examples/plugins/{name}.c")), &wasm)
        .unwrap_or_else(|e| panic!("{e}"));
    wasm.display().to_string()
}

fn scenario(name: &str, c_cc: &str) -> serde_json::Value {
    let (rate, rtt_ns, ccs, buffer_bytes, aqm, secs): (
        u64,
        u64,
        Vec<(&str, u32)>,
        u64,
        serde_json::Value,
        u64,
    ) = match name {
        // BDP = 1e9/8 × 0.010 = 1 250 000 B.
        "a" => (
            1_000_000_000,
            10_000_000,
            vec![("cubic", 20)],
            1_250_000,
            json!({"kind": "taildrop"}),
            30,
        ),
        // K = 0.17 × 1e10/8 × 0.005 = 1 062 500 B; buffer 500 ms = 625 000 000 B.
        "b" => (
            10_000_000_000,
            5_000_000,
            vec![("dctcp", 100)],
            625_000_000,
            json!({"kind": "step", "threshold": {"bytes": 1_062_500u64}}),
            10,
        ),
        "c" => (
            1_000_000_000,
            10_000_000,
            vec![(c_cc, 10), ("cubic", 10)],
            1_250_000,
            json!({"kind": "taildrop"}),
            30,
        ),
        "d" => (
            40_000_000,
            7_000_000,
            vec![("cubic", 2)],
            1_600_000,
            json!({"kind": "red", "limit": {"bytes": 1_600_000u64}, "min": {"bytes": 120_000u64}, "max": {"bytes": 360_000u64}, "avpkt": {"bytes": 1000}, "burst": 220, "ecn": false, "bandwidth": 40_000_000u64}),
            60,
        ),
        other => panic!("unknown scenario {other:?} (expected a, b, c or d)"),
    };
    let mut classes: Vec<serde_json::Value> = ccs
        .iter()
        .enumerate()
        .map(|(i, (cc, count))| {
            json!({"name": format!("{cc}{i}"), "cc": {"name": cc}, "count": count, "rtt_ns": rtt_ns, "ecn": false,
                   "start": {"kind": "uniform", "lo_ns": 0, "hi_ns": 1_000_000_000u64}, "size_bytes": null, "fq_pacing": false})
        })
        .collect();
    if name == "d" && c_cc != "bulk" {
        classes.push(json!({"name": "short", "cc": {"name": "cubic"}, "count": 0, "rtt_ns": rtt_ns, "ecn": false,
            "start": {"kind": "fixed", "at_ns": 0}, "size_bytes": null, "fq_pacing": false,
            "workload": {"rate_per_s": 100.0, "size": {"dist": "pareto", "alpha": 1.2, "lo": 1000, "hi": 1_000_000}, "start_ns": 0, "stop_ns": null}}));
    }
    json!({
        "name": format!("bench-{name}"), "seed": 1, "duration_ns": secs * 1_000_000_000, "warmup_ns": 0,
        "bottleneck": {"rate_bps": rate, "buffer_packets": null, "buffer_bytes": buffer_bytes, "aqm": aqm, "rtt_ref_ns": 10000000},
        "classes": classes,
        "measure": {"interval_ns": if std::env::var("NO_TS").is_ok() { 0 } else { 100_000_000u64 }, "hist_bin_ns": 1_000_000u64},
        "host": if std::env::var("OFFLOADS").is_ok_and(|v| v == "1") { json!({"offloads": true}) } else { json!({"offloads": false, "ideal": true}) },
    })
}

/// Time this thread has spent on a CPU, seconds (`/proc/thread-self/schedstat`, ns): unlike
/// wall time it does not count waiting for a core, which a shared machine makes noisy.
fn cpu_s() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(f64::NAN, |ns| ns / 1e9)
}

fn peak_rss_mb() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn main() {
    // `--config` prints the scenario's engine config (JSON) instead of running it.
    let dump = std::env::args().any(|a| a == "--config");
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--config")
        .collect();
    let name = args.first().cloned().unwrap_or_else(|| "a".into());
    let arg2 = args.get(1).cloned();
    let mut cfg = scenario(
        &name,
        arg2.as_deref()
            .unwrap_or(if name == "d" { "dynamic" } else { "bbr2" }),
    );
    let mut label = name.clone();
    match (name.as_str(), arg2) {
        ("a", Some(kind)) => {
            cfg["bottleneck"]["aqm"] = aqm_for_a(&kind);
            label = format!("a/{kind}");
        }
        ("b", Some(which)) if which == "plugin-dctcp" => {
            cfg["classes"][0]["cc"] =
                json!({"name": "plugin", "module": cc_plugin_module("bpf/aqmlab_dctcp.bpf.c")});
            label = "b/plugin-dctcp".into();
        }
        ("c", cc) => label = format!("c/{}", cc.as_deref().unwrap_or("bbr2")),
        ("d", which) => label = format!("d/{}", which.as_deref().unwrap_or("dynamic")),
        (_, Some(_)) => {
            panic!("only scenarios a (a discipline), b (plugin-dctcp), c (a CC) and d (bulk) take a second argument")
        }
        _ => {}
    }
    let cfg = cfg.to_string();
    if dump {
        println!("{cfg}");
        return;
    }
    let (t, cpu0) = (std::time::Instant::now(), cpu_s());
    let r = sim::run_json(&cfg, &mut |_| true).expect("benchmark scenario runs");
    let (wall, cpu) = (t.elapsed().as_secs_f64(), cpu_s() - cpu0);
    let pkts = r.counters["bottleneck_pkts"].as_u64().unwrap();
    let events = r.counters["events"].as_u64().unwrap();
    println!(
        "scenario={label} wall_s={wall:.3} cpu_s={cpu:.3} bottleneck_pkts={pkts} pkts_per_s={:.0} pkts_per_cpu_s={:.0} events_per_s={:.0} utilization={:.4} peak_rss_mb={:.1}",
        pkts as f64 / wall,
        pkts as f64 / cpu,
        events as f64 / wall,
        r.summary["metrics"]["utilization"].as_f64().unwrap(),
        peak_rss_mb().unwrap_or(f64::NAN)
    );
}
