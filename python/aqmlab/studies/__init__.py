"""The seed studies as sweep files, one per paper (README.md §The seed studies).
`aqmlab reproduce NAME` runs one."""

from __future__ import annotations

from pathlib import Path

__all__ = ["STUDIES", "study_path"]

_DIR = Path(__file__).parent

#: name → (the paper it reproduces, one-line description)
STUDIES = {
    "ckcd": ("Liu et al. (CKCD)", "CKCD vs TailDrop/RED/CoDel/CHOKe: BBR, CUBIC and Reno sharing 100 Mbps with an 80-packet buffer"),
    "dualq": (
        "De Schepper et al. (DualQ)",
        "DualPI2 vs RED/PIE/FQ-CoDel: every mix of 0–10 DCTCP and 0–10 Cubic flows at 40 Mbps, 7 ms, and short flows arriving beside them",
    ),
    "fejes2019": ("Fejes et al. 2019", "CUBIC and BBRv2 over TailDrop/PIE/GSP/PPV: buffer factor × N × C × RTT"),
    "fejes2020": ("Fejes et al. 2020", "DCTCP and BBRv2 (ECN) over STEP/PI2/CSAQM: K × N × C × RTT"),
    "l4s": (
        "RFC 9330–9332 (L4S)",
        "TCP Prague beside CUBIC (ECN) through DualPI2, single-queue Classic-ECN AQMs, FQ-CoDel and TailDrop at 5, 20 and 80 ms, and two Prague flows at two RTTs",
    ),
}


def study_path(name: str) -> Path:
    if name not in STUDIES:
        raise KeyError(f"unknown study {name!r} (studies: {', '.join(STUDIES)})")
    return _DIR / f"{name}.toml"
