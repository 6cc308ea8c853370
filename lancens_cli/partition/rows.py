"""Walking the `__manifest` rows of a partitioned namespace (spec 004).

A partition row's object id is `v<N>$<level 0>$...$<level k>` for a namespace and ends in
`$dataset` for a partition table; its depth says which field of spec N its own value is for.
The `$` splitting and the level arithmetic live here, once, for every service that walks them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from lancens_cli.models import KIND_TABLE, OBJECT_ID_DELIMITER
from lancens_cli.partition.spec import PartitionSpec

# A partition namespace is named by 16 characters of this alphabet (random, or a hash).
NAME_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
NAME_LENGTH = 16


def split_id(object_id: str) -> list[str]:
    """The parts of an object id (the root namespace is `[""]`, as `str.split` gives)."""
    return object_id.split(OBJECT_ID_DELIMITER)


def join_id(parts: Iterable[str]) -> str:
    return OBJECT_ID_DELIMITER.join(parts)


def child_id(parent: str, name: str) -> str:
    return f"{parent}{OBJECT_ID_DELIMITER}{name}"


def top_namespace(object_id: str) -> str:
    """The first part of an object id: `v<N>` for any row of a partition tree."""
    return object_id.split(OBJECT_ID_DELIMITER, 1)[0]


def dotted(object_id: str) -> str:
    """An object id as messages show it (`v1.abc.dataset`)."""
    return object_id.replace(OBJECT_ID_DELIMITER, ".")


@dataclass(frozen=True)
class PartitionRow:
    """A row below a spec-version namespace `v<N>`, with its place in the partition tree."""

    row: dict[str, Any]
    spec: PartitionSpec
    parts: tuple[str, ...]  # parts[0] is `v<N>`

    @property
    def object_id(self) -> str:
        return self.row["object_id"]

    @property
    def level(self) -> int:
        """The index of the spec field whose value this namespace adds (a table: one past)."""
        return len(self.parts) - 2

    @property
    def parent(self) -> str:
        return join_id(self.parts[:-1])

    def ancestor(self, depth: int) -> str:
        """The object id of the ancestor with `depth` parts (2 is the first level)."""
        return join_id(self.parts[:depth])


def partition_rows(
    rows: Iterable[dict[str, Any]], specs: Sequence[PartitionSpec], kind: str | None = None
) -> Iterator[PartitionRow]:
    """The rows below any of the specs' `v<N>` namespaces, in the order given; `kind` filters."""
    by_namespace = specs_by_namespace(specs)
    for row in rows:
        spec = spec_of_row(row, by_namespace, kind)
        if spec is not None:
            yield PartitionRow(row, spec, tuple(split_id(row["object_id"])))


def specs_by_namespace(specs: Sequence[PartitionSpec]) -> dict[str, PartitionSpec]:
    """Each spec by its `v<N>` namespace's name, as `spec_of_row` looks them up."""
    return {spec.namespace: spec for spec in specs}


def spec_of_row(
    row: dict[str, Any], by_namespace: dict[str, PartitionSpec], kind: str | None = None
) -> PartitionSpec | None:
    """The spec of the tree a row lies below (None: no row below a `v<N>`, or not of `kind`):
    `partition_rows` of one row, without a generator each (`ls` asks it of every row)."""
    if kind is not None and row["object_type"] != kind:
        return None
    top, below, _ = row["object_id"].partition(OBJECT_ID_DELIMITER)
    return by_namespace.get(top) if below else None


def partition_table_rows(
    rows: Iterable[dict[str, Any]], specs: Sequence[PartitionSpec]
) -> list[dict[str, Any]]:
    """The `__manifest` rows of every partition table, of every spec version."""
    return [p.row for p in partition_rows(rows, specs, KIND_TABLE)]
