"""What starting a command loads: the CLI and the package import none of the heavy libraries,
which the commands that need them import when they run (bench/README.md, "Where users wait");
a command imports and builds only itself; the public API still answers every name it exports."""

from __future__ import annotations

import json
import os
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


def _modules_after(*args: str) -> set[str]:
    """Every module in sys.modules after `aqmlab ARGS` ran (as the `aqmlab` script runs it), in
    a fresh interpreter."""
    code = (
        "import json, sys\n"
        f"sys.argv = ['aqmlab', *{list(args)!r}]\n"
        "from aqmlab.cli.main import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "120"})
    assert r.returncode == 0, r.stderr
    return set(json.loads(r.stdout.splitlines()[-1]))


def _top(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


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


def test_help_loads_no_scenario_model_nor_any_command() -> None:
    # `aqmlab --help` builds every command to list them, from modules that import what a
    # command needs when it runs: not the scenario model (pydantic), the engine, progress bars
    # or Parquet.
    loaded = _modules_after("--help")
    assert "aqmlab.cli.sweep" in loaded and "typer" in loaded  # the probe sees what was imported
    unwanted = {"pydantic", "aqmlab.scenario", "aqmlab._native", "rich.progress", "numpy", *HEAVY}
    assert not (loaded | _top(loaded)) & unwanted, sorted((loaded | _top(loaded)) & unwanted)


def test_a_command_imports_only_its_own_module() -> None:
    # `aqmlab list ccs` asks the engine, and loads neither the other commands' modules nor the
    # scenario model (typer itself imports pydantic, to convert option values).
    loaded = _modules_after("list", "ccs")
    assert "aqmlab.cli.listing" in loaded and "aqmlab._native" in loaded
    others = {f"aqmlab.cli.{m}" for m in ("run", "sweep", "search", "atlas", "emulate", "compare", "fidelity", "plot", "report", "harm", "plugin", "router")}
    assert not loaded & (others | {"aqmlab.scenario", "rich.progress"}), sorted(loaded & (others | {"aqmlab.scenario", "rich.progress"}))
    # `aqmlab validate` loads the scenario model; not what a run's results need (pyarrow, numpy),
    # the other commands' modules, progress bars or tables.
    loaded = _modules_after("validate", str(BENCH_TINY))
    assert "aqmlab.scenario" in loaded and "aqmlab.cli.run" in loaded
    assert not _top(loaded) & {"numpy", *HEAVY}, sorted(_top(loaded) & {"numpy", *HEAVY})
    unwanted = others - {"aqmlab.cli.run"} | {"rich.progress", "rich.table"}
    assert not loaded & unwanted, sorted(loaded & unwanted)


def test_the_script_and_app_are_the_same_cli() -> None:
    # main() runs `root`, whose subcommands are built on lookup; `app` has them all registered
    # (CliRunner, and code reading its registrations). Both say the same.
    from typer.testing import CliRunner

    from aqmlab.cli.main import SUBCOMMANDS, app, root

    assert [c.name for c in app.registered_commands] + [g.name for g in app.registered_groups] == list(SUBCOMMANDS)
    for args in (["--help"], [], ["rnu"], ["list"], ["list", "--help"], ["run", "--help"], ["router", "--help"], ["validate"], ["plugin", "nosuch"]):
        a, r = (CliRunner().invoke(x, args, env={"COLUMNS": "120"}) for x in (app, root))
        assert (a.exit_code, a.output) == (r.exit_code, r.output), args
        assert a.exit_code in (0, 2), (args, a.exit_code, a.output)


def test_reading_a_runs_tables_needs_no_pandas(tmp_path: Path) -> None:
    # load_result reads each table with the file's own reader: pyarrow's dataset layer
    # (pq.read_table) would import pandas before any DataFrame is asked for. The tables are
    # the ones pyarrow's read_table gives.
    out = tmp_path / "out"
    aqmlab.run(aqmlab.load_scenario(str(BENCH_TINY))).save(str(out))
    loaded = _loaded_after(f"import aqmlab\nr = aqmlab.load_result({str(out)!r})\nassert r.arrow['flows'].num_rows == 1")
    assert "pyarrow" in loaded and "pandas" not in loaded
    import pyarrow.parquet as pq

    from aqmlab.store.result import TABLES, read_table

    for name in TABLES:
        assert read_table(out / f"{name}.parquet").equals(pq.read_table(out / f"{name}.parquet"), check_metadata=True), name
    assert read_table(out / "timeseries.parquet", columns=["t_s"]).column_names == ["t_s"]
