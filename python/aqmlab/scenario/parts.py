"""The parts of a scenario: the bottleneck and its discipline, the flow classes, workloads,
the packet-value marker, the hosts and the measurement — typed, validated, frozen.

Every quantity is a string with a unit (see ``units``); validation parses it, refuses what
does not parse, and stores the canonical spelling, so a scenario's canonical JSON (and its
hash) does not depend on how the user wrote ``1000Mbps`` or ``1Gbps``.
"""

from __future__ import annotations

import difflib
import math
import re
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PlainSerializer,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from aqmlab import engine
from aqmlab.inputs.loader import KeyedValueError, error_from_validation
from aqmlab.scenario import plugin
from aqmlab.scenario import units as u

# ------------------------------------------------------------------------------------------
# Quantity fields
# ------------------------------------------------------------------------------------------


def _rate(v: str) -> str:
    return u.format_rate(u.parse_rate(v))


def _time(v: str) -> str:
    return u.format_time(u.parse_time(v))


def _positive_time(v: str) -> str:
    if u.parse_time(v) <= 0:
        raise ValueError(f"{v!r} must be positive")
    return _time(v)


def _size(v: str) -> str:
    q = u.parse_size(v)
    if q.value <= 0:
        raise ValueError(f"{v!r} must be positive")
    return u.format_size(q)


_START = re.compile(r"^\s*(uniform|staggered)\s*\(\s*([^,()]+?)\s*,\s*([^,()]+?)\s*\)\s*$")


def _schedule(v: str, what: str, example: str) -> str:
    """A start or stop schedule: a time, uniform(a, b) or staggered(first, spacing)."""
    if not isinstance(v, str):
        raise ValueError(f"{v!r} is not a {what} time")
    m = _START.match(v)
    if m:
        a, b = u.parse_time(m.group(2)), u.parse_time(m.group(3))
        if m.group(1) == "uniform" and a > b:
            raise ValueError(f"{v!r}: uniform(a, b) needs a <= b")
        if m.group(1) == "staggered" and b <= 0:
            raise ValueError(f"{v!r}: staggered(first, spacing) needs a positive spacing")
        return f"{m.group(1)}({u.format_time(a)}, {u.format_time(b)})"
    try:
        return u.format_time(u.parse_time(v))
    except ValueError:
        raise ValueError(f"{v!r} is not a {what} (expected {example})") from None


def _start(v: str) -> str:
    return _schedule(v, "start", "a time such as 0s, uniform(0s, 1s) or staggered(0s, 10s)")


def _stop(v: str) -> str:
    return _schedule(v, "stop", "a time such as 60s, uniform(50s, 60s) or staggered(60s, 10s)")


Rate = Annotated[str, AfterValidator(_rate)]
Time = Annotated[str, AfterValidator(_time)]
PositiveTime = Annotated[str, AfterValidator(_positive_time)]
Size = Annotated[str, AfterValidator(_size)]
Start = Annotated[str, AfterValidator(_start)]
Stop = Annotated[str, AfterValidator(_stop)]


#: Marks a key added to the scenario format after scenarios were first hashed: the canonical
#: form leaves it out while it holds its default, so every scenario written before the key
#: existed keeps its hash (and its stored runs).
ADDED_LATER: dict[str, Any] = {"canonical": "omitted at its default"}


class Model(BaseModel):
    # validate_default: defaults go through the same canonicalisation as given values, so
    # the canonical form (and hash) of a re-read canonical scenario is unchanged.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=False, validate_default=True)

    def inapplicable(self) -> tuple[str, ...]:
        """Keys that mean nothing given the others (validation refuses them when given): left
        out of the canonical form."""
        return ()

    def canonical(self) -> dict[str, Any]:
        """The model as JSON with every default filled in, less its inapplicable keys and the
        keys `ADDED_LATER` that hold their default; the same rule for every part inside."""
        d: dict[str, Any] = self.model_dump(mode="json")
        for name, field in type(self).model_fields.items():
            v = getattr(self, name)
            if name in self.inapplicable() or (field.json_schema_extra == ADDED_LATER and v == field.get_default(call_default_factory=True)):
                del d[name]
            elif isinstance(v, Model):
                d[name] = v.canonical()
            elif isinstance(v, list):
                d[name] = [x.canonical() if isinstance(x, Model) else dx for x, dx in zip(v, d[name])]
        return d


# ------------------------------------------------------------------------------------------
# Queue disciplines: one model per kind, built from the engine's description of its options
# (`engine.describe_aqms()`, written next to each discipline in crates/aqm), so that names,
# units, defaults and ranges exist once.
# ------------------------------------------------------------------------------------------


#: How a scenario writes a value of each unit (for messages).
_UNIT_HINTS = {
    "time": "a time such as 10ms",
    "delay-target": "a delay such as 1ms or 0.17rtt",
    "size": "a size",
    "packets": "a number of packets such as 20pkt",
    "rate": "a rate such as 40Mbps",
}


