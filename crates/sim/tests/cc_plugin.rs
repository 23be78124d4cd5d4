//! Congestion controls written as struct_ops BPF C files, run by the simulator
//! (crates/sim/src/cc/plugin.rs): the kernel's Reno functions against the built-in Reno, the
//! emulator's DCTCP port (bpf/aqmlab_dctcp.bpf.c) against the built-in DCTCP, and what a bad
//! CC gets.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use serde_json::{json, Value};
use sim::results::RunResult;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Build `path` (relative to the repository, or absolute) for the simulator; the module's path.
fn build(path: &Path) -> PathBuf {
    let src = repo().join(path);
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "{}-{}-{:?}.wasm",
        src.file_stem().unwrap().to_string_lossy(),
        std::process::id(),
        std::thread::current().id()
    ));
    if let Err(e) = plugin::compile_cc(&src, &out) {
        panic!("building {} failed: {e}", path.display());
    }
    out
}

/// Build a CC written in the test, `body` after the headers.
fn build_source(name: &str, body: &str) -> Result<PathBuf, String> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let src = dir.join(format!("{name}-{}.bpf.c", std::process::id()));
    std::fs::write(
        &src,
        format!(
            "#include \"vmlinux.h\"\n#include <bpf/bpf_helpers.h>\n#include <bpf/bpf_tracing.h>\n{body}"
        ),
    )
    .unwrap();
    plugin::compile_cc(&src, &src.with_extension("wasm"))?;
    Ok(src.with_extension("wasm"))
}

fn plugin_cc(module: &Path) -> Value {
    json!({"name": "plugin", "module": module})
}

/// Every table of two runs equal, column for column, but the CC's name and its internal state
/// (a built-in's α or phase in the time series; a plugin's state is its own, not shown).
fn same_tables(a: &RunResult, b: &RunResult) {
    assert_eq!(a.tables.len(), b.tables.len());
    for ((name, ta), (_, tb)) in a.tables.iter().zip(&b.tables) {
        for (col, ca) in &ta.columns {
            if col == "cc" || col.starts_with("cc_") {
                continue;
            }
            let cb = tb.get(col).unwrap_or_else(|| panic!("{name}.{col}"));
            assert!(ca == cb, "{name}.{col} differs");
        }
    }
    assert_eq!(a.summary["metrics"], b.summary["metrics"]);
}

fn reno_scenario(cc: Value, aqm: Value, ecn: bool, seed: u64) -> String {
    let classes: Vec<Class> = [(10.0, 2), (40.0, 1)]
        .iter()
        .map(|&(rtt, n)| Class {
            cc: cc.clone(),
            ecn,
            start: json!({"kind": "uniform", "lo_ns": 0, "hi_ns": 200_000_000}),
            ..class("reno", n, rtt)
        })
        .collect();
    config(20_000_000, None, Some(60), aqm, &classes, 6.0, 1.0, seed)
}

/// A CC made of the kernel's Reno functions is the built-in Reno, bit for bit: through
/// TailDrop (losses, fast recovery, RTOs at start-up) and through RED with ECN (CWR).
#[test]
fn the_kernels_reno_functions_are_the_builtin_reno() {
    let reno = build(Path::new("examples/plugins/reno.bpf.c"));
    for (aqm, ecn) in [
        (json!({"kind": "taildrop"}), false),
        (
            json!({"kind": "red", "limit": {"bytes": 200_000u64}, "min": {"bytes": 15_000u64}, "max": {"bytes": 45_000u64}, "avpkt": {"bytes": 1000}, "burst": 20, "probability": 0.1, "ecn": true, "bandwidth": 20_000_000u64}),
            true,
        ),
    ] {
        for seed in [1, 2] {
            let builtin = run(&reno_scenario(
                json!({"name": "reno"}),
                aqm.clone(),
                ecn,
                seed,
            ));
            let plugin = run(&reno_scenario(plugin_cc(&reno), aqm.clone(), ecn, seed));
            // Something to compare: the window was cut (drops or marks) more than once a flow.
            let cut: u64 = col_u64(&builtin, "flows", "dropped_bytes")
                .iter()
                .chain(&col_u64(&builtin, "flows", "marked_bytes"))
                .sum();
            assert!(cut > 30 * 1448, "{aqm}: {cut} bytes dropped or marked");
            same_tables(&builtin, &plugin);
            assert_eq!(
                plugin.table("flows").get("cc"),
                Some(&results::Column::Str(vec!["aqmlab_reno".to_string(); 3]))
            );
        }
    }
}

