"""`aqmlab report`: the HTML page of a run, sweep, compare or harm directory."""

from pathlib import Path
from typing import Annotated

import typer

from aqmlab.cli.common import fail, out

NOT_A_REPORT_DIR = (
    "not a run directory (no summary.json), a sweep directory (no index.parquet), a harm directory (no harm.json) nor a compare directory (no compare.json)"
)


def report(
    directories: Annotated[
        list[Path], typer.Argument(help="A run directory, a sweep directory, an `aqmlab compare` directory, or one or more `aqmlab harm` directories")
    ],
    output: Annotated[Path | None, typer.Option("-o", "--output", help="HTML file (default DIR/report.html)")] = None,
) -> None:
    """Write a static HTML report (figures as PNG and SVG beside it) for a run, sweep, compare or harm directories."""
    from aqmlab.report.compare import is_compare_dir, write_compare_report
    from aqmlab.report.run import RunDirError, write_run_report
    from aqmlab.report.study import is_harm_dir, write_harm_report, write_report

    directory = directories[0]
    for d in directories:
        if not d.is_dir():
            fail(ValueError(f"{d}: no such directory"))
    if len(directories) == 1 and is_compare_dir(directory):
        html = write_compare_report(directory, output or directory / "report.html")
    elif len(directories) == 1 and (directory / "summary.json").is_file():
        try:
            html = write_run_report(directory, output or directory / "report.html")
        except RunDirError as e:  # a table missing
            fail(e)
    elif all(is_harm_dir(d) for d in directories):
        html = write_harm_report(directories, output or directory / "report.html")
    elif len(directories) > 1:
        fail(
            ValueError(
                f"{', '.join(str(d) for d in directories if not is_harm_dir(d))}: not a harm directory (no harm.json); several directories make one harm report"
            )
        )
    elif (directory / "index.parquet").is_file():
        html = write_report(directory, output or directory / "report.html")
    else:
        fail(ValueError(f"{directory}: {NOT_A_REPORT_DIR}"))
    out.print(f"report: {html.resolve()}", highlight=False, soft_wrap=True)
