//! Congestion-control modules that are not what they should be: a loaded module's bytes
//! changed at random. Loading never panics (it is a module, or a refusal naming what is
//! wrong), and a module that loads runs its ops on random sockets without panicking (a result,
//! or an error naming the op).

use std::path::Path;

use plugin::cc_abi::{ack_sample as A, ops::Op, rate_sample as R, sock as S};
use plugin::{CcInstance, CcPlugin, OpArgs, PluginError};
use proptest::prelude::*;

fn module(source: &str) -> Vec<u8> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "fuzz-{}-{}.wasm",
        Path::new(source).file_stem().unwrap().to_string_lossy(),
        std::process::id()
    ));
    plugin::compile_cc(&root.join(source), &out).unwrap_or_else(|e| panic!("{source}: {e}"))
}

/// Every op once on a socket of random bytes; what an op returns, or the first error.
fn drive(inst: &mut CcInstance, image: &[u8]) -> Result<(), PluginError> {
    let sk = inst.new_sock()?;
    inst.sock_mut(sk).copy_from_slice(image);
    let ack = [7u8; A::SIZE];
    let rs = [3u8; R::SIZE];
    for (op, args) in [
        (Op::Init, OpArgs::None),
        (Op::InAckEvent, OpArgs::U32(4)),
        (Op::PktsAcked, OpArgs::AckSample(&ack)),
        (Op::CongAvoid, OpArgs::Avoid(1448, 2)),
        (Op::CongControl, OpArgs::Control(1448, 0x40, &rs)),
        (Op::Ssthresh, OpArgs::None),
        (Op::SetState, OpArgs::U32(3)),
        (Op::CwndEvent, OpArgs::U32(3)),
        (Op::MinTsoSegs, OpArgs::None),
        (Op::UndoCwnd, OpArgs::None),
    ] {
        inst.call(op, sk, 1_000_000, args)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn a_changed_module_is_refused_or_runs_without_panicking(
        which in 0usize..2,
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        image in proptest::collection::vec(any::<u8>(), S::SIZE),
    ) {
        thread_local! {
            static MODULES: [Vec<u8>; 2] =
                [module("examples/plugins/reno.bpf.c"), module("bpf/aqmlab_dctcp.bpf.c")];
        }
        let mut wasm = MODULES.with(|m| m[which].clone());
        for (at, byte) in &edits {
            let i = at.index(wasm.len());
            wasm[i] = *byte;
        }
        match CcPlugin::load("fuzzed.wasm", &wasm) {
            Err(e) => prop_assert!(e.to_string().starts_with("plugin fuzzed.wasm"), "{e}"),
            Ok(p) => {
                let mut inst = CcInstance::new(&p, 1).map_err(|e| TestCaseError::fail(e.to_string()))?;
                if let Err(e) = drive(&mut inst, &image) {
                    prop_assert!(e.to_string().starts_with("plugin fuzzed.wasm"), "{e}");
                }
            }
        }
    }
}
