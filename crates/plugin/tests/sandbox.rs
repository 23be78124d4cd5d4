//! The sandbox and the ABI's rules: modules refused at load with the message naming what is
//! wrong; a call that traps, runs away, grows its memory past the cap or breaks a rule becomes
//! an error naming the module, the function and the simulated time; options checked; the
//! timer, the random stream and several queues as the header describes them.

mod common;

use aqm::options::Unit;
use aqm::{DropReason, Ecn, Nanos, Qdisc};
use common::{build, Log, Pkt};
use plugin::{Limits, Plugin, PluginError, PluginQdisc};
use rand_core::Rng as _;

const BROKEN: &str = "crates/plugin/tests/fixtures/broken.c";
const PRIO: &str = "crates/plugin/tests/fixtures/prio.c";
const FIELDS: &str = "crates/plugin/tests/fixtures/fields.c";
/// ABI v1's header: `-include` it to build a C file as a v1 module (its include guard makes
/// the file's own `#include "aqmlab_qdisc.h"` a no-op).
const V1_HEADER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/v1/aqmlab_qdisc.h"
);
const MS: Nanos = 1_000_000;

fn refused(wasm: &[u8]) -> String {
    refused_with(wasm, Limits::default())
}

fn refused_with(wasm: &[u8], limits: Limits) -> String {
    match Plugin::load_with("bad.wasm", wasm, limits) {
        Ok(_) => panic!("the module was accepted"),
        Err(e @ PluginError::Refused { .. }) => {
            assert_eq!(e.module(), "bad.wasm");
            e.to_string()
        }
        Err(e) => panic!("refused for the wrong cause: {e}"),
    }
}

fn has(msg: &str, part: &str) {
    assert!(msg.contains(part), "{msg:?} should contain {part:?}");
}

#[test]
fn random_bytes_are_refused_as_not_webassembly() {
    let mut rng = aqm::rng_from_seed(7);
    for n in [0usize, 3, 8, 100, 5000] {
        let mut bytes: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
        has(&refused(&bytes), "not a valid WebAssembly module");
        // With a valid magic and version, the rest random.
        if n > 8 {
            bytes[..8].copy_from_slice(b"\0asm\x01\0\0\0");
            has(&refused(&bytes), "not a valid WebAssembly module");
        }
    }
    // The header alone is a valid, empty module: refused for what it lacks.
    has(&refused(b"\0asm\x01\0\0\0"), "missing export aqmlab_init");
}

#[test]
fn an_import_outside_the_abi_is_refused() {
    let msg = refused(&build(BROKEN, &["-DIMPORT_ENV"]));
    has(
        &msg,
        "plugin bad.wasm refused: imports env.puts, which ABI v2 does not provide",
    );
    has(
        &msg,
        "aqmlab_v2.drop_head, aqmlab_v2.mark_head, aqmlab_v2.random_u64, aqmlab_v2.set_timer",
    );
    // The host functions of a version the host does not run are named as such.
    let msg = refused(&build(BROKEN, &["-DIMPORT_V3"]));
    has(
        &msg,
        "imports aqmlab_v3.random_u64: built against another ABI version",
    );
    // One module, one version: v1's random_u64 beside v2's drop_head.
    let msg = refused(&build(BROKEN, &["-DIMPORT_V1"]));
    has(&msg, "imports from both aqmlab_v");
    // v1 has no set_timer.
    let msg = refused(&build(BROKEN, &["-include", V1_HEADER, "-DSETS_TIMER_V1"]));
    has(
        &msg,
        "imports aqmlab_v1.set_timer, which ABI v1 does not provide",
    );
}

