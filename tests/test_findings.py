"""The seed findings: claims parsed from a findings file and judged on a sweep's index rows
(hand-made here, so every expected verdict follows from the numbers written in the test), the
shipped findings files checked against their studies' grids, bad files refused with file:line,
and the findings table opening a study's report."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

import aqmlab
from aqmlab.studies import STUDIES
from aqmlab.studies.findings import FindingsError, evaluate, evaluate_all, load_findings, parse_findings
from aqmlab.sweep.spec import parse_sweep

AXES = {"aqm": ["step", "pi2", "csaqm"], "N": [2, 10], "K": [0.17, 0.5]}


def rows(*runs: dict) -> pd.DataFrame:
    """Index rows: one per run and class, as aqmlab.load gives them."""
    out = []
    for i, r in enumerate(runs):
        classes = r.pop("classes", [{"class": "dctcp-5ms", "cc": "dctcp", "rtt_ms": 5.0, "rel_throughput": 1.0}])
        for c in classes:
            out.append({"run": f"r{i}", **r, **c})
    return pd.DataFrame(out)


def one(text: str, axes: dict | None = AXES):
    return parse_findings('[[finding]]\nid = "x"\nstatement = "s"\nsource = "Fig. 1"\n' + text, file="t.findings.toml", axes=axes)[0]


def test_threshold_claims_give_reproduced_or_differs() -> None:
    f = one('where = { aqm = "step", N = 2 }\nmetric = "utilization"\nclaim = "< 0.60"\n')
    df = rows(
        {"aqm": "step", "N": 2, "K": 0.17, "utilization": 0.55},
        {"aqm": "step", "N": 2, "K": 0.5, "utilization": 0.59},
        {"aqm": "pi2", "N": 2, "K": 0.17, "utilization": 0.99},
    )
    v = evaluate(f, df, AXES)
    # Both selected runs (0.55, 0.59) are below 0.60; the PI2 run is not selected.
    assert v.verdict == "reproduced" and sorted(v.values) == [0.55, 0.59]
    df.loc[1, "utilization"] = 0.61  # one of the two now fails "every value < 0.60"
    assert evaluate(f, df, AXES).verdict == "differs"
    # The same rows with agg = "mean": (0.55 + 0.61) / 2 = 0.58 < 0.60.
    f = one('where = { aqm = "step", N = 2 }\nmetric = "utilization"\nclaim = "< 0.60"\nagg = "mean"\n')
    v = evaluate(f, df, AXES)
    assert v.verdict == "reproduced" and v.measured.startswith("0.580")


def test_approx_and_range_claims() -> None:
    df = rows({"aqm": "pi2", "N": 10, "K": 0.5, "run_jain": 0.42})
    assert evaluate(one('where = { aqm = "pi2", N = 10 }\nmetric = "run_jain"\nclaim = ">= 0.9"\n'), df).verdict == "differs"
    assert evaluate(one('where = { aqm = "pi2" }\nmetric = "run_jain"\nclaim = "approx 0.5 ± 0.1"\n'), df).verdict == "reproduced"  # |0.42 − 0.5| = 0.08
    assert evaluate(one('where = { aqm = "pi2" }\nmetric = "run_jain"\nclaim = "0.5 +- 0.05"\n'), df).verdict == "differs"  # 0.08 > 0.05
    assert evaluate(one('where = { aqm = "pi2" }\nmetric = "run_jain"\nclaim = "in [0.4, 0.45]"\n'), df).verdict == "reproduced"


def test_ratio_between_two_classes_of_the_same_run() -> None:
    two = [
        {"class": "dctcp-5ms", "cc": "dctcp", "rtt_ms": 5.0, "rel_throughput": 1.5},
        {"class": "bbr2-5ms", "cc": "bbr2", "rtt_ms": 5.0, "rel_throughput": 0.5},
    ]
    df = rows({"aqm": "step", "N": 2, "K": 0.17, "classes": two})
    f = one('where = { aqm = "step", cc = "dctcp" }\nratio_to = { cc = "bbr2" }\nmetric = "rel_throughput"\nclaim = "> 2"\n')
    v = evaluate(f, df)
    assert v.values == (3.0,) and v.verdict == "reproduced"  # 1.5 / 0.5
    f = one('where = { aqm = "step", cc = "bbr2" }\nratio_to = { cc = "dctcp" }\nmetric = "rel_throughput"\nclaim = "> 2"\n')
    assert evaluate(f, df).verdict == "differs"  # 0.5 / 1.5 = 0.33


def test_max_over_an_axis_compares_runs_that_differ_only_there() -> None:
    df = rows(
        {"aqm": "step", "N": 2, "K": 0.17, "run_jain": 0.70},
        {"aqm": "pi2", "N": 2, "K": 0.17, "run_jain": 0.80},
        {"aqm": "csaqm", "N": 2, "K": 0.17, "run_jain": 0.95},
        {"aqm": "step", "N": 10, "K": 0.17, "run_jain": 0.99},
        {"aqm": "csaqm", "N": 10, "K": 0.17, "run_jain": 0.90},
    )
    f = one('where = { aqm = "csaqm", N = 2 }\nmetric = "run_jain"\nclaim = "max over aqm"\n')
    v = evaluate(f, df, AXES)
    # Against N = 2's STEP 0.70 and PI2 0.80 only (N = 10's STEP 0.99 is another setting).
    assert v.verdict == "reproduced" and "pi2 0.800" in v.measured
    f = one('where = { aqm = "csaqm" }\nmetric = "run_jain"\nclaim = "max over aqm"\n')
    v = evaluate(f, df, AXES)
    assert v.verdict == "differs" and v.measured.startswith("1 of 2 settings")  # N = 10: 0.90 < STEP's 0.99
    f = one('where = { aqm = "step", N = 2 }\nmetric = "run_jain"\nclaim = "min over aqm"\n')
    assert evaluate(f, df, AXES).verdict == "reproduced"
    # A tie does not single the selected value out: STEP 0.80 against PI2's 0.80.
    df.loc[0, "run_jain"] = 0.80
    assert evaluate(f, df, AXES).verdict == "differs"


def test_not_comparable_names_what_the_grid_lacks() -> None:
    df = rows({"aqm": "step", "N": 2, "K": 0.17, "utilization": 1.0, "sojourn_mean_rel_target": None})
    quick = {"aqm": ["step"], "N": [2], "K": [0.17]}
    v = evaluate(one('where = { aqm = "step", N = 10, K = 0.5 }\nmetric = "utilization"\nclaim = "< 0.6"\n'), df, quick, "the quick grid")
    assert v.verdict == "not comparable" and v.reason == "the quick grid lacks N = 10, K = 0.5"
    v = evaluate(one('where = { aqm = "step" }\nmetric = "sojourn_mean_rel_target"\nclaim = "< 1"\n'), df, quick)
    assert v.verdict == "not comparable" and "no value" in v.reason
    v = evaluate(one('where = { aqm = "step", cc = "bbr2" }\nmetric = "rel_throughput"\nclaim = "< 1"\n'), df, quick)
    assert v.verdict == "not comparable" and v.reason == "no flow class with cc = bbr2 in this sweep"


@pytest.mark.parametrize(
    "text, line, key, words",
    [
        ('where = { aqm = "step" }\nmetric = "utilization"\nclaim = "below 0.6"\n', 7, "finding[0].claim", "is not a claim"),
        ('where = { aqm = "red" }\nmetric = "utilization"\nclaim = "< 0.6"\n', 5, "finding[0].where.aqm", "not a value of the study's aqm axis"),
        ('where = { mix = "dctcp" }\nmetric = "utilization"\nclaim = "< 0.6"\n', 5, "finding[0].where.mix", "not an axis of the study"),
        ('where = { aqm = "step" }\nmetric = "utilization"\nclaim = "< 0.6"\nverdict = "reproduced"\n', 8, "finding[0].verdict", "unknown key"),
        ('where = { aqm = "step" }\nratio_to = { cc = "bbr2" }\nmetric = "rel_throughput"\nclaim = "> 1"\n', 6, "finding[0].ratio_to", "two flow classes"),
        ('where = { N = 2 }\nmetric = "run_jain"\nclaim = "max over aqm"\n', 7, "finding[0].claim", "needs aqm in where"),
        ('where = { aqm = "step" }\nclaim = "< 0.6"\n', 1, "finding[0].metric", "required key is missing"),
    ],
)
def test_a_bad_findings_file_is_refused_with_its_line(text: str, line: int, key: str, words: str) -> None:
    with pytest.raises(FindingsError) as e:
        one(text)
    assert str(e.value).startswith(f"t.findings.toml:{line}: {key}: ") and words in str(e.value), str(e.value)


FINDING = '[[finding]]\nid = "x"\nstatement = "s"\nsource = "Fig. 1"\nwhere = { aqm = "step" }\nmetric = "utilization"\nclaim = "< 0.6"\n'


@pytest.mark.parametrize(
    "text, line, error",
    [
        # Lines counted in FINDING: 1 [[finding]], 2 id, 3 statement, 4 source, 5 where, 6 metric, 7 claim.
        (FINDING.replace("metric =", "metrc ="), 6, "finding[0].metrc: unknown key (did you mean 'metric'?)"),
        (FINDING.replace('metric = "utilization"', "metric = 3"), 6, "finding[0].metric: 3: Input should be a valid string"),
        (FINDING.replace('statement = "s"', 'statement = "  "'), 3, "finding[0].statement: expected a non-empty string"),
        (FINDING + 'agg = "median"\n', 8, "finding[0].agg: 'median': Input should be 'all' or 'mean'"),
        (
            FINDING.replace('{ aqm = "step" }', '{ aqm = ["step"] }'),
            5,
            "finding[0].where.aqm: expected a single value (an axis label, a class name, a CC or an RTT in ms)",
        ),
        # The second finding's id is line 7 + 2.
        (FINDING + FINDING, 9, "finding[1].id: duplicate id 'x'"),
        ("findings = 1\n" + FINDING, 1, "findings: unknown key (did you mean 'finding'?)"),
    ],
)
def test_a_findings_file_is_checked_by_its_model_with_file_line_and_key(text: str, line: int, error: str) -> None:
    with pytest.raises(FindingsError) as e:
        parse_findings(text, file="t.findings.toml", axes=AXES)
    assert str(e.value) == f"t.findings.toml:{line}: {error}"


@pytest.mark.parametrize("study", list(STUDIES))
def test_every_study_ships_findings_valid_on_its_full_grid(study: str) -> None:
    fs = load_findings(study)  # raises on a selector naming an axis or a value the grid lacks
    assert len(fs) >= 5 and all(f.statement and f.source for f in fs)


def test_the_two_fejes2020_findings_at_issue_are_there() -> None:
    fs = {f.id: f for f in load_findings("fejes2020")}
    u = fs["dctcp-step-k017-utilization"]
    assert (u.where["N"], u.where["K"], u.where["aqm"], u.metric, u.claim_text) == (2, 0.17, "step", "utilization", "< 0.60")
    j = fs["dctcp-pi2-fairness"]
    assert (j.where["N"], j.where["K"], j.where["aqm"], j.metric) == (10, 0.5, "pi2", "run_jain") and j.why


# A sweep with the CKCD study's name and axes (two of its AQMs, one of its mixes, 3 s runs):
# its report opens with the CKCD findings, judged on these runs.
MINI_CKCD = """\
name = "ckcd"
duration = "3s"
warmup = "1s"
seed = 1
[bottleneck]
rate = "100Mbps"
buffer = "80pkt"
[[flows]]
cc = "cubic"
rtt = "20ms"
[sweep]
"bottleneck.aqm" = [{ kind = "taildrop" }, { kind = "choke", limit = "80pkt" }]
[sweep.cases.mix]
"bbr+cubic" = { flows = [{ cc = "bbr", rtt = "20ms" }, { cc = "cubic", rtt = "20ms" }] }
"""


def test_the_report_opens_with_the_findings_table(tmp_path: Path) -> None:
    d = tmp_path / "ckcd"
    aqmlab.run_sweep(parse_sweep(MINI_CKCD), d, jobs=2)
    from aqmlab.report.study import write_report

    html = write_report(d, d / "report.html").read_text(encoding="utf-8")
    # The table comes before every figure, one row per finding of the shipped file.
    assert html.index('<table class="findings">') < html.index("<img ")
    table = html[html.index('<table class="findings">') : html.index("</table>", html.index('<table class="findings">'))]
    fs = load_findings("ckcd")
    assert table.count("<tr>") == len(fs) + 1
    # The verdict of "BBR takes more than twice CUBIC's share at TailDrop" follows from the
    # index: BBR's relative throughput over CUBIC's in the TailDrop run.
    df = aqmlab.load(d)
    td = df[df["bottleneck.aqm"] == "taildrop"].set_index("cc")["rel_throughput"]
    ratio = td["bbr"] / td["cubic"]
    row = table.split("<tr>")[2 + [f.id for f in fs].index("bbr-starves-cubic-taildrop")]  # [1] is the header
    assert f"{ratio:.3f}" in row and ("reproduced" if ratio > 2 else "differs") in row
    # The mixes this sweep lacks are named.
    assert re.search(r"not comparable: this sweep&#x27;s grid lacks mix = 5bbr\+5cubic\+5reno", table)


# The l4s study's axes at one RTT, two AQMs, 3 s runs: its RFC expectations judged on them.
MINI_L4S = """\
name = "l4s"
duration = "3s"
warmup = "1s"
seed = 1
[bottleneck]
rate = "40Mbps"
buffer = "2bdp"
rtt_ref = "20ms"
[[flows]]
cc = "prague"
rtt = "20ms"
[[flows]]
cc = "cubic"
ecn = true
rtt = "20ms"
[sweep]
rtt = [20]
[sweep.cases.aqm]
"dualpi2" = { "bottleneck.aqm" = { kind = "dualpi2" } }
"codel-1q" = { "bottleneck.aqm" = { kind = "fq_codel", flows = 1 } }
[sweep.cases.traffic]
"prague+cubic" = {}
"ect1 flood" = { only = { aqm = "dualpi2" }, flows = [{ cc = "cubic", ecn = true, rtt = "20ms" }, { cc = "cbr", rate = "48Mbps", ecn = "ect1", rtt = "20ms", name = "flood" }] }
"""


def test_the_l4s_findings_are_judged_on_the_runs(tmp_path: Path) -> None:
    d = tmp_path / "l4s"
    aqmlab.run_sweep(parse_sweep(MINI_L4S), d, jobs=2)
    verdicts = {v.finding.id: v for v in evaluate_all(d, "l4s")}
    df = aqmlab.load(d)
    by = df.set_index(["aqm", "cc"])
    # The L4S queue's delay, and CUBIC's share of Prague's rate through one CoDel queue, as
    # the index has them; each verdict follows from its claim (< 1 ms; >= 0.5).
    delay = by.loc[("dualpi2", "prague"), "class_sojourn_mean_ms"]
    assert verdicts["dualq-l4s-low-delay"].verdict == ("reproduced" if delay < 1 else "differs")
    share = by.loc[("codel-1q", "cubic"), "rel_throughput"] / by.loc[("codel-1q", "prague"), "rel_throughput"]
    assert verdicts["classic-ecn-codel-1q"].verdict == ("reproduced" if share >= 0.5 else "differs")
    # The ECT(1) flood's queueing delay under DualPI2's overload protection (< 20 ms).
    flood = df[(df["traffic"] == "ect1 flood") & (df["class"] == "flood")]["class_sojourn_mean_ms"].item()
    assert verdicts["overload-drop"].verdict == ("reproduced" if flood < 20 else "differs")
    assert verdicts["overload-control"].verdict == "not comparable"
    # The settings this grid lacks are not judged.
    assert verdicts["fq-isolation"].verdict == "not comparable"
    assert verdicts["prague-rtt-independence"].verdict == "not comparable"
