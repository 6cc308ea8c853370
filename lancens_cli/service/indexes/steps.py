"""Lance's index work on one open table: building indexes, counting the vectors one trains
on, and which indexes a shallow clone reads from its source.

No catalog, no namespace: `create index` (build.py), prune's optimisation (optimize.py), a
partitioned write's first indexes on a new partition table (service/partitioned/write.py) and
prune's compaction (service/prune/compact.py) all take these steps, so they sit below every one
of them (docs/ARCHITECTURE.md, "Layers").
"""

from __future__ import annotations

import os
import warnings
from typing import Any

from lancens_cli.partition.predicate import quote_column
from lancens_cli.service.indexes.definitions import (
    IndexDefinition,
    require_fits,
    training_vectors,
)
from lancens_cli.words import plural

# Lance's vector index statistics carry every centroid unless told not to (a warning says so)
os.environ.setdefault("LANCE_INCLUDE_VECTOR_CENTROIDS", "false")


def build_one(ds: Any, index: IndexDefinition) -> None:
    """Lance's build of one index on `ds` (a commit after its version; `ds` moves to it)."""
    if index.is_vector:
        params = dict(index.params)
        metric = params.pop("metric", "l2")
        ds.create_index(
            index.column, index.type, name=index.name, metric=metric, replace=True, **params
        )
    else:
        ds.create_scalar_index(index.column, index.type, name=index.name, replace=True)


def build_chain(ds: Any, indexes: list[IndexDefinition], exact: bool) -> int | None:
    """Build `indexes` on `ds` one commit each; the version holding them all, or None when
    `exact` and a commit did not land right after the previous one (a writer's was between)."""
    for index in indexes:
        require_fits(index, ds.schema, "the table")
        before = ds.version
        build_one(ds, index)
        if exact and ds.version != before + 1:
            return None
    return ds.version


def too_few_vectors(ds: Any, index: IndexDefinition) -> str | None:
    """Why `index` built on `ds` would hold none of its rows, in words (`10 rows, fewer than
    the 256 vectors ivf_pq trains on`), or None. Lance builds such an index without a word."""
    needed = training_vectors(index)
    if needed is None:
        return None
    rows = ds.count_rows()
    vectors = rows if rows < needed else _vectors(ds, index.column, needed)
    if vectors >= needed:
        return None
    counted = plural(rows, "row")
    if vectors < rows:
        counted += f" but {plural(vectors, 'vector')} (the rest are null)"
    return f"{counted}, fewer than the {needed} vectors {index.type.lower()} trains on"


def _vectors(ds: Any, column: str, cap: int) -> int:
    """The non-null values of `column`, counted up to `cap` (the scan stops there); none in a
    version of an earlier schema generation that lacks the column."""
    if column not in ds.schema.names:
        return 0
    found = ds.scanner(
        columns=[], with_row_id=True, filter=f"{quote_column(column)} IS NOT NULL", limit=cap
    )
    return found.to_table().num_rows


def first_indexes(ds: Any, indexes: list[IndexDefinition]) -> int:
    """A new partition table (only its writer knows it) gets the namespace's indexes before
    it is published; the version holding them. One that cannot be built now (a column of an
    earlier schema generation, too few vectors, a failed training) is left to
    `prune --optimize-indexes`."""
    for index in indexes:
        try:
            if too_few_vectors(ds, index) is not None:
                continue  # it would hold no rows: prune builds it once the table has enough
            build_chain(ds, [index], exact=False)
        except Exception:  # noqa: BLE001 - an index never fails a write: prune builds it
            continue
    return ds.version


def borrowed_indexes(ds: Any) -> list[str]:
    """The indexes this version reads from another dataset's directory (a shallow clone's).

    Lance's compaction remaps such an index into the clone's own `_indices/` but keeps the
    source's base id in the index entry: the compacted clone then looks for the remapped index
    in its source and every index query fails ("Not found"; seen with pylance 14). Such a
    table is therefore not compacted, nor are its indexes optimised; its data and indexes stay
    as readers know them."""
    with warnings.catch_warnings():  # list_indices names each index's base
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            indices = ds.list_indices()
        except Exception:  # noqa: BLE001 - unreadable index metadata: do not rewrite either
            return ["(unreadable index metadata)"]
    return sorted({i["name"] for i in indices if i.get("base_id") is not None})
