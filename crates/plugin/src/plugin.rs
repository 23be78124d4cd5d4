//! Loading a module: compile, check it against its ABI version (v1 or v2), read its
//! description.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use aqm::options::Unit;
use aqm::Nanos;
use wasmtime::{Config, Engine, ExternType, Module, ValType};

use crate::abi::{self, Sig, Ty};
use crate::qdisc::{Instance, Probe};
use crate::PluginError;

/// The sandbox's limits on one instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Limits {
    /// The most linear memory the module may have, bytes (its initial memory included).
    pub memory_bytes: usize,
    /// Fuel (about one unit per wasm instruction) for one call of `aqmlab_enqueue`,
    /// `aqmlab_dequeue` or `aqmlab_timer`: a call that needs more is stopped.
    pub fuel_per_call: u64,
    /// Fuel for `aqmlab_init` (and the module's data initialisation).
    pub fuel_init: u64,
}

impl Default for Limits {
    /// 16 MiB of memory (the mirror of 65536 queues takes 3.5 MiB); 10^6 instructions per
    /// packet call, about a thousand times what CoDel needs and a millisecond or two of an
    /// interpreter's time; 10^8 for the set-up.
    fn default() -> Self {
        Limits {
            memory_bytes: 16 << 20,
            fuel_per_call: 1_000_000,
            fuel_init: 100_000_000,
        }
    }
}

/// One option a plugin declares (`aqmlab_option`).
#[derive(Clone, Debug, PartialEq)]
pub struct PluginOption {
    /// The scenario key.
    pub name: String,
    pub unit: Unit,
    pub doc: String,
    /// In the unit's terms (ns, bytes, packets, bit/s, ...); `None`: no default (the plugin
    /// receives NaN, `AQMLAB_UNSET`, when the scenario does not set it).
    pub default: Option<f64>,
    /// Closed bounds; `None`: unbounded. A choice's are its indices.
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// A choice's strings (its unit is `Unit::Choice(&[])`; the module receives the index of
    /// the one a scenario names); empty for every other unit.
    pub choices: Vec<String>,
}

/// A plugin's description (`aqmlab_qdisc_info`), read at load.
#[derive(Clone, Debug, PartialEq)]
pub struct PluginInfo {
    /// The ABI version the module was built for (1 or 2).
    pub abi_version: u32,
    pub kind: String,
    pub summary: String,
    pub source: String,
    /// Host queues, 1..=65536.
    pub n_queues: u32,
    /// `AQMLAB_OWNS_LIMIT`: the plugin sees arrivals the physical buffer would refuse.
    pub owns_limit: bool,
    /// `AQMLAB_READS_VALUES`: the run's packet-value marker feeds `aqmlab_pkt.value`.
    pub reads_values: bool,
    /// Period of `aqmlab_timer` as declared, ns (`aqmlab_set_timer` may set another).
    pub timer_ns: Option<Nanos>,
    /// Whether the module imports `aqmlab_set_timer` (sets its timer's period in init).
    pub sets_timer: bool,
    /// Whether the plugin exports `aqmlab_enqueue` (else the host appends every arrival to
    /// queue 0).
    pub has_enqueue: bool,
    /// Whether the plugin exports `aqmlab_dequeue` (else the host sends queue 0's head).
    pub has_dequeue: bool,
    pub options: Vec<PluginOption>,
    /// The delay target option (the first of unit delay-target), if any.
    pub delay_target_option: Option<usize>,
    pub(crate) layout: Layout,
}

/// Where the host reads and writes in the module's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub info: u32,
    pub option_values: u32,
    pub queues: u32,
    pub arrival: u32,
}

/// A compiled, checked module: cheap to clone, instantiated once per run by [`Plugin::build`].
#[derive(Clone)]
pub struct Plugin {
    pub(crate) name: Arc<str>,
    pub(crate) engine: Engine,
    pub(crate) module: Module,
    pub(crate) info: Arc<PluginInfo>,
    pub(crate) limits: Limits,
    pub(crate) has_timer: bool,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("name", &self.name)
            .field("info", &self.info)
            .field("limits", &self.limits)
            .finish()
    }
}

