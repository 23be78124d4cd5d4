"""What a search or an atlas will cost before it starts: its runs, and their wall time from the
engine's estimator (`sim::estimate`, through `simulate.estimate`, the estimate `aqmlab run` and
`aqmlab sweep` use).

The estimator's one-core time of a run (`Estimate.wall_s`) is that of `aqmlab run`: a new
process (`BASE_WALL_S`: the interpreter and its libraries) plus the simulation and its tables.
Here runs go to workers started once, so a run costs its `wall_s` less `BASE_WALL_S`, plus what
the sweep runner adds per run once its workers are up (`POOL_RUN_S`), and the command pays
`BASE_WALL_S` once. A round's runs go in parallel and the next round waits for the last of them:
a round of n runs of c seconds each on w workers takes ⌈n / w⌉ · c.

A search's points are not known before the optimizer asks them: its per-run cost is the mean
over the space's centre and corners (the first round's design, `search.design`), where the
flow counts and durations a space varies take their extremes. An atlas's first round is known
run by run; refinement adds at most four cells per cell and round (`atlas.max_refined_cells`),
costed at the first round's mean.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from aqmlab.inputs.errors import ScenarioError
from aqmlab.scenario import Scenario
from aqmlab.search.atlas import AtlasSpec, max_refined_cells
from aqmlab.search.design import initial_design
from aqmlab.search.runner import Search, _load_state, pending_design
from aqmlab.simulate.estimate import BASE_WALL_S, LONG_RUN_S, Estimate, _duration, check_fits, estimate
from aqmlab.sweep.runner import is_complete
from aqmlab.sweep.spec import Run

__all__ = ["POOL_RUN_S", "Cost", "search_cost", "atlas_cost", "cluster_workers", "local_workers"]

#: What the sweep runner adds to a run once its workers are up (hand-off, validation and
#: lowering, tables, the store's fsyncs), rounded up from its measurement (bench/README.md
#: §"Where users wait", "A sweep's overhead per run").
POOL_RUN_S = 0.05


def run_cost(e: Estimate) -> float:
    """One run's one-core seconds in a worker that is already up."""
    return max(0.0, e.wall_s - BASE_WALL_S) + POOL_RUN_S


@dataclass(frozen=True)
class Cost:
    """A command's estimate: what it runs, on how many workers, and for how long."""

    kind: str  # "search" | "atlas"
    name: str
    file: str | None
    #: Runs to simulate (not already stored), and those already stored.
    runs: int
    stored: int
    #: Mean one-core seconds of a run in a worker, and the range it was taken over.
    per_run_s: float
    low_s: float
    high_s: float
    #: The costliest run's estimate (over an hour: named in the warning, as `sweep` does).
    longest: Estimate
    workers: int
    on_cluster: bool
    #: Wall time of the runs on `workers`, start-up included.
    wall_s: float
    #: What the command may add beyond `runs`: at most `more_runs` runs in at most `more_wall_s`
    #: (the search's shrinking, the atlas's refinement), described by `more_what`.
    more_runs: int = 0
    more_wall_s: float = 0.0
    more_what: str = ""
    #: What `runs` are: "40 points × 2 seeds", "24 cells".
    what: str = ""

    @property
    def core_s(self) -> float:
        return self.runs * self.per_run_s

    def line(self) -> str:
        where = f"{self.workers} worker{'s' if self.workers != 1 else ''}" + (" on the cluster (its threads now)" if self.on_cluster else "")
        stored = f", {self.stored} already stored" if self.stored else ""
        over = "at the space's centre and corners" if self.kind == "search" else "over its runs"
        spread = f" ({_duration(self.low_s)}–{_duration(self.high_s)} {over})" if self.high_s > self.low_s * 1.05 else ""
        more = f"; {self.more_what}: at most {self.more_runs} more runs, {_duration(self.more_wall_s)}" if self.more_runs else ""
        if not self.runs:
            return f"{self.name}: no run to simulate ({self.what}{stored})" + (f"; estimate from the engine's estimator{more}" if more else "")
        return (
            f"{self.name}: {self.runs} runs to simulate ({self.what}{stored}); estimate from the engine's estimator: "
            f"{_duration(self.per_run_s)} per run on one core{spread}, {_duration(self.wall_s)} on {where}{more}"
        )

    def warning(self) -> str | None:
        """One line when the command is expected to take over an hour (`LONG_RUN_S`, the
        threshold of `aqmlab run` and `aqmlab sweep`), else None."""
        total = self.wall_s + self.more_wall_s
        if total <= LONG_RUN_S:
            return None
        where = f"{self.workers} worker{'s' if self.workers != 1 else ''}"
        longest = f"; the longest run: {self.longest.line()}" if self.longest.wall_s > LONG_RUN_S else ""
        if self.wall_s > LONG_RUN_S:
            head = f"this {self.kind} is expected to take over an hour: {_duration(self.wall_s)} on {where}, {self.core_s / 3600:.3g} core-hours"
        else:
            head = f"this {self.kind} may take over an hour: {_duration(self.wall_s)} on {where}, up to {_duration(total)} with its {self.more_what}"
        return f"warning: {self.file + ': ' if self.file else ''}{head}{longest}"


def local_workers(jobs: int | None) -> int:
    return jobs or os.cpu_count() or 1


def cluster_workers(address: str) -> int:
    """The Dask cluster's worker threads now (each runs one run at a time), at least one (a
    cluster whose workers are still starting is estimated as one); refuses an address that
    does not answer as the sweep runner does (exit 2)."""
    from aqmlab.sweep.runner import _connect

    client = _connect(address)
    try:
        return max(1, sum(client.nthreads().values()))
    finally:
        client.close()


