"""`aqmlab search`: it finds a worst case known analytically, resumes after SIGKILL without
re-running a point, shrinks within its tolerance (checked by re-running the shrunk file), and
refuses bad input in one keyed line with exit status 2 and nothing written."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib

import pandas as pd
import pytest
from _testbed import testbed_missing
from typer.testing import CliRunner

import aqmlab
from aqmlab.cli.main import app
from aqmlab.search.runner import load_search, parse_search, run_search, shrink

# Two Reno flows at 10 ms against two at 10·r ms through a drop-tail queue. Reno's throughput
# goes as 1/RTT at equal loss (Mathis et al., "The Macroscopic Behavior of the TCP Congestion
# Avoidance Algorithm", CCR 1997), so Jain's index over the four flows is
# (1 + 1/r)² / (2 (1 + 1/r²)) = (r + 1)² / (2 (r² + 1)): 1 at r = 1, falling monotonically for
# r > 1 (its derivative is (1 − r²)/(r² + 1)² < 0). The worst case over r ∈ [1, 8] is r = 8.
RENO = """\
name = "reno-rtt"
duration = "20s"
warmup = "5s"
seed = 1

[bottleneck]
rate = "10Mbps"
buffer = "0.5bdp"
aqm = { kind = "taildrop" }

[[flows]]
name = "short"
cc = "reno"
count = 2
rtt = "10ms"
start = "uniform(0s, 2s)"

[[flows]]
name = "long"
cc = "reno"
count = 2
rtt = "${10*r}ms"
start = "uniform(0s, 2s)"

