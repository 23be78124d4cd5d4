//! `aqmlab._native`: the Python package's bridge to the simulator. Thin by design: it takes
//! the engine config as JSON (the Python front validates and lowers scenarios), runs the
//! simulator with the GIL released, and returns the summary as plain Python objects and the
//! tables as Arrow buffers (`column_to_py`) that the front turns into Arrow tables and Parquet.

use pyo3::exceptions::{PyKeyboardInterrupt, PyMemoryError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use sim::results::Column;

fn json_to_py<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    let json = py.import("json")?;
    json.call_method1("loads", (v.to_string(),))
}

/// A column as the buffers of an Arrow array (the Arrow columnar format: a validity bitmap,
/// least significant bit first, absent when every value is there; little-endian int64 or
/// float64 values, bit-packed booleans, or int32 offsets into UTF-8 data): `(type, length,
/// validity, offsets, data)`, which the front hands to `pyarrow.Array.from_buffers`. Python
/// lists would make pyarrow import pandas (≈ 0.5 s) to check each input: a run's start-up.
fn column_to_py<'py>(py: Python<'py>, c: &Column) -> PyResult<Bound<'py, PyAny>> {
    fn bitmap(v: impl ExactSizeIterator<Item = bool>) -> Vec<u8> {
        let mut bits = vec![0u8; v.len().div_ceil(8)];
        for (i, x) in v.enumerate() {
            bits[i / 8] |= u8::from(x) << (i % 8);
        }
        bits
    }
    fn validity<T>(v: &[Option<T>]) -> Vec<u8> {
        bitmap(v.iter().map(Option::is_some))
    }
    fn strings<'a>(v: impl Iterator<Item = &'a str>) -> PyResult<(Vec<u8>, Vec<u8>)> {
        let (mut offsets, mut data) = (vec![0u8; 4], Vec::new());
        for x in v {
            data.extend_from_slice(x.as_bytes());
            let end = i32::try_from(data.len())
                .map_err(|_| PyMemoryError::new_err("a string column above 2 GiB"))?;
            offsets.extend_from_slice(&end.to_le_bytes());
        }
        Ok((offsets, data))
    }
    let le = |v: &mut dyn Iterator<Item = [u8; 8]>| v.flatten().collect::<Vec<u8>>();
    let (valid, offsets, data): (Option<Vec<u8>>, Option<Vec<u8>>, Vec<u8>) = match c {
        Column::F64(v) => (None, None, le(&mut v.iter().map(|x| x.to_le_bytes()))),
        Column::OptF64(v) => (
            Some(validity(v)),
            None,
            le(&mut v.iter().map(|x| x.unwrap_or(0.0).to_le_bytes())),
        ),
        Column::U64(v) => (
            None,
            None,
            le(&mut v.iter().map(|&x| (x as i64).to_le_bytes())),
        ),
        Column::OptU64(v) => (
            Some(validity(v)),
            None,
            le(&mut v.iter().map(|x| (x.unwrap_or(0) as i64).to_le_bytes())),
        ),
        Column::Str(v) => {
            let (o, d) = strings(v.iter().map(String::as_str))?;
            (None, Some(o), d)
        }
        Column::OptStr(v) => {
            let (o, d) = strings(v.iter().map(|x| x.as_deref().unwrap_or("")))?;
            (Some(validity(v)), Some(o), d)
        }
        Column::Bool(v) => (None, None, bitmap(v.iter().copied())),
    };
    let bytes = |b: Option<Vec<u8>>| b.map(|b| PyBytes::new(py, &b));
    Ok((
        c.arrow_type(),
        c.len(),
        bytes(valid),
        bytes(offsets),
        PyBytes::new(py, &data),
    )
        .into_pyobject(py)?
        .into_any())
}

/// A run error as Python sees it: MemoryError for an allocation that failed, ValueError
/// ("dotted.key: message") for a config the engine refuses.
fn run_error(e: sim::RunError) -> PyErr {
    match e {
        sim::RunError::OutOfMemory(m) => PyMemoryError::new_err(m),
        e => PyValueError::new_err(e.to_string()),
    }
}

/// Validate an engine config without running it (nor building its flows); return what the
/// engine made of the bottleneck's discipline: `{"aqm": its parameters, "delay_target_ns":
/// int or None}`. Raises ValueError("dotted.key: message").
#[pyfunction]
fn check<'py>(py: Python<'py>, config_json: &str) -> PyResult<Bound<'py, PyAny>> {
    let cfg = sim::EngineConfig::from_json(config_json).map_err(PyValueError::new_err)?;
    sim::world::check(&cfg).map_err(run_error)?;
    let aqm = serde_json::to_value(&cfg.bottleneck.aqm)
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    json_to_py(
        py,
        &serde_json::json!({"aqm": aqm, "delay_target_ns": cfg.bottleneck.delay_target_ns}),
    )
}

