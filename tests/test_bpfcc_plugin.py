"""A user's struct_ops congestion control on the emulator's kernel (python/aqmlab/emu/bpfcc.py,
bpf/loader.c; docs/emulator.md, "eBPF congestion controls"): compiled from its C file, and
registered per run under a name of its own.

Without root: the compiler's errors (clang's message naming the file; what to install or build
when clang, libbpf's headers or vmlinux.h are missing), the names the kernel refuses, the
generated names, and the loader's command line. What `make build` provides (clang, vmlinux.h,
the loader) is required: without it these tests fail saying so, never skip. With root and the
kernel's BTF (as `make test` runs on its Debian machine; skipped otherwise, with the reason, as
the rest of the emulator's tests are): examples/plugins/reno.bpf.c registered twice at once
under two names, carrying a loopback TCP connection, both names gone after stop(), and a name
already registered refused with that reason.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import secrets
import shutil
import socket
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from aqmlab.emu import bpfcc as B

REPO = Path(__file__).resolve().parents[1]
RENO_SRC = REPO / "examples" / "plugins" / "reno.bpf.c"


def _kernel_build_missing() -> str | None:
    """Why a real compile cannot run here (None: it can): what `compile_kernel_object` checks."""
    return B.kernel_build_missing()


def _root_missing() -> str | None:
    """Why the registration tests cannot run here (None: they can): what a machine, not a
    build, lacks."""
    if os.geteuid() != 0:
        return "needs root"
    if not B.KERNEL_BTF.exists():
        return f"no kernel BTF ({B.KERNEL_BTF})"
    return None


@pytest.fixture
def kernel_build() -> None:
    """clang and vmlinux.h, which `make build` provides: their absence is a failure."""
    why = _kernel_build_missing()
    if why is not None:
        pytest.fail(f"compiles for the kernel, which `make build` sets up: {why}")


@pytest.fixture
def loader() -> Path:
    """The built loader (`make build`): its absence is a failure."""
    if not B.loader_path().is_file():
        pytest.fail(f"no {B.loader_path()}: `make build` builds it")
    return B.loader_path()


_WHY_ROOT = _root_missing()
needs_root_bpf = pytest.mark.skipif(_WHY_ROOT is not None, reason=f"registers eBPF CCs: {_WHY_ROOT}")


# ------------------------------------------------------------------------------------------
# Without root
# ------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("kernel_build")
def test_a_source_that_does_not_compile_names_the_file_and_carries_clangs_message(tmp_path: Path) -> None:
    src = tmp_path / "broken_cc.bpf.c"
    src.write_text('#include "vmlinux.h"\n__u32 f(void)\n{\n\treturn not_declared_anywhere;\n}\n')
    out = tmp_path / "obj" / "broken_cc.bpf.o"
    with pytest.raises(B.CompileError) as e:
        B.compile_kernel_object(src, out)
    msg = str(e.value)
    # clang's own diagnostic, with the file, line and identifier.
    assert f"{src}:4:" in msg and "not_declared_anywhere" in msg and "error:" in msg
    # Nothing half-written is left where a run could load it.
    assert not out.exists() and list(out.parent.iterdir()) == []


@pytest.mark.usefixtures("kernel_build")
def test_a_good_source_compiles_to_an_object_in_place(tmp_path: Path) -> None:
    out = tmp_path / "reno.bpf.o"
    out.write_bytes(b"stale")
    B.compile_kernel_object(RENO_SRC, out)
    data = out.read_bytes()
    # An ELF object for BPF (e_machine EM_BPF = 247, little-endian here) holding the
    # struct_ops section the loader registers; no temporary file left beside it.
    assert data[:4] == b"\x7fELF" and int.from_bytes(data[18:20], "little") == 247
    assert b".struct_ops" in data and b"aqmlab_reno" in data
    assert [p.name for p in tmp_path.iterdir()] == ["reno.bpf.o"]


def test_without_clang_the_error_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no clang on it
    with pytest.raises(B.CompileError) as e:
        B.compile_kernel_object(RENO_SRC, tmp_path / "x.bpf.o")
    assert "needs clang" in str(e.value) and "apt-get install clang" in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "x.bpf.o").exists()


@pytest.mark.usefixtures("kernel_build")
def test_without_vmlinux_h_the_error_says_to_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AQMLAB_BPF_DIR", str(tmp_path / "unbuilt"))
    with pytest.raises(B.CompileError) as e:
        B.compile_kernel_object(RENO_SRC, tmp_path / "x.bpf.o")
    assert str(tmp_path / "unbuilt" / "vmlinux.h") in str(e.value) and "make build" in str(e.value) and "\n" not in str(e.value)


def test_without_libbpf_headers_the_error_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A clang that answers as clang does when libbpf-dev is absent (the include of
    # examples/plugins/reno.bpf.c's second line).
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "clang"
    fake.write_text(f"#!/bin/sh\necho \"{RENO_SRC}:10:10: fatal error: 'bpf/bpf_helpers.h' file not found\" >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(bindir))
    monkeypatch.setenv("AQMLAB_BPF_DIR", str(tmp_path))
    (tmp_path / "vmlinux.h").write_text("")
    with pytest.raises(B.CompileError) as e:
        B.compile_kernel_object(RENO_SRC, tmp_path / "out" / "x.bpf.o")
    first, *rest = str(e.value).splitlines()
    assert "bpf/bpf_helpers.h" in first and "libbpf-dev" in first
    assert rest == [f"{RENO_SRC}:10:10: fatal error: 'bpf/bpf_helpers.h' file not found"]
    assert list((tmp_path / "out").iterdir()) == []


@pytest.mark.parametrize(
    ("name", "words"),
    [("aqmlab_" + "x" * 9, "longer than 15 bytes"), ("aqmlab-p1", "letters, digits"), ("", "letters, digits")],
    ids=["16-bytes", "dash", "empty"],
)
def test_a_name_the_kernel_refuses_is_refused(name: str, words: str) -> None:
    with pytest.raises(ValueError) as e:
        B.BpfCc("mine", name, Path("/nonexistent/mine.bpf.o"), "mine.bpf.c")
    assert words in str(e.value)
    B.BpfCc("mine", "aqmlab_" + "x" * 8, Path("/nonexistent/mine.bpf.o"), "mine.bpf.c")  # 15 bytes: fine


@pytest.mark.parametrize(("name", "words"), [("aqmlab_" + "x" * 9, "longer than 15 bytes"), ("a b", "only letters")], ids=["16-bytes", "space"])
def test_the_loader_refuses_a_bad_name_before_loading(loader: Path, name: str, words: str) -> None:
    # Before anything is opened or loaded: the object need not exist, no root needed.
    r = subprocess.run([str(loader), "--name", name, "/nonexistent.bpf.o"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and f'"{name}"' in r.stderr and words in r.stderr


def test_generated_names_are_unique_and_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    names = {B.unique_kernel_name() for _ in range(500)}
    assert len(names) == 500
    for n in names:
        assert n.startswith(B.NAME_PREFIX) and len(n.encode()) == B.NAME_MAX
        B.check_kernel_name(n)
    # One already registered is skipped.
    draws = iter(["aaaaaaaa", "bbbbbbbb"])
    monkeypatch.setattr(secrets, "token_hex", lambda n: next(draws))
    monkeypatch.setattr(B, "registered", lambda: ["reno", "aqmlab_paaaaaaa"])
    assert B.unique_kernel_name() == "aqmlab_pbbbbbbb"


def test_a_run_of_a_users_cc_with_skipped_ops_is_untrusted() -> None:
    # The port's in-CC guard is not there: recursion misses and the sampled window decide.
    clean = {"recursion_misses": {"reno_ssthresh": 0}}
    ok = [{"snd_ssthresh": 0x7FFFFFFF, "snd_cwnd": 10}, {"snd_ssthresh": 20, "snd_cwnd": 40}]  # TCP_INFINITE_SSTHRESH at start
    assert B.user_run_untrusted("mine", clean, ok) is None
    why = B.user_run_untrusted("mine", clean, [*ok, {"snd_ssthresh": 2165326096, "snd_cwnd": 25}])
    assert why is not None and "1 samples" in why and "first ssthresh 2165326096 cwnd 25" in why
    why = B.user_run_untrusted("mine", {"recursion_misses": {"reno_ssthresh": 2}}, ok)
    assert why is not None and "reno_ssthresh" in why
    why = B.user_run_untrusted("mine", {}, ok)
    assert why is not None and "left no counters" in why


@pytest.fixture
def fake_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A build directory whose aqmlab-bpfcc records its arguments, says ready under the name
    given (or the object's stem) and waits for EOF, as bpf/loader.c does."""
    d = tmp_path / "build"
    d.mkdir()
    argv = tmp_path / "argv"
    loader = d / "aqmlab-bpfcc"
    loader.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$@" > {argv}\n'
        'if [ "$1" = --name ]; then n=$2; else n=$(basename "$1" .bpf.o); fi\n'
        'echo "ready $n"\ncat >/dev/null\necho \'{"recursion_misses": {}}\'\n'
    )
    loader.chmod(0o755)
    (d / "aqmlab_dctcp.bpf.o").write_bytes(b"")
    monkeypatch.setenv("AQMLAB_BPF_DIR", str(d))
    yield argv


