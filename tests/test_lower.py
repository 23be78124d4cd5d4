"""Lowering a scenario to the engine config, with every value computed by hand here."""

from __future__ import annotations

import json
from typing import Any

import aqmlab
from aqmlab import engine
from aqmlab.inputs.errors import ScenarioError
from aqmlab.scenario import check_with_engine


def scenario(**aqm) -> aqmlab.Scenario:
    return aqmlab.Scenario(
        name="x",
        duration="10s",
        warmup="1s",
        seed=7,
        bottleneck={"rate": "1Gbps", "buffer": "500ms", "aqm": aqm or {"kind": "taildrop"}},
        flows=[
            {"cc": "dctcp", "count": 5, "rtt": "5ms", "start": "uniform(0s, 1s)"},
            {"cc": "cubic", "count": 2, "rtt": "50ms", "ecn": True, "size": "1MB", "start": "staggered(0s, 2s)"},
        ],
    )


def engine_params(s: aqmlab.Scenario) -> dict[str, Any]:
    """What the engine made of the scenario's discipline: its parameters and delay target."""
    return engine.check(json.dumps(s.engine_config()))


def test_full_lowering() -> None:
    s = scenario(kind="step", target="0.17rtt")
    cfg = s.engine_config()
    # rtt_ref defaults to the smallest class RTT, 5 ms. Target 0.17 × 5 ms = 850 µs, passed as
    # the option; the engine's threshold = 850e-6 s × 1e9 bit/s / 8 = 106 250 B. Buffer
    # 500 ms × 1e9/8 = 62.5 MB.
    assert cfg["bottleneck"] == {
        "rate_bps": 1_000_000_000,
        "buffer_packets": None,
        "buffer_bytes": 62_500_000,
        "rtt_ref_ns": 5_000_000,
        "aqm": {"kind": "step", "target": 850_000, "threshold": None},
    }
    assert engine_params(s) == {"aqm": {"kind": "step", "threshold_bytes": 106_250}, "delay_target_ns": 850_000}
    assert (cfg["duration_ns"], cfg["warmup_ns"], cfg["seed"]) == (10 * 10**9, 10**9, 7)
    a, b = cfg["classes"]
    assert a == {
        "name": "dctcp-5ms",
        "cc": {"name": "dctcp"},
        "cbr_rate_bps": None,
        "count": 5,
        "rtt_ns": 5_000_000,
        "ecn": False,
        "start": {"kind": "uniform", "lo_ns": 0, "hi_ns": 10**9},
        "size_bytes": None,
        "fq_pacing": False,
    }
    assert b["name"] == "cubic-50ms" and b["ecn"] is True and b["size_bytes"] == 1_000_000
    assert b["start"] == {"kind": "staggered", "first_ns": 0, "spacing_ns": 2 * 10**9}
    # fct_bins default: 100 KB and 1 MB (decimal units, as _units defines KB and MB).
    assert cfg["measure"] == {"interval_ns": 100_000_000, "hist_bin_ns": 1_000_000, "fct_bins_bytes": [100_000, 1_000_000]}


def test_red_as_transcribed_from_tc() -> None:
    # De Schepper et al. (DualQ): red limit 1600000 min 120000 max 360000 avpkt 1000 burst 220 ecn bandwidth 40Mbit
    s = scenario(kind="red", limit="1600000B", min="120000B", max="360000B", avpkt="1000B", burst=220, ecn=True, bandwidth="40Mbit")
    assert engine_params(s)["aqm"] == {
        "kind": "red",
        "limit": 1_600_000,
        "min": 120_000,
        "max": 360_000,
        "avpkt": 1000,
        "burst": 220,
        "bandwidth": 40_000_000,
        "ecn": True,
        "harddrop": False,
        "nodrop": False,
        "adaptive": False,
        "gentle": False,
    }


def test_buffer_in_packets_and_bdp() -> None:
    s = aqmlab.Scenario(duration="1s", bottleneck={"rate": "100Mbps", "buffer": "80pkt"}, flows=[{"cc": "reno", "rtt": "20ms"}])
    assert s.engine_config()["bottleneck"]["buffer_packets"] == 80
    s = aqmlab.Scenario(duration="1s", bottleneck={"rate": "100Mbps", "buffer": "2bdp", "rtt_ref": "10ms"}, flows=[{"cc": "reno", "rtt": "20ms"}])
    # 2 × 100e6/8 × 0.010 = 250 000 B.
    assert s.engine_config()["bottleneck"]["buffer_bytes"] == 250_000


