"""Rows made ready for Lance's writer: every write of rows into a Lance table goes through
`write_fragments` here.

Lance 14's writer panics on a slice (an array with an offset) of a struct that holds a struct
("assertion failed: end <= self.len()"), and slices are what a partitioned write hands it: one
partition's rows cut out of the input. Such a column is copied to an array of its own first;
every other column is passed as it is.

A map read from Parquet names its entries after its column (`m.m`), where Arrow and Lance's
own reads name them `entries`. Lance keeps the name it was first given and refuses any later
fragment named otherwise: a table created from a Parquet map could take no row Lance read
back. So every map is handed over with Arrow's names (`canonical_maps`), and a table is
created with them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import lance
import pyarrow as pa
import pyarrow.types as t


def write_fragments(data: Any, uri: str, **options: Any) -> list[Any]:
    """`lance.fragment.write_fragments` of `data` (a table, a batch or a reader) made safe."""
    if options.get("schema") is not None:
        options["schema"] = canonical_maps(options["schema"])
    return lance.fragment.write_fragments(unsliced(_with_canonical_maps(data)), uri, **options)


def holds_map(kind: Any) -> bool:
    """Whether an Arrow type is a map or holds one at any depth."""
    if t.is_map(kind):
        return True
    if t.is_struct(kind):
        return any(holds_map(kind.field(i).type) for i in range(kind.num_fields))
    if t.is_list(kind) or t.is_large_list(kind) or t.is_fixed_size_list(kind):
        return holds_map(kind.value_type)
    return False


def canonical_maps(schema: Any) -> Any:
    """`schema` with every map's entries named as Arrow names them (see the module's
    docstring); `schema` itself when it holds no map."""
    if schema is None or not any(holds_map(f.type) for f in schema):
        return schema
    return pa.schema([f.with_type(_canonical(f.type)) for f in schema], metadata=schema.metadata)


def _canonical(kind: Any) -> Any:
    if not holds_map(kind):
        return kind
    if t.is_map(kind):
        key, item = kind.key_field, kind.item_field
        key, item = key.with_type(_canonical(key.type)), item.with_type(_canonical(item.type))
        return pa.map_(key, item, kind.keys_sorted)
    if t.is_struct(kind):
        return pa.struct([f.with_type(_canonical(f.type)) for f in kind])
    value = kind.value_field.with_type(_canonical(kind.value_type))
    if t.is_fixed_size_list(kind):
        return pa.list_(value, kind.list_size)
    return pa.large_list(value) if t.is_large_list(kind) else pa.list_(value)


def _with_canonical_maps(data: Any) -> Any:
    """`data` cast to `canonical_maps` of its schema (only its maps' names change)."""
    schema = getattr(data, "schema", None)
    wanted = canonical_maps(schema)
    if wanted is schema:
        return data
    if isinstance(data, pa.RecordBatchReader):
        return pa.RecordBatchReader.from_batches(wanted, (b.cast(wanted) for b in data))
    return data.cast(wanted)


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
