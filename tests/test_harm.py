"""Harm (Ware et al., HotNets 2019): a class against its own kind suffers none; BBRv1 harms CUBIC
in a shallow drop-tail buffer far more than CUBIC harms BBRv1 (the documented direction: Hock et
al., ICNP 2017); solo baselines are ordinary cached runs, reused on a second call."""

from __future__ import annotations

import subprocess
import sys

import pytest

from aqmlab.analysis.harm import harm, load_harm, solo_baseline
from aqmlab.scenario import parse_scenario

MIX = """\
name = "mix"
duration = "20s"
warmup = "5s"

[bottleneck]
rate = "100Mbps"
buffer = "0.25bdp"

[[flows]]
cc = "CC0"
rtt = "20ms"

[[flows]]
cc = "CC1"
rtt = "20ms"
"""


def test_a_class_against_its_own_kind_suffers_no_harm(tmp_path):
    s = parse_scenario(MIX.replace("CC0", "cubic").replace("CC1", "cubic"))
    # Every class's solo baseline *is* the scenario: one run, harm exactly 0.
    assert solo_baseline(s, 0).hash() == solo_baseline(s, 1).hash()
    df, ran = harm(s, tmp_path)
    assert list(df["throughput_harm"]) == [0.0, 0.0]
    assert list(df["delay_harm"]) == [0.0, 0.0]
    assert ran == 1  # the scenario is its own baseline


def test_bbr_harms_cubic_in_a_shallow_buffer_more_than_cubic_harms_bbr_and_baselines_are_reused(tmp_path):
    s = parse_scenario(MIX.replace("CC0", "bbr").replace("CC1", "cubic"))
    df, ran = harm(s, tmp_path)
    assert ran == 3
    h = dict(zip(df["cc"], df["throughput_harm"]))
    assert h["cubic"] > 0.5, h
    assert h["cubic"] > h["bbr"], h
    # Baselines: every class runs the class's CC with the same counts and RTTs.
    b = solo_baseline(s, 1)
    assert [f.cc for f in b.flows] == ["cubic", "cubic"]
    assert [f.rtt for f in b.flows] == [f.rtt for f in s.flows]
    # A second call simulates nothing and gives the same table.
    df2, ran2 = harm(s, tmp_path)
    assert ran2 == 0
    assert df2.equals(df)
    assert load_harm(tmp_path)["throughput_harm"].tolist() == pytest.approx(df["throughput_harm"].tolist())


def test_harm_refuses_a_single_class_scenario(tmp_path):
    f = tmp_path / "one.toml"
    f.write_text(MIX.split('[[flows]]\ncc = "CC1"')[0].replace("CC0", "cubic"))
    r = subprocess.run([sys.executable, "-m", "aqmlab", "harm", str(f), "-o", str(tmp_path / "o")], capture_output=True, text=True)
    assert r.returncode == 2 and "at least two TCP flow classes" in r.stderr, r.stderr
    assert not (tmp_path / "o").exists()


def test_a_solo_baseline_keeps_every_class_schedule_of_starts_and_stops():
    # "The class against its own kind in the same setting": the same joins and leaves.
    text = (
        MIX.replace("CC0", "bbr")
        .replace("CC1", "cubic")
        .replace('cc = "bbr"\nrtt = "20ms"', 'cc = "bbr"\nrtt = "20ms"\ncount = 2\nstart = "staggered(2s, 3s)"\nstop = "staggered(12s, 2s)"')
    )
    s = parse_scenario(text)
    for i in (0, 1):
        b = solo_baseline(s, i)
        assert [(f.count, f.start, f.stop) for f in b.flows] == [(2, "staggered(2s, 3s)", "staggered(12s, 2s)"), (1, "0ns", None)]
        assert {f.cc for f in b.flows} == {s.flows[i].cc}
