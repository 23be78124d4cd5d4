"""The seed studies as sweep files (DESIGN.md §Studies). `aqmlab reproduce NAME` runs one."""

from __future__ import annotations

from pathlib import Path

__all__ = ["STUDIES", "study_path"]

_DIR = Path(__file__).parent

#: name → (seed, one-line description)
STUDIES = {
    "ckcd": ("001", "CKCD vs TailDrop/RED/CoDel/CHOKe: BBR, CUBIC and Reno sharing 100 Mbps with an 80-packet buffer"),
    "dualq": ("002", "DualPI2 vs RED/PIE/FQ-CoDel: every mix of 0–10 DCTCP and 0–10 Cubic flows at 40 Mbps, 7 ms, and short flows arriving beside them"),
    "fejes2019": ("004", "CUBIC and BBRv2 over TailDrop/PIE/GSP/PPV: buffer factor × N × C × RTT"),
    "fejes2020": ("003", "DCTCP and BBRv2 (ECN) over STEP/PI2/CSAQM: K × N × C × RTT"),
}


def study_path(name: str) -> Path:
    if name not in STUDIES:
        raise KeyError(f"unknown study {name!r} (studies: {', '.join(STUDIES)})")
    return _DIR / f"{name}.toml"
