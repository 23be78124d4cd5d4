"""The `aqmlab` command line: one module per command group, joined in `main`.

The modules that define commands evaluate their annotations when imported (they do without
`from __future__ import annotations`): typer builds a command from its parameters'
annotations, and evaluates each one given as a string four times (bench/README.md, "Where
users wait"). Names imported only for type checking are quoted where used.
"""
