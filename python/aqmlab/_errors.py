"""The one error type of bad scenario input, shared by validation and lowering."""

from __future__ import annotations

__all__ = ["ScenarioError"]


class ScenarioError(ValueError):
    """Bad scenario input: one message naming where and what."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None, key: str | None = None):
        self.file, self.line, self.key, self.detail = file, line, key, message
        where = ""
        if file:
            where = f"{file}:{line}: " if line else f"{file}: "
        super().__init__(f"{where}{key + ': ' if key else ''}{message}")
