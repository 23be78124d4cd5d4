"""What ABI v2 adds for a plugin discipline (docs/plugins.md, "The ABI and its versions"): a
choice option, written as its string and received as its index; the timer's period from an
option (`aqmlab_set_timer`); and `AQMLAB_READS_VALUES`, which gives the flows the run's
packet-value marker as it does for the built-in PPV and CSAQM."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import aqmlab
from aqmlab.cli.main import app
from aqmlab.scenario import Scenario, plugin

ROOT = Path(__file__).resolve().parents[1]
PI2 = ROOT / "examples" / "plugins" / "pi2.c"

#: Drops every arrival whose packet value is below `floor`; with AQMLAB_READS_VALUES (FLAGS).
FLAGS = ".flags = AQMLAB_READS_VALUES"
VALUE_GATE_C = r"""#include "aqmlab_qdisc.h"

static const aqmlab_option options[] = {
    {"floor", AQMLAB_UNIT_INT, "the least packet value that passes", 0, 1, 0, 65535},
};
AQMLAB_QDISC(1, options, .kind = "value_gate", .summary = "drops packets valued below floor",
             .source = "tests/test_plugin_abi2.py", .flags = AQMLAB_READS_VALUES);

static uint32_t floor_value;

AQMLAB_EXPORT(aqmlab_init) const char *aqmlab_init(void) {
    floor_value = (uint32_t)option_values[0];
    return 0;
}

AQMLAB_EXPORT(aqmlab_enqueue) uint32_t aqmlab_enqueue(uint64_t now, const aqmlab_pkt *pkt) {
    (void)now;
    return pkt->value < floor_value ? AQMLAB_DROP(AQMLAB_DROP_VALUE) : AQMLAB_ACCEPT(0);
}
"""


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test its own plugin cache: what it compiles, it compiled itself."""
    cache = tmp_path / "cache"
    monkeypatch.setenv(plugin.CACHE_ENV, str(cache))
    return cache


def _dctcp_through(aqm: dict[str, object], base: Path | None = None) -> Scenario:
    """Two DCTCP flows (ECT(0)) and a Cubic one through 100 Mbit/s, 2 s."""
    return Scenario.model_validate(
        {
            "duration": "2s",
            "seed": 5,
            "bottleneck": {"rate": "100Mbps", "buffer": "1bdp", "aqm": aqm},
            "flows": [{"cc": "dctcp", "count": 2, "rtt": "10ms"}, {"cc": "cubic", "rtt": "20ms"}],
        },
        context={"base_dir": base} if base else None,
    )


def _same_results(a: aqmlab.Result, b: aqmlab.Result) -> bool:
    keys = ("metrics", "classes", "fct", "counters")
    return all(a.summary[k] == b.summary[k] for k in keys) and all(a.arrow[t].equals(b.arrow[t]) for t in a.arrow)


def test_a_choice_and_the_timer_period_reach_the_module_as_the_builtin_takes_them() -> None:
    # pi2.c ports the built-in PI2 verdict for verdict (crates/plugin's tests check it packet
    # for packet), so with the same options the runs are the same: ecn_mask = "any_ect" (the
    # module receives index 1) makes DCTCP's ECT(0) scalable, and tupdate = "10ms" is the
    # period the module gives its timer.
    options = {"ecn_mask": "any_ect", "tupdate": "10ms", "target": "5ms"}
    pi2_c = aqmlab.run(_dctcp_through({"kind": "plugin", "module": str(PI2), **options}))
    builtin = aqmlab.run(_dctcp_through({"kind": "pi2", **options}))
    assert _same_results(pi2_c, builtin)
    # Each option changes the run: neither is ignored on the way to the module.
    for other in ({"ecn_mask": "l4s_ect"}, {"tupdate": "16ms"}):
        changed = aqmlab.run(_dctcp_through({"kind": "plugin", "module": str(PI2), **options, **other}))
        assert changed.summary["metrics"] != pi2_c.summary["metrics"], other


