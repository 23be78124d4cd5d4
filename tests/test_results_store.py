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