/// The emulator's DCTCP (bpf/aqmlab_dctcp.bpf.c, tcp_dctcp.c statement for statement) built
/// for the simulator is its built-in DCTCP (tcp_dctcp.c too), bit for bit: through STEP
/// marking at K (α, CWR) and through a buffer small enough to drop (Recovery, RTO).
#[test]
fn the_emulators_dctcp_port_is_the_builtin_dctcp() {
    let dctcp = build(Path::new("bpf/aqmlab_dctcp.bpf.c"));
    for (aqm, buffer) in [
        (json!({"kind": "step", "threshold": {"bytes": 30_000}}), 200),
        (json!({"kind": "taildrop"}), 12),
    ] {
        let scenario = |cc: Value| {
            let classes: Vec<Class> = [(4.0, 3), (12.0, 1)]
                .iter()
                .map(|&(rtt, n)| Class {
                    cc: cc.clone(),
                    ecn: true,
                    ..class("dctcp", n, rtt)
                })
                .collect();
            config(
                100_000_000,
                None,
                Some(buffer),
                aqm.clone(),
                &classes,
                3.0,
                0.5,
                7,
            )
        };
        let builtin = run(&scenario(json!({"name": "dctcp"})));
        let plugin = run(&scenario(plugin_cc(&dctcp)));
        let cut: u64 = col_u64(&builtin, "flows", "dropped_bytes")
            .iter()
            .chain(&col_u64(&builtin, "flows", "marked_bytes"))
            .sum();
        assert!(cut > 100 * 1448, "{aqm}: {cut} bytes dropped or marked");
        same_tables(&builtin, &plugin);
    }
}

/// The port's tunables (tcp_dctcp.c's module parameters as `const volatile` globals) are the
/// built-in's parameters, per class: a class's values reach only its flows, bit for bit.
#[test]
fn the_dctcp_ports_tunables_are_the_builtins_parameters_per_class() {
    let dctcp = build(Path::new("bpf/aqmlab_dctcp.bpf.c"));
    let scenario = |a: Value, b: Value| {
        let classes = vec![
            Class {
                cc: a,
                ecn: true,
                ..class("dctcp", 3, 4.0)
            },
            Class {
                cc: b,
                ecn: true,
                ..class("dctcp", 1, 12.0)
            },
        ];
        let step = json!({"kind": "step", "threshold": {"bytes": 30_000}});
        config(100_000_000, None, Some(200), step, &classes, 3.0, 0.5, 7)
    };
    let tuned = |t: Value| json!({"name": "plugin", "module": dctcp, "tunables": t});
    let builtin = run(&scenario(
        json!({"name": "dctcp", "shift_g": 2, "alpha_on_init": 512}),
        json!({"name": "dctcp", "shift_g": 6}),
    ));
    let plugin = run(&scenario(
        tuned(json!({"dctcp_shift_g": 2, "dctcp_alpha_on_init": 512})),
        tuned(json!({"dctcp_shift_g": 6})),
    ));
    same_tables(&builtin, &plugin);
    // The values took effect: the defaults give other marks.
    let defaults = run(&scenario(plugin_cc(&dctcp), plugin_cc(&dctcp)));
    assert_ne!(
        col_u64(&defaults, "flows", "marked_bytes"),
        col_u64(&plugin, "flows", "marked_bytes")
    );
    // A value is checked against its C type, a name against the module's tunables.
    let bad = |t: Value| {
        let cfg = scenario(tuned(t), plugin_cc(&dctcp));
        sim::run_json(&cfg, &mut |_| true).unwrap_err().to_string()
    };
    let e = bad(json!({"dctcp_shift_g": -1}));
    assert!(
        e.contains("dctcp_shift_g: -1 does not fit its type unsigned int (0..=4294967295)"),
        "{e}"
    );
    let e = bad(json!({"shift_g": 2}));
    assert!(
        e.contains(
            "shift_g: unknown tunable (aqmlab_dctcp declares dctcp_shift_g, dctcp_alpha_on_init)"
        ),
        "{e}"
    );
    let e = bad(json!({"dctcp_shift_g": 1.5}));
    assert!(e.contains("dctcp_shift_g: 1.5 is not an integer"), "{e}");
}

