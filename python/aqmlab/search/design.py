"""The search's first round: a fixed design over the space's edges and centre, evaluated
before the optimizer samples anything (issue "searches that look at the edges").

Worst cases often sit on the boundary of the space — the smallest buffer, the most extreme
RTT ratio — where a sampler's random start-up points and TPE's density model rarely land: in a
40-point search of buffer × RTT ratio (a loss-based CC against BBRv1 through drop-tail, Jain's
index), the worst value of a 120-point grid sat at a corner TPE never tried, and the search
stopped 0.06 above it. So the first round holds, in this order (a budget smaller than the
design keeps its beginning):

1. the centre of the numeric variables (the arithmetic middle, or the geometric one for
   ``log = true``), every categorical variable at its first choice;
2. every other choice of each categorical variable in turn (in the order written), at that
   centre, the other categorical variables at their first choice: a category is a different
   scenario, not an ordered range, so it has no "corner"; each is seen once, where the numeric
   variables are least extreme;
3. the corners of the numeric variables (categorical ones at their first choice): for d ≤ 4
   numeric variables all 2^d, in complementary pairs — all-low, all-high, then each remaining
   corner (counting in binary with the first variable most significant, first variable low)
   followed by its opposite — so any cut of the list still sees each variable at both of its
   bounds once two corners are in; for d > 4, all-low and all-high, then a Latin hypercube of
   2·d points (`_latin_hypercube`).

Values are cast as the optimizer's are (`Var.cast`: integers rounded, floats to 4 significant
digits) and kept inside the bounds; a point that casting makes equal to an earlier one is
dropped.
"""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

from aqmlab.search.spec import Var

__all__ = ["MAX_FULL_CORNERS", "initial_design"]

#: Up to this many numeric variables every corner is in the design (2^4 + 1 = 17 points, under
#: half the default budget of 40); beyond it 2^d grows past the budget (32 corners at d = 5).
MAX_FULL_CORNERS = 4


def _value(v: Var, x: float) -> Any:
    """`x` as the scenario gets it, clamped to the bounds (4-digit rounding of a bound written
    with more digits must not leave the range)."""
    low, high = v.bounds()
    c = v.cast(x)
    return min(max(c, v.cast(low) if v.integer else low), v.cast(high) if v.integer else high)


def _centre(v: Var) -> Any:
    low, high = v.bounds()
    return _value(v, math.sqrt(low * high) if v.log else (low + high) / 2)


def _at(v: Var, u: float) -> Any:
    """The value a fraction `u` ∈ [0, 1] along the range (along log space when log)."""
    low, high = v.bounds()
    if v.log:
        return _value(v, math.exp(math.log(low) + u * (math.log(high) - math.log(low))))
    return _value(v, low + u * (high - low))


def _corner_bits(d: int) -> list[tuple[int, ...]]:
    """All 2^d corners as bits (0 = low, 1 = high), each followed by its opposite, starting
    with all-low and all-high."""
    out: list[tuple[int, ...]] = []
    for bits in itertools.product((0, 1), repeat=d):
        if bits[0] == 0:
            out += [bits, tuple(1 - b for b in bits)]
    return out


def _latin_hypercube(numeric: list[Var], seed: int) -> list[list[Any]]:
    """A Latin hypercube of n = 2·d points (McKay, Beckman & Conover, "A Comparison of Three
    Methods for Selecting Values of Input Variables in the Analysis of Output from a Computer
    Code", Technometrics 1979): each variable's range (log range when log) cut into n equal
    strata, each stratum used once, at its middle, strata matched across variables by a
    permutation per variable drawn from `seed`. Why this for d > 4: every variable is seen at n
    distinct levels spread over its whole range with n growing linearly in d, where the 2^d
    corners would take most of a budget; the all-low and all-high corners are added beside it
    because the strata's middles never reach a bound."""
    n = 2 * len(numeric)
    rng = random.Random(seed)
    cols = []
    for v in numeric:
        perm = list(range(n))
        rng.shuffle(perm)
        cols.append([_at(v, (k + 0.5) / n) for k in perm])
    return [[col[i] for col in cols] for i in range(n)]


def initial_design(space: list[Var], seed: int) -> list[dict[str, Any]]:
    """The first round's points, in the order of the module's docstring (the order a smaller
    budget cuts them in). `seed` (the search's) only draws the Latin hypercube of d > 4."""
    numeric = [v for v in space if v.choices is None]
    categorical = [v for v in space if v.choices is not None]
    first = {v.name: v.choices[0] for v in categorical if v.choices is not None}
    centre = {v.name: _centre(v) for v in numeric}

    def point(num: dict[str, Any], cat: dict[str, Any]) -> dict[str, Any]:
        merged = {**num, **cat}
        return {v.name: merged[v.name] for v in space}  # in the space's order

    pts = [point(centre, first)]
    for v in categorical:
        assert v.choices is not None
        for c in v.choices[1:]:
            pts.append(point(centre, {**first, v.name: c}))
    d = len(numeric)
    if 0 < d <= MAX_FULL_CORNERS:
        rows = [[v.bounds()[b] for v, b in zip(numeric, bits)] for bits in _corner_bits(d)]
    elif d > MAX_FULL_CORNERS:
        rows = [[v.bounds()[0] for v in numeric], [v.bounds()[1] for v in numeric]] + _latin_hypercube(numeric, seed)
    else:
        rows = []
    for row in rows:
        pts.append(point({v.name: _value(v, x) for v, x in zip(numeric, row)}, first))
    out: list[dict[str, Any]] = []
    for p in pts:
        if p not in out:
            out.append(p)
    return out
