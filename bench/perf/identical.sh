#!/usr/bin/env bash
# Bit-identity check for performance work: run every engine config of a directory (written by
# bench/perf/configs.py) through `runcfg` binaries and compare their result digests (summary +
# counters, and every table; see crates/sim/examples/runcfg.rs). Any difference is a change of
# results, not an optimisation.
#
#   bench/perf/identical.sh CONFIG_DIR OLD_RUNCFG NEW_RUNCFG
#   bench/perf/identical.sh CONFIG_DIR OLD_DIGESTS.txt NEW_RUNCFG   # reuse a saved run
#
# Old binary: build the base commit in a worktree, e.g.
#   git worktree add /tmp/perf-base <commit> && cp crates/sim/examples/runcfg.rs /tmp/perf-base/crates/sim/examples/
#   (cd /tmp/perf-base && CARGO_TARGET_DIR=/tmp/perf-base-target cargo build --release -p sim --example runcfg)
# Exit status 0 when every digest matches, 1 otherwise (the differing configs are listed).
set -euo pipefail
dir=$1 old=$2 new=$3
digests() { # BIN -> "name summary tables" per config
    for f in "$dir"/*.json; do
        "$1" "$f" | sed -E 's/.*config=([^ ]*).* summary=([0-9a-f]+) tables=([0-9a-f]+).*/\1 \2 \3/' | sed "s|^$dir/||"
    done
}
tmp=$(mktemp -d)
if [[ -x $old && ! -d $old && $old != *.txt ]]; then digests "$old" >"$tmp/old"; else cp "$old" "$tmp/old"; fi
digests "$new" >"$tmp/new"
n=$(wc -l <"$tmp/new")
if diff "$tmp/old" "$tmp/new" >"$tmp/diff"; then
    echo "identical: $n configs"
    cp "$tmp/new" "${DIGESTS_OUT:-/dev/null}"
    exit 0
fi
echo "DIFFERENT ($(grep -c '^>' "$tmp/diff") of $n configs):"
grep '^>' "$tmp/diff" | awk '{print "  " $2}'
exit 1