/// A module's tunables are its external `const volatile` scalars, with the initializers the
/// source gives them; a static, a plain global, a `const` alone and an array are not.
#[test]
fn tunables_are_the_const_volatile_scalars_of_the_source() {
    let module = build_source(
        "tunables",
        &reno_with(
            "(void)(u + s + b + big + hidden + plain + c + arr[0]);",
            "const volatile __u32 u = 4000000000U;
const volatile __s16 s = -300;
const volatile bool b = true;
const volatile __u64 big = 1ULL << 40;
static const volatile __u32 hidden = 1;
volatile __u32 plain = 2;
const __u32 c = 3;
const volatile __u32 arr[2] = {5, 6};",
        ),
    )
    .unwrap();
    let plugin = plugin::CcPlugin::from_file(&module).unwrap();
    let found: Vec<(&str, &str, i128)> = plugin
        .info()
        .tunables
        .iter()
        .map(|t| (t.name.as_str(), t.type_name.as_str(), t.default))
        .collect();
    let mut expected = vec![
        ("u", "__u32", 4_000_000_000),
        ("s", "__s16", -300),
        ("b", "bool", 1),
        ("big", "__u64", 1 << 40),
    ];
    // Listed by address, which the linker chooses: compare as sets.
    let mut found_sorted = found.clone();
    found_sorted.sort();
    expected.sort();
    assert_eq!(found_sorted, expected);
    // Set per registration, each checked against its type.
    let mut reg = plugin::CcInstance::new(&plugin, 1).unwrap();
    reg.set_tunable("s", -32_768).unwrap();
    let e = reg.set_tunable("s", 32_768).unwrap_err();
    assert!(
        e.contains("s: 32768 does not fit its type __s16 (-32768..=32767)"),
        "{e}"
    );
    let e = reg.set_tunable("b", 2).unwrap_err();
    assert!(e.contains("b: 2 does not fit its type bool (0..=1)"), "{e}");
    let e = reg.set_tunable("hidden", 1).unwrap_err();
    assert!(e.contains("hidden: unknown tunable (t declares "), "{e}");
}

const TCP_SK: &str =
    "static struct tcp_sock *tcp_sk(struct sock *sk) { return (struct tcp_sock *)sk; }\n";

/// Reno's three ops around `body`, which may redefine `cong_avoid_body` (the statements of
/// cong_avoid before the kernel's Reno runs).
fn reno_with(cong_avoid_body: &str, extra: &str) -> String {
    format!(
        "{TCP_SK}
extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;
{extra}
SEC(\"struct_ops\") __u32 BPF_PROG(t_ssthresh, struct sock *sk) {{ return tcp_reno_ssthresh(sk); }}
SEC(\"struct_ops\") __u32 BPF_PROG(t_undo, struct sock *sk) {{ return tcp_reno_undo_cwnd(sk); }}
SEC(\"struct_ops\") void BPF_PROG(t_avoid, struct sock *sk, __u32 ack, __u32 acked) {{
    {cong_avoid_body}
    tcp_reno_cong_avoid(sk, ack, acked);
}}
SEC(\".struct_ops\") struct tcp_congestion_ops t = {{
    .ssthresh = (void *)t_ssthresh, .undo_cwnd = (void *)t_undo, .cong_avoid = (void *)t_avoid,
    .name = \"t\",
}};
"
    )
}