fn ty_name(t: &[Ty]) -> String {
    let names: Vec<&str> = t
        .iter()
        .map(|t| match t {
            Ty::I32 => "i32",
            Ty::I64 => "i64",
        })
        .collect();
    format!("({})", names.join(", "))
}

fn val_names(t: impl Iterator<Item = ValType>) -> String {
    let names: Vec<String> = t.map(|t| t.to_string()).collect();
    format!("({})", names.join(", "))
}

fn matches(sig: &Sig, f: &wasmtime::FuncType) -> bool {
    fn same(want: &[Ty], got: impl ExactSizeIterator<Item = ValType>) -> bool {
        want.len() == got.len()
            && want
                .iter()
                .zip(got)
                .all(|(w, g)| matches!((w, g), (Ty::I32, ValType::I32) | (Ty::I64, ValType::I64)))
    }
    same(sig.params, f.params()) && same(sig.results, f.results())
}

impl Plugin {
    /// Compile and check a module with the default [`Limits`]. `name` names the module in
    /// every error (its file name, say).
    pub fn load(name: &str, wasm: &[u8]) -> Result<Plugin, PluginError> {
        Plugin::load_with(name, wasm, Limits::default())
    }

    /// Read and load a `.wasm` file, named by its file name.
    pub fn from_file(path: &std::path::Path) -> Result<Plugin, PluginError> {
        let (name, wasm) = read_module(path)?;
        Plugin::load(&name, &wasm)
    }

    pub fn load_with(name: &str, wasm: &[u8], limits: Limits) -> Result<Plugin, PluginError> {
        static LOADED: ModuleCache<Plugin> = OnceLock::new();
        cached(&LOADED, name, wasm, limits, || {
            Plugin::compile(name, wasm, limits)
        })
    }

