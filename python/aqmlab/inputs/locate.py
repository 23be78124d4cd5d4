"""Find the line of a dotted key (``flows[1].rtt``, ``bottleneck.aqm.burst``) in TOML text.

tomllib keeps no positions, so this walks the text: ``[table]`` and ``[[array]]`` headers
(counting array entries), ``key = value`` lines, and inline tables (``aqm = { kind = ... }``
maps every key inside to that line). If the exact key is not found, the nearest enclosing
table's line is returned; ``None`` if nothing matches.
"""

from __future__ import annotations

import re

_HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-\" ]+?)\s*(\]\]?)\s*(#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-\"]+(?:\s*\.\s*[A-Za-z0-9_\-\"]+)*)\s*=")

_PATH_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def split_path(path: str) -> list[str | int]:
    """``flows[1].cc_params.beta`` → ["flows", 1, "cc_params", "beta"]."""
    out: list[str | int] = []
    for name, idx in _PATH_PART.findall(path):
        out.append(int(idx) if idx else name)
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
            parts = tuple(p.strip().strip('"') for p in m.group(2).split("."))
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
            key = tuple(p.strip().strip('"') for p in k.group(1).split("."))
            path = table + key
            where.setdefault(path, lineno)
            # Inline table: every key inside maps to this line.
            rest = line[k.end():]
            if "{" in rest:
                for inner in re.findall(r"([A-Za-z0-9_\-]+)\s*=", rest):
                    where.setdefault(path + (inner,), lineno)
    return where


def locate(text: str, path: str | list[str | int] | tuple[str | int, ...]) -> int | None:
    parts = tuple(split_path(path) if isinstance(path, str) else path)
    where = _index_lines(text)
    while parts:
        if parts in where:
            return where[parts]
        parts = parts[:-1]
    return None