/// What a run of this engine config will cost (`sim::estimate`): a dict of `flows`,
/// `bottleneck_packets`, `excess_packets`, `events`, `timeseries_rows`, `wall_s` (the
/// simulation on one core) and `peak_bytes` (the engine and its tables) with its parts
/// `flow_bytes`, `network_bytes`, `table_bytes`. Raises ValueError for a config it refuses.
#[pyfunction]
fn estimate<'py>(py: Python<'py>, config_json: &str) -> PyResult<Bound<'py, PyAny>> {
    let cfg = sim::EngineConfig::from_json(config_json).map_err(PyValueError::new_err)?;
    let e = serde_json::to_value(sim::estimate::estimate(&cfg))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    json_to_py(py, &e)
}

/// A planned flow as Python receives it: (class index, start_ns, stop_ns, size_bytes).
type PlannedFlow = (usize, u64, Option<u64>, Option<u64>);
/// A flows table's columns as Python passes them: (flow, start_s, stop_s).
type FlowsColumns = (Vec<i64>, Vec<f64>, Vec<Option<f64>>);
/// One event's convergence: (event, flow, event_s, active_after, converged_s).
type Converged = (&'static str, i64, f64, usize, Option<f64>);

/// Every flow of the run as the simulator plans it (`sim::world::flow_plan`, which
/// `World::new` itself uses): a list, in flow-id order, of
/// `(class index, start_ns, stop_ns or None, size_bytes or None)` — scheduled starts and stops
/// and workload arrivals with their size draws. Raises ValueError("dotted.key: message").
#[pyfunction]
fn flow_plan(config_json: &str) -> PyResult<Vec<PlannedFlow>> {
    let cfg = sim::EngineConfig::from_json(config_json).map_err(PyValueError::new_err)?;
    cfg.check().map_err(PyValueError::new_err)?;
    Ok(sim::world::flow_plan(&cfg)
        .map_err(run_error)?
        .into_iter()
        .map(|p| (p.class, p.start_ns, p.stop_ns, p.size_bytes))
        .collect())
}

/// Validate one CC config `{"name": ..., tunables...}`. Returns the error message, or None.
#[pyfunction]
fn check_cc(cc_json: &str) -> Option<String> {
    match serde_json::from_str::<sim::cc::CcConfig>(cc_json) {
        // serde's message ends with " at line L column C" of the JSON we built: drop it.
        Err(e) => {
            let m = e.to_string();
            Some(m.split(" at line ").next().unwrap_or(&m).to_string())
        }
        Ok(c) => c.validate().err(),
    }
}

/// Run an engine config. `progress(fraction)` is called now and then with the fraction of
/// simulated time done; Ctrl-C stops the run with KeyboardInterrupt.
#[pyfunction]
#[pyo3(signature = (config_json, progress=None))]
fn run<'py>(
    py: Python<'py>,
    config_json: &str,
    progress: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let cfg = sim::EngineConfig::from_json(config_json).map_err(PyValueError::new_err)?;
    let progress: Option<Py<PyAny>> = progress.map(|p| p.unbind());
    let mut py_err: Option<PyErr> = None;
    // The world is built on the thread that runs it: a plugin CC's registration is shared by
    // its flows through `Rc` and never crosses threads.
    let result = py.detach(|| {
        let world = sim::World::new(cfg)?;
        let mut cb = |frac: f64| -> bool {
            Python::attach(|py| {
                if let Err(e) = py.check_signals() {
                    py_err = Some(e);
                    return false;
                }
                if let Some(p) = &progress {
                    if let Err(e) = p.call1(py, (frac,)) {
                        py_err = Some(e);
                        return false;
                    }
                }
                true
            })
        };
        world.run(&mut cb)
    });
    let result = match result {
        Ok(r) => r,
        Err(sim::RunError::Interrupted) => {
            return Err(py_err.unwrap_or_else(|| PyKeyboardInterrupt::new_err("interrupted")));
        }
        Err(e) => return Err(run_error(e)),
    };
    result_to_py(py, &result)
}

