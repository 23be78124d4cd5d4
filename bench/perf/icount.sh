#!/usr/bin/env bash
# Instructions executed (valgrind callgrind's Ir) by `runcfg` on engine configs: a speed
# figure that does not depend on what else the machine runs, for comparing builds before and
# after a change (wall-clock time on a shared machine is too noisy for a few-% effect).
#
#   bench/perf/icount.sh RUNCFG SECS CONFIG.json...      # SECS: simulated seconds (0 = as is)
#
# Prints one line per config: Ir, bottleneck packets, Ir per packet. Keeps each profile as
# /tmp/icount.<config name>.out for `callgrind_annotate`.
set -euo pipefail
bin=$1 secs=$2
shift 2
for cfg in "$@"; do
    name=$(basename "$cfg" .json)
    out=/tmp/icount.$name.out
    args=("$cfg")
    [[ $secs != 0 ]] && args+=("$secs")
    line=$(NODIGEST=1 valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" "${args[@]}" 2>"$out.log")
    ir=$(grep -E '^summary:|^totals:' "$out" | head -1 | awk '{print $2}')
    pkts=$(sed -E 's/.*bottleneck_pkts=([0-9]+).*/\1/' <<<"$line")
    printf '%-40s Ir=%-14s pkts=%-10s Ir/pkt=%.0f\n' "$name" "$ir" "$pkts" "$(bc -l <<<"$ir/$pkts")"
done
