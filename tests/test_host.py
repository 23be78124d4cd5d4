"""The `[host]` table: Linux hosts with their offloads by default, without them or ideal hosts on
request (docs/scenario.md)."""

from __future__ import annotations

import pytest

import aqmlab
from aqmlab import ScenarioError
from aqmlab.scenario import parse_scenario

BASE = """\
duration = "1s"
[bottleneck]
rate = "1Gbps"
buffer = "1bdp"
[[flows]]
cc = "reno"
rtt = "10ms"
"""


def test_the_default_host_is_linux_with_its_offloads() -> None:
    cfg = aqmlab.Scenario(duration="1s", bottleneck={"rate": "1Gbps", "buffer": "1bdp"}, flows=[{"cc": "reno", "rtt": "10ms"}]).engine_config()
    # Linux: GSO_LEGACY_MAX_SIZE = 65536 (include/linux/netdevice.h) for both gso_max_size and
    # gro_max_size; tcp_min_tso_segs = 2 (Documentation/networking/ip-sysctl.rst);
    # sk_pacing_shift = 10 (net/core/sock.c, sock_init_data); i40e's rx-usecs 50 µs; a 10 GbE NIC;
    # timing noise of 100 µs, the emulator's measured delay-line lateness (docs/model.md); no
    # stalls (a host with a core of its own).
    assert cfg["host"] == {
        "offloads": True,
        "nic_rate_bps": 10 * 10**9,
        "gso_max_bytes": 65536,
        "min_tso_segs": 2,
        "pacing_shift": 10,
        "gro_max_bytes": 65536,
        "rx_coalesce_ns": 50_000,
        "jitter_ns": 100_000,
        "stall_ns": 0,
        "stall_every_ns": 0,
    }


def test_host_knobs_lower_to_engine_units_and_the_canonical_form_is_a_fixed_point() -> None:
    s = parse_scenario(BASE + '[host]\nnic_rate = "1Gbps"\ngso_max_size = "32KiB"\nrx_coalesce = "0.1ms"\nmin_tso_segs = 4\n')
    h = s.engine_config()["host"]
    assert (h["nic_rate_bps"], h["gso_max_bytes"], h["rx_coalesce_ns"], h["min_tso_segs"]) == (10**9, 32 * 1024, 100_000, 4)
    again = aqmlab.Scenario.model_validate(s.canonical())
    assert again.canonical() == s.canonical() and again.hash() == s.hash()


def test_ideal_hosts_spell_out_nothing_else_and_hash_apart_from_linux_hosts() -> None:
    linux = parse_scenario(BASE)
    ideal = parse_scenario(BASE + "[host]\nideal = true\n")
    assert ideal.canonical()["host"] == {"ideal": True}
    h = ideal.engine_config()["host"]
    assert (h["ideal"], h["offloads"]) == (True, False)
    assert ideal.host.offloads is False
    assert ideal.hash() != linux.hash()
    assert aqmlab.Scenario.model_validate(ideal.canonical()).hash() == ideal.hash()


def test_the_default_hosts_canonical_form_has_no_ideal_key_and_offloads_off_has_no_gro() -> None:
    # The default host's meaning is unchanged by `ideal`, so its canonical form (and every
    # existing scenario's hash) is the one without the key: the eight other keys.
    linux = parse_scenario(BASE).canonical()["host"]
    assert sorted(linux) == sorted(["offloads", "nic_rate", "gso_max_size", "min_tso_segs", "pacing_shift", "gro_max_size", "rx_coalesce", "jitter"])
    # Offloads off: Linux hosts whose receivers have no GRO, so every knob but gro_max_size
    # stays, and the form differs from the ideal host's (and from the default's).
    off = parse_scenario(BASE + '[host]\noffloads = false\nnic_rate = "1Gbps"\n')
    c = off.canonical()["host"]
    assert "gro_max_size" not in c and "ideal" not in c
    assert (c["offloads"], c["nic_rate"]) == (False, "1Gbps")
    assert off.engine_config()["host"]["nic_rate_bps"] == 10**9
    ideal = parse_scenario(BASE + "[host]\nideal = true\n")
    assert len({off.hash(), ideal.hash(), parse_scenario(BASE).hash()}) == 3
    assert aqmlab.Scenario.model_validate(off.canonical()).hash() == off.hash()


