#!/usr/bin/env bash
# Estimate the full fejes2019 1 Gbit/s grid's wall time (bench/sweeps/fejes2019-1g-10ms.toml,
# 288 runs of 180 s) from a shortened sample of its points, run by two `runcfg` builds side by
# side (old, new, old, new, ... on one core), without running the 21-minute grid itself:
#
#   bench/perf/grid_estimate.sh OLD_RUNCFG NEW_RUNCFG [SECS=6] [EVERY=5] [OLD_GRID_S=1267]
#
# Every EVERY-th point (EVERY coprime with the 12 AQM × mix combinations of one (N, f), so the
# sample spans all of them) is run for SECS simulated seconds by each build. Prints per-point
# wall times and the ratio of the sums, and scales OLD_GRID_S (the measured wall time of the
# full grid with the old build; 1267 s on 2026-11-23) by that ratio. The scaling assumes the
# per-point cost ratio of the first SECS seconds holds for 180 s, and that the sweep's fixed
# costs (Python, storing results: ≈ 13 ms per run, bench/README.md §Sweeps) stay small.
set -euo pipefail
old=$1 new=$2 secs=${3:-6} every=${4:-5} old_grid=${5:-1267}
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d)
python3 - "$root" "$dir" "$every" <<'EOF'
import json, sys
from pathlib import Path
from aqmlab import load_sweep
root, out, every = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
for i, r in enumerate(load_sweep(root / "bench/sweeps/fejes2019-1g-10ms.toml").runs()):
    if i % every == 0:
        p = r.params
        name = f"{i:03d}_N{p['N']}_f{p['f']}_{p['bottleneck.aqm']}_{p['mix']}"
        (out / f"{name}.json").write_text(json.dumps(r.scenario.engine_config()))
EOF
wall() { NODIGEST=1 "$1" "$2" "$secs" | sed -E 's/.*wall_s=([0-9.]+).*/\1/'; }
so=0 sn=0
printf '%-40s %8s %8s %6s\n' point old_s new_s ratio
for f in "$dir"/*.json; do
    a=$(wall "$old" "$f")
    b=$(wall "$new" "$f")
    so=$(bc -l <<<"$so + $a") sn=$(bc -l <<<"$sn + $b")
    printf '%-40s %8.3f %8.3f %6.3f\n' "$(basename "$f" .json)" "$a" "$b" "$(bc -l <<<"$b / $a")"
done
r=$(bc -l <<<"$sn / $so")
printf 'sum: old %.2f s, new %.2f s, new/old %.3f; full grid estimate %.0f s x %.3f = %.0f s\n' "$so" "$sn" "$r" "$old_grid" "$r" "$(bc -l <<<"$old_grid * $r")"
rm -rf "$dir"
