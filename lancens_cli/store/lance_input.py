"""Rows made ready for Lance's writer: every write of rows into a Lance table goes through
`write_fragments` here.

Lance 14's writer panics on a slice (an array with an offset) of a struct that holds a struct
("assertion failed: end <= self.len()"), and slices are what a partitioned write hands it: one
partition's rows cut out of the input. Such a column is copied to an array of its own first;
every other column is passed as it is.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import lance
import pyarrow as pa
import pyarrow.types as t


def write_fragments(data: Any, uri: str, **options: Any) -> list[Any]:
    """`lance.fragment.write_fragments` of `data` (a table, a batch or a reader) made safe."""
    return lance.fragment.write_fragments(unsliced(data), uri, **options)


def unsliced(data: Any) -> Any:
    """`data` with every sliced column of a nested type copied (see the module's docstring)."""
    if isinstance(data, pa.Table):
        if not any(t.is_nested(f.type) for f in data.schema):
            return data
        columns = [
            pa.chunked_array([_own(c) for c in column.chunks], type=column.type)
            for column in data.columns
        ]
        return pa.Table.from_arrays(columns, schema=data.schema)
    if isinstance(data, pa.RecordBatch):
        if not any(t.is_nested(f.type) for f in data.schema):
            return data
        arrays = [_own(column) for column in data.columns]
        return pa.RecordBatch.from_arrays(arrays, schema=data.schema)
    if isinstance(data, pa.RecordBatchReader) and any(t.is_nested(f.type) for f in data.schema):
        return pa.RecordBatchReader.from_batches(data.schema, _batches(data))
    return data


def _batches(reader: Any) -> Iterator[Any]:
    for batch in reader:
        yield unsliced(batch)


def _own(array: Any) -> Any:
    """`array` itself, or a copy starting at offset 0 when it is a slice of a nested type."""
    if array.offset == 0 or not t.is_nested(array.type):
        return array
    return pa.concat_arrays([array])