def test_registration_renames_a_users_cc_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_loader: Path) -> None:
    obj = tmp_path / "mine.bpf.o"
    obj.write_bytes(b"")
    user = B.user_cc("mine", obj, "mine.bpf.c")
    assert user.renamed and user.obj_path() == obj.resolve()
    port = B.BPF_CCS["dctcp"]
    assert not port.renamed and port.obj_path() == B.bpf_dir() / "aqmlab_dctcp.bpf.o"
    listed: list[str] = []
    monkeypatch.setattr(B, "registered", lambda: listed)
    for b, expect in ((user, ["--name", user.kernel_name, str(obj.resolve())]), (port, [str(B.bpf_dir() / "aqmlab_dctcp.bpf.o")])):
        reg = B.Registration(b, tmp_path / f"{b.kernel_name}.log")
        listed[:] = [b.kernel_name]  # as the kernel would list it once the loader is ready
        reg.start()
        listed.clear()
        assert reg.stop() == {"recursion_misses": {}}
        assert fake_loader.read_text().splitlines() == expect


def test_a_users_tunables_are_set_on_the_loaders_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_loader: Path) -> None:
    obj = tmp_path / "mine.bpf.o"
    obj.write_bytes(b"")
    user = dataclasses.replace(B.user_cc("mine", obj, "mine.bpf.c"), tunables=(("shift_g", 2), ("on", True)))
    monkeypatch.setattr(B, "registered", lambda: [user.kernel_name])
    reg = B.Registration(user, tmp_path / "r.log")
    reg.start()
    reg.stop()
    # A bool as C's 1.
    assert fake_loader.read_text().splitlines() == ["--name", user.kernel_name, "--set", "shift_g=2", "--set", "on=1", str(obj.resolve())]


