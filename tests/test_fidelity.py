"""The fidelity suite: scoring against the bands on hand-made numbers, the metrics read from a
summary, the shipped cases, the refusals; with a testbed (root), the two CBR cases, whose
utilization and queue are fixed by construction, run on both backends and pass, and a second
call resumes without running anything again."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from test_emulate import needs_testbed
from typer.testing import CliRunner

from aqmlab.cli.main import app
from aqmlab.emu import emulate as E
from aqmlab.fidelity import suite as F
from aqmlab.scenario import parse_scenario


def test_bands_on_hand_made_numbers() -> None:
    # Utilization ± 2 pp, absolute: 0.970 → 0.985 is 1.5 pp (pass), → 0.995 is 2.5 pp (miss).
    r = F.score("utilization", 0.970, 0.985)
    assert r["pass"] and r["tolerance"] == 0.02 and r["deviation"] == pytest.approx(0.75)
    assert not F.score("utilization", 0.970, 0.995)["pass"]
    # A class's share and Jain's index ± 0.05.
    assert F.score("share:cubic-20ms", 0.50, 0.549)["pass"] and not F.score("share:cubic-20ms", 0.50, 0.551)["pass"]
    assert F.score("jain", 0.90, 0.951)["pass"] is False and F.score("jain", 0.90, 0.86)["pass"]
    # Mean queueing delay ± 20 % of the simulator's: 10 ms allows 8–12 ms ...
    assert F.score("sojourn_mean_ms", 10.0, 11.9)["pass"] and not F.score("sojourn_mean_ms", 10.0, 12.1)["pass"]
    assert F.score("sojourn_mean_ms", 10.0, 8.1)["pass"] and not F.score("sojourn_mean_ms", 10.0, 7.9)["pass"]
    # ... and never less than ± 0.5 ms: an empty simulated queue against 0.4 ms passes, 0.6 not.
    assert F.score("sojourn_mean_ms", 0.0, 0.4)["pass"] and not F.score("sojourn_mean_ms", 0.0, 0.6)["pass"]
    # A missing value is not scored (neither pass nor miss).
    assert F.score("jain", None, 0.9)["pass"] is None


def _summary(util: float, mean_ms: float, jain: float | None, classes: list[tuple[str, float]], flows: int) -> dict:
    return {
        "metrics": {"utilization": util, "sojourn_ms": {"mean": mean_ms}, "jain": jain, "flows": flows},
        "classes": [{"name": n, "goodput_bps": g} for n, g in classes],
    }


def test_metrics_come_from_the_summary_and_trivial_ones_are_left_out() -> None:
    # One flow: its Jain index and its class's share are 1 by definition, so not scored.
    assert F.case_metrics(_summary(0.99, 4.0, 1.0, [("bbr-20ms", 9e7)], 1)) == {"utilization": 0.99, "sojourn_mean_ms": 4.0}
    # Two classes: each one's share of the goodput, 30/(30+10) = 0.75 and 0.25.
    m = F.case_metrics(_summary(1.0, 8.0, 0.7, [("cubic-10ms", 30e6), ("cubic-30ms", 10e6)], 10))
    assert m == {"utilization": 1.0, "sojourn_mean_ms": 8.0, "jain": 0.7, "share:cubic-10ms": 0.75, "share:cubic-30ms": 0.25}


def test_a_case_is_scored_on_the_mean_over_seeds_and_runs() -> None:
    sims = [_summary(u, d, 0.9, [("a", 1.0), ("b", 1.0)], 2) for u, d in ((0.96, 9.0), (0.98, 10.0), (1.00, 11.0))]
    emus = [_summary(0.99, 12.5, 0.96, [("a", 3.0), ("b", 1.0)], 2)]
    rows = {r["metric"]: r for r in F.score_case(sims, emus)}
    assert rows["utilization"]["sim"] == pytest.approx(0.98) and rows["utilization"]["pass"]  # 0.99 − 0.98 = 1 pp
    assert rows["sojourn_mean_ms"]["sim"] == pytest.approx(10.0) and not rows["sojourn_mean_ms"]["pass"]  # 12.5 > 10 + 2
    assert rows["jain"]["pass"] is False  # 0.96 − 0.90 = 0.06 > 0.05
    assert rows["share:a"]["sim"] == 0.5 and rows["share:a"]["emu"] == 0.75 and not rows["share:a"]["pass"]
    # Beside each mean, the extreme seeds and runs: utilization 0.96 and 1.00 (one emulator run:
    # its value both ways); the delay 9 and 11 ms.
    assert (rows["utilization"]["sim_min"], rows["utilization"]["sim_max"]) == (0.96, 1.00)
    assert (rows["utilization"]["emu_min"], rows["utilization"]["emu_max"]) == (0.99, 0.99)
    assert (rows["sojourn_mean_ms"]["sim_min"], rows["sojourn_mean_ms"]["sim_max"]) == (9.0, 11.0)
    # One emulator run has no spread to estimate: no standard error.
    assert rows["utilization"]["se"] is None and F.fmt_deviation(rows["utilization"]) == "0.50"


def test_each_verdict_carries_the_standard_error_of_the_difference() -> None:
    # Utilization over seeds 0.96, 0.98, 1.00 (sample sd 0.02, se 0.02/√3 = 0.011547) and over
    # runs 0.99, 0.97 (sd 0.014142, se 0.01): the difference 0.98 − 0.98 = 0 is known to
    # √(0.011547² + 0.01²) = 0.015275, i.e. 0.76 of the ± 2 pp band.
    sims = [_summary(u, 10.0, 0.9, [("a", 1.0)], 2) for u in (0.96, 0.98, 1.00)]
    emus = [_summary(u, 10.0, 0.9, [("a", 1.0)], 2) for u in (0.99, 0.97)]
    util = next(r for r in F.score_case(sims, emus) if r["metric"] == "utilization")
    assert util["diff"] == pytest.approx(0.0, abs=1e-12) and util["se"] == pytest.approx(0.015275, abs=1e-6)
    assert F.fmt_deviation(util) == "0.00 ± 0.76"
    # The same value at every seed and run: nothing to be uncertain about.
    jain = next(r for r in F.score_case(sims, emus) if r["metric"] == "jain")
    assert jain["se"] == 0.0
    # A close call: |diff| 0.04 against a tolerance of 0.05 is 0.01 from the edge, inside 2 se
    # when se = 0.006 (0.012), outside when se = 0.004 (0.008); unknown without se.
    row = {"diff": -0.04, "tolerance": 0.05}
    assert F.is_close_call({**row, "se": 0.006}) and not F.is_close_call({**row, "se": 0.004}) and not F.is_close_call({**row, "se": None})


def test_the_shipped_cases_cover_what_the_suite_promises() -> None:
    cases = F.load_manifest()
    ccs = {f.cc for c in cases for f in c.scenario.flows}
    aqms = {c.scenario.bottleneck.aqm.kind for c in cases}
    assert {"reno", "cubic", "bbr", "dctcp", "cbr"} <= ccs
    assert {"taildrop", "red", "step", "pi2", "fq_codel", "choke"} <= aqms
    assert any(len({f.rtt for f in c.scenario.flows}) > 1 for c in cases)  # mixed RTTs
    # BBRv1 alone in the deep buffer of the issue: 100 Mbit/s, 20 ms, 667 packets.
    deep = next(c for c in cases if c.name == "bbr-deep-taildrop").scenario
    assert deep.engine_config()["bottleneck"]["rate_bps"] == 100_000_000 and [f.cc for f in deep.flows] == ["bbr"]
    # The quick subset is short: at most 5 s per case.
    quick = [c for c in cases if c.quick]
    assert 2 <= len(quick) <= 3 and all(c.scenario.engine_config()["duration_ns"] <= 5_000_000_000 for c in quick)
    # The emulator's sustained rate with offloads off: ≤ 400 Mbit/s (bench/README.md §Emulator).
    assert max(c.scenario.engine_config()["bottleneck"]["rate_bps"] for c in cases) <= 400_000_000


CASE = '[[case]]\nname = "a"\nfile = "a.toml"\nwhat = "one case"\nquick = true\n'


@pytest.mark.parametrize(
    "text, line, error",
    [
        # Lines counted in CASE: 1 [[case]], 2 name, 3 file, 4 what, 5 quick.
        (CASE.replace("quick =", "quik ="), 5, "case[0].quik: unknown key (did you mean 'quick'?)"),
        (CASE.replace("quick = true", 'quick = "yes"'), 5, "case[0].quick: 'yes': Input should be a valid boolean"),
        (CASE.replace('what = "one case"\n', ""), 1, "case[0].what: required key is missing"),
        (CASE.replace('file = "a.toml"', 'file = ""'), 3, "case[0].file: expected a non-empty string"),
        # The second case's name is line 5 + 2.
        (CASE + CASE, 7, "case[1].name: duplicate case 'a'"),
        ("cases = []\n", 1, "cases: unknown key (did you mean 'case'?)"),
        ("# no cases\n", None, "case: no [[case]] tables"),
        (CASE.replace("quick = true", "quick = = true"), 5, "TOML syntax: Invalid value"),
    ],
)
def test_a_bad_manifest_is_refused_with_file_line_and_key(tmp_path: Path, text: str, line: int | None, error: str) -> None:
    # The manifest is checked before any case file is read: none is needed here.
    (tmp_path / "manifest.toml").write_text(text)
    with pytest.raises(F.FidelityError) as e:
        F.load_manifest(tmp_path)
    where = tmp_path / "manifest.toml"
    assert str(e.value) == (f"{where}:{line}: {error}" if line else f"{where}: {error}")


def test_unknown_case_and_non_root_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r = CliRunner().invoke(app, ["fidelity", "--cases", "cbr-overload-taildrop,nope", "-o", str(tmp_path / "f")])
    assert r.exit_code == 2 and "unknown case 'nope'" in r.output
    monkeypatch.setattr(E, "is_root", lambda: False)
    r = CliRunner().invoke(app, ["fidelity", "--quick", "-o", str(tmp_path / "f")])
    assert r.exit_code == 2 and "needs root" in r.output and not (tmp_path / "f").exists()


def test_a_scenario_file_of_ones_own_is_a_case_beside_the_suites(tmp_path: Path) -> None:
    # A user's design (here the Reno-functions CC plugin, found relative to the file) runs
    # as a case named by its file, after the suite's cases named before it, scored alike.
    reno = Path(__file__).resolve().parents[1] / "examples" / "plugins" / "reno.bpf.c"
    mine = tmp_path / "my-reno.toml"
    mine.write_text(f'duration = "3s"\n[bottleneck]\nrate = "20Mbps"\nbuffer = "1bdp"\n[[flows]]\ncc = {{ plugin = "{reno}" }}\ncount = 2\nrtt = "20ms"\n')
    suite = F.load_manifest()
    chosen = F.select(suite, ["reno-taildrop-short", str(mine)], quick=False)
    assert [c.name for c in chosen] == ["reno-taildrop-short", "my-reno"]
    assert chosen[1].scenario.flows[0].count == 2 and chosen[1].file == mine.resolve() and not chosen[1].quick
    # Refused, each in one message naming the file: a missing file, a name the suite has, an
    # invalid scenario (located as any scenario's error), a case named twice.
    with pytest.raises(F.FidelityError, match="nope.toml: no such scenario file"):
        F.select(suite, [str(tmp_path / "nope.toml")], quick=False)
    clash = tmp_path / "reno-taildrop-short.toml"
    clash.write_text(mine.read_text())
    with pytest.raises(F.FidelityError, match="is one of the suite's cases; rename the file"):
        F.select(suite, [str(clash)], quick=False)
    bad = tmp_path / "bad.toml"
    bad.write_text(mine.read_text().replace('rtt = "20ms"', 'rtt = "-20ms"'))
    r = CliRunner().invoke(app, ["fidelity", "--cases", str(bad), "-o", str(tmp_path / "f")])
    assert r.exit_code == 2 and f"{bad}:8: flows[0].rtt" in " ".join(r.output.split()), r.output
    with pytest.raises(F.FidelityError, match="'my-reno' named twice"):
        F.select(suite, [str(mine), str(mine)], quick=False)
    assert not (tmp_path / "f").exists()


def test_a_malformed_sim_stall_is_refused_before_anything_runs(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["fidelity", "--quick", "-o", str(tmp_path / "f"), "--sim-stall", "1.5ms"])
    assert r.exit_code == 2 and "host.stall_every: a stall needs both its length" in r.output, r.output
    r = CliRunner().invoke(app, ["fidelity", "--quick", "-o", str(tmp_path / "f"), "--sim-stall", "2s", "--sim-stall-every", "1s"])
    assert r.exit_code == 2 and "host.stall: 2s is not shorter than stall_every (1s)" in r.output, r.output
    r = CliRunner().invoke(app, ["fidelity", "--quick", "-o", str(tmp_path / "f"), "--sim-stall", "none", "--sim-stall-every", "1s"])
    assert r.exit_code == 2 and "--sim-stall-every goes with a --sim-stall length, not with --sim-stall none" in r.output, r.output
    assert not (tmp_path / "f").exists()


def _emu_summary(stalls_by_role: dict[str, list[int]], window_ns: int = 10_000_000_000) -> dict:
    cpus = {
        f"cpu{i}": {"role": role, "wakeups": 0, "stalls": [[500_000 * (j + 1), late] for j, late in enumerate(lates)]}
        for i, (role, lates) in enumerate(stalls_by_role.items())
    }
    return {"emu": {"stalls": {"period_ns": 500_000, "threshold_ns": 300_000, "window_ns": window_ns, "cpus": cpus}}}


def test_the_simulators_stalls_are_the_traffic_cores_long_stalls() -> None:
    # Two 10 s runs. Each stall is its lateness plus half the 500 µs period: 1.3 → 1.55 ms,
    # 0.6 → 0.85 (under 1 ms: left out), 0.8 → 1.05, 2.0 → 2.25. The router's core's 5 ms
    # stall is not the hosts'. Mean (1.55 + 1.05 + 2.25) / 3 = 1.6167 ms; 20 s / 3 = 6.667 s.
    emus = [_emu_summary({"router": [5_000_000], "traffic": [1_300_000, 600_000]}), _emu_summary({"router": [], "traffic": [800_000, 2_000_000]})]
    host, why = F.measured_stalls(emus)
    assert host == {"stall": "1617us", "stall_every": "6667ms"}
    assert why.startswith("measured: 3 stalls of 1 ms or more") and "2 emulator run(s), 20 s" in why
    # A machine whose hosts never stall that long: the simulator's hosts do not stall.
    host, why = F.measured_stalls([_emu_summary({"router": [], "traffic": [400_000, 700_000]})])
    assert host is None and why.startswith("none: no stall of 1 ms or more")
    # Given and none override the measurement.
    assert F.resolve_sim_host({"stall": "1ms", "stall_every": "1s"}, emus)[0] == {"stall": "1ms", "stall_every": "1s"}
    assert F.resolve_sim_host("none", emus)[0] is None
    # The measured keys make a valid simulator scenario.
    s = F.load_manifest()[0].sim_seeded(0, F.measured_stalls(emus)[0])
    assert s.engine_config()["host"]["stall_ns"] == 1_617_000 and s.engine_config()["host"]["stall_every_ns"] == 6_667_000_000


@needs_testbed
def test_cbr_cases_agree_by_construction_and_resume(tmp_path: Path) -> None:
    out = tmp_path / "fid"
    # The analytic values below are for hosts that never stall; the measured stalls come last.
    NO_STALLS = ["--sim-stall", "none"]
    names = ["cbr-overload-taildrop", "cbr-underload-taildrop"]
    r = CliRunner().invoke(app, ["fidelity", "--cases", ",".join(names), "-o", str(out), "-q", "--emu-runs", "1", *NO_STALLS])
    assert r.exit_code == 0, r.output
    df = pd.read_parquet(out / "fidelity.parquet")
    print(df.to_string())
    assert set(df["case"]) == set(names)
    # A core the hypervisor stalls holds the CBR sender, which then sends what it owes back to
    # back: a queue the uncongested case never has (docs/emulator.md, "Host stalls"). Its
    # verdicts are judged only when the run's stall probes saw each core stalled under 1 % of
    # the window (one 30 ms stall of a 20 Mbit/s sender already queues 50 packets).
    for case in names:
        stalls = json.loads((out / "cases" / case / "emu-1" / "summary.json").read_text())["emu"]["stalls"]
        stalled = max(sum(late for _, late in v["stalls"]) for v in stalls["cpus"].values())
        if not df[df["case"] == case]["pass"].all() and stalled > 0.01 * stalls["window_ns"]:
            pytest.skip(f"the hypervisor stalled a core of the {case} run {stalled} ns of {stalls['window_ns']} ns: its verdicts not judged")
    assert df["pass"].all()
    over = df[df["case"] == "cbr-overload-taildrop"].set_index("metric")
    under = df[df["case"] == "cbr-underload-taildrop"].set_index("metric")
    # 60 Mbit/s offered to 50 Mbit/s: the link never idles. A packet is admitted within 0.2 ms
    # (the CBR spacing) of the departure that freed its slot and waits for the 99 ahead and the
    # rest of the one on the wire (0.24 ms each): between 23.80 and 24.0 ms.
    assert over.loc["utilization", "sim"] == 1.0 and over.loc["utilization", "emu"] >= 0.98
    assert 23.80 <= over.loc["sojourn_mean_ms", "sim"] <= 24.0
    # 20 of 50 Mbit/s: utilization 0.4, and nothing waits in the simulator.
    assert under.loc["utilization", "sim"] == pytest.approx(0.4, abs=1e-9) and under.loc["utilization", "emu"] == pytest.approx(0.4, abs=0.02)
    assert under.loc["sojourn_mean_ms", "sim"] == 0.0
    # Each mean's range: a CBR flow's utilization is the same under every seed (0.4), and one
    # emulator run is its own smallest and largest.
    assert under.loc["utilization", ["sim_min", "sim_max"]].tolist() == pytest.approx([0.4, 0.4], abs=1e-9)
    assert (df["emu_min"] == df["emu"]).all() and (df["emu_max"] == df["emu"]).all()
    assert (out / "fidelity.html").read_text().count("pass") >= 4
    # A second call finds both cases complete: nothing is run or rewritten.
    stamps = {p: p.stat().st_mtime_ns for p in out.glob("cases/*/*/summary.json")}
    assert len(stamps) == 2 * (F.SIM_SEEDS + 1)
    r = CliRunner().invoke(app, ["fidelity", "--cases", ",".join(names), "-o", str(out), "-q", "--emu-runs", "1", *NO_STALLS])
    assert r.exit_code == 0, r.output
    assert {p: p.stat().st_mtime_ns for p in out.glob("cases/*/*/summary.json")} == stamps
    # Running one of the two again keeps the other in the table (its runs are complete in DIR).
    r = CliRunner().invoke(app, ["fidelity", "--cases", names[0], "-o", str(out), "-q", "--emu-runs", "1", *NO_STALLS])
    assert r.exit_code == 0, r.output
    assert set(pd.read_parquet(out / "fidelity.parquet")["case"]) == set(names)
    # A run removed since: the next call redoes that run alone.
    seed = next(c for c in F.load_manifest() if c.name == names[1]).scenario.seed
    gone = out / "cases" / names[1] / f"sim-{seed}"
    shutil.rmtree(gone)
    r = CliRunner().invoke(app, ["fidelity", "--cases", ",".join(names), "-o", str(out), "-q", "--emu-runs", "1", *NO_STALLS])
    assert r.exit_code == 0, r.output
    after = {p: p.stat().st_mtime_ns for p in out.glob("cases/*/*/summary.json")}
    assert after.keys() == stamps.keys() and [p for p in after if after[p] != stamps[p]] == [gone / "summary.json"]
    # Runs made by another simulator (the native module's digest differs): the simulator's runs
    # are made again, the emulator's kept.
    for c in out.glob("cases/*/case.json"):
        doc = json.loads(c.read_text())
        c.write_text(json.dumps({**doc, "sim_build": "another"}))
    r = CliRunner().invoke(app, ["fidelity", "--cases", ",".join(names), "-o", str(out), "-q", "--emu-runs", "1", *NO_STALLS])
    assert r.exit_code == 0, r.output
    redone = {p: p.stat().st_mtime_ns for p in out.glob("cases/*/*/summary.json")}
    assert {p.parent.name.split("-")[0] for p in redone if redone[p] != after[p]} == {"sim"}
    assert sum(redone[p] != after[p] for p in redone) == 2 * F.SIM_SEEDS
    assert all(json.loads(c.read_text())["sim_build"] == F.sim_build() for c in out.glob("cases/*/case.json"))
    # A second emulator run is the case at the next seed (the simulator's second seed's start
    # times); the first is kept.
    case = next(c for c in F.load_manifest() if c.name == names[1])
    first = (out / "cases" / names[1] / "emu-1" / "summary.json").stat().st_mtime_ns
    F.run_case(out, case, emu_runs=2, sim_stalls="none")
    seeds = [json.loads((out / "cases" / names[1] / f"emu-{k}" / "summary.json").read_text())["seed"] for k in (1, 2)]
    assert seeds == [case.scenario.seed, case.scenario.seed + 1]
    assert (out / "cases" / names[1] / "emu-1" / "summary.json").stat().st_mtime_ns == first
    # The simulator's hosts given the emulator's stalls (--sim-stall): its runs are made again
    # with stalling hosts, the emulator's kept, and case.json and the page say so.
    before = {p: p.stat().st_mtime_ns for p in out.glob("cases/*/*/summary.json")}
    stall = ["--sim-stall", "1.5ms", "--sim-stall-every", "1.8s"]
    r = CliRunner().invoke(app, ["fidelity", "--cases", ",".join(names), "-o", str(out), "-q", "--emu-runs", "1", *stall])
    assert r.exit_code == 0, r.output
    assert "its hosts stalling 1.5ms every 1.8s" in " ".join(r.output.split())
    stalled = {p: p.stat().st_mtime_ns for p in out.glob("cases/*/*/summary.json")}
    assert {p.parent.name.split("-")[0] for p in stalled if p in before and stalled[p] != before[p]} == {"sim"}
    assert all(json.loads(c.read_text())["sim_host"] == {"stall": "1.5ms", "stall_every": "1.8s"} for c in out.glob("cases/*/case.json"))
    host = json.loads(next(out.glob("cases/*/sim-*/summary.json")).read_text())["scenario"]["host"]
    assert (host["stall"], host["stall_every"]) == ("1.5ms", "1.8s")
    assert "its hosts stalling 1.5ms every 1.8s" in (out / "fidelity.html").read_text()
    # By default the simulator's hosts stall as the emulator's traffic core did in the case's
    # runs: the stalls of 1 ms or more (lateness + half the period), their mean and mean
    # interval. Its runs are made again with them; the emulator's are kept.
    r = CliRunner().invoke(app, ["fidelity", "--cases", ",".join(names), "-o", str(out), "-q", "--emu-runs", "2"])
    assert r.exit_code == 0, r.output
    said = " ".join(r.output.split())
    assert "as the emulator's traffic core did in each case's runs" in said or "never stalling (none measured on the emulator's traffic core)" in said
    measured = {p: p.stat().st_mtime_ns for p in out.glob("cases/*/*/summary.json")}
    assert not [p for p in measured if p.parent.name.startswith("emu") and p in stalled and measured[p] != stalled[p]]
    for name in names:
        doc = json.loads((out / "cases" / name / "case.json").read_text())
        sts = [json.loads((out / "cases" / name / f"emu-{k}" / "summary.json").read_text())["emu"]["stalls"] for k in (1, 2)]
        long = [
            late + st["period_ns"] / 2
            for st in sts
            for cpu in st["cpus"].values()
            if cpu["role"] == "traffic"
            for _, late in cpu["stalls"]
            if late + st["period_ns"] / 2 >= 1e6
        ]
        if long:
            assert doc["sim_stalls_from"].startswith(f"measured: {len(long)} stalls")
            window = sum(st["window_ns"] for st in sts)
            assert doc["sim_host"] == {"stall": f"{round(sum(long) / len(long) / 1e3)}us", "stall_every": f"{round(window / len(long) / 1e6)}ms"}
        else:
            assert doc["sim_host"] is None and doc["sim_stalls_from"].startswith("none:")
        # The table's rows carry them too.
        df = pd.read_parquet(out / "fidelity.parquet")
        assert set(df.loc[df["case"] == name, "sim_stall"]) == {(doc["sim_host"] or {}).get("stall")}
    # Each emulator run's router lateness is kept beside the scores, its quantiles in order.
    doc = json.loads((out / "cases" / names[1] / "case.json").read_text())
    assert 0 <= doc["late_p50_ms"][0] <= doc["late_p99_ms"][0] <= doc["late_max_ms"][0]


@needs_testbed
def test_a_case_the_emulator_cannot_run_is_reported_not_run(tmp_path: Path) -> None:
    # BBRv3 has no kernel module here and no honest eBPF port on this kernel: the emulator
    # refuses it by name.
    base = next(c for c in F.load_manifest() if c.name == "dctcp-step")
    text = base.text.replace('cc = "dctcp"', 'cc = "bbr3"')
    assert text != base.text
    case = dataclasses.replace(base, name="bbr3-step", text=text, scenario=parse_scenario(text))
    reason = F.not_run_reason(case)
    assert reason is not None and "bbr3" in reason
    doc = F.run_case(tmp_path, case)
    # The emulator's own refusal, word for word, and no rows.
    assert doc["status"] == f"not run: {reason}" and doc["rows"] == []
    assert json.loads((tmp_path / "cases" / "bbr3-step" / "case.json").read_text())["status"] == doc["status"]
    # Nor did the simulator run it (its hosts' stalls come from the emulator's runs); the case
    # is not "done", so the next call asks the emulator again.
    assert not list((tmp_path / "cases" / "bbr3-step").glob("sim-*"))
    assert F.case_done(tmp_path, case, 1) is None
