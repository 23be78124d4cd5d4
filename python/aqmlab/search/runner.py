"""Worst-case search: a scenario with ``${var}`` placeholders and a ``[search]`` table, searched
by a black-box optimizer for the point where a metric is worst.

    [search]
    objective = "min jain"        # or "max harm:<class>", "min rel_throughput:<class>",
                                  # "max sojourn_p99", "min utilization" (min/max either way)
    budget = 40                   # points to evaluate
    seeds = [1, 2]                # a point's value is the mean over these seeds
    batch = 4                     # points asked per round (the runs of a round go in parallel)
    optimizer = "tpe"             # "tpe" (Optuna's TPE), "random", "grid"
    [search.space]
    f = { low = 0.05, high = 4.0, log = true }
    n = { choices = [2, 5, 10] }
    [search.shrink]
    tolerance = 0.05              # the shrunk case keeps the worst value within 5 % of it
    check_seeds = [11, 12, 13]    # seeds the shrunk case is checked on (default: 5 unused ones)

Every run goes through the sweep runner (``_sweeprun.run_sweep``) into ``DIR/runs/<hash>``, so
parallelism (local cores or Dask), atomic storage and resumption are the sweep's. The metrics
are the engine's (the run's ``summary.json``; harm is ``engine.harm`` against the solo
baseline of ``_harm.solo_baseline``); this module only averages them over seeds.

The optimizer is stateless between rounds: round k builds a fresh sampler seeded by (seed, k),
is told every evaluated point, and asks for the next batch. So a search killed at any moment
and run again re-runs no point (the asked batch is written to ``DIR/search.json`` before its
runs start; finished runs are found in the store) and continues exactly as the uninterrupted
search would have. The trajectory depends on ``batch`` and ``seed``, never on ``-j``.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import os
import random
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd
import pyarrow as pa

from aqmlab.inputs.errors import ScenarioError, read_utf8
from aqmlab.inputs.locate import locate
from aqmlab.store.atomic import write_parquet, write_text
from aqmlab.store.lock import hold
from aqmlab.scenario import Scenario
from aqmlab.sweep.spec import _EXPR, _FUNCS, Axis, Run, Sweep, SweepError, _substitute
from aqmlab.sweep.runner import is_complete, local_pool, run_sweep
from aqmlab import engine

__all__ = ["SearchError", "Search", "Objective", "Var", "parse_search", "load_search", "run_search", "shrink", "scenario_toml", "SearchResult"]


class SearchError(ScenarioError):
    """Bad search input, or a search directory that holds another search."""


# ------------------------------------------------------------------------------------------
# The search file
# ------------------------------------------------------------------------------------------

#: The metrics an objective may name: those with a class take ``:<class>``.
METRICS = {"jain": False, "utilization": False, "sojourn_p99": False, "rel_throughput": True, "harm": True}
OPTIMIZERS = ("tpe", "random", "grid")
#: Significant digits of a continuous variable's sampled values.
SIG_DIGITS = 4
_SEARCH_KEYS = {"objective", "budget", "seeds", "batch", "optimizer", "seed", "space", "shrink"}
_VAR_KEYS = {"low", "high", "log", "int", "choices"}
_SHRINK_KEYS = {"tolerance", "check_seeds"}


@dataclass(frozen=True)
class Objective:
    sense: str  # "min" | "max": the direction in which the metric gets worse
    metric: str
    cls: str | None = None

    def __str__(self) -> str:
        return f"{self.sense} {self.metric}" + (f":{self.cls}" if self.cls else "")

    def loss(self, value: float) -> float:
        """What the optimizer minimizes: the value itself for "min", its negation for "max"."""
        return value if self.sense == "min" else -value

    def value(self, summary: dict[str, Any], baseline: dict[str, Any] | None) -> float:
        """The metric of one run, read from its summary (and its solo baseline's, for harm)."""
        m = summary["metrics"]
        if self.metric == "jain":
            return float(m["jain"])
        if self.metric == "utilization":
            return float(m["utilization"])
        if self.metric == "sojourn_p99":
            return float(m["sojourn_ms"]["p99"])
        names = [c["name"] for c in summary["classes"]]
        i = names.index(self.cls)
        c = summary["classes"][i]
        if self.metric == "rel_throughput":
            return float(c["rel_throughput"])
        assert baseline is not None
        t_harm, _ = engine.harm(c["goodput_bps"], baseline["classes"][i]["goodput_bps"], m["sojourn_ms"]["mean"], baseline["metrics"]["sojourn_ms"]["mean"])
        return float(t_harm)


@dataclass(frozen=True)
class Var:
    name: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    integer: bool = False
    choices: tuple[Any, ...] | None = None

    def corners(self) -> list[Any]:
        if self.choices is not None:
            return [self.choices[0], self.choices[-1]]
        return [self.cast(self.low), self.cast(self.high)]

    def mid(self) -> Any:
        if self.choices is not None:
            return self.choices[len(self.choices) // 2]
        v = math.sqrt(self.low * self.high) if self.log else (self.low + self.high) / 2
        return self.cast(v)

    def cast(self, v: float) -> Any:
        """A sampled value as the scenario gets it: an integer, or a float rounded to
        `SIG_DIGITS` significant digits (so "${10*r}ms" stays a whole number of nanoseconds and
        points print as written)."""
        return int(round(v)) if self.integer else float(f"{v:.{SIG_DIGITS}g}")

    def levels(self, k: int) -> list[Any]:
        """k values spread evenly over the range (log-evenly when log), ends included."""
        if self.choices is not None:
            idx = sorted({round(i * (len(self.choices) - 1) / max(1, k - 1)) for i in range(k)})
            return [self.choices[i] for i in idx]
        if k == 1:
            return [self.mid()]
        lo, hi = (math.log(self.low), math.log(self.high)) if self.log else (self.low, self.high)
        vals = [lo + (hi - lo) * i / (k - 1) for i in range(k)]
        out = [self.cast(math.exp(v) if self.log else v) for v in vals]
        return list(dict.fromkeys(out))


@dataclass
class Search:
    name: str
    base: dict[str, Any]
    objective: Objective
    budget: int
    seeds: list[int]
    space: list[Var]
    batch: int = 4
    optimizer: str = "tpe"
    seed: int = 0
    tolerance: float = 0.05
    check_seeds: list[int] = field(default_factory=list)
    file: str | None = None
    text: str | None = None

    @property
    def var_names(self) -> list[str]:
        return [v.name for v in self.space]

    def identity(self) -> str:
        """What a search directory belongs to: everything but the budget (so a finished search
        can be extended) and the shrink settings."""
        doc = {"base": self.base, "objective": str(self.objective), "seeds": self.seeds, "batch": self.batch, "optimizer": self.optimizer, "seed": self.seed, "space": [v.__dict__ for v in self.space]}
        return hashlib.sha256(json.dumps(doc, sort_keys=True, default=list).encode()).hexdigest()[:16]

    def scenario(self, point: dict[str, Any], seed: int, patch: dict[str, Any] | None = None) -> Scenario:
        """The scenario at `point` with `seed`, `patch` (dotted path → value) applied first."""
        axes = [Axis(k, [(v, v)], "var") for k, v in point.items()]
        axes.append(Axis("seed", [(seed, seed)], "path"))
        for path, v in (patch or {}).items():
            axes.append(Axis(path, [(v, v)], "path"))
        sw = Sweep(name=self.name, base=self.base, axes=axes, file=self.file)
        return sw._build(sw.points()[0]).scenario

    def runs_of(self, point: dict[str, Any], patch: dict[str, Any] | None = None, seeds: Sequence[int] | None = None) -> list[tuple[int, Scenario, Scenario | None]]:
        """(seed, scenario, solo baseline of the objective's class or None) for every seed."""
        from aqmlab.analysis.harm import solo_baseline

        out = []
        for s in seeds if seeds is not None else self.seeds:
            sc = self.scenario(point, s, patch)
            base = solo_baseline(sc, sc.class_names().index(self.objective.cls)) if self.objective.metric == "harm" else None
            out.append((s, sc, base))
        return out


def _line(text: str | None, key: str) -> int | None:
    return locate(text, key) if text else None


def _err(msg: str, *, key: str | None = None, file: str | None = None, text: str | None = None) -> SearchError:
    return SearchError(msg, file=file, line=_line(text, key) if key else None, key=key)


def _names_in(value: Any) -> set[str]:
    """Every variable name used inside a ${...} of a (nested) value."""
    out: set[str] = set()
    if isinstance(value, str):
        for expr in _EXPR.findall(value):
            try:
                tree = ast.parse(expr.strip(), mode="eval")
            except SyntaxError:
                continue
            out |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    elif isinstance(value, dict):
        for v in value.values():
            out |= _names_in(v)
    elif isinstance(value, list):
        for v in value:
            out |= _names_in(v)
    return out


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _parse_var(name: str, t: Any, file: str | None, text: str) -> Var:
    key = f"search.space.{name}"
    if not re.fullmatch(r"[A-Za-z_]\w*", name):
        raise _err("a search variable is a name (letters, digits, _)", key=key, file=file, text=text)
    if not isinstance(t, dict):
        raise _err("must be a table: { low = ..., high = ... [, log = true] [, int = true] } or { choices = [...] }", key=key, file=file, text=text)
    for k in t:
        if k not in _VAR_KEYS:
            raise _err(f"unknown key {k!r} (allowed: {', '.join(sorted(_VAR_KEYS))})", key=f"{key}.{k}", file=file, text=text)
    if "choices" in t:
        extra = set(t) - {"choices"}
        if extra:
            raise _err(f"choices cannot go with {', '.join(sorted(extra))}", key=key, file=file, text=text)
        ch = t["choices"]
        if not isinstance(ch, list) or not ch:
            raise _err("empty range: choices needs at least one value", key=f"{key}.choices", file=file, text=text)
        if not all(isinstance(c, (int, float, str)) and not isinstance(c, bool) for c in ch):
            raise _err("choices are numbers or strings", key=f"{key}.choices", file=file, text=text)
        if len(set(ch)) != len(ch):
            raise _err("choices repeat a value", key=f"{key}.choices", file=file, text=text)
        return Var(name, choices=tuple(ch))
    for k in ("low", "high"):
        if k not in t:
            raise _err(f"needs {k} (or choices)", key=key, file=file, text=text)
        if not _number(t[k]):
            raise _err(f"{t[k]!r} is not a finite number", key=f"{key}.{k}", file=file, text=text)
    for k in ("log", "int"):
        if k in t and not isinstance(t[k], bool):
            raise _err("must be true or false", key=f"{key}.{k}", file=file, text=text)
    low, high, log, integer = float(t["low"]), float(t["high"]), bool(t.get("log", False)), bool(t.get("int", False))
    if low > high:
        raise _err(f"low = {t['low']} is above high = {t['high']}", key=key, file=file, text=text)
    if low == high:
        raise _err(f"empty range: low = high = {t['low']} (a fixed value belongs in the scenario)", key=key, file=file, text=text)
    if log and low <= 0:
        raise _err(f"log = true needs low > 0 (low = {t['low']})", key=f"{key}.low", file=file, text=text)
    if integer and (not float(low).is_integer() or not float(high).is_integer()):
        raise _err("int = true needs integer low and high", key=key, file=file, text=text)
    return Var(name, low=low, high=high, log=log, integer=integer)


def _parse_objective(v: Any, file: str | None, text: str) -> Objective:
    key = "search.objective"
    if not isinstance(v, str):
        raise _err('must be a string such as "min jain"', key=key, file=file, text=text)
    m = re.fullmatch(r"\s*(min|max)\s+([a-z_0-9]+)(?::(.+))?\s*", v)
    if not m:
        raise _err(f'{v!r}: write "min METRIC" or "max METRIC[:CLASS]" (metrics: {", ".join(METRICS)})', key=key, file=file, text=text)
    sense, metric, cls = m.group(1), m.group(2), m.group(3)
    if metric not in METRICS:
        raise _err(f"{v!r}: unknown metric {metric!r} (metrics: {', '.join(METRICS)})", key=key, file=file, text=text)
    if METRICS[metric] and not cls:
        raise _err(f"{v!r}: {metric} is per class: name one, e.g. \"{sense} {metric}:<class>\"", key=key, file=file, text=text)
    if not METRICS[metric] and cls:
        raise _err(f"{v!r}: {metric} is a whole-run metric and takes no class", key=key, file=file, text=text)
    return Objective(sense, metric, cls.strip() if cls else None)


def _int_list(v: Any, key: str, file: str | None, text: str) -> list[int]:
    if not isinstance(v, list) or not v:
        raise _err("must be a non-empty list of integers, e.g. [1, 2]", key=key, file=file, text=text)
    if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v):
        raise _err("seeds are non-negative integers", key=key, file=file, text=text)
    if len(set(v)) != len(v):
        raise _err("a seed is listed twice", key=key, file=file, text=text)
    return list(v)


def parse_search(text: str, *, file: str | None = None, default_name: str = "search") -> Search:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"\(at line (\d+), column \d+\)", str(e))
        msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(e))
        raise SearchError(f"TOML syntax: {msg}", file=file, line=int(m.group(1)) if m else None) from None
    t = data.pop("search", None)
    if not isinstance(t, dict):
        raise SearchError("no [search] table: a search file is a scenario with ${var} placeholders plus [search] (objective, budget, seeds, [search.space])", file=file)
    for k in ("sweep", "quick"):
        if k in data:
            raise _err(f"[{k}] belongs in sweep files; a search varies only [search.space]", key=k, file=file, text=text)
    for k in t:
        if k not in _SEARCH_KEYS:
            raise _err(f"unknown key (allowed: {', '.join(sorted(_SEARCH_KEYS))})", key=f"search.{k}", file=file, text=text)
    for k in ("objective", "space"):
        if k not in t:
            raise _err("required key is missing", key=f"search.{k}", file=file, text=text)
    objective = _parse_objective(t["objective"], file, text)
    budget = t.get("budget", 40)
    if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1:
        raise _err(f"{budget!r}: the budget is a number of points, at least 1", key="search.budget", file=file, text=text)
    seeds = _int_list(t.get("seeds", [data.get("seed", 1)]), "search.seeds", file, text)
    batch = t.get("batch", 4)
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise _err(f"{batch!r}: points per round, at least 1", key="search.batch", file=file, text=text)
    optimizer = t.get("optimizer", "tpe")
    if optimizer not in OPTIMIZERS:
        raise _err(f"{optimizer!r}: unknown optimizer (one of {', '.join(OPTIMIZERS)})", key="search.optimizer", file=file, text=text)
    seed = t.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise _err("the optimizer's seed is a non-negative integer", key="search.seed", file=file, text=text)
    space_t = t["space"]
    if not isinstance(space_t, dict) or not space_t:
        raise _err("needs at least one variable, e.g. f = { low = 0.1, high = 4, log = true }", key="search.space", file=file, text=text)
    space = [_parse_var(k, v, file, text) for k, v in space_t.items()]
    shrink_t = t.get("shrink", {})
    if not isinstance(shrink_t, dict):
        raise _err("must be a table", key="search.shrink", file=file, text=text)
    for k in shrink_t:
        if k not in _SHRINK_KEYS:
            raise _err(f"unknown key (allowed: {', '.join(sorted(_SHRINK_KEYS))})", key=f"search.shrink.{k}", file=file, text=text)
    tol = shrink_t.get("tolerance", 0.05)
    if not _number(tol) or not 0 <= tol < 1:
        raise _err(f"{tol!r}: a fraction of the worst value, 0 ≤ tolerance < 1", key="search.shrink.tolerance", file=file, text=text)
    check = _int_list(shrink_t["check_seeds"], "search.shrink.check_seeds", file, text) if "check_seeds" in shrink_t else [max(seeds) + i for i in range(1, 6)]
    if set(check) & set(seeds):
        raise _err("the check seeds must differ from the search's seeds", key="search.shrink.check_seeds", file=file, text=text)
    # Variables: every one used, none used that is not one.
    used = _names_in(data)
    names = [v.name for v in space]
    for u in sorted(used - set(names) - set(_FUNCS)):
        line = next((i for i, ln in enumerate(text.splitlines(), 1) if re.search(r"\$\{[^}]*\b" + re.escape(u) + r"\b", ln)), None)
        raise SearchError(f"unknown variable {u!r} in ${{...}} (search variables: {', '.join(names)})", file=file, line=line)
    for v in space:
        if v.name not in used:
            raise _err("not used in any ${...} of the scenario", key=f"search.space.{v.name}", file=file, text=text)
    data.setdefault("name", default_name)
    s = Search(name=data["name"], base=data, objective=objective, budget=budget, seeds=seeds, space=space, batch=batch, optimizer=optimizer, seed=seed, tolerance=float(tol), check_seeds=check, file=file, text=text)
    # Every corner and the middle of the space make valid scenarios, each with the class named.
    probes = [dict(zip(names, c)) for c in _corner_points(space)] + [{v.name: v.mid() for v in space}]
    for p in probes:
        sc = s.scenario(p, seeds[0])
        if objective.cls is not None and objective.cls not in sc.class_names():
            where = ", ".join(f"{k} = {v!r}" for k, v in p.items())
            raise _err(
                f"no flow class named {objective.cls!r} at {where} (classes: {', '.join(sc.class_names())}); "
                "a class whose default name depends on a search variable needs a fixed `name`",
                key="search.objective",
                file=file,
                text=text,
            )
    if objective.metric == "harm" and len([f for f in s.scenario(probes[0], seeds[0]).flows if f.cc != "cbr"]) < 2:
        raise _err("harm needs at least two TCP flow classes", key="search.objective", file=file, text=text)
    return s


