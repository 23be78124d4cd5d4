"""`aqmlab plugin build`: a discipline's C file → its WebAssembly module, and what the module
declares (docs/plugins.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from aqmlab.cli.common import fail, out

app = typer.Typer(help="Build queue-discipline plugins: one C file each (docs/plugins.md).", no_args_is_help=True)


@app.command("build")
def build(
    file: Annotated[Path, typer.Argument(help="The discipline's C file (or a .wasm module, to check it and see what it declares)")],
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Where to write the module (default: FILE with .wasm for a C file; nothing for a module)")
    ] = None,
) -> None:
    """Compile FILE against the ABI header, check the module as a run would load it, write it,
    and print what it declares: kind, queues, timer, options."""
    from aqmlab.cli.listing import aqm_table
    from aqmlab.inputs.errors import ScenarioError
    from aqmlab.scenario import plugin  # start-up time: the scenario model loads pydantic and the engine
    from aqmlab.store.atomic import replacing

    try:
        module = plugin.resolve(str(file))
        about = plugin.describe(module)
    except ValueError as e:
        fail(ScenarioError(str(e)))
    target = output if output is not None else file.with_suffix(".wasm") if file.suffix == ".c" else None
    if target is not None and not (target.exists() and target.resolve() == file.resolve()):
        try:
            with replacing(target) as tmp:
                tmp.write_bytes(module.wasm.read_bytes())
        except OSError as e:
            fail(ScenarioError(f"cannot write {target} ({e.strerror})"))
    info = module.info
    timer = f"every {plugin.bound_text('time', info['timer_ns'])} (aqmlab_timer)" if info["timer_ns"] else "none"
    dequeue = "aqmlab_dequeue" if info["has_dequeue"] else "the host's (queue 0's head)"
    limit = (
        "the plugin enforces the buffer limit itself (AQMLAB_OWNS_LIMIT)"
        if info["owns_limit"]
        else "the physical buffer drops before the plugin sees an arrival"
    )
    lines = [
        f"{file}: {info['kind']} — {info['summary']}",
        f"source: {info['source']}",
        f"queues: {info['n_queues']}; dequeue: {dequeue}; timer: {timer}; {limit}",
        f"delay target: {info['delay_target_option'] or 'none'}; module: {target or module.wasm} ({module.ref})",
    ]
    for line in lines:
        out.print(line, highlight=False, markup=False, soft_wrap=True)
    out.print(aqm_table([(f"plugin {file}", about)]))
    example = ", ".join(f"{o['name']} = {_toml(o['default'])}" for o in about["options"] if o["default"] is not None)
    out.print(
        f'in a scenario: aqm = {{ kind = "plugin", module = "{file}"{", " + example if example else ""} }}', highlight=False, markup=False, soft_wrap=True
    )


def _toml(v: object) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    return f'"{v}"' if isinstance(v, str) else str(v)
