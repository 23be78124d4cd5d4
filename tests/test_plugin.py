"""Plugin disciplines from Python (docs/plugins.md): `aqm = { kind = "plugin", module = ... }`
compiled and cached by content, its declared options validated as a built-in's, its content
hash in the scenario hash, run by the simulator, in sweeps, and refused with one located
message when it is bad. The examples are ports of built-ins verdict for verdict
(examples/plugins/*.c say so, and crates/plugin's tests check it packet for packet), so on the
same scenario and seed they give the built-ins' results exactly."""

from __future__ import annotations

import hashlib
import json
import math
import os
import pickle
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

import aqmlab
from aqmlab import engine
from aqmlab.cli.main import app
from aqmlab.scenario import Scenario, ScenarioError, load_scenario, parse_scenario, plugin
from aqmlab.sweep.runner import plan, run_sweep, start_workers
from aqmlab.sweep.spec import load_sweep

ROOT = Path(__file__).resolve().parents[1]
STEP = ROOT / "examples" / "plugins" / "step.c"
CODEL = ROOT / "examples" / "plugins" / "codel.c"
DUALPI2 = ROOT / "examples" / "plugins" / "dualpi2.c"
PI2 = ROOT / "examples" / "plugins" / "pi2.c"

#: A module that accepts every arrival and divides by zero at arrival `trap_at`.
TRAP_C = r"""#include "aqmlab_qdisc.h"

static const aqmlab_option options[] = {
    {"trap_at", AQMLAB_UNIT_INT, "the arrival whose enqueue divides by zero", 0, 100, 1, AQMLAB_NO_MAX},
};
AQMLAB_QDISC(1, options, .kind = "trap", .summary = "accepts every arrival, and traps on one", .source = "tests/test_plugin.py");

static uint32_t n, at;

AQMLAB_EXPORT(aqmlab_init) const char *aqmlab_init(void) {
    n = 0;
    at = (uint32_t)option_values[0];
    return 0;
}

AQMLAB_EXPORT(aqmlab_enqueue) uint32_t aqmlab_enqueue(uint64_t now, const aqmlab_pkt *pkt) {
    (void)now, (void)pkt;
    volatile uint32_t left = at - ++n;
    return 1000u / left == 7 ? AQMLAB_DROP(AQMLAB_DROP_EARLY) : AQMLAB_ACCEPT(0);
}
"""

