#!/usr/bin/env bash
# Estimate the full fejes2019 1 Gbit/s grid's wall time (bench/sweeps/fejes2019-1g-10ms.toml,
# 288 runs of 180 s) from a shortened sample of its points, run by two `runcfg` builds side by
# side (old, new, old, new, ... on one core), without running the 21-minute grid itself:
#
#   bench/perf/grid_estimate.sh OLD_RUNCFG NEW_RUNCFG [SECS=6] [EVERY=5] [OLD_GRID_S=1267] [ROUNDS=3]
#
# Every EVERY-th point (EVERY coprime with the 12 AQM × mix combinations of one (N, f), so the
# sample spans all of them) is run for SECS simulated seconds by each build, ROUNDS times
# alternating; a point's time is its least CPU time (`cpu_s`, which leaves out waiting for a
# core; the least of a few rounds leaves out most other interference). Prints per-point
# times and the ratio of the sums, and scales OLD_GRID_S (the measured wall time of the
# full grid with the old build; 1267 s on 2026-11-23) by that ratio. The scaling assumes the
# per-point cost ratio of the first SECS seconds holds for 180 s, and that the sweep's fixed
# costs (Python, storing results: ≈ 13 ms per run, bench/README.md §Sweeps) stay small.
set -euo pipefail
old=$1 new=$2 secs=${3:-6} every=${4:-5} old_grid=${5:-1267} rounds=${6:-3}
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d)
python3 - "$root" "$dir" "$every" <<'EOF'
import json, sys
from pathlib import Path
from aqmlab import load_sweep
root, out, every = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
def strip_nulls(x):
    # Absent and null mean the same to the engine (serde: a missing Option is None; a list of
    # only nulls, e.g. marker.class_curves, is a default too); leaving them out lets an older
    # build, which refuses fields it does not know, read the config.
    if isinstance(x, dict):
        return {k: strip_nulls(v) for k, v in x.items() if v is not None and not (isinstance(v, list) and v and all(e is None for e in v))}
    return [strip_nulls(v) for v in x] if isinstance(x, list) else x
for i, r in enumerate(load_sweep(root / "bench/sweeps/fejes2019-1g-10ms.toml").runs()):
    if i % every == 0:
        p = r.params
        name = f"{i:03d}_N{p['N']}_f{p['f']}_{p['bottleneck.aqm']}_{p['mix']}"
        (out / f"{name}.json").write_text(json.dumps(strip_nulls(r.scenario.engine_config())))
EOF
cpu() { NODIGEST=1 "$1" "$2" "$secs" | sed -E 's/.* cpu_s=([0-9.]+).*/\1/'; }
times=$(mktemp)
for f in "$dir"/*.json; do
    for _ in $(seq "$rounds"); do
        echo "$(basename "$f" .json) $(cpu "$old" "$f") $(cpu "$new" "$f")" >>"$times"
    done
done
python3 - "$times" "$old_grid" <<'EOF'
import collections, sys
best = collections.defaultdict(lambda: [float("inf"), float("inf")])
for line in open(sys.argv[1]):
    name, a, b = line.split()
    best[name] = [min(best[name][0], float(a)), min(best[name][1], float(b))]
print(f"{'point':40} {'old_cpu_s':>9} {'new_cpu_s':>9} {'ratio':>6}")
for name, (a, b) in sorted(best.items()):
    print(f"{name:40} {a:9.3f} {b:9.3f} {b / a:6.3f}")
so, sn = sum(a for a, _ in best.values()), sum(b for _, b in best.values())
g = float(sys.argv[2])
print(f"sum: old {so:.2f} s, new {sn:.2f} s, new/old {sn / so:.3f}; full grid estimate {g:.0f} s x {sn / so:.3f} = {g * sn / so:.0f} s")
EOF
rm -rf "$dir" "$times"