#[test]
fn a_missing_export_is_refused() {
    // aqmlab_enqueue is optional for one queue since v2 only.
    let msg = refused(&build(BROKEN, &["-include", V1_HEADER, "-DNO_ENQUEUE"]));
    has(&msg, "missing export aqmlab_enqueue (ABI v1: uint32_t aqmlab_enqueue(uint64_t now, const aqmlab_pkt *pkt))");
    let msg = refused(&build(PRIO, &["-DNO_ENQUEUE"]));
    has(&msg, "missing export aqmlab_enqueue (ABI v2: uint32_t aqmlab_enqueue(uint64_t now, const aqmlab_pkt *pkt)); only a plugin with one queue may leave it out");
    let one_queue =
        Plugin::load("fifo.wasm", &build(BROKEN, &["-DNO_ENQUEUE", "-DNO_TIMER"])).unwrap();
    assert!(!one_queue.info().has_enqueue);
}

#[test]
fn an_export_with_the_wrong_signature_is_refused() {
    let msg = refused(&build(BROKEN, &["-DBAD_SIGNATURE"]));
    has(
        &msg,
        "export aqmlab_enqueue has type (i32) -> (i32); ABI v2 wants (i64, i32) -> (i32)",
    );
}

#[test]
fn another_abi_version_is_refused() {
    let msg = refused(&build(BROKEN, &["-DABI_VERSION=3"]));
    has(
        &msg,
        "ABI version 3 (aqmlab_qdisc.abi_version); this host runs ABI v1 and v2",
    );
    // A v1 description beside v2's host functions.
    let msg = refused(&build(BROKEN, &["-DABI_VERSION=1"]));
    has(
        &msg,
        "declares ABI v1 (aqmlab_qdisc.abi_version) but imports from aqmlab_v2",
    );
}

#[test]
fn initial_memory_above_the_cap_is_refused() {
    // 1 MiB of static data: accepted under the default 16 MiB cap, refused under 512 KiB.
    let wasm = build(BROKEN, &["-DBIG_MEMORY"]);
    Plugin::load("big.wasm", &wasm).unwrap();
    let small = Limits {
        memory_bytes: 512 << 10,
        ..Limits::default()
    };
    has(
        &refused_with(&wasm, small),
        "of initial memory, above the cap of 512 KiB",
    );
}

/// The broken plugin failing on its `fail_at`-th enqueue as `how` says, fed one Not-ECT
/// packet every µs from t = 7 ns; returns the error and the log.
fn fail(how: u32, fail_at: u32, limits: Limits) -> (PluginError, Log, PluginQdisc<Pkt>) {
    let plugin = Plugin::load_with("broken.wasm", &build(BROKEN, &[]), limits).unwrap();
    let mut q: PluginQdisc<Pkt> = plugin
        .build(&[("fail_at", fail_at as f64), ("how", how as f64)], 0)
        .unwrap();
    let mut log = Log::default();
    for i in 1..=10u64 {
        q.enqueue(Pkt::new(i, 0, 1000, Ecn::NotEct), i * 1000 + 7, &mut log);
    }
    (q.error().expect("the call failed").clone(), log, q)
}

#[test]
fn a_trap_on_the_nth_packet_names_the_function_and_the_time() {
    let (e, mut log, mut q) = fail(1, 5, Limits::default());
    assert!(
        matches!(&e, PluginError::Call { module, function: "aqmlab_enqueue", now: 5007, .. } if module == "broken.wasm"),
        "{e:?}"
    );
    has(
        &e.to_string(),
        "plugin broken.wasm: aqmlab_enqueue at t = 0.000005007 s (5007 ns): trapped",
    );
    // Packets 1-4 were queued; the 5th and every later arrival is dropped ("overflow"), so
    // none is lost, and nothing is sent any more.
    assert_eq!(q.len(), 4);
    let dropped: Vec<u64> = log.drops().iter().map(|d| d.0).collect();
    assert_eq!(dropped, vec![5, 6, 7, 8, 9, 10]);
    assert!(log.drops().iter().all(|d| d.1 == DropReason::Overflow));
    assert!(q.dequeue(20_000, &mut log).is_none());
    // try_enqueue returns the first error.
    assert_eq!(
        q.try_enqueue(Pkt::new(11, 0, 1, Ecn::NotEct), 30_000, &mut log),
        Err(e)
    );
}

