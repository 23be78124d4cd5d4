"""The one loader of the files a user writes: TOML text → a dict → a validated pydantic model,
and every failure on the way → one located error.

Every input format (scenario, sweep, search, atlas spec, fidelity manifest, findings) is read
the same way:

1. ``read_toml(text, file=..., error=...)`` parses the text with ``tomllib``. A syntax error
   becomes ``file:line: TOML syntax: <tomllib's message>`` (the line taken out of tomllib's
   "(at line N, column M)"; this is the one place that reads it).
2. ``validate(Model, data, text=..., file=..., error=...)`` checks the dict against the
   format's pydantic model (``InputModel``: unknown keys refused, strict types as TOML writes
   them). The first problem becomes one error ``file:line: key: message``:

   - ``key`` is the dotted path of the value (``search.space.r.low``, ``finding[0].where.aqm``,
     ``sweep."flows.*.count"``): table keys joined by ``.``, array entries as ``[i]``, a key
     that is not a TOML bare key quoted; pydantic's own labels (a tagged union's tag, a union
     member's type, a validator's name) are left out. ``line`` is the key's line in the text
     (``inputs.locate.locate``), else the nearest enclosing table's, else none.
   - An unknown key (``extra_forbidden``; preferred over any other error, since a misspelt key
     also makes the right one "missing"): ``unknown key (did you mean 'x'?)`` when a known key
     of that table is close, else ``unknown key (allowed: a, b, c)``.
   - A missing required key: ``required key is missing``.
   - A validator's ``ValueError``: its message as it is (it names the value itself); a
     ``KeyedValueError`` also names the key it is about (a check across keys reports the key
     that is wrong, not the table holding them).
   - Any other (a wrong type, a number out of range): ``<value>: <pydantic's message>``, e.g.
     ``'x': Input should be a valid integer`` (a table's type error does not name the model's
     class: ``3: Input should be a valid dictionary``).
3. ``located(error, message, key=..., text=..., file=...)`` makes the same located error for
   the checks that come after validation (those that need the whole file, or the engine).

The error class is a parameter: each format raises its own ``ScenarioError`` subclass
(``SweepError``, ``SearchError``, ``AtlasError``, ``FidelityError``, ``FindingsError``), so the
CLI turns every one into "error: file:line: key: message" and exit status 2.
"""

from __future__ import annotations

import difflib
import re
import tomllib
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError

from aqmlab.inputs.errors import ScenarioError
from aqmlab.inputs.locate import locate

__all__ = ["InputModel", "NonEmptyStr", "KeyedValueError", "read_toml", "validate", "load", "error_from_validation", "located", "dotted"]

M = TypeVar("M", bound=BaseModel)

#: tomllib's position suffix: " (at line N, column M)".
_TOML_AT = re.compile(r"\s*\(at line (\d+), column \d+\)")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


class InputModel(BaseModel):
    """Base of the input formats' models: unknown keys are refused and values are taken as
    TOML types them (no "2" for 2, no true for 1; an integer is a valid float)."""

    model_config = ConfigDict(extra="forbid", strict=True)


def _non_empty(v: str) -> str:
    if not v.strip():
        raise ValueError("expected a non-empty string")
    return v


#: A string that is not empty (nor only blanks): names, files, statements.
NonEmptyStr = Annotated[str, AfterValidator(_non_empty)]


class KeyedValueError(ValueError):
    """A validator's error about one key: `key` is the dotted key from the top of the file or,
    with `relative=True`, from the value the validator checks (``"low"`` inside a model,
    ``"[2].id"`` inside a list field)."""

    def __init__(self, key: str, message: str, *, relative: bool = False):
        super().__init__(message)
        self.key = key
        self.relative = relative

    def __reduce__(self) -> tuple[Any, ...]:
        # A sweep's worker sends its validation errors back pickled; the default would call
        # __init__ with the message alone.
        return (type(self), (self.key, str(self)), {"relative": self.relative})


