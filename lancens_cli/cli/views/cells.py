"""Cells and columns several groups of views share: partitions in a cell, a `partition` column,
the `would ` of a dry run."""

from __future__ import annotations

from typing import Any

from lancens_cli.cli.views.registry import Rows


def labels_text(labels: list[str], shown: int = 5) -> str:
    """Partitions by their values, the first `shown` of them and how many more."""
    text = "; ".join(labels[:shown])
    return text + (f"; {len(labels) - shown} more" if len(labels) > shown else "")


def would_prefix(dry_run: bool) -> str:
    return "would " if dry_run else ""


def with_partitions(header: list[str], rows: Rows, labels: list[Any], at: int = 1) -> None:
    """A `partition` column at `at` (after the table's id): a partition table's values as `ls`
    shows them, None for any other row. Always there, whether or not a row is a partition
    table's (the view marks it `sparse`): a pipe's columns never move after a first write."""
    header.insert(at, "partition")
    for row, label in zip(rows, labels, strict=True):
        row.insert(at, partition_cell(label))


def partition_cell(label: Any) -> str | None:
    """A row's `partition` cell: a partition table's values as `ls` shows them, else None."""
    return label.text() if label is not None else None
