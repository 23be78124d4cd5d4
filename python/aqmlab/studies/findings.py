"""The seed papers' findings beside what aqmlab measures in the same setting.

A findings file (`studies/<study>.findings.toml`) lists, for one study, what its paper states
and a claim over the study's results that a run of the study can check:

    [[finding]]
    id = "dctcp-step-k017-util"
    statement = "2 DCTCP flows, STEP at K = 0.17: utilization below 60 %"
    source = "§V.A, Fig. 1"
    where = { mix = "dctcp", N = 2, K = 0.17, aqm = "step", C = "1Gbps", rtt = "5ms" }
    metric = "utilization"
    claim = "< 0.60"
    why = "where it differs, why"
    emulator = "what the real stack says in the emulator"

`where` selects rows of the sweep's index (docs/sweeps.md): a swept parameter by its label, or
a flow class's `class`, `cc` or `rtt_ms`. `metric` is an index column: the Rust-computed
summary of each run (`utilization`, `run_jain`, `sojourn_mean_rel_target`, ...) or of each
class (`rel_throughput`, `jain`, `mark_ratio`, ...). `ratio_to` (a selector like `where`)
divides the metric by the same metric of another class of the same run. The claim is one of

    "< x", "<= x", "> x", ">= x"     every selected value (agg = "all", the default) or
    "approx x ± t"  (or "x +- t")    their mean (agg = "mean") satisfies it
    "in [a, b]"
    "max over AXIS", "min over AXIS" the selected value is strictly the largest (smallest)
                                     among the runs that differ from it only in AXIS

and the verdict is computed from the runs, never typed in: reproduced (the claim holds),
differs (it does not), or not comparable (no run of the sweep has that setting, e.g. the quick
grid lacks it; or the metric has no value there).
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import pandas as pd
from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from aqmlab.inputs.errors import ScenarioError, read_utf8
from aqmlab.inputs.loader import InputModel, KeyedValueError, NonEmptyStr, dotted, load
from aqmlab.store.result import read_table
from aqmlab.studies import study_path
from aqmlab.sweep.spec import load_sweep

__all__ = ["Finding", "FindingsError", "Verdict", "load_findings", "parse_findings", "evaluate", "evaluate_all", "findings_path"]

REPRODUCED, DIFFERS, NOT_COMPARABLE = "reproduced", "differs", "not comparable"

#: Index columns a selector may name besides the sweep's axes: the flow class of a row.
CLASS_KEYS = ("class", "cc", "rtt_ms", "count")

_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_CMP = re.compile(rf"^\s*(<=|>=|<|>)\s*({_NUM})\s*$")
_APPROX = re.compile(rf"^\s*(?:approx\s+)?({_NUM})\s*(?:±|\+-|\+/-)\s*({_NUM})\s*$")
_RANGE = re.compile(rf"^\s*in\s*\[\s*({_NUM})\s*,\s*({_NUM})\s*\]\s*$")
_BEST = re.compile(r"^\s*(max|min)\s+over\s+(\S+)\s*$")


class FindingsError(ScenarioError):
    """A bad findings file: one message naming the file, line and key."""


@dataclass(frozen=True)
class Claim:
    """A parsed predicate: kind is "<", "<=", ">", ">=", "approx", "in", "max" or "min"."""

    kind: str
    a: float = 0.0
    b: float = 0.0
    over: str = ""

    def holds(self, v: float) -> bool:
        k = self.kind
        if k == "<":
            return v < self.a
        if k == "<=":
            return v <= self.a
        if k == ">":
            return v > self.a
        if k == ">=":
            return v >= self.a
        if k == "approx":
            return abs(v - self.a) <= self.b
        if k == "in":
            return self.a <= v <= self.b
        raise AssertionError(k)  # "max"/"min" are judged against their siblings

    def text(self) -> str:
        if self.kind == "approx":
            return f"≈ {self.a:g} ± {self.b:g}"
        if self.kind == "in":
            return f"in [{self.a:g}, {self.b:g}]"
        if self.kind in ("max", "min"):
            return f"{'largest' if self.kind == 'max' else 'smallest'} over {self.over}"
        return f"{self.kind} {self.a:g}"


def parse_claim(text: str) -> Claim:
    if m := _CMP.match(text):
        return Claim(m.group(1), float(m.group(2)))
    if m := _APPROX.match(text):
        return Claim("approx", float(m.group(1)), float(m.group(2)))
    if m := _RANGE.match(text):
        lo, hi = float(m.group(1)), float(m.group(2))
        if lo > hi:
            raise ValueError(f"{text!r}: the range's lower end is above its upper end")
        return Claim("in", lo, hi)
    if m := _BEST.match(text):
        return Claim(m.group(1), over=m.group(2))
    raise ValueError(f"{text!r} is not a claim (expected '< x', '<= x', '> x', '>= x', 'approx x ± t', 'in [a, b]', 'max over AXIS' or 'min over AXIS')")


@dataclass(frozen=True)
class Finding:
    id: str
    statement: str
    source: str
    where: dict[str, Any]
    metric: str
    claim: Claim
    claim_text: str
    agg: str = "all"
    ratio_to: dict[str, Any] = field(default_factory=dict)
    why: str = ""
    emulator: str = ""


@dataclass(frozen=True)
class Verdict:
    finding: Finding
    verdict: str
    measured: str  # what aqmlab measures, as text for the table
    values: tuple[float, ...] = ()  # the values the claim was judged on
    reason: str = ""  # for "not comparable": what is missing


def findings_path(study: str) -> Path:
    """The findings file shipped beside a study's sweep file."""

    return study_path(study).with_suffix(".findings.toml")


