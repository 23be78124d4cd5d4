"""Lowering: a validated scenario → the engine config (all integers: ns, bit/s, bytes).

Conversions (docs/scenario.md): a time-sized buffer or threshold is bytes at line rate
(``time × C / 8``, as Fejes et al. 2019 and 2020 define buffers); ``bdp`` is
``rate × rtt_ref / 8`` bytes; ``K rtt`` is ``K × rtt_ref``; a size in ``pkt`` stays packets,
and the discipline counts it as ``pkt × 1500`` bytes where it needs bytes (RED). The
discipline's options are converted by the unit the engine declares for each
(``_native.describe_aqms``); the discipline itself (crates/aqm) turns them into its parameters.
"""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction
from typing import TYPE_CHECKING, Any, NoReturn

import functools

from aqmlab.scenario import units as u
from aqmlab.inputs.errors import ScenarioError

if TYPE_CHECKING:
    from aqmlab.scenario.model import Scenario

__all__ = ["lower", "lower_aqm", "check_with_engine", "describe_aqms", "AqmOptionError"]


@functools.cache
def describe_aqms() -> dict[str, dict[str, Any]]:
    """Every discipline's description (kind, summary, source, one_of, options), by kind: the
    engine's own (`_native.describe_aqms`), from which validation and lowering are built."""
    from aqmlab import _native

    return {d["kind"]: d for d in _native.describe_aqms()}


def _bytes(q: u.Quantity, rate_bps: int, rtt_ref_ns: int) -> int:
    if q.unit == "bytes":
        v = q.value
    elif q.unit == "packets":
        v = q.value * u.PACKET_BYTES
    elif q.unit == "ns":
        v = q.value * rate_bps / Fraction(8 * 10**9)
    elif q.unit == "bdp":
        v = q.value * rate_bps * rtt_ref_ns / Fraction(8 * 10**9)
    else:  # pragma: no cover - parse_size never yields other units
        raise ValueError(q.unit)
    return math.floor(v)


def _limit(text: str | None, rate: int, rtt_ref: int) -> tuple[int | None, int | None]:
    """(packets, bytes) for a buffer or FIFO limit."""
    if text is None:
        return None, None
    q = u.parse_size(text)
    if q.unit == "packets":
        return int(q.value), None
    return None, _bytes(q, rate, rtt_ref)


def _target_ns(text: str, rtt_ref: int) -> int:
    q = u.parse_target(text)
    return math.floor(q.value * rtt_ref) if q.unit == "rtt" else int(q.value)


def _schedule(text: str) -> dict[str, Any]:
    """A start or stop schedule (the engine's StartConfig)."""
    m = re.match(r"^(uniform|staggered)\((.+), (.+)\)$", text)
    if m:
        a, b = u.parse_time(m.group(2)), u.parse_time(m.group(3))
        if m.group(1) == "uniform":
            return {"kind": "uniform", "lo_ns": a, "hi_ns": b}
        return {"kind": "staggered", "first_ns": a, "spacing_ns": b}
    return {"kind": "fixed", "at_ns": u.parse_time(text)}


class AqmOptionError(ValueError):
    """An option the engine refused: the key under `bottleneck.aqm` ("" = the table) and why."""

    def __init__(self, key: str, message: str):
        super().__init__(f"bottleneck.aqm{'.' + key if key else ''}: {message}")
        self.key, self.message = key, message

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        # A sweep's worker process raises it; the pool pickles it back to the parent.
        return (AqmOptionError, (self.key, self.message))


def _option_value(unit: str, v: Any, rate: int, rtt_ref: int) -> Any:
    """One option's value with its unit resolved, as the engine's `aqm::options` reads it."""
    if v is None:
        return None
    if unit == "time":
        return u.parse_time(v)
    if unit == "delay-target":
        return _target_ns(v, rtt_ref)
    if unit == "size":
        q = u.parse_size(v)
        return {"packets": int(q.value)} if q.unit == "packets" else {"bytes": _bytes(q, rate, rtt_ref)}
    if unit == "packets":
        return int(u.parse_size(v, allow_time=False).value)
    if unit == "rate":
        return u.parse_rate(v)
    return v


def lower_aqm(s: "Scenario") -> tuple[dict[str, Any], int | None]:
    """The discipline's engine parameters and delay target: each option converted by its
    declared unit here, the rest (defaults that depend on the link, conversions to the
    engine's units, checks) by the discipline itself (`aqm::options`)."""
    from aqmlab import _native

    b, aqm = s.bottleneck, s.bottleneck.aqm
    rate, rtt_ref = u.parse_rate(b.rate), s.rtt_ref_ns()
    buf_pkts, buf_bytes = _limit(b.buffer, rate, rtt_ref)
    options = {"kind": aqm.kind}
    for o in describe_aqms()[aqm.kind]["options"]:
        options[o["name"]] = _option_value(o["unit"], getattr(aqm, o["name"]), rate, rtt_ref)
    link = {"rate_bps": rate, "buffer_packets": buf_pkts, "buffer_bytes": buf_bytes, "rtt_ref_ns": rtt_ref}
    try:
        return _native.lower_aqm(json.dumps(options), json.dumps(link))
    except ValueError as e:
        key, message = e.args if len(e.args) == 2 else ("", str(e))
        raise AqmOptionError(key, message) from None


