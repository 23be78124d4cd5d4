"""Fuzzing the front end: whatever a scenario or sweep file holds — TOML built from the
scenario's real keys with values of every type, random keys, or arbitrary bytes — `validate`,
`run`, `sweep` (and `search`, where it exists) answer with success or with exit 2 and one
keyed line (docs/scenario.md: "file:line: key: message"); never a traceback, a Rust panic,
another exit status, or a partial result directory. The router's config file and the native
module's string entry points likewise: exit 2 and one line, or ValueError — never a panic.

The budget is fixed (`max_examples`, `derandomize=True`: the same examples on every machine),
and the value pools keep every run that passes validation short (≤ 0.2 s simulated at
≤ 100 Mbit/s, or refused for its memory before it starts)."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from aqmlab import _native
from aqmlab.cli import main as cli

FUZZ = settings(max_examples=60, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck), database=None)

# ------------------------------------------------------------------------------------------
# Values and keys
# ------------------------------------------------------------------------------------------

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.sampled_from([0, 1, 2, -1, 100_000_000, 2**32, 2**64 - 1]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["", "1", "0s", "-1s", "nan", "inf", "1e309", "${x}", "${1/0}", "[[flows]]", "ñ", "\x00"]),
)


def _mostly(good: list[Any], bad: list[Any]) -> st.SearchStrategy[Any]:
    """A plausible value seven times in eight, else a malformed one."""
    return st.one_of(*[st.sampled_from(good)] * 7, st.sampled_from(bad))


TIMES = _mostly(
    ["0.1s", "0.05s", "1ms", "10ms", "0s", "uniform(0s, 0.05s)", "staggered(0s, 10ms)"], ["-1s", "10", "1e-9s", "100000000s", "uniform(1s, 0s)", "abc", "0.2s"]
)
RATES = _mostly(["10Mbps", "100Mbps", "1Mbps"], ["0bps", "-5Mbps", "10 parsecs", "1e30bps", "1kbps"])
SIZES = _mostly(["1bdp", "0.5bdp", "80pkt", "64KB", "1KB", "1MB"], ["0B", "0pkt", "-1pkt", "1e12pkt", "5ms", "10Mbps"])
CCS = _mostly(["cubic", "reno", "dctcp", "bbr", "bbr2", "bbr3", "prague", "cbr"], ["nope", ""])
AQMS = st.sampled_from(
    ["taildrop", "red", "step", "pie", "fq_pie", "pi2", "dualpi2", "codel", "fq_codel", "choke", "ckcd", "gsp", "ppv", "csaqm", "bernoulli", "droptail"]
)
AQM_OPTS = st.sampled_from(
    [
        "target",
        "limit",
        "min",
        "max",
        "avpkt",
        "burst",
        "interval",
        "ecn",
        "drop",
        "mark",
        "tupdate",
        "alpha",
        "beta",
        "k",
        "flows",
        "quantum",
        "p",
        "tau",
        "adaptive",
        "threshold",
    ]
)


def _value(specific: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a plausible value of the key, sometimes anything (another type, a table, a list)."""
    anything = st.one_of(_scalars, st.lists(_scalars, max_size=3), st.dictionaries(st.text(max_size=6), _scalars, max_size=2))
    return st.one_of(*[specific] * 15, anything)


