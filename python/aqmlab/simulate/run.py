"""Running a scenario on the simulator backend."""

from __future__ import annotations

import json
import math
import time
import tomllib
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from aqmlab import engine
from aqmlab.scenario import Scenario, load_scenario
from aqmlab.simulate.estimate import check_fits, estimate
from aqmlab.store.result import Result, frames_from_native

__all__ = ["run", "VERSION"]


def _version() -> str:
    """aqmlab's version, written once, in pyproject.toml: the installed distribution's
    metadata carries it; a source tree run without installing reads the pyproject.toml beside
    the package."""
    try:
        return metadata.version("aqmlab")
    except metadata.PackageNotFoundError:
        with open(Path(__file__).resolve().parents[3] / "pyproject.toml", "rb") as f:
            return str(tomllib.load(f)["project"]["version"])


VERSION = _version()


def json_safe(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, list):
        return [json_safe(v) for v in x]
    return x


def run(scenario: Scenario | str | Path, progress: Callable[[float], None] | None = None) -> Result:
    """Run a scenario (a `Scenario` or the path of a TOML file) and return its `Result`.

    `progress`, if given, is called now and then with the fraction of simulated time done.
    """
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    # A run that cannot fit is refused before anything is allocated for it.
    check_fits(estimate(scenario), file=None, what=f"scenario {scenario.name!r}")
    config = scenario.engine_config()
    t0 = time.perf_counter()
    out = engine.run(json.dumps(config), progress)
    wall = time.perf_counter() - t0
    summary = {
        "aqmlab_version": VERSION,
        "backend": "sim",
        "seed": scenario.seed,
        "wall_time_s": wall,
        "scenario": scenario.canonical(),
        "scenario_hash": scenario.hash(),
        "metrics": json_safe(out["metrics"]),
        "classes": json_safe(out["classes"]),
        "fct": json_safe(out["fct"]),
        "counters": out["counters"],
    }
    return Result(summary, frames_from_native(out["tables"]))
