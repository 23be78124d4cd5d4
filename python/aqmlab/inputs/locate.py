"""Find the line of a dotted key (``flows[1].rtt``, ``bottleneck.aqm.burst``) in TOML text.

tomllib keeps no positions, so this walks the text: ``[table]`` and ``[[array]]`` headers
(counting array entries), ``key = value`` lines, and inline tables (``aqm = { kind = ... }``
maps every key inside to that line). If the exact key is not found, the nearest enclosing
table's line is returned; ``None`` if nothing matches.
"""

from __future__ import annotations

import re

#: One part of a TOML key: bare, "basic" or 'literal' (a quoted part may hold dots).
_PART = r"""(?:"(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_\-]+)"""
_DOTTED = rf"{_PART}(?:\s*\.\s*{_PART})*"
_HEADER = re.compile(rf"^\s*(\[\[?)\s*({_DOTTED})\s*(\]\]?)\s*(#.*)?$")
_KEY = re.compile(rf"^\s*({_DOTTED})\s*=")
_KEY_PART = re.compile(rf"\s*({_PART})\s*(?:\.|$)")
_INLINE_KEY = re.compile(rf"({_PART})\s*=")

_PATH_PART = re.compile(r""""((?:[^"\\]|\\.)*)"|([^.\[\]"]+)|\[(\d+)\]""")


def _unquote(part: str) -> str:
    if len(part) >= 2 and part[0] == part[-1] == '"':
        return re.sub(r"\\u([0-9a-fA-F]{4})|\\(.)", lambda m: chr(int(m.group(1), 16)) if m.group(1) else m.group(2), part[1:-1])
    if len(part) >= 2 and part[0] == part[-1] == "'":
        return part[1:-1]
    return part.strip()


def _split_key(key: str) -> tuple[str, ...]:
    """A TOML dotted key as written (``sweep."flows.*.count"``) → its parts."""
    return tuple(_unquote(m) for m in _KEY_PART.findall(key))


def split_path(path: str) -> list[str | int]:
    """``flows[1].cc_params.beta`` → ["flows", 1, "cc_params", "beta"]; a quoted part is one
    key (``sweep."flows.*.count"`` → ["sweep", "flows.*.count"])."""
    out: list[str | int] = []
    for quoted, name, idx in _PATH_PART.findall(path):
        out.append(int(idx) if idx else _unquote(f'"{quoted}"') if quoted or not name else name)
    return out


def _index_lines(text: str) -> dict[tuple[str | int, ...], int]:
    """Map every key path the text defines to its 1-based line."""
    where: dict[tuple[str | int, ...], int] = {}
    counts: dict[tuple[str | int, ...], int] = {}
    table: tuple[str | int, ...] = ()
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0] if '"' not in raw else raw
        m = _HEADER.match(line)
        if m and m.group(1) in ("[", "[["):
            parts = _split_key(m.group(2))
            if m.group(1) == "[[":
                n = counts.get(parts, 0)
                counts[parts] = n + 1
                table = parts + (n,)
                where.setdefault(parts, lineno)
            else:
                table = parts
            where[table] = lineno
            continue
        k = _KEY.match(line)
        if k:
            key = _split_key(k.group(1))
            path = table + key
            where.setdefault(path, lineno)
            # Inline table: every key inside maps to this line.
            rest = line[k.end() :]
            if "{" in rest:
                for inner in _INLINE_KEY.findall(rest):
                    where.setdefault(path + (_unquote(inner),), lineno)
    return where


def locate(text: str, path: str | list[str | int] | tuple[str | int, ...]) -> int | None:
    parts = tuple(split_path(path) if isinstance(path, str) else path)
    where = _index_lines(text)
    while parts:
        if parts in where:
            return where[parts]
        parts = parts[:-1]
    return None
