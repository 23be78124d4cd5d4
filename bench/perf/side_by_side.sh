#!/usr/bin/env bash
# Two builds of the `bench` example side by side: for each round, every scenario runs once
# with the old build and once with the new, alternating, so both see the same machine load.
# Prints the median packets per wall second of each and the new/old speed-up, and the median
# (over rounds) of the per-round d-vs-bulk ratios of each build.
#
#   bench/perf/side_by_side.sh OLD_BENCH NEW_BENCH [ROUNDS=5]
#
# Old build: `git worktree add /tmp/perf-base <commit>` and
# `(cd /tmp/perf-base && CARGO_TARGET_DIR=/tmp/perf-base-target cargo build --release -p sim --example bench)`.
set -euo pipefail
old=$1 new=$2 rounds=${3:-5}
scenarios=("a" "c bbr2" "c cubic" "d" "d bulk")
out=$(mktemp)
for r in $(seq "$rounds"); do
    for s in "${scenarios[@]}"; do
        for b in old new; do
            bin=$old
            [[ $b == new ]] && bin=$new
            # shellcheck disable=SC2086
            pps=$("$bin" $s | sed -E 's/.* pkts_per_s=([0-9]+).*/\1/')
            echo "$r|$s|$b|$pps" >>"$out"
        done
    done
done
python3 - "$out" <<'EOF'
import statistics as st, sys, collections
rows = [l.strip().split("|") for l in open(sys.argv[1])]
v = collections.defaultdict(list)
per_round = collections.defaultdict(dict)
for r, s, b, pps in rows:
    v[(s, b)].append(float(pps))
    per_round[(r, b)][s] = float(pps)
print(f"{'scenario':10} {'old Mpkt/s (median)':>20} {'new Mpkt/s (median)':>20} {'new/old':>8}   old runs | new runs")
for s in dict.fromkeys(s for _, s, _, _ in rows):
    o, n = st.median(v[(s, 'old')]), st.median(v[(s, 'new')])
    fmt = lambda xs: " ".join(f"{x/1e6:.2f}" for x in xs)
    print(f"{s:10} {o/1e6:20.2f} {n/1e6:20.2f} {n/o:8.2f}   {fmt(v[(s, 'old')])} | {fmt(v[(s, 'new')])}")
for b in ("old", "new"):
    ratios = [d["d bulk"] / d["d"] for (r, bb), d in per_round.items() if bb == b]
    cr = [d["c cubic"] / d["c bbr2"] for (r, bb), d in per_round.items() if bb == b]
    print(f"{b}: d-vs-bulk per-packet slowdown, median of rounds {st.median(ratios):.2f} ({' '.join(f'{x:.2f}' for x in ratios)}); "
          f"c bbr2-vs-cubic {st.median(cr):.2f}")
EOF
rm -f "$out"
