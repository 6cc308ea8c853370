"""The rows of a partitioned write: the input conformed to the namespace schema (types, order,
missing columns), refused when it lacks a column a partition field takes its value from, and
split by partition under the current spec.

It stands apart from `write.py` because the Spark tasks (`pipeline/write_task.py`) and `ingest`
conform and split their own batches with it, and never commit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lancens_cli.errors import InvalidInputError
from lancens_cli.partition.casts import refused_cast
from lancens_cli.partition.schema import top_level_ids
from lancens_cli.partition.spec import PartitionSpec
from lancens_cli.partition.transforms import apply_field
from lancens_cli.service.partitioned.placement import PartitionTouch
from lancens_cli.words import noun


def conform(data: Any, schema: Any) -> Any:
    """The input as a pyarrow Table in the namespace schema (order, types, field ids)."""
    table = data.read_all() if hasattr(data, "read_all") else data
    extra = [n for n in table.column_names if n not in schema.names]
    if extra:
        raise InvalidInputError(f"the input has columns the namespace schema has not: {extra}")
    columns = []
    for f in schema:
        if f.name not in table.column_names:
            if not f.nullable:
                raise InvalidInputError(f"the input lacks the non-nullable column {f.name!r}")
            columns.append(pa.nulls(table.num_rows, f.type))
            continue
        column = table.column(f.name)
        if column.type != f.type:
            if refused_cast(column.type, f.type):  # before any value: partition/casts.py
                raise InvalidInputError(
                    f"column {f.name!r} is {column.type}, the namespace has {f.type}"
                )
            try:
                column = column.cast(f.type, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise InvalidInputError(
                    f"column {f.name!r} is {column.type}, the namespace has {f.type}: {exc}"
                ) from None
        if not f.nullable and column.null_count:
            raise InvalidInputError(f"column {f.name!r} is not nullable but has NULLs")
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema)


def lacking_columns(data: Any, schema: Any) -> list[str]:
    """The namespace columns the input has not (`conform` fills them with NULL), in schema
    order."""
    given = set(data.schema.names)
    return [f.name for f in schema if f.name not in given]


def require_partition_sources(
    lacking: list[str], spec: PartitionSpec, schema: Any, allow: str = "--allow-missing-columns"
) -> None:
    """Refuse an input that lacks a column a field of `spec` takes its value from: every row
    would be partitioned as if the column were NULL (the caller may allow it, by `allow`: the
    flag of a command, the option of the data source)."""
    by_id = top_level_ids(schema)
    fields: dict[str, list[str]] = {}
    for f in spec.fields:
        for source in f.source_ids:
            if source in by_id and by_id[source].name in lacking:
                fields.setdefault(by_id[source].name, []).append(f.field_id)
    if not fields:
        return
    said = [
        f"{column}, which partition {noun(len(ids), 'field')} {' and '.join(ids)} "
        f"{'takes its' if len(ids) == 1 else 'take their'} value from"
        for column, ids in fields.items()
    ]
    it, were = ("it", "it were") if len(said) == 1 else ("them", "they were")
    raise InvalidInputError(
        f"the input lacks {', and '.join(said)}: every row would be partitioned as if {were} "
        f"NULL; add {'the column' if it == 'it' else 'the columns'}, or give "
        f"{allow} to fill {it} with NULL"
    )


def split_by_partition(table: Any, spec: PartitionSpec, schema: Any) -> list[PartitionTouch]:
    """Each distinct partition (tuple of partition values) with its rows."""
    if table.num_rows == 0:
        return []
    by_id = top_level_ids(schema)
    keys, dictionaries = [], []
    for f in spec.fields:
        sources = [
            table.column(by_id[i].name).combine_chunks() if i in by_id else None
            for i in f.source_ids
        ]
        values = apply_field(f, sources, table.num_rows)
        encoded = pc.dictionary_encode(values, null_encoding="encode")
        if hasattr(encoded, "combine_chunks"):
            encoded = encoded.combine_chunks()
        keys.append(encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64))
        dictionaries.append(encoded.dictionary)
    codes, levels = _combined_codes(keys, [len(d) for d in dictionaries])
    order = np.argsort(codes, kind="stable")
    ordered_codes = codes[order]
    starts = np.flatnonzero(np.diff(ordered_codes)) + 1
    bounds = [0, *starts.tolist(), len(codes)]
    ordered = table.take(order)
    touches = []
    for start, stop in zip(bounds, bounds[1:], strict=False):
        row = int(order[start])
        values = tuple(
            dictionaries[level][int(levels[level][row])].as_py()
            for level in range(len(spec.fields))
        )
        touches.append(PartitionTouch(values, ordered.slice(start, stop - start)))
    return touches


def _combined_codes(keys: list[Any], sizes: list[int]) -> tuple[Any, list[Any]]:
    """One int64 code per row for its tuple of per-field dictionary codes.

    A mixed-radix number when the product of the dictionary sizes fits (always, in practice);
    otherwise the rows' tuples are ranked with a (slower) lexicographic unique.
    """
    capacity = 1
    for size in sizes:
        capacity *= max(size, 1)
    if capacity < 2**62:
        codes = np.zeros(len(keys[0]), dtype=np.int64)
        for key, size in zip(keys, sizes, strict=True):
            codes = codes * max(size, 1) + key
        return codes, keys
    _, inverse = np.unique(np.stack(keys, axis=1), axis=0, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64), keys