#[test]
fn an_endless_loop_is_stopped_by_the_fuel_limit() {
    let limits = Limits {
        fuel_per_call: 200_000,
        ..Limits::default()
    };
    let t = std::time::Instant::now();
    let (e, _, _) = fail(2, 3, limits);
    assert!(
        matches!(
            e,
            PluginError::Call {
                function: "aqmlab_enqueue",
                now: 3007,
                ..
            }
        ),
        "{e:?}"
    );
    has(&e.to_string(), "stopped after 200000 units of fuel");
    assert!(t.elapsed().as_secs() < 10, "{:?}", t.elapsed());
}

#[test]
fn growing_memory_past_the_cap_is_stopped() {
    let (e, _, _) = fail(3, 2, Limits::default());
    assert!(
        matches!(
            e,
            PluginError::Call {
                function: "aqmlab_enqueue",
                now: 2007,
                ..
            }
        ),
        "{e:?}"
    );
    has(
        &e.to_string(),
        "tried to grow its memory past the cap of 16384 KiB",
    );
}

#[test]
fn broken_abi_rules_are_errors() {
    let (e, _, _) = fail(4, 1, Limits::default());
    has(
        &e.to_string(),
        "aqmlab_enqueue at t = 0.000001007 s (1007 ns): returned 0xdeadbeef: none of AQMLAB_ACCEPT",
    );
    // The 2nd arrival drops the one queued packet, then asks to drop from the empty queue.
    let (e, log, q) = fail(5, 2, Limits::default());
    has(
        &e.to_string(),
        "aqmlab_enqueue at t = 0.000002007 s (2007 ns): aqmlab_drop_head(0, 2): queue 0 is empty",
    );
    assert_eq!(log.drops()[0], (1, DropReason::Early, 2007));
    assert_eq!(q.len(), 0);
    let (e, _, _) = fail(6, 1, Limits::default());
    has(&e.to_string(), "AQMLAB_MARK of a Not-ECT packet");
}

#[test]
fn options_are_checked_by_the_host_and_by_the_plugin() {
    let broken = Plugin::load("broken.wasm", &build(BROKEN, &[])).unwrap();
    let err = |p: &Plugin, o: &[(&str, f64)]| match p.build::<Pkt>(o, 0) {
        Err(PluginError::Options { message, .. }) => message,
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("{o:?} accepted"),
    };
    assert_eq!(
        err(&broken, &[("hwo", 1.0)]),
        "hwo: unknown option (the plugin declares: fail_at, how)"
    );
    assert_eq!(err(&broken, &[("how", 9.0)]), "how: 9 must be in [1, 8]");
    assert_eq!(
        err(&broken, &[("fail_at", 1.5)]),
        "fail_at: 1.5 must be a whole number (int)"
    );
    assert_eq!(
        err(&broken, &[("how", 2.0), ("how", 2.0)]),
        "how: given twice"
    );
    // STEP's aqmlab_init refuses two thresholds, and none.
    let step = Plugin::load("step.wasm", &common::step_wasm()).unwrap();
    assert_eq!(
        err(
            &step,
            &[("threshold_bytes", 1.0), ("threshold_packets", 1.0)]
        ),
        "threshold: give it in bytes or in packets, not both"
    );
    assert_eq!(
        err(&step, &[]),
        "threshold: missing (a size in bytes or in packets)"
    );
}