    fn compile(name: &str, wasm: &[u8], limits: Limits) -> Result<Plugin, PluginError> {
        let refused = |reason: String| PluginError::Refused {
            module: name.into(),
            reason,
        };
        let (engine, module) = compile_module(name, wasm)?;

        // Imports: the host functions of one ABI version the host runs, with their signatures,
        // and nothing else.
        let provided = || {
            abi::IMPORTS
                .iter()
                .map(|s| format!("{}.{}", abi::IMPORT_MODULE, s.name))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut import_version: Option<u32> = None;
        let mut sets_timer = false;
        for import in module.imports() {
            let (m, n) = (import.module(), import.name());
            let version = abi::VERSIONS
                .into_iter()
                .find(|&v| m == abi::import_module(v));
            if version.is_none() && m.starts_with(abi::IMPORT_MODULE_PREFIX) {
                return Err(refused(format!(
                    "imports {m}.{n}: built against another ABI version ({m}); this host runs ABI v1 and v2 ({})",
                    abi::IMPORT_MODULE
                )));
            }
            let sig = version.and_then(|v| abi::imports(v).iter().find(|s| s.name == n));
            let (Some(version), Some(sig)) = (version, sig) else {
                return Err(refused(format!(
                    "imports {m}.{n}, which ABI v{} does not provide (a plugin may import only {}; no libc)",
                    version.unwrap_or(abi::VERSION),
                    provided()
                )));
            };
            if let Some(other) = import_version.filter(|&v| v != version) {
                return Err(refused(format!(
                    "imports from both {} and {m}: one module is built against one ABI version",
                    abi::import_module(other)
                )));
            }
            import_version = Some(version);
            sets_timer |= sig.name == "set_timer";
            match import.ty() {
                ExternType::Func(f) if matches(sig, &f) => {}
                ExternType::Func(f) => {
                    return Err(refused(format!(
                        "imports {m}.{n} as {} -> {}; ABI v{version} declares {} -> {} ({})",
                        val_names(f.params()),
                        val_names(f.results()),
                        ty_name(sig.params),
                        ty_name(sig.results),
                        sig.c
                    )))
                }
                other => {
                    return Err(refused(format!(
                        "imports {m}.{n} as a {}, not a function",
                        extern_kind(&other)
                    )))
                }
            }
        }

        // Exports: the description, the memory, the functions.
        let func = |sig: &Sig, required: bool| -> Result<bool, PluginError> {
            match module.get_export(sig.name) {
                None if required => Err(refused(format!(
                    "missing export {} (ABI v{}: {})",
                    sig.name,
                    abi::VERSION,
                    sig.c
                ))),
                None => Ok(false),
                Some(ExternType::Func(f)) if matches(sig, &f) => Ok(true),
                Some(ExternType::Func(f)) => Err(refused(format!(
                    "export {} has type {} -> {}; ABI v{} wants {} -> {} ({})",
                    sig.name,
                    val_names(f.params()),
                    val_names(f.results()),
                    abi::VERSION,
                    ty_name(sig.params),
                    ty_name(sig.results),
                    sig.c
                ))),
                Some(other) => Err(refused(format!(
                    "export {} is a {}, not a function ({})",
                    sig.name,
                    extern_kind(&other),
                    sig.c
                ))),
            }
        };
        func(&abi::INIT, true)?;
        let has_enqueue = func(&abi::ENQUEUE, false)?;
        let has_dequeue = func(&abi::DEQUEUE, false)?;
        let has_timer = func(&abi::TIMER, false)?;
        match module.get_export(abi::INFO_EXPORT) {
            Some(ExternType::Global(g)) if matches!(g.content(), ValType::I32) => {}
            None => {
                return Err(refused(format!(
                    "missing export {} (the description: AQMLAB_QDISC(...) in the C file, linked with -Wl,--export-dynamic)",
                    abi::INFO_EXPORT
                )))
            }
            Some(other) => {
                return Err(refused(format!(
                    "export {} is a {}, not the address of an aqmlab_qdisc_info",
                    abi::INFO_EXPORT,
                    extern_kind(&other)
                )))
            }
        }
        match module.get_export(abi::MEMORY_EXPORT) {
            Some(ExternType::Memory(m)) => {
                let initial = m.minimum().saturating_mul(65_536);
                if initial > limits.memory_bytes as u64 {
                    return Err(refused(format!(
                        "declares {} KiB of initial memory, above the cap of {} KiB",
                        initial >> 10,
                        limits.memory_bytes >> 10
                    )));
                }
            }
            _ => {
                return Err(refused(format!(
                    "missing export {} (a memory)",
                    abi::MEMORY_EXPORT
                )))
            }
        }

        let mut plugin = Plugin {
            name: name.into(),
            engine,
            module,
            info: Arc::new(PluginInfo {
                abi_version: abi::VERSION,
                kind: String::new(),
                summary: String::new(),
                source: String::new(),
                n_queues: 1,
                owns_limit: false,
                reads_values: false,
                timer_ns: None,
                sets_timer,
                has_enqueue,
                has_dequeue,
                options: vec![],
                delay_target_option: None,
                layout: Layout {
                    info: 0,
                    option_values: 0,
                    queues: 0,
                    arrival: 0,
                },
            }),
            limits,
            has_timer,
        };
        // The description is data: instantiate once (no call runs but the data
        // initialisation) and read it.
        let info = Instance::<Probe>::describe(&plugin, import_version)?;
        plugin.info = Arc::new(info);
        Ok(plugin)
    }

    /// The name the module was loaded under.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn info(&self) -> &PluginInfo {
        &self.info
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Check option values given by name against the declaration: every name declared, none
    /// twice, each within its range and whole where its unit counts. Returns the values in
    /// declaration order (NaN where unset without a default).
    pub fn option_values(&self, given: &[(&str, f64)]) -> Result<Vec<f64>, PluginError> {
        let err = |message: String| PluginError::Options {
            module: self.name.to_string(),
            message,
        };
        let opts = &self.info.options;
        let mut values: Vec<Option<f64>> = vec![None; opts.len()];
        for &(name, v) in given {
            let Some(i) = opts.iter().position(|o| o.name == name) else {
                let names: Vec<&str> = opts.iter().map(|o| o.name.as_str()).collect();
                return Err(err(format!(
                    "{name}: unknown option (the plugin declares: {})",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                )));
            };
            let o = &opts[i];
            if values[i].is_some() {
                return Err(err(format!("{name}: given twice")));
            }
            if !v.is_finite() {
                return Err(err(format!("{name}: {v} is not a finite number")));
            }
            if o.min.is_some_and(|m| v < m) || o.max.is_some_and(|m| v > m) {
                let b = |x: Option<f64>, inf: &str| x.map_or(inf.to_string(), |x| format!("{x}"));
                return Err(err(format!(
                    "{name}: {v} must be in [{}, {}]",
                    b(o.min, "-inf"),
                    b(o.max, "inf")
                )));
            }
            let whole = !matches!(o.unit, Unit::Float);
            if whole && v.fract() != 0.0 {
                return Err(err(format!(
                    "{name}: {v} must be a whole number ({})",
                    o.unit.name()
                )));
            }
            if o.unit == Unit::Bool && v != 0.0 && v != 1.0 {
                return Err(err(format!("{name}: {v} must be 0 or 1 (a bool)")));
            }
            values[i] = Some(v);
        }
        Ok(values
            .iter()
            .zip(opts)
            .map(|(v, o)| v.or(o.default).unwrap_or(f64::NAN))
            .collect())
    }

    /// The discipline for one run: a fresh instance with these options (by name; the rest
    /// take their defaults) and its random stream and flow hash seeded by `seed`, as the
    /// built-ins' `build(params, seed)`. Fails with [`PluginError::Options`] if the host or
    /// `aqmlab_init` refuses the options.
    pub fn build<P: aqm::Packet + 'static>(
        &self,
        options: &[(&str, f64)],
        seed: u64,
    ) -> Result<crate::PluginQdisc<P>, PluginError> {
        crate::PluginQdisc::new(self, options, seed)
    }
}

