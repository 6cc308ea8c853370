"""`partitions [--where PRED]`: which partition tables a filter must read (spec 004,
Partition Pruning and Appendix D), found with one filtered read of `__manifest`.

Only the `__manifest` metadata and the matching rows are read, never the whole catalog, so
the cost follows the number of matches (and the scalar indexes, when built, do the filtering).
The condition parser (sqlglot) is imported where a condition is given: a merge selects every
partition and parses nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lancens_cli.errors import InvalidInputError, ManifestError
from lancens_cli.models import MANIFEST_TABLE, Identifier, Result, json_value
from lancens_cli.partition.predicate import Node, to_sql
from lancens_cli.partition.rows import specs_by_namespace, top_namespace
from lancens_cli.partition.selection import plan
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.layout import (
    PartitionLayout,
    layout_from_metadata,
)
from lancens_cli.service.partitioned.sizes import published_sizes
from lancens_cli.store.catalog_rows import READ_COLUMNS, PublishedRef
from lancens_cli.store.manifest import KNOWN_READER_FLAGS, READER_FLAGS_KEY


@dataclass
class PartitionMatch:
    table: str
    spec_version: int
    location: str
    published: PublishedRef
    values: dict[str, Any]
    object_id: str = ""
    # at the published version, from Lance's manifest (`with_sizes`); None: not asked for, or
    # the table does not load (`check` says why)
    rows: int | None = None
    bytes: int | None = None


@dataclass
class PartitionSelection(Result):
    where: str | None
    manifest_query: str
    total: int
    matches: list[PartitionMatch]
    # spec version namespace -> what its scans must still apply (a read renders each table's
    # filter from it; `residual` is its SQL)
    residual_nodes: dict[str, Node | None]
    pushed: dict[str, list[str]] = field(default_factory=dict)
    # conjuncts of `where` the selection could not use: the matches are then a superset
    not_used: list[dict[str, str]] = field(default_factory=list)

    @property
    def residual(self) -> dict[str, str | None]:
        return {v: to_sql(n) if n is not None else None for v, n in self.residual_nodes.items()}

    def to_json(self) -> dict[str, Any]:
        return {
            "where": self.where,
            "manifest_query": self.manifest_query,
            "partitions_total": self.total,
            "partitions_matched": len(self.matches),
            "residual": self.residual,
            "pushed": self.pushed,
            "not_used": self.not_used,
            "exact": not self.not_used,
            "partitions": [
                {
                    "table": m.table,
                    "spec_version": m.spec_version,
                    "location": m.location,
                    **m.published.as_json(),
                    "values": {k: json_value(v) for k, v in m.values.items()},
                    "rows": m.rows,
                    "bytes": m.bytes,
                }
                for m in self.matches
            ],
        }


def select_partitions(
    ns: Namespace, where: str | Node | None, strict: bool = False, label: str = "predicate"
) -> PartitionSelection:
    """The partition tables `where` may match: a condition's text, parsed here, or one parsed
    already (a read's, `pipeline/read_plan.py`: then it is not parsed again). Conjuncts the
    predicate model cannot represent are not used (named in `not_used`; the answer is then a
    superset), or with `strict` (a read that applies the residual as its whole filter)
    refused. A malformed `where`, an unknown column or a literal that can be no value of its
    column's type is refused (InvalidInputError, its message beginning with `label`)."""
    ns.require_root()
    dataset = ns.manifest.open_dataset()
    metadata = dict(dataset.metadata or {}) if dataset is not None else {}
    layout = layout_from_metadata(metadata)
    if layout is None:
        raise InvalidInputError(
            "the root is not a partitioned namespace: run `lancens add-partition-spec` first"
        )
    _require_readable(metadata)
    split, predicate = None, None
    if isinstance(where, str) and where:
        from lancens_cli.partition.spark_conditions import split_condition  # sqlglot: if asked

        split = split_condition(where, layout.schema, "lance", floats=True, label=label)
        if strict and split.left:
            part = split.left[0]
            raise InvalidInputError(f"predicate: {part.reason} in {part.text!r}")
        predicate = split.pushed_node()
    elif where is not None and not isinstance(where, str):
        predicate = where  # parsed already: understood by the predicate model, whole
        where = to_sql(where)
    chosen = plan(predicate, layout.specs, layout.schema)
    condition = chosen.manifest_filter()
    columns = _columns(dataset, layout)
    try:
        found = dataset.to_table(columns=columns, filter=condition).to_pylist()
        total = dataset.count_rows(filter="object_type = 'table'")
    except (ValueError, OSError, RuntimeError) as exc:
        raise ManifestError(f"__manifest cannot be queried: {exc}") from None
    by_namespace = specs_by_namespace(layout.specs)
    matches = []
    for row in sorted(found, key=lambda r: r["object_id"]):
        spec = by_namespace.get(top_namespace(row["object_id"]))
        if spec is None:
            continue
        matches.append(
            PartitionMatch(
                table=Identifier.from_object_id(row["object_id"]).display(),
                spec_version=spec.id,
                location=row["location"],
                published=PublishedRef.of(row),
                values={f.field_id: row.get(f.column) for f in spec.fields},
                object_id=row["object_id"],
            )
        )
    query = (
        f"SELECT object_id, location, read_version, read_branch, read_tag\n"
        f"FROM {MANIFEST_TABLE}\nWHERE {condition}"
    )
    return PartitionSelection(
        where=where,
        manifest_query=query,
        total=total,
        matches=matches,
        residual_nodes={f"v{v.spec_id}": v.residual_node for v in chosen.versions},
        pushed={f"v{v.spec_id}": [to_sql(p) for p in v.pushed] for v in chosen.versions},
        not_used=[{"condition": c.text, "reason": c.reason or ""} for c in split.left]
        if split is not None
        else [],
    )


def _columns(dataset: Any, layout: PartitionLayout) -> list[str]:
    names = set(dataset.schema.names)
    wanted = ["object_id", "location", *READ_COLUMNS]
    wanted += [f.column for f in layout.fields.values()]
    missing = [c for c in wanted if c not in names]
    if missing:
        raise ManifestError(
            f"__manifest lacks {', '.join(missing)}: run `lancens check --fix` to rebuild them"
        )
    return wanted


def _require_readable(metadata: dict[str, str]) -> None:
    flags = int(metadata.get(READER_FLAGS_KEY) or 0)
    if flags & ~KNOWN_READER_FLAGS:
        raise ManifestError(
            f"__manifest requires reader features {flags} that this version of lancens does "
            "not understand; upgrade lancens"
        )


SORT_KEYS = ("table", "rows", "bytes")


def with_sizes(ns: Namespace, selection: PartitionSelection, sort: str = "table") -> None:
    """Each match's rows and bytes at its published version (one manifest read per table, no
    data file), then the matches in `sort` order: `rows` or `bytes` largest first, so that a
    skewed partition shows at the top."""
    if sort not in SORT_KEYS:
        raise InvalidInputError(f"--sort {sort!r}: one of {', '.join(SORT_KEYS)}")
    rows = [
        {
            "object_id": m.object_id,
            "location": m.location,
            **m.published.as_json(),
        }
        for m in selection.matches
    ]
    sizes = published_sizes(ns.storage, ns.snapshot(), rows)
    for match in selection.matches:
        size = sizes.get(match.object_id)
        match.rows, match.bytes = (size.rows, size.bytes) if size is not None else (None, None)
    if sort != "table":  # largest first, ties in table order, unknown sizes last
        selection.matches.sort(key=lambda m: (getattr(m, sort) is None, -(getattr(m, sort) or 0)))