def _corner_points(space: list[Var]) -> list[tuple[Any, ...]]:
    lows = tuple(v.corners()[0] for v in space)
    highs = tuple(v.corners()[1] for v in space)
    return [lows, highs] if lows != highs else [lows]


def load_search(path: str | Path) -> Search:
    p = Path(path)
    return parse_search(read_utf8(p, SearchError), file=str(path), default_name=p.stem)


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
    import itertools

    pts = [dict(zip([v.name for v in space], c)) for c in itertools.product(*levels)]
    random.Random(seed).shuffle(pts)
    return pts


def ask(search: Search, told: list[tuple[dict[str, Any], float]], n: int, round_no: int) -> list[dict[str, Any]]:
    """The next `n` points: a fresh sampler seeded by (seed, round) is told every evaluated
    point (value as loss: lower is worse for the network) and asked `n` times."""
    if search.optimizer == "grid":
        grid = _grid_points(search.space, search.budget, search.seed)
        return grid[len(told) : len(told) + n]
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
    out = []
    for _ in range(n):
        trial = study.ask(fixed_distributions=dists)
        out.append({k: (v.cast(trial.params[k]) if v.choices is None else trial.params[k]) for k, v in zip(dists, search.space)})
    return out


def _distributions(space: list[Var]) -> dict[str, Any]:
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    d: dict[str, Any] = {}
    for v in space:
        if v.choices is not None:
            d[v.name] = CategoricalDistribution(list(v.choices))
        elif v.integer:
            d[v.name] = IntDistribution(int(v.low), int(v.high), log=v.log)
        else:
            d[v.name] = FloatDistribution(v.low, v.high, log=v.log)
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

    def points(self) -> list[Any]:  # type: ignore[override]
        return list(range(len(self._runs)))

    def _build(self, point: Any) -> Run:  # type: ignore[override]
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

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()
            self.pool = None

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

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
        res = run_sweep(RunList(self.search.name, list(self.all_runs.values()), self.search.file), self.dir, jobs=self.jobs, cluster=self.cluster, on_progress=self.on_runs, pool=self.pool)
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
    doc = {"identity": search.identity(), "name": search.name, "objective": str(search.objective), "points": [{"id": p.id, "round": p.round, "params": p.params} for p in points]}
    write_text(directory / "search.json", json.dumps(doc, indent=1) + "\n")


