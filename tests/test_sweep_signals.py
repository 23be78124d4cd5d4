"""SIGINT and SIGTERM stop `aqmlab sweep` cleanly, as they stop `aqmlab search` and `aqmlab atlas`
(tests/test_search_signals.py, whose helpers these tests use): a real sweep is signalled once
runs have landed in its directory, then run again. Checked: the exit status (128 + the signal),
"interrupted:" and no traceback or leaked semaphores on stderr, no process of the command left
alive (workers that outlived it would go on storing runs), nothing written after the exit, no
temporary directory, the runs stored before kept as they were; resumed, the runs of an
uninterrupted sweep of the same file in another directory, each once, with the same metrics.

The sweep is stopped three times, then resumed: by SIGTERM to its process alone, as `kill` sends
it (its workers used to run on as orphans); by SIGTERM to its process group, as a batch
scheduler may send it (the workers die with it; the pool's semaphores used to be reported
leaked); by SIGINT to its process alone (it used to run every run already handed to the pool
before exiting). Then, in this process: a signal in a `deferred` block (the sweep's wait for its
workers) is raised only where the block checks, and Ctrl-C in a program calling `run_sweep`
stops its workers at once too."""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pandas as pd
import pytest
from _search_cases import leftovers, stored
from test_search_signals import check_stopped_cleanly, interrupt
from typer.testing import CliRunner

import aqmlab
from aqmlab.cli.main import app
from aqmlab.sweep.interrupt import deferred, signals_interrupt

# 12 runs of 1 s simulated, 0.1–0.2 s each: the sweep is still running when its first runs land.
SWEEP = """\
name = "signals"
duration = "1s"
warmup = "0s"
seed = 1

[bottleneck]
rate = "1Gbps"
buffer = "${f}bdp"
aqm = { kind = "taildrop" }

[[flows]]
cc = "cubic"
count = "${N}"
rtt = "10ms"

[sweep]
N = [2, 4, 8]
f = [0.5, 1, 2, 4]
"""
TOTAL = 12


def _metrics(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=["wall_time_s"]).sort_values(["run", "class"]).reset_index(drop=True)


@pytest.fixture(scope="module")
def sweep_ref(tmp_path_factory):
    d = tmp_path_factory.mktemp("sweep-ref")
    (d / "s.toml").write_text(SWEEP)
    res = aqmlab.run_sweep(aqmlab.load_sweep(d / "s.toml"), d / "out", jobs=2)
    assert res.ran == TOTAL and not res.failed
    return d / "out"


def test_a_sweep_stopped_by_sigterm_and_sigint_resumes_to_the_uninterrupted_sweep(tmp_path: Path, sweep_ref: Path) -> None:
    f = tmp_path / "s.toml"
    f.write_text(SWEEP)
    out = tmp_path / "out"
    cmd = ["sweep", str(f), "-o", str(out), "-j", "2", "-q"]
    at: dict[str, int] = {}
    for sig, to_group in ((signal.SIGTERM, False), (signal.SIGTERM, True), (signal.SIGINT, False)):
        before = at
        r, at = interrupt(cmd, out, sig, to_group, ready=lambda d, n=len(before): len(stored(d)) >= n + 2)
        check_stopped_cleanly(r, sig, out, before, at, total=TOTAL)
        assert "finished runs are kept" in r.stderr, r.stderr
    # The same command again (in this process: the same code path, without a second start-up).
    again = CliRunner().invoke(app, cmd[:-1])
    assert again.exit_code == 0, again.output
    assert f"{TOTAL} runs — {TOTAL - len(at)} ran, {len(at)} already done, 0 failed" in again.output, again.output
    final = stored(out)
    assert set(final) == set(stored(sweep_ref)), "the uninterrupted sweep's runs, each once"
    assert all(final[h] == ino for h, ino in at.items()), "the runs stored before were kept, not redone"
    pd.testing.assert_frame_equal(_metrics(aqmlab.load(out)), _metrics(aqmlab.load(sweep_ref)))
    assert not leftovers(out), leftovers(out)


def test_a_signal_in_a_deferred_block_is_raised_where_the_block_checks_or_when_it_ends() -> None:
    woken: list[int] = []
    with pytest.raises(KeyboardInterrupt), signals_interrupt() as got:
        with deferred(lambda: woken.append(1)) as d:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)  # the handler runs here: it takes the signal, it does not raise
            assert woken == [1] and got == [signal.SIGTERM]
            d.check()
    with pytest.raises(KeyboardInterrupt), signals_interrupt() as got:
        with deferred(lambda: None):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            woken.append(2)
    assert woken == [1, 2] and got == [signal.SIGINT]


def test_a_failure_after_a_taken_signal_is_the_interruption_and_without_one_stays_itself() -> None:
    # A signal sent to the process group ends the pool's workers too: the block's next submit
    # raises BrokenProcessPool (a RuntimeError) before the block has checked for the signal.
    with pytest.raises(KeyboardInterrupt), signals_interrupt() as got:
        with deferred(lambda: None):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
            raise BrokenProcessPool("A child process terminated abruptly")
    assert got == [signal.SIGTERM]
    with pytest.raises(BrokenProcessPool), signals_interrupt() as got:
        with deferred(lambda: None):
            raise BrokenProcessPool("A child process terminated abruptly")
    assert got == []


def test_ctrl_c_in_a_program_calling_run_sweep_stops_its_workers_at_once(tmp_path: Path, sweep_ref: Path) -> None:
    (tmp_path / "s.toml").write_text(SWEEP)
    out = tmp_path / "out"

    def on_progress(done: int, failed: int, todo: int, total: int) -> None:
        if done == 2:
            os.kill(os.getpid(), signal.SIGINT)

    old = signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's own, whatever the test runner set
    try:
        with pytest.raises(KeyboardInterrupt):
            aqmlab.run_sweep(aqmlab.load_sweep(tmp_path / "s.toml"), out, jobs=2, on_progress=on_progress)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, old)
    at_exit = stored(out)
    assert 2 <= len(at_exit) < TOTAL, len(at_exit)
    time.sleep(0.3)
    assert stored(out) == at_exit, "the workers are gone: nothing is written after run_sweep has returned"
    assert not leftovers(out), leftovers(out)