#[test]
fn the_description_is_read_from_the_module() {
    let codel = Plugin::load("codel.wasm", &common::codel_wasm()).unwrap();
    let info = codel.info();
    assert_eq!(info.kind, "codel_c");
    assert!(info.source.contains("RFC 8289"));
    assert_eq!(
        (
            info.n_queues,
            info.owns_limit,
            info.timer_ns,
            info.has_dequeue
        ),
        (1, false, None, true)
    );
    type Declared<'a> = (&'a str, Unit, Option<f64>, Option<f64>, Option<f64>);
    let o: Vec<Declared> = info
        .options
        .iter()
        .map(|o| (o.name.as_str(), o.unit, o.default, o.min, o.max))
        .collect();
    // sch_codel's defaults: target 5 ms, interval 100 ms, limit 1000, ecn off, no ce_threshold.
    assert_eq!(
        o,
        vec![
            ("target", Unit::DelayTarget, Some(5e6), Some(1.0), None),
            ("interval", Unit::Time, Some(100e6), Some(1.0), None),
            ("limit", Unit::Packets, Some(1000.0), Some(1.0), None),
            ("ecn", Unit::Bool, Some(0.0), Some(0.0), Some(1.0)),
            ("ce_threshold", Unit::Time, None, Some(1.0), None),
        ]
    );
    assert_eq!(info.delay_target_option, Some(0));
    let q: PluginQdisc<Pkt> = codel.build(&[("ecn", 1.0)], 0).unwrap();
    let v = q.option_values();
    assert_eq!(&v[..4], &[5e6, 100e6, 1000.0, 1.0]);
    assert!(v[4].is_nan());
    let step = Plugin::load("step.wasm", &common::step_wasm()).unwrap();
    assert_eq!(
        (step.info().has_dequeue, step.info().delay_target_option),
        (false, None)
    );
}

#[test]
fn two_queues_are_served_as_the_plugin_says() {
    // prio.c: ECT(1) to queue 1, the rest to queue 0; queue 1 is served first.
    let plugin = Plugin::load("prio.wasm", &build(PRIO, &[])).unwrap();
    assert_eq!(
        (plugin.info().n_queues, plugin.info().timer_ns),
        (2, Some(MS))
    );
    let mut q: PluginQdisc<Pkt> = plugin.build(&[], 0).unwrap();
    let mut log = Log::default();
    for (id, ecn) in [
        (0, Ecn::NotEct),
        (1, Ecn::Ect1),
        (2, Ecn::Ect0),
        (3, Ecn::Ect1),
    ] {
        q.enqueue(Pkt::new(id, id, 100 * (id as u32 + 1), ecn), 10, &mut log);
    }
    assert_eq!(
        (q.queue_len(0), q.queue_len(1), q.backlog_bytes()),
        (2, 2, 1000)
    );
    assert_eq!(q.head_enqueue_ns(), Some(10));
    let sent: Vec<u64> = (0..5)
        .filter_map(|i| q.dequeue(20 + i, &mut log).map(|p| p.id))
        .collect();
    assert_eq!(sent, vec![1, 3, 0, 2]);
    assert!(q.is_empty() && log.0.is_empty());
}

#[test]
fn timer_ticks_run_lazily_each_at_its_own_time() {
    // max_sojourn 1.5 ms, 5 packets at t = 0, the next dequeue at 3.5 ms: the ticks at 1 ms
    // (sojourn 1 ms), 2 ms and 3 ms run first; the last two drop a head each, at their own
    // time; then the 3rd packet is sent.
    let plugin = Plugin::load("prio.wasm", &build(PRIO, &[])).unwrap();
    let mut q: PluginQdisc<Pkt> = plugin.build(&[("max_sojourn", 1.5e6)], 0).unwrap();
    let mut log = Log::default();
    for id in 0..5 {
        q.enqueue(Pkt::new(id, 0, 1500, Ecn::NotEct), 0, &mut log);
    }
    assert_eq!(q.dequeue(3 * MS + MS / 2, &mut log).unwrap().id, 2);
    assert_eq!(
        log.drops(),
        vec![
            (0, DropReason::HeadDrop, 2 * MS),
            (1, DropReason::HeadDrop, 3 * MS)
        ]
    );
    // The next ticks (4, 5, ... ms) drop the rest once they have waited over 1.5 ms: at 4 ms
    // packet 3 has waited 4 ms.
    q.enqueue(
        Pkt::new(9, 0, 1500, Ecn::NotEct),
        4 * MS + 900_000,
        &mut log,
    );
    assert_eq!(log.drops()[2..], [(3, DropReason::HeadDrop, 4 * MS)]);
    assert_eq!(q.len(), 2);
}