def _check_range(text: Any, value: Any, r: dict[str, Any]) -> None:
    lo, hi = r["min"], r["max"]
    if lo is not None and (value < lo or (r["min_open"] and value == lo)):
        raise ValueError(f"{text!r} must be positive" if lo == 0 and r["min_open"] else f"{text!r} must be {'>' if r['min_open'] else '≥'} {lo:g}")
    if hi is not None and (value > hi or (r["max_open"] and value == hi)):
        raise ValueError(f"{text!r} must be {'<' if r['max_open'] else '≤'} {hi:g}")


def _quantity(unit: str, r: dict[str, Any]) -> Any:
    """The canonicalising validator of a quantity option (`unit` as the engine declares it)."""

    def check(v: str) -> str:
        if unit == "time":
            ns = u.parse_time(v)
            _check_range(v, ns, r)
            return u.format_time(ns)
        if unit == "delay-target":
            q = u.parse_target(v)
            _check_range(v, q.value, r)
            return u.format_size(q) if q.unit == "rtt" else u.format_time(q.value)
        if unit == "size":
            q = u.parse_size(v)
            _check_range(v, q.value, r)
            return u.format_size(q)
        if unit == "packets":
            q = u.parse_size(v, allow_time=False)
            if q.unit != "packets":
                raise ValueError(f"{v!r}: this option counts packets (e.g. 20pkt)")
            _check_range(v, q.value, r)
            return u.format_size(q)
        if unit == "rate":
            return u.format_rate(u.parse_rate(v))
        raise AssertionError(unit)

    return Annotated[str, AfterValidator(check)]


def _option_type(o: dict[str, Any]) -> Any:
    unit, r = o["unit"], o["range"]
    if unit in _UNIT_HINTS:
        return _quantity(unit, r)
    if unit == "bool":
        return bool
    if unit == "choice":
        return Literal[tuple(o["choices"])]
    bounds = {("gt" if r["min_open"] else "ge"): r["min"]} if r["min"] is not None else {}
    if r["max"] is not None:
        bounds["lt" if r["max_open"] else "le"] = r["max"]
    return Annotated[int if unit == "int" else float, Field(**bounds)]


class AqmModel(Model):
    """Base of the generated per-kind models: checks the description's "exactly one of"."""

    ABOUT: ClassVar[dict[str, Any]] = {}
    kind: str

    @model_validator(mode="after")
    def _exactly_one(self) -> AqmModel:
        units = {o["name"]: o["unit"] for o in self.ABOUT["options"]}
        for group in self.ABOUT["one_of"]:
            if sum(getattr(self, k) is not None for k in group) != 1:
                raise ValueError("give exactly one of " + " or ".join(f"{k} ({_UNIT_HINTS.get(units[k], units[k])})" for k in group))
        return self


def _aqm_model(about: dict[str, Any]) -> type[AqmModel]:
    fields: dict[str, Any] = {"kind": (Literal[about["kind"]], about["kind"])}
    for o in about["options"]:
        t = _option_type(o)
        if o["required"]:
            fields[o["name"]] = (t, ...)
        elif o["default"] is None:
            fields[o["name"]] = (t | None, None)
        else:
            fields[o["name"]] = (t, o["default"])
    name = "".join(w.capitalize() for w in about["kind"].split("_")) + "Aqm"
    return create_model(name, __base__=AqmModel, __doc__=about["summary"], ABOUT=(ClassVar[dict[str, Any]], about), **fields)


#: The generated model of each discipline, by kind (in the engine's registry order).
AQM_MODELS: dict[str, type[AqmModel]] = {kind: _aqm_model(d) for kind, d in engine.describe_aqms().items()}
TaildropAqm = AQM_MODELS["taildrop"]


# ------------------------------------------------------------------------------------------
# Plugin disciplines: `aqm = { kind = "plugin", module = "my_aqm.c", <its options> }`. The
# module declares its options (crates/plugin); a model generated from that declaration, one
# per module content, validates them as a built-in's are: the same unit strings, the declared
# range, unknown keys refused with a suggestion.
# ------------------------------------------------------------------------------------------


def _plugin_quantity(unit: str, lo: float | None, hi: float | None) -> Any:
    """The canonicalising validator of a plugin's quantity option. The range is checked where
    the value is absolute; a multiple of the reference RTT or of the BDP is checked by the
    engine once it is resolved (`bottleneck.aqm.<option>` all the same)."""

    def in_range(text: str, x: Fraction | int) -> None:
        if lo is not None and x < lo:
            raise ValueError(f"{text!r} must be ≥ {plugin.bound_text(unit, lo)}")
        if hi is not None and x > hi:
            raise ValueError(f"{text!r} must be ≤ {plugin.bound_text(unit, hi)}")

    def check(v: str) -> str:
        if unit == "time":
            ns = u.parse_time(v)
            in_range(v, ns)
            return u.format_time(ns)
        if unit == "delay-target":
            q = u.parse_target(v)
            if q.unit == "ns":
                in_range(v, q.value)
            return u.format_size(q) if q.unit == "rtt" else u.format_time(q.value)
        if unit == "size":
            q = u.parse_size(v)
            if q.unit in ("bytes", "packets"):
                # A plugin's size is bytes: a packet counts PACKET_BYTES (lower.py).
                in_range(v, q.value * (u.PACKET_BYTES if q.unit == "packets" else 1))
            return u.format_size(q)
        if unit == "packets":
            q = u.parse_size(v, allow_time=False)
            if q.unit != "packets":
                raise ValueError(f"{v!r}: this option counts packets (e.g. 20pkt)")
            in_range(v, q.value)
            return u.format_size(q)
        rate = u.parse_rate(v)
        in_range(v, rate)
        return u.format_rate(rate)

    return Annotated[str, AfterValidator(check)]


