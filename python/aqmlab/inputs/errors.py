"""The one error type of bad scenario input, shared by validation and lowering."""

from __future__ import annotations

from pathlib import Path

__all__ = ["ScenarioError", "read_utf8"]


class ScenarioError(ValueError):
    """Bad scenario input: one message naming where and what."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None, key: str | None = None):
        self.file, self.line, self.key, self.detail = file, line, key, message
        where = ""
        if file:
            where = f"{file}:{line}: " if line else f"{file}: "
        super().__init__(f"{where}{key + ': ' if key else ''}{message}")


def read_utf8(path: str | Path, error: type[ScenarioError] = ScenarioError) -> str:
    """The text of an input file, or `error` naming the file, and the line and byte offset of
    the first byte that is not UTF-8 (TOML files are UTF-8, TOML 1.0 §Spec)."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise error(f"cannot read the file ({e.strerror})", file=str(path)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise error(f"not UTF-8 text: byte 0x{data[e.start]:02x} at byte offset {e.start}; save the file as UTF-8", file=str(path), line=line) from None