#[test]
fn the_random_stream_is_the_seeded_pcg() {
    // prio.c drops an arrival when aqmlab_random_unit() < p_drop: the pattern is the one
    // aqm::uniform01 draws from aqm::rng_from_seed(seed), the built-ins' stream.
    let plugin = Plugin::load("prio.wasm", &build(PRIO, &[])).unwrap();
    let pattern = |seed: u64| -> Vec<bool> {
        let mut q: PluginQdisc<Pkt> = plugin.build(&[("p_drop", 0.3)], seed).unwrap();
        let mut log = Log::default();
        (0..2000u64)
            .map(|i| {
                let before = log.drops().len();
                q.enqueue(Pkt::new(i, 0, 100, Ecn::NotEct), i, &mut log);
                q.dequeue(i, &mut log);
                log.drops().len() > before
            })
            .collect()
    };
    for seed in [0, 42] {
        let mut rng = aqm::rng_from_seed(seed);
        let expect: Vec<bool> = (0..2000).map(|_| aqm::uniform01(&mut rng) < 0.3).collect();
        assert_eq!(pattern(seed), expect, "seed {seed}");
    }
    assert_ne!(pattern(1), pattern(2));
}

#[test]
fn the_host_shows_the_plugin_the_queues_and_packets_the_header_describes() {
    // fields.c traps as soon as a queue record or an arrival's field differs from its own
    // shadow of the queues (see the file); the run must end without error, and the verdicts
    // must be those its rules give, computed here from the packets alone.
    let plugin = Plugin::load("fields.wasm", &build(FIELDS, &[])).unwrap();
    let seed = 0x5eed_f00d_u64;
    let mut q: PluginQdisc<Pkt> = plugin
        .build(&[("seed", seed as f64)], seed)
        .unwrap()
        .with_classifier(|p| (p.flow % 7) as u32);
    let mut rng = aqm::rng_from_seed(3);
    let (mut log, mut sent, mut arrivals) = (Log::default(), vec![], vec![]);
    let mut t = 0;
    for id in 0..20_000 {
        t += rng.next_u64() % 1000;
        if rng.next_u64() % 100 < 52 {
            let ecn = [Ecn::NotEct, Ecn::Ect0, Ecn::Ect1, Ecn::Ce][(rng.next_u64() % 4) as usize];
            let mut p = Pkt::new(id, rng.next_u64(), 64 + (rng.next_u64() % 1437) as u32, ecn);
            p.value = (rng.next_u64() % 1000) as u32;
            arrivals.push(p);
            q.enqueue(p, t, &mut log);
        } else if let Some(p) = q.dequeue(t, &mut log) {
            sent.push(p);
        }
    }
    assert_eq!(q.error(), None);
    // Arrivals marked "ctv": value % 3 == 0, not % 5, ECT or CE.
    let ctv: Vec<u64> = arrivals
        .iter()
        .filter(|p| p.value % 3 == 0 && p.value % 5 != 0 && p.ecn != Ecn::NotEct)
        .map(|p| p.id)
        .collect();
    let marked: Vec<u64> = log
        .marks()
        .iter()
        .filter(|m| m.1 == aqm::MarkReason::Ctv)
        .map(|m| m.0)
        .collect();
    assert_eq!(marked, ctv);
    // Every arrival with value % 5 == 0 dropped ("value"), besides heads.
    let dropped: std::collections::HashSet<u64> = log.drops().iter().map(|d| d.0).collect();
    assert!(arrivals
        .iter()
        .filter(|p| p.value % 5 == 0)
        .all(|p| dropped.contains(&p.id)));
    assert!(log.drops().iter().all(|d| d.1 == DropReason::Value));
    // Sent ECT packets of value % 11 == 0 leave with CE ("prob"); within a class, in order.
    assert!(sent
        .iter()
        .all(|p| p.value % 11 != 0 || p.ecn != Ecn::Ect0 && p.ecn != Ecn::Ect1));
    assert!(log.marks().iter().any(|m| m.1 == aqm::MarkReason::Prob));
    for class in 0..7 {
        let ids: Vec<u64> = sent
            .iter()
            .filter(|p| p.flow % 7 == class)
            .map(|p| p.id)
            .collect();
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "class {class} out of order"
        );
    }
    assert!(
        sent.len() > 5000 && dropped.len() > 2000,
        "{} sent, {} dropped",
        sent.len(),
        dropped.len()
    );
}

