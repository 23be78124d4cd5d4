//! Congestion controls written as Linux struct_ops BPF C files (`SEC(".struct_ops") struct
//! tcp_congestion_ops`), built for wasm32 against `plugins/include/bpfcc` and run in the
//! sandbox: [`CcPlugin`] is the compiled, checked module; [`CcInstance`] one registration of
//! it in a run, with a socket (`struct tcp_sock` image) per flow in the module's memory.
//!
//! As in the kernel, one registration serves every socket that uses it: the module's global
//! data is shared by its sockets, and each socket's own state lives in its `icsk_ca_priv`.
//! The caller (the simulator's TCP) writes a socket's image before each op and reads back what
//! the op may write (net/ipv4/bpf_tcp_ca.c, bpf_tcp_ca_btf_struct_access); the host provides
//! the helpers and kernel functions of `bpf_helpers.h`, the kernel functions as
//! net/ipv4/tcp_cong.c computes them.

use std::sync::{Arc, OnceLock};

use rand_core::Rng as _;
use wasmtime::{
    Caller, Engine, ExternType, Func, Linker, Memory, Module, Store, StoreLimits, Trap, TypedFunc,
    ValType,
};

use crate::cc_abi::{self, ops::Op, sock as S, Ty};
use crate::cc_tunables::{self, Tunable};
use crate::{Limits, PluginError};

/// A CC module's description, read from its `struct tcp_congestion_ops`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CcInfo {
    /// `tcp_congestion_ops.name`.
    pub name: String,
    /// `tcp_congestion_ops.flags` (`TCP_CONG_*`).
    pub flags: u32,
    /// The ops the module sets, in member order, by member name.
    pub ops: Vec<&'static str>,
    /// Its `const volatile` globals a class sets with `cc_params`, by address.
    pub tunables: Vec<Tunable>,
    /// Function-table index of each op of [`cc_abi::ops::ALL`] (0: not set).
    table_index: [u32; 13],
}

impl CcInfo {
    pub fn has(&self, op: Op) -> bool {
        self.table_index[op_index(op)] != 0
    }

    /// The tunable `name`, if `value` fits it; else why not (naming the tunables there are).
    pub fn tunable(&self, name: &str, value: i128) -> Result<&Tunable, String> {
        let Some(t) = self.tunables.iter().find(|t| t.name == name) else {
            let known: Vec<&str> = self.tunables.iter().map(|t| t.name.as_str()).collect();
            return Err(if known.is_empty() {
                format!(
                    "{name}: unknown tunable ({} declares no const volatile global it reads)",
                    self.name
                )
            } else {
                format!(
                    "{name}: unknown tunable ({} declares {})",
                    self.name,
                    known.join(", ")
                )
            });
        };
        t.check(value).map_err(|e| format!("{name}: {e}"))?;
        Ok(t)
    }
}

/// An op's place in [`cc_abi::ops::ALL`] (its declaration order, which is the member order).
fn op_index(op: Op) -> usize {
    op as usize
}

fn op_name(op: Op) -> &'static str {
    cc_abi::ops::ALL[op_index(op)].member
}

/// A compiled, checked CC module: cheap to clone; [`CcInstance::new`] registers it for a run.
#[derive(Clone)]
pub struct CcPlugin {
    name: Arc<str>,
    engine: Engine,
    module: Module,
    info: Arc<CcInfo>,
    limits: Limits,
}

impl std::fmt::Debug for CcPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CcPlugin")
            .field("name", &self.name)
            .field("info", &self.info)
            .finish()
    }
}

fn sig_matches(params: &[Ty], results: &[Ty], f: &wasmtime::FuncType) -> bool {
    fn same(want: &[Ty], got: impl ExactSizeIterator<Item = ValType>) -> bool {
        want.len() == got.len()
            && want
                .iter()
                .zip(got)
                .all(|(w, g)| matches!((w, g), (Ty::I32, ValType::I32) | (Ty::I64, ValType::I64)))
    }
    same(params, f.params()) && same(results, f.results())
}

