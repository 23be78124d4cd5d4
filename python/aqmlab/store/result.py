"""Run results: a summary (docs/design.md §Results store) and tables as pandas DataFrames, saved
atomically as ``summary.json`` plus one Parquet file per table."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator, KeysView, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from aqmlab.store.atomic import fsync_path, fsync_paths, json_text

if TYPE_CHECKING:
    # pyarrow converts to and from pandas itself, on first use: a run that is only stored
    # never loads pandas.
    import pandas as pd

__all__ = ["Result", "load_result", "read_table", "TABLES"]

#: The tables every run writes, in order.
TABLES = ("flows", "classes", "timeseries", "queue", "sojourn_hist", "fct")


class _Frames(dict[str, Any]):
    """The tables as DataFrames, converted from Arrow on first access (a sweep that only
    stores its runs never pays for pandas)."""

    def __init__(self, arrow: dict[str, pa.Table]):
        super().__init__()
        self.arrow = arrow

    def __missing__(self, name: str) -> pd.DataFrame:
        if name not in self.arrow:
            raise KeyError(name)
        df = self.arrow[name].to_pandas()
        self[name] = df
        return df

    def __contains__(self, name: object) -> bool:
        return name in self.arrow

    def __iter__(self) -> Iterator[str]:
        return iter(self.arrow)

    def keys(self) -> KeysView[str]:  # type: ignore[override]
        return self.arrow.keys()


class Result:
    """One run: `.summary` (dict) and the tables as DataFrames (`.flows`, `.classes`,
    `.timeseries`, `.queue`, `.sojourn_hist`, `.fct`; `.tables[name]`), held as Arrow tables
    (`.arrow[name]`)."""

    def __init__(self, summary: dict[str, Any], tables: dict[str, pa.Table] | dict[str, pd.DataFrame]):
        self.summary = summary
        arrow = {k: v if isinstance(v, pa.Table) else pa.Table.from_pandas(v, preserve_index=False) for k, v in tables.items()}
        self.arrow = arrow
        self.tables = _Frames(arrow)

    def __getattr__(self, name: str) -> pd.DataFrame:
        tables = self.__dict__.get("tables")
        if tables is not None and name in tables:
            return tables[name]
        raise AttributeError(name)

    @property
    def metrics(self) -> dict[str, Any]:
        return self.summary["metrics"]

    def save(self, directory: str | Path, *, overwrite: bool = False) -> Path:
        """Write the results store atomically: everything goes to a temporary directory beside
        the target, is fsynced, then renamed into place — a killed run leaves no partial
        directory under the target name."""
        target = Path(directory)
        if target.exists() and (not target.is_dir() or any(target.iterdir())) and not overwrite:
            raise FileExistsError(f"{target} exists and is not empty (use overwrite)")
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
        try:
            # The directory is renamed into place whole, so its files need no atomic writes of
            # their own: written, then fsynced at once with the directory.
            (tmp / "summary.json").write_text(json_text(self.summary), encoding="utf-8")
            for name in TABLES:
                pq.write_table(self.arrow[name], tmp / f"{name}.parquet")
            fsync_paths([tmp / "summary.json", *(tmp / f"{name}.parquet" for name in TABLES), tmp])
            if target.exists():
                trash = target.parent / f".{target.name}.old-{os.getpid()}"
                os.rename(target, trash)
                os.rename(tmp, target)
                shutil.rmtree(trash, ignore_errors=True)
            else:
                os.rename(tmp, target)
            fsync_path(target.parent)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return target


def read_table(path: str | Path, columns: Sequence[str] | None = None) -> pa.Table:
    """One Parquet file (or those of its `columns`) as an Arrow table: the file's own reader,
    which gives the table `pq.read_table` does. `pq.read_table` goes through pyarrow's dataset
    layer, which imports pandas (≈ 0.4 s): reading a run's tables would load pandas before any
    DataFrame is asked for."""
    with pq.ParquetFile(path) as f:
        return f.read(columns=columns)


def load_result(directory: str | Path) -> Result:
    """Read a results directory written by `Result.save`."""
    d = Path(directory)
    summary_path = d / "summary.json"
    if not summary_path.is_file():
        raise FileNotFoundError(f"{d} is not a results directory (no summary.json)")
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    tables = {name: read_table(d / f"{name}.parquet") for name in TABLES}
    return Result(summary, tables)


#: The engine's column types (crates/results `Column::arrow_type`).
_ARROW = {"double": pa.float64(), "int64": pa.int64(), "string": pa.string(), "bool": pa.bool_()}

#: A column as the engine hands it over: its Arrow buffers (crates/py `column_to_py`).
NativeColumn = tuple[str, int, bytes | None, bytes | None, bytes]


def _array(col: NativeColumn) -> pa.Array:
    kind, n, validity, offsets, data = col
    buffers = [None if validity is None else pa.py_buffer(validity)]
    if offsets is not None:
        buffers.append(pa.py_buffer(offsets))
    buffers.append(pa.py_buffer(data))
    return pa.Array.from_buffers(_ARROW[kind], n, buffers)


def frames_from_native(tables: dict[str, dict[str, NativeColumn]]) -> dict[str, pa.Table]:
    """The engine's tables (`_native.run`, `_native.tables_from_records`) as Arrow tables."""
    return {name: pa.Table.from_arrays([_array(c) for c in tables[name].values()], names=list(tables[name])) for name in TABLES}