def _junk(tables: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """The table as drawn, or (one time in eight) with a random key added."""
    extra = st.one_of(*[st.just({})] * 7, st.dictionaries(st.text(min_size=1, max_size=8), _scalars, min_size=1, max_size=1))
    return st.builds(lambda t, e: {**t, **e}, tables, extra)


def _aqm() -> st.SearchStrategy[Any]:
    opts = st.dictionaries(
        AQM_OPTS, _value(st.one_of(TIMES, SIZES, st.floats(-2, 2), st.integers(-5, 2000), st.booleans(), st.sampled_from(["0.17rtt", "1.5rtt"]))), max_size=3
    )
    return st.builds(lambda kind, o: {"kind": kind, **o}, AQMS, opts)


def _flow() -> st.SearchStrategy[dict[str, Any]]:
    keys = {
        "cc": _value(CCS),
        "count": _value(_mostly([1, 2, 3], [0, -1, 100_000_000, 2**32, 1.5, "2"])),
        "rtt": _value(TIMES),
        "start": _value(TIMES),
        "stop": _value(TIMES),
        "ecn": _value(st.booleans()),
        "size": _value(st.sampled_from(["10KB", "1MB", "0B", "-1B", "1e30B"])),
        "rate": _value(RATES),
        "cc_params": _value(st.dictionaries(st.sampled_from(["beta", "shift_g", "hystart", "ecn", "x"]), _scalars, max_size=2)),
        "fq_pacing": _value(st.booleans()),
        "name": _value(st.text(max_size=8)),
    }
    return _junk(st.fixed_dictionaries({"cc": keys.pop("cc"), "rtt": keys.pop("rtt")}, optional=keys))


def _workload() -> st.SearchStrategy[dict[str, Any]]:
    size = st.one_of(
        st.fixed_dictionaries(
            {"dist": st.sampled_from(["fixed", "uniform", "exponential", "pareto", "lognormal", "empirical", "zipf"])},
            optional={
                "size": _value(SIZES),
                "min": _value(SIZES),
                "max": _value(SIZES),
                "mean": _value(SIZES),
                "alpha": _scalars,
                "median": _value(SIZES),
                "sigma": _scalars,
                "file": st.sampled_from(["missing.csv", "/dev/null", "", "."]),
                "points": st.lists(st.lists(_scalars, max_size=3), max_size=3),
            },
        ),
        _scalars,
    )
    return st.fixed_dictionaries(
        {"cc": _value(CCS), "rate": _value(st.sampled_from(["10/s", "100/s", "0/s", "-1/s", "1e9/s", 10, "x"])), "size": size},
        optional={"rtt": _value(TIMES), "start": _value(TIMES), "stop": _value(TIMES), "load": _value(st.floats(-1, 2)), "ecn": _value(st.booleans())},
    )


def _valid() -> st.SearchStrategy[dict[str, Any]]:
    """A scenario that validates (short: ≤ 0.1 s at ≤ 100 Mbit/s)."""
    flow = st.one_of(
        st.fixed_dictionaries(
            {"cc": st.sampled_from(["cubic", "reno", "dctcp", "bbr", "bbr2", "bbr3", "prague"]), "rtt": st.sampled_from(["10ms", "5ms", "30ms"])},
            optional={
                "count": st.integers(1, 3),
                "start": st.sampled_from(["0s", "uniform(0s, 0.05s)", "staggered(0s, 10ms)"]),
                "ecn": st.booleans(),
                "size": st.sampled_from(["10KB", "100KB"]),
            },
        ),
        st.fixed_dictionaries({"cc": st.just("cbr"), "rate": st.sampled_from(["1Mbps", "20Mbps"]), "rtt": st.just("10ms")}),
    )
    aqm = st.one_of(
        st.just({"kind": "taildrop"}),
        st.just({"kind": "red", "min": "10pkt", "max": "30pkt", "avpkt": "1500B"}),
        st.builds(lambda k: {"kind": k}, st.sampled_from(["pie", "fq_codel", "codel", "choke", "pi2", "dualpi2", "fq_pie", "gsp"])),
        st.just({"kind": "step", "target": "0.5rtt"}),
        st.just({"kind": "bernoulli", "drop": 0.01}),
    )
    return st.fixed_dictionaries(
        {
            "duration": st.sampled_from(["0.1s", "0.05s"]),
            "bottleneck": st.fixed_dictionaries(
                {"rate": st.sampled_from(["10Mbps", "100Mbps"]), "buffer": st.sampled_from(["1bdp", "80pkt", "64KB"]), "aqm": aqm}
            ),
            "flows": st.lists(flow, min_size=1, max_size=3),
        },
        optional={
            "seed": st.integers(0, 2**64 - 1),
            "measure": st.fixed_dictionaries({"interval": st.sampled_from(["10ms", "0s", "50ms"])}),
            "warmup": st.just("0.01s"),
        },
    )


def _mutated() -> st.SearchStrategy[dict[str, Any]]:
    """A valid scenario with up to two of its values replaced (plausible or of any type) or
    its keys removed."""
    replacement = st.one_of(TIMES, RATES, SIZES, CCS, _scalars, st.just(_DELETE))

    def apply(doc: dict[str, Any], edits: list[tuple[int, Any]]) -> dict[str, Any]:
        for i, v in edits:
            paths = [p for p in _leaf_paths(doc) if p]
            doc = _mutate(doc, paths[i % len(paths)], v)
        return doc

    return st.builds(apply, _valid(), st.lists(st.tuples(st.integers(0, 10**6), replacement), max_size=2))


_DELETE = object()


def _scenario() -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(_valid(), _mutated(), _mutated(), _wild())


def _wild() -> st.SearchStrategy[dict[str, Any]]:
    bottleneck = _junk(st.fixed_dictionaries({"rate": _value(RATES), "buffer": _value(SIZES), "aqm": _value(_aqm())}))
    return st.fixed_dictionaries(
        {"duration": _value(TIMES), "bottleneck": _value(bottleneck), "flows": _value(st.lists(_flow(), max_size=3))},
        optional={
            "name": _value(st.text(max_size=10)),
            "warmup": _value(TIMES),
            "seed": _value(st.integers(-1, 2**64)),
            "workload": st.lists(_workload(), max_size=2),
            "marker": _value(st.dictionaries(st.sampled_from(["rate_window", "class_curves", "curve", "x"]), _scalars, max_size=2)),
            "measure": _value(st.fixed_dictionaries({}, optional={"interval": _value(TIMES), "hist_bin": _value(TIMES), "fct_bins": _scalars})),
        },
    ).flatmap(lambda d: _junk(st.just(d)))


def _sweep_table() -> st.SearchStrategy[dict[str, Any]]:
    axis_values = st.lists(
        st.one_of(_scalars, st.sampled_from(["${N}", "${N/2}", "${2*f}rtt", "${nope}", "${1/0}", "${(}", "${N**N**N}", "${10.0**400}", "${ceil(1e308*10)}"])),
        max_size=3,
    )
    axis_names = st.sampled_from(["N", "f", "flows.*.count", "flows.0.cc", "bottleneck.aqm", "duration", "nope.x", "flows.9.count", "*"])
    return st.fixed_dictionaries(
        {},
        optional={
            "N": st.lists(st.sampled_from([1, 2, 0, -1, "a"]), max_size=3),
            "f": st.lists(st.sampled_from([0.5, 1, 0, -1]), max_size=2),
            "exclude": st.lists(st.dictionaries(axis_names, _scalars, max_size=1), max_size=2),
        },
    ).flatmap(lambda base: st.dictionaries(axis_names, axis_values, max_size=2).map(lambda extra: {**base, **extra}))


# ------------------------------------------------------------------------------------------
# TOML writing (tomllib reads only): the documents are made of dicts, lists and scalars.
# ------------------------------------------------------------------------------------------


def _toml_str(v: str) -> str:
    """A TOML basic string: quote, backslash and control characters escaped (TOML 1.0 §String)."""
    out = []
    for ch in v:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _toml_value(v: Any) -> str:
    if v is None:
        return '"null"'  # TOML has no null: a string stands in
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v) if -(2**63) <= v < 2**63 else f'"{v}"'
    if isinstance(v, float):
        return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(repr(v), repr(v))
    if isinstance(v, str):
        return _toml_str(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml_str(str(k))} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(v)