def test_a_choice_outside_its_strings_is_one_located_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(PI2, tmp_path / "pi2.c")
    (tmp_path / "s.toml").write_text(
        'duration = "1s"\n\n[bottleneck]\nrate = "10Mbps"\nbuffer = "1bdp"\n'
        'aqm = { kind = "plugin", module = "pi2.c", ecn_mask = "all_ect" }\n\n'
        '[[flows]]\ncc = "dctcp"\nrtt = "10ms"\n',
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["run", "s.toml", "-o", "out"])
    assert r.exit_code == 2
    assert "s.toml:6: bottleneck.aqm.ecn_mask:" in r.stderr and "'l4s_ect'" in r.stderr and "'any_ect'" in r.stderr
    assert not (tmp_path / "out").exists()


def _tvf(x_bps: float) -> int:
    """The marker's log-linear TVF (crates/link/src/marker.rs: PV_MAX 65535, X_MIN 10 kbit/s,
    X_MAX 100 Gbit/s), rounded and clamped as there."""
    v = round(65535 * (math.log(100e9) - math.log(x_bps)) / (math.log(100e9) - math.log(10e3)))
    return min(max(v, 1), 65535)


def test_a_plugin_that_reads_values_gets_the_marker_and_keeps_its_requirement(tmp_path: Path) -> None:
    # The marker requirement (Nádas et al. 2016): a node that drops every packet valued below
    # V(x) leaves each flow x. A 10 Mbit/s CBR flow through the value gate at floor V(4 Mbit/s)
    # keeps 4 Mbit/s of its 10 (the marker values a packet V(u·R), u uniform: P(V(uR) ≥ V(x))
    # = x/R), so 0.4 of what it delivers through a plain FIFO; the link (100 Mbit/s) is never
    # the limit. Each packet passes or not as a Bernoulli trial: over 20 s of 1500-byte packets
    # (n ≈ 16 667) the pass ratio's relative standard deviation is √((1 − p)/(p·n)) ≈ 0.95 %,
    # and the test allows four of them.
    (tmp_path / "gate.c").write_text(VALUE_GATE_C, encoding="utf-8")

    def cbr_through(aqm: dict[str, object]) -> Scenario:
        return Scenario.model_validate(
            {
                "duration": "21s",
                "warmup": "1s",
                "seed": 2,
                "bottleneck": {"rate": "100Mbps", "buffer": "1bdp", "aqm": aqm},
                "flows": [{"cc": "cbr", "rate": "10Mbps", "rtt": "20ms"}],
            },
            context={"base_dir": tmp_path},
        )

    gated = cbr_through({"kind": "plugin", "module": "gate.c", "floor": _tvf(4e6)})
    assert gated.effective_marker() is not None
    through_gate = aqmlab.run(gated).summary["classes"][0]
    plain = aqmlab.run(cbr_through({"kind": "taildrop"})).summary["classes"][0]
    assert plain["drop_ratio"] == 0
    n = 10e6 * 20 / (1500 * 8)
    rel = 4 * math.sqrt(0.6 / (0.4 * n))
    assert through_gate["goodput_bps"] / plain["goodput_bps"] == pytest.approx(0.4, rel=rel)
    assert 1 - through_gate["drop_ratio"] == pytest.approx(0.4, rel=rel)


def test_without_the_flag_a_plugin_gets_no_marker_and_a_marker_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "gate.c").write_text(VALUE_GATE_C.replace(FLAGS, ".flags = 0"), encoding="utf-8")
    aqm = {"kind": "plugin", "module": "gate.c", "floor": 1}
    flows = [{"cc": "cbr", "rate": "10Mbps", "rtt": "20ms"}]
    s = Scenario.model_validate(
        {"duration": "2s", "bottleneck": {"rate": "100Mbps", "buffer": "1bdp", "aqm": aqm}, "flows": flows}, context={"base_dir": tmp_path}
    )
    assert s.effective_marker() is None
    # Every packet's value is 0, so the gate drops them all.
    assert aqmlab.run(s).summary["classes"][0]["drop_ratio"] == 1
    (tmp_path / "s.toml").write_text(
        'duration = "1s"\n\n[bottleneck]\nrate = "100Mbps"\nbuffer = "1bdp"\n'
        'aqm = { kind = "plugin", module = "gate.c", floor = 1 }\n\n'
        '[[flows]]\ncc = "cbr"\nrate = "10Mbps"\nrtt = "20ms"\n\n[marker]\ntvf = "equal"\n',
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["run", "s.toml", "-o", "out"])
    assert r.exit_code == 2
    assert "marker: only disciplines that read packet values use it" in r.stderr
    assert not (tmp_path / "out").exists()
