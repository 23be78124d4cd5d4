"""The coexistence atlas: for every pair of congestion controls and every AQM of a spec, Jain's
index and each side's harm over buffer size (BDPs) × RTT ratio, refined where the landscape
changes fast, as one static page of heatmaps whose cells link to their scenario.

A spec (TOML; the default is ``search/atlas_default.toml`` in the package)::

    name = "default"
    rate = "20Mbps"
    rtt = "20ms"                    # the first CC's RTT; the second's is ratio × this
    duration = "20s"
    warmup = "5s"
    seeds = [1]                     # each cell's values are the mean over these
    count = 1                       # flows per CC
    ccs = ["reno", "cubic", "bbr"]  # every unordered pair (first, second) in this order
    ecn = ["dctcp", "prague"]       # CCs whose flows negotiate ECN
    aqms = [{ kind = "taildrop" }, { kind = "fq_codel" }]
    [buffer]                        # physical buffer, in BDPs of the first CC's RTT (log axis)
    low = 0.25
    high = 8
    levels = 4                      # initial cells along the axis
    [ratio]                         # second CC's RTT / first CC's RTT (log axis)
    low = 0.25
    high = 4
    levels = 4
    [refine]
    threshold = 0.1                 # split cells whose value differs from a neighbour's by more
    rounds = 2                      # at most this many splits of an initial cell
    [quick]                         # --quick: overrides of the keys above
    ccs = ["cubic", "bbr"]

A cell is a rectangle of the (log buffer, log ratio) plane, evaluated at its centre (values
rounded to 3 significant digits). Refinement splits a cell into four when Jain's index or
either harm differs from an edge neighbour's by more than the threshold, round by round, so
the cells crowd where the outcome changes (where an AQM starts to break). Every run goes
through the sweep runner into DIR/runs (parallel, Dask, resumable); harm is the engine's
(`engine.harm`) against the solo baselines of `_harm.solo_baseline`, shared between pairs.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import pyarrow as pa
from pydantic import AfterValidator, Field, ValidationError, create_model, field_validator, model_validator

from aqmlab import engine
from aqmlab.analysis.harm import solo_baseline
from aqmlab.inputs.errors import ScenarioError, read_utf8
from aqmlab.inputs.loader import InputModel, located, read_toml, validate
from aqmlab.inputs.locate import split_path
from aqmlab.scenario import Scenario, available, cc_label, check_with_engine, error_from_validation, plugin_cc
from aqmlab.scenario.parts import CcName
from aqmlab.scenario.units import parse_rate, parse_time
from aqmlab.search.runner import RunList, scenario_toml
from aqmlab.store.atomic import write_parquet, write_text
from aqmlab.store.lock import writes_directory
from aqmlab.store.result import read_table
from aqmlab.sweep.interrupt import remove_leftovers, stop_workers
from aqmlab.sweep.runner import local_pool, run_sweep
from aqmlab.sweep.spec import Run

__all__ = ["AtlasSpec", "AtlasError", "load_spec", "parse_spec", "default_spec_path", "run_atlas", "first_round", "max_refined_cells"]


class AtlasError(ScenarioError):
    """Bad atlas spec: one message naming where and what."""


@dataclass(frozen=True)
class Axis:
    low: float
    high: float
    levels: int

    def edges(self) -> list[float]:
        """Initial cell edges in log10."""
        lo, hi = math.log10(self.low), math.log10(self.high)
        return [lo + (hi - lo) * i / self.levels for i in range(self.levels + 1)]


@dataclass
class AtlasSpec:
    name: str
    rate: str
    rtt: str
    duration: str
    warmup: str
    seeds: list[int]
    count: int
    ccs: list[str]
    ecn: list[str]
    aqms: list[dict[str, Any]]
    buffer: Axis
    ratio: Axis
    threshold: float
    rounds: int
    file: str | None = None

    def pairs(self) -> list[tuple[str, str]]:
        return list(itertools.combinations(self.ccs, 2))

    def aqm_labels(self) -> list[str]:
        return [aqm_label(a) for a in self.aqms]

    def scenario(self, a: str, b: str, aqm: dict[str, Any], buf: float, ratio: float, seed: int) -> Scenario:
        rtt_ms = _ms(self.rtt)
        label = aqm_label(aqm)
        data = {
            "name": f"atlas-{self.name}-{label}-b{buf:g}-r{ratio:g}",
            "duration": self.duration,
            "warmup": self.warmup,
            "seed": seed,
            "bottleneck": {"rate": self.rate, "buffer": f"{buf:g}bdp", "rtt_ref": self.rtt, "aqm": copy.deepcopy(aqm)},
            "flows": [
                {"cc": a, "count": self.count, "rtt": self.rtt, "ecn": a in self.ecn, "start": "uniform(0s, 1s)"},
                {"cc": b, "count": self.count, "rtt": f"{_sig(rtt_ms * ratio, 4):g}ms", "ecn": b in self.ecn, "start": "uniform(0s, 1s)"},
            ],
        }
        return Scenario.model_validate(data)


def aqm_label(aqm: dict[str, Any]) -> str:
    """An AQM's name on the page and in atlas.parquet: its `label`, a plugin's file name (every
    plugin's kind is "plugin", as a sweep labels them), else its kind."""
    if aqm.get("label"):
        return str(aqm["label"])
    if aqm.get("kind") == "plugin" and isinstance(aqm.get("module"), str):
        return Path(aqm["module"]).name
    return str(aqm["kind"])


def _plugin_beside(aqm: dict[str, Any], file: str | None) -> dict[str, Any]:
    """A plugin's `module` relative to the spec's directory, as a scenario's is to its file."""
    m = aqm.get("module")
    if aqm.get("kind") != "plugin" or not isinstance(m, str) or file is None or m.startswith("sha256:") or Path(m).expanduser().is_absolute():
        return aqm
    return {**aqm, "module": str(Path(file).parent / m)}


def _ms(t: str) -> float:

    return parse_time(t) / 1e6


def _sig(v: float, digits: int = 3) -> float:
    if v == 0:
        return 0.0
    return float(f"{v:.{digits}g}")


def default_spec_path() -> Path:
    return Path(__file__).with_name("atlas_default.toml")


# ------------------------------------------------------------------------------------------
# The spec file
# ------------------------------------------------------------------------------------------


def _ccs() -> list[str]:
    """The congestion controls a pair may have (CBR is no congestion control)."""

    return [k for k in available("cc") if k != "cbr"]


def _parses(parse: Callable[[str], Any]) -> Any:
    """A quantity checked by the scenario's parser (`units`), kept as written."""

    def check(v: str) -> str:
        parse(v)
        return v

    return AfterValidator(check)


def _time(v: str) -> Any:

    return parse_time(v)


def _rate(v: str) -> Any:

    return parse_rate(v)


class AxisSpec(InputModel):
    """``[buffer]``, ``[ratio]``: a log axis from low to high, cut into `levels` initial cells."""

    low: float
    high: float
    levels: int

    @field_validator("levels")
    @classmethod
    def _levels(cls, v: int) -> int:
        if v < 1:
            raise ValueError("levels is a number of initial cells, at least 1")
        return v

    @model_validator(mode="after")
    def _range(self) -> AxisSpec:
        if not self.low > 0 or not math.isfinite(self.high):
            raise ValueError("low and high are numbers above 0 (a log axis)")
        if self.low >= self.high:
            raise ValueError(f"empty range: low = {self.low:g} is not below high = {self.high:g}")
        return self

    def axis(self) -> Axis:
        return Axis(float(self.low), float(self.high), self.levels)


class RefineSpec(InputModel):
    """``[refine]``: split a cell whose value differs from a neighbour's by more than
    `threshold`, at most `rounds` times."""

    threshold: float = 0.1
    rounds: int = 2

    @field_validator("threshold")
    @classmethod
    def _threshold(cls, v: float) -> float:
        if not v > 0 or not math.isfinite(v):
            raise ValueError("threshold is a positive difference of Jain's index or harm")
        return v

    @field_validator("rounds")
    @classmethod
    def _rounds(cls, v: int) -> int:
        if v < 0:
            raise ValueError("rounds is a non-negative integer")
        return v


#: The axes' defaults: a key the spec leaves out of [buffer] or [ratio] takes its value here.
AXIS_DEFAULTS = {"buffer": {"low": 0.25, "high": 8.0, "levels": 4}, "ratio": {"low": 0.25, "high": 4.0, "levels": 4}}


class _AtlasKeys(InputModel):
    """The keys of a spec (all but [quick])."""

    name: str = "atlas"
    rate: Annotated[str, _parses(_rate)] = "20Mbps"
    rtt: Annotated[str, _parses(_time)] = "20ms"
    duration: Annotated[str, _parses(_time)] = "20s"
    warmup: Annotated[str, _parses(_time)] = "5s"
    seeds: list[int] = Field(default_factory=lambda: [1])
    count: int = 1
    #: Built-ins by name; a plugin CC as a scenario writes it, ``{ plugin = "x.bpf.c" }``
    #: (relative to the spec), held as the scenario model's string for it.
    ccs: list[CcName]
    ecn: list[str] = Field(default_factory=list)
    aqms: list[dict[str, Any]]
    buffer: AxisSpec = Field(default_factory=lambda: AxisSpec.model_validate(AXIS_DEFAULTS["buffer"]))
    ratio: AxisSpec = Field(default_factory=lambda: AxisSpec.model_validate(AXIS_DEFAULTS["ratio"]))
    refine: RefineSpec = Field(default_factory=RefineSpec)

    @field_validator("buffer", "ratio", mode="before")
    @classmethod
    def _axis_defaults(cls, v: Any, info: Any) -> Any:
        return {**AXIS_DEFAULTS[info.field_name], **v} if isinstance(v, dict) else v

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: list[int]) -> list[int]:
        if not v or any(s < 0 for s in v) or len(set(v)) != len(v):
            raise ValueError("a non-empty list of distinct non-negative integers")
        return v

    @field_validator("count")
    @classmethod
    def _count(cls, v: int) -> int:
        if v < 1:
            raise ValueError("flows per congestion control, at least 1")
        return v

    @field_validator("ccs")
    @classmethod
    def _pairs(cls, v: list[str]) -> list[str]:
        if len(v) < 2:
            raise ValueError('needs at least two congestion controls, e.g. ["cubic", "bbr"]')
        known = _ccs()
        for c in v:
            if c not in known and plugin_cc(c) is None:
                raise ValueError(f"{c!r} is not a congestion control (ccs: {', '.join(known)}; or your own: {{ plugin = 'my_cc.bpf.c' }})")
        if len(set(v)) != len(v):
            raise ValueError("a congestion control is listed twice")
        return v

    @field_validator("ecn")
    @classmethod
    def _ecn(cls, v: list[str]) -> list[str]:
        known = _ccs()
        if not all(c in known for c in v):
            raise ValueError(f"a list of congestion controls (ccs: {', '.join(known)})")
        return v

    @field_validator("aqms")
    @classmethod
    def _aqms(cls, v: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not v or not all("kind" in a for a in v):
            raise ValueError('needs at least one AQM table, e.g. [{ kind = "taildrop" }]')
        labels = [aqm_label(a) for a in v]
        if len(set(labels)) != len(labels):
            raise ValueError("two AQMs share a label: give one a `label`")
        return v


#: ``[quick]``: overrides of any other key of the spec (a table merges key by key), checked
#: once merged.
# create_model's overloads cannot type field definitions spread from a dict.
AtlasQuick = create_model(  # type: ignore[call-overload]
    "AtlasQuick", __base__=InputModel, __doc__="[quick]: overrides of the spec's keys.", **{k: (Any, None) for k in _AtlasKeys.model_fields}
)


class AtlasFile(_AtlasKeys):
    """An atlas spec file."""

    quick: AtlasQuick | None = None


def _from_quick(key: str, q: dict[str, Any]) -> str:
    """The key of a merged spec's value as the file writes it: under [quick] if it came from there."""

    parts = split_path(key)
    top = parts[0] if parts else None
    if top in q and (not isinstance(q[top], dict) or len(parts) < 2 or parts[1] in q[top]):
        return f"quick.{key}"
    return key


def parse_spec(text: str, *, file: str | None = None, quick: bool = False) -> AtlasSpec:
    d = read_toml(text, file=file, error=AtlasError)
    context = {"base_dir": str(Path(file).parent)} if file is not None else None
    t = validate(AtlasFile, d, text=text, file=file, error=AtlasError, context=context)
    if quick:
        q = d.pop("quick", None)
        if q is None:
            raise AtlasError("this spec has no [quick] form", file=file)
        for k, v in q.items():
            d[k] = {**d[k], **v} if isinstance(v, dict) and isinstance(d.get(k), dict) else v
        t = validate(AtlasFile, d, text=text, file=file, error=AtlasError, context=context, key_of=lambda key: _from_quick(key, q))
    spec = AtlasSpec(
        name=t.name,
        rate=t.rate,
        rtt=t.rtt,
        duration=t.duration,
        warmup=t.warmup,
        seeds=list(t.seeds),
        count=t.count,
        ccs=list(t.ccs),
        ecn=list(t.ecn),
        aqms=[_plugin_beside({k: v for k, v in a.items() if k != "label"}, file) | ({"label": a["label"]} if "label" in a else {}) for a in t.aqms],
        buffer=t.buffer.axis(),
        ratio=t.ratio.axis(),
        threshold=float(t.refine.threshold),
        rounds=t.refine.rounds,
        file=file,
    )
    # Every pair under every AQM makes a valid scenario (at the plane's centre).

    # An AQM may have no parameters in part of the plane (RED below a minimum buffer: those
    # cells are marked), but it must have them at the centre or at the largest buffer.
    mid_r = _sig(math.sqrt(spec.ratio.low * spec.ratio.high))
    for aqm in spec.aqms:
        for a, b in spec.pairs()[:1] + [(c, c) for c in spec.ccs]:
            first: str | None = None
            for buf in (_sig(math.sqrt(spec.buffer.low * spec.buffer.high)), _sig(spec.buffer.high)):
                try:
                    check_with_engine(spec.scenario(a, b, _no_label(aqm), buf, mid_r, spec.seeds[0]), file=None)
                    first = None
                    break
                except ValidationError as e:
                    err = error_from_validation(e, None, None)
                    first = first or f"{err.key}: {err.detail}"
                except ScenarioError as e:
                    first = first or f"{e.key + ': ' if e.key else ''}{e.detail}"
            if first is not None:
                raise located(AtlasError, first, key="aqms", file=file, text=text)
    return spec


def _no_label(aqm: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in aqm.items() if k != "label"}


def load_spec(path: str | Path | None = None, *, quick: bool = False) -> AtlasSpec:
    p = Path(path) if path is not None else default_spec_path()
    return parse_spec(read_utf8(p, AtlasError), file=str(path) if path is not None else str(p), quick=quick)


# ------------------------------------------------------------------------------------------
# Cells and refinement
# ------------------------------------------------------------------------------------------


@dataclass
class Cell:
    pair: tuple[str, str]
    aqm: str
    x0: float  # log10 buffer (BDP)
    x1: float
    y0: float  # log10 ratio
    y1: float
    depth: int
    values: dict[str, float] = field(default_factory=dict)
    run: str | None = None
    #: Why the cell has no values (its scenario is not valid), else None.
    error: str | None = None

    @property
    def buffer(self) -> float:
        return _sig(10 ** ((self.x0 + self.x1) / 2))

    @property
    def ratio(self) -> float:
        return _sig(10 ** ((self.y0 + self.y1) / 2))

    def split(self) -> list[Cell]:
        xm, ym = (self.x0 + self.x1) / 2, (self.y0 + self.y1) / 2
        return [Cell(self.pair, self.aqm, a, b, c, e, self.depth + 1) for a, b in ((self.x0, xm), (xm, self.x1)) for c, e in ((self.y0, ym), (ym, self.y1))]

    def touches(self, o: Cell) -> bool:
        """Do the two rectangles share a stretch of edge?"""
        eps = 1e-9
        share_x = min(self.x1, o.x1) - max(self.x0, o.x0) > eps
        share_y = min(self.y1, o.y1) - max(self.y0, o.y0) > eps
        return (share_x and (abs(self.y1 - o.y0) < eps or abs(o.y1 - self.y0) < eps)) or (share_y and (abs(self.x1 - o.x0) < eps or abs(o.x1 - self.x0) < eps))


METRICS = ("jain", "harm_first", "harm_second")


def _to_split(cells: list[Cell], threshold: float, rounds: int) -> set[int]:
    out: set[int] = set()
    for i, j in itertools.combinations(range(len(cells)), 2):
        a, b = cells[i], cells[j]
        if not a.touches(b):
            continue
        if any(abs(a.values[m] - b.values[m]) > threshold for m in METRICS):
            if a.depth < rounds:
                out.add(i)
            if b.depth < rounds:
                out.add(j)
    return out


def _cell_runs(spec: AtlasSpec, c: Cell, aqm: dict[str, Any]) -> list[tuple[Scenario, Scenario, Scenario]]:

    out = []
    for seed in spec.seeds:
        s = spec.scenario(c.pair[0], c.pair[1], _no_label(aqm), c.buffer, c.ratio, seed)
        triple = (s, solo_baseline(s, 0), solo_baseline(s, 1))
        for x in triple:
            check_with_engine(x, file=None)
        out.append(triple)
    return out


def _values(runs_dir: Path, triples: list[tuple[Scenario, Scenario, Scenario]]) -> dict[str, float]:
    acc: dict[str, list[float]] = {m: [] for m in METRICS}
    for s, b0, b1 in triples:
        mixed, base0, base1 = (json.loads((runs_dir / x.hash() / "summary.json").read_text(encoding="utf-8")) for x in (s, b0, b1))
        acc["jain"].append(mixed["metrics"]["jain"])
        q = mixed["metrics"]["sojourn_ms"]["mean"]
        for i, (m, base) in enumerate((("harm_first", base0), ("harm_second", base1))):
            t, _ = engine.harm(mixed["classes"][i]["goodput_bps"], base["classes"][i]["goodput_bps"], q, base["metrics"]["sojourn_ms"]["mean"])
            if t is None:
                raise ValueError(f"harm undefined in {s.hash()}: a solo baseline delivered nothing")
            acc[m].append(t)
    return {m: sum(v) / len(v) for m, v in acc.items()}


Maps = dict[tuple[tuple[str, str], str], list[Cell]]
Triples = dict[int, list[tuple[Scenario, Scenario, Scenario]]]


def initial_maps(spec: AtlasSpec) -> Maps:
    """The `levels × levels` initial cells of every (pair, AQM) map."""
    xe, ye = spec.buffer.edges(), spec.ratio.edges()
    maps: Maps = {}
    for pair in spec.pairs():
        for label in spec.aqm_labels():
            maps[(pair, label)] = [Cell(pair, label, xe[i], xe[i + 1], ye[j], ye[j + 1], 0) for i in range(len(xe) - 1) for j in range(len(ye) - 1)]
    return maps


def _plan_round(spec: AtlasSpec, todo: list[Cell], all_runs: dict[str, Run]) -> Triples:
    """The runs of the cells `todo` (added to `all_runs`, shared between pairs), by cell; a cell
    without a valid scenario is marked instead."""
    aqm_by_label = dict(zip(spec.aqm_labels(), spec.aqms))
    triples: Triples = {}
    for c in todo:
        try:
            triples[id(c)] = _cell_runs(spec, c, aqm_by_label[c.aqm])
        except ScenarioError as e:
            # A discipline whose parameters do not exist at this cell (RED's tc derivation
            # below a minimum buffer): the cell is marked, not run.
            c.values, c.error = {m: math.nan for m in METRICS}, f"{e.key + ': ' if e.key else ''}{e.detail}"
    for c in todo:
        for s, b0, b1 in triples.get(id(c), []):
            params = {"pair": f"{c.pair[0]}-{c.pair[1]}", "aqm": c.aqm, "buffer_bdp": c.buffer, "rtt_ratio": c.ratio, "seed": s.seed}
            all_runs.setdefault(s.hash(), Run({**params, "role": "mixed"}, s))
            all_runs.setdefault(b0.hash(), Run({**params, "role": f"solo-{c.pair[0]}"}, b0))
            all_runs.setdefault(b1.hash(), Run({**params, "role": f"solo-{c.pair[1]}"}, b1))
    return triples


def first_round(spec: AtlasSpec) -> tuple[list[Run], int]:
    """The runs of the initial cells and the number of cells: what `run_atlas` runs first, for
    an estimate made before it starts."""
    maps = initial_maps(spec)
    all_runs: dict[str, Run] = {}
    todo = [c for cells in maps.values() for c in cells]
    _plan_round(spec, todo, all_runs)
    return list(all_runs.values()), len(todo)


def max_refined_cells(spec: AtlasSpec, cells: int) -> int:
    """At most how many cells refinement adds to `cells` initial ones: every cell split at
    every depth below `rounds`, four children each."""
    return cells * sum(4**k for k in range(1, spec.rounds + 1))


@writes_directory
def run_atlas(
    spec: AtlasSpec,
    directory: str | Path,
    *,
    jobs: int | None = None,
    cluster: str | None = None,
    on_round: Callable[[int, int, int], None] | None = None,
    on_runs: Callable[[int, int, int, int], None] | None = None,
    on_plan: Callable[[list[Run], int], None] | None = None,
) -> pd.DataFrame:
    """Evaluate the initial cells of every (pair, AQM) map, then refine round by round; write
    DIR/atlas.parquet (one row per final cell), DIR/cells/<hash>.toml and return the cells.
    `on_plan(runs, cells)` once the initial cells' runs are known, before any starts;
    `on_round(round, cells_this_round, runs_simulated)` after each round. Interrupted
    (KeyboardInterrupt), the local workers are ended at once and their half-written runs
    removed."""

    d = Path(directory)
    maps = initial_maps(spec)
    all_runs: dict[str, Run] = {}
    todo = [c for cells in maps.values() for c in cells]
    triples = _plan_round(spec, todo, all_runs)
    if on_plan:
        on_plan(list(all_runs.values()), len(todo))  # before anything is written: it may refuse
    d.mkdir(parents=True, exist_ok=True)
    (d / "cells").mkdir(exist_ok=True)
    pool = local_pool(jobs or os.cpu_count() or 1) if cluster is None else None
    simulated = 0
    try:
        for rnd in range(spec.rounds + 1):
            if rnd > 0:
                triples = _plan_round(spec, todo, all_runs)
            res = run_sweep(RunList(f"atlas-{spec.name}", list(all_runs.values()), spec.file), d, jobs=jobs, cluster=cluster, on_progress=on_runs, pool=pool)
            simulated += res.ran
            if res.failed:
                h, msg = res.failed[0]
                raise RuntimeError(f"run {h} failed: {msg} ({len(res.failed)} failed; finished runs are kept, run again to retry)")
            for c in todo:
                if id(c) not in triples:
                    continue
                c.values = _values(d / "runs", triples[id(c)])
                c.run = triples[id(c)][0][0].hash()
                target = d / "cells" / f"{c.run}.toml"
                if not target.is_file():
                    write_text(
                        target,
                        scenario_toml(
                            triples[id(c)][0][0],
                            header=f"atlas {spec.name}: {c.pair[0]} vs {c.pair[1]} under {c.aqm}, buffer {c.buffer:g} BDP, RTT ratio {c.ratio:g}",
                        ),
                    )
            _write_cells(d, spec, maps, len(all_runs), simulated, rnd)
            if on_round:
                on_round(rnd, len(todo), simulated)
            if rnd == spec.rounds:
                break
            todo = []
            for key, cells in maps.items():
                split = _to_split(cells, spec.threshold, spec.rounds)
                kept = [c for i, c in enumerate(cells) if i not in split]
                new = [n for i in sorted(split) for n in cells[i].split()]
                maps[key] = kept + new
                todo += new
            if not todo:
                break
    except BaseException:
        if pool is not None:
            stop_workers(pool)
            remove_leftovers(d / "runs")
        raise
    if pool is not None:
        pool.shutdown()
    return read_table(d / "atlas.parquet").to_pandas()


def _write_cells(d: Path, spec: AtlasSpec, maps: dict[tuple[tuple[str, str], str], list[Cell]], runs: int, simulated: int, rnd: int) -> None:
    """DIR/atlas.parquet (one row per evaluated cell) and DIR/atlas.json, after every round, so
    an atlas stopped during a refinement round still has a complete map of the round before."""

    rows = []
    for (pair, label), cells in maps.items():
        for c in cells:
            rows.append(
                {
                    # A plugin CC by its struct_ops name, as the runs' results call it.
                    "first": cc_label(pair[0]),
                    "second": cc_label(pair[1]),
                    "aqm": label,
                    "buffer_bdp": c.buffer,
                    "rtt_ratio": c.ratio,
                    "depth": c.depth,
                    "x0": c.x0,
                    "x1": c.x1,
                    "y0": c.y0,
                    "y1": c.y1,
                    **c.values,
                    "run": c.run,
                    "error": c.error,
                }
            )
    df = pd.DataFrame(rows)
    write_parquet(d / "atlas.parquet", pa.Table.from_pandas(df, preserve_index=False))
    doc = {
        "name": spec.name,
        "rate": spec.rate,
        "rtt": spec.rtt,
        "duration": spec.duration,
        "seeds": spec.seeds,
        "count": spec.count,
        "ccs": [cc_label(c) for c in spec.ccs],
        "aqms": spec.aqm_labels(),
        "threshold": spec.threshold,
        "rounds": rnd,
        "rounds_asked": spec.rounds,
        "cells": len(df),
        "runs": runs,
        "simulated": simulated,
    }
    write_text(d / "atlas.json", json.dumps(doc, indent=1) + "\n")
