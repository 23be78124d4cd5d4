"""The package as a user installs it: the wheel `make build` leaves in target/wheels/ goes into
a fresh virtual environment (pip resolves its dependencies from the index, at the versions of
constraints.txt), and `aqmlab run` works there from a directory outside the source tree. The
base install has no Dask: `sweep --cluster` names the extra to install."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
#: Where `make build` puts the wheel (AQMLAB_WHEEL_DIR: another build's output).
WHEELS = Path(os.environ.get("AQMLAB_WHEEL_DIR", ROOT / "target" / "wheels"))


def test_the_wheel_installs_into_a_clean_venv_and_runs_a_scenario(tmp_path: Path) -> None:
    wheels = sorted(WHEELS.glob(f"aqmlab-{VERSION}-*.whl"))
    if not wheels:
        pytest.fail(f"no aqmlab-{VERSION} wheel in {WHEELS}: `make build` builds it")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py, aqmlab = venv / "bin" / "python", venv / "bin" / "aqmlab"
    # The wheel by its path (never a same-named package from the index); its dependencies
    # from the index, pinned by the constraints. --no-compile: pip does not byte-compile every
    # installed module (a user's install would); what the run imports is compiled as it loads.
    pip = subprocess.run(
        [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile", "-c", str(ROOT / "constraints.txt"), str(wheels[-1])],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]

    # Outside the source tree, with nothing of it on the path.
    work = tmp_path / "elsewhere"
    work.mkdir()
    shutil.copy(ROOT / "examples" / "dctcp-cubic-step.toml", work / "s.toml")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    where = subprocess.run([str(py), "-c", "import aqmlab; print(aqmlab.__file__)"], capture_output=True, text=True, cwd=work, env=env, timeout=60)
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout + where.stderr

    r = subprocess.run([str(aqmlab), "run", "s.toml", "-o", "out", "--quiet"], capture_output=True, text=True, cwd=work, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((work / "out" / "summary.json").read_text(encoding="utf-8"))
    assert summary["scenario"]["name"] == "dctcp-cubic-step-1g-5ms"
    assert summary["aqmlab_version"] == VERSION
    # Ten bulk flows keep a 1 Gbit/s link busy once started (their starts are within 1 s,
    # the window starts at 5 s).
    assert summary["metrics"]["utilization"] > 0.9
    # Every table is there and readable by the venv's own pyarrow: 10 flows, 5 + 5 per class.
    read = subprocess.run(
        [
            str(py),
            "-c",
            "import pyarrow.parquet as pq, json; t = {n: pq.read_table(f'out/{n}.parquet') for n in ('flows','classes','timeseries','queue','sojourn_hist','fct')}; print(json.dumps({n: v.num_rows for n, v in t.items()}))",
        ],
        capture_output=True,
        text=True,
        cwd=work,
        env=env,
        timeout=60,
    )
    rows = json.loads(read.stdout)
    assert rows["flows"] == 10 and rows["classes"] == 2, rows

    # The base install is lean: Dask is the [cluster] extra, and --cluster says so.
    (work / "sw.toml").write_text(
        (work / "s.toml").read_text(encoding="utf-8").replace('duration = "30s"', 'duration = "0.1s"').replace('warmup = "5s"', 'warmup = "0s"')
        + "\n[sweep]\nseed = [1, 2]\n"
    )
    r = subprocess.run(
        [str(aqmlab), "sweep", "sw.toml", "-o", "swout", "--cluster", "tcp://127.0.0.1:1"], capture_output=True, text=True, cwd=work, env=env, timeout=120
    )
    assert r.returncode == 2, r.stderr
    assert "pip install 'aqmlab[cluster]'" in r.stderr and not (work / "swout").exists(), r.stderr
