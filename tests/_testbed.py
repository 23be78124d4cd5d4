"""Whether the emulator's testbed can run here, probed once per test process."""

from __future__ import annotations

import functools
import os
import subprocess


@functools.cache
def testbed_missing() -> str | None:
    """Why the testbed cannot run here (None: it can). The probe namespace is named after the
    process: pytest-xdist workers collect every file at once, and a shared name would make one
    worker's probe fail on the other's."""
    if os.geteuid() != 0:
        return "needs root"
    name = f"aqP-probe-{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return None if r.returncode == 0 else f"network namespaces unavailable ({r.stderr.strip()})"