def to_toml(doc: dict[str, Any]) -> str:
    """Top-level scalars, then [table]s, then [[array]]s of tables, as people write them."""
    lines = [
        f"{_toml_str(k)} = {_toml_value(v)}"
        for k, v in doc.items()
        if not isinstance(v, dict) and not (isinstance(v, list) and v and all(isinstance(x, dict) for x in v))
    ]
    for k, v in doc.items():
        if isinstance(v, dict):
            lines.append(f"\n[{_toml_str(k)}]")
            lines += [f"{_toml_str(str(kk))} = {_toml_value(vv)}" for kk, vv in v.items()]
    for k, v in doc.items():
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for item in v:
                lines.append(f"\n[[{_toml_str(k)}]]")
                lines += [f"{_toml_str(str(kk))} = {_toml_value(vv)}" for kk, vv in item.items()]
    return "\n".join(lines) + "\n"


def test_to_toml_round_trips() -> None:
    # The writer the fuzzers depend on: what it writes reads back as the document.
    doc = {
        "duration": "1s",
        "seed": 3,
        "bottleneck": {"rate": "10Mbps", "aqm": {"kind": "red", "min": 2.5}},
        "flows": [{"cc": "cubic", "count": 2}, {"cc": "bbr"}],
    }
    assert tomllib.loads(to_toml(doc)) == doc


