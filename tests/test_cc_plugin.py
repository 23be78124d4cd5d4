"""Congestion controls of one's own (docs/plugins.md, "Your own congestion control"): a
struct_ops BPF C file named by `cc = { plugin = ... }` in [[flows]] or [[workload]], compiled
and cached by content (module and source), its hash in the scenario hash, lowered to the
engine's `{"name": "plugin", "module": ...}`, shown by its struct_ops name, built and
described by the CLI, and refused with one line naming the file when bad. The emulator's side
(the same file registered in the kernel) is tests/test_bpfcc_plugin.py.

The engine's side (the kernel's Reno functions are the built-in Reno bit for bit) is
crates/sim/tests/cc_plugin.rs; here the front must hand it the module so that the same holds
for a scenario file."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

import aqmlab
from aqmlab import engine
from aqmlab.cli.main import app
from aqmlab.scenario import Scenario, cc_label, load_scenario, parse_scenario, plugin, plugin_cc
from aqmlab.sweep.runner import plan, run_sweep
from aqmlab.sweep.spec import load_sweep

ROOT = Path(__file__).resolve().parents[1]
RENO = ROOT / "examples" / "plugins" / "reno.bpf.c"
DCTCP = ROOT / "bpf" / "aqmlab_dctcp.bpf.c"
DELAY = ROOT / "examples" / "plugins" / "delay.bpf.c"

#: Two Reno classes through a TailDrop buffer small enough to drop: every cut of the window is
#: the CC's ssthresh, so a wrong module or a lost op shows.
SCENARIO = """\
duration = "2s"
seed = 2

[bottleneck]
rate = "20Mbps"
buffer = "40pkt"
aqm = {aqm}

[[flows]]
cc = {cc}
count = 2
rtt = "10ms"
start = "uniform(0s, 200ms)"

[[flows]]
cc = {cc}
rtt = "40ms"
"""

HEADERS = '#include "vmlinux.h"\n#include <bpf/bpf_helpers.h>\n#include <bpf/bpf_tracing.h>\n\nchar _license[] SEC("license") = "GPL";\n'


def reno_with(*, flags: str = "0", name: str = "t_reno", extern: str = "", in_ssthresh: str = "") -> str:
    """A CC of the kernel's Reno functions (as examples/plugins/reno.bpf.c), with `flags`, and
    `in_ssthresh` run in its ssthresh."""
    return f"""{HEADERS}
extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;
{extern}
SEC("struct_ops/t_ssthresh")
__u32 BPF_PROG(t_ssthresh, struct sock *sk)
{{
	{in_ssthresh}
	return tcp_reno_ssthresh(sk);
}}

SEC("struct_ops/t_cong_avoid")
void BPF_PROG(t_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{{
	tcp_reno_cong_avoid(sk, ack, acked);
}}

SEC("struct_ops/t_undo_cwnd")
__u32 BPF_PROG(t_undo_cwnd, struct sock *sk)
{{
	return tcp_reno_undo_cwnd(sk);
}}

SEC(".struct_ops")
struct tcp_congestion_ops t = {{
	.ssthresh = (void *)t_ssthresh,
	.cong_avoid = (void *)t_cong_avoid,
	.undo_cwnd = (void *)t_undo_cwnd,
	.flags = {flags},
	.name = "{name}",
}};
"""


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test its own plugin cache: what it compiles, it compiled itself."""
    cache = tmp_path / "cache"
    monkeypatch.setenv(plugin.CACHE_ENV, str(cache))
    return cache


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _scenario_file(directory: Path, cc: str, aqm: str = '{ kind = "taildrop" }', extra: str = "") -> Path:
    return _write(directory / "s.toml", SCENARIO.replace("{aqm}", aqm).replace("{cc}", cc) + extra)


def _cli(args: list[str], cwd: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    """The command in-process (Typer's runner: its exit status and output)."""
    monkeypatch.chdir(cwd)
    r = CliRunner().invoke(app, args)
    return r.exit_code, r.stdout, r.stderr


def _without_cc(t: pa.Table) -> pa.Table:
    """A table without the CC's name and its internal state (a built-in's α or phase in the
    time series; a plugin's state is its own, not shown)."""
    return t.drop_columns([c for c in t.column_names if c == "cc" or c.startswith("cc_")])


def _class_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in c.items() if k not in ("cc", "name")} for c in summary["classes"]]


