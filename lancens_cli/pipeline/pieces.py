"""What a planned read is made of: pieces of tables at exact versions, and their sizes.

A `Piece` is plain data: the driver plans it (`read_plan.py`, `change_plan.py` for the change
feed), it pickles to Spark's tasks, and the readers (`slice_reader.py`, `change_reader.py`) open
exactly the version it names. The schema history (`partition.schema_evolution`, Lance behind it)
is imported inside `schema_history`: Spark's workers import this module before they fork.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lancens_cli.partition.predicate import Node

if TYPE_CHECKING:
    from lancens_cli.service.namespace import Namespace

ROWS_PER_SLICE = 1 << 20  # rows one Spark task reads, fragments grouped up to this


@dataclass(frozen=True)
class Piece:
    """Some fragments of one table at one exact version, and the Lance filter to apply."""

    table: str
    location: str
    version: int
    branch: str | None
    fragments: tuple[int, ...]
    rows: int
    filter: Node | None  # the condition the table's rows must meet (parsed once, not again)
    spec_version: int | None = None
    # source columns whose table column has another name (an earlier schema generation);
    # None: the table lacks the column, it reads as NULL
    renamed: tuple[tuple[str, str | None], ...] = ()
    # an incremental read: only rows [offset, offset + count) of the one fragment are new
    window: tuple[int, int] | None = None
    # the bytes of data files the piece reads (a window: its share), as the manifest records
    # them; None when a data file's size is not recorded (files written by old Lance versions)
    bytes: int | None = 0
    # the change feed: what the rows are (pipeline/change_plan.py), and which rows of the
    # fragment they are (addresses, or row ids on a table with stable row ids; None: all live)
    change: Any = None
    take: tuple[int, ...] | None = None


def schema_history(ns: Namespace) -> list[Any]:
    """Earlier namespace schemas: how a partition table not yet evolved is read through it."""
    from lancens_cli.partition.schema_evolution import history_from_metadata

    dataset = ns.manifest.open_dataset()
    return history_from_metadata(dict(dataset.metadata or {})) if dataset is not None else []


def fragment_bytes(fragment: Any, rows: int | None = None) -> int | None:
    """The bytes of a fragment's data files, or the share of them `rows` of its physical rows
    hold; None when the manifest does not record a file's size."""
    metadata = fragment.metadata
    sizes = [f.file_size_bytes for f in metadata.files]
    if any(size is None for size in sizes):
        return None
    total = sum(sizes)
    physical = metadata.physical_rows or 0
    if rows is None or not physical:
        return total
    return total * rows // physical


def planned_bytes(pieces: list[Piece]) -> int | None:
    """The bytes a read of `pieces` reads at most (None: not known from the manifests)."""
    sizes = [piece.bytes for piece in pieces]
    return None if any(size is None for size in sizes) else sum(s or 0 for s in sizes)