fn wasm_sig(params: &[Ty], results: &[Ty]) -> String {
    let n = |t: &[Ty]| {
        t.iter()
            .map(|t| match t {
                Ty::I32 => "i32",
                Ty::I64 => "i64",
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!("({}) -> ({})", n(params), n(results))
}

impl CcPlugin {
    /// Compile and check a module with the default [`Limits`]; `name` names it in every error.
    /// Compiled once per process for the same name, bytes and limits (a sweep loads it at
    /// every point).
    pub fn load(name: &str, wasm: &[u8]) -> Result<CcPlugin, PluginError> {
        static LOADED: crate::plugin::ModuleCache<CcPlugin> = OnceLock::new();
        let limits = Limits::default();
        crate::plugin::cached(&LOADED, name, wasm, limits, || {
            CcPlugin::compile(name, wasm, limits)
        })
    }

    /// Read and load a `.wasm` file, named by its file name.
    pub fn from_file(path: &std::path::Path) -> Result<CcPlugin, PluginError> {
        let (name, wasm) = crate::plugin::read_module(path)?;
        CcPlugin::load(&name, &wasm)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn info(&self) -> &CcInfo {
        &self.info
    }

    fn compile(name: &str, wasm: &[u8], limits: Limits) -> Result<CcPlugin, PluginError> {
        let refused = |reason: String| PluginError::Refused {
            module: name.into(),
            reason,
        };
        let (engine, module) = crate::plugin::compile_module(name, wasm)?;

        let provided = || {
            cc_abi::IMPORTS
                .iter()
                .map(|i| i.0)
                .collect::<Vec<_>>()
                .join(", ")
        };
        for import in module.imports() {
            let (m, n) = (import.module(), import.name());
            let known = cc_abi::IMPORTS
                .iter()
                .find(|i| m == cc_abi::IMPORT_MODULE && i.0 == n);
            let Some(&(_, params, results)) = known else {
                return Err(refused(format!(
                    "calls {n} ({m}.{n}), which the simulator does not provide (a CC may call {})",
                    provided()
                )));
            };
            match import.ty() {
                ExternType::Func(f) if sig_matches(params, results, &f) => {}
                _ => {
                    return Err(refused(format!(
                        "imports {n} with another type than the host's {}",
                        wasm_sig(params, results)
                    )))
                }
            }
        }
        if !matches!(
            module.get_export(cc_abi::MEMORY_EXPORT),
            Some(ExternType::Memory(_))
        ) {
            return Err(refused("exports no memory".into()));
        }
        if !matches!(
            module.get_export(cc_abi::TABLE_EXPORT),
            Some(ExternType::Table(_))
        ) {
            return Err(refused(format!(
                "exports no {} (link with -Wl,--export-table)",
                cc_abi::TABLE_EXPORT
            )));
        }

        let ops = struct_ops_bytes(wasm).map_err(refused)?;
        let mut info = read_ops(&ops).map_err(refused)?;
        info.tunables = cc_tunables::find(wasm).map_err(refused)?;
        let mut plugin = CcPlugin {
            name: name.into(),
            engine,
            module,
            info: Arc::new(info.clone()),
            limits,
        };
        // Instantiate once: every op's function must exist with the member's signature; the
        // tunables' defaults are their initial data.
        let instance = CcInstance::new(&plugin, 0)?;
        let memory = instance.memory.data(&instance.store);
        for t in &mut info.tunables {
            let at = t.addr as usize..(t.addr + t.size) as usize;
            let Some(bytes) = memory.get(at) else {
                return Err(refused(format!(
                    "tunable {} lies outside its memory",
                    t.name
                )));
            };
            t.default = t.value_of(bytes);
        }
        plugin.info = Arc::new(info);
        Ok(plugin)
    }
}

/// The bytes of the module's `struct tcp_congestion_ops`: the data segment whose name (the
/// module's name section) is `.struct_ops` or `.struct_ops.link`.
fn struct_ops_bytes(wasm: &[u8]) -> Result<Vec<u8>, String> {
    use wasmparser::{Name, Parser, Payload};
    let mut segments: Vec<Vec<u8>> = Vec::new();
    let mut ops_segment: Option<u32> = None;
    for payload in Parser::new(0).parse_all(wasm) {
        match payload.map_err(|e| format!("not a valid WebAssembly module: {e}"))? {
            Payload::DataSection(reader) => {
                for d in reader {
                    let d = d.map_err(|e| format!("unreadable data segment: {e}"))?;
                    segments.push(d.data.to_vec());
                }
            }
            Payload::CustomSection(c) if c.name() == "name" => {
                let names = wasmparser::NameSectionReader::new(wasmparser::BinaryReader::new(
                    c.data(),
                    c.data_offset(),
                ));
                for name in names {
                    if let Ok(Name::Data(map)) = name {
                        for naming in map.into_iter().flatten() {
                            if cc_abi::STRUCT_OPS_SECTIONS.contains(&naming.name) {
                                if ops_segment.is_some() {
                                    return Err(
                                        "has two struct_ops sections; one CC per file".into()
                                    );
                                }
                                ops_segment = Some(naming.index);
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    let Some(i) = ops_segment else {
        return Err(
            "has no struct_ops: declare the CC as SEC(\".struct_ops\") struct tcp_congestion_ops name = { ... } (and keep the module's name section: no --strip-all)".into(),
        );
    };
    let bytes = segments
        .get(i as usize)
        .ok_or("its struct_ops segment is missing from the data section")?;
    if bytes.len() != cc_abi::ops::SIZE {
        if bytes.len() % cc_abi::ops::SIZE == 0 {
            return Err(format!(
                "declares {} struct tcp_congestion_ops; one CC per file",
                bytes.len() / cc_abi::ops::SIZE
            ));
        }
        return Err(format!(
            "its struct_ops is {} bytes, not a struct tcp_congestion_ops ({} bytes): build against aqmlab's vmlinux.h",
            bytes.len(),
            cc_abi::ops::SIZE
        ));
    }
    Ok(bytes.clone())
}

/// Check a `struct tcp_congestion_ops` as the kernel does when one registers
/// (net/ipv4/tcp_cong.c tcp_validate_congestion_control; net/ipv4/bpf_tcp_ca.c
/// unsupported_ops).
fn read_ops(b: &[u8]) -> Result<CcInfo, String> {
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let raw = &b[cc_abi::ops::NAME..cc_abi::ops::NAME + cc_abi::ops::NAME_LEN];
    let end = raw
        .iter()
        .position(|&c| c == 0)
        .ok_or("tcp_congestion_ops.name is not NUL-terminated within 16 bytes")?;
    let name = std::str::from_utf8(&raw[..end])
        .map_err(|_| "tcp_congestion_ops.name is not UTF-8".to_string())?
        .to_string();
    if name.is_empty() {
        return Err("tcp_congestion_ops.name is empty".into());
    }
    let flags = u32_at(cc_abi::ops::FLAGS);
    if flags & !cc_abi::ops::KNOWN_FLAGS != 0 {
        return Err(format!(
            "tcp_congestion_ops.flags {flags:#x} has bits Linux 6.18 does not define"
        ));
    }
    let mut table_index = [0u32; 13];
    let mut ops = Vec::new();
    for (i, d) in cc_abi::ops::ALL.iter().enumerate() {
        table_index[i] = u32_at(d.offset);
        if table_index[i] != 0 {
            ops.push(d.member);
        }
    }
    let info = CcInfo {
        name,
        flags,
        ops,
        tunables: Vec::new(),
        table_index,
    };
    if info.has(Op::GetInfo) {
        return Err(
            "sets get_info, which a BPF CC may not (net/ipv4/bpf_tcp_ca.c unsupported_ops)".into(),
        );
    }
    if !info.has(Op::Ssthresh)
        || !info.has(Op::UndoCwnd)
        || !(info.has(Op::CongAvoid) || info.has(Op::CongControl))
    {
        return Err(format!(
            "{} does not implement the required ops: ssthresh, undo_cwnd, and cong_avoid or cong_control (tcp_validate_congestion_control); it sets {}",
            info.name,
            if info.ops.is_empty() { "none".to_string() } else { info.ops.join(", ") }
        ));
    }
    Ok(info)
}

/// The store's data: what the host functions touch.
struct CcHost {
    rng: aqm::Rng,
    now_ns: u64,
    memory: Option<Memory>,
    limits: StoreLimits,
    /// The sockets' images lie at `socks_at + k * sock::SIZE`, below `socks_end`.
    socks_at: u32,
    socks_end: u32,
    /// Where an op's pointer argument is written.
    scratch: u32,
    fuel_per_call: u64,
    /// The image of a socket before the op, to check what the op wrote.
    before: Vec<u8>,
}

fn host_error(message: String) -> wasmtime::Error {
    wasmtime::Error::msg(message)
}

impl CcHost {
    /// The image of socket `sk` (an argument from the module), checked.
    fn sock<'a>(&self, data: &'a mut [u8], sk: u32, f: &str) -> wasmtime::Result<&'a mut [u8]> {
        let ok = sk >= self.socks_at
            && sk < self.socks_end
            && (sk - self.socks_at) as usize % S::SIZE == 0;
        if !ok {
            return Err(host_error(format!(
                "{f}: {sk:#x} is not a socket (the op's sk is)"
            )));
        }
        Ok(&mut data[sk as usize..sk as usize + S::SIZE])
    }
}

fn rd(img: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(img[off..off + 4].try_into().unwrap())
}

fn wr(img: &mut [u8], off: usize, v: u32) {
    img[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

/// net/ipv4/tcp_cong.c `tcp_slow_start` (u32 arithmetic as the kernel's).
fn tcp_slow_start(tp: &mut [u8], acked: u32) -> u32 {
    let snd_cwnd = rd(tp, S::SND_CWND);
    let cwnd = snd_cwnd.wrapping_add(acked).min(rd(tp, S::SND_SSTHRESH));
    let acked = acked.wrapping_sub(cwnd.wrapping_sub(snd_cwnd));
    wr(tp, S::SND_CWND, cwnd.min(rd(tp, S::SND_CWND_CLAMP)));
    acked
}

/// net/ipv4/tcp_cong.c `tcp_cong_avoid_ai`: +1 segment per `w` acked. `w` = 0 divides by zero
/// in the kernel: an error here.
fn tcp_cong_avoid_ai(tp: &mut [u8], w: u32, acked: u32) -> Result<(), String> {
    if w == 0 {
        return Err("tcp_cong_avoid_ai: w = 0 (the kernel would divide by zero)".into());
    }
    let mut cnt = rd(tp, S::SND_CWND_CNT);
    let mut cwnd = rd(tp, S::SND_CWND);
    // If credits accumulated at a higher w, apply them gently now.
    if cnt >= w {
        cnt = 0;
        cwnd = cwnd.wrapping_add(1);
    }
    cnt = cnt.wrapping_add(acked);
    if cnt >= w {
        let delta = cnt / w;
        cnt -= delta * w;
        cwnd = cwnd.wrapping_add(delta);
    }
    wr(tp, S::SND_CWND_CNT, cnt);
    wr(tp, S::SND_CWND, cwnd.min(rd(tp, S::SND_CWND_CLAMP)));
    Ok(())
}

/// include/net/tcp.h `tcp_is_cwnd_limited`.
fn tcp_is_cwnd_limited(tp: &[u8]) -> bool {
    if tp[S::IS_CWND_LIMITED] != 0 {
        return true;
    }
    let cwnd = rd(tp, S::SND_CWND);
    if cwnd < rd(tp, S::SND_SSTHRESH) {
        return (cwnd as u64) < 2 * rd(tp, S::MAX_PACKETS_OUT) as u64;
    }
    false
}

/// net/ipv4/tcp_cong.c `tcp_reno_cong_avoid`.
fn tcp_reno_cong_avoid(tp: &mut [u8], acked: u32) -> Result<(), String> {
    if !tcp_is_cwnd_limited(tp) {
        return Ok(());
    }
    let mut acked = acked;
    if rd(tp, S::SND_CWND) < rd(tp, S::SND_SSTHRESH) {
        acked = tcp_slow_start(tp, acked);
        if acked == 0 {
            return Ok(());
        }
    }
    let w = rd(tp, S::SND_CWND);
    tcp_cong_avoid_ai(tp, w, acked)
}

fn linker(engine: &Engine) -> Linker<CcHost> {
    let m = cc_abi::IMPORT_MODULE;
    let mut l = Linker::new(engine);
    fn mem<'a>(caller: &'a mut Caller<'_, CcHost>) -> (&'a mut [u8], &'a mut CcHost) {
        let memory = caller.data().memory.expect("set at instantiation");
        memory.data_and_store_mut(caller)
    }
    l.func_wrap(m, "bpf_ktime_get_ns", |c: Caller<'_, CcHost>| -> u64 {
        c.data().now_ns
    })
    .and_then(|l| {
        l.func_wrap(m, "bpf_get_prandom_u32", |mut c: Caller<'_, CcHost>| -> u32 {
            c.data_mut().rng.next_u32()
        })
    })
    .and_then(|l| {
        // include/linux/jiffies.h with HZ = 1000 (the simulator's `tcp_jiffies32`).
        l.func_wrap(m, "bpf_jiffies64", |c: Caller<'_, CcHost>| -> u64 {
            c.data().now_ns / 1_000_000
        })
    })
    .and_then(|l| {
        l.func_wrap(
            m,
            "bpf_tcp_send_ack",
            |_: Caller<'_, CcHost>, _tp: u32, _rcv_nxt: u32| -> wasmtime::Result<u32> {
                Err(host_error(
                    "bpf_tcp_send_ack: the simulator's receivers send their own ACKs (receiver-side events are not raised)".into(),
                ))
            },
        )
    })
    .and_then(|l| {
        l.func_wrap(
            m,
            "tcp_reno_ssthresh",
            |mut c: Caller<'_, CcHost>, sk: u32| -> wasmtime::Result<u32> {
                let (data, host) = mem(&mut c);
                let tp = host.sock(data, sk, "tcp_reno_ssthresh")?;
                // net/ipv4/tcp_cong.c: max(snd_cwnd >> 1, 2).
                Ok((rd(tp, S::SND_CWND) >> 1).max(2))
            },
        )
    })
    .and_then(|l| {
        l.func_wrap(
            m,
            "tcp_reno_undo_cwnd",
            |mut c: Caller<'_, CcHost>, sk: u32| -> wasmtime::Result<u32> {
                let (data, host) = mem(&mut c);
                let tp = host.sock(data, sk, "tcp_reno_undo_cwnd")?;
                // net/ipv4/tcp_cong.c: max(snd_cwnd, prior_cwnd).
                Ok(rd(tp, S::SND_CWND).max(rd(tp, S::PRIOR_CWND)))
            },
        )
    })
    .and_then(|l| {
        l.func_wrap(
            m,
            "tcp_reno_cong_avoid",
            |mut c: Caller<'_, CcHost>, sk: u32, _ack: u32, acked: u32| -> wasmtime::Result<()> {
                let (data, host) = mem(&mut c);
                let tp = host.sock(data, sk, "tcp_reno_cong_avoid")?;
                tcp_reno_cong_avoid(tp, acked).map_err(host_error)
            },
        )
    })
    .and_then(|l| {
        l.func_wrap(
            m,
            "tcp_slow_start",
            |mut c: Caller<'_, CcHost>, tp: u32, acked: u32| -> wasmtime::Result<u32> {
                let (data, host) = mem(&mut c);
                let tp = host.sock(data, tp, "tcp_slow_start")?;
                Ok(tcp_slow_start(tp, acked))
            },
        )
    })
    .and_then(|l| {
        l.func_wrap(
            m,
            "tcp_cong_avoid_ai",
            |mut c: Caller<'_, CcHost>, tp: u32, w: u32, acked: u32| -> wasmtime::Result<()> {
                let (data, host) = mem(&mut c);
                let tp = host.sock(data, tp, "tcp_cong_avoid_ai")?;
                tcp_cong_avoid_ai(tp, w, acked).map_err(host_error)
            },
        )
    })
    .expect("the host functions are defined once");
    l
}

/// An op's function, typed by its signature.
#[derive(Clone)]
enum OpFn {
    /// ssthresh, min_tso_segs, undo_cwnd: (sk) -> u32.
    Ret(TypedFunc<u32, u32>),
    /// init, release: (sk).
    Sk(TypedFunc<u32, ()>),
    /// set_state, cwnd_event, in_ack_event, pkts_acked: (sk, u32).
    Sk1(TypedFunc<(u32, u32), ()>),
    /// cong_avoid: (sk, ack, acked).
    Sk2(TypedFunc<(u32, u32, u32), ()>),
    /// cong_control: (sk, ack, flag, rs).
    Sk3(TypedFunc<(u32, u32, i32, u32), ()>),
}

/// Scratch space for an op's pointer argument (`ack_sample`, `rate_sample`), ahead of the
/// sockets.
const SCRATCH: usize = 128;

/// One registration of a CC module in a run: its instance, and the sockets of the flows that
/// use it.
pub struct CcInstance {
    plugin: CcPlugin,
    store: Store<CcHost>,
    memory: Memory,
    ops: [Option<OpFn>; 13],
    error: Option<PluginError>,
}

impl std::fmt::Debug for CcInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CcInstance")
            .field("plugin", &self.plugin)
            .field("error", &self.error)
            .finish()
    }
}