# ------------------------------------------------------------------------------------------
# The front hands the engine the module: the kernel's Reno functions are the built-in Reno
# ------------------------------------------------------------------------------------------


def test_the_reno_example_gives_the_builtin_renos_results_but_for_its_name(tmp_path: Path) -> None:
    shutil.copy(RENO, tmp_path / "reno.bpf.c")
    mine_s = load_scenario(_scenario_file(tmp_path, '{ plugin = "reno.bpf.c" }'))
    theirs_s = load_scenario(_scenario_file(tmp_path / "builtin", '"reno"'))
    assert mine_s.class_names() == ["aqmlab_reno-10ms", "aqmlab_reno-40ms"] and theirs_s.class_names() == ["reno-10ms", "reno-40ms"]
    # The class names the same in both, so that only the CC's name can differ.
    named = [f.model_copy(update={"name": n}) for f, n in zip(mine_s.flows, ("short", "long"))]
    mine = aqmlab.run(mine_s.model_copy(update={"flows": named}))
    theirs = aqmlab.run(theirs_s.model_copy(update={"flows": [f.model_copy(update={"cc": "reno"}) for f in named]}))
    # Something to compare: the buffer dropped, so every flow's window was cut by ssthresh.
    assert theirs.summary["metrics"]["drop_ratio"] > 0.001
    for key in ("metrics", "fct", "counters"):
        assert mine.summary[key] == theirs.summary[key], key
    assert _class_rows(mine.summary) == _class_rows(theirs.summary)
    assert set(mine.arrow) == set(theirs.arrow)
    for table in mine.arrow:
        assert _without_cc(mine.arrow[table]).equals(_without_cc(theirs.arrow[table])), table
    # What differs is the name: the struct_ops .name, in the results and the class names.
    assert set(mine.arrow["flows"].column("cc").to_pylist()) == {"aqmlab_reno"}
    assert [c["cc"] for c in mine.summary["classes"]] == ["aqmlab_reno", "aqmlab_reno"]
    assert [c["cc"] for c in theirs.summary["classes"]] == ["reno", "reno"]


def test_lowering_names_the_cached_module_and_the_cache_keeps_the_source(tmp_path: Path) -> None:
    s = Scenario(
        duration="1s",
        bottleneck={"rate": "20Mbps", "buffer": "1bdp"},
        flows=[{"cc": {"plugin": str(RENO)}, "rtt": "10ms"}, {"cc": "cubic", "rtt": "10ms"}],
        workload=[{"cc": {"plugin": str(RENO)}, "rtt": "20ms", "size": {"dist": "fixed", "size": "10KB"}, "rate": "5/s"}],
    )
    module = plugin_cc(s.flows[0].cc)
    assert module is not None and plugin_cc(s.flows[1].cc) is None
    classes = s.engine_config()["classes"]
    assert classes[0]["cc"] == classes[2]["cc"] == {"name": "plugin", "module": str(module.wasm)}
    assert classes[1]["cc"] == {"name": "cubic"}
    # The module and the source it was built from, in the cache under the key the scenario holds.
    assert module.wasm.parent == plugin.cache_dir() / "cc" / module.sha256
    assert module.wasm.read_bytes()[:4] == b"\0asm" and module.wasm.name == "reno.wasm"
    assert module.source.read_bytes() == RENO.read_bytes()
    # ... and the engine reads what it declares there.
    assert engine.cc_plugin_info(str(module.wasm)) == {
        "name": "aqmlab_reno",
        "flags": 0,
        "ops": ["ssthresh", "cong_avoid", "undo_cwnd"],
        "ecn": "classic",
        "tunables": [],
    }
    assert s.class_names() == ["aqmlab_reno-10ms", "cubic-10ms", "aqmlab_reno-20ms-arrivals"]
    assert cc_label(s.workload[0].cc) == "aqmlab_reno"


# ------------------------------------------------------------------------------------------
# The file's content names it; the cache is keyed by content
# ------------------------------------------------------------------------------------------


def _hash_of(directory: Path, source: str, name: str = "my_cc.bpf.c") -> str:
    _write(directory / name, source)
    return load_scenario(_scenario_file(directory, f'{{ plugin = "{name}" }}')).hash()