def _plugin_option_type(o: dict[str, Any]) -> Any:
    unit, lo, hi = o["unit"], o["min"], o["max"]
    if unit in _UNIT_HINTS:
        return _plugin_quantity(unit, lo, hi)
    if unit == "bool":
        return bool
    if unit == "choice":
        return Literal[tuple(o["choices"])]
    bounds = ({"ge": lo} if lo is not None else {}) | ({"le": hi} if hi is not None else {})
    return Annotated[int, Field(**bounds)] if unit == "int" else Annotated[float, Field(allow_inf_nan=False, **bounds)]


#: The options model of each module validated in this process, by its content hash.
_PLUGIN_OPTIONS: dict[str, type[BaseModel]] = {}


def _plugin_options(module: plugin.Module) -> type[BaseModel]:
    """The model of a module's aqm table: `kind`, `module` and the options it declares (each
    under an alias, so that no option name can clash with pydantic's own attributes)."""
    if module.sha256 not in _PLUGIN_OPTIONS:
        fields: dict[str, Any] = {"kind": (Literal["plugin"], "plugin"), "module": (str, ...)}
        for i, o in enumerate(module.info["options"]):
            default = plugin.default_value(o, module.name)
            t = _plugin_option_type(o)
            fields[f"option_{i}"] = (t if default is not None else t | None, Field(default, alias=o["name"]))
        config = ConfigDict(extra="forbid", frozen=True, strict=False, populate_by_name=False)
        _PLUGIN_OPTIONS[module.sha256] = create_model(f"Plugin_{module.sha256[:12]}", __config__=config, **fields)
    return _PLUGIN_OPTIONS[module.sha256]


class PluginAqm(AqmModel):
    """A discipline from a WebAssembly module (docs/plugins.md). `module` is held as the
    module's content hash (``sha256:<hex>``): the canonical form names the bytes that run,
    never a path, so the same module anywhere gives the same scenario hash, and an edited one
    another. The options the module declares are the table's other keys, every default filled
    in, in canonical spelling."""

    model_config = ConfigDict(extra="allow")
    ABOUT: ClassVar[dict[str, Any]] = {"kind": "plugin", "options": [], "one_of": []}
    kind: Literal["plugin"] = "plugin"
    #: A C file or .wasm module (relative to the scenario file), or ``sha256:<hex>``.
    module: str
    #: The module's AQMLAB_READS_VALUES, read when the table is validated.
    _reads_packet_values: bool = PrivateAttr(False)

    @model_validator(mode="wrap")
    @classmethod
    def _options_of_the_module(cls, data: Any, handler: ModelWrapValidatorHandler[PluginAqm], info: ValidationInfo) -> PluginAqm:
        if isinstance(data, dict) and "module" not in data:
            # The options are open keys: a misspelt `module` would read as "missing" alone.
            close = difflib.get_close_matches("module", [k for k in data if isinstance(k, str) and k != "kind"], n=1)
            if close:
                raise KeyedValueError(close[0], "unknown key (did you mean 'module'?)", relative=True)
            raise KeyedValueError("module", "required key is missing (a C file, a .wasm module or sha256:<hex>)", relative=True)
        if not isinstance(data, dict) or not isinstance(data.get("module"), str):
            # An instance as it is; a malformed table gets pydantic's own message.
            return data if isinstance(data, PluginAqm) else handler(data)
        base = (info.context or {}).get("base_dir")
        try:
            module = plugin.resolve(data["module"], Path(base) if base is not None else None)
            model = _plugin_options(module)
        except ValueError as e:
            raise KeyedValueError("module", str(e), relative=True) from None
        try:
            options = model.model_validate(data)
        except ValidationError as e:
            err = error_from_validation(e, model=model, text=None, file=None)
            raise KeyedValueError(err.key or "", err.detail, relative=True) from None
        values = {o["name"]: getattr(options, f"option_{i}") for i, o in enumerate(module.info["options"])}
        validated = handler({"kind": "plugin", "module": module.ref, **values})
        validated._reads_packet_values = bool(module.info["reads_packet_values"])
        return validated

    def resolved(self) -> plugin.Module:
        """The module (in this process's resolutions, else the plugin cache)."""
        return plugin.resolve(self.module)

    def options(self) -> dict[str, Any]:
        """The option values by name, in canonical spelling (None: unset)."""
        return dict(self.__pydantic_extra__ or {})

    def reads_packet_values(self) -> bool:
        """Whether the module declares AQMLAB_READS_VALUES (the flows get a marker)."""
        return self._reads_packet_values