def _rounds_wall(rounds: list[int], per_run_s: float, workers: int) -> float:
    return sum(math.ceil(n / workers) * per_run_s for n in rounds if n > 0)


def _estimates(runs: list[tuple[Scenario, str]], file: str | None) -> list[Estimate]:
    """Each (scenario, what it is)'s estimate, refusing (ScenarioError) one that cannot fit in
    this machine's memory, as `aqmlab sweep` refuses its runs."""
    out = []
    for sc, what in runs:
        e = estimate(sc)
        check_fits(e, file=file, what=what)
        out.append(e)
    return out


def search_cost(search: Search, directory: Path, *, workers: int, on_cluster: bool = False, shrink: bool = True) -> Cost:
    """The search's runs and their wall time; resuming `directory`, only what it lacks. Raises
    SearchError when `directory` holds another search (as `run_search` would)."""
    asked = _load_state(directory, search) if (directory / "search.json").is_file() else []
    per_point = len(search.seeds) * (2 if search.objective.metric == "harm" else 1)
    probes = [p for i, p in enumerate(initial_design(search.space, search.seed)) if i < 64]
    costs: list[tuple[float, Estimate]] = []
    for p in probes:
        where = ", ".join(f"{k} = {v}" for k, v in p.items())
        for _, sc, base in search.runs_of(p, None, search.seeds[:1]):
            scs = [(sc, f"the run at {where}")] + ([] if base is None else [(base, f"the solo baseline at {where}")])
            costs += [(run_cost(e), e) for e in _estimates(scs, search.file)]
    mean = sum(c for c, _ in costs) / len(costs)
    # The points already asked: their runs that the store lacks are the interrupted round's.
    runs_dir = directory / "runs"
    stored = missing = 0
    for pt in asked:
        for _, sc, base in search.runs_of(pt.params):
            for x in [sc] if base is None else [sc, base]:
                if is_complete(runs_dir / x.hash(), x.hash()):
                    stored += 1
                else:
                    missing += 1
    rounds = [missing]
    told = [(pt.params, 0.0) for pt in asked]
    left = max(0, search.budget - len(asked))
    first = True
    while left > 0:
        n = min(left, max(search.batch, len(pending_design(search, told))) if first else search.batch)
        rounds.append(n * per_point)
        left -= n
        first = False
    runs = sum(rounds)
    more_runs = more_wall = 0.0
    if shrink:
        # `runner._shrink`: up to three flow counts per class, two roundings per continuous
        # variable, three durations, then the shrunk case on the search's and the check seeds.
        classes = len(search.base.get("flows", []) or [])
        numeric = sum(1 for v in search.space if v.choices is None)
        steps = 3 * classes + 2 * numeric + 3 + 1
        check = len(search.check_seeds) * per_point // len(search.seeds)
        more_runs = steps * per_point + check
        more_wall = _rounds_wall([per_point] * steps + [check], mean, workers)
    what = f"{search.budget} points × {len(search.seeds)} seed{'s' if len(search.seeds) != 1 else ''}" + (
        ", each with its solo baseline" if per_point > len(search.seeds) else ""
    )
    return Cost(
        kind="search",
        name=search.name,
        file=search.file,
        runs=runs,
        stored=stored,
        per_run_s=mean,
        low_s=min(c for c, _ in costs),
        high_s=max(c for c, _ in costs),
        longest=max(costs, key=lambda ce: ce[0])[1],
        workers=workers,
        on_cluster=on_cluster,
        wall_s=(BASE_WALL_S if runs else 0.0) + _rounds_wall(rounds, mean, workers),
        more_runs=int(more_runs),
        more_wall_s=more_wall,
        more_what="shrinking",
        what=what,
    )


def atlas_cost(spec: AtlasSpec, runs: list[Run], cells: int, directory: Path, *, workers: int, on_cluster: bool = False) -> Cost:
    """The atlas's first round (its initial cells, every run known) and the most refinement can
    add."""
    if not runs:
        raise ScenarioError("no cell of the atlas has a valid scenario", file=spec.file)
    ests = _estimates([(r.scenario, f"run {r.hash} ({', '.join(f'{k}={v}' for k, v in r.params.items())})") for r in runs], spec.file)
    costs = [run_cost(e) for e in ests]
    runs_dir = directory / "runs"
    done = [is_complete(runs_dir / r.hash, r.hash) for r in runs]
    todo = [c for c, d in zip(costs, done) if not d]
    mean = sum(costs) / len(costs)
    wall = BASE_WALL_S + max(sum(todo) / workers, max(todo)) if todo else 0.0
    more_cells = max_refined_cells(spec, cells)
    # A refined cell's runs: the pair and, at most, each side's solo baseline (shared between
    # pairs when another pair's cell has the same place), on every seed.
    more_runs = 3 * len(spec.seeds) * more_cells
    return Cost(
        kind="atlas",
        name=spec.name,
        file=spec.file,
        runs=len(todo),
        stored=len(runs) - len(todo),
        per_run_s=mean,
        low_s=min(costs),
        high_s=max(costs),
        longest=max(ests, key=lambda e: e.wall_s),
        workers=workers,
        on_cluster=on_cluster,
        wall_s=wall,
        more_runs=more_runs,
        more_wall_s=more_runs * mean / workers,
        more_what=f"refinement ({spec.rounds} round{'s' if spec.rounds != 1 else ''}, at most {more_cells} more cells)",
        what=f"the first round's {cells} cells",
    )
