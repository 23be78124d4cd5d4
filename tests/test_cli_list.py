"""`aqmlab list`: every CC and discipline this build provides, with Linux's defaults."""

from __future__ import annotations

import os
import subprocess
import sys


def _list(what: str) -> str:
    env = dict(os.environ, COLUMNS="200")
    r = subprocess.run([sys.executable, "-m", "aqmlab", "list", what], capture_output=True, text=True, timeout=60, env=env)
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
