"""Unit parsing, checked against hand-computed values."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aqmlab.scenario import units as u


def test_times() -> None:
    assert u.parse_time("1.5ms") == 1_500_000
    assert u.parse_time("250us") == 250_000
    assert u.parse_time("250µs") == 250_000
    assert u.parse_time("180s") == 180 * 10**9
    assert u.parse_time("0s") == 0


def test_rates() -> None:
    assert u.parse_rate("1Gbps") == 10**9
    assert u.parse_rate("40Mbit") == 40_000_000  # tc's spelling
    assert u.parse_rate("2.5Gbps") == 2_500_000_000


def test_sizes() -> None:
    assert u.parse_size("64KB") == u.Quantity(Fraction(64_000), "bytes")
    assert u.parse_size("2KiB") == u.Quantity(Fraction(2048), "bytes")
    assert u.parse_size("80pkt") == u.Quantity(Fraction(80), "packets")
    assert u.parse_size("0.5bdp") == u.Quantity(Fraction(1, 2), "bdp")
    assert u.parse_size("500ms") == u.Quantity(Fraction(500_000_000), "ns")


def test_relative_units_against_hand_computation() -> None:
    from aqmlab.scenario.lower import size_bytes, target_ns

    # 0.5 BDP at 1 Gbps × 10 ms = 0.5 × 1e9/8 × 0.01 = 625 000 B.
    assert size_bytes(u.parse_size("0.5bdp"), 10**9, 10_000_000) == 625_000
    # 0.17 × 5 ms = 850 000 ns.
    assert target_ns("0.17rtt", 5_000_000) == 850_000
    # 500 ms of buffer at 1 Gbps = 62 500 000 B.
    assert size_bytes(u.parse_size("500ms"), 10**9, 5_000_000) == 62_500_000


@pytest.mark.parametrize("bad", ["10", "ms", "-1ms", "1.5.2ms", "10 parsecs", "1e999999s", "", "NaNms", "inf s"])
def test_bad_times_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        u.parse_time(bad)


@pytest.mark.parametrize("bad", ["1Gbq", "0bps", "1.0000000001bps", "fast"])
def test_bad_rates_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        u.parse_rate(bad)


def test_non_strings_are_refused() -> None:
    with pytest.raises(ValueError):
        u.parse_time(10)  # a bare number has no unit


@given(st.integers(min_value=1, max_value=10**15))
def test_rate_round_trip(bps: int) -> None:
    assert u.parse_rate(u.format_rate(bps)) == bps


@given(st.integers(min_value=0, max_value=10**15))
def test_time_round_trip(ns: int) -> None:
    assert u.parse_time(u.format_time(ns)) == ns


@given(st.integers(min_value=1, max_value=10**12))
def test_size_round_trip(b: int) -> None:
    q = u.Quantity(Fraction(b), "bytes")
    assert u.parse_size(u.format_size(q)) == q


def test_canonical_spelling() -> None:
    assert u.format_rate(10**9) == "1Gbps"
    assert u.format_rate(1_500_000) == "1.5Mbps"
    assert u.format_time(5_000_000) == "5ms"
    assert u.format_time(0) == "0ns"