# ------------------------------------------------------------------------------------------
# The contract
# ------------------------------------------------------------------------------------------

#: An error line as the CLI prints it: "error: " then "file:line: key: message" or "file: ...".
ERROR_LINE = re.compile(r"^error: \S.*$")


def _commands() -> list[str]:
    names = {c.name or c.callback.__name__ for c in cli.app.registered_commands}
    return [c for c in ("validate", "run", "sweep", "search") if c in names]


def invoke(command: str, file: Path, out: Path, dry_run: bool) -> Any:
    args = [command, str(file)]
    if command in ("run", "sweep", "search"):
        args += ["-o", str(out)]
    if command in ("run", "sweep"):
        args += ["--quiet"]
    if command == "sweep":
        args += ["-j", "1"] + (["--dry-run"] if dry_run else [])
    return CliRunner().invoke(cli.app, args, catch_exceptions=True)


def assert_contract(command: str, file: Path, out: Path, dry_run: bool = False) -> None:
    """`dry_run`: a sweep lists its runs (everything but running them: each run's worker
    process costs a second or two to start)."""
    r = invoke(command, file, out, dry_run)
    text = r.output
    event(f"exit {r.exit_code}")  # how many examples got past validation (--hypothesis-show-statistics)
    assert r.exception is None or isinstance(r.exception, SystemExit), (
        f"{command} raised {type(r.exception).__name__}: {r.exception}\n--- input ---\n{file.read_bytes()[:2000]!r}"
    )
    assert "Traceback" not in text and "panicked" not in text, text
    assert r.exit_code in (0, 2), f"{command}: exit {r.exit_code}\n{text}\n--- input ---\n{file.read_bytes()[:2000]!r}"
    if r.exit_code == 2:
        errors = [ln for ln in text.splitlines() if ln.startswith("error:")]
        assert len(errors) == 1 and ERROR_LINE.match(errors[0]), text
        assert str(file) in errors[0], f"the message does not name the file: {errors[0]}"
        # The engine's JSON is the front's business: its positions mean nothing to the user.
        assert "engine config" not in errors[0] and "line 1 column" not in errors[0], errors[0]
        # Nothing written: no results directory, or (a sweep) none of its runs.
        assert not out.exists() or not any((out / "runs").glob("*")) and not (out / "summary.json").exists(), sorted(map(str, out.rglob("*")))
    elif command == "run":
        assert (out / "summary.json").is_file()
        for t in ("flows", "classes", "timeseries", "queue", "sojourn_hist", "fct"):
            assert (out / f"{t}.parquet").is_file(), t
    elif command == "sweep" and not dry_run:
        assert (out / "index.parquet").is_file()
    elif command == "sweep":
        assert not out.exists()


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


_counter = [0]


def _fresh(work: Path, data: bytes, suffix: str = ".toml") -> tuple[Path, Path]:
    _counter[0] += 1
    d = work / f"case{_counter[0]}"
    d.mkdir()
    f = d / f"s{suffix}"
    f.write_bytes(data)
    return f, d / "out"


@pytest.mark.parametrize("command", ["validate", "run"])
@FUZZ
@given(doc=_scenario())
def test_scenario_documents(command: str, doc: dict[str, Any], work: Path) -> None:
    f, out = _fresh(work, to_toml(doc).encode())
    assert_contract(command, f, out)


@pytest.mark.parametrize("command", [c for c in _commands() if c in ("sweep", "search")])
@FUZZ
@given(doc=_scenario(), sweep=_sweep_table())
def test_sweep_documents(command: str, doc: dict[str, Any], sweep: dict[str, Any], work: Path) -> None:
    f, out = _fresh(work, to_toml({**doc, "sweep": sweep}).encode())
    assert_contract(command, f, out, dry_run=command == "sweep")


