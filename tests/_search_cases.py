"""What the search and atlas interruption and cluster tests share: a small search, a small
atlas, and how to read a store (tests/test_search_signals.py, tests/test_search_cluster.py;
the atlas also tests/test_atlas.py)."""

from __future__ import annotations

from pathlib import Path

# Two Reno flows against two at r times their RTT over a buffer of b BDPs: 10 points × 2 seeds,
# each run a fraction of a second, so the command is still running when the first runs land.
SEARCH = """\
name = "reno-rtt"
duration = "6s"
warmup = "2s"

[bottleneck]
rate = "10Mbps"
buffer = "${b}bdp"
aqm = { kind = "taildrop" }

[[flows]]
name = "short"
cc = "reno"
count = 2
rtt = "10ms"
start = "uniform(0s, 1s)"

[[flows]]
name = "long"
cc = "reno"
count = 2
rtt = "${10*r}ms"
start = "uniform(0s, 1s)"

[search]
objective = "min jain"
budget = 10
seeds = [1, 2]
batch = 2
[search.space]
b = { low = 0.5, high = 2.0 }
r = { low = 1.0, high = 8.0, log = true }
"""

# One pair under two AQMs, 2 × 2 initial cells, one refinement round: 24 runs, then up to 96.
ATLAS = """\
name = "tiny"
rate = "10Mbps"
rtt = "20ms"
duration = "6s"
warmup = "2s"
seeds = [1]
ccs = ["cubic", "bbr"]
aqms = [{ kind = "taildrop" }, { kind = "fq_codel" }]

[buffer]
low = 0.25
high = 4.0
levels = 2

[ratio]
low = 0.5
high = 2.0
levels = 2

[refine]
threshold = 0.2
rounds = 1
"""


def stored(d: Path) -> dict[str, int]:
    """The complete runs of a store, by hash, with their directory's inode (a run redone is a
    new directory, renamed into place)."""
    runs = d / "runs"
    return {p.name: p.stat().st_ino for p in runs.iterdir() if not p.name.startswith(".")} if runs.is_dir() else {}


def leftovers(d: Path) -> list[str]:
    """Temporary names anywhere in the directory: atomic writes' `.<name>.tmp-*`, a run's
    `.<hash>.tmp-*` or `.<hash>.old-*` (the writer lock `.aqmlab.lock` stays by design)."""
    return [str(p.relative_to(d)) for p in d.rglob("*") if p.name.startswith(".") and p.name != ".aqmlab.lock"]
