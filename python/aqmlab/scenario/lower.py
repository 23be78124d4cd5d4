"""Lowering: the parts of a validated scenario → the engine config (all integers: ns, bit/s,
bytes); `Scenario.engine_config` puts the parts together.

Conversions (docs/scenario.md): a time-sized buffer or threshold is bytes at line rate
(``time × C / 8``, as Fejes et al. 2019 and 2020 define buffers); ``bdp`` is
``rate × rtt_ref / 8`` bytes; ``K rtt`` is ``K × rtt_ref``; a size in ``pkt`` stays packets,
and the discipline counts it as ``pkt × 1500`` bytes where it needs bytes (RED). The
discipline's options are converted by the unit the engine declares for each
(``engine.describe_aqms``); the discipline itself (crates/aqm) turns them into its parameters.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any

from aqmlab import engine
from aqmlab.scenario import units as u
from aqmlab.scenario.parts import Bottleneck, Flows, Marker, Measure, PluginAqm, Workload, plugin_cc

__all__ = ["size_bytes", "target_ns", "bottleneck", "plugin", "cc", "flow_class", "workload_class", "marker", "measure", "schedule"]


def size_bytes(q: u.Quantity, rate_bps: int, rtt_ref_ns: int) -> int:
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
    return None, size_bytes(q, rate, rtt_ref)


def target_ns(text: str, rtt_ref: int) -> int:
    q = u.parse_target(text)
    return math.floor(q.value * rtt_ref) if q.unit == "rtt" else int(q.value)


def schedule(text: str) -> dict[str, Any]:
    """A start or stop schedule (the engine's StartConfig)."""
    m = re.match(r"^(uniform|staggered)\((.+), (.+)\)$", text)
    if m:
        a, b = u.parse_time(m.group(2)), u.parse_time(m.group(3))
        if m.group(1) == "uniform":
            return {"kind": "uniform", "lo_ns": a, "hi_ns": b}
        return {"kind": "staggered", "first_ns": a, "spacing_ns": b}
    return {"kind": "fixed", "at_ns": u.parse_time(text)}


def _option_value(unit: str, v: Any, rate: int, rtt_ref: int) -> Any:
    """One option's value with its unit resolved, as the engine's `aqm::options` reads it."""
    if v is None:
        return None
    if unit == "time":
        return u.parse_time(v)
    if unit == "delay-target":
        return target_ns(v, rtt_ref)
    if unit == "size":
        q = u.parse_size(v)
        return {"packets": int(q.value)} if q.unit == "packets" else {"bytes": size_bytes(q, rate, rtt_ref)}
    if unit == "packets":
        return int(u.parse_size(v, allow_time=False).value)
    if unit == "rate":
        return u.parse_rate(v)
    return v


def bottleneck(b: Bottleneck, rtt_ref: int) -> dict[str, Any]:
    """The bottleneck's engine config: the link, its buffer, the reference RTT, and the
    discipline's options, each converted by its declared unit; the engine lowers them (defaults
    that depend on the link, conversions to the discipline's units, checks) as it reads the
    config, and refuses a bad one as `bottleneck.aqm.<option>: why`."""
    rate = u.parse_rate(b.rate)
    buf_pkts, buf_bytes = _limit(b.buffer, rate, rtt_ref)
    if isinstance(b.aqm, PluginAqm):
        return {"rate_bps": rate, "buffer_packets": buf_pkts, "buffer_bytes": buf_bytes, "rtt_ref_ns": rtt_ref, "aqm": plugin(b.aqm, rate, rtt_ref)}
    options = {"kind": b.aqm.kind}
    for o in engine.describe_aqms()[b.aqm.kind]["options"]:
        options[o["name"]] = _option_value(o["unit"], getattr(b.aqm, o["name"]), rate, rtt_ref)
    return {"rate_bps": rate, "buffer_packets": buf_pkts, "buffer_bytes": buf_bytes, "rtt_ref_ns": rtt_ref, "aqm": options}


def _plugin_value(unit: str, v: Any, rate: int, rtt_ref: int, choices: list[str]) -> float:
    """One plugin option's value as the module receives it (a number in the unit's terms,
    crates/plugin): a time or delay target in ns, a size in bytes (a packet counts
    PACKET_BYTES), packets, bit/s, a bool as 0 or 1, a choice as its index."""
    if unit == "size":
        return float(size_bytes(u.parse_size(v), rate, rtt_ref))
    if unit == "bool":
        return 1.0 if v else 0.0
    if unit == "choice":
        return float(choices.index(v))
    return float(_option_value(unit, v, rate, rtt_ref))


def plugin(aqm: PluginAqm, rate: int, rtt_ref: int) -> dict[str, Any]:
    """A plugin's engine config: the module the engine loads (from the plugin cache, the bytes
    the scenario's hash names) and the options the scenario sets, unset ones left out (the
    module receives NaN for them)."""
    module = aqm.resolved()
    values = aqm.options()
    options = {
        o["name"]: _plugin_value(o["unit"], values[o["name"]], rate, rtt_ref, o["choices"]) for o in module.info["options"] if values.get(o["name"]) is not None
    }
    return {"kind": "plugin", "module": str(module.wasm), "options": options}


def _payload_bytes(text: str) -> int:
    """A flow or bin size: bytes, or packets of full-sized payload."""
    q = u.parse_size(text, allow_time=False)
    return int(q.value) * engine.MSS_BYTES if q.unit == "packets" else int(q.value)


def cc(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """A class's CC as the engine reads it (crates/sim cc::CcConfig): a built-in's name with its
    tunables, or a plugin's module, from the plugin cache, with the values of its tunables
    (crates/sim/src/cc/plugin.rs: loaded and checked when the config is read)."""
    module = plugin_cc(name)
    if module is not None:
        return {"name": "plugin", "module": str(module.wasm), **({"tunables": params} if params else {})}
    return {"name": name, **params}


def flow_class(f: Flows, name: str) -> dict[str, Any]:
    cbr = f.cc == "cbr"
    cls: dict[str, Any] = {
        "name": name,
        "cc": None if cbr else cc(f.cc, f.cc_params),
        "cbr_rate_bps": u.parse_rate(f.rate) if cbr and f.rate is not None else None,
        "count": f.count,
        "rtt_ns": u.parse_time(f.rtt),
        "ecn": f.ecn is True,
        "start": schedule(f.start),
        "size_bytes": _payload_bytes(f.size) if f.size is not None else None,
        "fq_pacing": f.fq_pacing,
    }
    if isinstance(f.ecn, str):
        cls["cbr_ecn"] = f.ecn
    if f.stop is not None:
        cls["stop"] = schedule(f.stop)
    return cls


def workload_class(w: Workload, name: str, rate_bps: int) -> dict[str, Any]:
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
    if w.rate is not None:
        rate_per_s = w.rate
    else:
        assert w.load is not None  # exactly one of rate or load (Workload._rate_or_load)
        rate_per_s = w.load * rate_bps / 8 / sd.mean_bytes()
    return {
        "name": name,
        "cc": cc(w.cc, w.cc_params),
        "cbr_rate_bps": None,
        "count": 0,
        "rtt_ns": u.parse_time(w.rtt),
        "ecn": w.ecn,
        "start": {"kind": "fixed", "at_ns": 0},
        "size_bytes": None,
        "fq_pacing": w.fq_pacing,
        "workload": {"rate_per_s": rate_per_s, "size": size, "start_ns": u.parse_time(w.start), "stop_ns": u.parse_time(w.stop) if w.stop else None},
    }


def marker(m: Marker | None, class_names: list[str]) -> dict[str, Any] | None:
    if m is None:
        return None
    return {
        "rate_window_ns": u.parse_time(m.rate_window),
        # Per class, in class order; unlisted classes weigh 1 (equal sharing: all 1).
        "class_weights": [m.weights.get(n, 1.0) for n in class_names],
        # Custom TVFs as (bit/s, value) points per class; None = the default TVF.
        "class_curves": [[(float(u.parse_rate(x)), float(v)) for x, v in m.curves[n]] if n in m.curves else None for n in class_names],
    }


def measure(m: Measure) -> dict[str, Any]:
    return {"interval_ns": u.parse_time(m.interval), "hist_bin_ns": u.parse_time(m.hist_bin), "fct_bins_bytes": [_payload_bytes(b) for b in m.fct_bins]}
