"""Sweep files: a scenario plus the axes to vary, expanded into runs.

A sweep file is a scenario TOML with three optional extra tables::

    [sweep]                       # one axis per key; runs are the cartesian product
    N = [2, 10, 20]               # a bare name: a variable, usable in ${...} expressions
    f = [0.05, 0.5, 2]
    "bottleneck.aqm" = [{ kind = "taildrop" }, { kind = "pie", target = "${0.75*f}rtt" }]
    "flows.*.count" = ["${N/2}"]  # '*' = every flow class

    [sweep.cases.mix]             # an axis of named alternatives, each a patch of the scenario
    "cubic" = { flows = [{ cc = "cubic", count = "${N}", rtt = "10ms" }] }
    "cubic+bbr2" = { flows = [{ cc = "cubic", count = "${N/2}", rtt = "10ms" },
                              { cc = "bbr2", count = "${N/2}", rtt = "10ms" }] }
    "2-8 RTTs" = { only = { N = 10 }, flows = [...] }   # `only`: this case runs only with
                                                         # these values of the other axes

    exclude = [{ N = 2, mix = "cubic+bbr2" }]   # inside [sweep]: drop these combinations

    [quick]                       # the --quick form: overrides, and shorter axes
    duration = "20s"
    sweep = { N = [2, 10] }

    [report]                      # how `aqmlab report` lays out the figures
    x = "f"
    col = "N"
    row = "bottleneck.aqm"

Values may hold ``${expr}`` — arithmetic over the variables (and over the labels of other
axes, as strings). A value that is exactly one ``${...}`` becomes the number (an integer when
integral); otherwise the number is spliced into the string (``"${0.75*f}rtt"`` → ``"0.0375rtt"``).
A flow class whose `count` comes out as 0 is left out of that run (so "0 to 10 flows of each
CC" is two axes). Each run is the scenario with one value of every axis applied, validated
like any scenario, and identified by the hash of its canonical form.
"""

from __future__ import annotations

import ast
import copy
import itertools
import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import ConfigDict, Field, PlainValidator, ValidationError

from aqmlab.inputs.errors import read_utf8
from aqmlab.inputs.loader import InputModel, KeyedValueError, dotted, located, read_toml, validate
from aqmlab.scenario import Scenario, ScenarioError, check_with_engine, error_from_validation

__all__ = ["Sweep", "Run", "load_sweep", "parse_sweep", "SweepError"]


class SweepError(ScenarioError):
    """Bad sweep input: one message naming where and what."""


# ------------------------------------------------------------------------------------------
# ${...} expressions: + - * / // % ** and parentheses over numbers and variables.
# ------------------------------------------------------------------------------------------


def _pow(base: Any, exp: Any) -> Any:
    """`base ** exp`, refused when the result would exceed a double's range (2^1024): an
    integer power such as 9**9**9 would otherwise take minutes and gigabytes to compute."""
    if isinstance(base, (int, float)) and isinstance(exp, (int, float)) and abs(base) > 1 and exp > 0 and exp * math.log2(abs(base)) > 1024:
        raise ValueError(f"{base!r}**{exp!r} is too large")
    return operator.pow(base, exp)


_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: _pow,
}
_UNOPS: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}
FUNCS: dict[str, Callable[..., Any]] = {"min": min, "max": max, "round": round, "int": int, "ceil": math.ceil, "floor": math.floor}
EXPR = re.compile(r"\$\{([^}]*)\}")


