"""Sweeps: grid expansion (the seed studies' run counts, worked by hand from the grids the
papers describe), expressions, resume after SIGKILL, corrupt-run detection, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import aqmlab
from aqmlab.cli.main import app
from aqmlab.studies import study_path
from aqmlab.sweep.runner import build_index
from aqmlab.sweep.spec import parse_sweep

BASE = """\
name = "small"
duration = "1s"
warmup = "0s"
seed = 1

[bottleneck]
rate = "20Mbps"
buffer = "${f}bdp"
aqm = { kind = "taildrop" }

[[flows]]
cc = "cubic"
count = "${N}"
rtt = "10ms"
"""


def sweep_text(extra: str) -> str:
    return BASE + textwrap.dedent(extra)


# ---------------------------------------------------------------------------------------------
# Grid expansion
# ---------------------------------------------------------------------------------------------


def test_each_study_expands_to_the_runs_its_paper_describes():
    # ckcd (Liu et al. (CKCD)): AQM {taildrop, red, codel, choke, ckcd} × mixes {bbr+cubic,
    # bbr+cubic+reno, 5+5+5, 5 cubic joining, 5 bbr joining} = 5 × 5.
    assert aqmlab.load_sweep(study_path("ckcd")).size() == 5 * 5
    # dualq (De Schepper et al. (DualQ)): 0–10 DCTCP × 0–10 Cubic without 0+0 = 11·11 − 1 = 120, × 4 AQMs; and
    # the dynamic runs: 2 arrival rates × 4 AQMs beside 1 DCTCP + 1 Cubic.
    assert aqmlab.load_sweep(study_path("dualq")).size() == (11 * 11 - 1) * 4 + 2 * 4
    # fejes2019 (Fejes et al. 2019): single-RTT C(3) × RTT(2) × N(4) × mix(3) × AQM(4) × f(6) = 1728;
    # multi-RTT mixes (5) × C(3) × AQM(4) × f(6) = 360.
    assert aqmlab.load_sweep(study_path("fejes2019")).size() == 3 * 2 * 4 * 3 * 4 * 6 + 5 * 3 * 4 * 6
    # fejes2020 (Fejes et al. 2020): single-RTT C(2) × RTT(2) × N(5) × mix(3) × AQM(3) × K(7) ×
    # buffer(2) = 2520, + TailDrop reference C × RTT × N × mix = 60; multi-RTT mixes (6) ×
    # C(2) × AQM(3) × K(9) × buffer(2) = 648, + TailDrop reference 6 × 2 = 12.
    assert aqmlab.load_sweep(study_path("fejes2020")).size() == 2 * 2 * 5 * 3 * 3 * 7 * 2 + 2 * 2 * 5 * 3 + 6 * 2 * 3 * 9 * 2 + 6 * 2
    # The quick forms.
    assert aqmlab.load_sweep(study_path("dualq"), quick=True).size() == (4 * 4 - 1) * 4 + 2 * 4
    assert aqmlab.load_sweep(study_path("fejes2019"), quick=True).size() == 2 * 2 * 3 * 4
    assert aqmlab.load_sweep(study_path("fejes2020"), quick=True).size() == 2 * 3 * 3 * 3
    # l4s (RFC 9330-9332): 3 RTTs × 5 AQMs of Prague + CUBIC, + two Prague flows at RTT and
    # 4 × RTT through DualPI2 at 5 and 20 ms, + an ECT(1) and a Not-ECT flood through DualPI2 at
    # 20 and 80 ms; the quick form runs the same grid shorter.
    assert aqmlab.load_sweep(study_path("l4s")).size() == aqmlab.load_sweep(study_path("l4s"), quick=True).size() == 3 * 5 + 2 + 2 * 2


def test_expressions_only_exclude_and_zero_count_classes():
    sw = parse_sweep(
        sweep_text(
            """
            [sweep]
            N = [2, 4]
            f = [0.5, 2]
            "bottleneck.aqm" = [{ kind = "taildrop" }, { kind = "pie", target = "${0.75*f}rtt" }]
            exclude = [{ N = 4, f = 2 }]

            [sweep.cases.extra]
            "none" = {}
            "reno" = { only = { f = 0.5 }, "flows.0.name" = "x" }
            """
        )
    )
    pts = sw.points()
    # N {2,4} × f {0.5,2} × aqm 2 × extra 2, minus (N=4,f=2) ×2×2, minus "reno" at f = 2.
    # By hand: f=0.5: 2 N × 2 aqm × 2 extra = 8; f=2: N=2 only × 2 aqm × 1 extra = 2.
    assert len(pts) == 10
    runs = [sw._build(p) for p in pts]
    r = next(r for r in runs if r.params["bottleneck.aqm"] == "pie" and r.params["f"] == 0.5 and r.params["N"] == 4)
    s = r.scenario
    # ${0.75*f}rtt with f = 0.5 → "0.375rtt"; ${f}bdp → "0.5bdp"; "${N}" → the integer 4.
    assert s.bottleneck.aqm.target == "0.375rtt"
    assert s.bottleneck.buffer == "0.5bdp"
    assert s.flows[0].count == 4
    # A class whose count evaluates to 0 is left out of the run.
    text = BASE + '\n[[flows]]\ncc = "dctcp"\ncount = "${n2}"\nrtt = "5ms"\n\n[sweep]\nN = [2]\nf = [1]\nn2 = [0, 3]\n'
    runs = [sw._build(p) for sw in [parse_sweep(text)] for p in sw.points()]
    assert [len(r.scenario.flows) for r in runs] == [1, 2]


def test_runs_are_named_by_the_hash_of_their_canonical_scenario():
    sw = parse_sweep(sweep_text("[sweep]\nN = [1, 2]\nf = [1]\n"))
    a, b = sw.runs()
    assert a.hash != b.hash
    # Writing the same point differently (2 vs "${N}" = 2) gives the same run.
    same = parse_sweep(BASE.replace('"${N}"', "2").replace("${f}bdp", "1bdp") + "\n[sweep]\nx = [1]\n").runs()[0]
    assert same.hash == b.hash


# ---------------------------------------------------------------------------------------------
# Running, resuming, the index
# ---------------------------------------------------------------------------------------------

RESUMABLE = sweep_text(
    """
    [sweep]
    N = [1, 2, 3]
    f = [0.5, 1]
    """
).replace('duration = "1s"', 'duration = "3s"')


def _metrics(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=["wall_time_s"]).sort_values(["run", "class"]).reset_index(drop=True)


def test_a_sweep_killed_with_sigkill_resumes_without_losing_or_duplicating_a_run(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text(RESUMABLE)
    ref_dir = tmp_path / "ref"
    ref = aqmlab.run_sweep(aqmlab.load_sweep(f), ref_dir, jobs=2)
    assert ref.ran == 6 and not ref.failed
    ref_df = aqmlab.load(ref_dir)
    assert len(ref_df) == 6 and ref_df["run"].nunique() == 6

    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "aqmlab", "sweep", str(f), "-o", str(out), "-j", "1", "-q"]
    proc = subprocess.Popen(cmd, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        done = [d for d in (out / "runs").glob("*") if not d.name.startswith(".")] if (out / "runs").is_dir() else []
        if len(done) >= 2:
            break
        time.sleep(0.05)
    # SIGKILL the whole process group (the sweep and its worker) mid-sweep.
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished_before = {d.name for d in (out / "runs").glob("*") if not d.name.startswith(".")}
    assert 2 <= len(finished_before) < 6, finished_before
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    df = aqmlab.load(out)
    assert sorted(df["run"]) == sorted(ref_df["run"]), "every run exactly once"
    pd.testing.assert_frame_equal(_metrics(df), _metrics(ref_df))
    # The runs finished before the kill were kept, not redone.
    for h in finished_before:
        assert (out / "runs" / h / "summary.json").stat().st_mtime < time.time()
    assert not list((out / "runs").glob(".*")), "no temporary leftovers"


def test_a_corrupt_run_directory_is_detected_and_redone(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text(sweep_text("[sweep]\nN = [1, 2]\nf = [1]\n"))
    sw = aqmlab.load_sweep(f)
    first = aqmlab.run_sweep(sw, tmp_path / "o", jobs=1)
    assert first.ran == 2
    victim = next((tmp_path / "o" / "runs").iterdir())
    (victim / "summary.json").write_text('{"truncated": ')
    (victim / "flows.parquet").unlink()
    again = aqmlab.run_sweep(sw, tmp_path / "o", jobs=1)
    assert (again.ran, again.skipped) == (1, 1)
    assert json.loads((victim / "summary.json").read_text())["scenario_hash"] == victim.name
    assert len(aqmlab.load(tmp_path / "o")) == 2


def test_results_do_not_depend_on_parallelism(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text(RESUMABLE)
    aqmlab.run_sweep(aqmlab.load_sweep(f), tmp_path / "one", jobs=1)
    aqmlab.run_sweep(aqmlab.load_sweep(f), tmp_path / "two", jobs=2)
    pd.testing.assert_frame_equal(_metrics(aqmlab.load(tmp_path / "one")), _metrics(aqmlab.load(tmp_path / "two")))


def test_the_index_puts_swept_parameters_next_to_metrics_with_a_row_per_run_and_class(tmp_path):
    text = BASE + '\n[[flows]]\ncc = "reno"\nrtt = "20ms"\n\n[sweep]\nN = [1, 3]\nf = [1]\n'
    aqmlab.run_sweep(parse_sweep(text), tmp_path / "o", jobs=2)
    df = aqmlab.load(tmp_path / "o")
    assert len(df) == 2 * 2
    for col in ("run", "N", "f", "class", "cc", "goodput_bps", "rel_throughput", "jain", "utilization", "sojourn_mean_ms"):
        assert col in df.columns, col
    # Relative throughput: class mean ÷ (C/N_all) — the classes' weighted sum is N_all · share
    # of capacity used, i.e. Σ count·rel = N·goodput_total/C.
    for _, g in df.groupby("run"):
        n = g["count"].sum()
        assert (g["count"] * g["rel_throughput"]).sum() == pytest.approx(n * g["goodput_bps"].sum() / 20e6, rel=1e-9)
    # Rebuilding the index from the run directories gives the same table.
    pd.testing.assert_frame_equal(build_index(tmp_path / "o"), df)


# ---------------------------------------------------------------------------------------------
# Bad input: one clear message, exit status 2, nothing written
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "extra, fragment",
    [
        ('[sweep]\nN = [1]\nf = [1]\n"bottleneck.aqmm" = [{ kind = "pie" }]\n', "unknown key"),
        ("[sweep]\nN = []\nf = [1]\n", "sweep.N: empty list"),
        ("[sweep]\nN = [1]\nf = [1]\nexclude = [{ M = 1 }]\n", "'M' is not an axis"),
        ("[sweep]\nN = [1]\nf = [1]\ng = [1]\n" + '"flows.0.rtt" = ["${h}ms"]\n', "unknown variable 'h'"),
    ],
    ids=["unknown-key", "empty-list", "exclude-unknown-axis", "unknown-variable"],
)
def test_bad_sweep_input_exits_2_and_writes_nothing(tmp_path, extra, fragment):
    f = tmp_path / "bad.toml"
    f.write_text(BASE + "\n" + extra)
    out = tmp_path / "out"
    # In-process (Typer's runner): the exit status and stderr the command gives.
    r = CliRunner().invoke(app, ["sweep", str(f), "-o", str(out)])
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code == 2, r.stderr
    assert fragment in r.stderr, r.stderr
    assert r.stderr.count("error:") == 1
    assert not out.exists()


# (id, what follows BASE, the line's fragment, the error after "bad.toml:<line>: "). [sweep]
# itself is open (every key but exclude and cases is an axis); [report], [quick]'s sweep and
# the cases' shape are fixed.
TABLE_ERRORS = [
    ("misspelt-report-key", '[sweep]\nN = [1]\nf = [1]\n[report]\nx = "N"\ncolum = "f"\n', "colum", "report.colum: unknown key (did you mean 'col'?)"),
    ("report-axis-not-a-string", "[sweep]\nN = [1]\nf = [1]\n[report]\nx = 3\n", "x = 3", "report.x: 3: Input should be a valid string"),
    ("axis-not-a-list", "[sweep]\nN = 2\nf = [1]\n", "N = 2", "sweep.N: must be a list of values, not int"),
    (
        "dotted-axis-empty",
        '[sweep]\nN = [1]\nf = [1]\n"flows.*.rtt" = []\n',
        "flows.*.rtt",
        'sweep."flows.*.rtt": empty list: an axis needs at least one value',
    ),
    (
        "case-only-not-a-table",
        '[sweep]\nN = [1]\nf = [1]\n[sweep.cases.mix]\n"cubic+bbr" = { only = 3 }\n',
        "only",
        'sweep.cases.mix."cubic+bbr".only: must be a table of other axes\' values',
    ),
    ("quick-axis-not-in-sweep", "[sweep]\nN = [1]\nf = [1]\n[quick]\nsweep = { M = [1] }\n", "M = [1]", "quick.sweep.M: 'M' is not an axis of [sweep]"),
]


@pytest.mark.parametrize("name,extra,fragment,error", TABLE_ERRORS, ids=[t[0] for t in TABLE_ERRORS])
def test_the_sweep_tables_are_checked_by_their_model_with_file_line_and_key(name, extra, fragment, error):
    text = BASE + extra
    line = [i for i, ln in enumerate(text.splitlines(), 1) if fragment in ln]
    assert len(line) == 1
    with pytest.raises(aqmlab.ScenarioError) as e:
        parse_sweep(text, file="bad.toml", quick=name.startswith("quick"))
    assert str(e.value) == f"bad.toml:{line[0]}: {error}"


def test_a_cluster_that_does_not_answer_exits_2_and_writes_nothing(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text(sweep_text("[sweep]\nN = [1]\nf = [1]\n"))
    out = tmp_path / "out"
    # Port 9 (discard) on loopback: nothing listens there.
    r = subprocess.run(
        [sys.executable, "-m", "aqmlab", "sweep", str(f), "-o", str(out), "--cluster", "tcp://127.0.0.1:9"], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 2, r.stderr
    assert "does not answer" in r.stderr
    assert not out.exists()


def test_the_sweep_example_in_the_docs_expands_as_documented():
    text = (Path(__file__).parent.parent / "docs" / "sweeps.md").read_text()
    block = text.split("```toml\n", 1)[1].split("```", 1)[0]
    sw = parse_sweep(block)
    # f (4) × N (2) × mix (2), minus (f=0.1, N=10) × 2 mixes, minus "with-bbr" at N=10 for the
    # three remaining f: 16 − 2 − 3 = 11.
    assert sw.size() == 11
    runs = sw.runs()
    r = next(r for r in runs if r.params == {"f": 0.5, "N": 2, "mix": "with-bbr"})
    assert [f.cc for f in r.scenario.flows] == ["cubic", "bbr"]
    assert r.scenario.bottleneck.aqm.target == "0.375rtt"
    quick = parse_sweep(block, quick=True)
    assert quick.size() == 2 * 2 * 2 - 2 and quick.base["duration"] == "20s"