if TYPE_CHECKING:
    # The union is built at run time from the engine's registry; a type checker sees its base.
    AqmSpec = AqmModel
else:
    AqmSpec = Annotated[Union[(*AQM_MODELS.values(), PluginAqm)], Field(discriminator="kind")]  # noqa: UP007 (a union of a run-time tuple has no | form)
#: The built-in disciplines that read packet values, so that the flows need a `[marker]`
#: (a plugin says so itself: `PluginAqm.reads_packet_values`).
VALUE_AQMS = tuple(k for k, d in engine.describe_aqms().items() if d["reads_packet_values"])


def reads_packet_values(aqm: Any) -> bool:
    """Whether a discipline (a built-in's model or a plugin's) reads packet values."""
    return aqm.reads_packet_values() if isinstance(aqm, PluginAqm) else aqm.kind in VALUE_AQMS


def available(what: str) -> list[str]:
    return list(engine.ccs() if what == "cc" else engine.qdiscs())


# ------------------------------------------------------------------------------------------
# Congestion controls: a built-in's name, "cbr" (flows only), or a user's struct_ops BPF C
# file, `cc = { plugin = "my_cc.bpf.c" }` (docs/plugins.md, "Your own congestion control").
# The model holds a plugin CC as a string too, PLUGIN_CC + its cache reference
# ("plugin:sha256:<hex>": the hash of its module and source, `plugin.CcModule`), so that a
# class's `cc` is one type everywhere; its JSON (and so the canonical form and the hash) is
# the table `{ plugin = "sha256:<hex>" }`, which validates back to the same string.
# ------------------------------------------------------------------------------------------

#: The prefix of a plugin CC's `cc` as the model holds it.
PLUGIN_CC = "plugin:"
_PLUGIN_CC_REF = re.compile(r"^plugin:(sha256:[0-9a-f]{64})$")
_PLUGIN_CC_HINT = 'a plugin CC is { plugin = "my_cc.bpf.c" }: its struct_ops BPF C file, relative to the scenario file'


def plugin_cc(cc: str) -> plugin.CcModule | None:
    """The plugin CC a class's `cc` names (from this process's resolutions, else the plugin
    cache); None for a built-in or cbr."""
    m = _PLUGIN_CC_REF.match(cc)
    return plugin.resolve_cc(m.group(1)) if m else None


def cc_label(cc: str) -> str:
    """A class's CC as people read it: a built-in's name, cbr, or a plugin's struct_ops `.name`
    (e.g. aqmlab_reno), which is also what the engine's results call it."""
    mod = plugin_cc(cc)
    return mod.label if mod is not None else cc


def _plugin_cc_table(v: Any, info: ValidationInfo) -> Any:
    """``{ plugin = "my_cc.bpf.c" }`` (or ``"sha256:<hex>"``, a canonical scenario's) → the
    model's string, the file compiled and checked (`plugin.resolve_cc`) on the way."""
    if not isinstance(v, dict):
        return v
    for k in v:
        if k != "plugin":
            close = difflib.get_close_matches(str(k), ["plugin"], n=1)
            raise KeyedValueError(str(k), "unknown key (did you mean 'plugin'?)" if close else f"unknown key ({_PLUGIN_CC_HINT})", relative=True)
    if "plugin" not in v:
        raise KeyedValueError("plugin", f"required key is missing ({_PLUGIN_CC_HINT})", relative=True)
    if not isinstance(v["plugin"], str):
        raise KeyedValueError("plugin", f"{v['plugin']!r} is not a file name ({_PLUGIN_CC_HINT})", relative=True)
    base = (info.context or {}).get("base_dir")
    try:
        mod = plugin.resolve_cc(v["plugin"], Path(base) if base is not None else None)
    except ValueError as e:
        raise KeyedValueError("plugin", str(e), relative=True) from None
    return PLUGIN_CC + mod.ref


def _cc_json(cc: str) -> str | dict[str, str]:
    m = _PLUGIN_CC_REF.match(cc)
    return {"plugin": m.group(1)} if m else cc


#: A class's `cc`: a name, or a plugin's table held as PLUGIN_CC + its reference.
CcName = Annotated[str, BeforeValidator(_plugin_cc_table), PlainSerializer(_cc_json, when_used="always")]


def _check_cc(cc: str, *, cbr: bool) -> str:
    """A built-in's name (or cbr where `cbr`), or a plugin CC's reference that resolves."""
    if _PLUGIN_CC_REF.match(cc):
        plugin_cc(cc)  # ValueError: not in the plugin cache
        return cc
    known = available("cc")
    if cc in known or (cbr and cc == "cbr"):
        return cc
    where = "" if cbr else " for a workload"
    others = ", or cbr for unresponsive traffic" if cbr else ""
    raise ValueError(f"unknown cc {cc!r}{where} (available: {', '.join(known)}{others}; or your own: {{ plugin = 'my_cc.bpf.c' }})")


