"""Rows and bytes of partition tables at their published versions, from Lance's manifests
alone (fragment row counts, deletion counts and data file sizes): no data file is read, so
skew across a namespace's partitions shows at the cost of one manifest read per table."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from lancens_cli.errors import LancensError
from lancens_cli.store.catalog_rows import open_published
from lancens_cli.store.manifest import ManifestSnapshot
from lancens_cli.store.row_verdicts import row_locations
from lancens_cli.store.storage import Storage

_WORKERS_LOCAL, _WORKERS_REMOTE = 4, 16


@dataclass(frozen=True)
class TableSize:
    rows: int
    bytes: int | None  # None: a data file whose size its manifest does not record


def version_size(dataset: Any) -> TableSize:
    """Live rows and data bytes of one table version, from its manifest."""
    rows, size, known = 0, 0, True
    for fragment in dataset.get_fragments():
        meta = fragment.metadata
        deleted = meta.deletion_file.num_deleted_rows if meta.deletion_file is not None else 0
        rows += (meta.physical_rows or 0) - (deleted or 0)
        for data_file in meta.files:
            if data_file.file_size_bytes is None:
                known = False
            else:
                size += data_file.file_size_bytes
    return TableSize(rows, size if known else None)


def published_sizes(
    storage: Storage, snapshot: ManifestSnapshot, rows: list[dict[str, Any]]
) -> dict[str, TableSize | None]:
    """object id -> size of each row's published version (None: refused by the trust
    boundary, or it does not load: `check` says why)."""
    verdicts = row_locations(storage, snapshot)

    def size(row: dict[str, Any]) -> TableSize | None:
        if verdicts.problem(row["object_id"]) is not None:
            return None  # never opened (store/containment.py)
        try:
            return version_size(open_published(storage, row))
        except (LancensError, OSError, ValueError, RuntimeError):
            return None

    workers = _WORKERS_LOCAL if storage.is_local else _WORKERS_REMOTE
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return {
            row["object_id"]: found for row, found in zip(rows, pool.map(size, rows), strict=True)
        }
