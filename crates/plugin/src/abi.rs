//! ABI v2 as the host sees it: the names, signatures, codes and memory layouts of
//! `plugins/include/aqmlab_qdisc.h`. Every number here mirrors the header (whose
//! `_Static_assert`s pin the C side); change both together, and bump [`VERSION`].
//!
//! v2 extends v1 without changing a layout (the choice strings take v1's reserved option
//! field), so the host runs v1 modules too: a v1 module is one that imports from `aqmlab_v1`
//! and uses none of v2's additions ([`FLAG_READS_VALUES`], the unit `choice`, `set_timer`,
//! `set_limit`, a missing `aqmlab_enqueue`).

use aqm::options::Unit;
use aqm::{DropReason, Ecn, MarkReason};

/// The ABI version of the header (`AQMLAB_ABI_VERSION`); the host runs it and v1.
pub const VERSION: u32 = 2;
/// The versions the host runs.
pub const VERSIONS: [u32; 2] = [1, 2];
/// The import module of the header's version (`AQMLAB_IMPORT`).
pub const IMPORT_MODULE: &str = "aqmlab_v2";
/// The prefix of import modules of other ABI versions, to name a version mismatch as such.
pub const IMPORT_MODULE_PREFIX: &str = "aqmlab_v";

/// A wasm value type, as the ABI's signatures use them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    I32,
    I64,
}

/// One function of the ABI: its name, parameters, results, and its C prototype for messages.
#[derive(Clone, Copy, Debug)]
pub struct Sig {
    pub name: &'static str,
    pub params: &'static [Ty],
    pub results: &'static [Ty],
    pub c: &'static str,
}

/// The import module of ABI `version`.
pub fn import_module(version: u32) -> String {
    format!("{IMPORT_MODULE_PREFIX}{version}")
}

/// The host functions a plugin of ABI `version` may import; nothing else.
pub fn imports(version: u32) -> &'static [Sig] {
    match version {
        1 => &IMPORTS[..3],
        _ => &IMPORTS,
    }
}

/// The host functions of the header's version (module [`IMPORT_MODULE`]); v1's are the
/// first three.
pub const IMPORTS: [Sig; 5] = [
    Sig {
        name: "drop_head",
        params: &[Ty::I32, Ty::I32],
        results: &[],
        c: "void aqmlab_drop_head(uint32_t queue, uint32_t reason)",
    },
    Sig {
        name: "mark_head",
        params: &[Ty::I32, Ty::I32],
        results: &[Ty::I32],
        c: "uint32_t aqmlab_mark_head(uint32_t queue, uint32_t reason)",
    },
    Sig {
        name: "random_u64",
        params: &[],
        results: &[Ty::I64],
        c: "uint64_t aqmlab_random_u64(void)",
    },
    Sig {
        name: "set_timer",
        params: &[Ty::I64],
        results: &[],
        c: "void aqmlab_set_timer(uint64_t period_ns)",
    },
    Sig {
        name: "set_limit",
        params: &[Ty::I64],
        results: &[],
        c: "void aqmlab_set_limit(uint64_t packets)",
    },
];

pub const INIT: Sig = Sig {
    name: "aqmlab_init",
    params: &[],
    results: &[Ty::I32],
    c: "const char *aqmlab_init(void)",
};
pub const ENQUEUE: Sig = Sig {
    name: "aqmlab_enqueue",
    params: &[Ty::I64, Ty::I32],
    results: &[Ty::I32],
    c: "uint32_t aqmlab_enqueue(uint64_t now, const aqmlab_pkt *pkt)",
};
pub const DEQUEUE: Sig = Sig {
    name: "aqmlab_dequeue",
    params: &[Ty::I64],
    results: &[Ty::I32],
    c: "int32_t aqmlab_dequeue(uint64_t now)",
};
pub const TIMER: Sig = Sig {
    name: "aqmlab_timer",
    params: &[Ty::I64],
    results: &[],
    c: "void aqmlab_timer(uint64_t now)",
};
/// The exported description: a data symbol, i.e. an i32 global holding its address.
pub const INFO_EXPORT: &str = "aqmlab_qdisc";
pub const MEMORY_EXPORT: &str = "memory";

