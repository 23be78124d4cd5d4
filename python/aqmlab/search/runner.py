"""Worst-case search: a scenario with ``${var}`` placeholders searched by a black-box optimizer
for the point where a metric is worst. The search file (its ``[search]`` table: objective,
budget, seeds, batch, optimizer, ``[search.space]``, ``[search.shrink]``) is read by
``search.spec`` into a ``Search``; this module runs it, resumably, and shrinks the worst case.

Every run goes through the sweep runner (``_sweeprun.run_sweep``) into ``DIR/runs/<hash>``, so
parallelism (local cores or Dask), atomic storage and resumption are the sweep's. The metrics
are the engine's (the run's ``summary.json``; harm is ``engine.harm`` against the solo
baseline of ``_harm.solo_baseline``); this module only averages them over seeds.

The first round is a fixed design over the space's edges and centre (``search.design``: the
corners and the centre for up to four numeric variables); the optimizer then continues, told
every point. The optimizer is stateless between rounds: round k builds a fresh sampler seeded
by (seed, k), is told every evaluated point, is handed the design points not yet told (Optuna's
``enqueue_trial``, so a round that mixes them with sampled points spreads around them) and
asks for the next batch. So a search killed at any moment
and run again re-runs no point (the asked batch is written to ``DIR/search.json`` before its
runs start; finished runs are found in the store) and continues exactly as the uninterrupted
search would have. The trajectory depends on ``batch`` and ``seed``, never on ``-j``.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from aqmlab.scenario import Scenario
from aqmlab.scenario.units import parse_time
from aqmlab.search.design import initial_design
from aqmlab.search.spec import Objective, Search, SearchError, Var, load_search, parse_search
from aqmlab.store.atomic import write_parquet, write_text
from aqmlab.store.lock import writes_directory
from aqmlab.sweep.interrupt import remove_leftovers, stop_workers
from aqmlab.sweep.runner import is_complete, local_pool, run_sweep
from aqmlab.sweep.spec import Axis, Run, Sweep, SweepError, substitute

__all__ = [
    "SearchError",
    "Search",
    "Objective",
    "Var",
    "parse_search",
    "load_search",
    "run_search",
    "shrink",
    "scenario_toml",
    "SearchResult",
    "ask",
    "round_size",
    "pending_design",
]


# ------------------------------------------------------------------------------------------
# Optimizers: ask a batch given every told point
# ------------------------------------------------------------------------------------------


def _round_seed(seed: int, k: int) -> int:
    return (seed * 1_000_003 + k * 7_919 + 17) % (2**32)


def _grid_points(space: list[Var], budget: int, seed: int) -> list[dict[str, Any]]:
    """The largest even grid of at most `budget` points (k levels per variable, fewer for a
    variable with fewer choices), in a seeded random order so that an early stop is not a
    corner of the space."""
    k = 1
    while True:
        sizes = [len(v.levels(k + 1)) for v in space]
        if math.prod(sizes) > budget or all(len(v.levels(k + 1)) == len(v.levels(k)) for v in space):
            break
        k += 1
    levels = [v.levels(k) for v in space]

    pts = [dict(zip([v.name for v in space], c)) for c in itertools.product(*levels)]
    random.Random(seed).shuffle(pts)
    return pts


def pending_design(search: Search, told: list[tuple[dict[str, Any], float]]) -> list[dict[str, Any]]:
    """The design points (`search.design.initial_design`) not among the told points, in the
    design's order; none for ``design = "none"`` or the grid (whose levels hold each variable's
    bounds already). Matching by value, not by count, keeps this right for a directory whose
    first points came from elsewhere (a search begun before the design existed, then extended:
    its design points come next)."""
    if search.design == "none" or search.optimizer == "grid":
        return []
    seen = [p for p, _ in told]
    return [p for p in initial_design(search.space, search.seed) if p not in seen]


def round_size(search: Search, told: list[tuple[dict[str, Any], float]]) -> int:
    """Points to ask next: `batch`, or every pending design point if more (the design is one
    round, run in parallel), never past the budget; a budget below the design's size keeps
    the design's first points."""
    return min(search.budget - len(told), max(search.batch, len(pending_design(search, told))))