[search]
objective = "min jain"
budget = 12
seeds = [1]
batch = 4
[search.space]
r = { low = 1.0, high = 8.0, log = true }
[search.shrink]
tolerance = 0.05
check_seeds = [7, 8]
"""


def jain_formula(r: float) -> float:
    return (r + 1) ** 2 / (2 * (r * r + 1))


@pytest.fixture(scope="module")
def reno(tmp_path_factory):
    d = tmp_path_factory.mktemp("reno")
    (d / "reno.toml").write_text(RENO)
    s = load_search(d / "reno.toml")
    res = run_search(s, d / "out", jobs=2)
    return d, s, res


def test_the_search_finds_reno_rtt_unfairness_worst_at_the_largest_rtt_ratio(reno):
    d, s, res = reno
    trials = pd.read_parquet(d / "out" / "trials.parquet")
    assert len(trials) == 12 and list(trials["point"]) == list(range(12))
    worst = trials.loc[trials["objective"].idxmin()]
    # The analytic worst is the range's top, r = 8; 12 points must land in its top eighth
    # (log-scale), where the formula is within 0.04 of its minimum.
    assert worst["r"] >= 6.0, trials[["r", "objective"]]
    assert jain_formula(6.0) - jain_formula(8.0) < 0.04
    # Points at small ratios are fairer than the worst one (the formula's ordering).
    assert (trials.loc[trials["r"] < 2, "objective"] > worst["objective"] + 0.1).all()
    # best.toml is the worst point as a plain scenario: the same run as the trial's.
    best = aqmlab.load_scenario(d / "out" / "best.toml")
    assert best.hash() == worst["run_seed1"]
    assert tomllib.loads((d / "out" / "best.toml").read_text())["flows"][1]["rtt"] == f"{10 * worst['r']:g}ms"


def test_shrinking_keeps_the_objective_within_the_tolerance_on_a_rerun_of_the_shrunk_file(reno):
    d, s, res = reno
    doc = shrink(s, d / "out", res.best, jobs=2)
    worst = res.best.value
    shrunk = aqmlab.load_scenario(d / "out" / "shrunk.toml")
    # Smaller: no class has more flows, the run is no longer.
    assert [f.count for f in shrunk.flows] <= [2, 2] and sum(f.count for f in shrunk.flows) <= 4
    # Re-run the file with each search seed and read Jain's index from the run itself.
    vals = []
    for seed in s.seeds:
        sc = aqmlab.Scenario.model_validate({**shrunk.canonical(), "seed": seed})
        vals.append(aqmlab.run(sc).summary["metrics"]["jain"])
    v = sum(vals) / len(vals)
    assert v <= worst + 0.05 * worst, (v, worst)
    assert doc["shrunk"]["value"] == pytest.approx(v, abs=1e-12)
    # Every kept step held on its own; the check on other seeds is reported per seed.
    assert all(st["value"] <= worst * 1.05 for st in doc["steps"] if st["kept"])
    assert set(doc["check"]["values"]) == {"7", "8"}


def test_a_search_killed_with_sigkill_resumes_without_rerunning_a_point(tmp_path):
    text = RENO.replace("budget = 12", "budget = 8").replace('duration = "20s"', 'duration = "10s"').replace('warmup = "5s"', 'warmup = "2s"')
    f = tmp_path / "s.toml"
    f.write_text(text)
    s = load_search(f)
    ref = run_search(s, tmp_path / "ref", jobs=1)
    assert ref.simulated == 8
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "aqmlab", "search", str(f), "-o", str(out), "-j", "1", "-q", "--no-shrink"]
    proc = subprocess.Popen(cmd, start_new_session=True)
    deadline = time.time() + 180
    while time.time() < deadline:
        done = [p for p in (out / "runs").glob("*") if not p.name.startswith(".")] if (out / "runs").is_dir() else []
        if len(done) >= 2:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = {p.name for p in (out / "runs").glob("*") if not p.name.startswith(".")}
    assert 2 <= len(before) < 8, before
    res = run_search(s, out, jobs=1)
    after = {p.name for p in (out / "runs").glob("*") if not p.name.startswith(".")}
    # Only the missing runs were simulated; every stored one was reused.
    assert res.simulated == len(after) - len(before) == 8 - len(before)
    # The resumed search asked exactly the points the uninterrupted one did (each round's
    # sampler is seeded by the round and told every stored point), with the same values.
    got = pd.read_parquet(out / "trials.parquet")
    want = pd.read_parquet(tmp_path / "ref" / "trials.parquet")
    pd.testing.assert_frame_equal(got, want)
    # Running a finished search again simulates nothing.
    assert run_search(s, out, jobs=1).simulated == 0


def test_the_report_shows_the_objective_the_space_and_the_worst_points(reno):
    from aqmlab.report.search import write_search_report

    d, s, res = reno
    page = write_search_report(s, d / "out")
    html = page.read_text()
    assert html.count("<img ") == 2  # objective over evaluations, explored space (1-D)
    trials = pd.read_parquet(d / "out" / "trials.parquet")
    assert f"<td>{trials['objective'].min():.4g}</td>" in html


# ------------------------------------------------------------------------------------------
# Bad input
# ------------------------------------------------------------------------------------------

R = RENO


def _sub(old: str, new: str) -> str:
    assert old in R, old
    return R.replace(old, new, 1)


BAD = [
    ("unknown-variable", _sub('rtt = "${10*r}ms"', 'rtt = "${10*q}ms"'), "22:", "unknown variable 'q'"),
    ("unused-variable", _sub("[search.space]\n", "[search.space]\nz = { low = 1, high = 2 }\n"), "search.space.z:", "not used in any ${...}"),
    ("empty-choices", _sub("r = { low = 1.0, high = 8.0, log = true }", "r = { choices = [] }"), "search.space.r.choices:", "empty range"),
    ("empty-range", _sub("r = { low = 1.0, high = 8.0, log = true }", "r = { low = 2.0, high = 2.0 }"), "search.space.r:", "empty range"),
    ("low-above-high", _sub("r = { low = 1.0, high = 8.0, log = true }", "r = { low = 8.0, high = 1.0 }"), "search.space.r:", "is above high"),
    (
        "log-low-not-positive",
        _sub("r = { low = 1.0, high = 8.0, log = true }", "r = { low = 0.0, high = 8.0, log = true }"),
        "search.space.r.low:",
        "log = true needs low > 0",
    ),
    ("no-such-class", _sub('objective = "min jain"', 'objective = "min rel_throughput:medium"'), "search.objective:", "no flow class named 'medium'"),
    ("unknown-metric", _sub('objective = "min jain"', 'objective = "min fairness"'), "search.objective:", "unknown metric 'fairness'"),
    ("class-missing", _sub('objective = "min jain"', 'objective = "max harm"'), "search.objective:", "harm is per class"),
    ("budget-zero", _sub("budget = 12", "budget = 0"), "search.budget:", "at least 1"),
    ("unknown-search-key", _sub("budget = 12", "budgte = 12"), "search.budgte:", "unknown key"),
    ("seed-twice", _sub("seeds = [1]", "seeds = [1, 1]"), "search.seeds:", "listed twice"),
    ("bad-scenario-at-a-point", _sub('buffer = "0.5bdp"', 'buffer = "${r - 2}bdp"'), "bottleneck.buffer", "(at r = 1"),
]


@pytest.mark.parametrize("name,text,where,fragment", BAD, ids=[b[0] for b in BAD])
def test_bad_search_input_is_one_keyed_line_exit_2_nothing_written(tmp_path, name, text, where, fragment):
    f = tmp_path / "s.toml"
    f.write_text(text)
    r = CliRunner().invoke(app, ["search", str(f), "-o", str(tmp_path / "out")])
    msg = r.stderr.strip()
    assert r.exit_code == 2, (r.exit_code, r.output)
    assert len(msg.splitlines()) == 1 and str(f) in msg and where in msg and fragment in msg, msg
    assert not (tmp_path / "out").exists()


def _line_of(text: str, fragment: str) -> int:
    """The 1-based line of the one line of `text` that holds `fragment`."""
    lines = [i for i, ln in enumerate(text.splitlines(), 1) if fragment in ln]
    assert len(lines) == 1, (fragment, lines)
    return lines[0]


# (id, text, the line's fragment, the error after "s.toml:<line>: ")
TABLE_ERRORS = [
    (
        "misspelt-var-key",
        _sub("r = { low = 1.0, high = 8.0, log = true }", "r = { low = 1.0, hihg = 8.0, log = true }"),
        "hihg",
        "search.space.r.hihg: unknown key (did you mean 'high'?)",
    ),
    ("misspelt-shrink-key", _sub("tolerance = 0.05", "tolerence = 0.05"), "tolerence", "search.shrink.tolerence: unknown key (did you mean 'tolerance'?)"),
    ("budget-as-a-string", _sub("budget = 12", 'budget = "12"'), "budget", "search.budget: '12': Input should be a valid integer"),
    ("log-as-a-string", _sub("log = true }", 'log = "yes" }'), "log = ", "search.space.r.log: 'yes': Input should be a valid boolean"),
    ("var-not-a-table", _sub("r = { low = 1.0, high = 8.0, log = true }", "r = 4"), "r = 4", "search.space.r: 4: Input should be a valid dictionary"),
    (
        "choices-with-a-range",
        _sub("r = { low = 1.0, high = 8.0, log = true }", "r = { low = 1.0, choices = [1, 8] }"),
        "choices",
        "search.space.r: choices cannot go with low",
    ),
    (
        "check-seeds-overlap",
        _sub("check_seeds = [7, 8]", "check_seeds = [1, 8]"),
        "check_seeds",
        "search.shrink.check_seeds: the check seeds must differ from the search's seeds",
    ),
    ("unknown-optimizer", _sub("batch = 4", 'batch = 4\noptimizer = "tpx"'), "optimizer", "search.optimizer: 'tpx': Input should be 'tpe', 'random' or 'grid'"),
    ("unknown-design", _sub("batch = 4", 'batch = 4\ndesign = "edges"'), "design", "search.design: 'edges': Input should be 'corners' or 'none'"),
]


@pytest.mark.parametrize("name,text,fragment,error", TABLE_ERRORS, ids=[t[0] for t in TABLE_ERRORS])
def test_the_search_table_is_checked_by_its_model_with_file_line_and_key(name, text, fragment, error):
    with pytest.raises(aqmlab.ScenarioError) as e:
        parse_search(text, file="s.toml")
    assert str(e.value) == f"s.toml:{_line_of(text, fragment)}: {error}"


def test_the_budget_option_below_one_is_refused(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text(RENO)
    r = CliRunner().invoke(app, ["search", str(f), "-o", str(tmp_path / "out"), "--budget", "0"])
    assert r.exit_code == 2 and "--budget: 0: the budget is a number of points, at least 1" in r.stderr
    assert not (tmp_path / "out").exists()


def test_replay_emu_is_refused_up_front_when_the_emulator_cannot_run_the_case(tmp_path):
    # DCTCP is a CC the emulator refuses by name unless the kernel has it; a harm objective
    # is refused whatever the kernel. Either way: before any run, exit 2, nothing written.
    f = tmp_path / "s.toml"
    f.write_text(
        _sub('objective = "min jain"', 'objective = "max harm:long"').replace(
            'cc = "reno"\ncount = 2\nrtt = "${10*r}ms"', 'cc = "cubic"\ncount = 2\nrtt = "${10*r}ms"'
        )
    )
    r = CliRunner().invoke(app, ["search", str(f), "-o", str(tmp_path / "out"), "--replay-emu"])
    assert r.exit_code == 2 and "--replay-emu:" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_a_directory_of_another_search_is_refused(reno, tmp_path):
    d, s, res = reno
    other = parse_search(RENO.replace("seeds = [1]", "seeds = [2]"), file="other.toml")
    with pytest.raises(aqmlab.ScenarioError, match="holds another search"):
        run_search(other, d / "out", jobs=1)


def _testbed() -> str | None:
    """Why the emulator cannot run here, or None."""
    from aqmlab.emu.emulate import EmulatorError, router_binary

    try:
        router_binary()
    except EmulatorError:
        return "needs the router binary (make build)"
    return testbed_missing()


@pytest.mark.skipif(_testbed() is not None, reason=f"the emulator's testbed: {_testbed()}")
def test_replay_emu_runs_the_shrunk_case_on_the_emulator(tmp_path):
    # Reno is in every kernel; one emulator at a time on the machine (flock).
    text = RENO.replace("budget = 12", "budget = 4").replace('duration = "20s"', 'duration = "8s"').replace('warmup = "5s"', 'warmup = "2s"')
    f = tmp_path / "s.toml"
    f.write_text(text)
    r = subprocess.run(
        ["flock", "/tmp/aqmlab-emu.lock", sys.executable, "-m", "aqmlab", "search", str(f), "-o", str(tmp_path / "out"), "-q", "--replay-emu"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    emu = json.loads((tmp_path / "out" / "emu.json").read_text())
    shrunk = aqmlab.load_scenario(tmp_path / "out" / "shrunk.toml")
    summary = json.loads((tmp_path / "out" / "emu" / "summary.json").read_text())
    assert summary["backend"] == "emu" and emu["scenario"] == shrunk.hash() == summary["scenario_hash"]
    # Jain's index of n flows lies in [1/n, 1]; the emulator's is the run's own.
    n = sum(fl.count for fl in shrunk.flows)
    assert 1 / n <= emu["emu_value"] <= 1 and emu["emu_value"] == summary["metrics"]["jain"]


# ------------------------------------------------------------------------------------------
# The first round: the space's corners and centre (search.design)
# ------------------------------------------------------------------------------------------

# RENO with a buffer b (linear, 0.5–2.5 BDP) beside r (log, 1–16), and in the 3-d space the
# long class's flow count n (integer, 1–3); short runs: these tests check points, not values.
EDGES_2D = (
    RENO.replace('duration = "20s"', 'duration = "4s"')
    .replace('warmup = "5s"', 'warmup = "1s"')
    .replace('buffer = "0.5bdp"', 'buffer = "${b}bdp"')
    .replace("r = { low = 1.0, high = 8.0, log = true }", "b = { low = 0.5, high = 2.5 }\nr = { low = 1.0, high = 16.0, log = true }")
)
EDGES_3D = EDGES_2D.replace('count = 2\nrtt = "${10*r}ms"', 'count = "${n}"\nrtt = "${10*r}ms"').replace(
    "r = { low = 1.0, high = 16.0, log = true }", "r = { low = 1.0, high = 16.0, log = true }\nn = { low = 1, high = 3, int = true }"
)


def _first_round(text: str, **table: object) -> list[dict]:
    from aqmlab.search.runner import ask, round_size

    s = parse_search(text, file="s.toml")
    for k, v in table.items():
        setattr(s, k, v)
    return ask(s, [], round_size(s, []), 0)


def test_the_first_batch_of_a_2d_space_is_its_centre_then_its_four_corners():
    # Centre: b's arithmetic middle (0.5 + 2.5)/2 = 1.5, r's geometric one √(1·16) = 4 (the
    # arithmetic middle would be 8.5). Then all-low, all-high, then (b low, r high) and its
    # opposite. Batch 4 < 5 points: the design is one round of its own.
    want = [{"b": 1.5, "r": 4.0}, {"b": 0.5, "r": 1.0}, {"b": 2.5, "r": 16.0}, {"b": 0.5, "r": 16.0}, {"b": 2.5, "r": 1.0}]
    assert _first_round(EDGES_2D) == want


def test_the_first_batch_of_a_3d_space_is_its_centre_then_its_eight_corners_in_opposite_pairs():
    # n's centre (1 + 3)/2 = 2; corners as bits (b, r, n), 0 = low: 000 111, 001 110, 010 101,
    # 011 100.
    lo, hi = {"b": 0.5, "r": 1.0, "n": 1}, {"b": 2.5, "r": 16.0, "n": 3}

    def corner(bits: str) -> dict:
        return {k: (hi if c == "1" else lo)[k] for k, c in zip("brn", bits)}

    want = [{"b": 1.5, "r": 4.0, "n": 2}] + [corner(c) for c in ("000", "111", "001", "110", "010", "101", "011", "100")]
    got = _first_round(EDGES_3D)
    assert got == want
    assert all(isinstance(p["n"], int) for p in got)  # an integer variable stays integer


def test_a_log_dimension_s_centre_is_geometric_and_a_linear_one_s_arithmetic():
    from aqmlab.search.design import initial_design
    from aqmlab.search.spec import Var

    (centre, *_) = initial_design([Var("a", low=0.1, high=1000.0, log=True), Var("c", low=2.0, high=1000.0)], seed=0)
    assert centre == {"a": 10.0, "c": 501.0}


def test_a_budget_below_the_design_keeps_its_beginning_centre_then_opposite_corners():
    # Budget 3 of a 9-point design: the centre, all-low, all-high (so each variable is seen at
    # both bounds); the loop asks no more than the budget.
    got = _first_round(EDGES_3D, budget=3)
    assert got == [{"b": 1.5, "r": 4.0, "n": 2}, {"b": 0.5, "r": 1.0, "n": 1}, {"b": 2.5, "r": 16.0, "n": 3}]


def test_categories_are_each_seen_at_the_centre_and_corners_use_the_first_choice():
    from aqmlab.search.design import initial_design
    from aqmlab.search.spec import Var

    space = [Var("aqm", choices=("step", "pi2", "dualpi2")), Var("f", low=1.0, high=4.0, log=True), Var("k", choices=(5, 10))]
    got = initial_design(space, seed=0)
    c = {"aqm": "step", "f": 2.0, "k": 5}
    want = [c, {**c, "aqm": "pi2"}, {**c, "aqm": "dualpi2"}, {**c, "k": 10}, {**c, "f": 1.0}, {**c, "f": 4.0}]
    assert got == want


def test_above_four_numeric_variables_the_design_is_both_extreme_corners_and_a_latin_hypercube():
    from aqmlab.search.design import initial_design
    from aqmlab.search.spec import Var

    space = [Var(f"x{i}", low=0.0, high=float(i + 1)) for i in range(5)]
    got = initial_design(space, seed=3)
    assert got[1] == {f"x{i}": 0.0 for i in range(5)} and got[2] == {f"x{i}": float(i + 1) for i in range(5)}
    lhs = got[3:]
    assert len(lhs) == 10  # 2·d points
    for i, v in enumerate(space):
        # One point in each of the 10 equal strata of every variable's range.
        strata = sorted(int(p[v.name] / (i + 1) * 10) for p in lhs)
        assert strata == list(range(10)), (v.name, strata)
    assert initial_design(space, seed=3) == got and initial_design(space, seed=4)[3:] != lhs


def _trajectory(text: str, budget: int, seed: int) -> list[dict]:
    """The points a search asks, told a synthetic value (no runs): the loop's rounds."""
    from aqmlab.search.runner import ask, round_size

    s = parse_search(text, file="s.toml")
    s.budget, s.seed = budget, seed
    told: list = []
    k = 0
    while len(told) < s.budget:
        pts = ask(s, told, round_size(s, told), k)
        told += [(p, 1 / (1 + p["b"]) + 0.01 * p["r"]) for p in pts]
        k += 1
    return [p for p, _ in told]