def _eval(expr: str, env: dict[str, Any]) -> Any:
    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise ValueError(f"unknown variable {node.id!r} (sweep variables: {', '.join(sorted(env)) or 'none'})")
            return env[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNOPS:
            return _UNOPS[type(node.op)](ev(node.operand))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCS and not node.keywords:
            return FUNCS[node.func.id](*[ev(a) for a in node.args])
        raise ValueError(f"not allowed in an expression: {ast.unparse(node)!r}")

    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError:
        raise ValueError(f"${{{expr}}}: not an arithmetic expression") from None
    return ev(tree)


def _fmt_number(v: Any) -> str:
    if isinstance(v, float):
        if v.is_integer():
            return str(int(v))
        return format(v, ".12g")
    return str(v)


def substitute(value: Any, env: dict[str, Any]) -> Any:
    """Evaluate every ${...} in a (nested) value."""
    if isinstance(value, str):
        m = EXPR.fullmatch(value.strip())
        if m:
            v = _eval(m.group(1), env)
            if isinstance(v, float) and v.is_integer():
                return int(v)
            return v
        return EXPR.sub(lambda mm: _fmt_number(_eval(mm.group(1), env)), value)
    if isinstance(value, dict):
        return {k: substitute(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, env) for v in value]
    return value


# ------------------------------------------------------------------------------------------
# Axes
# ------------------------------------------------------------------------------------------


def _label(v: Any, i: int) -> Any:
    """What an axis value is called in the index: scalars as they are; tables by kind/cc/name."""
    if isinstance(v, dict):
        if v.get("kind") == "plugin" and isinstance(v.get("module"), str):
            return Path(v["module"]).name  # every plugin's kind is "plugin": its file tells them apart
        if set(v) == {"plugin"} and isinstance(v["plugin"], str):
            return Path(v["plugin"]).name  # a plugin CC, `cc = { plugin = "x.bpf.c" }`: by its file too
        for k in ("kind", "cc", "name"):
            if isinstance(v.get(k), str):
                return v[k]
        return f"#{i}"
    if isinstance(v, list):
        return f"#{i}"
    return v


@dataclass
class Axis:
    name: str
    #: (label, value) pairs; for a path axis the value goes at the path, for a variable it is
    #: the variable's value, for a cases axis it is a patch of the scenario.
    values: list[tuple[Any, Any]]
    kind: str  # "var" | "path" | "cases"


@dataclass
class Run:
    """One point of a sweep: the axis labels and the validated scenario."""

    params: dict[str, Any]
    scenario: Scenario

    @property
    def hash(self) -> str:
        return self.scenario.hash()


@dataclass
class Sweep:
    name: str
    base: dict[str, Any]
    axes: list[Axis]
    exclude: list[dict[str, Any]] = field(default_factory=list)
    report: dict[str, Any] = field(default_factory=dict)
    file: str | None = None
    text: str | None = None

    @property
    def axis_names(self) -> list[str]:
        return [a.name for a in self.axes]

    def size(self) -> int:
        return len(self.points())

    def points(self) -> list[dict[str, tuple[Any, Any]]]:
        """Every combination of axis values (label, value), exclusions removed, in file order."""
        # The exclusions by the axes they name, each a set of those axes' labels: a full grid
        # (fejes2020: 12 960 combinations, 6 exclusions) is looked up, not compared pairwise.
        excluded: dict[tuple[str, ...], set[tuple[Any, ...]]] = {}
        for ex in self.exclude:
            if not set(ex) <= set(self.axis_names):
                continue  # names an axis this sweep lacks: matches no point
            try:
                excluded.setdefault(tuple(ex), set()).add(tuple(ex.values()))
            except TypeError:
                continue  # a table or a list: no axis label equals it
        names = self.axis_names
        cases = [a.name for a in self.axes if a.kind == "cases"]
        out = []
        for combo in itertools.product(*[a.values for a in self.axes]):
            point = dict(zip(names, combo))
            if any(tuple(point[k][0] for k in keys) in labels for keys, labels in excluded.items()):
                continue
            if any(not all(point[k][0] == v for k, v in only.items()) for c in cases if isinstance(only := point[c][1].get("only"), dict)):
                continue
            out.append(point)
        return out

    def runs(self) -> list[Run]:
        """Every run, validated; the first bad one raises SweepError naming the axis values."""
        return [self._build(p) for p in self.points()]

    def _build(self, point: dict[str, tuple[Any, Any]]) -> Run:
        env: dict[str, Any] = {}
        for a in self.axes:
            label, value = point[a.name]
            if a.kind == "var":
                env[a.name] = value
            elif re.fullmatch(r"[A-Za-z_]\w*", a.name):
                env[a.name] = label
        data = copy.deepcopy(self.base)
        where = ", ".join(f"{k} = {v[0]!r}" for k, v in point.items())
        for a in self.axes:
            label, value = point[a.name]
            try:
                if a.kind == "path":
                    _set_path(data, a.name, copy.deepcopy(value))
                elif a.kind == "cases":
                    patch = copy.deepcopy(value)
                    patch.pop("only", None)
                    _merge(data, patch)
            except KeyError as e:
                raise SweepError(str(e.args[0]), file=self.file, key=f"sweep.{_quote(a.name)}") from None
        try:
            data = substitute(data, env)
        except (ValueError, ZeroDivisionError, TypeError, OverflowError) as e:
            raise SweepError(f"{e} (at {where})", file=self.file) from None
        if isinstance(data.get("flows"), list):
            data["flows"] = [f for f in data["flows"] if not (isinstance(f, dict) and f.get("count") == 0)]
        data.setdefault("name", self.name)
        try:
            # base_dir: a plugin's module is relative to the sweep file, as in a scenario file.
            scenario = Scenario.model_validate(data, context={"base_dir": Path(self.file).parent if self.file else None})
        except ValidationError as e:
            err = error_from_validation(e, None, None)
            key = err.key
            # Name the sweep key when the bad value came from one.
            for ax in self.axes:
                if ax.kind == "path" and key and (key == ax.name or key.startswith(ax.name + ".") or ax.name.startswith(key + ".")):
                    key = f"sweep.{_quote(ax.name)} → {key}"
                    break
            raise SweepError(f"{err.detail} (at {where})", file=self.file, key=key) from None

        try:
            check_with_engine(scenario, file=None)
        except ScenarioError as e:
            raise SweepError(f"{e.detail} (at {where})", file=self.file, key=e.key) from None
        return Run({k: v[0] for k, v in point.items()}, scenario)


def _quote(key: str) -> str:
    return f'"{key}"' if "." in key or "*" in key else key


def _set_path(data: dict[str, Any], path: str, value: Any) -> None:
    """Set a dotted path; '*' applies to every element of a list; integers index lists."""
    parts = path.split(".")

    def go(node: Any, i: int) -> None:
        part = parts[i]
        last = i == len(parts) - 1
        if part == "*":
            if not isinstance(node, list):
                raise KeyError(f"'*' needs a list at {'.'.join(parts[:i]) or 'the top'}")
            for el in node:
                if last:
                    raise KeyError("'*' cannot be the last part of a key")
                go(el, i + 1)
            return
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise KeyError(f"{'.'.join(parts[:i])} has {len(node)} entries: {part!r} is not an index of it")
            idx = int(part)
            if last:
                node[idx] = value
            else:
                go(node[idx], i + 1)
            return
        if not isinstance(node, dict):
            raise KeyError(f"{'.'.join(parts[:i])} is not a table")
        if last:
            node[part] = value
            return
        if part not in node:
            node[part] = {}
        go(node[part], i + 1)

    go(data, 0)


def _merge(data: dict[str, Any], patch: dict[str, Any]) -> None:
    """Apply a case's patch: tables merge recursively, anything else replaces; dotted keys in
    the patch are paths."""
    for k, v in patch.items():
        if "." in k:
            _set_path(data, k, v)
        elif isinstance(v, dict) and isinstance(data.get(k), dict):
            _merge(data[k], v)
        else:
            data[k] = v


_SCENARIO_TOP = set(Scenario.model_fields)


# ------------------------------------------------------------------------------------------
# The sweep file
# ------------------------------------------------------------------------------------------


def _axis_values(v: Any) -> list[Any]:
    if not isinstance(v, list):
        raise ValueError(f"must be a list of values, not {type(v).__name__}")
    if not v:
        raise ValueError("empty list: an axis needs at least one value")
    return v


def _exclude(v: Any) -> list[dict[str, Any]]:
    if not isinstance(v, list) or not all(isinstance(e, dict) for e in v):
        raise ValueError('must be a list of tables, e.g. [{ N = 2, mix = "cubic" }]')
    return v


def _cases_axis(v: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(v, dict) or not v:
        raise ValueError("needs at least one named case (a table of scenario patches)")
    for label, patch in v.items():
        if not isinstance(patch, dict):
            raise KeyedValueError(dotted([label]), "a case is a table patching the scenario", relative=True)
        if not isinstance(patch.get("only", {}), dict):
            raise KeyedValueError(dotted([label, "only"]), "must be a table of other axes' values", relative=True)
    return v


#: An axis: its values, at least one (a variable's numbers, or values of a scenario key).
AxisValues = Annotated[Any, PlainValidator(_axis_values)]
#: A cases axis: named patches of the scenario, each with an optional `only` (other axes'
#: values it runs with); the patches are scenario tables, validated with each run.
CasesAxis = Annotated[Any, PlainValidator(_cases_axis)]


class SweepTable(InputModel):
    """``[sweep]``: every key but `exclude` and `cases` is an axis (a variable, or a dotted
    scenario key; '*' = every flow class)."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, AxisValues]

    exclude: Annotated[Any, PlainValidator(_exclude)] = Field(default_factory=list)
    cases: dict[str, CasesAxis] = Field(default_factory=dict)


class QuickTable(InputModel):
    """``[quick]``: overrides of the scenario (validated with each run), and a `sweep` table of
    shorter axes (each one of [sweep]'s), other exclusions or other cases."""

    model_config = ConfigDict(extra="allow")

    sweep: SweepTable = Field(default_factory=lambda: SweepTable.model_validate({}))


class ReportTable(InputModel):
    """``[report]``: the figures' layout — the axes along x, across columns and rows, and
    `where`, a selection of runs (axis = value)."""

    x: str | None = None
    col: str | None = None
    row: str | None = None
    where: dict[str, Any] = Field(default_factory=dict)


class SweepFile(InputModel):
    """A sweep file: a scenario (every other key, validated run by run with the axes' values
    applied) with the axes to vary."""

    model_config = ConfigDict(extra="allow")

    sweep: SweepTable = Field(default_factory=lambda: SweepTable.model_validate({}))
    quick: QuickTable | None = None
    report: ReportTable = Field(default_factory=lambda: ReportTable())


def _axes_from(table: dict[str, Any], at: dict[str, str], *, file: str | None, text: str | None) -> tuple[list[Axis], list[dict[str, Any]]]:
    """The axes of a validated [sweep] table; `at` is where each of its keys was written
    ("sweep" or "quick.sweep")."""
    axes: list[Axis] = []
    exclude = table.get("exclude", [])
    for key, values in table.items():
        if key in ("exclude", "cases"):
            continue
        is_path = "." in key or key in _SCENARIO_TOP
        labels = [_label(v, i) for i, v in enumerate(values)]
        axes.append(Axis(key, list(zip(labels, values)), "path" if is_path else "var"))
    for name, cases in table.get("cases", {}).items():
        axes.append(Axis(name, list(cases.items()), "cases"))
    names = [a.name for a in axes]
    for ex in exclude:
        for k in ex:
            if k not in names:
                raise located(SweepError, f"{k!r} is not an axis (axes: {', '.join(names)})", key=f"{at.get('exclude', 'sweep')}.exclude", file=file, text=text)
    for a in axes:
        if a.kind == "cases":
            for label, patch in a.values:
                for k in patch.get("only", {}):
                    if k not in names or k == a.name:
                        key = f"{at.get('cases.' + a.name, 'sweep')}.{dotted(['cases', a.name, label, 'only'])}"
                        raise located(SweepError, f"{k!r} is not another axis (axes: {', '.join(names)})", key=key, file=file, text=text)
    return axes, exclude


def parse_sweep(text: str, *, file: str | None = None, default_name: str = "sweep", quick: bool = False) -> Sweep:
    """Parse a sweep file's text; `quick` applies its [quick] table."""
    data = read_toml(text, file=file, error=SweepError)
    validate(SweepFile, data, text=text, file=file, error=SweepError)
    sweep_table = data.pop("sweep", {})
    quick_table = data.pop("quick", None)
    report = data.pop("report", {})
    at: dict[str, str] = {}
    if quick:
        if quick_table is None:
            raise SweepError("this sweep has no [quick] form", file=file)
        quick_table = dict(quick_table)
        q_sweep = quick_table.pop("sweep", {})
        for k, v in q_sweep.items():
            if k == "cases":
                for name, cases in v.items():
                    sweep_table.setdefault("cases", {})[name] = cases
                    at[f"cases.{name}"] = "quick.sweep"
            else:
                if k not in sweep_table and k != "exclude":
                    raise located(SweepError, f"{k!r} is not an axis of [sweep]", key=f"quick.sweep.{dotted([k])}", file=file, text=text)
                sweep_table[k] = v
                at[k] = "quick.sweep"
        _merge(data, quick_table)
    name = data.get("name", default_name)
    axes, exclude = _axes_from(sweep_table, at, file=file, text=text)
    sw = Sweep(name=name, base=data, axes=axes, exclude=exclude, report=report, file=file, text=text)
    if not sw.points():
        raise located(SweepError, "every combination is excluded: nothing to run", key=f"{at.get('exclude', 'sweep')}.exclude", file=file, text=text)
    return sw


def load_sweep(path: str | Path, *, quick: bool = False) -> Sweep:
    p = Path(path)
    text = read_utf8(p, SweepError)
    return parse_sweep(text, file=str(path), default_name=p.stem, quick=quick)
