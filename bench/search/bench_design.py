"""Does the first round's design (corners and centre, `aqmlab.search.design`) help? On each
space, TPE with ``design = "corners"`` (the default) against TPE with ``design = "none"`` (the
search before the design), same budget (the file's) and batch, over optimizer seeds 0..reps-1,
against the worst value of a large grid: how often each comes within a tolerance of it, and
the median gap (how much less bad the worst found is than the grid's; negative when the
search beats the grid).

Points are evaluated as in bench_search.py (in this process, `aqmlab.run`, memoized by
scenario hash in OUT/cache-<space>.json, so the grid and repeated points run once), and asked
in the rounds `aqmlab search` asks them (`runner.round_size`, `runner.ask`).

    PYTHONPATH=python nice -n 19 python3 bench/search/bench_design.py -o out/bench-design [--reps 30] [--budgets file,12]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from multiprocessing import Pool
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_search import HERE, Objective, trajectory  # noqa: E402 (this folder's module)

from aqmlab.search.runner import Search, load_search  # noqa: E402

SPACES = ["bbr-cubic-taildrop", "dctcp-cubic-l4s", "bbr2-cubic-pie", "reno-bbr-corner"]
#: Levels per continuous variable of the reference grid (every choice, every integer up to
#: the levels): 10 as bench_search.py's README table; the corner space's 12 × 10 = 120 points
#: is the issue's grid.
GRID_LEVELS: dict[str, dict[str, int]] = {"reno-bbr-corner": {"f": 12, "r": 10}}
DEFAULT_LEVELS = 10
#: Hit tolerances (absolute, in the objective's unit): 0.02 is bench_search.py's WITHIN; 0.005
#: asks for the grid's worst point itself on a flat plateau (Jain's index of two flows near
#: its floor of 0.5, where many points lie within 0.02 of each other).
TOLERANCES = (0.02, 0.005)
DESIGNS = ("none", "corners")


def grid(search: Search, name: str) -> list[dict[str, Any]]:
    lv = GRID_LEVELS.get(name, {})
    levels = [v.levels(lv.get(v.name, DEFAULT_LEVELS)) if v.choices is None else list(v.choices) for v in search.space]
    return [dict(zip(search.var_names, c)) for c in itertools.product(*levels)]


def one_space(args: tuple[str, Path, int, list[int | None]]) -> list[dict[str, Any]]:
    """Every budget of one space (None: the file's), the grid and cache shared."""
    name, out, reps, budgets = args
    return [_one(name, out, reps, b) for b in budgets]


def _one(name: str, out: Path, reps: int, budget: int | None) -> dict[str, Any]:
    search = load_search(HERE / f"{name}.toml")
    search.budget = budget or search.budget
    f = Objective(search, out / f"cache-{name}.json")
    t0 = time.time()
    pts = grid(search, name)
    vals = [f(p) for p in pts]
    f.save()
    best_i = min(range(len(pts)), key=lambda i: search.objective.loss(vals[i]))
    ref = vals[best_i]
    rows: dict[str, list[dict[str, Any]]] = {}
    for design in DESIGNS:
        s = Search(**{**search.__dict__, "design": design})
        runs = []
        for rep in range(reps):
            traj = trajectory(s, f, "tpe", rep)
            losses = [search.objective.loss(v) - search.objective.loss(ref) for v in traj]
            # Evaluations until within the tightest tolerance (None: never).
            reach = next((i for i, x in enumerate(losses, 1) if x <= TOLERANCES[-1]), None)
            runs.append({"seed": rep, "gap": min(losses), "evals": len(traj), "reach": reach})
        f.save()
        rows[design] = runs
    return {
        "space": name,
        "objective": str(search.objective),
        "budget": search.budget,
        "batch": search.batch,
        "grid_points": len(pts),
        "grid_worst": ref,
        "grid_worst_at": pts[best_i],
        "designs": rows,
        "simulated": f.simulated,
        "wall_s": time.time() - t0,
    }


def table(results: list[dict[str, Any]]) -> str:
    hits = " | ".join(f"within {t:g}" for t in TOLERANCES)
    lines = [
        f"| space (objective), budget | grid: points, worst (at) | design | {hits} | gap: median (max) | evaluations to within {TOLERANCES[-1]:g}: median |",
        "|---" * (6 + len(TOLERANCES) - 1) + "|",
    ]
    for r in results:
        for design, runs in r["designs"].items():
            gaps = [x["gap"] for x in runs]
            at = ", ".join(f"{k} = {v}" for k, v in r["grid_worst_at"].items())
            head = f"{r['space']} (`{r['objective']}`), {r['budget']} | {r['grid_points']}, {r['grid_worst']:.4g} ({at})" if design == DESIGNS[0] else " | "
            h = " | ".join(f"{sum(g <= t for g in gaps)}/{len(gaps)}" for t in TOLERANCES)
            reach = [x["reach"] for x in runs if x["reach"] is not None]
            med = f"{statistics.median(reach):g}" if reach else "–"
            lines.append(f"| {head} | {design} | {h} | {statistics.median(gaps):.4f} ({max(gaps):.4f}) | {med} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("-o", "--out", type=Path, required=True)
    ap.add_argument("--reps", type=int, default=30, help="optimizer seeds 0..reps-1 per design")
    ap.add_argument("--spaces", default=",".join(SPACES))
    ap.add_argument("--budgets", default="file", help="points per search, comma-separated; 'file': the file's budget")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    spaces = a.spaces.split(",")
    budgets: list[int | None] = [None if b == "file" else int(b) for b in a.budgets.split(",")]
    t0 = time.time()
    # One task per space (its cache is written by one process).
    with Pool(min(a.jobs, len(spaces))) as pool:
        results = [r for rs in pool.map(one_space, [(s, a.out, a.reps, budgets) for s in spaces]) for r in rs]
    (a.out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    print(table(results))
    print(f"wall {time.time() - t0:.0f} s; simulated {sum(r['simulated'] for r in results)} runs")


if __name__ == "__main__":
    sys.exit(main())
