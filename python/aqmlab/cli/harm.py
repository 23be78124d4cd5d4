"""`aqmlab harm`: the harm each class of a scenario suffers against its solo baseline."""

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from aqmlab.cli.common import fail, out
from aqmlab.inputs.errors import ScenarioError


def harm_cmd(
    file: Annotated[Path, typer.Argument(help="Scenario TOML file with two or more flow classes")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Directory for the runs and harm.json (reused on a second call)")],
) -> None:
    """Harm (Ware et al., HotNets 2019) each class suffers, against its solo baseline."""
    from aqmlab.analysis.harm import harm  # start-up time: runs and their tables load pandas and pyarrow
    from aqmlab.scenario import load_scenario  # start-up time: the scenario model loads pydantic

    try:
        s = load_scenario(file)
    except ScenarioError as e:
        fail(e)
        raise
    if len([f for f in s.flows if f.cc != "cbr"]) < 2:
        fail(ScenarioError("harm needs at least two TCP flow classes", file=str(file), key="flows"))
    df, ran = harm(s, output)
    t = Table(title=f"harm in {s.name} (vs each class's solo baseline; {ran} run(s) simulated, the rest reused)", title_justify="left")
    for col in ("class", "goodput", "baseline", "throughput harm", "delay", "baseline delay", "delay harm"):
        t.add_column(col, justify="left" if col == "class" else "right")
    for _, r in df.iterrows():
        t.add_row(
            r["class"],
            f"{r['goodput_bps'] / 1e6:.1f} Mbps",
            f"{r['baseline_goodput_bps'] / 1e6:.1f} Mbps",
            f"{r['throughput_harm']:+.3f}",
            f"{r['sojourn_mean_ms']:.2f} ms",
            f"{r['baseline_sojourn_mean_ms']:.2f} ms",
            f"{r['delay_harm']:+.3f}",
        )
    out.print(t)
    out.print(f"harm table: {output / 'harm.json'}", highlight=False)
