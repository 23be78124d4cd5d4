"""`aqmlab router`: the emulator's bottleneck router alone, in the user's own network setup."""

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from aqmlab.cli.common import fail


def router(
    ctx: typer.Context,
    config: Annotated[Path, typer.Option("--config", help="router.json (docs/emulator.md §Router)")],
) -> None:
    """Run the bottleneck router alone (aqmlab-router) inside your own namespace / TUN setup."""
    from aqmlab.emu.emulate import EmulatorError, router_binary  # start-up time: the emulator loads pyarrow and the scenario model

    try:
        binary = router_binary()
    except EmulatorError as e:
        fail(e)
        return
    sys.stdout.flush()
    sys.stderr.flush()
    # Replace this process: signals, stdout ("ready") and the exit status are the router's own.
    os.execv(str(binary), [str(binary), "--config", str(config), *ctx.args])
