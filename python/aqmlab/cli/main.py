"""The root `aqmlab` command."""

from __future__ import annotations

import typer

from . import atlas as atlas_cmds
from . import compare as compare_cmds
from . import emulate as emulate_cmds
from . import fidelity as fidelity_cmds
from . import harm as harm_cmds
from . import listing
from . import plot as plot_cmds
from . import plugin as plugin_cmds
from . import report as report_cmds
from . import router as router_cmds
from . import run as run_cmds
from . import search as search_cmds
from . import sweep as sweep_cmds

app = typer.Typer(
    name="aqmlab",
    help="Simulate TCP congestion controls sharing an AQM bottleneck.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("run")(run_cmds.run)
app.command("validate")(run_cmds.validate)
app.command("sweep")(sweep_cmds.sweep)
app.command("reproduce")(sweep_cmds.reproduce)
app.command("report")(report_cmds.report)
app.command("plot")(plot_cmds.plot)
app.command("harm")(harm_cmds.harm_cmd)
app.command("search")(search_cmds.search)
app.command("atlas")(atlas_cmds.atlas)
app.command("emulate")(emulate_cmds.emulate_cmd)
app.command("compare")(compare_cmds.compare)
app.command("fidelity")(fidelity_cmds.fidelity)
app.command("router", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(router_cmds.router)
app.add_typer(listing.app, name="list")
app.add_typer(plugin_cmds.app, name="plugin")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