def test_the_same_seed_gives_the_same_points_and_another_seed_other_points_after_the_design():
    a, b, c = _trajectory(EDGES_2D, 13, 0), _trajectory(EDGES_2D, 13, 0), _trajectory(EDGES_2D, 13, 1)
    assert a == b
    assert a[:5] == c[:5] and a[5:] != c[5:]
    # The optimizer was told the design: it does not ask a design point again.
    assert all(p not in a[:5] for p in a[5:])


def test_design_none_starts_with_the_optimizer_and_is_another_search():
    s = parse_search(EDGES_2D, file="s.toml")
    none = parse_search(EDGES_2D.replace("batch = 4", 'batch = 4\ndesign = "none"'), file="s.toml")
    assert none.identity() != s.identity()
    pts = _first_round(EDGES_2D, design="none")
    assert len(pts) == 4 and {"b": 0.5, "r": 1.0} not in pts


def test_a_search_interrupted_after_its_design_resumes_without_repeating_a_design_point(tmp_path):
    from aqmlab.search.design import initial_design
    from aqmlab.search.runner import Evaluator

    f = tmp_path / "s.toml"
    f.write_text(EDGES_2D.replace("budget = 12", "budget = 9"))
    s = load_search(f)
    ref = run_search(s, tmp_path / "ref", jobs=1)

    class Killed(Evaluator):
        """Dies in the second round, after its points were written to search.json."""

        calls = 0

        def evaluate(self, points):
            Killed.calls += 1
            if Killed.calls == 2:
                raise KeyboardInterrupt
            super().evaluate(points)

    out = tmp_path / "killed"
    with Killed(s, out, jobs=1, cluster=None) as ev, pytest.raises(KeyboardInterrupt):
        run_search(s, out, evaluator=ev)
    assert len(json.loads((out / "search.json").read_text())["points"]) == 9  # round 1 asked
    res = run_search(s, out, jobs=1)
    got = pd.read_parquet(out / "trials.parquet")
    pd.testing.assert_frame_equal(got, pd.read_parquet(tmp_path / "ref" / "trials.parquet"))
    assert res.simulated == 4  # only the interrupted round's runs
    # Round 0 is the design, and no design point comes back later.
    design = initial_design(s.space, s.seed)
    pts = [{"b": b, "r": r} for b, r in zip(got["b"], got["r"])]
    assert list(got["round"][:5]) == [0] * 5 and pts[:5] == design
    assert all(p not in design for p in pts[5:]) and len(ref.points) == 9


