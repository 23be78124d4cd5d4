#!/usr/bin/env bash
# Side-by-side speed of aqmlab's simulator and ns-3 on the same benchmark scenario.
#
#   bench/peers/compare.sh [SCENARIO] [ROUNDS] [NS3_DURATION_S]
#
#   SCENARIO        a (default: 1 Gbps, 10 ms, 20 CUBIC, 1-BDP TailDrop, 30 s)
#                   or b (10 Gbps, 5 ms, 100 DCTCP, step marking at K = 1 062 500 B, 10 s)
#   ROUNDS          rounds of (aqmlab, ns-3), run alternately; default 2
#   NS3_DURATION_S  simulated seconds for ns-3; default: the full duration for a (30 s),
#                   2 s for b (ns-3 needs minutes per simulated second there). The metric is
#                   bottleneck packets per wall-clock second, but a shortened ns-3 run is
#                   dominated by the start-up phase, which costs ns-3 far more per packet
#                   (README.md), so a shortened run understates ns-3's steady-state rate.
#
# Installs the pinned ns-3 wheel into bench/peers/.venv (or $NS3_VENV) on first use.
# aqmlab runs twice per round: with ideal hosts (the bench's setting) and with the default
# hosts (Linux's offloads and stalls model, `OFFLOADS=1`). Prints every raw line, then a table
# with the three rates and the ratios aqmlab/ns-3.
set -euo pipefail

NS3_VERSION=3.44.post0
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
scenario=${1:-a}
rounds=${2:-2}
case "$scenario" in
  a) ns3_dur=${3:-30} ;;
  b) ns3_dur=${3:-2} ;;
  *) echo "unknown scenario '$scenario' (a or b)" >&2; exit 2 ;;
esac

venv=${NS3_VENV:-$here/.venv}
if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('ns3') != '$NS3_VERSION')" 2>/dev/null; then
  echo "# installing ns3==$NS3_VERSION into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "ns3==$NS3_VERSION"
fi
py="$venv/bin/python"

echo "# building aqmlab's bench (not timed)" >&2
(cd "$root" && cargo build --release -q -p sim --example bench)

log=$(mktemp)
trap 'rm -f "$log"' EXIT

run_aqmlab() {
  (cd "$root" && cargo run --release -q -p sim --example bench -- "$scenario") | tail -n 1
}
run_aqmlab_default_hosts() {
  (cd "$root" && OFFLOADS=1 cargo run --release -q -p sim --example bench -- "$scenario") | tail -n 1
}
run_ns3() {
  # cppyy prints harmless "Failed to materialize symbols" lines on import; keep stdout only.
  "$py" "$here/ns3_dumbbell.py" --scenario "$scenario" --duration "$ns3_dur" 2>/dev/null | tail -n 1
}

for i in $(seq 1 "$rounds"); do
  line=$(run_aqmlab); echo "round=$i aqmlab $line"; echo "$i aqmlab $line" >>"$log"
  line=$(run_aqmlab_default_hosts); echo "round=$i aqmlab-hosts $line"; echo "$i hosts $line" >>"$log"
  line=$(run_ns3);    echo "round=$i $line";        echo "$i ns3 $line" >>"$log"
done

field() { sed -n "s/.*[[:space:]]$1=\([^[:space:]]*\).*/\1/p"; }

echo
echo "machine: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name:[[:space:]]*//p'), $(uname -sr)"
echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "versions: $(cd "$root" && rustc --version), ns3 $("$py" -c 'import importlib.metadata as m; print(m.version("ns3"))') (PyPI wheel), $("$py" --version)"
echo "scenario $scenario; ns-3 simulated ${ns3_dur} s per run; aqmlab its bench's full duration"
echo "aqmlab: ideal hosts; aqmlab+hosts: the default hosts (OFFLOADS=1)"
echo
printf '%-6s %14s %10s %14s %10s %14s %10s %12s %8s %8s\n' round aqmlab_pkts/s aqm_util aqm+h_pkts/s aqm+h_util ns3_pkts/s ns3_util ns3_wall_s ratio ratio+h
sum_a=0; sum_h=0; sum_n=0
for i in $(seq 1 "$rounds"); do
  a=$(grep "^$i aqmlab " "$log" | field pkts_per_s)
  au=$(grep "^$i aqmlab " "$log" | field utilization)
  h=$(grep "^$i hosts " "$log" | field pkts_per_s)
  hu=$(grep "^$i hosts " "$log" | field utilization)
  n=$(grep "^$i ns3 " "$log" | field pkts_per_s)
  nu=$(grep "^$i ns3 " "$log" | field utilization)
  nw=$(grep "^$i ns3 " "$log" | field wall_s)
  r=$(awk -v a="$a" -v n="$n" 'BEGIN { printf "%.1f", a / n }')
  rh=$(awk -v a="$h" -v n="$n" 'BEGIN { printf "%.1f", a / n }')
  printf '%-6s %14s %10s %14s %10s %14s %10s %12s %8s %8s\n' "$i" "$a" "$au" "$h" "$hu" "$n" "$nu" "$nw" "$r" "$rh"
  sum_a=$(awk -v s="$sum_a" -v x="$a" 'BEGIN { print s + x }')
  sum_h=$(awk -v s="$sum_h" -v x="$h" 'BEGIN { print s + x }')
  sum_n=$(awk -v s="$sum_n" -v x="$n" 'BEGIN { print s + x }')
done
awk -v a="$sum_a" -v h="$sum_h" -v n="$sum_n" -v k="$rounds" \
  'BEGIN { printf "%-6s %14.0f %10s %14.0f %10s %14.0f %10s %12s %8.1f %8.1f\n", "mean", a / k, "", h / k, "", n / k, "", "", a / n, h / n }'