def test_the_files_content_is_in_the_scenario_hash_its_place_is_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = RENO.read_text(encoding="utf-8")
    here = _hash_of(tmp_path / "a", source)
    # Moved and renamed: the same scenario, built afresh too (its debug information names no
    # path), from another working directory.
    assert _hash_of(tmp_path / "b" / "deeper", source, "other.bpf.c") == here
    monkeypatch.setenv(plugin.CACHE_ENV, str(tmp_path / "fresh-cache"))
    monkeypatch.chdir(tmp_path / "b")
    assert _hash_of(tmp_path / "e", source, "renamed.bpf.c") == here
    # The CC's rule changed: another scenario.
    edited = source.replace("return tcp_reno_ssthresh(sk);", "return tcp_reno_ssthresh(sk) + 1;")
    assert edited != source and _hash_of(tmp_path / "c", edited) != here
    # Code the simulator's module does not hold (the kernel's side only) is the source's, which
    # the emulator builds: another scenario too.
    kernel_only = source + "\n#ifndef __wasm32__\nint aqmlab_kernel_only;\n#endif\n"
    assert _hash_of(tmp_path / "d", kernel_only) != here
    assert plugin.resolve_cc(str(tmp_path / "d" / "my_cc.bpf.c")).wasm.read_bytes() == plugin.resolve_cc(str(tmp_path / "a" / "my_cc.bpf.c")).wasm.read_bytes()


def test_the_canonical_form_holds_the_hash_and_reads_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(RENO, tmp_path / "reno.bpf.c")
    s = load_scenario(_scenario_file(tmp_path, '{ plugin = "reno.bpf.c" }'))
    module = plugin.resolve_cc(str(tmp_path / "reno.bpf.c"))
    canonical = s.canonical()
    assert canonical["flows"][0]["cc"] == {"plugin": module.ref} and re.fullmatch(r"sha256:[0-9a-f]{64}", module.ref)
    assert str(tmp_path) not in s.canonical_json()
    # Dumped and loaded (a sweep's worker, a report's TOML): the same scenario.
    again = Scenario.model_validate(json.loads(s.canonical_json()))
    assert again.hash() == s.hash() and again.engine_config() == s.engine_config()
    # Written as TOML, as a scenario file (the table form is TOML's too).
    text = SCENARIO.replace("{aqm}", '{ kind = "taildrop" }').replace("{cc}", f'{{ plugin = "{module.ref}" }}')
    assert parse_scenario(text, default_name="s", base_dir=tmp_path / "elsewhere").hash() == s.hash()
    # A machine whose cache lacks it says so, and what to do.
    monkeypatch.setenv(plugin.CACHE_ENV, str(tmp_path / "empty"))
    with pytest.raises(ValidationError, match=r"no such congestion control in the plugin cache .*name its C file instead"):
        Scenario.model_validate(canonical)


