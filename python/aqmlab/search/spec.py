"""Search files: a scenario with ``${var}`` placeholders and a ``[search]`` table saying what to
search for, read into a ``Search`` (``search.runner`` runs it).

    [search]
    objective = "min jain"        # or "max harm:<class>", "min rel_throughput:<class>",
                                  # "max sojourn_p99", "min utilization" (min/max either way)
    budget = 40                   # points to evaluate
    seeds = [1, 2]                # a point's value is the mean over these seeds
    batch = 4                     # points asked per round (the runs of a round go in parallel)
    optimizer = "tpe"             # "tpe" (Optuna's TPE), "random", "grid"
    seed = 0                      # the optimizer's seed
    design = "corners"            # first round: corners and centre ("none": the optimizer's own)
    [search.space]
    f = { low = 0.05, high = 4.0, log = true }
    n = { choices = [2, 5, 10] }
    [search.shrink]
    tolerance = 0.05              # the shrunk case keeps the worst value within 5 % of it
    check_seeds = [11, 12, 13]    # seeds the shrunk case is checked on (default: 5 unused ones)

The ``[search]`` table is the pydantic model ``SearchTable`` (read by ``inputs.loader``: one
located error per bad file); the rest of the file is a scenario whose values may hold
``${...}`` over the variables, checked where only the whole file can be: every variable used
and none unknown, and the corners and the middle of the space valid scenarios.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, PlainValidator, field_validator, model_validator

from aqmlab import engine
from aqmlab.analysis.harm import solo_baseline
from aqmlab.inputs.errors import ScenarioError, read_utf8
from aqmlab.inputs.loader import InputModel, KeyedValueError, dotted, located, read_toml, validate
from aqmlab.scenario import Scenario
from aqmlab.sweep.spec import EXPR, FUNCS, Axis, Sweep

__all__ = [
    "SearchError",
    "Search",
    "Objective",
    "Var",
    "SearchTable",
    "VarSpec",
    "ShrinkSpec",
    "METRICS",
    "OPTIMIZERS",
    "DESIGNS",
    "parse_objective",
    "parse_search",
    "load_search",
]


class SearchError(ScenarioError):
    """Bad search input, or a search directory that holds another search."""


#: The metrics an objective may name: those with a class take ``:<class>``.
METRICS = {"jain": False, "utilization": False, "sojourn_p99": False, "rel_throughput": True, "harm": True}
OPTIMIZERS = ("tpe", "random", "grid")
#: The first round: "corners" (``search.design``: the space's corners and centre, before the
#: optimizer samples) or "none" (the optimizer from the first point, as before the design).
DESIGNS = ("corners", "none")
#: Significant digits of a continuous variable's sampled values.
SIG_DIGITS = 4


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
        assert self.cls is not None  # a class metric names its class (parse_search)
        i = names.index(self.cls)
        c = summary["classes"][i]
        if self.metric == "rel_throughput":
            return float(c["rel_throughput"])
        assert baseline is not None
        t_harm, _ = engine.harm(c["goodput_bps"], baseline["classes"][i]["goodput_bps"], m["sojourn_ms"]["mean"], baseline["metrics"]["sojourn_ms"]["mean"])
        if t_harm is None:
            raise ValueError(f"harm of class {self.cls!r} is undefined: its solo baseline delivered nothing")
        return float(t_harm)


@dataclass(frozen=True)
class Var:
    name: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    integer: bool = False
    choices: tuple[Any, ...] | None = None

    def bounds(self) -> tuple[float, float]:
        """(low, high) of a numeric variable (a variable has bounds or choices, never both)."""
        assert self.low is not None and self.high is not None, f"{self.name} has choices, not bounds"
        return self.low, self.high

    def corners(self) -> list[Any]:
        if self.choices is not None:
            return [self.choices[0], self.choices[-1]]
        return [self.cast(b) for b in self.bounds()]

    def mid(self) -> Any:
        if self.choices is not None:
            return self.choices[len(self.choices) // 2]
        low, high = self.bounds()
        v = math.sqrt(low * high) if self.log else (low + high) / 2
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
        low, high = self.bounds()
        lo, hi = (math.log(low), math.log(high)) if self.log else (low, high)
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
    design: str = "corners"
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
        doc = {
            "base": self.base,
            "objective": str(self.objective),
            "seeds": self.seeds,
            "batch": self.batch,
            "optimizer": self.optimizer,
            "seed": self.seed,
            "space": [v.__dict__ for v in self.space],
        }
        # Only when not the default, so a directory written before `design` existed keeps its
        # identity: extended, it gets the design points it lacks next (runner.pending_design).
        if self.design != "corners":
            doc["design"] = self.design
        return hashlib.sha256(json.dumps(doc, sort_keys=True, default=list).encode()).hexdigest()[:16]

    def scenario(self, point: dict[str, Any], seed: int, patch: dict[str, Any] | None = None) -> Scenario:
        """The scenario at `point` with `seed`, `patch` (dotted path → value) applied first."""
        axes = [Axis(k, [(v, v)], "var") for k, v in point.items()]
        axes.append(Axis("seed", [(seed, seed)], "path"))
        for path, v in (patch or {}).items():
            axes.append(Axis(path, [(v, v)], "path"))
        sw = Sweep(name=self.name, base=self.base, axes=axes, file=self.file)
        return sw._build(sw.points()[0]).scenario

    def runs_of(
        self, point: dict[str, Any], patch: dict[str, Any] | None = None, seeds: Sequence[int] | None = None
    ) -> list[tuple[int, Scenario, Scenario | None]]:
        """(seed, scenario, solo baseline of the objective's class or None) for every seed."""

        out = []
        for s in seeds if seeds is not None else self.seeds:
            sc = self.scenario(point, s, patch)
            base = None
            if self.objective.metric == "harm":
                assert self.objective.cls is not None  # harm names its class (parse_search)
                base = solo_baseline(sc, sc.class_names().index(self.objective.cls))
            out.append((s, sc, base))
        return out


def parse_objective(v: Any) -> Objective:
    """``"min jain"``, ``"max harm:<class>"``: the sense, a metric of `METRICS`, its class."""
    if not isinstance(v, str):
        raise ValueError('must be a string such as "min jain"')
    m = re.fullmatch(r"\s*(min|max)\s+([a-z_0-9]+)(?::(.+))?\s*", v)
    if not m:
        raise ValueError(f'{v!r}: write "min METRIC" or "max METRIC[:CLASS]" (metrics: {", ".join(METRICS)})')
    sense, metric, cls = m.group(1), m.group(2), m.group(3)
    if metric not in METRICS:
        raise ValueError(f"{v!r}: unknown metric {metric!r} (metrics: {', '.join(METRICS)})")
    if METRICS[metric] and not cls:
        raise ValueError(f'{v!r}: {metric} is per class: name one, e.g. "{sense} {metric}:<class>"')
    if not METRICS[metric] and cls:
        raise ValueError(f"{v!r}: {metric} is a whole-run metric and takes no class")
    return Objective(sense, metric, cls.strip() if cls else None)


# ------------------------------------------------------------------------------------------
# The [search] table
# ------------------------------------------------------------------------------------------


def _finite(v: float) -> float:
    if not math.isfinite(v):
        raise ValueError(f"{v!r} is not a finite number")
    return v


def _seeds(v: list[int]) -> list[int]:
    if not v:
        raise ValueError("must be a non-empty list of integers, e.g. [1, 2]")
    if any(x < 0 for x in v):
        raise ValueError("seeds are non-negative integers")
    if len(set(v)) != len(v):
        raise ValueError("a seed is listed twice")
    return v


def _at_least_one(what: str) -> Any:
    def check(v: int) -> int:
        if v < 1:
            raise ValueError(f"{v!r}: {what}, at least 1")
        return v

    return AfterValidator(check)


Finite = Annotated[float, AfterValidator(_finite)]
#: Run seeds: distinct non-negative integers, at least one.
Seeds = Annotated[list[int], AfterValidator(_seeds)]


class VarSpec(InputModel):
    """One variable of ``[search.space]``: a range ``{ low, high [, log] [, int] }`` (log: sampled
    evenly in log space, low > 0; int: integer values, integer bounds) or ``{ choices = [...] }``
    (distinct numbers or strings)."""

    low: Finite | None = None
    high: Finite | None = None
    log: bool = False
    integer: bool = Field(False, alias="int")
    choices: list[Any] | None = None

    @field_validator("choices")
    @classmethod
    def _choices(cls, v: list[Any]) -> list[Any]:
        if not v:
            raise ValueError("empty range: choices needs at least one value")
        if not all(isinstance(c, (int, float, str)) and not isinstance(c, bool) for c in v):
            raise ValueError("choices are numbers or strings")
        if len(set(v)) != len(v):
            raise ValueError("choices repeat a value")
        return v

    @model_validator(mode="after")
    def _range(self) -> VarSpec:
        if self.choices is not None:
            extra = sorted((VarSpec.model_fields[k].alias or k) for k in self.model_fields_set - {"choices"})
            if extra:
                raise ValueError(f"choices cannot go with {', '.join(extra)}")
            return self
        for k in ("low", "high"):
            if getattr(self, k) is None:
                raise ValueError(f"needs {k} (or choices)")
        assert self.low is not None and self.high is not None
        if self.low > self.high:
            raise ValueError(f"low = {self.low:g} is above high = {self.high:g}")
        if self.low == self.high:
            raise ValueError(f"empty range: low = high = {self.low:g} (a fixed value belongs in the scenario)")
        if self.log and self.low <= 0:
            raise KeyedValueError("low", f"log = true needs low > 0 (low = {self.low:g})", relative=True)
        if self.integer and not (self.low.is_integer() and self.high.is_integer()):
            raise ValueError("int = true needs integer low and high")
        return self

    def var(self, name: str) -> Var:
        if self.choices is not None:
            return Var(name, choices=tuple(self.choices))
        assert self.low is not None and self.high is not None
        return Var(name, low=float(self.low), high=float(self.high), log=self.log, integer=self.integer)


class ShrinkSpec(InputModel):
    """``[search.shrink]``: how close to the worst value a shrunk case must stay, and the seeds
    it is checked on."""

    tolerance: float = 0.05
    check_seeds: Seeds | None = None

    @field_validator("tolerance")
    @classmethod
    def _fraction(cls, v: float) -> float:
        if not math.isfinite(v) or not 0 <= v < 1:
            raise ValueError(f"{v!r}: a fraction of the worst value, 0 ≤ tolerance < 1")
        return v


class SearchTable(InputModel):
    """A search file's ``[search]`` table."""

    objective: Annotated[Objective, PlainValidator(parse_objective)]
    budget: Annotated[int, _at_least_one("the budget is a number of points")] = 40
    #: Default: the scenario's seed (filled in by `parse_search`).
    seeds: Seeds
    batch: Annotated[int, _at_least_one("points per round")] = 4
    optimizer: Literal["tpe", "random", "grid"] = "tpe"
    seed: Annotated[int, Field(ge=0)] = 0
    design: Literal["corners", "none"] = "corners"
    space: dict[str, VarSpec]
    shrink: ShrinkSpec = Field(default_factory=ShrinkSpec)

    @field_validator("space")
    @classmethod
    def _names(cls, v: dict[str, VarSpec]) -> dict[str, VarSpec]:
        if not v:
            raise ValueError("needs at least one variable, e.g. f = { low = 0.1, high = 4, log = true }")
        for name in v:
            if not re.fullmatch(r"[A-Za-z_]\w*", name):
                raise KeyedValueError(dotted([name]), "a search variable is a name (letters, digits, _)", relative=True)
        return v

    @model_validator(mode="after")
    def _check_seeds_differ(self) -> SearchTable:
        if self.shrink.check_seeds is not None and set(self.shrink.check_seeds) & set(self.seeds):
            raise KeyedValueError("shrink.check_seeds", "the check seeds must differ from the search's seeds", relative=True)
        return self


# ------------------------------------------------------------------------------------------
# The search file
# ------------------------------------------------------------------------------------------


def _names_in(value: Any) -> set[str]:
    """Every variable name used inside a ${...} of a (nested) value."""
    out: set[str] = set()
    if isinstance(value, str):
        for expr in EXPR.findall(value):
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


def parse_search(text: str, *, file: str | None = None, default_name: str = "search") -> Search:
    data = read_toml(text, file=file, error=SearchError)
    t = data.pop("search", None)
    if not isinstance(t, dict):
        raise SearchError(
            "no [search] table: a search file is a scenario with ${var} placeholders plus [search] (objective, budget, seeds, [search.space])", file=file
        )
    for k in ("sweep", "quick"):
        if k in data:
            raise located(SearchError, f"[{k}] belongs in sweep files; a search varies only [search.space]", key=k, file=file, text=text)
    t.setdefault("seeds", [data.get("seed", 1)])
    spec = validate(SearchTable, t, text=text, file=file, error=SearchError, at=("search",))
    space = [v.var(name) for name, v in spec.space.items()]
    seeds, objective = list(spec.seeds), spec.objective
    check = list(spec.shrink.check_seeds) if spec.shrink.check_seeds is not None else [max(seeds) + i for i in range(1, 6)]
    # Variables: every one used, none used that is not one.
    used = _names_in(data)
    names = [v.name for v in space]
    for u in sorted(used - set(names) - set(FUNCS)):
        line = next((i for i, ln in enumerate(text.splitlines(), 1) if re.search(r"\$\{[^}]*\b" + re.escape(u) + r"\b", ln)), None)
        raise SearchError(f"unknown variable {u!r} in ${{...}} (search variables: {', '.join(names)})", file=file, line=line)
    for v in space:
        if v.name not in used:
            raise located(SearchError, "not used in any ${...} of the scenario", key=f"search.space.{dotted([v.name])}", file=file, text=text)
    data.setdefault("name", default_name)
    s = Search(
        name=data["name"],
        base=data,
        objective=objective,
        budget=spec.budget,
        seeds=seeds,
        space=space,
        batch=spec.batch,
        optimizer=spec.optimizer,
        seed=spec.seed,
        design=spec.design,
        tolerance=float(spec.shrink.tolerance),
        check_seeds=check,
        file=file,
        text=text,
    )
    # Every corner and the middle of the space make valid scenarios, each with the class named,
    # and so do the first round's points (checked here so that a bad one fails before any run).
    from aqmlab.search.design import initial_design  # design.py imports this module's Var

    probes = [dict(zip(names, c)) for c in _corner_points(space)] + [{v.name: v.mid() for v in space}]
    if s.design != "none" and s.optimizer != "grid":
        probes += [p for p in initial_design(space, s.seed) if p not in probes]
    for p in probes:
        sc = s.scenario(p, seeds[0])
        if objective.cls is not None and objective.cls not in sc.class_names():
            where = ", ".join(f"{k} = {v!r}" for k, v in p.items())
            raise located(
                SearchError,
                f"no flow class named {objective.cls!r} at {where} (classes: {', '.join(sc.class_names())}); "
                "a class whose default name depends on a search variable needs a fixed `name`",
                key="search.objective",
                file=file,
                text=text,
            )
    if objective.metric == "harm" and len([f for f in s.scenario(probes[0], seeds[0]).flows if f.cc != "cbr"]) < 2:
        raise located(SearchError, "harm needs at least two TCP flow classes", key="search.objective", file=file, text=text)
    return s


def _corner_points(space: list[Var]) -> list[tuple[Any, ...]]:
    lows = tuple(v.corners()[0] for v in space)
    highs = tuple(v.corners()[1] for v in space)
    return [lows, highs] if lows != highs else [lows]


def load_search(path: str | Path) -> Search:
    p = Path(path)
    return parse_search(read_utf8(p, SearchError), file=str(path), default_name=p.stem)
