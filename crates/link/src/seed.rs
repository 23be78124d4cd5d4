//! Seed derivation: every random component of a run draws from its own stream, seeded from the
//! run seed and the component's number, so adding a component never shifts another's draws.
//! The components are listed here, in one place, so that no two share a number; the emulator's
//! router seeds its discipline and markers exactly as the simulator does.

/// A component's seed from the run seed: the SplitMix64 finalizer (Steele, Lea, Flood,
/// "Fast Splittable Pseudorandom Number Generators", OOPSLA 2014) of the run seed mixed with
/// the component number times the golden-ratio increment.
pub fn derive_seed(run_seed: u64, component: u64) -> u64 {
    let mut z = run_seed ^ component.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The bottleneck's queue discipline.
pub const SEED_QDISC: u64 = 1;
/// Flow start draws (the simulator's schedules).
pub const SEED_STARTS: u64 = 2;
/// Uniform stop draws (their own stream: adding stops never moves the starts).
pub const SEED_STOPS: u64 = 4;
/// Per-flow congestion-control streams: SEED_CC + flow id.
pub const SEED_CC: u64 = 1 << 32;
/// Per-flow packet-value marker streams: SEED_MARKER + flow id (the router numbers flows in
/// order of first sight).
pub const SEED_MARKER: u64 = 2 << 32;
/// Per-class workload arrival streams: SEED_WORKLOAD + class index.
pub const SEED_WORKLOAD: u64 = 3 << 32;
/// Per-flow sender-host timing noise (`[host] jitter`): SEED_HOST + flow id.
pub const SEED_HOST: u64 = 4 << 32;
/// Per-class streams of plugin congestion controls (`bpf_get_prandom_u32`): SEED_CC_PLUGIN +
/// class index.
pub const SEED_CC_PLUGIN: u64 = 5 << 32;
/// The end hosts' CPU stalls (`[host] stall`).
pub const SEED_STALLS: u64 = 5;