/// A run's results as `run` returns them: `metrics`, `classes`, `fct`, `counters`, and
/// `tables` (name → column → values).
fn result_to_py<'py>(py: Python<'py>, result: &sim::RunResult) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    let summary = json_to_py(py, &result.summary)?;
    out.set_item("metrics", summary.get_item("metrics")?)?;
    out.set_item("classes", summary.get_item("classes")?)?;
    out.set_item("fct", summary.get_item("fct")?)?;
    out.set_item("counters", json_to_py(py, &result.counters)?)?;
    let tables = PyDict::new(py);
    for (name, table) in &result.tables {
        let t = PyDict::new(py);
        for (col, c) in &table.columns {
            t.set_item(col, column_to_py(py, c)?)?;
        }
        tables.set_item(name, t)?;
    }
    out.set_item("tables", tables)?;
    Ok(out)
}

/// The emulator's summary and tables, computed by the simulator's own code (`results::collect`)
/// from its records (`results::emu::record`: the engine config, the router's report, the
/// receiver's and senders' measurements and the testbed's addresses, as one JSON object).
/// Returns what `run` returns; a column the emulator cannot fill is all null, typed as the
/// simulator's. Raises ValueError for records it cannot read.
#[pyfunction]
fn tables_from_records<'py>(py: Python<'py>, records_json: &str) -> PyResult<Bound<'py, PyDict>> {
    let input: serde_json::Value = serde_json::from_str(records_json)
        .map_err(|e| PyValueError::new_err(format!("emulator records: {e}")))?;
    let record = results::emu::record(&input).map_err(PyValueError::new_err)?;
    result_to_py(py, &results::collect(record))
}

/// Names of the congestion controls this build provides.
#[pyfunction]
fn ccs() -> Vec<&'static str> {
    sim::cc::CcConfig::names().to_vec()
}

/// Every CC with its source and its tunables' defaults.
#[pyfunction]
fn describe_ccs(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    json_to_py(py, &sim::cc::CcConfig::describe())
}

/// The hosts' defaults (`link::config::HostConfig::linux`, each with its Linux source there), in
/// the engine's units: the `[host]` table's defaults come from here.
#[pyfunction]
fn host_defaults(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    json_to_py(
        py,
        &serde_json::to_value(link::config::HostConfig::linux()).expect("HostConfig serializes"),
    )
}

/// Names of the queue disciplines this build provides.
#[pyfunction]
fn qdiscs() -> Vec<&'static str> {
    aqm::QdiscConfig::names().to_vec()
}

/// Compile a plugin's C source into a WebAssembly module at `output` with Debian's clang
/// (`plugin::compile_c`), against the ABI header in `include_dir`. Raises ValueError with the
/// compiler's messages, or with the Debian packages to install when the toolchain is missing.
#[pyfunction]
fn compile_plugin(source: &str, output: &str, include_dir: &str) -> PyResult<()> {
    run_clang(source, output, include_dir, plugin::clang_args)
}

/// Run clang with the arguments `args` gives for (source, output, include_dir); ValueError
/// with clang's messages, or with the Debian packages to install.
fn run_clang(
    source: &str,
    output: &str,
    include_dir: &str,
    args: fn(&std::path::Path, &std::path::Path, &std::path::Path) -> Vec<String>,
) -> PyResult<()> {
    let clang = plugin::find_clang().map_err(PyValueError::new_err)?;
    let source = std::path::Path::new(source);
    let out = std::process::Command::new(&clang)
        .args(args(
            source,
            std::path::Path::new(output),
            std::path::Path::new(include_dir),
        ))
        .output()
        .map_err(|e| PyValueError::new_err(format!("cannot run {}: {e}", clang.display())))?;
    if out.status.success() {
        return Ok(());
    }
    Err(PyValueError::new_err(plugin::explain_clang_failure(
        &clang,
        source,
        &String::from_utf8_lossy(&out.stderr),
    )))
}

/// Load a plugin module (`.wasm`) and return its description: `abi_version`, `kind`,
/// `summary`, `source`, `n_queues`, `owns_limit`, `reads_packet_values`, `timer_ns`,
/// `sets_timer`, `has_enqueue`, `has_dequeue`, `delay_target_option` (a name or None) and `options` (name,
/// unit, doc, default, min, max, choices; numbers in the unit's terms: ns, bytes, packets,
/// bit/s, a choice's index). Raises ValueError naming the module and what is wrong.
#[pyfunction]
fn plugin_info<'py>(py: Python<'py>, wasm_path: &str) -> PyResult<Bound<'py, PyAny>> {
    let p = plugin::Plugin::from_file(std::path::Path::new(wasm_path))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let info = p.info();
    let options: Vec<serde_json::Value> = info
        .options
        .iter()
        .map(|o| {
            serde_json::json!({"name": o.name, "unit": o.unit.name(), "doc": o.doc,
                               "default": o.default, "min": o.min, "max": o.max,
                               "choices": o.choices})
        })
        .collect();
    json_to_py(
        py,
        &serde_json::json!({
            "kind": info.kind, "summary": info.summary, "source": info.source,
            "abi_version": info.abi_version, "n_queues": info.n_queues,
            "owns_limit": info.owns_limit, "reads_packet_values": info.reads_values,
            "timer_ns": info.timer_ns, "sets_timer": info.sets_timer,
            "has_enqueue": info.has_enqueue, "has_dequeue": info.has_dequeue,
            "delay_target_option": info.delay_target_option.map(|i| info.options[i].name.clone()),
            "options": options,
        }),
    )
}