@settings(FUZZ, max_examples=6)
@given(doc=_valid(), sweep=_sweep_table())
def test_sweeps_that_run(doc: dict[str, Any], sweep: dict[str, Any], work: Path) -> None:
    # A few sweeps run to the end (valid scenarios, fuzzed axes).
    f, out = _fresh(work, to_toml({**doc, "sweep": sweep}).encode())
    assert_contract("sweep", f, out)


VALID = b"""name = "t"
duration = "0.1s"
[bottleneck]
rate = "10Mbps"
buffer = "1bdp"
aqm = { kind = "red", min = "10pkt", max = "30pkt", avpkt = "1500B" }
[[flows]]
cc = "cubic"
count = 2
rtt = "10ms"
[sweep]
N = [1, 2]
"flows.*.count" = ["${N}"]
"""


@pytest.mark.parametrize("command", _commands())
@FUZZ
@given(
    data=st.one_of(
        st.binary(max_size=300), st.builds(lambda i, b, n: VALID[:i] + b + VALID[i + n :], st.integers(0, len(VALID)), st.binary(max_size=8), st.integers(0, 8))
    )
)
def test_arbitrary_bytes(command: str, data: bytes, work: Path) -> None:
    if command in ("validate", "run"):
        data = re.sub(rb"\[sweep\][\s\S]*", b"", data)
    f, out = _fresh(work, data)
    assert_contract(command, f, out, dry_run=command == "sweep")


# ------------------------------------------------------------------------------------------
# The native module's string entry points: ValueError (or a returned message), never a panic.
# ------------------------------------------------------------------------------------------

ENGINE = json.loads(json.dumps(__import__("aqmlab").Scenario.model_validate(tomllib.loads(re.sub(r"\[sweep\][\s\S]*", "", VALID.decode()))).engine_config()))


def _mutate(doc: Any, path: list[Any], value: Any) -> Any:
    """`doc` with the value at `path` replaced (removed, for `_DELETE`)."""
    if not path:
        return value
    if value is _DELETE and len(path) == 1:
        if isinstance(doc, dict):
            return {k: v for k, v in doc.items() if k != path[0]}
        if isinstance(doc, list) and isinstance(path[0], int) and doc:
            return doc[: path[0] % len(doc)] + doc[path[0] % len(doc) + 1 :]
    if isinstance(doc, dict):
        k = path[0] if path[0] in doc else (sorted(doc)[zlib.crc32(str(path[0]).encode()) % len(doc)] if doc else path[0])
        return {**doc, k: _mutate(doc.get(k), path[1:], value)}
    if isinstance(doc, list) and doc:
        i = path[0] % len(doc) if isinstance(path[0], int) else 0
        return doc[:i] + [_mutate(doc[i], path[1:], value)] + doc[i + 1 :]
    return value


def _leaf_paths(doc: Any, prefix: list[Any] | None = None) -> list[list[Any]]:
    prefix = prefix or []
    if isinstance(doc, dict):
        return [prefix] + [p for k, v in doc.items() for p in _leaf_paths(v, prefix + [k])]
    if isinstance(doc, list):
        return [prefix] + [p for i, v in enumerate(doc) for p in _leaf_paths(v, prefix + [i])]
    return [prefix]


_ENGINE_PATHS = _leaf_paths(ENGINE)
_json_values = st.recursive(
    _scalars.filter(lambda v: not (isinstance(v, float) and v != v)),
    lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.text(max_size=6), c, max_size=3)),
    max_leaves=6,
)
_engine_docs = st.builds(lambda p, v: json.dumps(_mutate(ENGINE, p, v), allow_nan=True), st.sampled_from(_ENGINE_PATHS), _json_values)
_strings = st.one_of(st.text(max_size=200), _engine_docs, st.builds(lambda v: json.dumps(v, allow_nan=True), _json_values))


@FUZZ
@given(s=_strings)
def test_native_entry_points(s: str) -> None:
    for fn in (_native.check, _native.estimate, _native.flow_plan, _native.tables_from_records):
        try:
            fn(s)
        except ValueError:
            pass
    assert _native.check_cc(s) is None or isinstance(_native.check_cc(s), str)