DCTCP_SRC = REPO / "bpf" / "aqmlab_dctcp.bpf.c"


def test_each_set_of_tunables_is_a_registration_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from aqmlab.emu import emulate as E
    from aqmlab.scenario import Scenario

    monkeypatch.setenv("AQMLAB_CACHE_DIR", str(tmp_path / "cache"))
    mine = {"plugin": str(DCTCP_SRC)}
    s = Scenario(
        duration="1s",
        bottleneck={"rate": "20Mbps", "buffer": "100pkt"},
        flows=[
            {"cc": mine, "rtt": "10ms", "cc_params": {"dctcp_shift_g": 2}},
            {"cc": mine, "rtt": "20ms", "cc_params": {"dctcp_shift_g": 2}},
            {"cc": mine, "rtt": "30ms", "cc_params": {"dctcp_shift_g": 6}},
            {"cc": mine, "rtt": "40ms"},
            {"cc": "cubic", "rtt": "40ms"},
        ],
    )
    plan = E.cc_plan(s)
    users = {k: p for k, p in plan.items() if p.get("user")}
    # Two classes with the same values share one; other values, and none, get their own.
    assert sorted(json.dumps(p["tunables"]) for p in users.values()) == ['{"dctcp_shift_g": 2}', '{"dctcp_shift_g": 6}', "{}"]
    assert len({p["kernel_name"] for p in users.values()}) == 3
    keys = [E.plan_key(f) for f in s.flows]
    assert keys[0] == keys[1] and len(set(keys[:4])) == 3 and keys[4] == "cubic"