/// Compile a congestion control's struct_ops BPF C file into a WebAssembly module at `output`
/// for the simulator (`plugin::compile_cc`), against the simulator's kernel headers in
/// `include_dir`/bpfcc. Raises ValueError as `compile_plugin` does.
#[pyfunction]
fn compile_cc_plugin(source: &str, output: &str, include_dir: &str) -> PyResult<()> {
    run_clang(source, output, include_dir, plugin::cc_clang_args)
}

/// Load a congestion-control module (`.wasm`) and return what its `struct tcp_congestion_ops`
/// declares: `name`, `flags`, `ops` (the member names it sets) and `ecn` ("classic", "dctcp"
/// for TCP_CONG_NEEDS_ECN, "l4s" for AccECN / ECT(1)). Raises ValueError naming the module
/// and what is wrong.
#[pyfunction]
fn cc_plugin_info<'py>(py: Python<'py>, wasm_path: &str) -> PyResult<Bound<'py, PyAny>> {
    let p = plugin::CcPlugin::from_file(std::path::Path::new(wasm_path))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let info = p.info();
    let params = sim::cc::plugin::Params {
        module: wasm_path.into(),
        plugin: p.clone(),
        tunables: Default::default(),
    };
    let tunables: Vec<serde_json::Value> = info
        .tunables
        .iter()
        .map(|t| {
            let (lo, hi) = t.range();
            let kind = match t.kind {
                plugin::TunableKind::Bool => "bool",
                plugin::TunableKind::Signed => "signed",
                plugin::TunableKind::Unsigned => "unsigned",
            };
            // Every value of a type of at most 8 bytes fits i64 or u64.
            let num = |v: i128| match i64::try_from(v) {
                Ok(i) => serde_json::json!(i),
                Err(_) => serde_json::json!(v as u64),
            };
            serde_json::json!({"name": t.name, "type": t.type_name, "kind": kind,
                "default": num(t.default), "min": num(lo), "max": num(hi)})
        })
        .collect();
    let ecn = match params.ecn_use() {
        sim::cc::EcnUse::L4s => "l4s",
        sim::cc::EcnUse::Dctcp => "dctcp",
        _ => "classic",
    };
    json_to_py(
        py,
        &serde_json::json!({"name": info.name, "flags": info.flags, "ops": info.ops, "ecn": ecn,
            "tunables": tunables}),
    )
}

/// Every queue discipline with its source, summary and options (unit, default in scenario
/// terms, range, doc, source), from `aqm::QdiscOptions::describe`.
#[pyfunction]
fn describe_aqms(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    json_to_py(py, &aqm::QdiscOptions::describe())
}

/// A flows table's columns (flow, start_s, stop_s) as `results::convergence` schedules.
fn spans(flows: FlowsColumns) -> PyResult<Vec<results::convergence::Span>> {
    let (flow, start, stop) = flows;
    if flow.len() != start.len() || flow.len() != stop.len() {
        return Err(PyValueError::new_err(
            "flows: flow, start_s and stop_s differ in length",
        ));
    }
    Ok(flow
        .into_iter()
        .zip(start)
        .zip(stop)
        .map(|((flow, start_s), stop_s)| results::convergence::Span {
            flow,
            start_s,
            stop_s,
        })
        .collect())
}

/// A time series' columns (t_s, flow, throughput_bps), checked for equal lengths.
fn series<'a>(
    t_s: &'a [f64],
    flow: &'a [i64],
    throughput_bps: &'a [f64],
) -> PyResult<results::convergence::Series<'a>> {
    if t_s.len() != flow.len() || t_s.len() != throughput_bps.len() {
        return Err(PyValueError::new_err(
            "timeseries: t_s, flow and throughput_bps differ in length",
        ));
    }
    Ok(results::convergence::Series {
        t_s,
        flow,
        throughput_bps,
    })
}