/// What a call into an op passes besides the socket.
#[derive(Clone, Copy, Debug)]
pub enum OpArgs<'a> {
    None,
    /// set_state's new state, cwnd_event's event, in_ack_event's flags.
    U32(u32),
    /// cong_avoid's (ack, acked).
    Avoid(u32, u32),
    /// pkts_acked's `struct ack_sample`.
    AckSample(&'a [u8; cc_abi::ack_sample::SIZE]),
    /// cong_control's (ack, flag, `struct rate_sample`).
    Control(u32, i32, &'a [u8; cc_abi::rate_sample::SIZE]),
}

impl CcInstance {
    /// Register `plugin` for one run: instantiate its module (data initialised; no op runs),
    /// its `bpf_get_prandom_u32` stream seeded by `seed`.
    pub fn new(plugin: &CcPlugin, seed: u64) -> Result<CcInstance, PluginError> {
        let refused = |reason: String| PluginError::Refused {
            module: plugin.name.to_string(),
            reason,
        };
        let host = CcHost {
            rng: aqm::rng_from_seed(seed),
            now_ns: 0,
            memory: None,
            limits: crate::plugin::store_limits(plugin.limits.memory_bytes),
            socks_at: 0,
            socks_end: 0,
            scratch: 0,
            fuel_per_call: plugin.limits.fuel_per_call,
            before: vec![0; S::SIZE],
        };
        let mut store = Store::new(&plugin.engine, host);
        store.limiter(|h| &mut h.limits);
        store.set_fuel(plugin.limits.fuel_init).expect("fuel is on");
        let instance = linker(&plugin.engine)
            .instantiate(&mut store, &plugin.module)
            .map_err(|e| refused(format!("cannot be instantiated: {e}")))?;
        let memory = instance
            .get_memory(&mut store, cc_abi::MEMORY_EXPORT)
            .expect("checked at load");
        let table = instance
            .get_table(&mut store, cc_abi::TABLE_EXPORT)
            .expect("checked at load");
        let mut ops: [Option<OpFn>; 13] = std::array::from_fn(|_| None);
        for (i, d) in cc_abi::ops::ALL.iter().enumerate() {
            let (op, member, params, results) = (d.op, d.member, d.params, d.results);
            let idx = plugin.info.table_index[i];
            if idx == 0 || matches!(op, Op::GetInfo) {
                continue;
            }
            let func: Option<Func> = table
                .get(&mut store, idx as u64)
                .and_then(|r| r.as_func().flatten().copied());
            let Some(func) = func else {
                return Err(refused(format!(
                    "tcp_congestion_ops.{member} is {idx}, not a function of its table"
                )));
            };
            let ty = func.ty(&store);
            if !sig_matches(params, results, &ty) {
                return Err(refused(format!(
                    "tcp_congestion_ops.{member} has type {ty}; the member's is {}",
                    wasm_sig(params, results)
                )));
            }
            let typed = |e: wasmtime::Error| refused(format!("{member}: {e}"));
            ops[i] = Some(match op {
                Op::Ssthresh | Op::MinTsoSegs | Op::UndoCwnd | Op::SndbufExpand => {
                    OpFn::Ret(func.typed(&store).map_err(typed)?)
                }
                Op::Init | Op::Release => OpFn::Sk(func.typed(&store).map_err(typed)?),
                Op::SetState | Op::CwndEvent | Op::InAckEvent | Op::PktsAcked => {
                    OpFn::Sk1(func.typed(&store).map_err(typed)?)
                }
                Op::CongAvoid => OpFn::Sk2(func.typed(&store).map_err(typed)?),
                Op::CongControl => OpFn::Sk3(func.typed(&store).map_err(typed)?),
                Op::GetInfo => unreachable!("refused at load"),
            });
        }
        // The sockets and the scratch space lie above everything the module was built with
        // (it has no allocator to claim that memory).
        let base = (memory.data_size(&store) as u32).next_multiple_of(8);
        let data = store.data_mut();
        data.memory = Some(memory);
        data.scratch = base;
        data.socks_at = base + SCRATCH as u32;
        data.socks_end = data.socks_at;
        Ok(CcInstance {
            plugin: plugin.clone(),
            store,
            memory,
            ops,
            error: None,
        })
    }

    pub fn plugin(&self) -> &CcPlugin {
        &self.plugin
    }

    pub fn info(&self) -> &CcInfo {
        &self.plugin.info
    }

    /// The first error an op met; from then on every op is skipped (the caller ends the run).
    pub fn error(&self) -> Option<&PluginError> {
        self.error.as_ref()
    }

    /// End the run with an error the caller found in what `op` did (the first error stays).
    pub fn fail(&mut self, op: Op, now_ns: u64, reason: String) {
        if self.error.is_none() {
            self.error = Some(PluginError::Call {
                module: self.plugin.name.to_string(),
                function: op_name(op),
                now: now_ns,
                reason,
            });
        }
    }

    /// A new socket: a zeroed `struct tcp_sock` image (its `icsk_ca_priv` too, as the
    /// kernel's `tcp_assign_congestion_control` clears it), growing the memory as needed.
    pub fn new_sock(&mut self) -> Result<u32, PluginError> {
        let sk = self.store.data().socks_end;
        let end = sk as usize + S::SIZE;
        let size = self.memory.data_size(&self.store);
        if end + SCRATCH > size {
            let pages = (end + SCRATCH - size).div_ceil(65_536) as u64;
            self.memory
                .grow(&mut self.store, pages)
                .map_err(|_| PluginError::Refused {
                    module: self.plugin.name.to_string(),
                    reason: format!(
                        "no memory for socket {}: the cap is {} KiB",
                        (sk - self.store.data().socks_at) as usize / S::SIZE,
                        self.plugin.limits.memory_bytes >> 10
                    ),
                })?;
        }
        self.store.data_mut().socks_end = end as u32;
        self.memory.data_mut(&mut self.store)[sk as usize..end].fill(0);
        Ok(sk)
    }

    /// Socket `sk`'s image, to write before an op and read after.
    pub fn sock_mut(&mut self, sk: u32) -> &mut [u8] {
        &mut self.memory.data_mut(&mut self.store)[sk as usize..sk as usize + S::SIZE]
    }

    pub fn sock(&self, sk: u32) -> &[u8] {
        &self.memory.data(&self.store)[sk as usize..sk as usize + S::SIZE]
    }

    pub fn has(&self, op: Op) -> bool {
        self.ops[op_index(op)].is_some()
    }

    /// Set the tunable `name` to `value` for this registration, before any op runs (as a
    /// loader sets `.rodata` before the object is loaded).
    pub fn set_tunable(&mut self, name: &str, value: i128) -> Result<(), String> {
        let t = self.plugin.info.tunable(name, value)?;
        let (at, bytes) = (t.addr as usize, t.bytes(value));
        self.memory.data_mut(&mut self.store)[at..at + bytes.len()].copy_from_slice(&bytes);
        Ok(())
    }

    /// Run `op` on socket `sk` at `now_ns`. `Ok(None)` if the module does not set the op (or
    /// an earlier op failed: see [`CcInstance::error`]); the op's result if it returns one.
    /// Fails if the op traps, runs out of fuel, or writes a field a BPF CC may not.
    pub fn call(
        &mut self,
        op: Op,
        sk: u32,
        now_ns: u64,
        args: OpArgs<'_>,
    ) -> Result<Option<u32>, PluginError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        let Some(f) = &self.ops[op_index(op)] else {
            return Ok(None);
        };
        let r = match run(&mut self.store, self.memory, f, sk, now_ns, args) {
            Ok(Ok(out)) => Ok(out),
            Ok(Err(reason)) => Err(PluginError::Call {
                module: self.plugin.name.to_string(),
                function: op_name(op),
                now: now_ns,
                reason,
            }),
            Err(e) => Err(self.call_error(op, now_ns, e)),
        };
        if let Err(e) = &r {
            self.error = Some(e.clone());
        }
        r
    }

    fn call_error(&self, op: Op, now: u64, e: wasmtime::Error) -> PluginError {
        let root = e.root_cause().to_string();
        let reason = match e.downcast_ref::<Trap>() {
            Some(Trap::OutOfFuel) => format!(
                "stopped after {} units of fuel (the per-call limit; an endless loop?)",
                self.plugin.limits.fuel_per_call
            ),
            _ if root.contains("growing memory") => format!(
                "tried to grow its memory past the cap of {} KiB",
                self.plugin.limits.memory_bytes >> 10
            ),
            Some(trap) => format!("trapped: {trap}"),
            None => root,
        };
        PluginError::Call {
            module: self.plugin.name.to_string(),
            function: op_name(op),
            now,
            reason,
        }
    }
}

