"""The run estimate against the run: for each scenario, `aqmlab run` in a child process, one
at a time; its CPU time (user + system) and peak RSS from wait4(2), its wall
time, and the bottleneck packets it carried, beside the estimate (`aqmlab validate`'s).
Prints a Markdown table (bench/README.md §Estimates).

    python3 bench/estimate/accuracy.py bench/estimate/*.toml examples/{dctcp-cubic-step,csaqm-dctcp-cubic,ppv-gold-silver}.toml
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from aqmlab import _native
from aqmlab.scenario import load_scenario
from aqmlab.simulate.estimate import estimate

print(
    "| scenario | packets est. / carried | flows | time-series rows (est.) | wall est. | CPU measured | wall measured | peak memory est. | peak RSS measured |"
)
print("|---|---|---|---|---|---|---|---|---|")
for f in sys.argv[1:]:
    sc = load_scenario(f)
    e = estimate(sc)
    n = _native.estimate(json.dumps(sc.engine_config()))
    out = Path(tempfile.mkdtemp(prefix="aqmlab-est"))
    t0 = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "aqmlab", "run", f, "-o", str(out / "o"), "--quiet"])
    # wait4: this child's own resource use (CPU time, peak RSS in kB).
    _, status, ru = os.wait4(child.pid, 0)
    wall = time.perf_counter() - t0
    assert status == 0, f"{f}: exit status {status}"
    cpu = ru.ru_utime + ru.ru_stime
    carried = json.loads((out / "o" / "summary.json").read_text())["counters"]["bottleneck_pkts"]
    shutil.rmtree(out)
    row = f"| {Path(f).stem} | {n['bottleneck_packets']:,} / {carried:,} | {e.flows:,} | {e.timeseries_rows:,} | {e.wall_s:.2f} s | {cpu:.2f} s | {wall:.2f} s | {e.peak_bytes / 2**20:.0f} MB | {ru.ru_maxrss // 1024} MB |"
    print(row.replace(",", " "), f"load {os.getloadavg()[0]:.1f}" if os.environ.get("SHOW_LOAD") else "", flush=True)