/// `AQMLAB_MAX_QUEUES`, `AQMLAB_MAX_OPTIONS`.
pub const MAX_QUEUES: u32 = 65_536;
pub const MAX_OPTIONS: u32 = 64;
/// `AQMLAB_OWNS_LIMIT`.
pub const FLAG_OWNS_LIMIT: u32 = 1;
/// `AQMLAB_READS_VALUES` (v2).
pub const FLAG_READS_VALUES: u32 = 2;
/// The flags ABI `version` defines.
pub fn flags(version: u32) -> u32 {
    match version {
        1 => FLAG_OWNS_LIMIT,
        _ => FLAG_OWNS_LIMIT | FLAG_READS_VALUES,
    }
}
/// The most strings a choice option may name.
pub const MAX_CHOICES: usize = 64;
/// The longest string the host reads from the module (a doc line, a summary, a message).
pub const MAX_STRING: usize = 4096;
/// The longest option or kind name.
pub const MAX_NAME: usize = 64;

/// `aqmlab_qdisc_info`: 56 bytes.
pub mod info {
    pub const SIZE: u32 = 56;
    pub const ABI_VERSION: u32 = 0;
    pub const N_QUEUES: u32 = 4;
    pub const KIND: u32 = 8;
    pub const SUMMARY: u32 = 12;
    pub const SOURCE: u32 = 16;
    pub const FLAGS: u32 = 20;
    pub const TIMER_NS: u32 = 24;
    pub const N_OPTIONS: u32 = 32;
    pub const OPTIONS: u32 = 36;
    pub const OPTION_VALUES: u32 = 40;
    pub const QUEUES: u32 = 44;
    pub const ARRIVAL: u32 = 48;
}

/// `aqmlab_option`: 40 bytes.
pub mod option {
    pub const SIZE: u32 = 40;
    pub const NAME: u32 = 0;
    pub const UNIT: u32 = 4;
    pub const DOC: u32 = 8;
    /// v2: the `|`-separated strings of a choice (v1: reserved, never read).
    pub const CHOICES: u32 = 12;
    pub const DEFAULT: u32 = 16;
    pub const MIN: u32 = 24;
    pub const MAX: u32 = 32;
}

/// `aqmlab_pkt`: 40 bytes.
pub mod pkt {
    pub const SIZE: usize = 40;
    pub const ENQUEUE_NS: usize = 0;
    pub const FLOW_ID: usize = 8;
    pub const FLOW_HASH: usize = 16;
    pub const WIRE_LEN: usize = 20;
    pub const VALUE: usize = 24;
    pub const TRAFFIC_CLASS: usize = 28;
    pub const ECN: usize = 32;
}

/// `aqmlab_queue`: 56 bytes.
pub mod queue {
    pub const SIZE: usize = 56;
    pub const BACKLOG_BYTES: usize = 0;
    pub const LEN: usize = 8;
    pub const HEAD: usize = 16;
}

/// Actions of an enqueue verdict (bits 8-15).
pub const ACTION_ACCEPT: u32 = 0;
pub const ACTION_MARK: u32 = 1;
pub const ACTION_DROP: u32 = 2;

/// `AQMLAB_NONE`.
pub const DEQUEUE_NONE: i32 = -1;

/// `AQMLAB_DROP_*` codes 1..=8 in order.
const DROP_REASONS: [DropReason; 8] = [
    DropReason::Overflow,
    DropReason::Early,
    DropReason::Forced,
    DropReason::HeadDrop,
    DropReason::FlowMatch,
    DropReason::Value,
    DropReason::Overload,
    DropReason::Random,
];

/// `AQMLAB_MARK_*` codes 1..=7 in order.
const MARK_REASONS: [MarkReason; 7] = [
    MarkReason::Prob,
    MarkReason::Forced,
    MarkReason::Step,
    MarkReason::Coupled,
    MarkReason::Ctv,
    MarkReason::Random,
    MarkReason::Delay,
];

pub fn drop_reason(code: u32) -> Option<DropReason> {
    DROP_REASONS.get((code as usize).wrapping_sub(1)).copied()
}

