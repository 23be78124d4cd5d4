"""SIGINT and SIGTERM stop `aqmlab search` and `aqmlab atlas` cleanly: a real command is signalled
mid-run (once runs have landed in its store), then run again. Checked: the exit status (128 +
the signal), no traceback and no leaked semaphores reported, no process of the command left
alive, nothing written after the exit (workers that outlived it would go on storing runs), no
temporary file, the runs stored before the signal kept as they were, and, resumed, the same
store and results as an uninterrupted run of the same file in another directory.

Each command is stopped twice, then resumed: by SIGINT, then by SIGTERM. The search's SIGINT goes
to the whole process group, as a terminal's Ctrl-C does (the workers receive it too), its SIGTERM
to the command's process alone, as `kill` sends it (the workers do not); the atlas's the other
way round, its second stop in the refinement round."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from _search_cases import ATLAS, SEARCH, leftovers, stored
from typer.testing import CliRunner

from aqmlab.cli.main import app
from aqmlab.search.atlas import load_spec, run_atlas
from aqmlab.search.runner import load_search, run_search


def alive_in_group(pgid: int) -> list[str]:
    """Processes of the process group that have not ended (zombies have)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(text.split(")")[0] + ")")
    return out


def interrupt(cmd: list[str], out: Path, sig: signal.Signals, to_group: bool, ready=None) -> tuple[subprocess.CompletedProcess, dict[str, int]]:
    """Start `aqmlab <cmd>` in a session of its own, send `sig` once `ready(out)` (default: two
    runs stored), wait for it to end; return its result and the runs stored at its end."""
    ready = ready or (lambda d: len(stored(d)) >= 2)
    proc = subprocess.Popen([sys.executable, "-m", "aqmlab", *cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.time() + 120
    while not ready(out) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, f"the command ended before the signal: {proc.stderr.read() if proc.stderr else ''}"
    (os.killpg if to_group else os.kill)(proc.pid, sig)
    try:
        # Workers that outlived the command would hold its stdout and stderr open.
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.time() + 10
    while alive_in_group(proc.pid) and time.time() < deadline:
        time.sleep(0.05)  # the forkserver and the resource tracker see their parent gone
    assert not alive_in_group(proc.pid), alive_in_group(proc.pid)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr), stored(out)


def check_stopped_cleanly(r: subprocess.CompletedProcess, sig: signal.Signals, out: Path, before: dict[str, int], at_exit: dict[str, int], total: int) -> None:
    """`before`: the runs stored when the command started; `at_exit`: when it ended."""
    assert r.returncode == 128 + sig, (r.returncode, r.stderr)
    assert "interrupted:" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert "leaked semaphore" not in r.stderr and "resource_tracker" not in r.stderr, r.stderr
    assert len(before) + 2 <= len(at_exit) < total, (len(before), len(at_exit), total)
    assert all(at_exit[h] == ino for h, ino in before.items()), "the runs stored before were kept, not redone"
    time.sleep(0.3)
    assert stored(out) == at_exit, "nothing is written after the command has ended"
    assert not leftovers(out), leftovers(out)


@pytest.fixture(scope="module")
def search_ref(tmp_path_factory):
    d = tmp_path_factory.mktemp("search-ref")
    (d / "s.toml").write_text(SEARCH)
    res = run_search(load_search(d / "s.toml"), d / "out", jobs=2)
    assert res.simulated == 20
    return d / "out"


def test_a_search_stopped_by_sigint_then_by_sigterm_resumes_to_the_uninterrupted_result(tmp_path, search_ref):
    f = tmp_path / "s.toml"
    f.write_text(SEARCH)
    out = tmp_path / "out"
    cmd = ["search", str(f), "-o", str(out), "-j", "2", "-q", "--no-shrink"]
    first, at_first = interrupt(cmd, out, signal.SIGINT, to_group=True)
    check_stopped_cleanly(first, signal.SIGINT, out, {}, at_first, total=20)
    second, at_second = interrupt(cmd, out, signal.SIGTERM, to_group=False, ready=lambda d: len(stored(d)) >= len(at_first) + 2)
    check_stopped_cleanly(second, signal.SIGTERM, out, at_first, at_second, total=20)
    # The same command again (in this process: the same code path, without a second start-up).
    again = CliRunner().invoke(app, cmd)
    assert again.exit_code == 0, again.output
    final = stored(out)
    assert set(final) == set(stored(search_ref)), "the uninterrupted search's runs, each once"
    assert all(final[h] == ino for h, ino in at_second.items()), "the runs stored before were kept, not redone"
    got, want = pd.read_parquet(out / "trials.parquet"), pd.read_parquet(search_ref / "trials.parquet")
    assert list(got["point"]) == list(range(10))
    # The same points in the same order with the same values, hence the same worst point.
    pd.testing.assert_frame_equal(got, want)
    assert (out / "best.toml").read_text() == (search_ref / "best.toml").read_text()
    assert not leftovers(out)


@pytest.fixture(scope="module")
def atlas_ref(tmp_path_factory):
    d = tmp_path_factory.mktemp("atlas-ref")
    (d / "spec.toml").write_text(ATLAS)
    df = run_atlas(load_spec(d / "spec.toml"), d / "out", jobs=2)
    assert (df["depth"] == 1).any(), "the reference atlas refines (else its second stop would not be in a refinement)"
    return d / "out"


def test_an_atlas_stopped_by_sigint_then_by_sigterm_resumes_to_the_uninterrupted_atlas(tmp_path, atlas_ref):
    f = tmp_path / "spec.toml"
    f.write_text(ATLAS)
    out = tmp_path / "out"
    cmd = ["atlas", str(f), "-o", str(out), "-j", "2", "-q"]
    total = len(stored(atlas_ref))
    # In the first round (24 runs): no map yet.
    first, at_first = interrupt(cmd, out, signal.SIGINT, to_group=False)
    check_stopped_cleanly(first, signal.SIGINT, out, {}, at_first, total=total)
    assert len(at_first) < 24 and not (out / "atlas.parquet").exists()

    # In the refinement: the first round's map is written and refined cells' runs have landed.
    def in_refinement(d: Path) -> bool:
        return (d / "atlas.json").is_file() and len(stored(d)) >= 24 + 2

    second, at_second = interrupt(cmd, out, signal.SIGTERM, to_group=True, ready=in_refinement)
    check_stopped_cleanly(second, signal.SIGTERM, out, at_first, at_second, total=total)
    # The map of the round before stays whole: the 8 initial cells, every one evaluated.
    m = pd.read_parquet(out / "atlas.parquet")
    assert len(m) == 8 and (m["depth"] == 0).all() and m["jain"].notna().all()
    again = CliRunner().invoke(app, cmd)
    assert again.exit_code == 0, again.output
    final = stored(out)
    assert set(final) == set(stored(atlas_ref)), "the uninterrupted atlas's runs, each once"
    assert all(final[h] == ino for h, ino in at_second.items()), "the runs stored before were kept, not redone"
    pd.testing.assert_frame_equal(pd.read_parquet(out / "atlas.parquet"), pd.read_parquet(atlas_ref / "atlas.parquet"))
    assert sorted(p.name for p in (out / "cells").iterdir()) == sorted(p.name for p in (atlas_ref / "cells").iterdir())
    assert not leftovers(out)
