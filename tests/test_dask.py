"""Scale-out on Dask: a real `dask scheduler` and two `dask worker` processes on 127.0.0.1; one
worker is killed mid-sweep; the results must equal a local run's, every run exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
from _dask import DASK, free_port, wait_port

import aqmlab
from aqmlab.sweep.spec import parse_sweep

SWEEP = """\
name = "dask-test"
duration = "4s"
warmup = "0s"
seed = 3

[bottleneck]
rate = "50Mbps"
buffer = "${f}bdp"

[[flows]]
cc = "cubic"
count = "${N}"
rtt = "20ms"

[sweep]
N = [1, 2, 3, 4]
f = [0.5, 1, 2]
"""


def _metrics(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=["wall_time_s"]).sort_values(["run", "class"]).reset_index(drop=True)


@pytest.mark.skipif(DASK is None, reason="needs the dask command (make test installs distributed)")
def test_a_sweep_on_a_real_dask_cluster_survives_a_dead_worker_and_equals_a_local_run(tmp_path):
    local = tmp_path / "local"
    aqmlab.run_sweep(parse_sweep(SWEEP), local, jobs=2)

    port = free_port()
    env = dict(os.environ, DASK_DISTRIBUTED__WORKER__DAEMON="False")
    procs: list[subprocess.Popen] = []
    try:
        procs.append(
            subprocess.Popen(
                [DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                env=env,
            )
        )
        wait_port(port)
        for _ in range(2):
            procs.append(
                subprocess.Popen(
                    [DASK, "worker", f"tcp://127.0.0.1:{port}", "--nworkers", "1", "--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                    env=env,
                )
            )
        from distributed import Client

        with Client(f"tcp://127.0.0.1:{port}", timeout="30s") as c:
            c.wait_for_workers(2, timeout=60)

        f = tmp_path / "s.toml"
        f.write_text(SWEEP)
        out = tmp_path / "cluster"
        sweep = subprocess.Popen(
            [sys.executable, "-m", "aqmlab", "sweep", str(f), "-o", str(out), "--cluster", f"tcp://127.0.0.1:{port}", "-q"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Kill one worker (its whole process group) once the first runs have landed.
        deadline = time.time() + 120
        while time.time() < deadline:
            runs = [d for d in (out / "runs").glob("*") if not d.name.startswith(".")] if (out / "runs").is_dir() else []
            if len(runs) >= 2:
                break
            time.sleep(0.05)
        os.killpg(procs[1].pid, signal.SIGKILL)
        stdout, stderr = sweep.communicate(timeout=300)
        assert sweep.returncode == 0, stderr
        df = aqmlab.load(out)
        ref = aqmlab.load(local)
        assert sorted(df["run"]) == sorted(ref["run"]), "every run exactly once"
        assert df["run"].nunique() == 12
        pd.testing.assert_frame_equal(_metrics(df), _metrics(ref))
        assert not list((out / "runs").glob(".*")), "no half-written run left behind"
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
