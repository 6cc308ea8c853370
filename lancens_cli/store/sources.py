"""Reading the data of `create table --from FILE`: Parquet, an Arrow IPC file (Feather v2) or
stream, CSV, JSON lines or a Lance dataset.

Parquet, Arrow, CSV and Lance sources are streamed as record batches, so a large file is never
held in memory whole.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import lance
import pyarrow as pa
import pyarrow.json as pjson
import pyarrow.parquet as pq

from lancens_cli.errors import InvalidInputError, lance_message
from lancens_cli.store.csv_rows import open_csv

FORMATS = ("parquet", "arrow", "csv", "jsonl", "lance")
_EXTENSIONS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".arrow": "arrow",
    ".arrows": "arrow",
    ".feather": "arrow",
    ".ipc": "arrow",
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".lance": "lance",
}


def detect_format(path: str) -> str:
    if os.path.isdir(path):
        if os.path.isdir(os.path.join(path, "_versions")):
            return "lance"
        raise InvalidInputError(f"{path} is a directory but not a Lance dataset")
    fmt = format_of_name(path)
    if fmt is not None:
        return fmt
    raise InvalidInputError(
        f"cannot tell the format of {path} from its name; use --format ({', '.join(FORMATS)})"
    )


def format_of_name(path: str) -> str | None:
    """The format a file's extension names (None: none, or a directory's `.lance`)."""
    extension = os.path.splitext(path)[1].lower()
    return _EXTENSIONS[extension] if extension != ".lance" and extension in _EXTENSIONS else None


def is_csv(path: str, fmt: str | None) -> bool:
    """The source is CSV, named so or by its extension (the target's text columns are read as
    text)."""
    return (fmt or format_of_name(path)) == "csv"


def require_exists(path: str, option: str) -> None:
    """Refuse a path that is not there, naming the option that gave it: `--from FILE: x does
    not exist` (every command that reads a local input file says it so)."""
    if not os.path.exists(path):
        raise InvalidInputError(f"{option}: {path} does not exist")


def open_source(
    path: str, fmt: str | None = None, option: str = "--from FILE", target: Any = None
) -> Any:
    """A pyarrow RecordBatchReader over the file's rows (a CSV read by `csv_rows.open_csv`);
    a value its parser refuses further on (a CSV field not of its column's type) is an input
    error naming the file, like one at its start."""
    require_exists(path, option)
    fmt = fmt or detect_format(path)
    if fmt not in FORMATS:
        raise InvalidInputError(f"unknown format {fmt!r} (use {', '.join(FORMATS)})")
    reader = _opened(path, fmt, target)
    return pa.RecordBatchReader.from_batches(reader.schema, _refusing(reader, path, fmt))


def _refusing(reader: Any, path: str, fmt: str) -> Iterator[Any]:
    try:
        yield from reader
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise InvalidInputError(f"cannot read {path} as {fmt}: {lance_message(exc)}") from None


def _opened(path: str, fmt: str, target: Any) -> Any:
    try:
        if fmt == "parquet":
            parquet = pq.ParquetFile(path)
            return pa.RecordBatchReader.from_batches(parquet.schema_arrow, parquet.iter_batches())
        if fmt == "arrow":
            return open_arrow(path)
        if fmt == "csv":
            return open_csv(path, target)
        if fmt == "jsonl":
            table = pjson.read_json(path)
            return pa.RecordBatchReader.from_batches(table.schema, table.to_batches())

        return lance.dataset(path).scanner().to_reader()
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError, ValueError) as exc:
        raise InvalidInputError(f"cannot read {path} as {fmt}: {lance_message(exc)}") from None


def open_arrow(path: str) -> Any:
    """A reader over an Arrow IPC file (what Feather v2 and `pa.ipc.new_file` write), or an
    IPC stream (`pa.ipc.new_stream`): the two are told apart by the file's first bytes."""
    with open(path, "rb") as handle:
        is_file = handle.read(6) == b"ARROW1"
    if not is_file:
        return pa.ipc.open_stream(pa.memory_map(path))
    ipc = pa.ipc.open_file(pa.memory_map(path))
    batches = (ipc.get_batch(i) for i in range(ipc.num_record_batches))
    return pa.RecordBatchReader.from_batches(ipc.schema, batches)