# ------------------------------------------------------------------------------------------
# The estimate printed before a search starts
# ------------------------------------------------------------------------------------------


def _hours(line: str, workers: int) -> float:
    m = re.search(rf"([0-9.]+) (h|min) on {workers} worker", line)
    assert m, line
    return float(m.group(1)) / (60 if m.group(2) == "min" else 1)


def test_the_search_says_its_runs_and_wall_time_before_starting_and_warns_once_above_an_hour(tmp_path, reno):
    f = tmp_path / "s.toml"
    # Runs: budget × seeds, and a solo baseline beside each run for a harm objective.
    for text, runs, what in [
        (RENO, 12, "12 points × 1 seed"),
        (_sub("seeds = [1]", "seeds = [1, 2, 3]"), 36, "12 points × 3 seeds"),
        (_sub('objective = "min jain"', 'objective = "max harm:long"'), 24, "12 points × 1 seed, each with its solo baseline"),
    ]:
        f.write_text(text)
        r = CliRunner().invoke(app, ["search", str(f), "-o", str(tmp_path / "out"), "--dry-run"])
        assert r.exit_code == 0, r.output
        assert f"{runs} runs to simulate ({what})" in r.stdout and "estimate from the engine's estimator" in r.stdout, r.stdout
        assert "warning" not in r.stderr, r.stderr
        assert not (tmp_path / "out").exists()
    # A search stored already has nothing left to run (the shrink's runs are still ahead).
    r = CliRunner().invoke(app, ["search", str(reno[0] / "reno.toml"), "-o", str(reno[0] / "out"), "--dry-run"])
    assert r.exit_code == 0 and "no run to simulate (12 points × 1 seed, 12 already stored)" in r.stdout, r.stdout

    # At 10 Gbit/s for 3 h a run carries C·T/1500 B = 9·10⁹ packets, ≈ 32 min at the engine's
    # 4.71 M packets/s (bench/README.md §Estimates): 12 runs, one after the other, ≈ 6.4 h.
    f.write_text(_sub('rate = "10Mbps"', 'rate = "10Gbps"').replace('duration = "20s"', 'duration = "10800s"'))
    by_hand = 12 * 10e9 * 10800 / (1500 * 8) / 4.71e6 / 3600
    r = CliRunner().invoke(app, ["search", str(f), "-o", str(tmp_path / "out"), "--dry-run", "-j", "1", "--no-shrink"])
    assert r.exit_code == 0, r.output
    assert by_hand / 2 < _hours(r.stdout, 1) < by_hand * 2, (by_hand, r.stdout)
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and "expected to take over an hour" in warnings[0] and str(f) in warnings[0], r.stderr
    # On 4 workers: three rounds of 4 points (the first the design's three — the centre and
    # both bounds of r — and one sampled), each round's runs at once: 3 runs' time of 12.
    r4 = CliRunner().invoke(app, ["search", str(f), "-o", str(tmp_path / "out"), "--dry-run", "-j", "4", "--no-shrink"])
    assert _hours(r4.stdout, 4) == pytest.approx(_hours(r.stdout, 1) * 3 / 12, rel=0.05), r4.stdout
    assert not (tmp_path / "out").exists()


def test_a_search_whose_runs_cannot_fit_in_memory_is_refused_before_anything_runs(tmp_path):
    # Three million flows in one class, a time-series row per flow and interval: hundreds of GB
    # by the estimator, more than a test machine has (the check `aqmlab sweep` makes per run).
    f = tmp_path / "s.toml"
    f.write_text(_sub('cc = "reno"\ncount = 2\nrtt = "10ms"', 'cc = "reno"\ncount = 3000000\nrtt = "10ms"'))
    r = CliRunner().invoke(app, ["search", str(f), "-o", str(tmp_path / "out")])
    msg = r.stderr.strip()
    assert r.exit_code == 2 and len(msg.splitlines()) == 1, (r.exit_code, r.output)
    assert str(f) in msg and "needs an estimated" in msg and "of memory" in msg and "the run at r = " in msg, msg
    assert not (tmp_path / "out").exists()
