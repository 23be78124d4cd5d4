"""Reading a scenario: TOML text → a validated ``Scenario``, checked by the engine; bad input
raises ``ScenarioError`` with one message naming the file, line and dotted key."""

from __future__ import annotations

import difflib
import json
import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from pydantic import (
    BaseModel,
    ValidationError,
)

from aqmlab.inputs.errors import ScenarioError, read_utf8
from aqmlab.inputs.locate import locate
from aqmlab import engine
from aqmlab.scenario.lower import AqmOptionError
from aqmlab.scenario.model import Scenario
from aqmlab.scenario.parts import AQM_MODELS, Bottleneck, Flows, Host, KeyedValueError, Marker, Measure, SizeDistribution, Workload

__all__ = ["check_with_engine", "error_from_validation", "load_scenario", "parse_scenario"]

# ------------------------------------------------------------------------------------------
# Loading, with errors located in the file
# ------------------------------------------------------------------------------------------


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in AQM_MODELS and out.endswith("aqm"):
            continue  # pydantic's discriminator tag in the location
        elif isinstance(part, str) and (part.startswith("function-") or part.endswith("]")):
            continue
        else:
            out += ("." if out else "") + str(part)
    return out


def _allowed_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Field names of the model at `loc` (for "did you mean" suggestions)."""
    m: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        if part in AQM_MODELS:
            m = AQM_MODELS[part]
            continue
        fields = getattr(m, "model_fields", {})
        if part not in fields:
            return []
        ann = fields[part].annotation
        for cand in (Bottleneck, Flows, Workload, SizeDistribution, Marker, Measure, Host):
            if cand is ann or (getattr(ann, "__args__", None) and cand in ann.__args__):
                m = cand
                break
        else:
            if part == "aqm":
                return []
    return list(getattr(m, "model_fields", {}).keys())


def error_from_validation(e: ValidationError, text: str | None, file: str | None) -> ScenarioError:
    errors = e.errors(include_url=False)
    # A misspelt key also makes the right one "missing": report the misspelling.
    err = next((x for x in errors if x["type"] == "extra_forbidden"), errors[0])
    loc = tuple(err["loc"])
    key = _dotted(loc)
    msg = err["msg"]
    keyed = (err.get("ctx") or {}).get("error")
    if isinstance(keyed, KeyedValueError):
        key, msg = keyed.key, str(keyed)
    elif err["type"] == "extra_forbidden":
        allowed = _allowed_keys(Scenario, loc)
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        msg = "unknown key" + (f" (did you mean {close[0]!r}?)" if close else f" (allowed: {', '.join(allowed)})" if allowed else "")
    elif err["type"] == "missing":
        msg = "required key is missing"
    else:
        msg = re.sub(r"^(Value error|Assertion failed), ", "", msg)
        if err["type"] not in ("value_error",) and "input" in err and not isinstance(err["input"], (dict, list)):
            msg = f"{err['input']!r}: {msg}"
    line = locate(text, key) if text is not None and key else None
    return ScenarioError(msg, file=file, line=line, key=key or None)


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a TOML scenario file (files it names are relative to it)."""
    p = Path(path)
    text = read_utf8(p)
    return parse_scenario(text, file=str(path), default_name=p.stem, base_dir=p.parent)


def _resolve_files(data: dict[str, Any], base_dir: Path) -> None:
    for w in data.get("workload", []) if isinstance(data.get("workload"), list) else []:
        size = w.get("size") if isinstance(w, dict) else None
        if isinstance(size, dict) and isinstance(size.get("file"), str) and not Path(size["file"]).is_absolute():
            size["file"] = str(base_dir / size["file"])


def parse_scenario(text: str, *, file: str | None = None, default_name: str = "scenario", base_dir: Path | None = None) -> Scenario:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"\(at line (\d+), column \d+\)", str(e))
        line = int(m.group(1)) if m else None
        msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(e))
        raise ScenarioError(f"TOML syntax: {msg}", file=file, line=line) from None
    data.setdefault("name", default_name)
    if base_dir is not None:
        _resolve_files(data, base_dir)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as e:
        raise error_from_validation(e, text, file) from None
    # The engine checks what only it knows (RED's tc derivation, CC tunables).

    check_with_engine(scenario, text=text, file=file)
    return scenario


def check_with_engine(s: Scenario, *, text: str | None = None, file: str | None = None) -> None:
    """Ask the engine to validate what only it knows; raise a located ScenarioError."""
    def fail(key: str, msg: str) -> NoReturn:
        line = locate(text, key) if text is not None else None
        raise ScenarioError(msg, file=file, line=line, key=key)

    sections: tuple[tuple[str, Sequence[Flows | Workload]], ...] = (("flows", s.flows), ("workload", s.workload))
    for section, items in sections:
        for i, f in enumerate(items):
            if f.cc == "cbr":
                continue
            err = engine.check_cc(json.dumps({"name": f.cc, **f.cc_params}))
            if err:
                m = re.match(r"^unknown field `([^`]+)`(.*)$", err)
                if m:
                    fail(f"{section}[{i}].cc_params.{m.group(1)}", f"unknown {f.cc} parameter{m.group(2)}")
                m = re.match(r"^([a-z_]+): (.*)$", err)
                if m:
                    fail(f"{section}[{i}].cc_params.{m.group(1)}", m.group(2))
                fail(f"{section}[{i}].cc_params", err)
    try:
        cfg = s.engine_config()
    except AqmOptionError as e:
        fail(f"bottleneck.aqm{'.' + e.key if e.key else ''}", e.message)
    try:
        engine.check(json.dumps(cfg))
    except ValueError as e:
        msg = str(e)
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_.\[\]]*): (.*)$", msg)
        if m:
            key, detail = m.group(1), m.group(2)
            # Engine classes are the flow classes, then the workloads.
            m2 = re.match(r"^flows\[(\d+)\](.*)$", key)
            if m2 and int(m2.group(1)) >= len(s.flows):
                key = f"workload[{int(m2.group(1)) - len(s.flows)}]{m2.group(2).replace('.workload', '')}"
            fail(key, detail)
        fail("bottleneck", msg)
