"""Plugin disciplines' modules (docs/plugins.md): what a scenario's ``module`` names — a C file,
a WebAssembly module, or a module already in the plugin cache by its content hash — resolved
to the module that runs, with what it declares.

Every module a scenario names is kept in the plugin cache under the SHA-256 of its bytes, and
the scenario holds that hash (``module = "sha256:<hex>"``), never the path it was given: the
hash is the module's identity in the scenario hash, and the cache is where a canonical
scenario (a sweep's worker, a report's TOML) finds the bytes again. The cache
(``$AQMLAB_CACHE_DIR/plugins``, else ``$XDG_CACHE_HOME/aqmlab/plugins``, else
``~/.cache/aqmlab/plugins``) holds::

    <sha256 of the module>/<name>.wasm   the module as the engine loads it (its errors name
                                         <name>.wasm: the file the scenario gave, as .wasm)
    builds/<key>                         a C file's build: the sha256 of the module built from
                                         it; the key is the SHA-256 of the source, the ABI
                                         header and the engine build that ran clang (which
                                         fixes clang's arguments), so a source is compiled once
                                         per content, wherever it sits

    cc/<key>/<name>.wasm, <name>.c      a congestion control (a struct_ops BPF C file, `cc =
                                         { plugin = ... }`): the module the simulator runs and
                                         the source the emulator builds the kernel's object
                                         from; the key is the SHA-256 of both (`CcModule`)
    cc/builds/<key>                      a CC source's build, as builds/<key> for a discipline
                                         (the headers are plugins/include/bpfcc)

Files are written atomically (`aqmlab.store.atomic`), so concurrent resolutions (a sweep's
workers) never see half a module. A process resolves each file once (keyed by its path and
status) and each hash once.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import stat
import tempfile
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from aqmlab import engine
from aqmlab.scenario import units as u
from aqmlab.store.atomic import replacing, write_text

__all__ = [
    "CACHE_ENV",
    "CC_HEADERS",
    "CcModule",
    "cc_stem",
    "HEADER",
    "Module",
    "bound_text",
    "cache_dir",
    "default_value",
    "describe",
    "include_dir",
    "range_text",
    "resolve",
    "resolve_cc",
]

#: The environment variable that moves the plugin cache (tests, shared clusters).
CACHE_ENV = "AQMLAB_CACHE_DIR"
#: The ABI header a plugin includes (plugins/include in the repository).
HEADER = "aqmlab_qdisc.h"
#: The directory of include_dir() holding the kernel headers a CC plugin builds against
#: (vmlinux.h and bpf/*.h as the simulator provides them).
CC_HEADERS = "bpfcc"
#: A module named by its content: the form the canonical scenario holds.
_REF = re.compile(r"^sha256:([0-9a-f]{64})$")
_HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Module:
    """A resolved module: the file the engine loads (in the cache), its content hash and what
    it declares (`engine.plugin_info`)."""

    wasm: Path
    sha256: str
    info: dict[str, Any]

    @property
    def ref(self) -> str:
        """How a canonical scenario names it."""
        return f"sha256:{self.sha256}"

    @property
    def name(self) -> str:
        """The name the engine's messages give it."""
        return self.wasm.name


def cache_dir() -> Path:
    """The plugin cache (see the module's docstring)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]) / "plugins"
    base = Path(os.environ["XDG_CACHE_HOME"]) if os.environ.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "aqmlab" / "plugins"


def include_dir() -> Path:
    """The directory holding the ABI header: the repository's plugins/include in a source
    checkout, else the package's include/ (an installed wheel: in the tree it is a symlink
    to plugins/include's header, which the wheel build stores as the file itself)."""
    tree = _HERE.parents[2] / "plugins" / "include"
    return tree if (tree / HEADER).is_file() else _HERE / "include"


# ------------------------------------------------------------------------------------------
# Resolving a scenario's `module`
# ------------------------------------------------------------------------------------------