def _check_plugin_tunables(cc: str, cc_params: dict[str, Any]) -> None:
    """A plugin CC's cc_params set its tunables (its `const volatile` globals, which
    `aqmlab plugin build` lists): each must be one, with a value its C type holds."""
    module = plugin_cc(cc)
    if module is None:
        return
    tunables = {t["name"]: t for t in module.info.get("tunables", [])}
    declared = ", ".join(tunables) or "none (no const volatile global that it reads)"
    for name, value in cc_params.items():
        t = tunables.get(name)
        if t is None:
            raise KeyedValueError(f"cc_params.{name}", f"unknown tunable of {module.label} (it declares: {declared})", relative=True)
        if t["kind"] == "bool":
            if not isinstance(value, bool):
                raise KeyedValueError(f"cc_params.{name}", f"{value!r}: {name} is a {t['type']}, set with true or false", relative=True)
        elif isinstance(value, bool) or not isinstance(value, int):
            raise KeyedValueError(f"cc_params.{name}", f"{value!r}: {name} is a {t['type']}, set with an integer", relative=True)
        elif not t["min"] <= value <= t["max"]:
            raise KeyedValueError(f"cc_params.{name}", f"{value} does not fit {name}'s type {t['type']} ({t['min']}..{t['max']})", relative=True)


class Bottleneck(Model):
    rate: Rate
    buffer: Size
    rtt_ref: PositiveTime | None = None
    aqm: AqmSpec = Field(default_factory=TaildropAqm)

    @field_validator("aqm", mode="before")
    @classmethod
    def _known_aqm(cls, v: Any) -> Any:
        if isinstance(v, dict):
            kind = v.get("kind")
            known = [*available("aqm"), "plugin"]
            if kind is None:
                raise ValueError(f"missing 'kind' (one of: {', '.join(known)})")
            if kind not in known:
                raise ValueError(f"unknown aqm kind {kind!r} (available: {', '.join(known)})")
        return v


class Flows(Model):
    """One connection class: the same CC and base RTT."""

    #: A built-in's name, "cbr", or `{ plugin = "my_cc.bpf.c" }` (held as PLUGIN_CC + its
    #: reference: `plugin_cc`, `cc_label`).
    cc: CcName
    #: The engine counts a class's flows in 32 bits.
    count: Annotated[int, Field(ge=1, le=2**32 - 1)] = 1
    rtt: PositiveTime
    start: Start = "0s"
    #: Bulk and CBR flows: when each flow stops (a time, uniform(a, b) or staggered(first,
    #: spacing)); None = at the end of the run. The engine checks that every flow stops after
    #: it starts and refuses a stop for finite flows.
    stop: Stop | None = Field(None, json_schema_extra=ADDED_LATER)
    size: Size | None = None
    #: A TCP class: whether it negotiates ECN (its CC chooses the codepoint). A CBR class: the
    #: codepoint every datagram carries, "ect0" or "ect1" (an unresponsive ECN-capable source).
    ecn: bool | Literal["ect0", "ect1"] = False
    fq_pacing: bool = False
    name: str | None = None
    cc_params: dict[str, Any] = Field(default_factory=dict)
    #: For `cc = "cbr"`: the unresponsive constant bit rate of each flow.
    rate: Rate | None = None

    @field_validator("cc")
    @classmethod
    def _known_cc(cls, v: str) -> str:
        return _check_cc(v, cbr=True)

    @field_validator("ecn", mode="before")
    @classmethod
    def _ecn_value(cls, v: Any) -> Any:
        if isinstance(v, bool) or v in ("ect0", "ect1"):
            return v
        raise ValueError(f'{v!r}: expected true or false (a TCP class), or a cbr class\'s codepoint, "ect0" or "ect1"')

    @model_validator(mode="after")
    def _cbr_needs_a_rate(self) -> Flows:
        _check_plugin_tunables(self.cc, self.cc_params)
        if self.cc == "cbr":
            if self.rate is None:
                raise ValueError('cc = "cbr" (unresponsive constant bit rate) needs rate, e.g. rate = "50Mbps"')
            if self.cc_params or self.fq_pacing:
                raise ValueError("a cbr class takes no cc_params or fq_pacing")
            if self.ecn is True:
                raise ValueError('a cbr class negotiates nothing: its ecn is the codepoint its datagrams carry, "ect0" or "ect1"')
        elif self.rate is not None:
            raise ValueError(f'rate is for cc = "cbr" classes; a {cc_label(self.cc)} flow sets its own rate')
        elif isinstance(self.ecn, str):
            raise ValueError(f'ecn = "{self.ecn}" is for cbr classes; a {cc_label(self.cc)} flow negotiates ECN (ecn = true) and its CC chooses the codepoint')
        return self

    @field_validator("size")
    @classmethod
    def _size_in_bytes(cls, v: str | None) -> str | None:
        if v is not None and u.parse_size(v, allow_time=False).unit not in ("bytes", "packets"):
            raise ValueError(f"{v!r}: a flow size is bytes (e.g. 1MB) or packets")
        return v