def lower(s: "Scenario") -> dict[str, Any]:
    b = s.bottleneck
    rate = u.parse_rate(b.rate)
    rtt_ref = s.rtt_ref_ns()
    buf_pkts, buf_bytes = _limit(b.buffer, rate, rtt_ref)
    engine_aqm, delay_target_ns = lower_aqm(s)

    classes = []
    for f, name in zip(s.flows, s.class_names()):
        size_bytes = None
        if f.size is not None:
            q = u.parse_size(f.size, allow_time=False)
            size_bytes = int(q.value) * (u.PACKET_BYTES - 52) if q.unit == "packets" else int(q.value)
        cbr = f.cc == "cbr"
        cls: dict[str, Any] = {
            "name": name,
            "cc": None if cbr else {"name": f.cc, **f.cc_params},
            "cbr_rate_bps": u.parse_rate(f.rate) if cbr and f.rate is not None else None,
            "count": f.count,
            "rtt_ns": u.parse_time(f.rtt),
            "ecn": f.ecn,
            "start": _schedule(f.start),
            "size_bytes": size_bytes,
            "fq_pacing": f.fq_pacing,
        }
        if f.stop is not None:
            cls["stop"] = _schedule(f.stop)
        classes.append(cls)
    names = s.class_names()
    for w, name in zip(s.workload, names[len(s.flows):]):
        sd = w.size
        if sd.dist == "fixed":
            size: dict[str, Any] = {"dist": "fixed", "bytes": sd.bytes_of("size")}
        elif sd.dist == "uniform":
            size = {"dist": "uniform", "lo": sd.bytes_of("min"), "hi": sd.bytes_of("max")}
        elif sd.dist == "exponential":
            size = {"dist": "exponential", "mean": float(sd.bytes_of("mean"))}
        elif sd.dist == "pareto":
            size = {"dist": "pareto", "alpha": sd.alpha, "lo": sd.bytes_of("min"), "hi": sd.bytes_of("max")}
        elif sd.dist == "lognormal":
            size = {"dist": "lognormal", "mu": math.log(sd.bytes_of("median")), "sigma": sd.sigma}
        else:
            size = {"dist": "empirical", "points": [list(p) for p in sd.points or []]}
        rate_per_s = w.rate if w.rate is not None else w.load * rate / 8 / sd.mean_bytes()
        classes.append(
            {
                "name": name,
                "cc": {"name": w.cc, **w.cc_params},
                "cbr_rate_bps": None,
                "count": 0,
                "rtt_ns": u.parse_time(w.rtt),
                "ecn": w.ecn,
                "start": {"kind": "fixed", "at_ns": 0},
                "size_bytes": None,
                "fq_pacing": w.fq_pacing,
                "workload": {"rate_per_s": rate_per_s, "size": size, "start_ns": u.parse_time(w.start), "stop_ns": u.parse_time(w.stop) if w.stop else None},
            }
        )
    fct_bins = []
    for b in s.measure.fct_bins:
        q = u.parse_size(b, allow_time=False)
        fct_bins.append(int(q.value) * (u.PACKET_BYTES - 52) if q.unit == "packets" else int(q.value))
    # A marker given with a discipline that reads no values goes to the engine, which refuses it.
    marker = s.marker or s.effective_marker()
    engine_marker: dict[str, Any] | None = None
    if marker is not None:
        names = s.class_names()
        engine_marker = {
            "rate_window_ns": u.parse_time(marker.rate_window),
            # Per class, in class order; unlisted classes weigh 1 (equal sharing: all 1).
            "class_weights": [marker.weights.get(n, 1.0) for n in names],
            # Custom TVFs as (bit/s, value) points per class; None = the default TVF.
            "class_curves": [
                [(float(u.parse_rate(x)), float(v)) for x, v in marker.curves[n]] if n in marker.curves else None for n in names
            ],
        }
    return {
        "name": s.name,
        "seed": s.seed,
        "duration_ns": u.parse_time(s.duration),
        "warmup_ns": u.parse_time(s.warmup),
        "bottleneck": {
            "rate_bps": rate,
            "buffer_packets": buf_pkts,
            "buffer_bytes": buf_bytes,
            "aqm": engine_aqm,
            "delay_target_ns": delay_target_ns,
        },
        "classes": classes,
        "marker": engine_marker,
        "measure": {"interval_ns": u.parse_time(s.measure.interval), "hist_bin_ns": u.parse_time(s.measure.hist_bin), "fct_bins_bytes": fct_bins},
        "host": s.host.engine(),
    }


def check_with_engine(s: "Scenario", *, text: str | None = None, file: str | None = None) -> None:
    """Ask the engine to validate what only it knows; raise a located ScenarioError."""
    from aqmlab import _native
    from aqmlab.inputs.locate import locate

    def fail(key: str, msg: str) -> NoReturn:
        line = locate(text, key) if text is not None else None
        raise ScenarioError(msg, file=file, line=line, key=key)

    for section, items in (("flows", s.flows), ("workload", s.workload)):
        for i, f in enumerate(items):
            if f.cc == "cbr":
                continue
            err = _native.check_cc(json.dumps({"name": f.cc, **f.cc_params}))
            if err:
                m = re.match(r"^unknown field `([^`]+)`(.*)$", err)
                if m:
                    fail(f"{section}[{i}].cc_params.{m.group(1)}", f"unknown {f.cc} parameter{m.group(2)}")
                m = re.match(r"^([a-z_]+): (.*)$", err)
                if m:
                    fail(f"{section}[{i}].cc_params.{m.group(1)}", m.group(2))
                fail(f"{section}[{i}].cc_params", err)
    try:
        cfg = lower(s)
    except AqmOptionError as e:
        fail(f"bottleneck.aqm{'.' + e.key if e.key else ''}", e.message)
    try:
        _native.check(json.dumps(cfg))
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
