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
# The identity set runs ideal hosts (`"host": {"offloads": false, "ideal": true}`).
# `OLD_WITHOUT_IDEAL=1` hands the old binary the configs as `"host": {"offloads": false}`, for a
# build that reads `offloads: false` as the ideal host (one without the `ideal` key);
# `OLD_WITHOUT_HOST=1` hands it the configs without the host, for a build from before `[host]`.
# Exit status 0 when every digest matches, 1 otherwise (the differing configs are listed).
set -euo pipefail
dir=$1 old=$2 new=$3
digests() { # BIN [DIR] -> "name summary tables" per config
    local d=${2:-$dir}
    for f in "$d"/*.json; do
        "$1" "$f" | sed -E 's/.*config=([^ ]*).* summary=([0-9a-f]+) tables=([0-9a-f]+).*/\1 \2 \3/' | sed "s|^$d/||"
    done
}
tmp=$(mktemp -d)
old_dir=$dir
if [[ ${OLD_WITHOUT_HOST:-0} == 1 || ${OLD_WITHOUT_IDEAL:-0} == 1 ]]; then
    old_dir=$tmp/old-configs
    mkdir "$old_dir"
    python3 - "$dir" "$old_dir" "${OLD_WITHOUT_HOST:-0}" <<'EOF'
import json, pathlib, sys
src, dst = map(pathlib.Path, sys.argv[1:3])
ideal = {"offloads": False, "ideal": True}
for f in sorted(src.glob("*.json")):
    cfg = json.loads(f.read_text())
    assert cfg.get("host", ideal) == ideal, f"{f}: only ideal hosts have a meaning in an older build"
    if sys.argv[3] == "1":
        cfg.pop("host", None)
    else:
        cfg["host"] = {"offloads": False}
    (dst / f.name).write_text(json.dumps(cfg))
EOF
fi
if [[ -x $old && ! -d $old && $old != *.txt ]]; then digests "$old" "$old_dir" >"$tmp/old"; else cp "$old" "$tmp/old"; fi
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