def test_canonical_form_and_hash_ignore_spelling() -> None:
    a = aqmlab.Scenario(duration="1s", bottleneck={"rate": "1000Mbps", "buffer": "0.5bdp"}, flows=[{"cc": "reno", "rtt": "10ms"}])
    b = aqmlab.Scenario(duration="1000ms", bottleneck={"rate": "1Gbps", "buffer": "0.5bdp"}, flows=[{"cc": "reno", "rtt": "10000us"}])
    assert a.canonical() == b.canonical()
    assert a.hash() == b.hash()
    c = aqmlab.Scenario(duration="1s", bottleneck={"rate": "1Gbps", "buffer": "0.5bdp"}, flows=[{"cc": "reno", "rtt": "10ms"}], seed=2)
    assert c.hash() != a.hash()
    # Every default is filled in.
    canon = a.canonical()
    assert canon["bottleneck"]["rtt_ref"] == "10ms"
    assert canon["bottleneck"]["aqm"] == {"kind": "taildrop", "limit": None}
    assert canon["flows"][0]["name"] == "reno-10ms"
    assert canon["measure"] == {"interval": "100ms", "hist_bin": "1ms", "fct_bins": ["100KB", "1MB"]}


def test_duplicate_class_names_are_made_unique() -> None:
    s = aqmlab.Scenario(duration="1s", bottleneck={"rate": "1Gbps", "buffer": "1bdp"}, flows=[{"cc": "reno", "rtt": "10ms"}, {"cc": "reno", "rtt": "10ms"}])
    assert s.class_names() == ["reno-10ms", "reno-10ms-2"]


def test_choke_defaults_to_the_buffer_and_link_rate() -> None:
    # Liu et al. (CKCD): "CHOKe, buffer 80 packets, bandwidth 100 Mbps".
    s = aqmlab.Scenario(duration="1s", bottleneck={"rate": "100Mbps", "buffer": "80pkt", "aqm": {"kind": "choke"}}, flows=[{"cc": "reno", "rtt": "20ms"}])
    assert engine_params(s)["aqm"] == {"kind": "choke", "limit": 80, "bandwidth": 100_000_000, "ecn": False, "harddrop": False}


def test_cbr_class() -> None:
    s = aqmlab.Scenario(duration="1s", bottleneck={"rate": "100Mbps", "buffer": "80pkt"}, flows=[{"cc": "cbr", "rate": "50Mbps", "rtt": "20ms"}])
    c = s.engine_config()["classes"][0]
    assert (c["cc"], c["cbr_rate_bps"], c["name"]) == (None, 50_000_000, "cbr-20ms")


def test_gsp_threshold_is_the_delay_target_at_line_rate() -> None:
    # Fejes et al. 2019: GSP target = 0.75 × buffer time. Buffer 0.5 BDP of 100 Mbit/s × 10 ms = 62 500 B
    # (5 ms); target 3.75 ms ⇒ θ = 3.75e-3 × 100e6 / 8 = 46 875 B.
    s = aqmlab.Scenario(
        duration="1s", bottleneck={"rate": "100Mbps", "buffer": "0.5bdp", "aqm": {"kind": "gsp", "target": "3.75ms"}}, flows=[{"cc": "cubic", "rtt": "10ms"}]
    )
    b = engine_params(s)
    assert b["aqm"] == {
        "kind": "gsp",
        "threshold_bytes": 46_875,
        "interval_ns": 200_000_000,
        "tau_ns": 1_000_000_000,
        "alpha": 1.0,
        "max_time_ns": None,
        "adaptive": True,
        "limit_packets": None,
        "limit_bytes": 62_500,
    }
    assert b["delay_target_ns"] == 3_750_000


