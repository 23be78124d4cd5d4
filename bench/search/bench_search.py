"""Does searching pay? On each space (a search file in this folder), the optimizers of
`aqmlab search` (Optuna TPE, random, an even grid in random order) and Nevergrad's TwoPointsDE, all
with the same budget and batch, against the best value of a large grid: evaluations needed
to come within 0.02 of it, over several repetitions (optimizer seeds).

Points are evaluated in this process with `aqmlab.run` (the objective is the search's
`Objective.value` on the run's summary, averaged over the file's seeds), memoized by scenario
hash in OUT/cache-<space>.json, so the large grid and every repeated point are simulated once.
The optimizers' points come from `aqmlab.search.runner.ask`, the function `aqmlab search` uses.

    nice -n 10 python3 bench/search/bench_search.py -o out/bench-search [--reps 10] [--grid 10] [--budgets 30,60]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from multiprocessing import Pool
from pathlib import Path

import aqmlab
from aqmlab.search.runner import Search, ask, load_search, round_size

HERE = Path(__file__).resolve().parent
SPACES = ["bbr-cubic-taildrop", "dctcp-cubic-l4s", "bbr2-cubic-pie"]
METHODS = ["tpe", "random", "grid", "nevergrad"]
WITHIN = 0.02


class Objective:
    """The search's objective at a point, memoized by the hashes of its runs."""

    def __init__(self, search: Search, cache_file: Path):
        self.search, self.file = search, cache_file
        self.cache: dict[str, float] = json.loads(cache_file.read_text()) if cache_file.is_file() else {}
        self.simulated = 0

    def run_value(self, sc, base) -> float:
        key = sc.hash() + (base.hash() if base is not None else "")
        if key not in self.cache:
            s = aqmlab.run(sc).summary
            b = aqmlab.run(base).summary if base is not None else None
            self.cache[key] = self.search.objective.value(s, b)
            self.simulated += 1
        return self.cache[key]

    def __call__(self, point: dict) -> float:
        runs = self.search.runs_of(point)
        return statistics.fmean(self.run_value(sc, base) for _, sc, base in runs)

    def save(self) -> None:
        tmp = self.file.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.cache))
        os.replace(tmp, self.file)


def trajectory(search: Search, f: Objective, method: str, rep: int) -> list[float]:
    """The values of `search.budget` points, in the order the method asks them."""
    if method == "nevergrad":
        return _nevergrad(search, f, rep)
    s = Search(**{**search.__dict__, "optimizer": method, "seed": rep})
    told: list[tuple[dict, float]] = []
    k = 0
    while len(told) < s.budget:
        pts = ask(s, told, round_size(s, told), k)  # the rounds `aqmlab search` asks
        if not pts:
            break
        for p in pts:
            told.append((p, f(p)))
        k += 1
    return [v for _, v in told]


def _nevergrad(search: Search, f: Objective, rep: int) -> list[float]:
    import nevergrad as ng
    import numpy as np

    params = {}
    for v in search.space:
        if v.choices is not None:
            params[v.name] = ng.p.Choice(list(v.choices))
        elif v.log:
            params[v.name] = ng.p.Log(lower=v.low, upper=v.high)
        else:
            params[v.name] = ng.p.Scalar(lower=v.low, upper=v.high)
        if v.integer:
            params[v.name].set_integer_casting()
    par = ng.p.Dict(**params)
    par.random_state = np.random.RandomState(rep)
    # NGOpt (its default) picks a metamodel here that fails under numpy 2.4 (nevergrad 1.0.12:
    # "TypeError: only 0-dimensional arrays can be converted to Python scalars" in
    # optimization/metamodel.py); TwoPointsDE is its robust population method.
    opt = ng.optimizers.TwoPointsDE(parametrization=par, budget=search.budget, num_workers=search.batch)
    out: list[float] = []
    while len(out) < search.budget:
        cands = [opt.ask() for _ in range(min(search.batch, search.budget - len(out)))]
        for c in cands:
            p = {v.name: (v.cast(c.value[v.name]) if v.choices is None else c.value[v.name]) for v in search.space}
            val = f(p)
            out.append(val)
            opt.tell(c, search.objective.loss(val))
    return out


def evals_to_target(search: Search, values: list[float], target: float) -> int | None:
    for i, v in enumerate(values, 1):
        if search.objective.loss(v) <= search.objective.loss(target) + WITHIN:
            return i
    return None


def one_space(args: tuple[str, Path, int, int, int]) -> dict:
    name, out, reps, grid_k, budget = args
    search = load_search(HERE / f"{name}.toml")
    search.budget = budget
    f = Objective(search, out / f"cache-{name}.json")
    t0 = time.time()
    # The reference: a large even grid (grid_k levels per continuous variable, every choice).
    big = Search(**{**search.__dict__, "budget": 10**6})
    grid = [p for p in _grid_points_k(big, grid_k)]
    gvals = [f(p) for p in grid]
    f.save()
    best_i = min(range(len(grid)), key=lambda i: search.objective.loss(gvals[i]))
    ref = gvals[best_i]
    rows = {}
    for m in METHODS:
        runs = []
        for rep in range(reps):
            vals = trajectory(search, f, m, rep)
            runs.append({"evals": evals_to_target(search, vals, ref), "best": min(vals, key=search.objective.loss)})
            f.save()
        rows[m] = runs
    return {
        "space": name,
        "objective": str(search.objective),
        "budget": search.budget,
        "batch": search.batch,
        "grid_points": len(grid),
        "grid_best": ref,
        "grid_best_at": grid[best_i],
        "methods": rows,
        "simulated": f.simulated,
        "wall_s": time.time() - t0,
    }


def _space_budgets(args: tuple[str, Path, int, int, list[int]]) -> list[dict]:
    name, out, reps, grid_k, budgets = args
    return [one_space((name, out, reps, grid_k, b)) for b in budgets]


def _grid_points_k(search: Search, k: int) -> list[dict]:
    import itertools

    levels = [v.levels(k) if v.choices is None else list(v.choices) for v in search.space]
    return [dict(zip(search.var_names, c)) for c in itertools.product(*levels)]


def table(results: list[dict]) -> str:
    lines = [
        f"| space (objective) | large grid: points, best | method | reached within {WITHIN} (of reps) | evaluations to reach: median (min–max) | best found: mean |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        for m, runs in r["methods"].items():
            ev = [x["evals"] for x in runs if x["evals"] is not None]
            med = f"{statistics.median(ev):g} ({min(ev)}–{max(ev)})" if ev else "–"
            head = f"{r['space']} (`{r['objective']}`), budget {r['budget']} | {r['grid_points']}, {r['grid_best']:.4g}" if m == METHODS[0] else " | "
            lines.append(f"| {head} | {m} | {len(ev)}/{len(runs)} | {med} | {statistics.fmean(x['best'] for x in runs):.4g} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", type=Path, required=True)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--grid", type=int, default=16, help="levels per continuous variable of the reference grid")
    ap.add_argument("--spaces", default=",".join(SPACES))
    ap.add_argument("--budgets", default="30,60", help="budgets to compare at (points per search)")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    spaces = a.spaces.split(",")
    budgets = [int(b) for b in a.budgets.split(",")]
    # One task per space (its cache is written by one process), budgets in turn inside it.
    with Pool(min(a.jobs, len(spaces))) as pool:
        results = [r for rs in pool.map(_space_budgets, [(s, a.out, a.reps, a.grid, budgets) for s in spaces]) for r in rs]
    (a.out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    print(table(results))


if __name__ == "__main__":
    sys.exit(main())