def test_missing_names_a_users_uncompiled_object(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_loader: Path) -> None:
    monkeypatch.setattr(B, "KERNEL_BTF", Path("/"))  # exists: the BTF check passes
    user = B.user_cc("mine", tmp_path / "never-built.bpf.o", "my/mine.bpf.c")
    why = B.missing(user)
    assert why is not None and str(tmp_path / "never-built.bpf.o") in why and "my/mine.bpf.c" in why
    (tmp_path / "never-built.bpf.o").write_bytes(b"")
    monkeypatch.setattr(B, "registered", lambda: ["reno"])
    assert B.missing(user) is None


# ------------------------------------------------------------------------------------------
# With root, BPF and the built loader
# ------------------------------------------------------------------------------------------


def _gone(name: str, timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if name not in B.registered():
            return True
        time.sleep(0.05)
    return False


def _cc(s: socket.socket) -> str:
    return s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()


@pytest.fixture(scope="module")
def reno_obj(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if _WHY_ROOT is not None:
        pytest.skip(f"registers eBPF CCs: {_WHY_ROOT}")
    why = _kernel_build_missing() or (None if B.loader_path().is_file() else f"no {B.loader_path()}")
    if why is not None:
        pytest.fail(f"registers eBPF CCs, which needs what `make build` sets up: {why}")
    out = tmp_path_factory.mktemp("reno") / "reno.bpf.o"
    B.compile_kernel_object(RENO_SRC, out)
    return out


@pytest.mark.emulator
@needs_root_bpf
def test_a_users_cc_registers_twice_at_once_and_carries_tcp(reno_obj: Path, tmp_path: Path) -> None:
    a, b = B.user_cc("reno-file", reno_obj, str(RENO_SRC)), B.user_cc("reno-file", reno_obj, str(RENO_SRC))
    assert a.kernel_name != b.kernel_name
    assert B.missing(a) is None and B.missing(b) is None
    regs = [B.Registration(x, tmp_path / f"{x.kernel_name}.log") for x in (a, b)]
    try:
        # From this thread: a loader dies with the thread that started it (PR_SET_PDEATHSIG).
        for r in regs:
            r.start()
        # Both in the kernel's one list at once, each held by its own loader.
        listed = B.registered()
        assert a.kernel_name in listed and b.kernel_name in listed
        pids = {r.proc.pid for r in regs if r.proc is not None}
        assert len(pids) == 2 and pids <= {pid for pid, _ in B.stale_loaders(include_live=True)}
        assert B.missing(a) is not None and "already registered" in (B.missing(a) or "")

        # A loopback connection: the sender on one registration, the receiver on the other.
        payload = os.urandom(400 * 1024)
        got = bytearray()
        with socket.create_server(("127.0.0.1", 0)) as ls:
            c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, a.kernel_name.encode())
                c.connect(ls.getsockname())
                s, _ = ls.accept()
                with s:
                    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b.kernel_name.encode())
                    assert _cc(c) == a.kernel_name and _cc(s) == b.kernel_name

                    def recv() -> None:
                        while chunk := s.recv(65536):
                            got.extend(chunk)

                    th = threading.Thread(target=recv)
                    th.start()
                    c.sendall(payload)
                    c.shutdown(socket.SHUT_WR)
                    th.join(10)
                    assert not th.is_alive()
            finally:
                c.close()
        assert len(got) == len(payload) and hashlib.sha256(got).digest() == hashlib.sha256(payload).digest()
    finally:
        stats = [r.stop() for r in regs]
    # The loaders' last lines: each registration's programs, none skipped by its trampoline.
    for st in stats:
        assert st["recursion_misses"] == {"reno_ssthresh": 0, "reno_cong_avoid": 0, "reno_undo_cwnd": 0}
    assert _gone(a.kernel_name) and _gone(b.kernel_name)
    assert not pids & {pid for pid, _ in B.stale_loaders(include_live=True)}