def test_ckcd_thresholds_are_clamped_to_the_buffer() -> None:
    # Liu et al. (CKCD): 100 Mbit/s, 80-packet buffer, RTT 20 ms ⇒ BDP = 100e6 × 0.02 / 8 / 1500 = 166.7
    # packets > the buffer, so q_min = 80/3 = 26.67 and q_max = 80 (clamped to the buffer, aqmlab's choice: otherwise the enqueue phase never runs);
    # d_max = 80 × 1500 × 8 / 100e6 = 9.6 ms.
    s = aqmlab.Scenario(duration="1s", bottleneck={"rate": "100Mbps", "buffer": "80pkt", "aqm": {"kind": "ckcd"}}, flows=[{"cc": "cubic", "rtt": "20ms"}])
    a = engine_params(s)["aqm"]
    assert a["q_min"] == 80 / 3 and a["q_max"] == 80.0
    assert a["d_max_ns"] == 9_600_000
    assert (a["d_ns"], a["delta_ns"], a["omega"], a["threshold"], a["k"]) == (5_000_000, 100_000_000, 0.002, "paper", None)


def test_codel_lowers_to_the_linux_defaults_with_the_given_limit() -> None:
    # Liu et al. (CKCD): "CoDel (Δ 100 ms, D 5 ms), buffer 80 packets".
    s = aqmlab.Scenario(
        duration="1s", bottleneck={"rate": "100Mbps", "buffer": "80pkt", "aqm": {"kind": "codel", "limit": "80pkt"}}, flows=[{"cc": "cubic", "rtt": "20ms"}]
    )
    b = engine_params(s)
    assert b["aqm"] == {
        "kind": "codel",
        "target_ns": 5_000_000,
        "interval_ns": 100_000_000,
        "limit": 80,
        "ecn": False,
        "ce_threshold_ns": None,
        "mtu_bytes": 1514,
    }
    assert b["delay_target_ns"] == 5_000_000


def test_fq_codel_defaults_capped_by_the_physical_buffer() -> None:
    s = aqmlab.Scenario(duration="1s", bottleneck={"rate": "100Mbps", "buffer": "500pkt", "aqm": {"kind": "fq_codel"}}, flows=[{"cc": "cubic", "rtt": "20ms"}])
    a = engine_params(s)["aqm"]
    # sch_fq_codel defaults: 1024 flows, quantum 1514, limit 10240 (capped to the 500-packet
    # buffer), 32 MiB memory, drop batch 64, ECN on.
    assert a == {
        "kind": "fq_codel",
        "flows": 1024,
        "quantum": 1514,
        "limit": 500,
        "memory_limit": 32 * 2**20,
        "drop_batch": 64,
        "target_ns": 5_000_000,
        "interval_ns": 100_000_000,
        "ecn": True,
        "ce_threshold_ns": None,
        "mtu_bytes": 1514,
    }


def test_pie_target_from_the_buffer_time_and_sch_pie_defaults() -> None:
    # Fejes et al. 2019: PIE target = 0.75 × buffer time, drop only. Buffer 1 BDP at 100 Mbit/s × 10 ms
    # (10 ms) ⇒ target 7.5 ms; the rest are sch_pie's defaults (tupdate 15 ms, alpha 2,
    # beta 20 in 1/16 Hz, limit 1000).
    s = aqmlab.Scenario(
        duration="1s", bottleneck={"rate": "100Mbps", "buffer": "1bdp", "aqm": {"kind": "pie", "target": "7.5ms"}}, flows=[{"cc": "cubic", "rtt": "10ms"}]
    )
    assert engine_params(s)["aqm"] == {
        "kind": "pie",
        "target_ns": 7_500_000,
        "tupdate_ns": 15_000_000,
        "limit": 1000,
        "alpha": 2,
        "beta": 20,
        "ecn": False,
        "bytemode": False,
        "dq_rate_estimator": False,
        "mtu_bytes": 1514,
    }


def test_pi2_target_is_k_times_the_rtt_with_the_given_gains() -> None:
    # Fejes et al. 2020 §III: target K·RTT (K = 0.5 of 5 ms ⇒ 2.5 ms), tupdate 10 ms, α 0.16,
    # β 3.2, any ECT scalable (Linux DCTCP sends ECT(0)).
    s = aqmlab.Scenario(
        duration="1s",
        bottleneck={
            "rate": "1Gbps",
            "buffer": "500ms",
            "aqm": {"kind": "pi2", "target": "0.5rtt", "tupdate": "10ms", "alpha": 0.16, "beta": 3.2, "ecn_mask": "any_ect"},
        },
        flows=[{"cc": "dctcp", "rtt": "5ms"}],
    )
    b = engine_params(s)
    assert b["aqm"] == {
        "kind": "pi2",
        "target_ns": 2_500_000,
        "tupdate_ns": 10_000_000,
        "alpha": 0.16,
        "beta": 3.2,
        "k": 2.0,
        "ecn_mask": "any_ect",
        "limit": 10_000,
        "mtu_bytes": 1514,
    }
    assert b["delay_target_ns"] == 2_500_000