/// `plugin` fed an overload: 1500-byte ECT(0) arrivals every 100 µs, departures every 120 µs,
/// for a second; returns the log and the ids sent.
fn overload(plugin: &Plugin, options: &[(&str, f64)]) -> (Log, Vec<u64>) {
    let mut q: PluginQdisc<Pkt> = plugin.build(options, 0).unwrap();
    let mut log = Log::default();
    let mut sent = vec![];
    for i in 0..10_000u64 {
        q.enqueue(Pkt::new(i, i % 3, 1500, Ecn::Ect0), i * 100_000, &mut log);
        if i * 100 % 120 < 100 {
            sent.extend(q.dequeue(i * 100_000 + 50_000, &mut log).map(|p| p.id));
        }
    }
    assert_eq!(q.error(), None);
    (log, sent)
}

#[test]
fn a_v1_module_runs_unchanged() {
    // STEP and the two-queue fixture (a timer, the random stream, drops at enqueue and by the
    // timer) built against ABI v1's header declare v1, import from aqmlab_v1, and give the
    // verdicts of their v2 builds, packet for packet.
    for (file, options) in [
        (
            "examples/plugins/step.c",
            &[("threshold_packets", 20.0)][..],
        ),
        (PRIO, &[("p_drop", 0.01), ("max_sojourn", 1.5e6)][..]),
    ] {
        let v1 = Plugin::load("v1.wasm", &build(file, &["-include", V1_HEADER])).unwrap();
        let v2 = Plugin::load("v2.wasm", &build(file, &[])).unwrap();
        assert_eq!((v1.info().abi_version, v2.info().abi_version), (1, 2));
        let (log1, sent1) = overload(&v1, options);
        let (log2, sent2) = overload(&v2, options);
        assert!(!log1.0.is_empty(), "{file}: the overload is signalled");
        assert_eq!(log1.0, log2.0, "{file}");
        assert_eq!(sent1, sent2, "{file}");
    }
}