def test_native_run_refuses_a_bad_config_with_value_error() -> None:
    # `run` itself (not fuzzed: a valid mutation would simulate) turns a refused config into
    # ValueError across the FFI.
    bad = json.dumps({**ENGINE, "duration_ns": 0})
    with pytest.raises(ValueError, match="duration"):
        _native.run(bad)


# ------------------------------------------------------------------------------------------
# The router's config file: exit 2 and one line naming the key, never a panic.
# ------------------------------------------------------------------------------------------


def _router() -> Path | None:
    from aqmlab.emu.emulate import EmulatorError, router_binary

    try:
        return router_binary()
    except EmulatorError:
        return None


ROUTER = _router()
ROUTER_BASE = {"tun": "lo", "engine": ENGINE, "class_sources": ["10.77.1.0/24"], "output": "router-out.json"}
_router_docs = st.one_of(
    st.builds(lambda p, v: json.dumps(_mutate(ROUTER_BASE, p, v)).encode(), st.sampled_from(_leaf_paths(ROUTER_BASE)), _json_values),
    st.binary(max_size=200),
)


@pytest.mark.skipif(ROUTER is None, reason="aqmlab-router is not built (make build builds it)")
@settings(FUZZ, max_examples=80)
@given(data=_router_docs)
def test_router_config(data: bytes, work: Path) -> None:
    # The TUN device is "lo" (a config the router accepts then fails to open as a TUN, exit 1
    # "tun: cannot open"), so no fuzzed config ever starts forwarding.
    f, out = _fresh(work, data, ".json")
    r = subprocess.run([str(ROUTER), "--config", str(f)], capture_output=True, timeout=30, cwd=f.parent)
    err = r.stderr.decode("utf-8", "replace").strip().splitlines()
    event(f"exit {r.returncode}")
    assert r.returncode in (1, 2), (r.returncode, err, data[:500])
    assert len(err) == 1 and err[0].startswith("aqmlab-router: "), (err, data[:500])
    if r.returncode == 1:
        assert err[0].startswith("aqmlab-router: tun: cannot open"), err
    assert not (f.parent / "router-out.json").exists()


# ------------------------------------------------------------------------------------------
# What the fuzzers found, kept as plain cases.
# ------------------------------------------------------------------------------------------

BASE = VALID.decode().split("[sweep]")[0]


def test_a_count_beyond_the_engine_32_bits_is_refused_by_its_key(tmp_path: Path) -> None:
    # The engine counts a class's flows in 32 bits: 2^32 was refused by the engine's JSON
    # reader, keyed "bottleneck", with a JSON column number.
    f = tmp_path / "s.toml"
    f.write_text(BASE.replace("count = 2", "count = 4294967296"))
    r = CliRunner().invoke(cli.app, ["validate", str(f)])
    assert r.exit_code == 2
    assert r.output.startswith(f"error: {f}:9: flows[0].count: 4294967296: Input should be less than or equal to 4294967295"), r.output


@pytest.mark.parametrize(
    ("expr", "words"),
    [
        ("${N**N**N}", "9**387420489 is too large"),
        ("${10.0**400}", "10.0**400 is too large"),
        ("${ceil(1e308*10)}", "cannot convert float infinity to integer"),
    ],
)
def test_sweep_expressions_that_overflow_are_refused_at_once(tmp_path: Path, expr: str, words: str) -> None:
    # 9**9**9 has 370 million digits: computing it would take minutes before anything is
    # checked. A power beyond a double's range is refused; a float overflow is an error like
    # any other.
    f = tmp_path / "sw.toml"
    f.write_text(BASE.replace("count = 2", f'count = "{expr}"') + "[sweep]\nN = [9]\n")
    r = CliRunner().invoke(cli.app, ["sweep", str(f), "-o", str(tmp_path / "out"), "--dry-run"])
    assert r.exit_code == 2, r.output
    assert r.output.startswith(f"error: {f}: ") and words in r.output and "(at N = 9)" in r.output, r.output
    assert not (tmp_path / "out").exists()