/// Call `f` on socket `sk`: the module's failure (a trap, fuel), or the op's result and
/// whether what it wrote in the socket is allowed ([`check_writes`]).
fn run(
    store: &mut Store<CcHost>,
    memory: Memory,
    f: &OpFn,
    sk: u32,
    now_ns: u64,
    args: OpArgs<'_>,
) -> wasmtime::Result<Result<Option<u32>, String>> {
    let at = sk as usize;
    let (data, host) = memory.data_and_store_mut(&mut *store);
    host.before.copy_from_slice(&data[at..at + S::SIZE]);
    let scratch = host.scratch;
    match args {
        OpArgs::AckSample(b) => data[scratch as usize..][..b.len()].copy_from_slice(b),
        OpArgs::Control(_, _, b) => data[scratch as usize..][..b.len()].copy_from_slice(b),
        _ => {}
    }
    host.now_ns = now_ns;
    let fuel = host.fuel_per_call;
    store.set_fuel(fuel).expect("fuel is on");
    let s = &mut *store;
    let out = match (f, args) {
        (OpFn::Ret(f), _) => Some(f.call(s, sk)?),
        (OpFn::Sk(f), _) => f.call(s, sk).map(|_| None)?,
        (OpFn::Sk1(f), OpArgs::U32(v)) => f.call(s, (sk, v)).map(|_| None)?,
        (OpFn::Sk1(f), OpArgs::AckSample(_)) => f.call(s, (sk, scratch)).map(|_| None)?,
        (OpFn::Sk2(f), OpArgs::Avoid(ack, acked)) => f.call(s, (sk, ack, acked)).map(|_| None)?,
        (OpFn::Sk3(f), OpArgs::Control(ack, flag, _)) => {
            f.call(s, (sk, ack, flag, scratch)).map(|_| None)?
        }
        _ => panic!("an op called with {args:?}, not its arguments"),
    };
    let (data, host) = memory.data_and_store_mut(&mut *store);
    Ok(check_writes(&host.before, &data[at..at + S::SIZE]).map(|()| out))
}