class SizeDistribution(Model):
    """A flow-size distribution for a workload (finite flows arriving at random, `[[workload]]`)."""

    dist: Literal["fixed", "uniform", "exponential", "pareto", "lognormal", "empirical"]
    #: fixed: the size.
    size: Size | None = None
    #: uniform, pareto: bounds.
    min: Size | None = None
    max: Size | None = None
    #: exponential: the mean.
    mean: Size | None = None
    #: pareto: the shape α.
    alpha: Annotated[float, Field(gt=0.0)] | None = None
    #: lognormal: the median size and σ of ln(size).
    median: Size | None = None
    sigma: Annotated[float, Field(gt=0.0)] | None = None
    #: empirical: a CDF file — lines "size_bytes cumulative_probability" (whitespace or comma
    #: separated, # comments), sizes and probabilities non-decreasing, ending at 1 — relative to
    #: the scenario file.
    file: str | None = None
    #: empirical: the (size_bytes, cumulative_probability) points (read from `file`, or inline).
    points: list[tuple[float, float]] | None = None

    _NEEDS: ClassVar[dict[str, tuple[str, ...]]] = {
        "fixed": ("size",),
        "uniform": ("min", "max"),
        "exponential": ("mean",),
        "pareto": ("alpha", "min", "max"),
        "lognormal": ("median", "sigma"),
        "empirical": ("points",),
    }

    @model_validator(mode="before")
    @classmethod
    def _read_cdf_file(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("dist") == "empirical" and data.get("file") is not None and data.get("points") is None:
            path = Path(data["file"])
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as e:
                raise ValueError(f"file: cannot read {str(path)!r} ({e.strerror})") from None
            except UnicodeDecodeError as e:
                raise ValueError(f"file: {str(path)!r} is not UTF-8 text (byte offset {e.start})") from None
            points = []
            for n, line in enumerate(text.splitlines(), 1):
                line = line.split("#", 1)[0].strip()
                if not line:
                    continue
                parts = re.split(r"[\s,]+", line)
                try:
                    points.append((float(parts[0]), float(parts[1])))
                except (ValueError, IndexError):
                    raise ValueError(f"file: {str(path)!r} line {n}: expected 'size_bytes cumulative_probability', got {line!r}") from None
            data = {**data, "points": points}
        return data

    @model_validator(mode="after")
    def _fields_of_the_dist(self) -> SizeDistribution:
        need = self._NEEDS[self.dist]
        given = {k for k in ("size", "min", "max", "mean", "alpha", "median", "sigma", "points") if getattr(self, k) is not None}
        missing = [k for k in need if k not in given]
        extra = sorted(given - set(need))
        if missing:
            raise ValueError(f"dist = {self.dist!r} needs {', '.join(missing)}")
        if extra:
            raise ValueError(f"dist = {self.dist!r} takes {', '.join(need)}, not {', '.join(extra)}")
        for k in ("size", "min", "max", "mean", "median"):
            v = getattr(self, k)
            if v is not None and u.parse_size(v, allow_time=False).unit not in ("bytes", "packets"):
                raise ValueError(f"{k}: {v!r} must be a size in bytes (e.g. 1KB) or packets")
        if self.points is not None:
            pts = self.points
            if len(pts) < 2 or any(b[0] < a[0] or b[1] < a[1] for a, b in zip(pts, pts[1:])) or pts[0][0] < 1 or pts[0][1] < 0 or abs(pts[-1][1] - 1.0) > 1e-9:
                raise ValueError("the empirical CDF needs ≥ 2 points, sizes ≥ 1 byte and probabilities non-decreasing from ≥ 0 to exactly 1")
        return self

    def bytes_of(self, key: str) -> int:
        q = u.parse_size(getattr(self, key), allow_time=False)
        return int(q.value) * engine.MSS_BYTES if q.unit == "packets" else int(q.value)

    def mean_bytes(self) -> float:
        """The distribution's mean (for `load`)."""

        if self.dist == "fixed":
            return float(self.bytes_of("size"))
        if self.dist == "uniform":
            return (self.bytes_of("min") + self.bytes_of("max")) / 2
        if self.dist == "exponential":
            return float(self.bytes_of("mean"))
        if self.dist == "pareto":
            assert self.alpha is not None  # `pareto` requires it (_fields_of_the_dist)
            a, lo, hi = self.alpha, float(self.bytes_of("min")), float(self.bytes_of("max"))
            if abs(a - 1.0) < 1e-12:
                return lo * hi / (hi - lo) * math.log(hi / lo)
            return (lo**a / (1 - (lo / hi) ** a)) * a / (a - 1) * (lo ** (1 - a) - hi ** (1 - a))
        if self.dist == "lognormal":
            assert self.sigma is not None  # `lognormal` requires it (_fields_of_the_dist)
            return self.bytes_of("median") * math.exp(self.sigma**2 / 2)
        pts = self.points or []
        return sum((b[1] - a[1]) * (a[0] + b[0]) / 2 for a, b in zip(pts, pts[1:])) + pts[0][1] * pts[0][0]


class Workload(Model):
    """Finite flows arriving as a Poisson process (`[[workload]]`)."""

    #: A built-in's name or `{ plugin = "my_cc.bpf.c" }`, as for [[flows]].
    cc: CcName
    rtt: PositiveTime
    size: SizeDistribution
    #: Arrivals per second, e.g. "100/s" or 100 ...
    rate: Annotated[float, Field(gt=0.0)] | None = None
    #: ... or the offered load as a fraction of the bottleneck rate (rate = load·C / mean size).
    load: Annotated[float, Field(gt=0.0)] | None = None
    start: Time = "0s"
    stop: Time | None = None
    ecn: bool = False
    fq_pacing: bool = False
    name: str | None = None
    cc_params: dict[str, Any] = Field(default_factory=dict)

    @field_validator("rate", mode="before")
    @classmethod
    def _per_second(cls, v: Any) -> Any:
        if isinstance(v, str):
            m = re.fullmatch(r"\s*([0-9.eE+-]+)\s*/\s*s\s*", v)
            if not m:
                raise ValueError(f'{v!r}: an arrival rate is flows per second, e.g. "100/s"')
            return float(m.group(1))
        return v

    @field_validator("cc")
    @classmethod
    def _known_cc(cls, v: str) -> str:
        return _check_cc(v, cbr=False)

    @model_validator(mode="after")
    def _rate_or_load(self) -> Workload:
        _check_plugin_tunables(self.cc, self.cc_params)
        if (self.rate is None) == (self.load is None):
            raise ValueError('give exactly one of rate (flows per second, e.g. "100/s") or load (a fraction of the bottleneck rate)')
        return self


class Marker(Model):
    """The packet-value marker at the flows' edge, for the disciplines that read values (PPV,
    CSAQM): each packet of a flow measured at rate R gets the value V_c(u·R), u ~ U(0, 1), from
    its class's throughput-value function (Nádas et al., GLOBECOM 2016; Fejes et al. 2019 §3). `tvf = "equal"`: one TVF
    for every class (equal sharing, Fejes et al. 2019 and 2020); `"weighted"`: V_c(x) = V(x / w_c), so
    classes share in proportion to `weights` (by class name; unlisted classes weigh 1);
    `"custom"`: `curves` gives a class its own TVF as (throughput, value) points — throughput
    increasing, value decreasing within [1, 65535], interpolated log-linearly, constant beyond
    the ends — e.g. `curves = { gold = [["1Mbps", 60000], ["1Gbps", 20000]] }`; unlisted
    classes keep the default TVF."""

    SOURCE: ClassVar[str] = "Nádas, Turányi, Rácz, GLOBECOM 2016; Fejes et al. 2019 §3 (random marker from the measured rate, log-linear TVF)"

    tvf: Literal["equal", "weighted", "custom"] = "equal"
    weights: dict[str, Annotated[float, Field(gt=0.0, allow_inf_nan=False)]] = Field(default_factory=dict)
    curves: dict[str, list[tuple[Rate, Annotated[int, Field(ge=1, le=65535)]]]] = Field(default_factory=dict, json_schema_extra=ADDED_LATER)
    #: T_m of each flow's rate estimator (an exponentially weighted average of the bytes sent
    #: per slot of T_m/64, updated when a slot ends).
    rate_window: PositiveTime = "100ms"

    @model_validator(mode="after")
    def _weights_go_with_weighted(self) -> Marker:
        if self.tvf == "weighted" and not self.weights:
            raise ValueError('tvf = "weighted" needs weights, e.g. weights = { gold = 2, silver = 1 } (by flow class name)')
        if self.tvf != "weighted" and self.weights:
            raise ValueError(f'weights apply to tvf = "weighted", not tvf = "{self.tvf}"')
        if self.tvf == "custom" and not self.curves:
            raise ValueError('tvf = "custom" needs curves, e.g. curves = { gold = [["1Mbps", 60000], ["1Gbps", 20000]] } (by flow class name)')
        if self.tvf != "custom" and self.curves:
            raise ValueError(f'curves apply to tvf = "custom", not tvf = "{self.tvf}"')
        for name, points in self.curves.items():
            if len(points) < 2:
                raise KeyedValueError(f"marker.curves.{name}", "a curve needs at least two [throughput, value] points")
            for (x0, v0), (x1, v1) in zip(points, points[1:]):
                if not (u.parse_rate(x1) > u.parse_rate(x0) and v1 < v0):
                    raise KeyedValueError(
                        f"marker.curves.{name}",
                        f"throughputs must increase and values decrease along the curve ([{x0!r}, {v0}] then [{x1!r}, {v1}])",
                    )
        return self


def _bytes_only(v: str) -> str:
    q = u.parse_size(v, allow_time=False)
    if q.unit != "bytes" or q.value <= 0:
        raise ValueError(f"{v!r}: a size in bytes, e.g. 64KiB")
    return u.format_size(q)


Bytes = Annotated[str, AfterValidator(_bytes_only)]


def _host_defaults() -> dict[str, Any]:
    return engine.host_defaults()


_HOST = _host_defaults()


class Host(Model):
    """Every end host's network stack (docs/model.md, "Host model"): Linux hosts — TCP sends
    TSO/GSO bursts (autosized, deferred, held back by TSQ) that leave through a NIC of rate
    `nic_rate`, and the receivers ACK what each NAPI poll hands them — with their NICs'
    offloads on (GRO at the receivers: one ACK decision per coalesced packet) or, with
    `offloads = false`, off (Linux still builds GSO bursts and segments them in software, so
    only the receivers change: every packet is its own skb). `ideal = true` gives ideal hosts
    instead, which send and receive every segment on its own at exact times. The defaults are
    the engine's (`link::config::HostConfig::linux`, each with its Linux source)."""

    #: Ideal hosts (ns-3-like): no TSO/GSO, no NIC, no GRO, no timing noise.
    ideal: bool = Field(False, json_schema_extra=ADDED_LATER)
    offloads: bool = _HOST["offloads"]
    nic_rate: Rate = u.format_rate(_HOST["nic_rate_bps"])
    gso_max_size: Bytes = u.format_size(u.Quantity(Fraction(_HOST["gso_max_bytes"]), "bytes"))
    min_tso_segs: Annotated[int, Field(ge=1, le=1024)] = _HOST["min_tso_segs"]
    pacing_shift: Annotated[int, Field(ge=0, le=32)] = _HOST["pacing_shift"]
    gro_max_size: Bytes = u.format_size(u.Quantity(Fraction(_HOST["gro_max_bytes"]), "bytes"))
    rx_coalesce: Time = u.format_time(_HOST["rx_coalesce_ns"])
    #: The sender host's timing noise: each packet reaches the NIC after a uniform [0, jitter].
    jitter: Time = u.format_time(_HOST["jitter_ns"])
    #: Stalls of the hosts' CPU (a VM's vCPU preempted): this long at a time, starting on
    #: average every `stall_every` (a Poisson process); none by default.
    stall: Time = Field(u.format_time(_HOST["stall_ns"]), json_schema_extra=ADDED_LATER)
    stall_every: Time = Field(u.format_time(_HOST["stall_every_ns"]), json_schema_extra=ADDED_LATER)

    #: The knobs of Linux hosts: meaningless (and refused) for ideal hosts.
    KNOBS: ClassVar[tuple[str, ...]] = (
        "nic_rate",
        "gso_max_size",
        "min_tso_segs",
        "pacing_shift",
        "gro_max_size",
        "rx_coalesce",
        "jitter",
        "stall",
        "stall_every",
    )

    @model_validator(mode="after")
    def _knobs_need_linux_hosts(self) -> Host:
        if self.ideal:
            given = [k for k in ("offloads", *self.KNOBS) if k in self.model_fields_set]
            if given:
                raise KeyedValueError(
                    f"host.{given[0]}",
                    f"{given[0]} applies to Linux hosts; ideal hosts (ideal = true) send and receive every segment on its own, without offloads",
                )
            # An ideal host has no offloads; the model is frozen, so the field is set in place
            # once here (`offloads` is read for "does this host have offloads" everywhere).
            self.__dict__["offloads"] = False
        elif not self.offloads and "gro_max_size" in self.model_fields_set:
            raise KeyedValueError("host.gro_max_size", "gro_max_size applies to hosts with GRO; with offloads = false every received packet is its own skb")
        stall, every = u.parse_time(self.stall), u.parse_time(self.stall_every)
        if (stall == 0) != (every == 0):
            key = "host.stall_every" if stall else "host.stall"
            raise KeyedValueError(key, 'a stall needs both its length (stall) and its mean interval (stall_every), e.g. stall = "1.5ms", stall_every = "2s"')
        if stall and stall >= every:
            raise KeyedValueError("host.stall", f"{self.stall} is not shorter than stall_every ({self.stall_every})")
        return self

    def inapplicable(self) -> tuple[str, ...]:
        if self.ideal:
            return ("offloads", *self.KNOBS)
        # Without offloads there is no GRO (validation refuses gro_max_size then).
        return () if self.offloads else ("gro_max_size",)

    def engine(self) -> dict[str, Any]:
        """The engine's HostConfig."""
        # `ideal` only when set (the engine's default is false), so a Linux host's config
        # is the one every build reads.
        return ({"ideal": True} if self.ideal else {}) | {
            "offloads": self.offloads,
            "nic_rate_bps": u.parse_rate(self.nic_rate),
            "gso_max_bytes": int(u.parse_size(self.gso_max_size).value),
            "min_tso_segs": self.min_tso_segs,
            "pacing_shift": self.pacing_shift,
            "gro_max_bytes": int(u.parse_size(self.gro_max_size).value),
            "rx_coalesce_ns": u.parse_time(self.rx_coalesce),
            "jitter_ns": u.parse_time(self.jitter),
            "stall_ns": u.parse_time(self.stall),
            "stall_every_ns": u.parse_time(self.stall_every),
        }


class Measure(Model):
    interval: Time = "100ms"
    hist_bin: PositiveTime = "1ms"
    #: Upper edges of the flow-size bins of the completion-time summary (the last bin is open).
    fct_bins: list[Size] = Field(default_factory=lambda: ["100KB", "1MB"])
