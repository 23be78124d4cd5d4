"""`aqmlab list ccs` and `aqmlab list aqms`: what this build provides, with parameters,
defaults and sources."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from .._scenario import _AQM_MODELS, Marker

app = typer.Typer(help="List the congestion controls and queue disciplines this build provides.", no_args_is_help=True)
out = Console()


@app.command("ccs")
def ccs() -> None:
    """Congestion controls, their tunables (`cc_params`) with Linux's defaults, and sources."""
    from .. import _native

    t = Table(title="congestion controls (set tunables per flow class with cc_params = { ... })", title_justify="left")
    for col in ("cc", "parameters (defaults)", "source"):
        t.add_column(col)
    for cc in _native.describe_ccs():
        params = ", ".join(f"{k} = {str(v).lower() if isinstance(v, bool) else v}" for k, v in cc["params"].items()) or "–"
        t.add_row(cc["name"], params, cc["source"])
    out.print(t)


@app.command("aqms")
def aqms() -> None:
    """Queue disciplines, their options with defaults, and sources."""
    from .. import _native

    available = set(_native.qdiscs())
    t = Table(title="queue disciplines (aqm = { kind = ..., option = ... }; '–' = derived as the source does, or unset)", title_justify="left")
    for col in ("kind", "options (defaults)", "source"):
        t.add_column(col)
    for kind, model in _AQM_MODELS.items():
        if kind not in available:
            continue
        opts = []
        for name, field in model.model_fields.items():
            if name == "kind":
                continue
            if field.is_required():
                opts.append(f"{name} (required)")
                continue
            d = field.get_default(call_default_factory=True)
            opts.append(f"{name} = {'–' if d is None else str(d).lower() if isinstance(d, bool) else d}")
        t.add_row(kind, ", ".join(opts) or "–", getattr(model, "SOURCE", ""))
    out.print(t)
    m = Marker.model_fields
    out.print(
        "packet values for ppv and csaqm: [marker] "
        + ", ".join(f"{k} = {m[k].get_default(call_default_factory=True) or '{}'}" for k in ("tvf", "weights", "rate_window"))
        + f" ({Marker.SOURCE})",
        markup=False,
        highlight=False,
    )


@app.command("studies")
def studies() -> None:
    """The seed studies `aqmlab reproduce` runs, with their run counts (full and --quick)."""
    from .._sweep import load_sweep
    from ..studies import STUDIES, study_path

    t = Table(title="seed studies (aqmlab reproduce NAME [--quick])", title_justify="left")
    for col in ("study", "paper", "runs", "quick runs", "what"):
        t.add_column(col, justify="right" if "runs" in col else "left")
    for name, (paper, what) in STUDIES.items():
        full = load_sweep(study_path(name)).size()
        quick = load_sweep(study_path(name), quick=True).size()
        t.add_row(name, paper, str(full), str(quick), what)
    out.print(t)
