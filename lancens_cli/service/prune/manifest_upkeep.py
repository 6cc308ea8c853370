"""`__manifest`'s own part of a prune: the plan for its versions with what each kept version
publishes (the pins every table's plan keeps), and its compaction and index rebuild after the
tables.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import lance

from lancens_cli.errors import LancensError
from lancens_cli.models import MANIFEST_TABLE
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.prune.policy import PrunePolicy
from lancens_cli.service.prune.protect import (
    Pins,
    TablePlan,
    plan_table,
    read_table_state,
)
from lancens_cli.store.catalog_rows import READ_COLUMNS
from lancens_cli.store.manifest import ManifestSnapshot

MANIFEST_COMPACT_FRAGMENTS = 16  # compact __manifest when it has more fragments than this


def manifest_pins(
    ns: Namespace, snapshot: ManifestSnapshot, policy: PrunePolicy, now: datetime, parallel: int
) -> tuple[TablePlan | None, Pins]:
    """The plan for `__manifest` itself and what each of its kept versions publishes."""
    pins = Pins()
    if not snapshot.exists:
        return None, pins
    state = read_table_state(ns.storage, MANIFEST_TABLE, None)
    if state is None:  # its versions went since the snapshot was read
        raise LancensError("__manifest has no versions any more: prune stopped")
    plan = plan_table(state, Pins(), policy, {}, now)
    kept = [v for v in plan.protected if v <= snapshot.version] or [snapshot.version]

    uri = ns.storage.uri(MANIFEST_TABLE)
    options = ns.storage.lance_options

    def read(version: int) -> tuple[int, list[dict[str, Any]]]:
        if version == snapshot.version:  # the rows at hand: the catalog is not read again
            return version, _publishing_rows(snapshot)
        ds = lance.dataset(uri, version=version, storage_options=options)
        columns = [c for c in READ_COLUMNS if c in ds.schema.names]
        if not columns:
            return version, []
        where = " OR ".join(f"{c} IS NOT NULL" for c in columns)
        table = ds.to_table(columns=["location", *columns], filter=where)
        return version, table.to_pylist()

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        for version, rows in pool.map(read, kept):
            pins.add_rows(version, rows, current=version == snapshot.version)
    # Versions committed after our snapshot are younger than any window and stay anyway.
    return plan, pins


def _publishing_rows(snapshot: ManifestSnapshot) -> list[dict[str, Any]]:
    """The snapshot's rows that publish a version, tag or branch, as a kept version's `read`
    gives them (a column the catalog lacks reads None)."""
    names = ("location", *READ_COLUMNS)
    return [
        dict(zip(names, values, strict=True))
        for values in snapshot.columns(*names)
        if any(value is not None for value in values[1:])
    ]


def maintain_manifest(ns: Namespace, catalog_indexes: bool) -> list[dict[str, Any]]:
    """Compact `__manifest` when it has many fragments; rebuild its own indexes on request
    (`catalog_indexes`: the global `--indexes`).

    Compaction is a Lance `Rewrite` commit: a manifest writer racing it sees a conflict and
    re-plans on the new version (store/manifest.py), so no change is lost.
    """
    done: list[dict[str, Any]] = []
    ds = ns.manifest.open_dataset()
    if ds is None:
        return done
    fragments = len(ds.get_fragments())
    if fragments > MANIFEST_COMPACT_FRAGMENTS:
        metrics = ds.optimize.compact_files()
        done.append(
            {
                "table": MANIFEST_TABLE,
                "fragments_before": fragments,
                "fragments_removed": metrics.fragments_removed,
                "fragments_added": metrics.fragments_added,
            }
        )
    if catalog_indexes:
        built = ns.manifest.create_indexes()
        done.append({"table": MANIFEST_TABLE, "indexes_rebuilt": built})
    return done