@pytest.mark.parametrize(
    ("extra", "line", "key", "says"),
    [
        ('ideal = true\nnic_rate = "1Gbps"\n', 10, "host.nic_rate", "applies to Linux hosts"),
        ('ideal = true\njitter = "10us"\n', 10, "host.jitter", "applies to Linux hosts"),
        ("ideal = true\noffloads = false\n", 10, "host.offloads", "applies to Linux hosts"),
        ('offloads = false\ngro_max_size = "32KiB"\n', 10, "host.gro_max_size", "applies to hosts with GRO"),
        ('gro_max_size = "10pkt"\n', 9, "host.gro_max_size", "a size in bytes"),
        ('gso_max_size = "1KB"\n', 9, "host.gso_max_size", "less than one 1500 B packet"),
        ("min_tso_segs = 0\n", 9, "host.min_tso_segs", "greater than or equal to 1"),
        ("tso = true\n", 9, "host.tso", "unknown key"),
        ('stall = "1ms"\n', 8, "host.stall_every", "needs both its length"),
        ('stall_every = "1s"\n', 8, "host.stall", "needs both its length"),
        ('stall = "2s"\nstall_every = "1s"\n', 9, "host.stall", "is not shorter than stall_every"),
        ('ideal = true\nstall = "1ms"\nstall_every = "1s"\n', 10, "host.stall", "applies to Linux hosts"),
    ],
)
def test_bad_host_keys_are_refused_with_their_line(extra: str, line: int, key: str, says: str) -> None:
    with pytest.raises(ScenarioError) as e:
        parse_scenario(BASE + "[host]\n" + extra, file="s.toml")
    msg = str(e.value)
    assert msg.startswith(f"s.toml:{line}: {key}: "), msg
    assert says in msg, msg


def test_the_emulator_refuses_a_timing_noise_for_its_real_hosts() -> None:
    from aqmlab.emu.emulate import _check_host

    _check_host(parse_scenario(BASE).host)
    with pytest.raises(ScenarioError, match="^host.jitter: the emulator's hosts have their own timing noise"):
        _check_host(parse_scenario(BASE + '[host]\njitter = "10us"\n').host)


def test_stalls_lower_to_the_engine_and_hash_apart_and_the_emulator_refuses_them() -> None:
    from aqmlab.emu.emulate import _check_host

    s = parse_scenario(BASE + '[host]\nstall = "1.5ms"\nstall_every = "2s"\n')
    h = s.engine_config()["host"]
    assert (h["stall_ns"], h["stall_every_ns"]) == (1_500_000, 2_000_000_000)
    assert (s.canonical()["host"]["stall"], s.canonical()["host"]["stall_every"]) == ("1.5ms", "2s")
    assert s.hash() != parse_scenario(BASE).hash()
    assert aqmlab.Scenario.model_validate(s.canonical()).hash() == s.hash()
    with pytest.raises(ScenarioError, match="^host.stall: the emulator's hosts stall as their machine does"):
        _check_host(s.host)


def test_bbr_builds_a_queue_in_a_deep_buffer_when_its_hosts_stall() -> None:
    # BBRv1's bandwidth estimate is the largest delivery-rate sample of 10 rounds
    # (net/ipv4/tcp_bbr.c bbr_update_bw). Through a fixed-rate link a sample can exceed the
    # link only when ACKs arrive compressed: a stall holds them and the sender takes them in
    # one burst. The estimate then sits above the link for 10 rounds, pacing faster than the
    # link drains, and the queue grows by the excess; with hosts that never stall BBR keeps
    # only its ProbeBW sawtooth (the emulator's kernel: docs/fidelity.md, bbr-deep-taildrop).
    def queue_ms(host: str) -> float:
        s = parse_scenario('duration = "10s"\nwarmup = "3s"\n[bottleneck]\nrate = "100Mbps"\nbuffer = "667pkt"\n[[flows]]\ncc = "bbr"\nrtt = "20ms"\n' + host)
        return aqmlab.run(s).summary["metrics"]["sojourn_ms"]["mean"]

    calm = queue_ms("")
    stalled = queue_ms('[host]\nstall = "2ms"\nstall_every = "250ms"\n')
    assert stalled > 1.3 * calm, (calm, stalled)


def test_the_emulator_refuses_ideal_hosts_and_knobs_it_cannot_apply_without_offloads() -> None:
    from aqmlab.emu.emulate import _check_host

    with pytest.raises(ScenarioError, match="^host.ideal: the emulator's hosts are real Linux hosts"):
        _check_host(parse_scenario(BASE + "[host]\nideal = true\n").host)
    _check_host(parse_scenario(BASE + "[host]\noffloads = false\n").host)
    with pytest.raises(ScenarioError, match="^host.jitter: the emulator's hosts have their own timing noise"):
        _check_host(parse_scenario(BASE + '[host]\noffloads = false\njitter = "10us"\n').host)
    with pytest.raises(ScenarioError, match="^host.rx_coalesce: the emulator applies rx_coalesce only to hosts with offloads"):
        _check_host(parse_scenario(BASE + '[host]\noffloads = false\nrx_coalesce = "10us"\n').host)
