"""Bad input is refused before anything runs: one message naming the file, line and key,
exit status 2, and nothing written (docs/scenario.md). The case table goes through the CLI
in-process (Typer's runner: the exit status and stderr the command would give); a few cases
go through a real `python -m aqmlab` process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import aqmlab
from aqmlab.cli.main import app

GOOD = """\
name = "t"
duration = "2s"
warmup = "0s"
seed = 1

[bottleneck]
rate = "100Mbps"
buffer = "1bdp"
aqm = { kind = "taildrop" }

[[flows]]
cc = "cubic"
count = 2
rtt = "10ms"

[[flows]]
cc = "dctcp"
rtt = "20ms"
start = "uniform(0s, 1s)"
"""


def edit(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new, 1)


def marked(aqm: str, marker: str) -> str:
    """GOOD with another discipline and a [marker] table (from line 11) before the flows."""
    return edit('aqm = { kind = "taildrop" }', f"aqm = {aqm}").replace("[[flows]]", f"[marker]\n{marker}\n\n[[flows]]", 1)


# (id, scenario text, expected "line: key" prefix, a fragment of the message)
CASES = [
    ("unknown-top-level-key", GOOD.replace("seed = 1", "seed = 1\nsed = 2"), "5: sed", "did you mean 'seed'"),
    ("misspelt-bottleneck-key", edit('rate = "100Mbps"', 'rtae = "100Mbps"'), "7: bottleneck.rtae", "did you mean 'rate'"),
    ("misspelt-flow-key", edit("count = 2", "cuont = 2"), "13: flows[0].cuont", "did you mean 'count'"),
    ("misspelt-aqm-option", edit('aqm = { kind = "taildrop" }', 'aqm = { kind = "taildrop", limt = "10pkt" }'), "9: bottleneck.aqm.limt", "unknown key"),
    ("unknown-aqm-kind", edit('kind = "taildrop"', 'kind = "droptail"'), "9: bottleneck.aqm", "unknown aqm kind 'droptail'"),
    ("unknown-cc", edit('cc = "cubic"', 'cc = "cubik"'), "12: flows[0].cc", "unknown cc 'cubik'"),
    ("unparsable-rate", edit('"100Mbps"', '"100 parsecs"'), "7: bottleneck.rate", "is not a rate"),
    ("rate-unit-unknown", edit('"100Mbps"', '"100Mbq"'), "7: bottleneck.rate", "unknown unit 'Mbq'"),
    ("negative-time", edit('rtt = "10ms"', 'rtt = "-10ms"'), "14: flows[0].rtt", "is not a time"),
    ("zero-rtt", edit('rtt = "10ms"', 'rtt = "0ms"'), "14: flows[0].rtt", "must be positive"),
    ("zero-rate", edit('"100Mbps"', '"0Mbps"'), "7: bottleneck.rate", "positive"),
    ("count-zero", edit("count = 2", "count = 0"), "13: flows[0].count", "greater than or equal to 1"),
    ("warmup-too-long", edit('warmup = "0s"', 'warmup = "5s"'), "3: warmup", "must be shorter than duration (5 s ≥ 2 s)"),
    ("toml-syntax", edit("seed = 1", "seed = = 1"), "4", "TOML syntax"),
    ("uniform-reversed", edit("uniform(0s, 1s)", "uniform(2s, 1s)"), "19: flows[1].start", "needs a <= b"),
    (
        "probability-above-one",
        edit('aqm = { kind = "taildrop" }', 'aqm = { kind = "bernoulli", drop = 1.5 }'),
        "9: bottleneck.aqm.drop",
        "less than or equal to 1",
    ),
    ("buffer-with-a-rate", edit('buffer = "1bdp"', 'buffer = "10Mbps"'), "8: bottleneck.buffer", "is not a size"),
    ("missing-duration", GOOD.replace('duration = "2s"\n', ""), "", "duration: required key is missing"),
    ("missing-flows", GOOD.split("[[flows]]")[0], "", "a scenario needs at least one [[flows]] class or [[workload]]"),
    (
        "red-min-above-max",
        edit('aqm = { kind = "taildrop" }', 'aqm = { kind = "red", min = "30KB", max = "20KB", avpkt = "1500B" }'),
        "9: bottleneck.aqm.max",
        "below min",
    ),
    (
        "red-burst-too-small",
        edit('aqm = { kind = "taildrop" }', 'aqm = { kind = "red", min = "30KB", max = "90KB", avpkt = "1000B", burst = 2 }'),
        "9: bottleneck.aqm.burst",
        "too small",
    ),
    ("red-missing-avpkt", edit('aqm = { kind = "taildrop" }', 'aqm = { kind = "red", min = "30KB" }'), "9: bottleneck.aqm.avpkt", "required"),
    ("step-without-threshold", edit('aqm = { kind = "taildrop" }', 'aqm = { kind = "step" }'), "9: bottleneck.aqm", "give exactly one of target"),
    ("unknown-cc-param", edit("count = 2", "count = 2\ncc_params = { bta = 700 }"), "14: flows[0].cc_params.bta", "unknown cubic parameter"),
    ("cc-param-out-of-range", edit('cc = "dctcp"', 'cc = "dctcp"\ncc_params = { shift_g = 12 }'), "18: flows[1].cc_params.shift_g", "must be 0..=10"),
    ("choke-threshold-in-bytes", edit('aqm = { kind = "taildrop" }', 'aqm = { kind = "choke", min = "6KB" }'), "9: bottleneck.aqm.min", "counts packets"),
    (
        "choke-min-above-max",
        edit('aqm = { kind = "taildrop" }', 'aqm = { kind = "choke", min = "30pkt", max = "20pkt" }'),
        "9: bottleneck.aqm.min",
        "must be below max",
    ),
    ("cbr-without-rate", edit('cc = "cubic"', 'cc = "cbr"'), "11: flows[0]", "needs rate"),
    ("rate-on-a-tcp-flow", edit("count = 2", 'count = 2\nrate = "10Mbps"'), "11: flows[0]", "rate is for cc"),
    (
        "cbr-ecn-true",
        edit('cc = "cubic"\ncount = 2', 'cc = "cbr"\nrate = "10Mbps"\necn = true'),
        "11: flows[0]",
        'its ecn is the codepoint its datagrams carry, "ect0" or "ect1"',
    ),
    ("codepoint-on-a-tcp-flow", edit("count = 2", 'count = 2\necn = "ect1"'), "11: flows[0]", 'ecn = "ect1" is for cbr classes'),
    (
        "codepoint-unknown",
        edit('cc = "cubic"\ncount = 2', 'cc = "cbr"\nrate = "10Mbps"\necn = "ect2"'),
        "14: flows[0].ecn",
        'expected true or false (a TCP class), or a cbr class\'s codepoint, "ect0" or "ect1"',
    ),
    ("csaqm-without-target", edit('aqm = { kind = "taildrop" }', 'aqm = { kind = "csaqm" }'), "9: bottleneck.aqm.target", "required key is missing"),
    ("csaqm-zero-target", edit('aqm = { kind = "taildrop" }', 'aqm = { kind = "csaqm", target = "0ms" }'), "9: bottleneck.aqm.target", "must be positive"),
    ("marker-with-a-valueless-aqm", marked('{ kind = "taildrop" }', 'tvf = "equal"'), "11: marker", "only disciplines that read packet values use it"),
    ("marker-misspelt-key", marked('{ kind = "ppv" }', 'tfv = "equal"'), "12: marker.tfv", "did you mean 'tvf'"),
    ("marker-weighted-without-weights", marked('{ kind = "ppv" }', 'tvf = "weighted"'), "11: marker", "needs weights"),
    ("marker-weights-with-equal", marked('{ kind = "ppv" }', 'weights = { "cubic-10ms" = 2 }'), "11: marker", 'apply to tvf = "weighted"'),
    (
        "marker-unknown-class",
        marked('{ kind = "csaqm", target = "0.5rtt" }', 'tvf = "weighted"\nweights = { gold = 2 }'),
        "13: marker.weights.gold",
        "no flow class named 'gold' (classes: cubic-10ms, dctcp-20ms)",
    ),
    ("marker-zero-weight", marked('{ kind = "ppv" }', 'tvf = "weighted"\nweights = { "cubic-10ms" = 0 }'), "13: marker.weights.cubic-10ms", "greater than 0"),
    ("marker-custom-without-curves", marked('{ kind = "ppv" }', 'tvf = "custom"'), "11: marker", "needs curves"),
    (
        "marker-curves-with-equal",
        marked('{ kind = "ppv" }', 'curves = { "cubic-10ms" = [["1Mbps", 100], ["1Gbps", 10]] }'),
        "11: marker",
        'apply to tvf = "custom"',
    ),
    (
        "marker-curve-increasing",
        marked('{ kind = "ppv" }', 'tvf = "custom"\ncurves = { "cubic-10ms" = [["1Mbps", 100], ["1Gbps", 200]] }'),
        "13: marker.curves.cubic-10ms",
        "values decrease",
    ),
    (
        "marker-curve-unknown-class",
        marked('{ kind = "ppv" }', 'tvf = "custom"\ncurves = { gold = [["1Mbps", 100], ["1Gbps", 10]] }'),
        "13: marker.curves.gold",
        "no flow class named 'gold'",
    ),
    (
        "marker-curve-bad-rate",
        marked('{ kind = "ppv" }', 'tvf = "custom"\ncurves = { "cubic-10ms" = [["1ms", 100], ["1Gbps", 10]] }'),
        "13: marker.curves.cubic-10ms",
        "rate",
    ),
    ("marker-bad-window", marked('{ kind = "ppv" }', 'rate_window = "0ms"'), "12: marker.rate_window", "must be positive"),
    (
        "workload-stops-before-it-starts",
        GOOD + '\n[[workload]]\ncc = "cubic"\nrtt = "10ms"\nrate = "10/s"\nsize = { dist = "fixed", size = "10KB" }\nstart = "1s"\nstop = "0.5s"\n',
        "27: workload[0].stop",
        "must be after its start",
    ),
    ("flow-size-as-time", edit('rtt = "20ms"', 'rtt = "20ms"\nsize = "1s"'), "19: flows[1].size", "is not a size"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_library_error_names_line_and_key(case, tmp_path: Path) -> None:
    _, text, where, fragment = case
    path = tmp_path / "scen.toml"
    path.write_text(text)
    with pytest.raises(aqmlab.ScenarioError) as exc:
        aqmlab.load_scenario(path)
    msg = str(exc.value)
    assert msg.startswith(f"{path}:{where}" if where else str(path)), msg
    assert fragment in msg, msg
    assert "\n" not in msg, "one message, one line"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aqmlab", *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def _invoke(*args: str) -> tuple[int, str]:
    """The command run in-process: its exit status and stderr. An exception escaping the
    command (a traceback in a real process) fails here, naming it."""
    r = CliRunner().invoke(app, list(args))
    assert r.exception is None or isinstance(r.exception, SystemExit), f"{args[0]} raised {type(r.exception).__name__}: {r.exception}"
    return r.exit_code, r.stderr


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_cli_exits_2_and_writes_nothing(case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, text, where, fragment = case
    path = tmp_path / "scen.toml"
    path.write_text(text)
    monkeypatch.chdir(tmp_path)  # anything written relative to the working directory shows below
    code, err = _invoke("validate", str(path))
    assert code == 2, err
    assert fragment in " ".join(err.split()), err
    assert "Traceback" not in err
    out_dir = tmp_path / "results"
    code, err = _invoke("run", str(path), "-o", str(out_dir))
    assert code == 2, err
    assert not out_dir.exists()
    assert not (tmp_path / "runs").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["scen.toml"]


def test_a_real_process_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    # The case table above, once through the installed entry point (`python -m aqmlab`).
    _, text, where, fragment = next(c for c in CASES if c[0] == "unknown-cc")
    path = tmp_path / "scen.toml"
    path.write_text(text)
    r = _cli("run", str(path), "-o", str(tmp_path / "results"), cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert f"{path}:{where}" in " ".join(r.stderr.split()) and fragment in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["scen.toml"]


def test_the_good_scenario_validates(tmp_path: Path) -> None:
    path = tmp_path / "ok.toml"
    path.write_text(GOOD)
    r = _cli("validate", str(path), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ok: t:")


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    r = _cli("validate", str(tmp_path / "nope.toml"), cwd=tmp_path)
    assert r.returncode == 2
    assert "cannot read the file" in r.stderr


def test_case_table_is_large_enough() -> None:
    assert len(CASES) >= 15


# A scenario saved in Latin-1 (é is 0xe9, alone an invalid UTF-8 byte) and a binary file: the
# offset and line are those of the first byte that does not decode, counted by hand.
NOT_UTF8 = [
    pytest.param(GOOD.replace('name = "t"', 'name = "caf\xe9"').encode("latin-1"), len('name = "caf'), 1, id="latin-1"),
    pytest.param(GOOD.encode() + b"# \xff\xfe\n", len(GOOD.encode()) + 2, GOOD.count("\n") + 1, id="binary-tail"),
]


@pytest.mark.parametrize("data, offset, line", NOT_UTF8)
def test_a_file_that_is_not_utf8_names_its_line_and_byte_offset(data: bytes, offset: int, line: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "scen.toml"
    path.write_bytes(data)
    monkeypatch.chdir(tmp_path)
    for args in (["validate", str(path)], ["run", str(path), "-o", str(tmp_path / "results")], ["sweep", str(path), "-o", str(tmp_path / "sweep")]):
        code, err = _invoke(*args)
        assert code == 2, err
        assert "Traceback" not in err
        err = " ".join(err.split())
        assert f"{path}:{line}: not UTF-8 text" in err and f"at byte offset {offset};" in err, err
    assert [p.name for p in tmp_path.iterdir()] == ["scen.toml"]


# Every file a user writes is read by one loader (aqmlab.inputs.loader): a TOML syntax error is
# the same located message in each format, raised as the format's own ScenarioError subclass.
def _formats(tmp_path: Path):
    from aqmlab.fidelity.suite import FidelityError, load_manifest
    from aqmlab.scenario import parse_scenario
    from aqmlab.search.atlas import AtlasError, parse_spec
    from aqmlab.search.spec import SearchError, parse_search
    from aqmlab.studies.findings import FindingsError, parse_findings
    from aqmlab.sweep.spec import SweepError, parse_sweep

    def manifest(text: str, file: str) -> None:
        (tmp_path / "manifest.toml").write_text(text)
        load_manifest(tmp_path)

    return [
        ("scenario", lambda t, f: parse_scenario(t, file=f), aqmlab.ScenarioError, None),
        ("sweep", lambda t, f: parse_sweep(t, file=f), SweepError, None),
        ("search", lambda t, f: parse_search(t, file=f), SearchError, None),
        ("atlas", lambda t, f: parse_spec(t, file=f), AtlasError, None),
        ("findings", lambda t, f: parse_findings(t, file=f), FindingsError, None),
        ("manifest", manifest, FidelityError, str(tmp_path / "manifest.toml")),
    ]


@pytest.mark.parametrize("fmt", ["scenario", "sweep", "search", "atlas", "findings", "manifest"])
def test_a_toml_syntax_error_is_one_located_message_in_every_format(fmt: str, tmp_path: Path) -> None:
    name, parse, error, file = next(f for f in _formats(tmp_path) if f[0] == fmt)
    text = 'name = "x"\n# a comment\nseed = = 1\n'  # line 3: a value is missing
    with pytest.raises(error) as e:
        parse(text, "in.toml")
    assert str(e.value) == f"{file or 'in.toml'}:3: TOML syntax: Invalid value"