/// Every field of the image, for naming a byte an op changed: (offset, length, name).
const FIELDS: [(usize, usize, &str); 40] = [
    (S::SK_STATE, 1, "__sk_common.skc_state"),
    (S::SK_PACING_SHIFT, 1, "sk_pacing_shift"),
    (2, 2, "padding"),
    (S::SK_PACING_STATUS, 4, "sk_pacing_status"),
    (S::SK_PACING_RATE, 8, "sk_pacing_rate"),
    (S::SK_MAX_PACING_RATE, 8, "sk_max_pacing_rate"),
    (S::ICSK_CA_STATE, 1, "icsk_ca_state"),
    (S::ICSK_RETRANSMITS, 1, "icsk_retransmits"),
    (S::ICSK_ACK_PENDING, 1, "icsk_ack.pending"),
    (27, 5, "padding"),
    (S::ICSK_CA_PRIV, S::ICSK_CA_PRIV_SIZE, "icsk_ca_priv"),
    (S::SND_CWND, 4, "snd_cwnd"),
    (S::SND_CWND_CNT, 4, "snd_cwnd_cnt"),
    (S::SND_SSTHRESH, 4, "snd_ssthresh"),
    (S::APP_LIMITED, 4, "app_limited"),
    (S::ECN_FLAGS, 1, "ecn_flags"),
    (S::IS_CWND_LIMITED, 1, "is_cwnd_limited"),
    (154, 2, "padding"),
    (S::SND_UNA, 4, "snd_una"),
    (S::SND_NXT, 4, "snd_nxt"),
    (S::RCV_NXT, 4, "rcv_nxt"),
    (S::MSS_CACHE, 4, "mss_cache"),
    (S::SRTT_US, 4, "srtt_us"),
    (S::PACKETS_OUT, 4, "packets_out"),
    (S::RETRANS_OUT, 4, "retrans_out"),
    (S::SACKED_OUT, 4, "sacked_out"),
    (S::LOST_OUT, 4, "lost_out"),
    (S::DELIVERED, 4, "delivered"),
    (S::DELIVERED_CE, 4, "delivered_ce"),
    (S::LOST, 4, "lost"),
    (S::PRIOR_CWND, 4, "prior_cwnd"),
    (S::MAX_PACKETS_OUT, 4, "max_packets_out"),
    (S::SND_CWND_CLAMP, 4, "snd_cwnd_clamp"),
    (S::LSNDTIME, 4, "lsndtime"),
    (S::RTT_MIN, 24, "rtt_min"),
    (244, 4, "padding"),
    (S::TCP_MSTAMP, 8, "tcp_mstamp"),
    (S::TCP_CLOCK_CACHE, 8, "tcp_clock_cache"),
    (S::DELIVERED_MSTAMP, 8, "delivered_mstamp"),
    (S::FIRST_TX_MSTAMP, 8, "first_tx_mstamp"),
];

