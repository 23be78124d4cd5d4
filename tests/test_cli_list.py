"""`aqmlab list`: every CC and discipline this build provides, with Linux's defaults."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import aqmlab


def _run_list(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "aqmlab", "list", *args], capture_output=True, text=True, timeout=60, env=env)


def _list(*args: str) -> str:
    r = _run_list(*args)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_list_ccs_shows_linux_defaults() -> None:
    out = _list("ccs")
    # tcp_cubic.c: beta 717 (0.7·1024), bic_scale 41; tcp_dctcp.c: dctcp_shift_g 4,
    # dctcp_alpha_on_init 1024 (net/ipv4/tcp_cubic.c and tcp_dctcp.c module parameters).
    assert "beta = 717" in out and "bic_scale = 41" in out and "hystart_low_window = 16" in out
    assert "shift_g = 4" in out and "alpha_on_init = 1024" in out
    assert "tcp_cubic.c" in out and "tcp_dctcp.c" in out


def test_list_aqms_covers_every_kind() -> None:
    from aqmlab import _native

    out = _list("aqms")
    for kind in _native.qdiscs():
        assert f"│ {kind}" in out, kind
    assert "sch_red.c" in out and "sch_choke.c" in out
    # One line per discipline, its options by name; their details are asked for by kind.
    assert "target, interval, limit, ecn, ce_threshold" in out and "5ms" not in out


def test_list_aqms_kind_shows_its_options_in_full() -> None:
    out = _list("aqms", "codel", "ppv")
    # RFC 8289 §4.4 and §4.3: TARGET 5 ms, INTERVAL 100 ms; sch_codel.c codel_init: limit 1000.
    assert re.search(r"│ target\s*│ delay-target\s*│ 5ms\s*│", out), out
    assert re.search(r"│ interval\s*│ time\s*│ 100ms\s*│", out) and re.search(r"│ limit\s*│ packets\s*│ 1000pkt\s*│", out)
    assert "│ codel" in out and "│ ppv" in out and "│ pie " not in out
    # PPV reads packet values: the marker's defaults follow (Nádas et al.: the marker's TVF).
    assert "[marker] tvf = equal" in out
    assert "[marker]" not in _list("aqms", "codel")


def test_list_aqms_refuses_an_unknown_kind() -> None:
    r = _run_list("aqms", "codle")
    assert r.returncode == 2 and r.stdout == ""
    assert "no discipline 'codle' (did you mean 'codel'?)" in r.stderr


def test_the_native_stub_declares_what_the_module_has() -> None:
    # python/aqmlab/_native.pyi is what type checkers see of the compiled module: every name
    # the module exports is declared there, with the same parameters, and nothing more.
    import ast
    import inspect
    from pathlib import Path

    import aqmlab._native as native

    stub = ast.parse((Path(aqmlab.__file__).parent / "_native.pyi").read_text())
    declared: dict[str, list[str] | None] = {}
    for node in stub.body:
        if isinstance(node, ast.FunctionDef):
            declared[node.name] = [a.arg for a in node.args.args + node.args.kwonlyargs]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            declared[node.target.id] = None
    exported = {n for n in dir(native) if not n.startswith("__")} | {"__version__"}
    assert set(declared) == exported
    for name, params in declared.items():
        if params is not None:
            assert list(inspect.signature(getattr(native, name)).parameters) == params, name