@pytest.mark.emulator
@needs_root_bpf
def test_a_name_already_registered_is_refused_saying_so(reno_obj: Path, tmp_path: Path) -> None:
    a = B.user_cc("reno-file", reno_obj, str(RENO_SRC))
    first = B.Registration(a, tmp_path / "first.log")
    first.start()
    try:
        # Another run that drew the same name: the kernel keeps the first, the loader says why.
        second = B.Registration(dataclasses.replace(a), tmp_path / "second.log")
        with pytest.raises(RuntimeError) as e:
            second.start()
        assert f'a congestion control named "{a.kernel_name}" is already registered' in str(e.value)
        assert second.proc is None and a.kernel_name in B.registered()
    finally:
        first.stop()
    assert _gone(a.kernel_name)


def _rodata(pid: int) -> dict[str, int]:
    """The .rodata map held by process `pid`, as the kernel holds it (bpftool's BTF dump)."""
    # The maps it holds: its descriptors' map_id (kernel/bpf/syscall.c bpf_map_show_fdinfo).
    held = set()
    for fd in Path(f"/proc/{pid}/fdinfo").iterdir():
        m = re.search(r"^map_id:\s*(\d+)$", fd.read_text(), flags=re.M)
        if m:
            held.add(int(m.group(1)))
    maps = json.loads(subprocess.run(["bpftool", "-j", "map", "show"], capture_output=True, text=True, check=True).stdout)
    mine = [m for m in maps if m["id"] in held and m.get("name", "").endswith(".rodata")]
    assert len(mine) == 1, (held, maps)
    dump = json.loads(subprocess.run(["bpftool", "-j", "map", "dump", "id", str(mine[0]["id"])], capture_output=True, text=True, check=True).stdout)
    values: dict[str, int] = {}
    for var in dump[0]["formatted"]["value"][".rodata"]:
        values.update(var)
    return values


@pytest.mark.emulator
@needs_root_bpf
def test_tunables_reach_the_kernels_copy_of_the_cc(tmp_path: Path) -> None:
    if shutil.which("bpftool") is None:
        pytest.fail("no bpftool, which `make deps` installs")
    obj = tmp_path / "dctcp.bpf.o"
    B.compile_kernel_object(DCTCP_SRC, obj)
    user = dataclasses.replace(B.user_cc("mine", obj, str(DCTCP_SRC)), tunables=(("dctcp_shift_g", 2), ("dctcp_alpha_on_init", 512)))
    reg = B.Registration(user, tmp_path / "r.log")
    reg.start()
    try:
        assert reg.proc is not None
        assert _rodata(reg.proc.pid) == {"dctcp_shift_g": 2, "dctcp_alpha_on_init": 512}
    finally:
        reg.stop()
    assert _gone(user.kernel_name)
    # Without values, the initializers (tcp_dctcp.c's defaults).
    reg = B.Registration(B.user_cc("mine", obj, str(DCTCP_SRC)), tmp_path / "d.log")
    reg.start()
    try:
        assert reg.proc is not None and _rodata(reg.proc.pid) == {"dctcp_shift_g": 4, "dctcp_alpha_on_init": 1024}
    finally:
        reg.stop()
    # A value its type does not hold, or a name the object lacks: the loader says which.
    for bad, words in (
        (("dctcp_shift_g", -1), "--set dctcp_shift_g=-1: not a value of its 4-byte unsigned type"),
        (("shift_g", 2), "--set shift_g: no such global"),
    ):
        user = dataclasses.replace(B.user_cc("mine", obj, str(DCTCP_SRC)), tunables=(bad,))
        with pytest.raises(RuntimeError, match=re.escape(words)):
            B.Registration(user, tmp_path / "bad.log").start()
        assert _gone(user.kernel_name)