/// The byte ranges of the image a BPF CC may not write: the complement of
/// [`cc_abi::sock::WRITABLE`].
fn read_only() -> &'static [std::ops::Range<usize>] {
    static RANGES: OnceLock<Vec<std::ops::Range<usize>>> = OnceLock::new();
    RANGES.get_or_init(|| {
        let writable = |i: usize| S::WRITABLE.iter().any(|w| (w.0..w.0 + w.1).contains(&i));
        let mut out: Vec<std::ops::Range<usize>> = Vec::new();
        for i in (0..S::SIZE).filter(|&i| !writable(i)) {
            match out.last_mut() {
                Some(r) if r.end == i => r.end = i + 1,
                _ => out.push(i..i + 1),
            }
        }
        out
    })
}

/// What an op changed in its socket must be what a BPF CC may write; and of that, the two
/// receiver-side fields (icsk_ack.pending, ecn_flags) the simulator does not take. Checked
/// after every op, so the common case (only writable bytes changed) is a few compares.
fn check_writes(before: &[u8], after: &[u8]) -> Result<(), String> {
    let name = |i: usize| FIELDS.iter().rev().find(|f| f.0 <= i).map_or("?", |f| f.2);
    for r in read_only() {
        if before[r.clone()] != after[r.clone()] {
            let i = r
                .clone()
                .find(|&i| before[i] != after[i])
                .expect("they differ");
            return Err(format!(
                "wrote {} (byte {i} of struct tcp_sock), which a BPF CC may not write (net/ipv4/bpf_tcp_ca.c)",
                name(i)
            ));
        }
    }
    for i in [S::ICSK_ACK_PENDING, S::ECN_FLAGS] {
        if before[i] != after[i] {
            return Err(format!(
                "wrote {}: receiver-side state, which the simulator's receivers keep themselves",
                name(i)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_is_named_and_read_only_is_the_complement_of_writable() {
        let mut covered = vec![0u32; S::SIZE];
        for f in FIELDS {
            for c in &mut covered[f.0..f.0 + f.1] {
                *c += 1;
            }
        }
        assert!(covered.iter().all(|&c| c == 1), "{covered:?}");
        let ro: usize = read_only().iter().map(|r| r.len()).sum();
        let w: usize = S::WRITABLE.iter().map(|w| w.1).sum();
        assert_eq!(ro + w, S::SIZE);
    }

    #[test]
    fn a_write_is_judged_by_the_field_it_hits() {
        let before = vec![0u8; S::SIZE];
        let mut after = before.clone();
        after[S::SND_CWND] = 7;
        after[S::ICSK_CA_PRIV + 50] = 1;
        after[S::SK_PACING_RATE + 3] = 1;
        assert_eq!(check_writes(&before, &after), Ok(()));
        after[S::SRTT_US + 1] = 1;
        let e = check_writes(&before, &after).unwrap_err();
        assert!(e.starts_with("wrote srtt_us (byte 173"), "{e}");
        let mut after = before.clone();
        after[S::ECN_FLAGS] = 2;
        let e = check_writes(&before, &after).unwrap_err();
        assert!(e.starts_with("wrote ecn_flags: receiver-side"), "{e}");
    }
}