fn run_with(module: &Path) -> Result<RunResult, String> {
    let cfg = reno_scenario(plugin_cc(module), json!({"kind": "taildrop"}), false, 1);
    sim::run_json(&cfg, &mut |_| true).map_err(|e| e.to_string())
}

/// What a module that cannot be a CC gets: one message, naming what is wrong.
#[test]
fn a_bad_cc_is_refused_naming_what_is_wrong() {
    // A write to a field a BPF CC may not write fails to build, naming the field.
    let e = build_source("const", &reno_with("tcp_sk(sk)->srtt_us = 1;", "")).unwrap_err();
    assert!(e.contains("srtt_us") && e.contains("const"), "{e}");
    // A kernel function the simulator does not provide fails to link, naming it.
    let e = build_source(
        "kfunc",
        &reno_with(
            "cubictcp_init(sk);",
            "extern void cubictcp_init(struct sock *sk) __ksym;",
        ),
    )
    .unwrap_err();
    assert!(e.contains("undefined symbol: cubictcp_init"), "{e}");
    assert!(!e.contains("found no wasm-ld"), "{e}");
    // A field the simulator does not keep fails to build, naming it.
    let e = build_source("field", &reno_with("(void)tcp_sk(sk)->mdev_us;", "")).unwrap_err();
    assert!(e.contains("mdev_us"), "{e}");

    // No struct_ops, or one without the required ops: refused when the config is read.
    let none = build_source(
        "none",
        &format!(
            "{TCP_SK}SEC(\"struct_ops\") __u32 BPF_PROG(f, struct sock *sk) {{ return 2; }}\n"
        ),
    )
    .unwrap();
    let e = run_with(&none).unwrap_err();
    assert!(e.contains("has no struct_ops"), "{e}");
    let incomplete = build_source(
        "incomplete",
        "SEC(\"struct_ops\") __u32 BPF_PROG(s, struct sock *sk) { return 2; }
SEC(\".struct_ops\") struct tcp_congestion_ops t = { .ssthresh = (void *)s, .name = \"t\" };
",
    )
    .unwrap();
    let e = run_with(&incomplete).unwrap_err();
    assert!(
        e.contains("does not implement the required ops") && e.contains("sets ssthresh"),
        "{e}"
    );
}

/// An op that traps, loops or writes what it may not ends the run, naming the op and the
/// simulated time.
#[test]
fn a_failing_op_ends_the_run_naming_it() {
    let at_1s = "if (bpf_ktime_get_ns() >= 1000000000ULL)";
    let trap = build_source(
        "trap",
        &reno_with(&format!("{at_1s} __builtin_trap();"), ""),
    )
    .unwrap();
    let e = run_with(&trap).unwrap_err();
    assert!(
        e.contains("cong_avoid at t = 1.0") && e.contains("trapped"),
        "{e}"
    );
    let spin = build_source(
        "spin",
        &reno_with(&format!("{at_1s} for (volatile int i = 0; ; i++) ;"), ""),
    )
    .unwrap();
    let e = run_with(&spin).unwrap_err();
    assert!(
        e.contains("cong_avoid at t = 1.0") && e.contains("units of fuel"),
        "{e}"
    );
    let write = build_source(
        "write",
        &reno_with(
            &format!("{at_1s} ((__u32 *)&tcp_sk(sk)->snd_una)[0] = 0;"),
            "",
        ),
    )
    .unwrap();
    let e = run_with(&write).unwrap_err();
    assert!(
        e.contains("wrote snd_una") && e.contains("may not write"),
        "{e}"
    );
    let ack = build_source(
        "ack",
        &reno_with(&format!("{at_1s} bpf_tcp_send_ack(sk, 0);"), ""),
    )
    .unwrap();
    let e = run_with(&ack).unwrap_err();
    assert!(e.contains("bpf_tcp_send_ack"), "{e}");
}
