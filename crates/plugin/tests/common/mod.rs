//! What the tests share: building the C files, a packet, a recorder of every verdict.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use aqm::{DropReason, Ecn, MarkReason, Nanos, Packet, Verdicts};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Build `path` (relative to the repository) with clang, `defines` added. Panics, naming the
/// Debian packages to install, when the toolchain is missing: the plugin tests never skip.
pub fn build(path: &str, defines: &[&str]) -> Vec<u8> {
    let src = repo().join(path);
    let tag: String = defines
        .concat()
        .chars()
        .filter(|c| c.is_alphanumeric())
        .collect();
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "{}{tag}-{}-{:?}.wasm",
        src.file_stem().unwrap().to_string_lossy(),
        std::process::id(),
        std::thread::current().id()
    ));
    match plugin::compile_c_with(&src, &out, defines) {
        Ok(wasm) => wasm,
        Err(e) => panic!("building {path} failed: {e}"),
    }
}

pub fn step_wasm() -> Vec<u8> {
    build("examples/plugins/step.c", &[])
}

pub fn codel_wasm() -> Vec<u8> {
    build("examples/plugins/codel.c", &[])
}

/// A packet with an identity, so logs compare packet for packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pkt {
    pub id: u64,
    pub flow: u64,
    pub len: u32,
    pub ecn: Ecn,
    pub enq: Nanos,
    pub value: u32,
}

impl Pkt {
    pub fn new(id: u64, flow: u64, len: u32, ecn: Ecn) -> Pkt {
        Pkt {
            id,
            flow,
            len,
            ecn,
            enq: 0,
            value: 0,
        }
    }
}

impl Packet for Pkt {
    fn wire_len(&self) -> u32 {
        self.len
    }
    fn ecn(&self) -> Ecn {
        self.ecn
    }
    fn set_ce(&mut self) {
        assert!(self.ecn.is_ect_or_ce(), "a Not-ECT packet was marked");
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

/// Everything a discipline did, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ev {
    Drop(Pkt, DropReason, Nanos),
    Mark(Pkt, MarkReason, Nanos),
    Sent(Pkt, Nanos),
    /// A dequeue that sent nothing.
    Idle(Nanos),
    /// Queue length and backlog after an operation.
    State(usize, u64),
}

#[derive(Default, Debug)]
pub struct Log(pub Vec<Ev>);

impl Verdicts<Pkt> for Log {
    fn dropped(&mut self, pkt: Pkt, reason: DropReason, now: Nanos) {
        self.0.push(Ev::Drop(pkt, reason, now));
    }
    fn marked(&mut self, pkt: &Pkt, reason: MarkReason, now: Nanos) {
        self.0.push(Ev::Mark(*pkt, reason, now));
    }
}

impl Log {
    pub fn drops(&self) -> Vec<(u64, DropReason, Nanos)> {
        self.0
            .iter()
            .filter_map(|e| match e {
                Ev::Drop(p, r, t) => Some((p.id, *r, *t)),
                _ => None,
            })
            .collect()
    }
    pub fn marks(&self) -> Vec<(u64, MarkReason, Nanos)> {
        self.0
            .iter()
            .filter_map(|e| match e {
                Ev::Mark(p, r, t) => Some((p.id, *r, *t)),
                _ => None,
            })
            .collect()
    }
}