#: Resolutions in this process, in each cache: by (path, size, mtime, inode) of the file
#: given, and by hash.
_BY_FILE: dict[tuple[Path, str, int, int, int], Module] = {}
_BY_HASH: dict[tuple[Path, str], Module] = {}


def resolve(module: str, base_dir: Path | None = None) -> Module:
    """The module a scenario's `module` names: a ``.c`` file (compiled, once per content), a
    ``.wasm`` file, or ``sha256:<hex>`` (a module in the cache). A relative path is relative
    to `base_dir` (the scenario file's directory), else to the working directory. Raises
    ValueError with one line naming the file and what is wrong."""
    m = _REF.match(module)
    if m:
        return _cached(m.group(1))
    path = ((base_dir if base_dir is not None else Path()) / Path(module).expanduser()).absolute()
    if path.suffix not in (".c", ".wasm"):
        raise ValueError(f"{module!r}: a module is a C file (.c), a WebAssembly module (.wasm) or sha256:<hex> (a module in the plugin cache)")
    try:
        st = path.stat()
    except OSError as e:
        raise ValueError(f"cannot read {path} ({e.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"cannot read {path} (not a file)")
    key = (cache_dir(), str(path), st.st_size, st.st_mtime_ns, st.st_ino)
    if key not in _BY_FILE:
        _BY_FILE[key] = _compiled(path) if path.suffix == ".c" else _stored(_read(path), path)
    mod = _BY_FILE[key]
    # The name this process last gave these bytes is the one its runs' messages use.
    _BY_HASH[cache_dir(), mod.sha256] = mod
    return mod


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise ValueError(f"cannot read {path} ({e.strerror})") from None


def _cached(sha: str) -> Module:
    if (cache_dir(), sha) in _BY_HASH:
        return _BY_HASH[cache_dir(), sha]
    d = cache_dir() / sha
    found = sorted(d.glob("*.wasm")) if d.is_dir() else []
    if not found:
        raise ValueError(f"sha256:{sha[:16]}…: no such module in the plugin cache ({cache_dir()}); name the module's file (.c or .wasm) instead")
    data = _read(found[0])
    if hashlib.sha256(data).hexdigest() != sha:
        raise ValueError(f"{found[0]}: its content is not sha256:{sha[:16]}… (the cache was altered): delete it and name the module's file instead")
    _BY_HASH[cache_dir(), sha] = Module(found[0], sha, _info(found[0]))
    return _BY_HASH[cache_dir(), sha]


def _stored(data: bytes, checked: Path) -> Module:
    """The module `data` in the cache under its hash, as the file `checked` (which holds it) is
    named, once the engine has read what it declares there: a module it refuses is not
    kept."""
    info = _info(checked)
    sha = hashlib.sha256(data).hexdigest()
    target = cache_dir() / sha / checked.name
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        with replacing(target) as tmp:
            tmp.write_bytes(data)
    return Module(target, sha, info)


def _info(wasm: Path) -> dict[str, Any]:
    info = engine.plugin_info(str(wasm))
    for o in info["options"]:
        if o["name"] in ("kind", "module"):
            raise ValueError(f"plugin {wasm.name} refused: it declares an option named {o['name']!r}, a key the scenario's aqm table uses itself")
    return info


@functools.cache
def _build_salt() -> bytes:
    """What a C file's build depends on besides the file and the compiler: the header and the
    engine build (whose crates/plugin fixes clang's arguments)."""
    return hashlib.sha256((include_dir() / HEADER).read_bytes()).digest() + engine.build_id().encode()


def _compiled(source: Path) -> Module:
    """The module built from the C file `source`, from the cache or compiled now."""
    text = _read(source)
    # AQMLAB_CLANG: the compiler the user chose (crates/plugin's find_clang reads it).
    clang = os.environ.get("AQMLAB_CLANG", "").encode()
    key = hashlib.sha256(hashlib.sha256(text).digest() + _build_salt() + hashlib.sha256(clang).digest()).hexdigest()
    pointer = cache_dir() / "builds" / key
    try:
        sha = pointer.read_text(encoding="utf-8").strip()
        if _REF.match(f"sha256:{sha}") and (cache_dir() / sha / f"{source.stem}.wasm").is_file():
            target = cache_dir() / sha / f"{source.stem}.wasm"
            return Module(target, sha, _info(target))
    except OSError:
        pass
    with tempfile.TemporaryDirectory(prefix="aqmlab-plugin-") as tmp:
        out = Path(tmp) / f"{source.stem}.wasm"
        try:
            engine.compile_plugin(str(source), str(out), str(include_dir()))
        except ValueError as e:
            raise ValueError(_clang_error(source, str(e))) from None
        mod = _stored(out.read_bytes(), out)
    # The module first, then the pointer to it: a pointer always names a stored module.
    pointer.parent.mkdir(parents=True, exist_ok=True)
    write_text(pointer, mod.sha256 + "\n")
    return mod


def _clang_error(source: Path, message: str) -> str:
    """clang's failure as one line: the first error it reports, its paths shortened to the
    file's name; a missing toolchain as the engine words it (naming the Debian packages)."""
    lines = message.splitlines()
    if not lines or "failed on" not in lines[0]:
        return lines[0] if lines else f"{source.name}: clang failed"
    errors = [ln.strip() for ln in lines[1:] if "error:" in ln]
    if not errors:
        return f"{source.name} does not compile: {lines[1].strip() if len(lines) > 1 else 'clang failed'}"
    first = errors[0].replace(str(source), source.name)
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{source.name} does not compile: {first}{more}"


# ------------------------------------------------------------------------------------------
# Options in scenario terms: a declared value (ns, bytes, packets, bit/s) as a scenario writes it
# ------------------------------------------------------------------------------------------


def _whole(x: float, what: str) -> int:
    if not float(x).is_integer():
        raise ValueError(f"{x:g} is not a whole number of {what}")
    return int(x)


def scenario_value(unit: str, x: float, choices: list[str] | None = None) -> Any:
    """A value in the unit's terms (what the module receives) as a scenario writes it; a
    choice's index as its string."""
    if unit == "choice":
        return (choices or [])[_whole(x, "choices")]
    if unit in ("time", "delay-target"):
        return u.format_time(_whole(x, "nanoseconds"))
    if unit == "size":
        return u.format_size(u.Quantity(Fraction(_whole(x, "bytes")), "bytes"))
    if unit == "packets":
        return f"{_whole(x, 'packets')}pkt"
    if unit == "rate":
        return u.format_rate(_whole(x, "bit/s"))
    if unit == "int":
        return _whole(x, "units")
    if unit == "bool":
        return x != 0
    return float(x)


def default_value(o: dict[str, Any], module: str) -> Any:
    """An option's default as a scenario writes it (None: unset). A default the scenario format
    cannot write (a fraction of a nanosecond) is the module's error."""
    if o["default"] is None:
        return None
    try:
        return scenario_value(o["unit"], o["default"], o.get("choices"))
    except (ValueError, IndexError) as e:
        raise ValueError(f"plugin {module} refused: option {o['name']!r}: its default {e}") from None


def bound_text(unit: str, x: float) -> str:
    """A bound as a scenario writes it (a bound need not be a whole number: 0.5 ns)."""
    try:
        v = scenario_value(unit, x)
    except ValueError:
        v = f"{x:g}"
    return str(v).lower() if isinstance(v, bool) else str(v)


def range_text(o: dict[str, Any]) -> str:
    """The declared range as `aqmlab list aqms` writes the built-ins' (closed bounds)."""
    lo, hi = o["min"], o["max"]
    if o["unit"] in ("bool", "choice") or (lo is None and hi is None):
        return "–"
    if hi is None:
        return f"≥ {bound_text(o['unit'], lo)}"
    if lo is None:
        return f"≤ {bound_text(o['unit'], hi)}"
    return f"[{bound_text(o['unit'], lo)}, {bound_text(o['unit'], hi)}]"


def describe(module: Module, label: str | None = None) -> dict[str, Any]:
    """The module's declaration in the shape of `engine.describe_aqms()`'s entries (for
    `aqmlab list aqms --plugin` and `aqmlab plugin build`): defaults and ranges in scenario
    terms; an option has no `source` apart from its doc line (which says where it comes
    from)."""
    info = module.info
    return {
        "kind": label or f"plugin {info['kind']}",
        "summary": info["summary"],
        "source": info["source"],
        "one_of": [],
        "reads_packet_values": info["reads_packet_values"],
        "options": [
            {
                "name": o["name"],
                "unit": o["unit"],
                "doc": o["doc"],
                "source": "",
                "default": default_value(o, module.name),
                "required": False,
                "choices": o["choices"] if o["unit"] == "choice" else None,
                "range_text": range_text(o),
            }
            for o in info["options"]
        ],
    }


# ------------------------------------------------------------------------------------------
# Congestion controls: `cc = { plugin = "my_cc.bpf.c" }` (docs/plugins.md, "Your own
# congestion control")
# ------------------------------------------------------------------------------------------

#: What a CC's cache key hashes before its two parts: a key can never equal a discipline's.
_CC_KEY_TAG = b"aqmlab cc plugin: sha256(module), sha256(source)\0"


@dataclass(frozen=True)
class CcModule(Module):
    """A congestion control from a struct_ops BPF C file, resolved: the module the simulator
    loads and the source it was built from (both in the cache, `cc/<sha256>/`), and what the
    module declares (`engine.cc_plugin_info`: name, flags, ops, ecn).

    Its identity, `sha256`, covers both: the module is what the simulator runs (another clang
    builds other bytes: another scenario), the source what the emulator builds the kernel's
    object from (code under `#ifndef __wasm32__` changes the kernel's CC and not the module).
    A canonical scenario names it ``cc = { plugin = "sha256:<hex>" }`` (`ref`).
    """

    source: Path

    @property
    def label(self) -> str:
        """Its readable name: the struct_ops `.name` (what the engine's results call it)."""
        return str(self.info["name"])


def _cc_key(wasm: bytes, source: bytes) -> str:
    return hashlib.sha256(_CC_KEY_TAG + hashlib.sha256(wasm).digest() + hashlib.sha256(source).digest()).hexdigest()


def cc_stem(source: Path) -> str:
    """`reno.bpf.c` → `reno` (the module is `reno.wasm`), `x.c` → `x`."""
    name = source.name
    return name.removesuffix(".bpf.c") if name.endswith(".bpf.c") and name != ".bpf.c" else source.stem


#: CC resolutions in this process, in each cache: by the file given, and by key.
_CC_BY_FILE: dict[tuple[Path, str, int, int, int], CcModule] = {}
_CC_BY_HASH: dict[tuple[Path, str], CcModule] = {}


def resolve_cc(plugin: str, base_dir: Path | None = None) -> CcModule:
    """The congestion control a scenario's ``cc = { plugin = ... }`` names: a C file (a
    struct_ops BPF CC, compiled once per content) or ``sha256:<hex>`` (one in the cache). A
    relative path is relative to `base_dir` (the scenario file's directory), else to the
    working directory. Raises ValueError with one line naming the file and what is wrong."""
    m = _REF.match(plugin)
    if m:
        return _cached_cc(m.group(1))
    path = ((base_dir if base_dir is not None else Path()) / Path(plugin).expanduser()).absolute()
    if path.suffix != ".c":
        # A prebuilt module is not enough: the emulator builds the kernel's object from the source.
        raise ValueError(f"{plugin!r}: a CC plugin is its struct_ops BPF C file (.bpf.c), or sha256:<hex> (one in the plugin cache)")
    try:
        st = path.stat()
    except OSError as e:
        raise ValueError(f"cannot read {path} ({e.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"cannot read {path} (not a file)")
    key = (cache_dir(), str(path), st.st_size, st.st_mtime_ns, st.st_ino)
    if key not in _CC_BY_FILE:
        _CC_BY_FILE[key] = _compiled_cc(path)
    mod = _CC_BY_FILE[key]
    _CC_BY_HASH[cache_dir(), mod.sha256] = mod
    return mod


def _cached_cc(key: str) -> CcModule:
    if (cache_dir(), key) in _CC_BY_HASH:
        return _CC_BY_HASH[cache_dir(), key]
    d = cache_dir() / "cc" / key
    wasms = sorted(d.glob("*.wasm")) if d.is_dir() else []
    sources = sorted(d.glob("*.c")) if d.is_dir() else []
    if not wasms or not sources:
        raise ValueError(f"sha256:{key[:16]}…: no such congestion control in the plugin cache ({cache_dir()}); name its C file instead")
    if _cc_key(_read(wasms[0]), _read(sources[0])) != key:
        raise ValueError(f"{d}: its content is not sha256:{key[:16]}… (the cache was altered): delete it and name the CC's C file instead")
    _CC_BY_HASH[cache_dir(), key] = CcModule(wasms[0], key, engine.cc_plugin_info(str(wasms[0])), sources[0])
    return _CC_BY_HASH[cache_dir(), key]


@functools.cache
def _cc_build_salt() -> bytes:
    """What a CC's build depends on besides the file and the compiler: the simulator's kernel
    headers (every file under bpfcc/) and the engine build (whose crates/plugin fixes clang's
    arguments)."""
    root = include_dir() / CC_HEADERS
    h = hashlib.sha256()
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + hashlib.sha256(f.read_bytes()).digest())
    return h.digest() + engine.build_id().encode()


def _compiled_cc(source: Path) -> CcModule:
    """The CC built from the C file `source`, from the cache or compiled now. The module is
    checked (`engine.cc_plugin_info`) before anything is kept: a refused one leaves no trace."""
    text = _read(source)
    clang = os.environ.get("AQMLAB_CLANG", "").encode()
    build = hashlib.sha256(hashlib.sha256(text).digest() + _cc_build_salt() + hashlib.sha256(clang).digest()).hexdigest()
    pointer = cache_dir() / "cc" / "builds" / build
    try:
        key = pointer.read_text(encoding="utf-8").strip()
        if _REF.match(f"sha256:{key}"):
            return _cached_cc(key)
    except (OSError, ValueError):
        pass  # no build yet, or its entry is gone or altered: build again
    stem = cc_stem(source)
    with tempfile.TemporaryDirectory(prefix="aqmlab-cc-") as tmp:
        out = Path(tmp) / f"{stem}.wasm"
        try:
            engine.compile_cc_plugin(str(source), str(out), str(include_dir()))
        except ValueError as e:
            raise ValueError(_cc_clang_error(source, str(e))) from None
        info = engine.cc_plugin_info(str(out))
        wasm = out.read_bytes()
    key = _cc_key(wasm, text)
    d = cache_dir() / "cc" / key
    d.mkdir(parents=True, exist_ok=True)
    # The source first, then the module, then the pointer: an entry with a module has its source,
    # and a pointer always names a whole entry.
    kept = d / f"{stem}{'.bpf.c' if source.name.endswith('.bpf.c') else '.c'}"
    for target, data in ((kept, text), (d / f"{stem}.wasm", wasm)):
        if not target.is_file():
            with replacing(target) as tmp_path:
                tmp_path.write_bytes(data)
    pointer.parent.mkdir(parents=True, exist_ok=True)
    write_text(pointer, key + "\n")
    return CcModule(d / f"{stem}.wasm", key, info, kept)


_UNDEFINED = re.compile(r"undefined symbol: ([A-Za-z_][A-Za-z0-9_]*)")


def _cc_clang_error(source: Path, message: str) -> str:
    """clang's failure as one line, as `_clang_error`; a link error on a function the
    simulator does not provide names it (wasm-ld: "undefined symbol: f")."""
    m = _UNDEFINED.search(message)
    if m:
        return (
            f"{source.name} does not link: {m.group(1)} is not a helper or kernel function the simulator provides "
            f"(plugins/include/{CC_HEADERS}/bpf/bpf_helpers.h lists them)"
        )
    return _clang_error(source, message)
