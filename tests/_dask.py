"""What the tests that start a real Dask scheduler and workers share (tests/test_dask.py,
tests/test_search_cluster.py): the `dask` command and a free local port to run it on."""

from __future__ import annotations

import shutil
import socket
import time

#: The `dask` command (`make test` installs distributed), None without it.
DASK = shutil.which("dask")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_port(port: int, timeout: float = 60) -> None:
    """Return once something listens on `port` (the scheduler is up)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on {port}")
