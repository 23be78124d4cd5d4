"""`aqmlab search` and `aqmlab atlas` on a real Dask cluster (a `dask scheduler` and two
`dask worker` processes on 127.0.0.1, as tests/test_dask.py starts them for sweeps): a search
whose client is killed mid-search and run again on the cluster asks the same points in the
same order and finds the same worst point as the search run locally; an atlas on the cluster
is the local atlas, run for run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from _dask import DASK, free_port, wait_port
from _search_cases import ATLAS, SEARCH, leftovers, stored

from aqmlab.search.atlas import load_spec, run_atlas
from aqmlab.search.runner import load_search, run_search

pytestmark = pytest.mark.skipif(DASK is None, reason="needs the dask command (make test installs distributed)")


@pytest.fixture(scope="module")
def cluster():
    """The scheduler's address, with two single-threaded workers connected."""
    assert DASK is not None
    port = free_port()
    env = dict(os.environ, DASK_DISTRIBUTED__WORKER__DAEMON="False")
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "start_new_session": True, "env": env}
    procs = [subprocess.Popen([DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"], **quiet)]
    try:
        wait_port(port)
        for _ in range(2):
            worker = [DASK, "worker", f"tcp://127.0.0.1:{port}", "--nworkers", "1", "--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1"]
            procs.append(subprocess.Popen(worker, **quiet))
        from distributed import Client

        with Client(f"tcp://127.0.0.1:{port}", timeout="30s") as c:
            c.wait_for_workers(2, timeout=60)
        yield f"tcp://127.0.0.1:{port}"
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def _aqmlab(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "aqmlab", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_search_whose_client_was_killed_resumes_on_the_cluster_as_the_local_search(tmp_path, cluster):
    # 8 points × 2 seeds: the design's five points in one round, then two rounds of TPE.
    f = tmp_path / "s.toml"
    f.write_text(SEARCH.replace("budget = 10", "budget = 8"))
    out = tmp_path / "cluster"
    cmd = [sys.executable, "-m", "aqmlab", "search", str(f), "-o", str(out), "--cluster", cluster, "-q", "--no-shrink"]
    client = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.time() + 120
    while len(stored(out)) < 2 and client.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    running = client.poll() is None
    os.killpg(client.pid, signal.SIGKILL)
    _, stderr = client.communicate()
    assert running, stderr
    before = stored(out)
    assert 2 <= len(before) < 16, len(before)

    again = _aqmlab("search", str(f), "-o", str(out), "--cluster", cluster, "-q", "--no-shrink")
    # The local search meanwhile, in this process.
    local = run_search(load_search(f), tmp_path / "local", jobs=2)
    assert local.simulated == 16 and len({p.round for p in local.points}) == 3
    _, stderr = again.communicate(timeout=300)
    assert again.returncode == 0, stderr
    got, want = pd.read_parquet(out / "trials.parquet"), pd.read_parquet(tmp_path / "local" / "trials.parquet")
    # The same points, in the same order (point ids, rounds, variables), with the same values.
    pd.testing.assert_frame_equal(got, want)
    assert (out / "best.toml").read_text() == (tmp_path / "local" / "best.toml").read_text()
    assert set(stored(out)) == set(stored(tmp_path / "local")), "the local search's runs, each once"
    assert not leftovers(out), leftovers(out)


def test_an_atlas_on_the_cluster_is_the_local_atlas_and_its_estimate_counts_the_cluster_s_workers(tmp_path, cluster):
    # The first round alone: refinement's rounds go through the same runner (the search above
    # has several rounds on the cluster).
    f = tmp_path / "spec.toml"
    f.write_text(ATLAS.replace("rounds = 1", "rounds = 0"))
    out = tmp_path / "cluster"
    r = _aqmlab("atlas", str(f), "-o", str(out), "--cluster", cluster)
    local = run_atlas(load_spec(f), tmp_path / "local", jobs=2)  # meanwhile, in this process
    _, stderr = r.communicate(timeout=300)
    assert r.returncode == 0, stderr
    # Two workers of one thread each were started above: the estimate is made for two.
    # 8 cells: each the pair's run and the two solo baselines (8 + 2 × 8 = 24 runs).
    assert "24 runs to simulate" in stderr and "on 2 workers on the cluster" in stderr, stderr
    pd.testing.assert_frame_equal(pd.read_parquet(out / "atlas.parquet"), local)
    assert set(stored(out)) == set(stored(tmp_path / "local"))
    assert sorted(p.name for p in (out / "cells").iterdir()) == sorted(p.name for p in (tmp_path / "local" / "cells").iterdir())
    assert not leftovers(out), leftovers(out)
    assert Path(out / "atlas.html").is_file()
