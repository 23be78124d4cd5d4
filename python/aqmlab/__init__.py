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

from aqmlab.analysis.convergence import convergence, windowed_jain
from aqmlab.analysis.harm import harm
from aqmlab.emu.emulate import emulate
from aqmlab.scenario import Scenario, ScenarioError, load_scenario
from aqmlab.simulate.run import VERSION as __version__
from aqmlab.simulate.run import run
from aqmlab.store.result import Result, load_result
from aqmlab.sweep.runner import load, run_sweep
from aqmlab.sweep.spec import Sweep, SweepError, load_sweep

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
