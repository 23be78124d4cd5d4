"""`aqmlab list ccs` and `aqmlab list aqms`: what this build provides, with parameters,
defaults and sources."""

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from aqmlab.cli.common import out

app = typer.Typer(help="List the congestion controls and queue disciplines this build provides.", no_args_is_help=True)


@app.command("ccs")
def ccs(
    plugins: list[Path] = typer.Option([], "--plugin", help="Also a congestion control of your own: its struct_ops BPF C file (repeatable; docs/plugins.md)."),
) -> None:
    """Congestion controls, their tunables (`cc_params`) with Linux's defaults, and sources;
    with --plugin, also what a CC file declares (its tunables, ops, flags and ECN)."""
    from aqmlab import engine  # start-up time: the engine's shared library is loaded by the commands that ask it

    extra = [cc_plugin_row(f) for f in plugins]
    t = Table(title="congestion controls (set tunables per flow class with cc_params = { ... })", title_justify="left")
    for col in ("cc", "parameters (defaults)", "source"):
        t.add_column(col)
    for cc in engine.describe_ccs():
        params = ", ".join(f"{k} = {str(v).lower() if isinstance(v, bool) else v}" for k, v in cc["params"].items()) or "–"
        t.add_row(cc["name"], params, cc["source"])
    for row in extra:
        t.add_row(*row)
    out.print(t)


def cc_plugin_row(file: Path) -> tuple[str, str, str]:
    """A CC file's row of `list ccs`: its struct_ops name and file, its tunables, what it
    declares. Bad input fails the command (exit 2)."""
    from aqmlab.cli.common import fail
    from aqmlab.cli.plugin import cc_lines, tunables_text
    from aqmlab.inputs.errors import ScenarioError
    from aqmlab.scenario import plugin  # start-up time: as in `aqms`

    try:
        module = plugin.resolve_cc(str(file))
    except ValueError as e:
        fail(ScenarioError(str(e)))
    # cc_lines' first line names the file and the CC, which the row's first cell already does.
    # ... and its last the tunables, which the row's second cell holds.
    declared = "; ".join(cc_lines(file, module)[1:-1])
    return f"{module.label} (plugin {file})", tunables_text(module.info) or "–", declared


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
            o["source"] or "–",
        ]
        rows.append("| " + " | ".join(cells) + " |")
    if about["one_of"]:
        rows.append("")
        rows.append("Exactly one of " + "; ".join(" or ".join(f"`{k}`" for k in g) for g in about["one_of"]) + ".")
    return "\n".join(rows)


def aqm_table(entries: list[tuple[str, dict[str, Any]]]) -> Table:
    """Disciplines' options in full, as `aqmlab list aqms KIND…` shows them: (kind,
    description) pairs, each description shaped as `engine.describe_aqms()`'s entries."""
    t = Table(title="queue disciplines (aqm = { kind = ..., option = ... }; '–' = unset: derived as the source does)", title_justify="left")
    for col in ("kind", "option", "unit", "default", "range", "source"):
        t.add_column(col)
    for kind, about in entries:
        t.add_row(kind, "", "", "", "", about["source"], end_section=not about["options"])
        for i, o in enumerate(about["options"]):
            # A plugin's option has only its doc line, which says where it comes from.
            t.add_row("", o["name"], _unit(o), _default(o), o["range_text"], o["source"] or o["doc"], end_section=i == len(about["options"]) - 1)
    return t


def plugin_entry(file: Path) -> tuple[str, dict[str, Any]]:
    """A plugin module's row of the table: its declaration (`scenario.plugin.describe`),
    under the kind and file a scenario names it by. Bad input fails the command (exit 2)."""
    from aqmlab.cli.common import fail
    from aqmlab.inputs.errors import ScenarioError
    from aqmlab.scenario import plugin  # start-up time: as in `aqms`

    try:
        module = plugin.resolve(str(file))
        return f"plugin {file} ({module.info['kind']})", plugin.describe(module)
    except ValueError as e:
        fail(ScenarioError(str(e)))


def overview_table(entries: list[tuple[str, dict[str, Any]]]) -> Table:
    """Disciplines as `aqmlab list aqms` shows them without a kind: one row each, its options
    by name."""
    t = Table(title="queue disciplines (aqm = { kind = ..., option = ... }; each one's options in full: aqmlab list aqms KIND)", title_justify="left")
    for col in ("kind", "options", "source"):
        t.add_column(col)
    for kind, about in entries:
        t.add_row(kind, ", ".join(o["name"] for o in about["options"]) or "–", about["source"])
    return t


@app.command("aqms")
def aqms(
    kinds: list[str] = typer.Argument(
        None,
        metavar="KIND",
        help="Disciplines whose options to show in full (unit, default, range, source); none: every discipline, one line each.",
        show_default=False,
    ),
    markdown: bool = typer.Option(False, "--markdown", help="Print each discipline's option table in Markdown (as docs/scenario.md has them)."),
    plugins: list[Path] = typer.Option(
        [], "--plugin", help="Also a plugin discipline, its options in full: its C file or .wasm module (repeatable; docs/plugins.md)."
    ),
) -> None:
    """Queue disciplines, one line each; with KIND…, their options (unit, default, range,
    source), from the engine; with --plugin, also what a plugin module declares."""
    from aqmlab.engine import describe_aqms  # start-up time: as in `ccs`

    builtin = describe_aqms()
    unknown = [k for k in kinds or () if k not in builtin]
    if unknown:
        from difflib import get_close_matches

        from aqmlab.cli.common import fail
        from aqmlab.inputs.errors import ScenarioError

        near = get_close_matches(unknown[0], list(builtin), n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else f" (kinds: {', '.join(builtin)})"
        fail(ScenarioError(f"no discipline {unknown[0]!r}{hint}"))
    extra = [plugin_entry(f) for f in plugins]
    if markdown:
        for kind, about in builtin.items():
            if not kinds or kind in kinds:
                print(f"<!-- options:{kind} -->\n{option_table(about)}\n<!-- /options -->\n")
        for kind, about in extra:
            print(f"<!-- {kind} -->\n{option_table(about)}\n")
        return
    if not kinds:
        out.print(overview_table(list(builtin.items())))
    detailed = [(k, builtin[k]) for k in dict.fromkeys(kinds or ())] + extra
    if detailed:
        out.print(aqm_table(detailed))
    if any(about["reads_packet_values"] for _, about in detailed):
        # start-up time: the scenario model loads pydantic, which the other listings need not
        from aqmlab.scenario import Marker

        m = Marker.model_fields
        out.print(
            "packet values for "
            + " and ".join(k for k, a in builtin.items() if a["reads_packet_values"])
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
    from aqmlab.sweep.spec import load_sweep  # start-up time: sweep files load pydantic and the scenario model

    t = Table(title="seed studies (aqmlab reproduce NAME [--quick])", title_justify="left")
    for col in ("study", "paper", "runs", "quick runs", "what"):
        t.add_column(col, justify="right" if "runs" in col else "left")
    for name, (paper, what) in STUDIES.items():
        full = load_sweep(study_path(name)).size()
        quick = load_sweep(study_path(name), quick=True).size()
        t.add_row(name, paper, str(full), str(quick), what)
    out.print(t)
