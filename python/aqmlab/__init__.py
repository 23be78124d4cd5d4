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

from ._results import Result, load_result
from ._run import VERSION as __version__
from ._run import run
from ._scenario import Scenario, ScenarioError, load_scenario
from ._sweep import Sweep, SweepError, load_sweep
from ._sweeprun import load, run_sweep
from ._convergence import convergence, windowed_jain
from ._harm import harm
from ._emulate import emulate

__all__ = ["Scenario", "ScenarioError", "load_scenario", "run", "Result", "load_result", "Sweep", "SweepError", "load_sweep", "run_sweep", "load", "convergence", "windowed_jain", "harm", "emulate", "__version__"]