def ask(search: Search, told: list[tuple[dict[str, Any], float]], n: int, round_no: int) -> list[dict[str, Any]]:
    """The next `n` points: the design points not yet told, then what a fresh sampler seeded by
    (seed, round), told every evaluated point (value as loss: lower is worse for the network),
    asks."""
    if search.optimizer == "grid":
        grid = _grid_points(search.space, search.budget, search.seed)
        return grid[len(told) : len(told) + n]
    design = pending_design(search, told)[:n]
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dists = _distributions(search.space)
    rs = _round_seed(search.seed, round_no)
    if search.optimizer == "random":
        sampler: Any = optuna.samplers.RandomSampler(seed=rs)
    else:
        # multivariate: the variables interact (buffer × RTT ratio); constant liar: points asked
        # in the same round are spread instead of piled on one mode (Optuna's TPESampler docs).
        sampler = optuna.samplers.TPESampler(seed=rs, multivariate=True, constant_liar=True, n_startup_trials=min(10, max(2, search.budget // 4)))
    study = optuna.create_study(direction="minimize", sampler=sampler)
    for params, value in told:
        study.add_trial(optuna.trial.create_trial(params=params, distributions=dists, value=search.objective.loss(value)))
    # Asked first (Optuna hands enqueued trials out in order), running while the rest of the
    # round is sampled: TPE's constant liar then keeps the sampled points away from them.
    for p in design:
        study.enqueue_trial(p)
    out = []
    for i in range(n):
        trial = study.ask(fixed_distributions=dists)
        if i < len(design):
            assert trial.params == design[i], (trial.params, design[i])
            out.append(design[i])  # as the design cast it (a bound stays the bound)
            continue
        out.append({k: (v.cast(trial.params[k]) if v.choices is None else trial.params[k]) for k, v in zip(dists, search.space)})
    return out


def _distributions(space: list[Var]) -> dict[str, Any]:
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    d: dict[str, Any] = {}
    for v in space:
        if v.choices is not None:
            d[v.name] = CategoricalDistribution(list(v.choices))
        elif v.integer:
            low, high = v.bounds()
            d[v.name] = IntDistribution(int(low), int(high), log=v.log)
        else:
            d[v.name] = FloatDistribution(*v.bounds(), log=v.log)
    return d


# ------------------------------------------------------------------------------------------
# Evaluating points through the sweep runner
# ------------------------------------------------------------------------------------------


class RunList(Sweep):
    """A sweep whose runs are given (the search's points × seeds, and baselines), so the sweep
    runner stores, parallelises and resumes them like any sweep's."""

    def __init__(self, name: str, runs: list[Run], file: str | None):
        params = list(dict.fromkeys(k for r in runs for k in r.params))
        super().__init__(name=name, base={}, axes=[Axis(k, [], "var") for k in params], file=file)
        self._runs = runs

    def points(self) -> list[Any]:
        return list(range(len(self._runs)))

    def _build(self, point: Any) -> Run:
        return self._runs[point]


@dataclass
class Point:
    """An evaluated (or to be evaluated) point: its runs per seed and, once run, its values."""

    id: int
    round: int
    params: dict[str, Any]
    patch: dict[str, Any] = field(default_factory=dict)
    seeds: list[int] = field(default_factory=list)
    runs: list[tuple[int, Scenario, Scenario | None]] = field(default_factory=list)
    values: dict[int, float] = field(default_factory=dict)

    @property
    def value(self) -> float | None:
        if not self.values or len(self.values) < len(self.seeds):
            return None
        return sum(self.values[s] for s in self.seeds) / len(self.seeds)


def _read_summary(runs_dir: Path, s: Scenario) -> dict[str, Any] | None:
    d = runs_dir / s.hash()
    if not is_complete(d, s.hash()):
        return None
    return json.loads((d / "summary.json").read_text(encoding="utf-8"))


class Evaluator:
    """Runs points (every seed, and the solo baselines harm needs) with the sweep runner into
    DIR/runs, and reads their values back from the stored summaries."""

    def __init__(self, search: Search, directory: Path, *, jobs: int | None, cluster: str | None, on_runs: Callable[[int, int, int, int], None] | None = None):
        self.search, self.dir, self.jobs, self.cluster, self.on_runs = search, directory, jobs, cluster, on_runs
        self.all_runs: dict[str, Run] = {}
        self.simulated = 0
        self.pool: Any = None

    def close(self, stop: bool = False) -> None:
        """Shut the local workers down; `stop`: end them at once (an interrupted search), not
        after the runs already handed to them, and remove what they left half-written."""
        if self.pool is not None:
            if stop:
                stop_workers(self.pool)
                remove_leftovers(self.dir / "runs")
            else:
                self.pool.shutdown()
            self.pool = None

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: Any) -> None:
        self.close(stop=exc_type is not None)

    def add(self, p: Point, role: str = "point") -> None:
        if not p.runs:
            p.seeds = p.seeds or list(self.search.seeds)
            p.runs = self.search.runs_of(p.params, p.patch, p.seeds)
        for seed, sc, base in p.runs:
            params = {**p.params, "seed": seed, "role": role, "point": p.id}
            self.all_runs.setdefault(sc.hash(), Run(params, sc))
            if base is not None:
                self.all_runs.setdefault(base.hash(), Run({**params, "role": "baseline"}, base))

    def evaluate(self, points: list[Point]) -> None:
        """Run whatever the points need that the store lacks, then read their values."""
        for p in points:
            self.add(p)
        if self.cluster is None and self.pool is None:
            # One pool for every round: starting workers costs more than a short run.
            self.pool = local_pool(self.jobs or os.cpu_count() or 1)
        res = run_sweep(
            RunList(self.search.name, list(self.all_runs.values()), self.search.file),
            self.dir,
            jobs=self.jobs,
            cluster=self.cluster,
            on_progress=self.on_runs,
            pool=self.pool,
        )
        self.simulated += res.ran
        if res.failed:
            h, msg = res.failed[0]
            raise RuntimeError(f"run {h} failed: {msg} ({len(res.failed)} failed; finished runs are kept, run again to retry)")
        runs_dir = self.dir / "runs"
        for p in points:
            for seed, sc, base in p.runs:
                summ = _read_summary(runs_dir, sc)
                bsum = _read_summary(runs_dir, base) if base is not None else None
                assert summ is not None and (base is None or bsum is not None)
                p.values[seed] = self.search.objective.value(summ, bsum)


# ------------------------------------------------------------------------------------------
# The search loop, resumable
# ------------------------------------------------------------------------------------------


@dataclass
class SearchResult:
    directory: Path
    points: list[Point]
    best: Point
    simulated: int
    shrink: dict[str, Any] | None = None


def _save_state(directory: Path, search: Search, points: list[Point]) -> None:
    doc = {
        "identity": search.identity(),
        "name": search.name,
        "objective": str(search.objective),
        "points": [{"id": p.id, "round": p.round, "params": p.params} for p in points],
    }
    write_text(directory / "search.json", json.dumps(doc, indent=1) + "\n")


def _load_state(directory: Path, search: Search) -> list[Point]:
    f = directory / "search.json"
    if not f.is_file():
        return []
    doc = json.loads(f.read_text(encoding="utf-8"))
    if doc.get("identity") != search.identity():
        raise SearchError(
            f"{directory} holds another search ({doc.get('name')!r}, {doc.get('objective')!r}, or the same with another scenario, space, seeds, batch, optimizer or design); use another -o",
            key="-o",
        )
    return [Point(d["id"], d["round"], d["params"]) for d in doc["points"]]


def best_of(search: Search, points: list[Point]) -> Point:
    done = [p for p in points if p.value is not None]
    return min(done, key=lambda p: (search.objective.loss(p.value), p.id))  # type: ignore[arg-type]


def write_trials(directory: Path, search: Search, points: list[Point]) -> pd.DataFrame:
    rows = []
    for p in points:
        if p.value is None:
            continue
        row: dict[str, Any] = {"point": p.id, "round": p.round, **p.params, "objective": p.value}
        for seed, sc, base in p.runs:
            row[f"value_seed{seed}"] = p.values[seed]
            row[f"run_seed{seed}"] = sc.hash()
            if base is not None:
                row[f"baseline_seed{seed}"] = base.hash()
        rows.append(row)
    df = pd.DataFrame(rows)
    write_parquet(directory / "trials.parquet", pa.Table.from_pandas(df, preserve_index=False))
    return df


@writes_directory
def run_search(
    search: Search,
    directory: str | Path,
    *,
    jobs: int | None = None,
    cluster: str | None = None,
    on_points: Callable[[int, int], None] | None = None,
    on_runs: Callable[[int, int, int, int], None] | None = None,
    evaluator: Evaluator | None = None,
) -> SearchResult:
    """Evaluate `search.budget` points (resuming what DIR holds) and write DIR/trials.parquet
    and DIR/best.toml. `on_points(evaluated, budget)` is called after every round."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    points = _load_state(d, search)
    if evaluator is not None:
        return _search_loop(search, d, points, evaluator, on_points)
    with Evaluator(search, d, jobs=jobs, cluster=cluster, on_runs=on_runs) as ev:
        return _search_loop(search, d, points, ev, on_points)


def _search_loop(search: Search, d: Path, points: list[Point], ev: Evaluator, on_points: Callable[[int, int], None] | None) -> SearchResult:
    if points:
        ev.evaluate(points)  # finishes an interrupted round; runs already stored are not re-run
    if on_points:
        on_points(len(points), search.budget)
    round_no = max((p.round for p in points), default=-1) + 1
    while len(points) < search.budget:
        told = [(p.params, p.value) for p in points if p.value is not None]
        n = round_size(search, told)
        asked = ask(search, told, n, round_no)
        if not asked:
            break  # a grid smaller than the budget is exhausted
        new = [Point(len(points) + i, round_no, a) for i, a in enumerate(asked)]
        points.extend(new)
        _save_state(d, search, points)  # before running: a kill now loses no asked point
        ev.evaluate(new)
        write_trials(d, search, points)
        round_no += 1
        if on_points:
            on_points(len(points), search.budget)
    write_trials(d, search, points)
    best = best_of(search, points)
    write_text(
        d / "best.toml",
        scenario_toml(
            best.runs[0][1],
            header=f"Worst point of search {search.name!r} ({search.objective}): "
            + ", ".join(f"{k} = {_fmt(v)}" for k, v in best.params.items())
            + f"; mean over seeds {search.seeds}: {best.value:.6g}",
        ),
    )
    return SearchResult(d, points, best, ev.simulated)


def _fmt(v: Any) -> str:
    return format(v, ".6g") if isinstance(v, float) else str(v)


# ------------------------------------------------------------------------------------------
# Shrinking the worst case
# ------------------------------------------------------------------------------------------


def _nice(v: float, digits: int) -> float:
    if v == 0:
        return 0.0
    e = math.floor(math.log10(abs(v))) - (digits - 1)
    return round(round(v / 10**e) * 10**e, 12)


def holds(search: Search, value: float, worst: float) -> bool:
    """Does `value` still show the worst case: as bad as `worst`, or within the tolerance (a
    fraction of |worst|) of it?"""
    slack = search.tolerance * abs(worst)
    return value <= worst + slack if search.objective.sense == "min" else value >= worst - slack


@writes_directory
def shrink(
    search: Search,
    directory: str | Path,
    best: Point,
    *,
    jobs: int | None = None,
    cluster: str | None = None,
    on_step: Callable[[str], None] | None = None,
    evaluator: Evaluator | None = None,
) -> dict[str, Any]:
    """A smaller counterexample of the worst point: fewer flows per class, rounder variables,
    a shorter run — each step kept only if the objective stays within the tolerance of the
    worst value — then the result run on the check seeds. Writes DIR/shrunk.toml and
    DIR/shrink.json."""

    d = Path(directory)
    if evaluator is not None:
        return _shrink(search, d, best, evaluator, on_step)
    with Evaluator(search, d, jobs=jobs, cluster=cluster) as ev:
        return _shrink(search, d, best, ev, on_step)


def _shrink(search: Search, d: Path, best: Point, ev: Evaluator, on_step: Callable[[str], None] | None) -> dict[str, Any]:

    worst = best.value
    assert worst is not None
    params, patch = dict(best.params), dict[str, Any]()
    steps: list[dict[str, Any]] = []
    counter = [10**6]

    def attempt(what: str, new_params: dict[str, Any], new_patch: dict[str, Any]) -> bool:
        counter[0] += 1
        try:
            p = Point(counter[0], -1, new_params, dict(new_patch))
            ev.evaluate([p])
        except SweepError as e:
            steps.append({"step": what, "value": None, "kept": False, "note": e.detail})
            return False
        ok = holds(search, p.value, worst)  # type: ignore[arg-type]
        steps.append({"step": what, "value": p.value, "kept": ok})
        if on_step:
            on_step(f"{what}: {p.value:.4g} ({'kept' if ok else 'dropped'})")
        return ok

    # 1. Fewer flows: each class, smallest count first.
    env = dict(params)
    for i, f in enumerate(search.base.get("flows", [])):
        if not isinstance(f, dict):
            continue
        c = substitute(f.get("count", 1), env)
        if not isinstance(c, int) or c <= 1:
            continue
        for cand in sorted({1, max(1, c // 4), max(1, c // 2)} - {c}):
            trial = {**patch, f"flows.{i}.count": cand}
            if attempt(f"flows[{i}].count {c} → {cand}", params, trial):
                patch = trial
                break
    # 2. Round numbers: one significant digit, else two.
    for v in search.space:
        if v.choices is not None:
            continue
        cur = params[v.name]
        for digits in (1, 2):
            r = v.cast(_nice(float(cur), digits))
            if r == cur or not (v.low <= r <= v.high):
                continue
            trial_p = {**params, v.name: r}
            if attempt(f"{v.name} {_fmt(cur)} → {_fmt(r)}", trial_p, patch):
                params = trial_p
                break
    # 3. Shortest duration (warmup scaled with it): an eighth, a quarter, a half.
    sc0 = search.scenario(params, search.seeds[0], patch)
    dur_s = parse_time(sc0.duration) / 1e9
    warm_s = parse_time(sc0.warmup) / 1e9
    for frac in (1 / 8, 1 / 4, 1 / 2):
        nd = round(dur_s * frac, 3)
        if nd < 1.0:
            continue
        trial = {**patch, "duration": f"{nd:g}s", "warmup": f"{round(warm_s * frac, 3):g}s"}
        if attempt(f"duration {dur_s:g} s → {nd:g} s", params, trial):
            patch = trial
            break
    # The shrunk case on the search's seeds, then on the check seeds, one by one.
    final = Point(counter[0] + 1, -1, params, dict(patch))
    ev.evaluate([final])
    check = Point(counter[0] + 2, -1, params, dict(patch), seeds=list(search.check_seeds))
    ev.evaluate([check])
    per_seed = {s: check.values[s] for s in search.check_seeds}
    assert check.value is not None  # evaluated on every check seed above
    doc = {
        "objective": str(search.objective),
        "tolerance": search.tolerance,
        "worst": {"params": best.params, "value": worst},
        "shrunk": {"params": params, "patch": patch, "value": final.value},
        "steps": steps,
        "check": {
            "seeds": search.check_seeds,
            "values": {str(k): v for k, v in per_seed.items()},
            "mean": check.value,
            "holds": holds(search, check.value, worst),
            "holds_per_seed": {str(k): holds(search, v, worst) for k, v in per_seed.items()},
        },
        "runs_simulated": ev.simulated,
    }
    write_text(d / "shrink.json", json.dumps(doc, indent=1) + "\n")
    header = f"Shrunk worst case of search {search.name!r} ({search.objective}): {final.value:.6g} on seeds {search.seeds} (worst found {worst:.6g}, tolerance {search.tolerance:g}); on check seeds {search.check_seeds}: mean {check.value:.6g}"
    write_text(d / "shrunk.toml", scenario_toml(final.runs[0][1], header=header))
    return doc


# ------------------------------------------------------------------------------------------
# A scenario as a plain TOML file
# ------------------------------------------------------------------------------------------


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"{v} has no TOML form")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items() if x is not None) + " }"
    raise ValueError(f"{v!r} has no TOML form")


def _toml_key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def scenario_toml(s: Scenario, header: str | None = None) -> str:
    """The scenario's canonical form as a TOML file that `aqmlab run` accepts as it is (keys
    without a value are left out: they take their defaults)."""
    d = s.canonical()
    lines = [f"# {ln}" for ln in (header or "").splitlines()]
    tables: list[tuple[str, dict[str, Any]]] = []
    arrays: list[tuple[str, list[dict[str, Any]]]] = []
    for k, v in d.items():
        if v is None:
            continue
        if isinstance(v, dict):
            tables.append((k, v))
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            arrays.append((k, v))
        elif isinstance(v, list) and not v:
            continue
        else:
            lines.append(f"{_toml_key(k)} = {_toml_value(v)}")
    for k, v in tables:
        lines += ["", f"[{_toml_key(k)}]"] + [f"{_toml_key(kk)} = {_toml_value(vv)}" for kk, vv in v.items() if vv is not None and vv != {}]
    for k, arr in arrays:
        for el in arr:
            lines += ["", f"[[{_toml_key(k)}]]"] + [f"{_toml_key(kk)} = {_toml_value(vv)}" for kk, vv in el.items() if vv is not None and vv != {}]
    text = "\n".join(lines).lstrip("\n") + "\n"
    # The file must read back as the same scenario.
    back = Scenario.model_validate(tomllib.loads(text))
    if back.hash() != s.hash():
        raise RuntimeError("scenario_toml: the TOML form does not read back as the same scenario")
    return text
