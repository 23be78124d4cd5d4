"""What a run will cost before it starts: the engine's estimate (`sim::estimate`, through the
native module) plus the front's own fixed cost, the machine's available memory, and the
checks `run` and `sweep` make with them (refuse what cannot fit, warn about runs of hours)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aqmlab import engine
from aqmlab.inputs.errors import ScenarioError

if TYPE_CHECKING:
    from aqmlab.scenario import Scenario

__all__ = ["Estimate", "estimate", "mem_available", "check_fits", "LONG_RUN_S"]

#: The process's own cost besides the engine's: the interpreter with pandas, pyarrow and
#: pydantic loaded, and starting, lowering and storing a run. bench/README.md §Estimates:
#: peak RSS (137 MB) and CPU time (1.86 s) of `aqmlab run` on a 0.1 s scenario of one flow.
BASE_RSS_BYTES = 137 * 2**20
BASE_WALL_S = 1.86
#: What the results cost beyond the simulation, per time-series row and per flow (the FFI's
#: Python lists, the DataFrames, the Parquet files): bench/README.md §Estimates, from the
#: 2000-flow / 10 ms and 1000-flow / 100 ms time-series runs and the 10 000-flow run without one.
ROW_S = 3e-6
FLOW_S = 6e-5

#: `run` and `sweep` say so before starting a run expected to take longer than this.
LONG_RUN_S = 3600.0


@dataclass(frozen=True)
class Estimate:
    flows: int
    packets: int
    events: int
    timeseries_rows: int
    wall_s: float
    peak_bytes: int
    #: The part of the engine's memory that dominates, as the scenario key to change.
    main_key: str

    @classmethod
    def from_native(cls, d: dict[str, Any]) -> Estimate:
        parts = {"flows": d["flow_bytes"], "bottleneck": d["network_bytes"], "measure.interval": d["table_bytes"]}
        return cls(
            flows=d["flows"],
            packets=d["bottleneck_packets"] + d["excess_packets"],
            events=d["events"],
            timeseries_rows=d["timeseries_rows"],
            wall_s=BASE_WALL_S + d["wall_s"] + ROW_S * d["timeseries_rows"] + FLOW_S * d["flows"],
            peak_bytes=BASE_RSS_BYTES + d["peak_bytes"],
            main_key=max(parts, key=lambda k: parts[k]),
        )

    def line(self) -> str:
        return f"estimate: {_count(self.packets)} packets, {_count(self.flows)} flow{'' if self.flows == 1 else 's'}, wall time {_duration(self.wall_s)}, peak memory {_bytes(self.peak_bytes)}"


def _count(n: float) -> str:
    for div, unit in ((1e12, " T"), (1e9, " G"), (1e6, " M"), (1e3, " k")):
        if n >= div:
            return f"{n / div:.3g}{unit}"
    return f"{n:.0f}"


def _duration(s: float) -> str:
    if s >= 86400:
        return f"{s / 86400:.3g} days"
    if s >= 3600:
        return f"{s / 3600:.3g} h"
    if s >= 60:
        return f"{s / 60:.3g} min"
    return f"{s:.2g} s"


def _bytes(b: float) -> str:
    for div, unit in ((2**40, "TB"), (2**30, "GB"), (2**20, "MB")):
        if b >= div:
            return f"{b / div:.3g} {unit}"
    return f"{b / 2**10:.3g} KB"


def estimate(scenario: Scenario) -> Estimate:
    """The scenario's estimated cost on one core."""
    return Estimate.from_native(engine.estimate(json.dumps(scenario.engine_config())))


def mem_available(meminfo: str | Path = "/proc/meminfo") -> int | None:
    """The memory the kernel could give a new process without swapping (`MemAvailable`, bytes;
    Linux Documentation/filesystems/proc.rst §meminfo), or None where there is no such line."""
    try:
        text = Path(meminfo).read_text(encoding="ascii")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            parts = line.split()
            return int(parts[1]) * 1024  # the kernel's unit is kB
    return None


def check_fits(est: Estimate, *, file: str | None, what: str = "the run", available: int | None = None) -> None:
    """Refuse, with the estimate and the machine's available memory, a run whose peak memory
    estimate exceeds it. `available` defaults to MemAvailable; without it nothing is refused."""
    avail = mem_available() if available is None else available
    if avail is not None and est.peak_bytes > avail:
        raise ScenarioError(
            f"{what} needs an estimated {_bytes(est.peak_bytes)} of memory ({_count(est.flows)} flows, "
            f"{_count(est.timeseries_rows)} time-series rows, {_count(est.packets)} packets), more than this machine has "
            f"available (MemAvailable {_bytes(avail)}); reduce it (fewer flows, a shorter run, a longer [measure] interval)",
            file=file,
            key=est.main_key,
        )
