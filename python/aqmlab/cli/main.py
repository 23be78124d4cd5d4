"""The root `aqmlab` command.

`main()`, which the `aqmlab` script and `python -m aqmlab` run, builds a subcommand only when
it is looked up: `aqmlab run` imports aqmlab.cli.run and has typer build that one command
(typer reads every parameter's annotation to build a command), `aqmlab --help` builds them all
to list them. `app` is the same CLI as one typer app with every command registered up front,
for typer's CliRunner and for code that reads its registrations; it is made on first use.
Both are made from `SUBCOMMANDS` by `register`, so they are the same commands with the same
settings (tests/test_startup.py compares their help and errors).
"""

from __future__ import annotations

import atexit
import gc
import importlib
from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

import typer
import typer.main
from typer.core import TyperGroup

#: Each subcommand, in the order `aqmlab --help` lists them: the module of aqmlab.cli that
#: defines it, and its function (a command) or typer app (a group of commands).
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "run": ("run", "run"),
    "validate": ("run", "validate"),
    "sweep": ("sweep", "sweep"),
    "reproduce": ("sweep", "reproduce"),
    "report": ("report", "report"),
    "plot": ("plot", "plot"),
    "harm": ("harm", "harm_cmd"),
    "search": ("search", "search"),
    "atlas": ("atlas", "atlas"),
    "emulate": ("emulate", "emulate_cmd"),
    "compare": ("compare", "compare"),
    "fidelity": ("fidelity", "fidelity"),
    "router": ("router", "router"),
    "list": ("listing", "app"),
    "plugin": ("plugin", "app"),
}
#: Click context settings of the subcommands that have any.
CONTEXT_SETTINGS: dict[str, dict[str, Any]] = {
    "router": {"allow_extra_args": True, "ignore_unknown_options": True},
}


def _typer(**settings: Any) -> typer.Typer:
    """The root app, without its commands."""
    return typer.Typer(
        name="aqmlab",
        help="Simulate TCP congestion controls sharing an AQM bottleneck.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        **settings,
    )


def register(on: typer.Typer, name: str) -> None:
    """Register the subcommand `name` on the typer app `on` (importing its module)."""
    module, attr = SUBCOMMANDS[name]
    target = getattr(importlib.import_module(f"aqmlab.cli.{module}"), attr)
    if isinstance(target, typer.Typer):
        on.add_typer(target, name=name)
    else:
        on.command(name, context_settings=CONTEXT_SETTINGS.get(name))(target)


def _root() -> None:
    # `root`'s callback: with one, typer builds the app as a group (RootGroup) although no
    # command is registered on it. It has no options and does nothing.
    pass


def build(name: str) -> Any:
    """The subcommand `name` as typer builds it on the root app: registered alone on an app
    with the root's settings, and taken from the group typer makes of that app."""
    holder = typer.Typer(add_completion=False, rich_markup_mode=root.rich_markup_mode, pretty_exceptions_short=root.pretty_exceptions_short)
    register(holder, name)
    return typer.main.get_group(holder).commands[name]


class Subcommands(MutableMapping[str, Any]):
    """The root group's commands by name, each built when first looked up. The values are
    click commands: click's own under older typer, typer's copy of click (typer._click) under
    newer; typed as neither here."""

    def __init__(self) -> None:
        self._names = list(SUBCOMMANDS)
        self._built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            if name not in self._names:
                raise KeyError(name)
            self._built[name] = build(name)
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        if name not in self._names:
            self._names.append(name)
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        self._names.remove(name)
        self._built.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._names))

    def __len__(self) -> int:
        return len(self._names)


class RootGroup(TyperGroup):
    """typer's group, with `Subcommands` for its commands: click looks a command up by name,
    typer's "Did you mean" reads the names, and listing them (help) builds them all."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = Subcommands()


#: What `main()` runs: the root app, its subcommands built on first lookup (RootGroup).
root = _typer(cls=RootGroup, callback=_root)


if TYPE_CHECKING:
    app: typer.Typer


def __getattr__(name: str) -> Any:
    # `app`, made on first use: registering its commands imports every command's module.
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    app = _typer()
    for sub in SUBCOMMANDS:
        register(app, sub)
    globals()["app"] = app
    return app


def main() -> None:
    # The process ends with the command. On its way out the interpreter's cyclic collector
    # passes over every object the command's imports made (typer's and rich's, pydantic's
    # schemas, pyarrow's), tens of milliseconds for nothing the exit will not free anyway:
    # gc.freeze, as an exit handler, leaves them out of it. Every exit handler still runs, as
    # do weakref.finalize callbacks and the flushing of stdout and stderr; what is skipped is
    # the finalizers of objects in reference cycles still alive at exit, which Python does
    # not promise to run (bench/README.md, "Where users wait").
    atexit.register(gc.freeze)
    root()


if __name__ == "__main__":
    main()
