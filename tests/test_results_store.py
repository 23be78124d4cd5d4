"""The results store: atomic writes, a faithful round trip."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import aqmlab
from aqmlab.store import result as _results

SMALL = aqmlab.Scenario(name="small", duration="1s", bottleneck={"rate": "10Mbps", "buffer": "1bdp"}, flows=[{"cc": "reno", "rtt": "20ms", "count": 2}])


def test_round_trip(tmp_path: Path) -> None:
    res = aqmlab.run(SMALL)
    d = res.save(tmp_path / "r")
    assert sorted(p.name for p in d.iterdir()) == sorted(["summary.json"] + [f"{t}.parquet" for t in _results.TABLES])
    back = aqmlab.load_result(d)
    assert back.summary == json.loads(json.dumps(res.summary))
    for t in _results.TABLES:
        assert back.tables[t].equals(res.tables[t]), t
    # Parquet files are readable by pyarrow directly (what DuckDB/polars use).
    assert pq.read_table(d / "flows.parquet").num_rows == 2


def test_summary_shape_is_stable(tmp_path: Path) -> None:
    s = aqmlab.run(SMALL).summary
    assert {"aqmlab_version", "backend", "seed", "wall_time_s", "scenario", "metrics", "classes"} <= set(s)
    assert s["backend"] == "sim"
    # The version is pyproject.toml's, the one place it is written.
    with open(Path(__file__).parents[1] / "pyproject.toml", "rb") as f:
        assert s["aqmlab_version"] == tomllib.load(f)["project"]["version"]
    assert {"utilization", "jain", "goodput_bps", "sojourn_ms", "mark_ratio", "drop_ratio"} <= set(s["metrics"])
    assert set(s["metrics"]["sojourn_ms"]) == {"mean", "p50", "p99", "max"}
    assert {"name", "cc", "rtt_ms", "count", "goodput_bps", "rel_throughput", "jain", "mark_ratio", "drop_ratio"} <= set(s["classes"][0])


def test_a_crash_mid_write_leaves_no_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    res = aqmlab.run(SMALL)
    real = pq.write_table
    calls = {"n": 0}

    def failing(table, where, *a, **k):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError("disk full")
        return real(table, where, *a, **k)

    monkeypatch.setattr(_results.pq, "write_table", failing)
    with pytest.raises(OSError):
        res.save(tmp_path / "r")
    assert not (tmp_path / "r").exists()
    assert list(tmp_path.iterdir()) == [], "the temporary directory is cleaned up too"


def test_refuses_to_overwrite_unless_asked(tmp_path: Path) -> None:
    res = aqmlab.run(SMALL)
    res.save(tmp_path / "r")
    with pytest.raises(FileExistsError):
        res.save(tmp_path / "r")
    res.save(tmp_path / "r", overwrite=True)
    assert (tmp_path / "r" / "summary.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]


def test_one_writer_per_directory_and_the_lock_goes_with_a_killed_holder(tmp_path):
    # A process holds the directory (as a running sweep does); a sweep started on it is
    # refused with exit 2, naming that process, and runs nothing. SIGKILL the holder: the
    # kernel drops its flock, and the same sweep then runs.
    import signal
    import subprocess
    import sys

    from aqmlab.store.lock import LOCK_NAME

    out = tmp_path / "out"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import time\nfrom aqmlab.store.lock import hold\nwith hold({str(out)!r}):\n    print('held', flush=True)\n    time.sleep(120)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        sweep = tmp_path / "s.toml"
        sweep.write_text('duration = "1s"\n[bottleneck]\nrate = "10Mbps"\nbuffer = "1bdp"\n[[flows]]\ncc = "reno"\nrtt = "10ms"\n[sweep]\nseed = [1, 2]\n')
        cmd = [sys.executable, "-m", "aqmlab", "sweep", str(sweep), "-o", str(out), "-q"]
        refused = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert refused.returncode == 2, refused.stderr
        assert f"being written by process {holder.pid} " in " ".join(refused.stderr.split()), refused.stderr
        assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME], "the refused sweep wrote nothing"
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        holder.stdout.close()
    ran = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert len(list((out / "runs").iterdir())) == 2


def _hash_corpus() -> dict[str, str]:
    """The scenarios whose hashes name stored runs: the examples, a spread of every study's
    runs (quick and full grids), the fidelity cases, and one scenario per optional key."""
    from aqmlab.scenario import parse_scenario

    root = Path(__file__).resolve().parents[1]
    base = 'duration = "10s"\n[bottleneck]\nrate = "100Mbps"\nbuffer = "1bdp"\n[[flows]]\ncc = "cubic"\nrtt = "10ms"\n'
    ppv = base.replace('buffer = "1bdp"\n', 'buffer = "1bdp"\naqm = { kind = "ppv" }\n')
    texts = {
        "edge-stall-host": base + '[host]\nstall = "1.5ms"\nstall_every = "2s"\n',
        "edge-ideal-host": base + "[host]\nideal = true\n",
        "edge-no-offloads": base + "[host]\noffloads = false\n",
        "edge-no-offloads-nic": base + '[host]\noffloads = false\nnic_rate = "1Gbps"\n',
        "edge-gro": base + '[host]\ngro_max_size = "32KiB"\n',
        "edge-stop": base.replace('rtt = "10ms"\n', 'rtt = "10ms"\nstop = "5s"\n'),
        "edge-ppv-default-marker": ppv,
        "edge-ppv-curves": ppv.replace('cc = "cubic"', 'cc = "cubic"\nname = "gold"')
        + '[marker]\ntvf = "custom"\ncurves = { gold = [["1Mbps", 60000], ["1Gbps", 20000]] }\n',
        "edge-workload": base
        + '[[workload]]\ncc = "cubic"\nrtt = "7ms"\nrate = "100/s"\nsize = { dist = "pareto", alpha = 1.2, min = "1KB", max = "1MB" }\nstop = "5s"\n',
    }
    out = {name: parse_scenario(text).hash() for name, text in texts.items()}
    for f in sorted((root / "examples").glob("*.toml")):
        out[f"example-{f.stem}"] = aqmlab.load_scenario(f).hash()
    for study in ("ckcd", "dualq", "fejes2019", "fejes2020"):
        for quick in (True, False):
            runs = aqmlab.load_sweep(root / "python/aqmlab/studies" / f"{study}.toml", quick=quick).runs()
            for i, r in enumerate(runs[:: max(1, len(runs) // 40)]):
                out[f"{study}-{'quick' if quick else 'full'}-{i}"] = r.scenario.hash()
    for f in sorted((root / "python/aqmlab/fidelity").glob("*.toml")):
        if f.name != "manifest.toml":
            out[f"fidelity-{f.stem}"] = aqmlab.load_scenario(f).hash()
    return out


def test_stored_runs_keep_their_names_the_scenario_hashes_of_an_earlier_build() -> None:
    # tests/data/scenario-hashes-738f37c.json holds the hashes that build (commit 738f37c, before
    # the canonical form became a rule) gave these scenarios, so its stores' runs are found
    # again. A change that moves any of them orphans stored runs: it must not pass unnoticed.
    # Scenarios added since (new fidelity cases) have no earlier hash to keep.
    expected = json.loads((Path(__file__).parent / "data" / "scenario-hashes-738f37c.json").read_text())
    corpus = _hash_corpus()
    assert set(expected) <= set(corpus)
    assert {k: corpus[k] for k in expected} == expected