/// Loaded modules, by name, bytes and limits.
pub(crate) type ModuleCache<T> = OnceLock<Mutex<HashMap<(String, Vec<u8>, Limits), T>>>;

/// `compile()`'s module from `cache`, compiled on the first call. A sweep checks and runs the
/// same module at every point: it is compiled once per process. Keyed by the module's bytes
/// themselves (a few kilobytes), its name and limits, so a hit is exactly the module asked
/// for; refused modules are not kept.
pub(crate) fn cached<T: Clone>(
    cache: &'static ModuleCache<T>,
    name: &str,
    wasm: &[u8],
    limits: Limits,
    compile: impl FnOnce() -> Result<T, PluginError>,
) -> Result<T, PluginError> {
    let key = (name.to_string(), wasm.to_vec(), limits);
    let cache = cache.get_or_init(Default::default);
    if let Some(p) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(p.clone());
    }
    let module = compile()?;
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, module.clone());
    Ok(module)
}

/// A module's file: its name (the file name, which every error gives) and its bytes.
pub(crate) fn read_module(path: &std::path::Path) -> Result<(String, Vec<u8>), PluginError> {
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into(),
    );
    let wasm = std::fs::read(path).map_err(|e| PluginError::Refused {
        module: name.clone(),
        reason: format!("cannot read {}: {e}", path.display()),
    })?;
    Ok((name, wasm))
}

/// The sandbox's engine and the module compiled by it: fuel, for the per-call budget
/// (deterministic, unlike epochs); NaNs canonicalised and relaxed SIMD off, so that a module
/// computes the same bits on every machine.
pub(crate) fn compile_module(name: &str, wasm: &[u8]) -> Result<(Engine, Module), PluginError> {
    let refused = |reason: String| PluginError::Refused {
        module: name.into(),
        reason,
    };
    let mut config = Config::default();
    config
        .consume_fuel(true)
        .cranelift_nan_canonicalization(true)
        .wasm_relaxed_simd(false);
    let engine = Engine::new(&config).map_err(|e| refused(format!("no engine: {e}")))?;
    let module = Module::new(&engine, wasm)
        .map_err(|e| refused(format!("not a valid WebAssembly module: {e}")))?;
    Ok((engine, module))
}

/// A store's limits: one memory of at most `memory_bytes`, one table, one instance; a grow
/// past the cap traps (the call's error says so).
pub(crate) fn store_limits(memory_bytes: usize) -> wasmtime::StoreLimits {
    wasmtime::StoreLimitsBuilder::new()
        .memory_size(memory_bytes)
        .memories(1)
        .tables(1)
        .table_elements(100_000)
        .instances(1)
        .trap_on_grow_failure(true)
        .build()
}

