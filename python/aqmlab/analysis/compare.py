"""The simulator against the emulator on one scenario: the metrics of `aqmlab compare`, side
by side (the same summary keys on both backends, docs/emulator.md)."""

from __future__ import annotations

from typing import Any

__all__ = ["compare_rows"]


def _rows(sim: dict[str, Any], emu: dict[str, Any]) -> list[tuple[str, float | None, float | None, str]]:
    """(label, sim value, emu value, format) per metric: the run's, then each class's."""

    def m(summary: dict[str, Any], *path: str) -> float | None:
        x: Any = summary["metrics"]
        for p in path:
            x = None if x is None else x.get(p)
        return x

    rows: list[tuple[str, float | None, float | None, str]] = [
        ("utilization", m(sim, "utilization"), m(emu, "utilization"), "pct"),
        ("Jain (all flows)", m(sim, "jain"), m(emu, "jain"), "num"),
        ("mean sojourn (ms)", m(sim, "sojourn_ms", "mean"), m(emu, "sojourn_ms", "mean"), "num"),
        ("p99 sojourn (ms)", m(sim, "sojourn_ms", "p99"), m(emu, "sojourn_ms", "p99"), "num"),
        ("mark ratio", m(sim, "mark_ratio"), m(emu, "mark_ratio"), "pct"),
        ("drop ratio", m(sim, "drop_ratio"), m(emu, "drop_ratio"), "pct"),
    ]
    tot_s = sum(c["goodput_bps"] for c in sim["classes"]) or None
    tot_e = sum(c["goodput_bps"] for c in emu["classes"]) or None
    for cs, ce in zip(sim["classes"], emu["classes"]):
        n = cs["name"]
        rows += [
            (f"{n}: goodput share", cs["goodput_bps"] / tot_s if tot_s else None, ce["goodput_bps"] / tot_e if tot_e else None, "pct"),
            (f"{n}: rel. throughput", cs["rel_throughput"], ce["rel_throughput"], "num"),
            (f"{n}: mean sojourn (ms)", cs.get("sojourn_mean_ms"), ce.get("sojourn_mean_ms"), "num"),
            (f"{n}: mark ratio", cs["mark_ratio"], ce["mark_ratio"], "pct"),
            (f"{n}: drop ratio", cs["drop_ratio"], ce["drop_ratio"], "pct"),
        ]
    return rows


def compare_rows(sim: dict[str, Any], emu: dict[str, Any]) -> list[dict[str, Any]]:
    """The side-by-side metrics as records: metric, sim, emu, diff (emu − sim), and the format
    they print in ("pct" or "num")."""
    return [{"metric": k, "sim": a, "emu": b, "diff": None if a is None or b is None else b - a, "format": f} for k, a, b, f in _rows(sim, emu)]