#[test]
fn choice_options_are_read_and_checked() {
    let p = Plugin::load(
        "choice.wasm",
        &build(BROKEN, &["-DCHOICES=\"slow|fast-2\""]),
    )
    .unwrap();
    let mode = &p.info().options[2];
    assert_eq!(
        (mode.name.as_str(), mode.unit, &mode.choices[..]),
        (
            "mode",
            Unit::Choice(&[]),
            &["slow".to_string(), "fast-2".to_string()][..]
        )
    );
    // Its default and bounds are indices; the declared min and max (0, 0) are not read.
    assert_eq!(
        (mode.default, mode.min, mode.max),
        (Some(1.0), Some(0.0), Some(1.0))
    );
    match p.build::<Pkt>(&[("mode", 2.0)], 0) {
        Err(PluginError::Options { message, .. }) => {
            assert_eq!(message, "mode: 2 must be in [0, 1]")
        }
        _ => panic!("index 2 of two choices accepted"),
    }
    for (choices, why) in [
        (
            "0",
            "a choice needs its strings (aqmlab_option.choices is NULL)",
        ),
        (
            "\"slow\"",
            "\"slow\" names 1 choices; give 2 to 64, separated by '|'",
        ),
        (
            "\"slow|slow\"",
            "choice \"slow\" is named twice in \"slow|slow\"",
        ),
        (
            "\"slow|Fast\"",
            "choice \"Fast\" of \"slow|Fast\" is not a word",
        ),
        (
            "\"slow||fast\"",
            "choice \"\" of \"slow||fast\" is not a word",
        ),
    ] {
        let msg = refused(&build(BROKEN, &[&format!("-DCHOICES={choices}")]));
        has(&msg, &format!("option 2 (mode): {why}"));
    }
    // ABI v1 has no choice unit.
    let msg = refused(&build(BROKEN, &["-include", V1_HEADER, "-DCHOICES=0"]));
    has(&msg, "option 2 (mode): unit \"choice\" is none of time, delay-target, size, packets, rate, int, float, bool");
}

#[test]
fn flags_are_read_by_version() {
    let p = Plugin::load("values.wasm", &build(BROKEN, &["-DFLAGS=3"])).unwrap();
    assert_eq!((p.info().owns_limit, p.info().reads_values), (true, true));
    has(
        &refused(&build(BROKEN, &["-DFLAGS=4"])),
        "aqmlab_qdisc.flags 0x4 has bits ABI v2 does not define",
    );
    // AQMLAB_READS_VALUES is v2's.
    has(
        &refused(&build(BROKEN, &["-include", V1_HEADER, "-DFLAGS=2"])),
        "aqmlab_qdisc.flags 0x2 has bits ABI v1 does not define",
    );
}

#[test]
fn set_timer_is_for_aqmlab_init_and_needs_a_timer() {
    // Called from aqmlab_enqueue (how = 7): the call fails, naming the rule.
    let (e, _, _) = fail(7, 3, Limits::default());
    has(
        &e.to_string(),
        "aqmlab_enqueue at t = 0.000003007 s (3007 ns): aqmlab_set_timer(1000000): allowed only in aqmlab_init",
    );
    // Imported without an aqmlab_timer to call.
    has(
        &refused(&build(BROKEN, &["-DNO_TIMER"])),
        "the module imports aqmlab_set_timer but exports no aqmlab_timer",
    );
}

#[test]
fn without_aqmlab_enqueue_the_host_appends_within_the_limit_set_in_init() {
    // codel.c has no aqmlab_enqueue: its `limit` is set with aqmlab_set_limit, and the host
    // drops the arrivals beyond it ("overflow") and appends the others to queue 0 in order.
    let codel = Plugin::load("codel.wasm", &common::codel_wasm()).unwrap();
    assert!(!codel.info().has_enqueue);
    let mut q: PluginQdisc<Pkt> = codel.build(&[("limit", 3.0)], 0).unwrap();
    let mut log = Log::default();
    for i in 0..5u64 {
        q.enqueue(Pkt::new(i, 0, 100, Ecn::NotEct), 10 + i, &mut log);
    }
    assert_eq!(
        log.drops(),
        vec![(3, DropReason::Overflow, 13), (4, DropReason::Overflow, 14)]
    );
    let sent: Vec<(u64, Nanos)> = (0..4)
        .filter_map(|i| q.dequeue(20 + i, &mut log).map(|p| (p.id, p.enq)))
        .collect();
    assert_eq!(sent, vec![(0, 10), (1, 11), (2, 12)]);
    // set_limit outside aqmlab_init breaks the rule like set_timer.
    let (e, _, _) = fail(8, 2, Limits::default());
    has(
        &e.to_string(),
        "aqmlab_enqueue at t = 0.000002007 s (2007 ns): aqmlab_set_limit(7): allowed only in aqmlab_init",
    );
}