def _load_state(directory: Path, search: Search) -> list[Point]:
    f = directory / "search.json"
    if not f.is_file():
        return []
    doc = json.loads(f.read_text(encoding="utf-8"))
    if doc.get("identity") != search.identity():
        raise SearchError(f"{directory} holds another search ({doc.get('name')!r}, {doc.get('objective')!r}, or the same with another scenario, space, seeds, batch or optimizer); use another -o", key="-o")
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
    with hold(directory):
        return _run_search_holding(search, directory, jobs=jobs, cluster=cluster, on_points=on_points, on_runs=on_runs, evaluator=evaluator)


def _run_search_holding(
    search: Search,
    directory: str | Path,
    *,
    jobs: int | None = None,
    cluster: str | None = None,
    on_points: Callable[[int, int], None] | None = None,
    on_runs: Callable[[int, int, int, int], None] | None = None,
    evaluator: Evaluator | None = None,
) -> SearchResult:
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    points = _load_state(d, search)
    ev = evaluator or Evaluator(search, d, jobs=jobs, cluster=cluster, on_runs=on_runs)
    try:
        return _search_loop(search, d, points, ev, on_points)
    finally:
        if evaluator is None:
            ev.close()


def _search_loop(search: Search, d: Path, points: list[Point], ev: Evaluator, on_points: Callable[[int, int], None] | None) -> SearchResult:
    if points:
        ev.evaluate(points)  # finishes an interrupted round; runs already stored are not re-run
    if on_points:
        on_points(len(points), search.budget)
    round_no = max((p.round for p in points), default=-1) + 1
    while len(points) < search.budget:
        n = min(search.batch, search.budget - len(points))
        told = [(p.params, p.value) for p in points if p.value is not None]
        asked = ask(search, told, n, round_no)  # type: ignore[arg-type]
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
    write_text(d / "best.toml", scenario_toml(best.runs[0][1], header=f"Worst point of search {search.name!r} ({search.objective}): " + ", ".join(f"{k} = {_fmt(v)}" for k, v in best.params.items()) + f"; mean over seeds {search.seeds}: {best.value:.6g}"))
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


