"""Run a command; print its wall time and the CPU time of every process it started, its
grandchildren too (a report's forkserver and drawing workers, which the command does not wait
for): this process makes itself their subreaper (Linux's PR_SET_CHILD_SUBREAPER), so that
orphans are reparented to it and reaped here, their times counted in RUSAGE_CHILDREN.

    python3 bench/cpu_every_process.py python3 -m aqmlab report DIR -o /tmp/r/report.html
"""

from __future__ import annotations

import ctypes
import os
import resource
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit(f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}")
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.execvp(sys.argv[1], sys.argv[1:])
    os.waitpid(pid, 0)
    wall = time.perf_counter() - start
    # The command has ended; what it left running ends in turn (a forkserver once its parent's
    # end closes its pipe) and is reaped here.
    while True:
        try:
            os.wait()
        except ChildProcessError:
            break
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"wall {wall:.2f} s  cpu {r.ru_utime + r.ru_stime:.2f} s (every process)  load {os.getloadavg()[0]:.2f}", file=sys.stderr)


if __name__ == "__main__":
    main()