# ------------------------------------------------------------------------------------------
# Through `aqmlab emulate`: a scenario's `cc = { plugin = ... }`
# ------------------------------------------------------------------------------------------

USER_VS_KERNEL_RENO = """name = "user-reno"
duration = "8s"
warmup = "2s"
seed = 1
[bottleneck]
rate = "40Mbps"
buffer = "1bdp"
rtt_ref = "20ms"
aqm = {{ kind = "taildrop" }}
[[flows]]
cc = {{ plugin = "{src}" }}
count = 2
rtt = "20ms"
[[flows]]
cc = "reno"
count = 2
rtt = "20ms"
"""


@pytest.mark.emulator
@needs_root_bpf
def test_emulate_runs_a_users_cc_file_beside_the_kernels_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from _testbed import testbed_missing

    from aqmlab.emu import emulate as E

    why = testbed_missing()
    if why is not None:
        pytest.skip(why)
    monkeypatch.setenv("AQMLAB_CACHE_DIR", str(tmp_path / "cache"))
    scen = tmp_path / "s.toml"
    scen.write_text(USER_VS_KERNEL_RENO.format(src=RENO_SRC))
    res = E.emulate(scen, tmp_path / "out")
    user = next(p for p in res.summary["emu"]["cc"].values() if p.get("user"))
    # Registered for the run under a name of its own, built from the file the scenario names.
    assert user["implementation"] == "bpf" and user["kernel_name"].startswith("aqmlab_p") and user["label"] == "aqmlab_reno"
    assert user["source"].endswith(".bpf.c") and "recursion_misses" in user["stats"]
    assert _gone(user["kernel_name"])
    # The file is made of the kernel's own Reno functions (tcp_cong.c), so its two flows and
    # the kernel Reno's two share the link as four Reno flows of one RTT do: each class near
    # half. The band (0.35-0.65 of the goodput) is wide because 6 s is a few dozen Reno
    # sawteeth at 40 Mbit/s and 20 ms.
    classes = {c["name"]: c for c in res.summary["classes"]}
    share = classes["aqmlab_reno-20ms"]["goodput_bps"] / sum(c["goodput_bps"] for c in classes.values())
    print(json.dumps({"user_reno_share": share, "utilization": res.summary["metrics"]["utilization"], "kernel_name": user["kernel_name"]}))
    assert 0.35 < share < 0.65, (share, classes)
    assert res.summary["metrics"]["utilization"] > 0.85


def test_a_users_cc_that_does_not_build_for_the_kernel_is_refused_before_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from aqmlab.emu import emulate as E
    from aqmlab.scenario import ScenarioError, load_scenario

    # preflight refuses a run without root before it looks at the classes.
    if _WHY_ROOT is not None:
        pytest.skip(f"preflight: {_WHY_ROOT}")
    if _kernel_build_missing() is not None or not B.loader_path().is_file():
        pytest.fail("preflight builds the file for the kernel: `make build` sets up clang, vmlinux.h and the loader")
    monkeypatch.setenv("AQMLAB_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "wasm_only.bpf.c"
    src.write_text(RENO_SRC.read_text().replace('#include "vmlinux.h"', '#include "vmlinux.h"\n#ifndef __wasm32__\n#error "no kernel side"\n#endif'))
    scen = tmp_path / "s.toml"
    scen.write_text(USER_VS_KERNEL_RENO.format(src=src))
    s = load_scenario(scen)  # the simulator's side builds
    with pytest.raises(ScenarioError) as e:
        E.preflight(s, router=False)
    msg = str(e.value)
    assert msg.startswith("flows[0].cc: ") and "wasm_only.bpf.c" in msg and "no kernel side" in msg, msg