def shrink(search: Search, directory: str | Path, best: Point, *, jobs: int | None = None, cluster: str | None = None, on_step: Callable[[str], None] | None = None, evaluator: Evaluator | None = None) -> dict[str, Any]:
    """A smaller counterexample of the worst point: fewer flows per class, rounder variables,
    a shorter run — each step kept only if the objective stays within the tolerance of the
    worst value — then the result run on the check seeds. Writes DIR/shrunk.toml and
    DIR/shrink.json."""
    with hold(directory):
        return _shrink_holding(search, directory, best, jobs=jobs, cluster=cluster, on_step=on_step, evaluator=evaluator)


def _shrink_holding(
search: Search, directory: str | Path, best: Point, *, jobs: int | None = None, cluster: str | None = None, on_step: Callable[[str], None] | None = None, evaluator: Evaluator | None = None) -> dict[str, Any]:

    d = Path(directory)
    ev = evaluator or Evaluator(search, d, jobs=jobs, cluster=cluster)
    try:
        return _shrink(search, d, best, ev, on_step)
    finally:
        if evaluator is None:
            ev.close()


def _shrink(search: Search, d: Path, best: Point, ev: Evaluator, on_step: Callable[[str], None] | None) -> dict[str, Any]:
    from aqmlab.scenario.units import parse_time

    worst = best.value
    assert worst is not None
    params, patch = dict(best.params), {}
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
        c = _substitute(f.get("count", 1), env)
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
    doc = {
        "objective": str(search.objective),
        "tolerance": search.tolerance,
        "worst": {"params": best.params, "value": worst},
        "shrunk": {"params": params, "patch": patch, "value": final.value},
        "steps": steps,
        "check": {"seeds": search.check_seeds, "values": {str(k): v for k, v in per_seed.items()}, "mean": check.value, "holds": holds(search, check.value, worst), "holds_per_seed": {str(k): holds(search, v, worst) for k, v in per_seed.items()}},  # type: ignore[arg-type]
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
