"""Units of the scenario format: every quantity carries its unit.

Rates ``100Mbps`` (SI: k/M/G = 10^3/10^6/10^9; tc's ``kbit``/``Mbit``/``Gbit`` too), times
``10ms`` (``ns``, ``us``/``µs``, ``ms``, ``s``), sizes ``1500B``, ``64KB`` (SI), ``64KiB``
(binary), ``80pkt`` (1500-byte packets), ``0.5bdp`` (of rate × rtt_ref), and for AQM
delay targets ``0.17rtt`` (of rtt_ref). Parsing is exact: decimal strings go through
``fractions.Fraction`` so ``"1.5ms"`` is exactly 1 500 000 ns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from aqmlab import engine

__all__ = [
    "PACKET_BYTES",
    "Quantity",
    "parse_rate",
    "parse_time",
    "parse_size",
    "parse_target",
    "format_rate",
    "format_time",
    "format_size",
]

#: Bytes of one packet when a size is given in ``pkt`` and bytes are needed (a 1500-byte MTU):
#: the engine's own constant (crates/aqm/src/options.rs), so both sides count alike.
PACKET_BYTES: int = engine.PACKET_BYTES

_NUM = r"(?P<num>[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]{1,2})?)"
#: Largest value any quantity may take (ns, bit/s or bytes): the engine's u64 with headroom.
_MAX = 2**62
_RE = re.compile(rf"^\s*{_NUM}\s*(?P<unit>[A-Za-zµ]+)\s*$")

_RATE = {
    "bps": 1,
    "bit": 1,
    "kbps": 10**3,
    "Kbps": 10**3,
    "kbit": 10**3,
    "Kbit": 10**3,
    "Mbps": 10**6,
    "mbps": 10**6,
    "Mbit": 10**6,
    "mbit": 10**6,
    "Gbps": 10**9,
    "gbps": 10**9,
    "Gbit": 10**9,
    "gbit": 10**9,
    "Tbps": 10**12,
    "Tbit": 10**12,
}
_TIME = {"ns": 1, "us": 10**3, "µs": 10**3, "ms": 10**6, "s": 10**9}
_SIZE = {
    "B": 1,
    "KB": 10**3,
    "kB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
}


@dataclass(frozen=True)
class Quantity:
    """A parsed size or target: an absolute value, or a multiple of a reference."""

    value: Fraction
    #: "bytes", "packets", "ns", "bdp" or "rtt"
    unit: str


def _split(text: object, what: str, examples: str) -> tuple[Fraction, str]:
    if not isinstance(text, str):
        raise ValueError(f"{text!r} is not a {what} (expected a string such as {examples})")
    m = _RE.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a {what} (expected e.g. {examples})")
    num = Fraction(m.group("num"))
    if num > _MAX:
        raise ValueError(f"{text!r} is too large")
    return num, m.group("unit")


def parse_rate(text: object) -> int:
    """A rate in bit/s (an integer > 0)."""
    num, unit = _split(text, "rate", "100Mbps, 1Gbps, 40Mbit")
    if unit not in _RATE:
        raise ValueError(f"{text!r} is not a rate: unknown unit {unit!r} (use bps, Kbps, Mbps, Gbps)")
    v = num * _RATE[unit]
    if v > _MAX:
        raise ValueError(f"{text!r} is too large")
    if v <= 0 or v.denominator != 1:
        raise ValueError(f"{text!r} is not a positive whole number of bit/s")
    return int(v)


def parse_time(text: object) -> int:
    """A time in ns (an integer ≥ 0)."""
    num, unit = _split(text, "time", "10ms, 1.5s, 250us")
    if unit not in _TIME:
        raise ValueError(f"{text!r} is not a time: unknown unit {unit!r} (use ns, us, ms, s)")
    v = num * _TIME[unit]
    if v > _MAX:
        raise ValueError(f"{text!r} is too large")
    if v.denominator != 1:
        raise ValueError(f"{text!r} is not a whole number of nanoseconds")
    return int(v)


def parse_size(text: object, *, allow_time: bool = True) -> Quantity:
    """A buffer or threshold size: bytes, packets, bdp, or (if allowed) a time at line rate."""
    num, unit = _split(text, "size", "64KB, 80pkt, 0.5bdp, 500ms")
    if unit in _SIZE:
        v = num * _SIZE[unit]
        if v > _MAX:
            raise ValueError(f"{text!r} is too large")
        if v.denominator != 1:
            raise ValueError(f"{text!r} is not a whole number of bytes")
        return Quantity(v, "bytes")
    if unit == "pkt":
        if num.denominator != 1:
            raise ValueError(f"{text!r} is not a whole number of packets")
        return Quantity(num, "packets")
    if unit == "bdp":
        return Quantity(num, "bdp")
    if allow_time and unit in _TIME:
        return Quantity(num * _TIME[unit], "ns")
    hint = "B, KB, KiB, MB, pkt, bdp" + (", or a time such as 500ms" if allow_time else "")
    raise ValueError(f"{text!r} is not a size: unknown unit {unit!r} (use {hint})")


def parse_target(text: object) -> Quantity:
    """A delay target: a time, or a multiple of rtt_ref (``0.17rtt``)."""
    num, unit = _split(text, "delay target", "1ms, 0.17rtt")
    if unit == "rtt":
        return Quantity(num, "rtt")
    if unit in _TIME:
        v = num * _TIME[unit]
        return Quantity(v, "ns")
    raise ValueError(f"{text!r} is not a delay target: unknown unit {unit!r} (use a time such as 1ms, or K rtt such as 0.17rtt)")


def _fmt(v: Fraction, table: dict[str, int], order: list[str]) -> str:
    """The largest unit in which `v` is a short exact decimal."""
    for unit in order:
        x = v / table[unit]
        if x >= 1 or unit == order[-1]:
            # Exact decimal with at most 9 fractional digits.
            scaled = x * 10**9
            if scaled.denominator == 1:
                s = f"{int(scaled) // 10**9}.{int(scaled) % 10**9:09d}".rstrip("0").rstrip(".")
                return f"{s}{unit}"
    return f"{v}{order[-1]}"


def format_rate(bps: int) -> str:
    return _fmt(Fraction(bps), _RATE, ["Tbps", "Gbps", "Mbps", "Kbps", "bps"])


def format_time(ns: int | Fraction) -> str:
    return _fmt(Fraction(ns), _TIME, ["s", "ms", "us", "ns"])


def format_size(q: Quantity) -> str:
    if q.unit == "bytes":
        return _fmt(q.value, _SIZE, ["GB", "MB", "KB", "B"])
    if q.unit == "packets":
        return f"{q.value}pkt"
    if q.unit == "ns":
        return format_time(q.value)
    return _fmt_plain(q.value) + q.unit


def _fmt_plain(v: Fraction) -> str:
    if v.denominator == 1:
        return str(v.numerator)
    return repr(float(v))