# ------------------------------------------------------------------------------------------
# The findings file
# ------------------------------------------------------------------------------------------


def _claim_text(v: str) -> str:
    parse_claim(v)
    return v


def _single(v: Any) -> Any:
    if isinstance(v, (dict, list)):
        raise ValueError("expected a single value (an axis label, a class name, a CC or an RTT in ms)")
    return v


#: A selector of index rows: column (a sweep axis, or a class column of `CLASS_KEYS`) = value.
#: Its keys are open (they are the study's axes): checked against the study's grid when the
#: validation's context has its `axes`.
Selector = dict[str, Annotated[Any, AfterValidator(_single)]]


class FindingSpec(InputModel):
    """One ``[[finding]]`` (the format is in this module's docstring)."""

    id: NonEmptyStr
    statement: NonEmptyStr
    source: NonEmptyStr
    where: Selector
    metric: NonEmptyStr
    claim: Annotated[NonEmptyStr, AfterValidator(_claim_text)]
    agg: Literal["all", "mean"] = "all"
    ratio_to: Selector = Field(default_factory=dict)
    why: str = ""
    emulator: str = ""

    @field_validator("where", "ratio_to")
    @classmethod
    def _on_the_grid(cls, v: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        if info.field_name == "where" and not v:
            raise ValueError("expected a table of column = value")
        axes = (info.context or {}).get("axes")
        if axes is not None:
            for k, x in v.items():
                if k not in axes and k not in CLASS_KEYS:
                    raise KeyedValueError(
                        dotted([k]), f"not an axis of the study (axes: {', '.join(axes)}) nor a class column ({', '.join(CLASS_KEYS)})", relative=True
                    )
                if k in axes and not any(_same(x, y) for y in axes[k]):
                    raise KeyedValueError(dotted([k]), f"{x!r} is not a value of the study's {k} axis ({', '.join(map(str, axes[k]))})", relative=True)
        return v

    @model_validator(mode="after")
    def _claim_fits(self, info: ValidationInfo) -> FindingSpec:
        if self.ratio_to and not (any(k in CLASS_KEYS for k in self.where) and any(k in CLASS_KEYS for k in self.ratio_to)):
            raise KeyedValueError(
                "ratio_to", f"a ratio is between two flow classes of the same runs: name one ({', '.join(CLASS_KEYS)}) in where and in ratio_to", relative=True
            )
        claim = parse_claim(self.claim)
        if claim.kind in ("max", "min"):
            axes = (info.context or {}).get("axes")
            if axes is not None and claim.over not in axes:
                raise KeyedValueError("claim", f"{claim.over!r} is not an axis of the study", relative=True)
            if claim.over not in self.where:
                raise KeyedValueError(
                    "claim", f"'{claim.kind} over {claim.over}' needs {claim.over} in where (the value that should be the {claim.kind})", relative=True
                )
        return self

    def finding(self) -> Finding:
        return Finding(
            id=self.id,
            statement=self.statement.strip(),
            source=self.source.strip(),
            where=dict(self.where),
            metric=self.metric,
            claim=parse_claim(self.claim),
            claim_text=self.claim,
            agg=self.agg,
            ratio_to=dict(self.ratio_to),
            why=self.why.strip(),
            emulator=self.emulator.strip(),
        )


class FindingsFile(InputModel):
    """A findings file: ``[[finding]]`` tables only, their ids distinct."""

    finding: list[FindingSpec] = Field(default_factory=list, validate_default=True)

    @field_validator("finding")
    @classmethod
    def _ids(cls, v: list[FindingSpec]) -> list[FindingSpec]:
        if not v:
            raise ValueError("no [[finding]] tables")
        seen: set[str] = set()
        for i, f in enumerate(v):
            if f.id in seen:
                raise KeyedValueError(f"[{i}].id", f"duplicate id {f.id!r}", relative=True)
            seen.add(f.id)
        return v


def parse_findings(text: str, *, file: str | None = None, axes: dict[str, list[Any]] | None = None) -> list[Finding]:
    """Parse a findings file. With `axes` (the full grid's axis → labels), every selector key
    must be an axis or a class column and every axis value one of the grid's."""
    doc = load(FindingsFile, text, file=file, error=FindingsError, context={"axes": axes})
    return [f.finding() for f in doc.finding]


def study_axes(study: str, *, quick: bool = False) -> dict[str, list[Any]]:
    """Axis → labels of a study's grid (full, or its [quick] form)."""
    return {name: list(labels) for name, labels in _study_axes(study, quick)}


@functools.cache
def _study_axes(study: str, quick: bool) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    # A report asks several times; a full grid takes a while to expand (fejes2020: 12 960 points).
    sw = load_sweep(study_path(study), quick=quick)
    return tuple((a.name, tuple(lab for lab, _ in a.values)) for a in sw.axes)


def load_findings(study: str) -> list[Finding]:
    """A study's findings, checked against its full grid."""
    p = findings_path(study)
    return parse_findings(read_utf8(p, FindingsError), file=str(p), axes=study_axes(study))


# ------------------------------------------------------------------------------------------
# Judging a finding on a sweep's index
# ------------------------------------------------------------------------------------------


def _same(a: Any, b: Any) -> bool:
    """Selector equality: numbers by value (2 == 2.0), anything else by its text."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return str(a) == str(b)


def _select(df: pd.DataFrame, sel: dict[str, Any]) -> pd.DataFrame:
    mask = pd.Series(True, index=df.index)
    for k, v in sel.items():
        if k not in df.columns:
            return df.iloc[0:0]
        # Each distinct value judged once: a full study's index has thousands of rows.
        mask &= df[k].isin([x for x in df[k].unique() if _same(x, v)])
    return df[mask]


def _fmt(v: float, metric: str = "") -> str:
    if metric.endswith("_bps"):
        return f"{v / 1e6:.1f} Mbit/s"
    if v != 0 and (abs(v) >= 1000 or abs(v) < 0.001):
        return f"{v:.3g}"
    return f"{v:.3f}"


def _setting(sel: dict[str, Any]) -> str:
    return ", ".join(f"{k} = {v}" for k, v in sel.items())


def _missing(df: pd.DataFrame, f: Finding, grid: dict[str, list[Any]], grid_name: str) -> str:
    """Why no run matches: the values the sweep's grid lacks, else what did not complete."""
    lacks = [f"{k} = {v}" for k, v in f.where.items() if grid and k not in CLASS_KEYS and (k not in grid or not any(_same(v, x) for x in grid[k]))]
    if lacks:
        return f"{grid_name} lacks {', '.join(lacks)}"
    if df.empty:
        return "no completed runs"
    absent = [f"{k} = {v}" for k, v in {**f.where, **f.ratio_to}.items() if k in CLASS_KEYS and not df[k].map(lambda x, v=v: _same(x, v)).any()]
    if absent:
        return f"no flow class with {', '.join(absent)} in this sweep"
    return f"no completed run with {_setting(f.where)} (the grid has it: run the sweep to the end)"


def evaluate(f: Finding, df: pd.DataFrame, grid: dict[str, list[Any]] | None = None, grid_name: str = "this sweep's grid") -> Verdict:
    """Judge one finding on a sweep's index (`aqmlab.load(DIR)`); `grid` is the sweep's axis
    → labels (to say what a grid lacks)."""
    grid = grid or {}
    rows = _select(df, f.where) if not df.empty else df
    if rows.empty:
        return Verdict(f, NOT_COMPARABLE, "–", reason=_missing(df, f, grid, grid_name))
    if f.metric not in rows.columns:
        return Verdict(f, NOT_COMPARABLE, "–", reason=f"the index has no column {f.metric!r}")
    if _is_run_metric(f.metric):
        rows = rows.drop_duplicates("run")
    if f.ratio_to:
        num = rows.drop_duplicates("run").set_index("run")[f.metric].astype(float)
        den_rows = _select(df, {k: v for k, v in f.where.items() if k not in CLASS_KEYS} | f.ratio_to)
        den = den_rows.drop_duplicates("run").set_index("run")[f.metric].astype(float)
        vals = (num / den.reindex(num.index)).replace([math.inf, -math.inf], math.nan)
    else:
        vals = pd.Series(rows[f.metric].astype(float).to_numpy(), index=rows["run"].to_numpy())
    vals = vals.dropna()
    if vals.empty:
        return Verdict(f, NOT_COMPARABLE, "–", reason=f"{f.metric} has no value in the selected runs")
    if f.claim.kind in ("max", "min"):
        return _best(f, df, rows, vals, list(grid))
    xs = tuple(float(v) for v in vals)
    if f.agg == "mean":
        m = sum(xs) / len(xs)
        ok = f.claim.holds(m)
        measured = f"{_fmt(m, f.metric)} (mean of {len(xs)} runs)" if len(xs) > 1 else _fmt(m, f.metric)
    else:
        ok = all(f.claim.holds(x) for x in xs)
        measured = _fmt(xs[0], f.metric) if len(xs) == 1 else f"{_fmt(min(xs), f.metric)} – {_fmt(max(xs), f.metric)} ({len(xs)} runs)"
    return Verdict(f, REPRODUCED if ok else DIFFERS, measured, xs)


def _best(f: Finding, df: pd.DataFrame, rows: pd.DataFrame, vals: pd.Series, axes: list[str]) -> Verdict:
    """'max/min over AXIS': in every group of runs that differ only in AXIS (and the same
    class selector), the selected run's value is the extreme one."""
    axis = f.claim.over
    params = [a for a in axes if a != axis and a in df.columns]
    cls = {k: v for k, v in f.where.items() if k in CLASS_KEYS}
    others = _select(df, cls) if cls else df
    if _is_run_metric(f.metric):
        others = others.drop_duplicates("run")
    wins, texts, judged = 0, [], []
    for run, v in vals.items():
        me = rows[rows["run"] == run].iloc[0]
        sib = others
        for p in params:
            sib = sib[sib[p].map(lambda x, y=me[p]: _same(x, y))]
        sib = sib[sib["run"] != run].dropna(subset=[f.metric])
        if sib.empty:
            continue
        best = sib[f.metric].max() if f.claim.kind == "max" else sib[f.metric].min()
        label = sib.loc[sib[f.metric].idxmax() if f.claim.kind == "max" else sib[f.metric].idxmin(), axis]
        # Strictly: a tie does not show what the paper states (one AQM stands out).
        ok = v > best if f.claim.kind == "max" else v < best
        wins += ok
        judged.append(float(v))
        texts.append(f"{_fmt(float(v), f.metric)} vs {label} {_fmt(float(best), f.metric)}")
    if not judged:
        return Verdict(f, NOT_COMPARABLE, "–", reason=f"no other {axis} in the same setting to compare with")
    measured = texts[0] if len(texts) == 1 else f"{wins} of {len(texts)} settings; e.g. {texts[0]}"
    return Verdict(f, REPRODUCED if wins == len(texts) else DIFFERS, measured, tuple(judged))


def _is_run_metric(metric: str) -> bool:
    """A whole-run column of the index (one value per run), not a flow class's."""
    return metric == "utilization" or metric.startswith(("run_", "sojourn_"))


def evaluate_all(directory: str | Path, study: str, *, index: pd.DataFrame | None = None) -> list[Verdict]:
    """Judge every finding of `study` on the sweep in `directory`; `index`: its index, when
    the caller has read it already (the report)."""

    d = Path(directory)
    doc = json.loads((d / "sweep.json").read_text(encoding="utf-8"))
    if index is not None:
        df = index
    else:
        df = read_table(d / "index.parquet").to_pandas() if (d / "index.parquet").is_file() else pd.DataFrame()
    grid: dict[str, list[Any]] = {}
    for r in doc["runs"]:
        for k, v in r["params"].items():
            if k not in doc["axes"]:
                continue
            if not any(_same(v, x) for x in grid.setdefault(k, [])):
                grid[k] = grid[k] + [v]
    full, quick = study_axes(study), None
    try:
        quick = study_axes(study, quick=True)
    except ScenarioError:
        pass
    same = lambda g: g is not None and set(g) == set(grid) and all(sorted(map(str, g[k])) == sorted(map(str, grid[k])) for k in g)  # noqa: E731
    name = "the quick grid" if same(quick) and not same(full) else "the full grid" if same(full) else "this sweep's grid"
    return [evaluate(f, df, grid, name) for f in load_findings(study)]
