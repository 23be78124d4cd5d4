"""aqmlab: TCP congestion controls sharing an AQM bottleneck — scenarios, a fast Linux-faithful
simulator, Parquet results.

    import aqmlab
    res = aqmlab.run("examples/dctcp-cubic-step.toml")
    res.classes          # DataFrame
    res.save("out/example")

    sweep = aqmlab.load_sweep("python/aqmlab/studies/ckcd.toml", quick=True)
    aqmlab.run_sweep(sweep, "out/ckcd")
    df = aqmlab.load("out/ckcd")   # one row per run and class

    emu = aqmlab.emulate("examples/emu-cubic-30m.toml")   # real Linux TCP (root; docs/emulator.md)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aqmlab.analysis.convergence import convergence, windowed_jain
    from aqmlab.analysis.harm import harm
    from aqmlab.emu.emulate import emulate
    from aqmlab.scenario import Scenario, ScenarioError, load_scenario
    from aqmlab.simulate.run import VERSION as __version__
    from aqmlab.simulate.run import run
    from aqmlab.store.result import Result, load_result
    from aqmlab.sweep.runner import load, run_sweep
    from aqmlab.sweep.spec import Sweep, SweepError, load_sweep

# Every public name and the module it lives in, imported on first use: importing any
# submodule imports this package first, and `aqmlab --help` must not pay for pandas, pyarrow
# and pydantic (bench/README.md, "Where users wait").
_EXPORTS = {
    "Scenario": "aqmlab.scenario",
    "ScenarioError": "aqmlab.scenario",
    "load_scenario": "aqmlab.scenario",
    "run": "aqmlab.simulate.run",
    "Result": "aqmlab.store.result",
    "load_result": "aqmlab.store.result",
    "Sweep": "aqmlab.sweep.spec",
    "SweepError": "aqmlab.sweep.spec",
    "load_sweep": "aqmlab.sweep.spec",
    "run_sweep": "aqmlab.sweep.runner",
    "load": "aqmlab.sweep.runner",
    "convergence": "aqmlab.analysis.convergence",
    "windowed_jain": "aqmlab.analysis.convergence",
    "harm": "aqmlab.analysis.harm",
    "emulate": "aqmlab.emu.emulate",
    "__version__": "aqmlab.simulate.run",
}

__all__ = [
    "Scenario",
    "ScenarioError",
    "load_scenario",
    "run",
    "Result",
    "load_result",
    "Sweep",
    "SweepError",
    "load_sweep",
    "run_sweep",
    "load",
    "convergence",
    "windowed_jain",
    "harm",
    "emulate",
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'aqmlab' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), "VERSION" if name == "__version__" else name)
    # Cached, so the next access is a plain attribute.
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