# ------------------------------------------------------------------------------------------
# Reading and validating
# ------------------------------------------------------------------------------------------


def read_toml(text: str, *, file: str | None = None, error: type[ScenarioError] = ScenarioError) -> dict[str, Any]:
    """The TOML document of `text`, or `error` "file:line: TOML syntax: ..."."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = _TOML_AT.search(str(e))
        raise error(f"TOML syntax: {_TOML_AT.sub('', str(e))}", file=file, line=int(m.group(1)) if m else None) from None


def validate(
    model: type[M],
    data: Any,
    *,
    text: str | None = None,
    file: str | None = None,
    error: type[ScenarioError] = ScenarioError,
    at: tuple[str | int, ...] = (),
    context: dict[str, Any] | None = None,
    key_of: Callable[[str], str] | None = None,
) -> M:
    """`data` validated as `model`, or one located `error`. `at`: where `data` sits in the
    file (``("search",)`` for a search file's ``[search]`` table), so keys and lines are the
    file's; `context` reaches the validators (``info.context``); `key_of` rewrites a dotted key
    before it is located (a value that came from another table)."""
    try:
        return model.model_validate(data, context=context)
    except ValidationError as e:
        raise error_from_validation(e, model=model, text=text, file=file, error=error, at=at, key_of=key_of) from None


def load(model: type[M], text: str, *, file: str | None = None, error: type[ScenarioError] = ScenarioError, context: dict[str, Any] | None = None) -> M:
    """A whole file's text read as TOML and validated as `model`."""
    return validate(model, read_toml(text, file=file, error=error), text=text, file=file, error=error, context=context)


def located(error: type[ScenarioError], message: str, *, key: str | None = None, text: str | None = None, file: str | None = None) -> ScenarioError:
    """`error` naming `key` and its line in `text` (the checks after validation)."""
    return error(message, file=file, line=locate(text, key) if text is not None and key else None, key=key)


def error_from_validation(
    e: ValidationError,
    *,
    model: type[BaseModel] | None,
    text: str | None,
    file: str | None,
    error: type[ScenarioError] = ScenarioError,
    at: tuple[str | int, ...] = (),
    key_of: Callable[[str], str] | None = None,
) -> ScenarioError:
    """One located `error` for a pydantic ValidationError of `model` (the conventions are in
    this module's docstring)."""
    errors = e.errors(include_url=False)
    # A misspelt key also makes the right one "missing": report the misspelling.
    err = next((x for x in errors if x["type"] == "extra_forbidden"), errors[0])
    loc = tuple(err["loc"])
    key, allowed = _walk(model, loc)
    key = _join(dotted(at), key)
    msg = err["msg"]
    keyed = (err.get("ctx") or {}).get("error")
    if isinstance(keyed, KeyedValueError):
        key = _join(key, keyed.key) if keyed.relative else keyed.key
        msg = str(keyed)
    elif err["type"] == "extra_forbidden":
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        msg = "unknown key" + (f" (did you mean {close[0]!r}?)" if close else f" (allowed: {', '.join(allowed)})" if allowed else "")
    elif err["type"] == "missing":
        msg = "required key is missing"
    else:
        msg = re.sub(r"^(Value error|Assertion failed), ", "", msg)
        if err["type"] == "model_type":
            msg = "Input should be a valid dictionary"  # not "... or instance of <the model's class>"
        if err["type"] != "value_error" and "input" in err and not isinstance(err["input"], (dict, list)):
            msg = f"{err['input']!r}: {msg}"
    if key_of is not None and key:
        key = key_of(key)
    line = locate(text, key) if text is not None and key else None
    return error(msg, file=file, line=line, key=key or None)


# ------------------------------------------------------------------------------------------
# Keys: pydantic's error location → the file's dotted key, and the keys a table allows
# ------------------------------------------------------------------------------------------


def _join(base: str, rest: str) -> str:
    """Two dotted keys as one: ``a.b`` + ``c`` → ``a.b.c``; ``a`` + ``[2].id`` → ``a[2].id``."""
    if not base or not rest:
        return base or rest
    return base + ("" if rest.startswith("[") else ".") + rest


def dotted(parts: tuple[str | int, ...] | list[str | int]) -> str:
    """``("flows", 0, "cc")`` → ``flows[0].cc``; a key that is not a TOML bare key is quoted
    (``("sweep", "flows.*.count")`` → ``sweep."flows.*.count"``)."""
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            s = p if _BARE_KEY.fullmatch(p) else _quoted(p)
            out += ("." if out else "") + s
    return out


def _quoted(key: str) -> str:
    """A TOML basic string of `key` (quote, backslash and control characters escaped), so the
    message stays one line."""
    out = []
    for ch in key:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _members(ann: Any) -> list[Any]:
    """The types an annotation stands for: Annotated and Optional/Union unwrapped, None dropped."""
    origin = get_origin(ann)
    if origin is typing.Annotated:
        return _members(get_args(ann)[0])
    if origin is Union or origin is types.UnionType:
        return [m for a in get_args(ann) for m in _members(a)]
    if ann is type(None):
        return []
    return [ann]


def _is_model(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, BaseModel)


def _field_keys(m: type[BaseModel]) -> dict[str, Any]:
    """A model's keys as the file writes them (the alias, if any) → the field's annotation."""
    return {(f.alias or name): f.annotation for name, f in m.model_fields.items()}


def _label_of(m: Any) -> set[str]:
    """How pydantic names a union member in an error location: a model's tag values (of its
    Literal fields) and class name; a plain type's name."""
    out = {getattr(m, "__name__", str(m))}
    if _is_model(m):
        for ann in m.model_fields.values():
            if get_origin(ann.annotation) is Literal:
                out |= {str(a) for a in get_args(ann.annotation)}
    return out


def _extra_type(m: type[BaseModel]) -> Any:
    """The value type of a model's typed extra keys (``__pydantic_extra__: dict[str, T]``)."""
    ann = typing.get_type_hints(m).get("__pydantic_extra__") if m.model_config.get("extra") == "allow" else None
    args = get_args(ann) if ann is not None else ()
    return args[1] if len(args) == 2 else Any


def _walk(model: type[BaseModel] | None, loc: tuple[Any, ...]) -> tuple[str, list[str]]:
    """The dotted key of `loc`, and the keys allowed where its last part sits (for "did you
    mean"), following the model's field types through lists, dicts and unions."""
    parts: list[str | int] = []
    anns: list[Any] = [model] if model is not None else []
    allowed: list[str] = []
    for i, part in enumerate(loc):
        members = [m for a in anns for m in _members(a)]
        models = [m for m in members if _is_model(m)]
        if i == len(loc) - 1:
            allowed = list(dict.fromkeys(k for m in models for k in _field_keys(m)))
        if isinstance(part, int):
            parts.append(part)
            anns = [get_args(m)[0] if get_args(m) else Any for m in members if get_origin(m) in (list, tuple, set)]
            continue
        # In a union, pydantic names the member (a tagged union's tag, a type's name) before
        # any key inside it: not a key of the file.
        tagged = [m for m in members if part in _label_of(m)] if len(members) > 1 else []
        if tagged:
            anns = tagged
            continue
        hit = [m for m in models if part in _field_keys(m)]
        if hit:
            parts.append(part)
            anns = [_field_keys(m)[part] for m in hit]
            continue
        if part.startswith("function-") or part.endswith("]"):
            continue  # a validator's or a constrained type's label
        parts.append(part)
        dicts = [get_args(m)[1] for m in members if get_origin(m) is dict and len(get_args(m)) == 2]
        extras = [_extra_type(m) for m in models if m.model_config.get("extra") == "allow"]
        anns = dicts + extras
    return dotted(parts), allowed
