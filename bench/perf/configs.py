"""Write engine configs (the JSON the simulator runs) for the bit-identity check of
`bench/perf/identical.sh`: the example scenarios, every run of the four studies' --quick
grids, a spread of the fejes2019 1 Gbit/s grid (bench/sweeps/fejes2019-1g-10ms.toml), and the
`bench` scenarios a–d. Long runs are shortened (`--max-secs`, warm-up to at most half), since
what is compared is the simulator's output for the same input before and after a change, not
the study's numbers. Every config has ideal hosts (`host = {offloads: false, ideal: true}`,
the hosts every earlier build modelled), since Linux hosts change results by design; a build
that predates `ideal` (where `offloads: false` meant ideal hosts) reads them without that key
(`identical.sh`, `OLD_WITHOUT_IDEAL=1`), one that predates `[host]` without the host
(`OLD_WITHOUT_HOST=1`). `--linux-hosts` gives them Linux hosts instead (`host = {offloads:
true}`, every knob at its default), for a change to the host model's speed, which must leave
those results bit-identical too.

    python3 bench/perf/configs.py OUTDIR [--max-secs 4] [--grid-every 7] [--linux-hosts]
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

from aqmlab import load_sweep
from aqmlab.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]


def shorten(cfg: dict, max_secs: float) -> dict:
    dur = min(cfg["duration_ns"], int(max_secs * 1e9))
    cfg["duration_ns"] = dur
    cfg["warmup_ns"] = min(cfg["warmup_ns"], dur // 2)
    return cfg


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--max-secs", type=float, default=4.0)
    ap.add_argument("--grid-every", type=int, default=7, help="take every k-th run of the 1 Gbit/s grid")
    ap.add_argument("--bench", type=Path, default=ROOT / "target/release/examples/bench")
    ap.add_argument("--linux-hosts", action="store_true", help="Linux hosts with offloads instead of ideal ones")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    n = 0

    def put(name: str, cfg: dict) -> None:
        nonlocal n
        cfg["host"] = {"offloads": True} if a.linux_hosts else {"offloads": False, "ideal": True}
        (a.out / f"{name}.json").write_text(json.dumps(shorten(cfg, a.max_secs)))
        n += 1

    for f in sorted((ROOT / "examples").glob("*.toml")):
        put(f"example-{f.stem}", load_scenario(f).engine_config())
    for study in ("ckcd", "dualq", "fejes2019", "fejes2020"):
        for i, r in enumerate(load_sweep(ROOT / f"python/aqmlab/studies/{study}.toml", quick=True).runs()):
            put(f"{study}-quick-{i:03d}", r.scenario.engine_config())
    for i, r in enumerate(load_sweep(ROOT / "bench/sweeps/fejes2019-1g-10ms.toml").runs()):
        if i % a.grid_every == 0 or r.params["N"] == 100 and r.params["f"] == 1:
            put(f"grid-{i:03d}", r.scenario.engine_config())
    for args in (
        ["a"],
        ["a", "fq_codel"],
        ["a", "fq_pie"],
        ["a", "ckcd"],
        ["a", "choke"],
        ["a", "dualpi2"],
        ["a", "ppv"],
        ["a", "csaqm"],
        ["b"],
        ["c"],
        ["c", "bbr"],
        ["c", "bbr3"],
        ["c", "prague"],
        ["d"],
        ["d", "bulk"],
    ):
        text = subprocess.run([str(a.bench), *args, "--config"], check=True, capture_output=True, text=True).stdout
        put("bench-" + "-".join(args), json.loads(text))
    print(f"{n} configs in {a.out}")


if __name__ == "__main__":
    main()
