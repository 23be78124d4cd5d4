"""What starting a command loads: the CLI and the package import none of the heavy libraries,
which the commands that need them import when they run (bench/README.md, "Where users wait");
the public API still answers every name it exports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import aqmlab

BENCH_TINY = Path(__file__).resolve().parents[1] / "bench" / "startup" / "tiny.toml"
HEAVY = ("pandas", "pyarrow", "matplotlib", "optuna", "dask", "distributed")


def _loaded_after(statement: str) -> set[str]:
    """The top-level packages in sys.modules after `statement`, in a fresh interpreter."""
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return set(json.loads(r.stdout.splitlines()[-1]))


def test_the_cli_imports_none_of_the_heavy_libraries() -> None:
    loaded = _loaded_after("import aqmlab.cli.main")
    assert "typer" in loaded  # the probe sees what was imported
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_the_package_imports_its_api_on_first_use() -> None:
    loaded = _loaded_after("import aqmlab")
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    # Each exported name resolves, to what its module defines.
    for name in aqmlab.__all__:
        assert getattr(aqmlab, name) is not None, name
    from aqmlab.simulate.run import VERSION
    from aqmlab.sweep.runner import run_sweep

    assert aqmlab.__version__ == VERSION and aqmlab.run_sweep is run_sweep
    assert set(aqmlab.__all__) <= set(dir(aqmlab))


def test_fidelity_help_shows_the_suites_default_run_count() -> None:
    # The CLI states the default rather than importing the suite (pydantic, the emulator) to read it.
    from typer.testing import CliRunner

    from aqmlab.cli.main import app
    from aqmlab.fidelity.suite import EMU_RUNS

    r = CliRunner().invoke(app, ["fidelity", "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and f"EMU_RUNS, {EMU_RUNS}" in r.stdout, r.stdout


def test_a_run_and_its_store_need_no_pandas(tmp_path: Path) -> None:
    # The engine hands its tables over as Arrow buffers: pyarrow alone builds and writes them
    # (Python lists would make pyarrow import pandas to check each one).
    loaded = _loaded_after(f"import aqmlab\nr = aqmlab.run(aqmlab.load_scenario({str(BENCH_TINY)!r}))\nr.save({str(tmp_path / 'out')!r})")
    assert "pyarrow" in loaded and "pandas" not in loaded
    # What was written reads back as the run: a bulk flow's completion time is null (it never
    # completes), its class a string, its counters integers.
    r = aqmlab.load_result(tmp_path / "out")
    flows = r.arrow["flows"]
    assert flows.column("fct_s").null_count == flows.num_rows == 1
    assert flows.column("class").to_pylist() == ["cubic-10ms"]
    assert flows.schema.field("segs_sent").type == "int64" and flows.column("segs_sent")[0].as_py() > 0