def test_a_file_is_compiled_once_per_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    compile_cc = engine.compile_cc_plugin
    monkeypatch.setattr(engine, "compile_cc_plugin", lambda *a: calls.append(a[0]) or compile_cc(*a))
    shutil.copy(RENO, tmp_path / "reno.bpf.c")
    first = load_scenario(_scenario_file(tmp_path, '{ plugin = "reno.bpf.c" }'))
    assert calls == [str(tmp_path / "reno.bpf.c")]
    wasm = plugin_cc(first.flows[0].cc)
    assert wasm is not None
    mtime = wasm.wasm.stat().st_mtime_ns
    # Again, and a copy elsewhere (not this process's resolution of that path): from the cache.
    load_scenario(tmp_path / "s.toml")
    shutil.copy(RENO, _write(tmp_path / "copy" / "x", "").parent / "reno.bpf.c")
    second = load_scenario(_scenario_file(tmp_path / "copy", '{ plugin = "reno.bpf.c" }'))
    assert calls == [str(tmp_path / "reno.bpf.c")] and second.hash() == first.hash()
    # Another process, the same cache: no compiler run (none is on its PATH: one would fail).
    env = dict(os.environ, PATH=str(tmp_path / "no-compiler-here"))
    r = subprocess.run([sys.executable, "-m", "aqmlab", "validate", "s.toml"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"(hash {first.hash()})" in r.stdout
    assert wasm.wasm.stat().st_mtime_ns == mtime
    # Whereas a file the cache has not seen needs the compiler, and says so.
    _write(tmp_path / "new" / "reno.bpf.c", RENO.read_text(encoding="utf-8") + "/* new */\n")
    _scenario_file(tmp_path / "new", '{ plugin = "reno.bpf.c" }')
    r = subprocess.run([sys.executable, "-m", "aqmlab", "validate", "s.toml"], capture_output=True, text=True, cwd=tmp_path / "new", env=env, timeout=300)
    assert r.returncode == 2 and "no C compiler for plugins" in r.stderr, r.stderr


# ------------------------------------------------------------------------------------------
# ECN follows the CC's flags, as for the built-ins
# ------------------------------------------------------------------------------------------


def test_a_cc_that_needs_ecn_gets_it_without_ecn_true(tmp_path: Path) -> None:
    _write(tmp_path / "classic.bpf.c", reno_with(name="classic"))
    _write(tmp_path / "needs_ecn.bpf.c", reno_with(flags="(1U << 1)", name="needs_ecn"))  # TCP_CONG_NEEDS_ECN
    assert plugin.resolve_cc(str(tmp_path / "needs_ecn.bpf.c")).info["ecn"] == "dctcp"
    step = '{ kind = "step", threshold = "20pkt" }'
    results = {}
    for name in ("classic", "needs_ecn"):
        path = _scenario_file(tmp_path / name, f'{{ plugin = "../{name}.bpf.c" }}', aqm=step)
        # A buffer deep enough that STEP's threshold, not the buffer, is what the flows meet.
        path.write_text(path.read_text(encoding="utf-8").replace('buffer = "40pkt"', 'buffer = "400pkt"'), encoding="utf-8")
        results[name] = aqmlab.run(load_scenario(path)).summary["metrics"]
    # ecn is false in both files: the classic CC's packets are Not-ECT, so STEP drops them; the
    # one with TCP_CONG_NEEDS_ECN negotiates ECN as dctcp does, so STEP marks it instead.
    assert results["classic"]["mark_ratio"] == 0 and results["classic"]["drop_ratio"] > 0.001
    assert results["needs_ecn"]["mark_ratio"] > 0.001 and results["needs_ecn"]["drop_ratio"] < results["classic"]["drop_ratio"] / 10


# ------------------------------------------------------------------------------------------
# Bad input: one line naming the file, exit status 2, nothing written
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("files", "cc", "extra", "expected"),
    [
        ({}, '{ plugin = "nope.bpf.c" }', "", "s.toml:10: flows[0].cc.plugin: cannot read {dir}/nope.bpf.c (No such file or directory)"),
        (
            {"bad.bpf.c": HEADERS + "int x = y;\nint z = w;\n"},
            '{ plugin = "bad.bpf.c" }',
            "",
            "s.toml:10: flows[0].cc.plugin: bad.bpf.c does not compile: bad.bpf.c:6:9: error: use of undeclared identifier 'y' (and 1 more)",
        ),
        (
            {"w.bpf.c": reno_with(in_ssthresh="((struct tcp_sock *)sk)->srtt_us = 1;")},
            '{ plugin = "w.bpf.c" }',
            "",
            "s.toml:10: flows[0].cc.plugin: w.bpf.c does not compile: w.bpf.c:14:35: error: cannot assign to non-static data member 'srtt_us' with const-qualified type",
        ),
        (
            {"k.bpf.c": reno_with(extern="extern void cubictcp_init(struct sock *sk) __ksym;", in_ssthresh="cubictcp_init(sk);")},
            '{ plugin = "k.bpf.c" }',
            "",
            "s.toml:10: flows[0].cc.plugin: k.bpf.c does not link: cubictcp_init is not a helper or kernel function the simulator provides",
        ),
        (
            {"none.bpf.c": HEADERS + 'SEC("struct_ops/f")\n__u32 BPF_PROG(f, struct sock *sk) { return 2; }\n'},
            '{ plugin = "none.bpf.c" }',
            "",
            "s.toml:10: flows[0].cc.plugin: plugin none.wasm refused: has no struct_ops",
        ),
        (
            {"reno.bpf.c": RENO.read_text(encoding="utf-8")},
            '{ plugin = "reno.bpf.c" }',
            "cc_params = { beta = 0.7 }\n",
            "s.toml:18: flows[1].cc_params.beta: unknown tunable of aqmlab_reno (it declares: none (no const volatile global that it reads))",
        ),
        (
            {"dctcp.bpf.c": DCTCP.read_text(encoding="utf-8")},
            '{ plugin = "dctcp.bpf.c" }',
            "cc_params = { dctcp_shift_g = -1 }\n",
            "s.toml:18: flows[1].cc_params.dctcp_shift_g: -1 does not fit dctcp_shift_g's type unsigned int (0..4294967295)",
        ),
        (
            {"dctcp.bpf.c": DCTCP.read_text(encoding="utf-8")},
            '{ plugin = "dctcp.bpf.c" }',
            "cc_params = { dctcp_shift_g = 0.5 }\n",
            "s.toml:18: flows[1].cc_params.dctcp_shift_g: 0.5: dctcp_shift_g is a unsigned int, set with an integer",
        ),
        (
            {"dctcp.bpf.c": DCTCP.read_text(encoding="utf-8")},
            '{ plugin = "dctcp.bpf.c" }',
            "cc_params = { dctcp_shift_g = true }\n",
            "s.toml:18: flows[1].cc_params.dctcp_shift_g: True: dctcp_shift_g is a unsigned int, set with an integer",
        ),
        ({}, '{ plugin = "reno.wasm" }', "", "s.toml:10: flows[0].cc.plugin: 'reno.wasm': a CC plugin is its struct_ops BPF C file (.bpf.c)"),
        ({}, '{ plugn = "reno.bpf.c" }', "", "s.toml:10: flows[0].cc.plugn: unknown key (did you mean 'plugin'?)"),
    ],
    ids=[
        "missing",
        "c-error",
        "const-write",
        "unknown-kfunc",
        "no-struct-ops",
        "no-tunables",
        "tunable-range",
        "tunable-float",
        "tunable-bool",
        "prebuilt-module",
        "misspelt-key",
    ],
)
def test_a_bad_cc_file_is_one_line_naming_it_exit_2_nothing_written(
    files: dict[str, str], cc: str, extra: str, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, text in files.items():
        _write(tmp_path / name, text)
    _scenario_file(tmp_path, cc, extra=extra)
    code, _, stderr = _cli(["run", "s.toml", "-o", "out"], tmp_path, monkeypatch)
    assert code == 2, stderr
    assert stderr.startswith("error: " + expected.format(dir=tmp_path)), stderr
    assert len(stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
    # A file that did not make a CC leaves nothing in the cache.
    if "cc_params" not in extra:
        assert not list(plugin.cache_dir().glob("cc/*/*"))


# ------------------------------------------------------------------------------------------
# Tunables: a CC's const volatile globals, set per class with cc_params
# ------------------------------------------------------------------------------------------


def test_plugin_build_lists_the_tunables_with_their_initializers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(DCTCP, tmp_path / "dctcp.bpf.c")
    code, stdout, stderr = _cli(["plugin", "build", "dctcp.bpf.c"], tmp_path, monkeypatch)
    assert code == 0, stderr
    # tcp_dctcp.c's module parameters and their defaults: dctcp_shift_g = 4, dctcp_alpha_on_init
    # = DCTCP_MAX_ALPHA (1024).
    assert "tunables (cc_params): dctcp_shift_g = 4 (unsigned int), dctcp_alpha_on_init = 1024 (unsigned int)" in " ".join(stdout.split())
    code, stdout, stderr = _cli(["plugin", "build", str(RENO), "-o", "r.wasm"], tmp_path, monkeypatch)
    assert code == 0 and "tunables (cc_params): none" in stdout, stderr


def test_the_dctcp_ports_tunables_are_the_builtins_cc_params_per_class(tmp_path: Path) -> None:
    def run(cc: object, params: tuple[dict[str, Any], dict[str, Any]]) -> aqmlab.RunResult:
        s = Scenario(
            duration="2s",
            warmup="0.5s",
            seed=3,
            bottleneck={"rate": "100Mbps", "buffer": "200pkt", "aqm": {"kind": "step", "threshold": "20pkt"}},
            flows=[
                {"cc": cc, "count": 2, "rtt": "4ms", "name": "short", "cc_params": params[0]},
                {"cc": cc, "count": 1, "rtt": "12ms", "name": "long", "cc_params": params[1]},
            ],
        )
        return aqmlab.run(s)

    mine = run({"plugin": str(DCTCP)}, ({"dctcp_shift_g": 2, "dctcp_alpha_on_init": 512}, {"dctcp_shift_g": 7}))
    theirs = run("dctcp", ({"shift_g": 2, "alpha_on_init": 512}, {"shift_g": 7}))
    assert mine.summary["metrics"] == theirs.summary["metrics"]
    for table in mine.arrow:
        assert _without_cc(mine.arrow[table]).equals(_without_cc(theirs.arrow[table])), table
    # The values took effect, each in its own class: the defaults mark otherwise.
    defaults = run({"plugin": str(DCTCP)}, ({}, {}))
    assert defaults.arrow["flows"].column("marked_bytes") != mine.arrow["flows"].column("marked_bytes")


def test_the_delay_examples_alpha_and_beta_set_the_queue_it_keeps(tmp_path: Path) -> None:
    def queue_ms(params: dict[str, Any]) -> float:
        s = Scenario(
            duration="4s",
            warmup="2s",
            seed=2,
            bottleneck={"rate": "20Mbps", "buffer": "400pkt"},
            flows=[{"cc": {"plugin": str(DELAY)}, "rtt": "20ms", "cc_params": params}],
        )
        return float(aqmlab.run(s).summary["metrics"]["sojourn_ms"]["mean"])

    # Vegas keeps between alpha and beta segments queued (tcp_vegas.c); one flow (its base RTT
    # is the path's) at 20 Mbit/s, 0.6 ms a 1500-byte packet: 2-4 by default, 20-40 tuned.
    pkt_ms = 1500 * 8 / 20e6 * 1e3
    default, tuned = queue_ms({}), queue_ms({"alpha": 20, "beta": 40})
    assert 2 * pkt_ms <= default <= 4 * pkt_ms, default
    assert 20 * pkt_ms <= tuned <= 40 * pkt_ms, tuned


def test_a_write_the_kernel_forbids_names_the_field(tmp_path: Path) -> None:
    _write(tmp_path / "w.bpf.c", reno_with(in_ssthresh="((struct tcp_sock *)sk)->srtt_us = 1;"))
    with pytest.raises(ValueError, match=r"w\.bpf\.c does not compile: .*srtt_us.*const"):
        plugin.resolve_cc(str(tmp_path / "w.bpf.c"))


# ------------------------------------------------------------------------------------------
# The CLI: plugin build, list ccs --plugin, validate
# ------------------------------------------------------------------------------------------


def test_plugin_build_writes_the_module_and_prints_its_ops_flags_and_ecn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(RENO, tmp_path / "reno.bpf.c")
    code, stdout, stderr = _cli(["plugin", "build", "reno.bpf.c"], tmp_path, monkeypatch)
    assert code == 0, stderr
    wasm = (tmp_path / "reno.wasm").read_bytes()
    assert wasm[:4] == b"\0asm" and wasm == plugin.resolve_cc(str(tmp_path / "reno.bpf.c")).wasm.read_bytes()
    text = " ".join(stdout.split())
    assert "reno.bpf.c: congestion control aqmlab_reno" in text
    assert "ops: ssthresh, cong_avoid, undo_cwnd (not called: undo is not modelled, for any CC)" in text
    assert "flags: 0; ECN: classic" in text
    # What it prints as a scenario's cc reads back as one.
    line = next(ln for ln in stdout.splitlines() if ln.startswith("in a scenario: "))
    cc = tomllib.loads(line.removeprefix("in a scenario: "))["cc"]
    assert cc == {"plugin": "reno.bpf.c"}
    # A file with another name is a CC by its struct_ops; its flags are named.
    _write(tmp_path / "ecn_cc.c", reno_with(flags="(1U << 1)"))
    code, stdout, stderr = _cli(["plugin", "build", "ecn_cc.c", "-o", "ecn.wasm"], tmp_path, monkeypatch)
    assert code == 0, stderr
    assert (tmp_path / "ecn.wasm").read_bytes()[:4] == b"\0asm"
    assert "flags: 0x2 (TCP_CONG_NEEDS_ECN); ECN: dctcp" in " ".join(stdout.split())


def test_plugin_build_of_a_bad_cc_exits_2_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path / "bad.bpf.c", HEADERS + "int x = y;\n")
    code, _, stderr = _cli(["plugin", "build", "bad.bpf.c"], tmp_path, monkeypatch)
    assert code == 2 and stderr.strip() == "error: bad.bpf.c does not compile: bad.bpf.c:6:9: error: use of undeclared identifier 'y'"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.bpf.c"]
    # Its own source as the output: refused, the source untouched.
    shutil.copy(RENO, tmp_path / "reno.bpf.c")
    code, _, stderr = _cli(["plugin", "build", "reno.bpf.c", "-o", "reno.bpf.c"], tmp_path, monkeypatch)
    assert code == 2 and "would overwrite its own source" in stderr
    assert (tmp_path / "reno.bpf.c").read_bytes() == RENO.read_bytes()


def test_list_ccs_describes_a_cc_file_beside_the_builtins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(RENO, tmp_path / "reno.bpf.c")
    env = dict(os.environ, COLUMNS="400")
    r = subprocess.run(
        [sys.executable, "-m", "aqmlab", "list", "ccs", "--plugin", "reno.bpf.c"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300
    )
    assert r.returncode == 0, r.stderr
    row = next(ln for ln in r.stdout.splitlines() if "aqmlab_reno" in ln)
    assert "plugin reno.bpf.c" in row and "ops: ssthresh, cong_avoid, undo_cwnd" in row and "ECN: classic" in row
    assert any(ln.startswith("│ cubic") for ln in r.stdout.splitlines())
    code, _, stderr = _cli(["list", "ccs", "--plugin", "missing.bpf.c"], tmp_path, monkeypatch)
    assert code == 2 and stderr.startswith("error: cannot read ") and "missing.bpf.c" in stderr


def test_validate_names_the_cc_by_its_struct_ops_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(RENO, tmp_path / "reno.bpf.c")
    _scenario_file(tmp_path, '{ plugin = "reno.bpf.c" }')
    code, stdout, stderr = _cli(["validate", "s.toml"], tmp_path, monkeypatch)
    assert code == 0, stderr
    assert "2×aqmlab_reno 10ms, 1×aqmlab_reno 40ms" in " ".join(stdout.split())


# ------------------------------------------------------------------------------------------
# Sweeps: a plugin CC as an axis value, its workers finding the module by its hash
# ------------------------------------------------------------------------------------------


def test_a_sweep_puts_a_plugin_cc_beside_a_builtin(tmp_path: Path) -> None:
    shutil.copy(RENO, _write(tmp_path / "ccs" / "x", "").parent / "reno.bpf.c")
    text = SCENARIO.replace('duration = "2s"', 'duration = "1s"').replace("{aqm}", '{ kind = "taildrop" }').replace("{cc}", '"cubic"')
    path = _write(tmp_path / "sweep.toml", text + '\n[sweep]\n"flows.0.cc" = ["reno", { plugin = "ccs/reno.bpf.c" }]\n')
    sw = load_sweep(path)
    runs = plan(sw)
    assert [r.params["flows.0.cc"] for r in runs] == ["reno", "reno.bpf.c"] and len({r.hash for r in runs}) == 2
    assert cc_label(runs[1].scenario.flows[0].cc) == "aqmlab_reno"
    # The sweep's workers get canonical scenarios and the sweep's plugin cache, whatever the
    # environment their server started with.
    res = run_sweep(sw, tmp_path / "out")
    assert (res.ran, res.failed) == (2, [])
    summaries = [json.loads((tmp_path / "out" / "runs" / r.hash / "summary.json").read_text(encoding="utf-8")) for r in runs]
    # The kernel's Reno functions are the built-in Reno: the same numbers, another name.
    assert [c["cc"] for c in summaries[1]["classes"]] == ["aqmlab_reno", "cubic"]
    assert summaries[0]["metrics"] == summaries[1]["metrics"]


# ------------------------------------------------------------------------------------------
# docs/plugins.md: the walk-through's files as written
# ------------------------------------------------------------------------------------------


def _cc_section() -> str:
    text = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    start = text.index("## Your own congestion control: one struct_ops BPF C file")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def test_the_docs_walk_through_builds_and_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    section = _cc_section()
    c = next(b for b in re.findall(r"```c\n(.*?)```", section, flags=re.S) if 'SEC(".struct_ops")' in b)
    toml = next(b for b in re.findall(r"```toml\n(.*?)```", section, flags=re.S) if "plugin =" in b)
    _write(tmp_path / "reno_beta70.bpf.c", c)
    _write(tmp_path / "beta70.toml", toml)
    code, stdout, stderr = _cli(["plugin", "build", "reno_beta70.bpf.c"], tmp_path, monkeypatch)
    assert code == 0 and "congestion control reno_beta70" in stdout, stderr
    s = load_scenario(tmp_path / "beta70.toml")
    res = aqmlab.run(s.model_copy(update={"duration": "5s", "warmup": "1s"}))
    share = {c["cc"]: c["goodput_bps"] for c in res.summary["classes"]}
    # Backing off to 70 % rather than 50 %, it takes more than half from Reno.
    assert share["reno_beta70"] > 1.2 * share["reno"], share
    # Its kernel twin builds too (the emulator's side), when the kernel's headers are here.
    vmlinux = ROOT / "target" / "bpf" / "vmlinux.h"
    if vmlinux.is_file() and shutil.which("clang"):
        r = subprocess.run(
            ["clang", "-target", "bpf", "-O2", "-g", "-Wall", "-I", str(vmlinux.parent), "-c", "reno_beta70.bpf.c", "-o", "k.o"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0, r.stderr


def test_the_delay_example_keeps_the_queue_short_where_reno_fills_it(tmp_path: Path) -> None:
    delay = ROOT / "examples" / "plugins" / "delay.bpf.c"
    module = plugin.resolve_cc(str(delay))
    assert module.source.read_bytes() == delay.read_bytes() and module.label == "aqmlab_delay"
    # The same file builds for the kernel (the emulator's side), when the kernel's headers are here.
    vmlinux = ROOT / "target" / "bpf" / "vmlinux.h"
    if vmlinux.is_file() and shutil.which("clang"):
        r = subprocess.run(
            ["clang", "-target", "bpf", "-O2", "-g", "-Wall", "-I", str(vmlinux.parent), "-c", str(delay), "-o", str(tmp_path / "d.o")],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0, r.stderr

    def run(cc: object) -> dict[str, Any]:
        s = Scenario(
            duration="4s",
            warmup="2s",
            seed=2,
            bottleneck={"rate": "20Mbps", "buffer": "200pkt"},
            flows=[{"cc": cc, "count": 2, "rtt": "20ms", "start": "uniform(0s, 200ms)"}],
        )
        metrics: dict[str, Any] = aqmlab.run(s).summary["metrics"]
        return metrics

    mine, reno = run({"plugin": str(delay)}), run("reno")
    # Vegas backs off to a few packets queued per flow (it is still getting there from its
    # slow-start overshoot at 4 s); Reno fills the 200-packet buffer (120 ms) again and again.
    assert mine["sojourn_ms"]["mean"] < reno["sojourn_ms"]["mean"] / 2, (mine["sojourn_ms"], reno["sojourn_ms"])
    assert mine["utilization"] > 0.95 and mine["drop_ratio"] == 0


def test_plugin_build_writes_the_kernels_object_beside_the_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from aqmlab.emu import bpfcc

    shutil.copy(RENO, tmp_path / "reno.bpf.c")
    why = bpfcc.kernel_build_missing()
    code, stdout, stderr = _cli(["plugin", "build", "reno.bpf.c"], tmp_path, monkeypatch)
    assert code == 0, stderr
    if why is not None:
        pytest.fail(f"the kernel's side builds with what `make build` sets up: {why}")
    # An eBPF ELF object (EM_BPF = 247, include/uapi/linux/elf-em.h) with the struct_ops section.
    obj = (tmp_path / "reno.bpf.o").read_bytes()
    assert obj[:4] == b"\x7fELF" and int.from_bytes(obj[18:20], "little") == 247 and b".struct_ops" in obj
    assert f"kernel object: {Path('reno.bpf.o')}" in stdout
    # Without the kernel's headers only the module is written, and the output says why.
    monkeypatch.setenv("AQMLAB_BPF_DIR", str(tmp_path / "unbuilt"))
    code, stdout, stderr = _cli(["plugin", "build", "reno.bpf.c", "-o", "other.wasm"], tmp_path, monkeypatch)
    assert code == 0 and (tmp_path / "other.wasm").is_file() and not (tmp_path / "other.bpf.o").exists(), stderr
    assert "kernel object: not built (" in " ".join(stdout.split()) and "make build" in stdout
    # A file that builds for the simulator but not for the kernel: refused, nothing written.
    monkeypatch.delenv("AQMLAB_BPF_DIR")
    src = RENO.read_text().replace('#include "vmlinux.h"', '#include "vmlinux.h"\n#ifndef __wasm32__\n#error "no kernel side"\n#endif')
    _write(tmp_path / "half.bpf.c", src)
    code, _, stderr = _cli(["plugin", "build", "half.bpf.c"], tmp_path, monkeypatch)
    assert code == 2 and "no kernel side" in stderr
    assert not (tmp_path / "half.wasm").exists() and not (tmp_path / "half.bpf.o").exists()
