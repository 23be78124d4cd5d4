"""Harm (Ware, Mukerjee, Seshan, Sherry, "Beyond Jain's Fairness Index: Setting the Bar for the
Deployment of Congestion Control Algorithms", HotNets 2019).

For a scenario with several flow classes, the harm class B does to class A is measured against
A's *solo baseline*: the same scenario with every class running A's congestion control (same
counts, RTTs and start times — "A against its own kind in the same setting"). For a metric
where more is better (throughput), harm = (baseline − mixed) / baseline; for one where less is
better (queueing delay), harm = (mixed − baseline) / mixed. 0 means no harm; negative values
mean A does better than against its own kind (the formulas are the measurement crate's,
`results::metrics::throughput_harm` and `delay_harm`; this module runs the baselines and stores
the table). Baselines are ordinary runs stored under their
scenario hash, so they are run once and reused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from aqmlab import engine
from aqmlab.scenario import Scenario
from aqmlab.simulate.run import run
from aqmlab.store.atomic import write_text
from aqmlab.sweep.runner import is_complete

__all__ = ["harm", "solo_baseline", "load_harm"]


def solo_baseline(s: Scenario, class_index: int) -> Scenario:
    """The scenario with every flow class running class `class_index`'s CC (and its ECN
    setting and CC parameters)."""
    d = s.canonical()
    ref = d["flows"][class_index]
    for f in d["flows"]:
        if f["cc"] == "cbr" or ref["cc"] == "cbr":
            continue
        if (f["cc"], f["cc_params"], f["ecn"]) != (ref["cc"], ref["cc_params"], ref["ecn"]):
            f["cc"], f["cc_params"], f["ecn"] = ref["cc"], ref["cc_params"], ref["ecn"]
            f["name"] = None  # named after its (new) CC
    # Same scenario name: a class already among its own kind has the scenario as its baseline
    # (one run, not two).
    return Scenario.model_validate(d)


def _run_cached(s: Scenario, runs_dir: Path) -> tuple[dict[str, Any], bool]:
    target = runs_dir / s.hash()
    if is_complete(target, s.hash()):
        return json.loads((target / "summary.json").read_text(encoding="utf-8")), False
    res = run(s)
    res.save(target, overwrite=True)
    return res.summary, True


def harm(s: Scenario, directory: str | Path) -> tuple[pd.DataFrame, int]:
    """Run (or reuse) the mixed scenario and each class's solo baseline under DIR/runs; return
    the harm table (one row per class) and how many runs had to be simulated."""
    d = Path(directory)
    runs_dir = d / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    mixed, ran = _run_cached(s, runs_dir)
    n_ran = int(ran)
    rows = []
    for i, cls in enumerate(mixed["classes"]):
        if s.flows[i].cc == "cbr":
            continue
        base_s = solo_baseline(s, i)
        base, ran = _run_cached(base_s, runs_dir)
        n_ran += int(ran)
        bc = base["classes"][i]
        t_mix, t_base = cls["goodput_bps"], bc["goodput_bps"]
        q_mix, q_base = mixed["metrics"]["sojourn_ms"]["mean"], base["metrics"]["sojourn_ms"]["mean"]
        t_harm, q_harm = engine.harm(t_mix, t_base, q_mix, q_base)
        rows.append(
            {
                "class": cls["name"],
                "cc": cls["cc"],
                "goodput_bps": t_mix,
                "baseline_goodput_bps": t_base,
                "throughput_harm": t_harm,
                "sojourn_mean_ms": q_mix,
                "baseline_sojourn_mean_ms": q_base,
                "delay_harm": q_harm,
                "baseline_run": base_s.hash(),
            }
        )
    df = pd.DataFrame(rows)
    write_text(d / "harm.json", json.dumps({"scenario": s.hash(), "harm": rows}, indent=2) + "\n")
    return df, n_ran


def load_harm(directory: str | Path) -> pd.DataFrame:
    return pd.DataFrame(json.loads((Path(directory) / "harm.json").read_text(encoding="utf-8"))["harm"])