SCENARIO = """\
duration = "2s"
seed = 3

[bottleneck]
rate = "100Mbps"
buffer = "1bdp"
aqm = {aqm}

[[flows]]
cc = "dctcp"
count = 2
rtt = "10ms"

[[flows]]
cc = "cubic"
rtt = "20ms"
ecn = true
"""


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test its own plugin cache: what it compiles, it compiled itself."""
    cache = tmp_path / "cache"
    monkeypatch.setenv(plugin.CACHE_ENV, str(cache))
    return cache


def _scenario(aqm: dict[str, object]) -> Scenario:
    """SCENARIO built in Python: DCTCP and ECN CUBIC through 100 Mbit/s, 2 s."""
    return Scenario(
        duration="2s",
        seed=3,
        bottleneck={"rate": "100Mbps", "buffer": "1bdp", "aqm": aqm},
        flows=[{"cc": "dctcp", "count": 2, "rtt": "10ms"}, {"cc": "cubic", "rtt": "20ms", "ecn": True}],
    )


def _same_results(a: aqmlab.Result, b: aqmlab.Result) -> bool:
    keys = ("metrics", "classes", "fct", "counters")
    if any(a.summary[k] != b.summary[k] for k in keys):
        return False
    return set(a.arrow) == set(b.arrow) and all(a.arrow[t].equals(b.arrow[t]) for t in a.arrow)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _cli(args: list[str], cwd: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    """The command in-process (Typer's runner: its exit status and output)."""
    monkeypatch.chdir(cwd)
    r = CliRunner().invoke(app, args)
    return r.exit_code, r.stdout, r.stderr


def _process(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command as a process, its tables 200 columns wide (rich reads COLUMNS as it starts)."""
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "aqmlab", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


# ------------------------------------------------------------------------------------------
# The examples against their built-in twins
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "builtin"),
    [({"threshold_packets": "20pkt"}, {"threshold": "20pkt"}), ({"threshold_bytes": "30KB"}, {"threshold": "30KB"})],
    ids=["packets", "bytes"],
)
def test_the_step_example_gives_the_builtin_steps_results(options: dict[str, object], builtin: dict[str, object]) -> None:
    mine = aqmlab.run(_scenario({"kind": "plugin", "module": str(STEP), **options}))
    theirs = aqmlab.run(_scenario({"kind": "step", **builtin}))
    assert _same_results(mine, theirs)
    # Not two idle markers agreeing: STEP marked here, and another threshold changes the run.
    assert mine.summary["metrics"]["mark_ratio"] > 0.01
    other = aqmlab.run(_scenario({"kind": "plugin", "module": str(STEP), "threshold_packets": "5pkt"}))
    assert not _same_results(mine, other)


@pytest.mark.parametrize(
    ("options", "signal"),
    [({}, "drop_ratio"), ({"ecn": True, "target": "0.2rtt", "interval": "50ms"}, "mark_ratio")],
    ids=["drops", "marks"],
)
def test_the_codel_example_gives_the_builtin_codels_results(options: dict[str, object], signal: str) -> None:
    mine = aqmlab.run(_scenario({"kind": "plugin", "module": str(CODEL), **options}))
    theirs = aqmlab.run(_scenario({"kind": "codel", **options}))
    assert _same_results(mine, theirs)
    # CoDel acted (dropped, or with ecn marked) in this run.
    assert mine.summary["metrics"][signal] > 0.001
    # Its delay target is its `target` option (delay_target_option), as the built-in's.
    assert mine.summary["metrics"]["sojourn_mean_rel_target"] == theirs.summary["metrics"]["sojourn_mean_rel_target"] is not None


def test_the_dualpi2_example_gives_the_builtin_dualpi2s_results() -> None:
    # Two Prague flows (ECT(1): the L queue) beside an ECN Cubic and a Not-ECT Reno one (the C
    # queue), 40 Mbit/s: both queues, the step, coupled and classic signals in one run.
    def through(aqm: dict[str, object]) -> aqmlab.Result:
        flows = [{"cc": "prague", "count": 2, "rtt": "10ms"}, {"cc": "cubic", "rtt": "20ms", "ecn": True}, {"cc": "reno", "rtt": "20ms"}]
        return aqmlab.run(Scenario(duration="3s", seed=4, bottleneck={"rate": "40Mbps", "buffer": "2bdp", "aqm": aqm}, flows=flows))

    mine = through({"kind": "plugin", "module": str(DUALPI2), "tupdate": "10ms"})
    theirs = through({"kind": "dualpi2", "tupdate": "10ms"})
    assert _same_results(mine, theirs)
    classes = {c["cc"]: c for c in mine.summary["classes"]}
    assert classes["prague"]["mark_ratio"] > 0.01 and classes["cubic"]["mark_ratio"] > 0 and classes["reno"]["drop_ratio"] > 0


def test_a_size_in_packets_counts_1500_bytes_for_a_plugin() -> None:
    # plugins/include/aqmlab_qdisc.h: "a scenario writes bytes, 10pkt = 15000 bytes".
    s = _scenario({"kind": "plugin", "module": str(STEP), "threshold_bytes": "20pkt"})
    assert s.engine_config()["bottleneck"]["aqm"]["options"] == {"threshold_bytes": 30000.0}


# ------------------------------------------------------------------------------------------
# What ABI v2 adds: a choice option (written as its string, received as its index), the
# timer's period from an option (aqmlab_set_timer), and AQMLAB_READS_VALUES, which gives the
# flows the run's packet-value marker as for the built-in PPV and CSAQM
# ------------------------------------------------------------------------------------------

#: Drops every arrival whose packet value is below `floor`; with AQMLAB_READS_VALUES (FLAGS).
FLAGS = ".flags = AQMLAB_READS_VALUES"
VALUE_GATE_C = r"""#include "aqmlab_qdisc.h"

static const aqmlab_option options[] = {
    {"floor", AQMLAB_UNIT_INT, "the least packet value that passes", 0, 1, 0, 65535},
};
AQMLAB_QDISC(1, options, .kind = "value_gate", .summary = "drops packets valued below floor",
             .source = "tests/test_plugin_abi2.py", .flags = AQMLAB_READS_VALUES);

static uint32_t floor_value;

AQMLAB_EXPORT(aqmlab_init) const char *aqmlab_init(void) {
    floor_value = (uint32_t)option_values[0];
    return 0;
}

AQMLAB_EXPORT(aqmlab_enqueue) uint32_t aqmlab_enqueue(uint64_t now, const aqmlab_pkt *pkt) {
    (void)now;
    return pkt->value < floor_value ? AQMLAB_DROP(AQMLAB_DROP_VALUE) : AQMLAB_ACCEPT(0);
}
"""


def _dctcp_through(aqm: dict[str, object], base: Path | None = None) -> Scenario:
    """Two DCTCP flows (ECT(0)) and a Cubic one through 100 Mbit/s, 2 s."""
    return Scenario.model_validate(
        {
            "duration": "2s",
            "seed": 5,
            "bottleneck": {"rate": "100Mbps", "buffer": "1bdp", "aqm": aqm},
            "flows": [{"cc": "dctcp", "count": 2, "rtt": "10ms"}, {"cc": "cubic", "rtt": "20ms"}],
        },
        context={"base_dir": base} if base else None,
    )


def test_a_choice_and_the_timer_period_reach_the_module_as_the_builtin_takes_them() -> None:
    # pi2.c ports the built-in PI2 verdict for verdict (crates/plugin's tests check it packet
    # for packet), so with the same options the runs are the same: ecn_mask = "any_ect" (the
    # module receives index 1) makes DCTCP's ECT(0) scalable, and tupdate = "10ms" is the
    # period the module gives its timer.
    options = {"ecn_mask": "any_ect", "tupdate": "10ms", "target": "5ms"}
    pi2_c = aqmlab.run(_dctcp_through({"kind": "plugin", "module": str(PI2), **options}))
    builtin = aqmlab.run(_dctcp_through({"kind": "pi2", **options}))
    assert _same_results(pi2_c, builtin)
    # Each option changes the run: neither is ignored on the way to the module.
    for other in ({"ecn_mask": "l4s_ect"}, {"tupdate": "16ms"}):
        changed = aqmlab.run(_dctcp_through({"kind": "plugin", "module": str(PI2), **options, **other}))
        assert changed.summary["metrics"] != pi2_c.summary["metrics"], other


def test_a_choice_outside_its_strings_is_one_located_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(PI2, tmp_path / "pi2.c")
    _write(
        tmp_path / "s.toml",
        'duration = "1s"\n\n[bottleneck]\nrate = "10Mbps"\nbuffer = "1bdp"\naqm = { kind = "plugin", module = "pi2.c", ecn_mask = "all_ect" }\n\n[[flows]]\ncc = "dctcp"\nrtt = "10ms"\n',
    )
    code, _, stderr = _cli(["run", "s.toml", "-o", "out"], tmp_path, monkeypatch)
    assert code == 2
    assert "s.toml:6: bottleneck.aqm.ecn_mask:" in stderr and "'l4s_ect'" in stderr and "'any_ect'" in stderr
    assert not (tmp_path / "out").exists()


def _tvf(x_bps: float) -> int:
    """The marker's log-linear TVF (crates/link/src/marker.rs: PV_MAX 65535, X_MIN 10 kbit/s,
    X_MAX 100 Gbit/s), rounded and clamped as there."""
    v = round(65535 * (math.log(100e9) - math.log(x_bps)) / (math.log(100e9) - math.log(10e3)))
    return min(max(v, 1), 65535)


def test_a_plugin_that_reads_values_gets_the_marker_and_keeps_its_requirement(tmp_path: Path) -> None:
    # The marker requirement (Nádas et al. 2016): a node that drops every packet valued below
    # V(x) leaves each flow x. A 10 Mbit/s CBR flow through the value gate at floor V(4 Mbit/s)
    # keeps 4 Mbit/s of its 10 (the marker values a packet V(u·R), u uniform: P(V(uR) ≥ V(x))
    # = x/R), so 0.4 of what it delivers through a plain FIFO; the link (100 Mbit/s) is never
    # the limit. Each packet passes or not as a Bernoulli trial: over 20 s of 1500-byte packets
    # (n ≈ 16 667) the pass ratio's relative standard deviation is √((1 − p)/(p·n)) ≈ 0.95 %,
    # and the test allows four of them.
    _write(tmp_path / "gate.c", VALUE_GATE_C)

    def cbr_through(aqm: dict[str, object]) -> Scenario:
        return Scenario.model_validate(
            {
                "duration": "21s",
                "warmup": "1s",
                "seed": 2,
                "bottleneck": {"rate": "100Mbps", "buffer": "1bdp", "aqm": aqm},
                "flows": [{"cc": "cbr", "rate": "10Mbps", "rtt": "20ms"}],
            },
            context={"base_dir": tmp_path},
        )

    gated = cbr_through({"kind": "plugin", "module": "gate.c", "floor": _tvf(4e6)})
    assert gated.effective_marker() is not None
    through_gate = aqmlab.run(gated).summary["classes"][0]
    plain = aqmlab.run(cbr_through({"kind": "taildrop"})).summary["classes"][0]
    assert plain["drop_ratio"] == 0
    n = 10e6 * 20 / (1500 * 8)
    rel = 4 * math.sqrt(0.6 / (0.4 * n))
    assert through_gate["goodput_bps"] / plain["goodput_bps"] == pytest.approx(0.4, rel=rel)
    assert 1 - through_gate["drop_ratio"] == pytest.approx(0.4, rel=rel)


def test_without_the_flag_a_plugin_gets_no_marker_and_a_marker_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path / "gate.c", VALUE_GATE_C.replace(FLAGS, ".flags = 0"))
    aqm = {"kind": "plugin", "module": "gate.c", "floor": 1}
    flows = [{"cc": "cbr", "rate": "10Mbps", "rtt": "20ms"}]
    s = Scenario.model_validate(
        {"duration": "2s", "bottleneck": {"rate": "100Mbps", "buffer": "1bdp", "aqm": aqm}, "flows": flows}, context={"base_dir": tmp_path}
    )
    assert s.effective_marker() is None
    # Every packet's value is 0, so the gate drops them all.
    assert aqmlab.run(s).summary["classes"][0]["drop_ratio"] == 1
    _write(
        tmp_path / "s.toml",
        'duration = "1s"\n\n[bottleneck]\nrate = "100Mbps"\nbuffer = "1bdp"\naqm = { kind = "plugin", module = "gate.c", floor = 1 }\n\n'
        '[[flows]]\ncc = "cbr"\nrate = "10Mbps"\nrtt = "20ms"\n\n[marker]\ntvf = "equal"\n',
    )
    code, _, stderr = _cli(["run", "s.toml", "-o", "out"], tmp_path, monkeypatch)
    assert code == 2
    assert "marker: only disciplines that read packet values use it" in stderr
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------------
# Options and modules refused with one located message
# ------------------------------------------------------------------------------------------

CODEL_AQM = '{ kind = "plugin", module = "codel.c", target = "5ms", interval = "100ms" }'


@pytest.mark.parametrize(
    ("aqm", "expected"),
    [
        (CODEL_AQM.replace("target", "taget"), "s.toml:7: bottleneck.aqm.taget: unknown key (did you mean 'target'?)"),
        (CODEL_AQM.replace('"100ms"', '"0ms"'), "s.toml:7: bottleneck.aqm.interval: '0ms' must be ≥ 1ns"),
        (CODEL_AQM.replace('"100ms"', '"100Mbps"'), "s.toml:7: bottleneck.aqm.interval: '100Mbps' is not a time: unknown unit 'Mbps' (use ns, us, ms, s)"),
        (CODEL_AQM.replace('interval = "100ms"', 'limit = "0pkt"'), "s.toml:7: bottleneck.aqm.limit: '0pkt' must be ≥ 1pkt"),
        (CODEL_AQM.replace('interval = "100ms"', 'limit = "15KB"'), "s.toml:7: bottleneck.aqm.limit: '15KB': this option counts packets (e.g. 20pkt)"),
        # A multiple of the reference RTT is checked once resolved, by the engine: same key.
        (CODEL_AQM.replace('"5ms"', '"0rtt"'), "s.toml:7: bottleneck.aqm.target: 0 must be in [1, inf] (plugin codel.wasm)"),
        (CODEL_AQM.replace("module", "modul"), "s.toml:7: bottleneck.aqm.modul: unknown key (did you mean 'module'?)"),
        (CODEL_AQM.replace("codel.c", "nope.c"), "s.toml:7: bottleneck.aqm.module: cannot read {dir}/nope.c (No such file or directory)"),
        (CODEL_AQM.replace("codel.c", "codel.txt"), "s.toml:7: bottleneck.aqm.module: 'codel.txt': a module is a C file (.c)"),
    ],
    ids=[
        "unknown",
        "out-of-range",
        "wrong-unit",
        "packets-below-min",
        "packets-as-bytes",
        "rtt-target-out-of-range",
        "misspelt-module",
        "missing",
        "not-a-module",
    ],
)
def test_a_bad_option_or_module_is_one_located_error_exit_2_nothing_written(aqm: str, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(CODEL, tmp_path / "codel.c")
    _write(tmp_path / "s.toml", SCENARIO.replace("{aqm}", aqm))
    code, _, stderr = _cli(["run", "s.toml", "-o", "out"], tmp_path, monkeypatch)
    assert code == 2, stderr
    assert stderr.startswith("error: " + expected.format(dir=tmp_path)), stderr
    assert len(stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_a_c_file_that_does_not_compile_names_the_file_and_clangs_first_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path / "src" / "bad.c", '#include "aqmlab_qdisc.h"\n\nint x = y;\nint z = w;\n')
    _write(tmp_path / "s.toml", SCENARIO.replace("{aqm}", '{ kind = "plugin", module = "src/bad.c" }'))
    code, _, stderr = _cli(["validate", "s.toml"], tmp_path, monkeypatch)
    assert code == 2
    # clang reports `y` (line 3, column 9) first; `w` is the second error.
    assert stderr.strip() == "error: s.toml:7: bottleneck.aqm.module: bad.c does not compile: bad.c:3:9: error: use of undeclared identifier 'y' (and 1 more)"


def test_a_module_outside_the_abi_is_refused_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Compiles, but exports no aqmlab_init: the engine refuses it at validation.
    _write(tmp_path / "plain.c", "int f(void) { return 1; }\n")
    _write(tmp_path / "s.toml", SCENARIO.replace("{aqm}", '{ kind = "plugin", module = "plain.c" }'))
    code, _, stderr = _cli(["validate", "s.toml"], tmp_path, monkeypatch)
    assert code == 2 and stderr.startswith("error: s.toml:7: bottleneck.aqm.module: plugin plain.wasm refused: missing export aqmlab_init"), stderr
    # A refused module is not kept in the cache.
    assert not list(plugin.cache_dir().glob("*/plain.wasm"))


# ------------------------------------------------------------------------------------------
# The module's content names it
# ------------------------------------------------------------------------------------------


def _hash_of(directory: Path, source: str) -> str:
    _write(directory / "my_step.c", source)
    text = SCENARIO.replace("{aqm}", '{ kind = "plugin", module = "my_step.c", threshold_packets = "20pkt" }')
    return load_scenario(_write(directory / "s.toml", text)).hash()


def test_the_modules_content_is_in_the_scenario_hash_its_path_is_not(tmp_path: Path) -> None:
    source = STEP.read_text(encoding="utf-8")
    here = _hash_of(tmp_path / "a", source)
    assert _hash_of(tmp_path / "b" / "deeper", source) == here
    # A comment compiles to the same module: the hash follows the module, not the text.
    assert _hash_of(tmp_path / "c", "/* a remark */\n" + source) == here
    # The marking rule changed (≥ for >): another module, another scenario.
    edited = source.replace("q->len > k", "q->len >= k")
    assert edited != source
    assert _hash_of(tmp_path / "d", edited) != here
    # The same module prebuilt: the same scenario.
    wasm = tmp_path / "e" / "my_step.wasm"
    wasm.parent.mkdir()
    shutil.copy(plugin.resolve(str(tmp_path / "a" / "my_step.c")).wasm, wasm)
    text = SCENARIO.replace("{aqm}", '{ kind = "plugin", module = "my_step.wasm", threshold_packets = "20pkt" }')
    assert load_scenario(_write(tmp_path / "e" / "s.toml", text)).hash() == here


def test_the_canonical_form_names_the_modules_bytes_and_reads_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = _scenario({"kind": "plugin", "module": str(CODEL), "target": "0.5rtt"})
    aqm = s.canonical()["bottleneck"]["aqm"]
    module = plugin.resolve(str(CODEL))
    assert aqm["module"] == "sha256:" + hashlib.sha256(module.wasm.read_bytes()).hexdigest()
    assert str(CODEL.parent) not in s.canonical_json()
    # Every declared option, defaults filled in, in canonical spelling (codel.c's defaults).
    assert {k: v for k, v in aqm.items() if k not in ("kind", "module")} == {
        "target": "0.5rtt",
        "interval": "100ms",
        "limit": "1000pkt",
        "ecn": False,
        "ce_threshold": None,
    }
    # A sweep's worker gets the canonical form: the module comes from the cache.
    assert Scenario.model_validate(s.canonical()).hash() == s.hash()
    monkeypatch.setenv(plugin.CACHE_ENV, str(tmp_path / "empty"))
    with pytest.raises(ValidationError, match=r"no such module in the plugin cache") as e:
        Scenario.model_validate(s.canonical())
    # A worker sends that error back pickled: it must arrive whole, or the pool breaks.
    assert str(pickle.loads(pickle.dumps(e.value))) == str(e.value)


def test_a_scenario_built_in_python_finds_its_module_from_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(STEP, tmp_path / "step.c")
    monkeypatch.chdir(tmp_path)
    s = _scenario({"kind": "plugin", "module": "step.c", "threshold_packets": "20pkt"})
    assert s.engine_config()["bottleneck"]["aqm"]["module"] == str(plugin.resolve(str(STEP)).wasm)
    # From TOML text, relative to base_dir when one is given.
    text = SCENARIO.replace("{aqm}", '{ kind = "plugin", module = "step.c", threshold_packets = "20pkt" }')
    monkeypatch.chdir(ROOT)
    with pytest.raises(ScenarioError, match=r"cannot read .*/step\.c"):
        parse_scenario(text.replace('"step.c"', '"nowhere/step.c"'), base_dir=tmp_path)
    assert parse_scenario(text, base_dir=tmp_path).hash() == s.hash()


# ------------------------------------------------------------------------------------------
# Sweeps, and a module that traps
# ------------------------------------------------------------------------------------------


def _start_workers_elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep's local workers fork from a server started once per process: start it (if no
    test has yet) with another plugin cache in its environment. A sweep hands its workers the
    cache it uses (`execute`'s plugin_cache), so it must not matter."""
    with monkeypatch.context() as m:
        m.setenv(plugin.CACHE_ENV, str(tmp_path / "another-cache"))
        start_workers()


def test_a_sweep_resolves_the_module_once_and_varies_its_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(STEP, _write(tmp_path / "plugins" / "x", "").parent / "step.c")
    aqm = '{ kind = "plugin", module = "plugins/step.c", threshold_packets = "20pkt" }'
    text = SCENARIO.replace('duration = "2s"', 'duration = "1s"').replace("{aqm}", aqm) + '\n[sweep]\n"bottleneck.aqm.threshold_packets" = ["5pkt", "50pkt"]\n'
    path = _write(tmp_path / "sweep.toml", text)
    calls: list[str] = []
    compile_plugin = engine.compile_plugin
    monkeypatch.setattr(engine, "compile_plugin", lambda *a: calls.append(a[0]) or compile_plugin(*a))
    # From another directory: the module is relative to the sweep file.
    monkeypatch.chdir(_write(tmp_path / "elsewhere" / "x", "").parent)
    sw = load_sweep(path)
    runs = plan(sw)
    assert len(runs) == 2 and len({r.hash for r in runs}) == 2
    assert calls == [str(tmp_path / "plugins" / "step.c")]
    _start_workers_elsewhere(tmp_path, monkeypatch)
    res = run_sweep(sw, tmp_path / "out")
    assert (res.ran, res.failed) == (2, [])
    delay = {}
    for r in runs:
        summary = json.loads((tmp_path / "out" / "runs" / r.hash / "summary.json").read_text(encoding="utf-8"))
        delay[summary["scenario"]["bottleneck"]["aqm"]["threshold_packets"]] = summary["metrics"]["sojourn_ms"]["mean"]
    # Each point ran its own threshold: DCTCP holds the queue near K, so a tenth of the
    # threshold is well under half the queueing delay.
    assert 0 < delay["5pkt"] < delay["50pkt"] / 2


def test_a_trap_ends_the_run_naming_the_module_function_and_time(tmp_path: Path) -> None:
    _write(tmp_path / "trap.c", TRAP_C)
    _write(tmp_path / "s.toml", SCENARIO.replace("{aqm}", '{ kind = "plugin", module = "trap.c" }'))
    r = subprocess.run([sys.executable, "-m", "aqmlab", "run", "s.toml", "-o", "out", "--quiet"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    m = re.search(r"plugin trap\.wasm: aqmlab_enqueue at t = ([0-9.]+) s", last)
    assert m, r.stderr
    # The 100th arrival at a 100 Mbit/s bottleneck, from 3 flows starting at once: early.
    assert 0 < float(m.group(1)) < 0.5
    assert "divide by zero" in last and not (tmp_path / "out").exists()


def test_in_a_sweep_a_trap_is_a_failed_run_and_the_sweep_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path / "trap.c", TRAP_C)
    text = SCENARIO.replace('duration = "2s"', 'duration = "1s"').replace("{aqm}", '{ kind = "plugin", module = "trap.c", trap_at = "${n}" }')
    sw = load_sweep(_write(tmp_path / "sweep.toml", text + "\n[sweep]\nn = [100, 1000000000]\n"))
    _start_workers_elsewhere(tmp_path, monkeypatch)
    res = run_sweep(sw, tmp_path / "out")
    assert res.ran == 1 and len(res.failed) == 1
    failed_hash, message = res.failed[0]
    assert re.search(r"plugin trap\.wasm: aqmlab_enqueue at t = 0\.\d+ s", message), message
    trapped = next(r for r in plan(sw) if r.params["n"] == 100)
    assert failed_hash == trapped.hash
    assert sorted(p.name for p in (tmp_path / "out" / "runs").iterdir()) == [next(r.hash for r in plan(sw) if r.params["n"] != 100)]


# ------------------------------------------------------------------------------------------
# The CLI: building a module, listing what it declares
# ------------------------------------------------------------------------------------------


def test_plugin_build_writes_the_module_and_prints_what_it_declares(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(CODEL, tmp_path / "codel.c")
    r = _process(["plugin", "build", "codel.c"], tmp_path)
    assert r.returncode == 0, r.stderr
    stdout = r.stdout
    wasm = (tmp_path / "codel.wasm").read_bytes()
    assert wasm[:4] == b"\0asm" and f"sha256:{hashlib.sha256(wasm).hexdigest()}" in stdout
    assert "codel_c" in stdout and "(ABI v2)" in stdout
    assert "queues: 1; enqueue: the host's (every arrival to queue 0, within aqmlab_set_limit); dequeue: aqmlab_dequeue; timer: none" in stdout
    # codel.c's declaration: each option with its default in scenario terms and its range.
    for row in (
        r"target\s*│ delay-target\s*│ 5ms\s*│ ≥ 1ns",
        r"interval\s*│ time\s*│ 100ms",
        r"limit\s*│ packets\s*│ 1000pkt\s*│ ≥ 1pkt",
        r"ecn\s*│ bool\s*│ false",
        r"ce_threshold\s*│ time\s*│ –",
    ):
        assert re.search(row, stdout), row
    # What it prints as a scenario's aqm table reads back as one.
    line = next(ln for ln in stdout.splitlines() if ln.startswith("in a scenario: "))
    aqm = tomllib.loads(line.removeprefix("in a scenario: "))["aqm"]
    assert aqm["limit"] == "1000pkt" and load_scenario(_write(tmp_path / "s.toml", SCENARIO.replace("{aqm}", line.split("aqm = ", 1)[1])))


def test_plugin_build_of_a_bad_file_exits_2_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path / "bad.c", '#include "aqmlab_qdisc.h"\nint x = y;\n')
    code, _, stderr = _cli(["plugin", "build", "bad.c", "-o", "out.wasm"], tmp_path, monkeypatch)
    assert code == 2 and stderr.strip() == "error: bad.c does not compile: bad.c:2:9: error: use of undeclared identifier 'y'"
    # Nor in the plugin cache (tmp_path/cache).
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.c"]


def test_list_aqms_shows_a_plugins_options_beside_the_builtins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(STEP, tmp_path / "step.c")
    r = _process(["list", "aqms", "--plugin", "step.c"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "│ taildrop" in r.stdout and "│ plugin step.c (step_c)" in r.stdout
    assert re.search(r"threshold_packets\s*│ packets\s*│ –\s*│ ≥ 0pkt", r.stdout), r.stdout
    code, stdout, _ = _cli(["list", "aqms", "--markdown", "--plugin", "step.c"], tmp_path, monkeypatch)
    assert code == 0 and "| `threshold_bytes` | size | – | ≥ 0B | K as a size: mark while more than K bytes are queued | – |" in stdout


# ------------------------------------------------------------------------------------------
# The header, for an installed package too
# ------------------------------------------------------------------------------------------


def test_the_package_ships_the_abi_header() -> None:
    # What an installed wheel compiles against (plugin.include_dir) is the original's content.
    packaged = Path(plugin.__file__).parent / "include" / plugin.HEADER
    assert packaged.read_bytes() == (ROOT / "plugins" / "include" / plugin.HEADER).read_bytes()
    # A source checkout compiles against the original.
    assert plugin.include_dir() == ROOT / "plugins" / "include"


def test_the_wheel_holds_the_header() -> None:
    # The wheel `make build` leaves, as tests/test_wheel.py picks it and installs it.
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    wheels = sorted(Path(os.environ.get("AQMLAB_WHEEL_DIR", ROOT / "target" / "wheels")).glob(f"aqmlab-{version}-*.whl"))
    if not wheels:
        pytest.fail("no wheel in target/wheels: `make build` builds it")
    with zipfile.ZipFile(wheels[-1]) as z:
        assert z.read(f"aqmlab/scenario/include/{plugin.HEADER}") == (ROOT / "plugins" / "include" / plugin.HEADER).read_bytes()
        # The congestion controls' kernel headers (symlinked file by file into the package).
        cc_headers = sorted(p.relative_to(ROOT / "plugins" / "include") for p in (ROOT / "plugins" / "include" / "bpfcc").rglob("*.h"))
        assert [str(h) for h in cc_headers] == ["bpfcc/bpf/bpf_core_read.h", "bpfcc/bpf/bpf_helpers.h", "bpfcc/bpf/bpf_tracing.h", "bpfcc/vmlinux.h"]
        for h in cc_headers:
            assert z.read(f"aqmlab/scenario/include/{h}") == (ROOT / "plugins" / "include" / h).read_bytes()


# ------------------------------------------------------------------------------------------
# docs/plugins.md: its files as written
# ------------------------------------------------------------------------------------------


def _doc_files() -> dict[str, str]:
    """The C and TOML files docs/plugins.md spells out, by the name each opens with."""
    text = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```(?:c|toml)\n(.*?)```", text, flags=re.S)
    files = {}
    for b in blocks:
        m = re.match(r"(?:/\* |# )([\w.-]+\.(?:c|toml))\b", b)
        if m:
            files[m.group(1)] = b
    return files


def test_the_docs_example_builds_runs_and_sweeps(tmp_path: Path) -> None:
    files = _doc_files()
    assert sorted(files) == ["delay-step-sweep.toml", "delay-step.toml", "delay_step.c"]
    for name, body in files.items():
        _write(tmp_path / name, body)
    short = {"duration": "1s", "warmup": "0s"}
    s = load_scenario(tmp_path / "delay-step.toml").model_copy(update=short)
    res = aqmlab.run(s)
    # The rule acts: the ECN CUBIC class is marked with "step" (AQMLAB_MARK_STEP).
    assert res.summary["metrics"]["mark_ratio"] > 0.01
    runs = plan(load_sweep(tmp_path / "delay-step-sweep.toml"))
    assert len(runs) == 9 and {r.scenario.flows[1].cc for r in runs} == {"cubic", "bbr2", "prague"}
    # The ramp of "Change the rule", in place of the step: marks by probability, fewer.
    text = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    ramp = next(b for b in re.findall(r"```c\n(.*?)```", text, flags=re.S) if "aqmlab_random_unit" in b)
    source = files["delay_step.c"]
    _write(tmp_path / "ramp" / "delay_step.c", source[: source.index("AQMLAB_EXPORT(aqmlab_enqueue)")] + ramp)
    ramped = aqmlab.run(parse_scenario(files["delay-step.toml"], base_dir=tmp_path / "ramp").model_copy(update=short))
    assert 0 < ramped.summary["metrics"]["mark_ratio"] < res.summary["metrics"]["mark_ratio"]