/// The windowed Jain index (`results::convergence::windowed_jain`): from the time series' columns
/// and, optionally, the flows table's `(flow, start_s, stop_s)`, returns `(t_s, jain)` lists,
/// jain None where every active flow's mean is 0.
#[pyfunction]
#[pyo3(signature = (t_s, flow, throughput_bps, window_s, flows=None))]
fn windowed_jain(
    t_s: Vec<f64>,
    flow: Vec<i64>,
    throughput_bps: Vec<f64>,
    window_s: f64,
    flows: Option<FlowsColumns>,
) -> PyResult<(Vec<f64>, Vec<Option<f64>>)> {
    let ts = series(&t_s, &flow, &throughput_bps)?;
    let flows = flows.map(spans).transpose()?;
    Ok(
        results::convergence::windowed_jain(ts, window_s, flows.as_deref())
            .into_iter()
            .unzip(),
    )
}

/// The joins and leaves (`results::convergence::events`) of a flows table `(flow, start_s,
/// stop_s)` before `end_s`: a list of `(event, flow, event_s, active_after)`.
#[pyfunction]
fn events(flows: FlowsColumns, end_s: f64) -> PyResult<Vec<(&'static str, i64, f64, usize)>> {
    Ok(results::convergence::events(&spans(flows)?, end_s)
        .into_iter()
        .map(|e| (e.kind.name(), e.flow, e.event_s, e.active_after))
        .collect())
}

/// Convergence after each join or leave (`results::convergence::convergence`): a list of
/// `(event, flow, event_s, active_after, converged_s or None)`.
#[pyfunction]
fn convergence(
    t_s: Vec<f64>,
    flow: Vec<i64>,
    throughput_bps: Vec<f64>,
    flows: FlowsColumns,
    threshold: f64,
    window_s: f64,
    hold_s: f64,
) -> PyResult<Vec<Converged>> {
    let ts = series(&t_s, &flow, &throughput_bps)?;
    let c = results::convergence::convergence(ts, &spans(flows)?, threshold, window_s, hold_s);
    Ok(c.into_iter()
        .map(|c| {
            (
                c.event.kind.name(),
                c.event.flow,
                c.event.event_s,
                c.event.active_after,
                c.converged_s,
            )
        })
        .collect())
}

/// Harm (`results::metrics::throughput_harm`, `delay_harm`; Ware et al., HotNets 2019) of a class
/// against its solo baseline: `(throughput_harm, delay_harm)`, each None where undefined (a
/// zero denominator) or where an input is None.
#[pyfunction]
fn harm(
    mixed_goodput: Option<f64>,
    base_goodput: Option<f64>,
    mixed_sojourn_mean: Option<f64>,
    base_sojourn_mean: Option<f64>,
) -> (Option<f64>, Option<f64>) {
    let both = |a: Option<f64>, b: Option<f64>| a.zip(b);
    (
        both(mixed_goodput, base_goodput)
            .and_then(|(m, b)| results::metrics::throughput_harm(m, b)),
        both(mixed_sojourn_mean, base_sojourn_mean)
            .and_then(|(m, b)| results::metrics::delay_harm(m, b)),
    )
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(estimate, m)?)?;
    m.add_function(wrap_pyfunction!(check_cc, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(flow_plan, m)?)?;
    m.add_function(wrap_pyfunction!(tables_from_records, m)?)?;
    m.add_function(wrap_pyfunction!(ccs, m)?)?;
    m.add_function(wrap_pyfunction!(host_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(describe_ccs, m)?)?;
    m.add_function(wrap_pyfunction!(qdiscs, m)?)?;
    m.add_function(wrap_pyfunction!(describe_aqms, m)?)?;
    m.add_function(wrap_pyfunction!(compile_plugin, m)?)?;
    m.add_function(wrap_pyfunction!(plugin_info, m)?)?;
    m.add_function(wrap_pyfunction!(compile_cc_plugin, m)?)?;
    m.add_function(wrap_pyfunction!(cc_plugin_info, m)?)?;
    m.add_function(wrap_pyfunction!(windowed_jain, m)?)?;
    m.add_function(wrap_pyfunction!(events, m)?)?;
    m.add_function(wrap_pyfunction!(convergence, m)?)?;
    m.add_function(wrap_pyfunction!(harm, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("PACKET_BYTES", aqm::options::PACKET_BYTES)?;
    m.add("MSS_BYTES", sim::packet::MSS_BYTES)?;
    Ok(())
}
