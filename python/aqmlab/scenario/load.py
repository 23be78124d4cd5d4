"""Reading a scenario: TOML text → a validated ``Scenario``, checked by the engine; bad input
raises ``ScenarioError`` with one message naming the file, line and dotted key."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from pydantic import (
    ValidationError,
)

from aqmlab import engine
from aqmlab.inputs import loader
from aqmlab.inputs.errors import ScenarioError, read_utf8
from aqmlab.inputs.locate import locate
from aqmlab.scenario.model import Scenario
from aqmlab.scenario.parts import Flows, PluginAqm, Workload, plugin_cc

__all__ = ["check_with_engine", "error_from_validation", "load_scenario", "parse_scenario"]

# ------------------------------------------------------------------------------------------
# Loading, with errors located in the file
# ------------------------------------------------------------------------------------------


def error_from_validation(e: ValidationError, text: str | None, file: str | None) -> ScenarioError:
    """One located ScenarioError for a validation error of a scenario (`inputs.loader`'s rules);
    a sweep's or search's run scenarios are reported through this too."""
    return loader.error_from_validation(e, model=Scenario, text=text, file=file)


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
    data = loader.read_toml(text, file=file)
    data.setdefault("name", default_name)
    if base_dir is not None:
        _resolve_files(data, base_dir)
    try:
        # base_dir: where a plugin's `module` is relative to (PluginAqm).
        scenario = Scenario.model_validate(data, context={"base_dir": base_dir})
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
            if f.cc == "cbr" or plugin_cc(f.cc) is not None:
                continue  # a plugin takes no tunables (validation refuses them); the engine loads its module below
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
        engine.check(json.dumps(s.engine_config()))
    except ValueError as e:
        msg = str(e)
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_.\[\]]*): (.*)$", msg)
        if m:
            key, detail = m.group(1), m.group(2)
            # A plugin's refusal of one of its options ("plugin x.wasm: <option>: why") is
            # about that option's key.
            m2 = re.match(r"^(plugin \S+): ([a-z][a-z0-9_]*): (.*)$", detail)
            if key == "bottleneck.aqm" and m2 and isinstance(s.bottleneck.aqm, PluginAqm) and m2.group(2) in s.bottleneck.aqm.options():
                fail(f"{key}.{m2.group(2)}", f"{m2.group(3)} ({m2.group(1)})")
            # Engine classes are the flow classes, then the workloads.
            m2 = re.match(r"^flows\[(\d+)\](.*)$", key)
            if m2 and int(m2.group(1)) >= len(s.flows):
                key = f"workload[{int(m2.group(1)) - len(s.flows)}]{m2.group(2).replace('.workload', '')}"
            fail(key, detail)
        fail("bottleneck", msg)
