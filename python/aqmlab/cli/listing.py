"""`aqmlab list ccs` and `aqmlab list aqms`: what this build provides, with parameters,
defaults and sources."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from aqmlab import engine
from aqmlab.cli.common import out
from aqmlab.scenario import Marker

app = typer.Typer(help="List the congestion controls and queue disciplines this build provides.", no_args_is_help=True)


@app.command("ccs")
def ccs() -> None:
    """Congestion controls, their tunables (`cc_params`) with Linux's defaults, and sources."""
    t = Table(title="congestion controls (set tunables per flow class with cc_params = { ... })", title_justify="left")
    for col in ("cc", "parameters (defaults)", "source"):
        t.add_column(col)
    for cc in engine.describe_ccs():
        params = ", ".join(f"{k} = {str(v).lower() if isinstance(v, bool) else v}" for k, v in cc["params"].items()) or "–"
        t.add_row(cc["name"], params, cc["source"])
    out.print(t)


def _default(o: dict[str, Any]) -> str:
    if o["required"]:
        return "required"
    d = o["default"]
    return "–" if d is None else str(d).lower() if isinstance(d, bool) else str(d)


def _unit(o: dict[str, Any]) -> str:
    return " | ".join(f'"{c}"' for c in o["choices"]) if o["unit"] == "choice" else o["unit"]


def option_table(about: dict[str, Any]) -> str:
    """A discipline's options as a Markdown table (docs/scenario.md holds one per discipline;
    tests/test_aqm_options.py checks that they are these)."""
    if not about["options"]:
        return "No options."
    rows = ["| option | unit | default | range | meaning | source |", "|---|---|---|---|---|---|"]
    for o in about["options"]:
        cells = [
            f"`{o['name']}`",
            _unit(o).replace("|", "\\|"),
            f"`{_default(o)}`" if _default(o) not in ("–", "required") else _default(o),
            o["range_text"],
            o["doc"],
            o["source"],
        ]
        rows.append("| " + " | ".join(cells) + " |")
    if about["one_of"]:
        rows.append("")
        rows.append("Exactly one of " + "; ".join(" or ".join(f"`{k}`" for k in g) for g in about["one_of"]) + ".")
    return "\n".join(rows)


@app.command("aqms")
def aqms(markdown: bool = typer.Option(False, "--markdown", help="Print each discipline's option table in Markdown (as docs/scenario.md has them).")) -> None:
    """Queue disciplines and their options (unit, default, range, source), from the engine."""
    from aqmlab.engine import describe_aqms

    if markdown:
        for kind, about in describe_aqms().items():
            print(f"<!-- options:{kind} -->\n{option_table(about)}\n<!-- /options -->\n")
        return
    t = Table(title="queue disciplines (aqm = { kind = ..., option = ... }; '–' = unset: derived as the source does)", title_justify="left")
    for col in ("kind", "option", "unit", "default", "range", "source"):
        t.add_column(col)
    for kind, about in describe_aqms().items():
        t.add_row(kind, "", "", "", "", about["source"], end_section=not about["options"])
        for i, o in enumerate(about["options"]):
            t.add_row("", o["name"], _unit(o), _default(o), o["range_text"], o["source"], end_section=i == len(about["options"]) - 1)
    out.print(t)
    m = Marker.model_fields
    out.print(
        "packet values for "
        + " and ".join(k for k, a in describe_aqms().items() if a["reads_packet_values"])
        + ": [marker] "
        + ", ".join(f"{k} = {m[k].get_default(call_default_factory=True) or '{}'}" for k in ("tvf", "weights", "rate_window"))
        + f" ({Marker.SOURCE})",
        markup=False,
        highlight=False,
    )


@app.command("studies")
def studies() -> None:
    """The seed studies `aqmlab reproduce` runs, with their run counts (full and --quick)."""
    from aqmlab.studies import STUDIES, study_path
    from aqmlab.sweep.spec import load_sweep

    t = Table(title="seed studies (aqmlab reproduce NAME [--quick])", title_justify="left")
    for col in ("study", "paper", "runs", "quick runs", "what"):
        t.add_column(col, justify="right" if "runs" in col else "left")
    for name, (paper, what) in STUDIES.items():
        full = load_sweep(study_path(name)).size()
        quick = load_sweep(study_path(name), quick=True).size()
        t.add_row(name, paper, str(full), str(quick), what)
    out.print(t)