pub fn mark_reason(code: u32) -> Option<MarkReason> {
    MARK_REASONS.get((code as usize).wrapping_sub(1)).copied()
}

/// An enqueue verdict, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnqueueVerdict {
    Accept(u32),
    Mark(u32, MarkReason),
    Drop(DropReason),
}

/// Decode `aqmlab_enqueue`'s return value; `None` if it is none of the three forms.
pub fn decode_verdict(v: u32) -> Option<EnqueueVerdict> {
    let (queue, action, reason) = (v >> 16, (v >> 8) & 0xff, v & 0xff);
    match action {
        ACTION_ACCEPT if reason == 0 => Some(EnqueueVerdict::Accept(queue)),
        ACTION_MARK => mark_reason(reason).map(|r| EnqueueVerdict::Mark(queue, r)),
        ACTION_DROP if queue == 0 => drop_reason(reason).map(EnqueueVerdict::Drop),
        _ => None,
    }
}

/// The ECN codepoint as the header numbers it (the two ECN bits, as `aqm::Ecn`).
pub fn ecn_code(e: Ecn) -> u8 {
    e as u8
}

/// The option units of the header (`AQMLAB_UNIT_*`), as `aqm::options::Unit`. A choice's
/// strings are the module's, not static: the plugin's option holds them
/// ([`crate::PluginOption::choices`]) and its unit is `Unit::Choice(&[])`.
pub fn unit(name: &str) -> Option<Unit> {
    Some(match name {
        "time" => Unit::Time,
        "delay-target" => Unit::DelayTarget,
        "size" => Unit::Size,
        "packets" => Unit::Packets,
        "rate" => Unit::Rate,
        "int" => Unit::Int,
        "float" => Unit::Float,
        "bool" => Unit::Bool,
        "choice" => Unit::Choice(&[]),
        _ => return None,
    })
}

pub const UNIT_NAMES: &str = "time, delay-target, size, packets, rate, int, float, bool, choice";

/// 32 bits of the run-keyed flow hash (`aqmlab_pkt.flow_hash`): the top half of
/// `aqm::drr::flow_bucket`'s mix, so that `aqmlab_bucket(hash, n)` (`(hash·n) >> 32`) is
/// `flow_bucket(flow_id, seed, n)`.
#[inline]
pub fn flow_hash(flow_key: u64, seed: u64) -> u32 {
    let mut z = flow_key ^ seed;
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 32) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_decode_as_the_header_encodes_them() {
        // AQMLAB_ACCEPT(3) = 3 << 16; AQMLAB_MARK(2, STEP) = 2 << 16 | 1 << 8 | 3;
        // AQMLAB_DROP(FORCED) = 2 << 8 | 3.
        assert_eq!(decode_verdict(3 << 16), Some(EnqueueVerdict::Accept(3)));
        assert_eq!(
            decode_verdict(2 << 16 | 1 << 8 | 3),
            Some(EnqueueVerdict::Mark(2, MarkReason::Step))
        );
        assert_eq!(
            decode_verdict(2 << 8 | 3),
            Some(EnqueueVerdict::Drop(DropReason::Forced))
        );
        // Reason codes out of range, an accept with a reason, an unknown action, a drop
        // naming a queue: none is a verdict.
        for bad in [
            1 << 8,
            1 << 8 | 8,
            2 << 8,
            2 << 8 | 9,
            5,
            3 << 8,
            1 << 16 | 2 << 8 | 1,
        ] {
            assert_eq!(decode_verdict(bad), None, "{bad:#x}");
        }
    }

    #[test]
    fn flow_hash_buckets_as_the_built_in_fq_disciplines() {
        // reciprocal_scale of the hash is drr::flow_bucket's bucket, for any key, seed, n.
        let mut x = 0x1234_5678_9abc_def0u64;
        for _ in 0..10_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let (key, seed, n) = (x, x.rotate_left(17), (x >> 40) as u32 % 4096 + 1);
            let bucket = ((flow_hash(key, seed) as u64 * n as u64) >> 32) as usize;
            assert_eq!(bucket, aqm::drr::flow_bucket(key, seed, n));
        }
    }
}