def test_fq_pie_defaults() -> None:
    # sch_fq_pie: 1024 flows, limit 10240 (capped by a 500-packet buffer), quantum 1514,
    # ecn_prob 10 %, and PIE's 15 ms / 15 ms / 2 / 20.
    s = aqmlab.Scenario(duration="1s", bottleneck={"rate": "100Mbps", "buffer": "500pkt", "aqm": {"kind": "fq_pie"}}, flows=[{"cc": "cubic", "rtt": "20ms"}])
    a = engine_params(s)["aqm"]
    # (PIE's own limit and MTU are sch_pie's defaults, unused by FQ-PIE.)
    assert a == {
        "kind": "fq_pie",
        "flows": 1024,
        "limit": 500,
        "quantum": 1514,
        "ecn_prob": 0.1,
        "pie": {
            "target_ns": 15_000_000,
            "tupdate_ns": 15_000_000,
            "alpha": 2,
            "beta": 20,
            "ecn": False,
            "bytemode": False,
            "dq_rate_estimator": False,
            "limit": 1000,
            "mtu_bytes": 1514,
        },
    }


def test_dualpi2_defaults_are_linuxs() -> None:
    # sch_dualpi2 defaults (dualpi2_reset_default): target 15 ms, tupdate 16 ms, α 41/256 Hz,
    # β 819/256 Hz, k 2, step 1 ms, min_qlen_step 0, wc 10 %, ECT(1) classification, limit
    # 10 000, MTU 1514.
    s = aqmlab.Scenario(duration="1s", bottleneck={"rate": "40Mbps", "buffer": "250ms", "aqm": {"kind": "dualpi2"}}, flows=[{"cc": "dctcp", "rtt": "7ms"}])
    assert engine_params(s)["aqm"] == {
        "kind": "dualpi2",
        "target_ns": 15_000_000,
        "tupdate_ns": 16_000_000,
        "alpha": 41 / 256,
        "beta": 819 / 256,
        "k": 2.0,
        "step_ns": 1_000_000,
        "min_qlen_step": 0,
        "wc": 10,
        "ecn_mask": "l4s_ect",
        "limit": 10_000,
        "mtu_bytes": 1514,
    }
    assert s.canonical()["bottleneck"]["aqm"]["alpha"] == 0.16015625


def test_ppv_owns_the_buffer_and_gets_the_equal_share_marker_by_default() -> None:
    # Fejes et al. 2019: buffer = f·RTT·C; 0.2 BDP of 100 Mbit/s × 10 ms = 25 000 B, handed to PPV
    # (it must see the overflowing arrival). No [marker]: equal sharing, T_m = 100 ms.
    s = aqmlab.Scenario(
        duration="1s",
        bottleneck={"rate": "100Mbps", "buffer": "0.2bdp", "aqm": {"kind": "ppv"}},
        flows=[{"cc": "cubic", "rtt": "10ms"}, {"cc": "bbr", "rtt": "10ms"}],
    )
    cfg = s.engine_config()
    assert engine_params(s)["aqm"] == {"kind": "ppv", "limit_packets": None, "limit_bytes": 25_000}
    assert cfg["marker"] == {"rate_window_ns": 100_000_000, "class_weights": [1.0, 1.0], "class_curves": [None, None]}
    # The canonical form spells the default marker out, and is a fixed point.
    canon = s.canonical()
    assert canon["marker"] == {"tvf": "equal", "weights": {}, "rate_window": "100ms"}
    again = aqmlab.Scenario.model_validate(canon)
    assert again.canonical() == canon and again.hash() == s.hash()


