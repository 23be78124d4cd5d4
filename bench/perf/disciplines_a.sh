#!/usr/bin/env bash
# Scenario (a) with each discipline against TailDrop (the budget: ≤ 1.25× TailDrop).
#
#   bench/perf/disciplines_a.sh wall ROUNDS KIND...    # CPU time, rounds alternating all kinds
#   bench/perf/disciplines_a.sh model KIND...          # callgrind with cache and branch models
#
# wall: every round runs TailDrop twice and each KIND once (`bench a KIND`, packets per CPU
# second of the simulating thread), in an order shuffled per round (a fixed order gave the
# first run of a round an advantage); prints per kind the best (highest) of the rounds, the
# ratio of TailDrop's best to it, and the median of the per-round ratios. The second TailDrop
# run ("control") is the noise floor: its median ratio should be 1. On a shared VM single runs
# vary by ±20 %; the best of many is the least disturbed estimate of each.
#
# model: valgrind's callgrind with --cache-sim and --branch-sim (deterministic, independent of
# machine load); prints instructions and the cycle estimate of valgrind's documentation,
# CEst = Ir + 10·(branch mispredictions) + 10·(L1 misses) + 100·(last-level misses), as a ratio
# to TailDrop's. The model has no hardware prefetcher and no latency of dependent
# floating-point chains, so it is a lower bound of the wall ratio, not a substitute for it.
#
# Build first: cargo build --release -p sim --example bench
set -euo pipefail
bin=${BENCH:-target/release/examples/bench}
mode=$1
shift
case $mode in
wall)
    rounds=$1
    shift
    out=$(mktemp)
    for r in $(seq "$rounds"); do
        for k in $(printf '%s\n' taildrop control "$@" | shuf --random-source=<(yes "$r")); do
            pps=$("$bin" a "${k/control/taildrop}" | sed -E 's/.* pkts_per_cpu_s=([0-9]+).*/\1/')
            echo "$r $k $pps" >>"$out"
        done
    done
    python3 - "$out" "$@" <<'EOF'
import collections, statistics as st, sys
v = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    r, k, pps = line.split()
    v[k][r] = int(pps)
td = v["taildrop"]
print(f"{'discipline':10} {'best Mpkt/CPU s':>16} {'best vs TailDrop':>17} {'median of round ratios':>23}")
for k in ["taildrop", "control"] + sys.argv[2:]:
    best = max(v[k].values())
    med = st.median(td[r] / v[k][r] for r in v[k])
    print(f"{k:10} {best / 1e6:16.3f} {max(td.values()) / best:17.3f} {med:23.3f}")
EOF
    ;;
model)
    declare -A est ir
    for k in taildrop "$@"; do
        log=$(mktemp)
        valgrind --tool=callgrind --cache-sim=yes --branch-sim=yes --callgrind-out-file=/dev/null "$bin" a "$k" >/dev/null 2>"$log"
        # Collected : Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw Bc Bcm Bi Bim
        read -r -a c <<<"$(sed -nE 's/.*Collected : (.*)/\1/p' "$log")"
        ir[$k]=${c[0]}
        est[$k]=$((c[0] + 10 * (c[10] + c[12]) + 10 * (c[3] + c[4] + c[5]) + 100 * (c[6] + c[7] + c[8])))
        rm -f "$log"
    done
    printf '%-10s %14s %9s %14s %9s\n' discipline instructions ratio CEst ratio
    for k in taildrop "$@"; do
        printf '%-10s %14d %9s %14d %9s\n' "$k" "${ir[$k]}" "$(python3 -c "print(f'{${ir[$k]}/${ir[taildrop]}:.3f}')")" \
            "${est[$k]}" "$(python3 -c "print(f'{${est[$k]}/${est[taildrop]}:.3f}')")"
    done
    ;;
*)
    echo "usage: $0 wall ROUNDS KIND... | model KIND..." >&2
    exit 2
    ;;
esac
