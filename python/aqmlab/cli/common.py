"""What every command shares: its two consoles and the one way to fail on bad input."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

__all__ = ["err", "out", "fail"]

err = Console(stderr=True)
out = Console()


def fail(e: Exception, code: int = 2) -> NoReturn:
    """Print `e` as one error line and exit (2: bad input, the README's convention)."""
    # The message is text, not markup ("[[flows]]" must print as written).
    err.print(f"[bold red]error:[/] {escape(str(e))}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)