fn extern_kind(t: &ExternType) -> &'static str {
    match t {
        ExternType::Global(_) => "global",
        ExternType::Table(_) => "table",
        ExternType::Memory(_) => "memory",
        ExternType::Func(_) => "function",
        ExternType::Tag(_) => "tag",
    }
}

/// Bounds-checked little-endian reads of the module's memory.
pub(crate) struct Mem<'a>(pub &'a [u8]);

impl Mem<'_> {
    fn bytes(&self, addr: u32, n: u32) -> Result<&[u8], String> {
        let a = addr as usize;
        self.0
            .get(a..a + n as usize)
            .ok_or_else(|| format!("address {addr:#x}+{n} lies outside its memory"))
    }
    pub fn u32(&self, addr: u32) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.bytes(addr, 4)?.try_into().unwrap()))
    }
    pub fn u64(&self, addr: u32) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.bytes(addr, 8)?.try_into().unwrap()))
    }
    pub fn f64(&self, addr: u32) -> Result<f64, String> {
        Ok(f64::from_le_bytes(self.bytes(addr, 8)?.try_into().unwrap()))
    }
    /// A NUL-terminated UTF-8 string of at most [`abi::MAX_STRING`] bytes.
    pub fn str(&self, addr: u32) -> Result<String, String> {
        let a = addr as usize;
        let tail = self
            .0
            .get(a..)
            .ok_or_else(|| format!("string at {addr:#x} lies outside its memory"))?;
        let tail = &tail[..tail.len().min(abi::MAX_STRING + 1)];
        let end = tail.iter().position(|&b| b == 0).ok_or_else(|| {
            format!(
                "string at {addr:#x} has no NUL within {} bytes",
                abi::MAX_STRING
            )
        })?;
        String::from_utf8(tail[..end].to_vec())
            .map_err(|_| format!("string at {addr:#x} is not UTF-8"))
    }
    /// A string field that may be NULL (read as empty).
    fn opt_str(&self, addr: u32) -> Result<String, String> {
        match self.u32(addr)? {
            0 => Ok(String::new()),
            p => self.str(p),
        }
    }
    /// That `n` records of `size` bytes at `addr` lie inside the memory.
    fn array(&self, addr: u32, n: u32, size: u32, what: &str) -> Result<(), String> {
        let end = addr as u64 + n as u64 * size as u64;
        if n > 0 && (addr == 0 || end > self.0.len() as u64) {
            return Err(format!(
                "{what} ({n} × {size} bytes at {addr:#x}) lies outside its memory"
            ));
        }
        Ok(())
    }
}

/// A choice's strings (`aqmlab_option.choices`): `|`-separated, each `[a-z0-9_-]+`, distinct,
/// 2 to [`abi::MAX_CHOICES`] of them.
fn read_choices(mem: &Mem<'_>, field: u32) -> Result<Vec<String>, String> {
    let text = match mem.u32(field)? {
        0 => return Err("a choice needs its strings (aqmlab_option.choices is NULL)".into()),
        p => mem.str(p)?,
    };
    let choices: Vec<String> = text.split('|').map(str::to_string).collect();
    let word = |c: &str| {
        !c.is_empty()
            && c.len() <= abi::MAX_NAME
            && c.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
    };
    if let Some(bad) = choices.iter().find(|c| !word(c)) {
        return Err(format!(
            "choice {bad:?} of {text:?} is not a word ([a-z0-9_-]+, at most {} bytes)",
            abi::MAX_NAME
        ));
    }
    if !(2..=abi::MAX_CHOICES).contains(&choices.len()) {
        return Err(format!(
            "{text:?} names {} choices; give 2 to {}, separated by '|'",
            choices.len(),
            abi::MAX_CHOICES
        ));
    }
    if let Some((_, c)) = choices
        .iter()
        .enumerate()
        .find(|(i, c)| choices[..*i].contains(c))
    {
        return Err(format!("choice {c:?} is named twice in {text:?}"));
    }
    Ok(choices)
}

