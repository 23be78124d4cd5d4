"""Discipline options come from the engine's description (crates/aqm, `describe_aqms`): the
defaults a scenario gets are the discipline's own, and the docs' option tables are the
description's."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import aqmlab
from aqmlab import _native, engine
from aqmlab.cli.listing import option_table
from aqmlab.scenario import AQM_MODELS, parse_scenario

ROOT = Path(__file__).resolve().parent.parent


def _run(aqm: dict) -> aqmlab.Result:
    # DCTCP (scalable under any_ect) beside Cubic through 20 Mbit/s with a 100-ms buffer: the
    # queue stays above PI2's 15-ms target long enough for the controller's gains to matter.
    s = aqmlab.Scenario(
        duration="4s",
        seed=3,
        bottleneck={"rate": "20Mbps", "buffer": "100ms", "aqm": aqm},
        flows=[{"cc": "dctcp", "count": 2, "rtt": "10ms"}, {"cc": "cubic", "count": 2, "rtt": "10ms", "ecn": True}],
    )
    return aqmlab.run(s)


def _same(a: aqmlab.Result, b: aqmlab.Result) -> bool:
    keys = ("metrics", "classes", "fct", "counters", "scenario", "scenario_hash")
    if any(a.summary[k] != b.summary[k] for k in keys):
        return False
    return set(a.arrow) == set(b.arrow) and all(a.arrow[t].equals(b.arrow[t]) for t in a.arrow)


@pytest.mark.parametrize("kind", ["pi2", "dualpi2"])
def test_pi2_without_gains_gets_linuxs_41_and_819_over_256(kind: str) -> None:
    # net/sched/sch_dualpi2.c dualpi2_reset_default: alpha 41, beta 819 in units of 1/256 Hz.
    base = {"kind": kind, "ecn_mask": "any_ect"}
    default = _run(base)
    linux = _run({**base, "alpha": 41 / 256, "beta": 819 / 256})
    assert _same(default, linux)
    assert default.summary["scenario"]["bottleneck"]["aqm"]["alpha"] == 0.16015625
    # The gains matter here: RFC 9332's rounded 0.16 and 3.2 give other results.
    rounded = _run({**base, "alpha": 0.16, "beta": 3.2})
    assert not _same(default, rounded)


def test_every_kind_is_described_with_its_options() -> None:
    described = [d["kind"] for d in _native.describe_aqms()]
    assert described == list(_native.qdiscs())
    for d in _native.describe_aqms():
        assert d["source"] and d["summary"], d["kind"]
        for o in d["options"]:
            assert o["doc"] and o["source"] and o["unit"], (d["kind"], o["name"])
            # The scenario model generated from the description has the option.
            model = AQM_MODELS[d["kind"]]
            assert o["name"] in model.model_fields, (d["kind"], o["name"])


def test_the_docs_option_tables_are_the_descriptions() -> None:
    text = (ROOT / "docs" / "scenario.md").read_text()
    blocks = dict(re.findall(r"<!-- options:(\w+) -->\n(.*?)\n<!-- /options -->", text, flags=re.S))
    about = {d["kind"]: d for d in _native.describe_aqms()}
    assert sorted(blocks) == sorted(about), "docs/scenario.md needs one option table per discipline"
    for kind, block in blocks.items():
        # Regenerate with `aqmlab list aqms --markdown`.
        assert block == option_table(about[kind]), f"docs/scenario.md: the {kind} table differs from the engine's description"


def test_options_are_converted_by_their_unit_and_refused_with_their_key() -> None:
    # A size in packets stays packets for CHOKe's packet options and counts 1500 B for RED.
    s = aqmlab.Scenario(
        duration="1s",
        bottleneck={"rate": "100Mbps", "buffer": "80pkt", "aqm": {"kind": "red", "min": "10pkt", "avpkt": "1000B"}},
        flows=[{"cc": "reno", "rtt": "20ms"}],
    )
    a = engine.check(json.dumps(s.engine_config()))["aqm"]
    assert (a["limit"], a["min"], a["avpkt"]) == (80 * 1500, 15_000, 1000)
    text = 'duration = "1s"\n[bottleneck]\nrate = "100Mbps"\nbuffer = "80pkt"\naqm = { kind = "pie", tupdate = "0ms" }\n[[flows]]\ncc = "reno"\nrtt = "20ms"\n'
    with pytest.raises(aqmlab.ScenarioError) as e:
        parse_scenario(text, file="s.toml")
    assert str(e.value) == "s.toml:5: bottleneck.aqm.tupdate: '0ms' must be positive"
    # What only the discipline knows (RED's tc derivation) comes back with its key too.
    text = text.replace('{ kind = "pie", tupdate = "0ms" }', '{ kind = "red", min = "30KB", max = "20KB", avpkt = "1500B" }')
    with pytest.raises(aqmlab.ScenarioError) as e:
        parse_scenario(text, file="s.toml")
    assert str(e.value) == "s.toml:5: bottleneck.aqm.max: 20000 is below min 30000"