def test_csaqm_target_bytes_and_weighted_marker_in_class_order() -> None:
    # Fejes et al. 2020: D_target = K·RTT = 0.5 × 5 ms = 2.5 ms ⇒ L_target = 2.5e-3 × 1e9 / 8 = 312 500 B;
    # CTV every 5 ms. Weights by class name, unlisted classes 1, in class order.
    s = aqmlab.Scenario(
        duration="1s",
        bottleneck={"rate": "1Gbps", "buffer": "500ms", "aqm": {"kind": "csaqm", "target": "0.5rtt"}},
        flows=[{"cc": "dctcp", "rtt": "5ms", "name": "gold"}, {"cc": "dctcp", "rtt": "5ms"}, {"cc": "dctcp", "rtt": "5ms", "name": "bronze"}],
        marker={"tvf": "weighted", "weights": {"gold": 2, "bronze": 0.5}, "rate_window": "50ms"},
    )
    cfg = s.engine_config()
    assert engine_params(s) == {"aqm": {"kind": "csaqm", "target_bytes": 312_500, "interval_ns": 5_000_000}, "delay_target_ns": 2_500_000}
    assert cfg["marker"] == {"rate_window_ns": 50_000_000, "class_weights": [2.0, 1.0, 0.5], "class_curves": [None, None, None]}


def test_a_custom_tvf_lowers_to_bit_per_second_points_and_gives_the_weighted_tvfs_results() -> None:
    # V(x / 3) is log-linear in x from (3·10 kbit/s, 65535) down to (3·100 Gbit/s, 1)
    # (crates/link/src/marker.rs: X_MIN 10 kbit/s, X_MAX 100 Gbit/s, PV_MAX 65535), so a custom
    # curve through those two points is the weighted TVF with w = 3: the runs must agree.
    flows = [{"cc": "cubic", "rtt": "20ms", "name": "gold"}, {"cc": "cubic", "rtt": "20ms", "name": "silver"}]
    base = {"duration": "6s", "warmup": "2s", "bottleneck": {"rate": "50Mbps", "buffer": "0.5bdp", "aqm": {"kind": "ppv"}}, "flows": flows}
    custom = aqmlab.Scenario(**base, marker={"tvf": "custom", "curves": {"gold": [["30kbps", 65535], ["300Gbps", 1]]}})
    weighted = aqmlab.Scenario(**base, marker={"tvf": "weighted", "weights": {"gold": 3}})
    assert custom.engine_config()["marker"]["class_curves"] == [[(30e3, 65535.0), (300e9, 1.0)], None]
    assert "curves" in custom.canonical()["marker"] and "curves" not in weighted.canonical()["marker"]
    rc, rw = aqmlab.run(custom), aqmlab.run(weighted)
    gc, gw = rc.classes["goodput_bps"].tolist(), rw.classes["goodput_bps"].tolist()
    # Values agree to ±1 code (the ln arithmetic rounds differently), so allow 2 % per class.
    for a, b in zip(gc, gw):
        assert abs(a - b) <= 0.02 * b, (gc, gw)
    assert gc[0] > 1.5 * gc[1], gc  # and gold, weighted 3, really gets the larger share


def test_disciplines_without_values_have_no_marker_and_keep_their_hash() -> None:
    s = aqmlab.Scenario(duration="1s", bottleneck={"rate": "1Gbps", "buffer": "1bdp"}, flows=[{"cc": "reno", "rtt": "10ms"}])
    assert s.engine_config()["marker"] is None
    assert "marker" not in s.canonical()


def _check_red_with_a_small_burst() -> None:
    s = aqmlab.Scenario(
        duration="1s",
        bottleneck={"rate": "100Mbps", "buffer": "1bdp", "aqm": {"kind": "red", "min": "30000B", "max": "90000B", "avpkt": "1000B", "burst": 2}},
        flows=[{"cc": "reno", "rtt": "10ms"}],
    )
    check_with_engine(s)


def test_an_option_the_engine_refuses_comes_back_from_a_worker_process_with_its_key() -> None:
    # tc's tc_red_eval_ewma (iproute2 tc/tc_red.c) needs burst + 1 - min/avpkt >= 1: with min
    # 30 000 B and avpkt 1000 B a burst of 2 is refused, by the engine alone (the front knows
    # nothing of it). A sweep's worker raises the error and the process pool pickles it to the
    # parent, which prints the key and the reason: both must come back as they were.
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1) as pool:
        e = pool.submit(_check_red_with_a_small_burst).exception()
    assert isinstance(e, ScenarioError), e
    assert e.key == "bottleneck.aqm.burst" and "try burst 31" in str(e), str(e)