fn is_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|c| c.is_ascii_lowercase())
        && c.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && s.len() <= abi::MAX_NAME
}

/// What the module's imports and exports said, for [`read_info`] to check the description
/// against.
#[derive(Clone, Copy)]
pub(crate) struct Linkage {
    pub has_enqueue: bool,
    pub has_dequeue: bool,
    pub has_timer: bool,
    pub sets_timer: bool,
    /// The ABI version of the module's imports, if it imports anything.
    pub import_version: Option<u32>,
}

/// Read and check `aqmlab_qdisc_info` at `addr`. The ABI version first: the rest of the layout
/// is only known for the versions the host runs.
pub(crate) fn read_info(mem: Mem<'_>, addr: u32, link: Linkage) -> Result<PluginInfo, String> {
    use abi::info as I;
    let f = |off: u32| addr + off;
    let version = mem.u32(f(I::ABI_VERSION))?;
    if !abi::VERSIONS.contains(&version) {
        return Err(format!(
            "ABI version {version} (aqmlab_qdisc.abi_version); this host runs ABI v1 and v2"
        ));
    }
    if let Some(iv) = link.import_version.filter(|&iv| iv != version) {
        return Err(format!(
            "declares ABI v{version} (aqmlab_qdisc.abi_version) but imports from {}",
            abi::import_module(iv)
        ));
    }
    mem.array(addr, 1, I::SIZE, "aqmlab_qdisc")?;
    let n_queues = mem.u32(f(I::N_QUEUES))?;
    if !(1..=abi::MAX_QUEUES).contains(&n_queues) {
        return Err(format!(
            "aqmlab_qdisc.n_queues is {n_queues}; it must be 1..={}",
            abi::MAX_QUEUES
        ));
    }
    let kind = match mem.u32(f(I::KIND))? {
        0 => return Err("aqmlab_qdisc.kind is NULL".into()),
        p => mem.str(p)?,
    };
    if !is_name(&kind) {
        return Err(format!(
            "aqmlab_qdisc.kind {kind:?} is not a name ([a-z][a-z0-9_]*, at most {} bytes)",
            abi::MAX_NAME
        ));
    }
    let summary = mem.opt_str(f(I::SUMMARY))?;
    let source = mem.opt_str(f(I::SOURCE))?;
    let flags = mem.u32(f(I::FLAGS))?;
    if flags & !abi::flags(version) != 0 {
        return Err(format!(
            "aqmlab_qdisc.flags {flags:#x} has bits ABI v{version} does not define"
        ));
    }
    let timer_ns = mem.u64(f(I::TIMER_NS))?;
    match (timer_ns > 0, link.sets_timer, link.has_timer) {
        (true, _, false) => {
            return Err(format!(
                "aqmlab_qdisc.timer_ns is {timer_ns} but the module exports no aqmlab_timer"
            ))
        }
        (false, true, false) => {
            return Err(
                "the module imports aqmlab_set_timer but exports no aqmlab_timer".into(),
            )
        }
        (false, false, true) => {
            return Err("the module exports aqmlab_timer but aqmlab_qdisc.timer_ns is 0 and it never calls aqmlab_set_timer".into())
        }
        _ => {}
    }
    if !link.has_enqueue && (version == 1 || n_queues > 1) {
        return Err(format!(
            "missing export {} (ABI v{version}: {}){}",
            abi::ENQUEUE.name,
            abi::ENQUEUE.c,
            if version == 1 {
                ""
            } else {
                "; only a plugin with one queue may leave it out"
            }
        ));
    }
    if !link.has_dequeue && n_queues > 1 {
        return Err(format!(
            "asks for {n_queues} queues but exports no aqmlab_dequeue: without it the host only serves queue 0"
        ));
    }
    let n_options = mem.u32(f(I::N_OPTIONS))?;
    if n_options > abi::MAX_OPTIONS {
        return Err(format!(
            "aqmlab_qdisc.n_options is {n_options}; at most {}",
            abi::MAX_OPTIONS
        ));
    }
    let options_at = mem.u32(f(I::OPTIONS))?;
    mem.array(
        options_at,
        n_options,
        abi::option::SIZE,
        "aqmlab_qdisc.options",
    )?;
    let layout = Layout {
        info: addr,
        option_values: mem.u32(f(I::OPTION_VALUES))?,
        queues: mem.u32(f(I::QUEUES))?,
        arrival: mem.u32(f(I::ARRIVAL))?,
    };
    mem.array(
        layout.option_values,
        n_options,
        8,
        "aqmlab_qdisc.option_values",
    )?;
    mem.array(
        layout.queues,
        n_queues,
        abi::queue::SIZE as u32,
        "aqmlab_qdisc.queues",
    )?;
    mem.array(
        layout.arrival,
        1,
        abi::pkt::SIZE as u32,
        "aqmlab_qdisc.arrival",
    )?;

    let mut options: Vec<PluginOption> = Vec::with_capacity(n_options as usize);
    for i in 0..n_options {
        use abi::option as O;
        let at = options_at + i * O::SIZE;
        let name = match mem.u32(at + O::NAME)? {
            0 => return Err(format!("option {i}: name is NULL")),
            p => mem.str(p)?,
        };
        let err = |m: String| format!("option {i} ({name}): {m}");
        if !is_name(&name) {
            return Err(err(format!(
                "not a name ([a-z][a-z0-9_]*, at most {} bytes)",
                abi::MAX_NAME
            )));
        }
        if options.iter().any(|o| o.name == name) {
            return Err(err("declared twice".into()));
        }
        let unit_name = match mem.u32(at + O::UNIT)? {
            0 => return Err(err("unit is NULL".into())),
            p => mem.str(p)?,
        };
        let unit = abi::unit(&unit_name)
            .filter(|u| version >= 2 || !matches!(u, Unit::Choice(_)))
            .ok_or_else(|| {
                err(format!(
                    "unit {unit_name:?} is none of {}",
                    if version == 1 {
                        abi::UNIT_NAMES.trim_end_matches(", choice")
                    } else {
                        abi::UNIT_NAMES
                    }
                ))
            })?;
        let doc = mem.opt_str(at + O::DOC)?;
        let choices = match unit {
            Unit::Choice(_) => read_choices(&mem, at + O::CHOICES).map_err(err)?,
            _ => vec![],
        };
        let (default, min, max) = match unit {
            // The indices of the strings; the declared bounds are not read.
            Unit::Choice(_) => (mem.f64(at + O::DEFAULT)?, 0.0, (choices.len() - 1) as f64),
            _ => (
                mem.f64(at + O::DEFAULT)?,
                mem.f64(at + O::MIN)?,
                mem.f64(at + O::MAX)?,
            ),
        };
        if matches!(unit, Unit::Choice(_)) && !default.is_nan() && default.fract() != 0.0 {
            return Err(err(format!(
                "default {default} is not the index of one of its choices"
            )));
        }
        if min.is_nan() || max.is_nan() || min > max || min == f64::INFINITY {
            return Err(err(format!("bounds [{min}, {max}] are not a range")));
        }
        if !default.is_nan() && !(min..=max).contains(&default) {
            return Err(err(format!(
                "default {default} lies outside [{min}, {max}]"
            )));
        }
        if default.is_infinite() {
            return Err(err("default is infinite".into()));
        }
        options.push(PluginOption {
            name,
            unit,
            doc,
            default: (!default.is_nan()).then_some(default),
            min: min.is_finite().then_some(min),
            max: max.is_finite().then_some(max),
            choices,
        });
    }
    let delay_target_option = options.iter().position(|o| o.unit == Unit::DelayTarget);
    Ok(PluginInfo {
        abi_version: version,
        kind,
        summary,
        source,
        n_queues,
        owns_limit: flags & abi::FLAG_OWNS_LIMIT != 0,
        reads_values: flags & abi::FLAG_READS_VALUES != 0,
        timer_ns: (timer_ns > 0).then_some(timer_ns),
        sets_timer: link.sets_timer,
        has_enqueue: link.has_enqueue,
        has_dequeue: link.has_dequeue,
        options,
        delay_target_option,
        layout,
    })
}
