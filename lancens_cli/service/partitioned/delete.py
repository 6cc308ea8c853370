"""`lancens delete --where`: rows removed from a partitioned namespace, all in one commit.

The condition selects partition tables as a read does (`partitions --where`, across spec
versions: the partition values decide what they can); each selected table gets Lance's Delete of
the rows its filter matches (the condition rendered for that table's schema generation), made
on the version `__manifest` publishes, and every changed table's new `read_version` goes into ONE
`__manifest` commit through the write's commit path (`write.commit_touches`): readers see all of
the delete or none of it, and a partition another writer changed meanwhile is deleted from
again on top of what that writer published (a rebase), never over it. The condition parser
(sqlglot) is imported inside `delete_condition`, where a condition is read: `merge` renders
filters from this module and reads none.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from lancens_cli.errors import ConcurrentModificationError, InvalidInputError, RefusedError
from lancens_cli.models import Result, json_value
from lancens_cli.partition.predicate import FALSE, And, Node, flatten
from lancens_cli.partition.schema_evolution import column_sources, history_from_metadata
from lancens_cli.partition.table_filter import filter_for
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.partitions import PartitionMatch, select_partitions
from lancens_cli.service.partitioned.placement import PartitionTouch
from lancens_cli.service.partitioned.write import PartitionWrite, commit_touches, partitioned_target
from lancens_cli.store.catalog_rows import open_published
from lancens_cli.store.containment import directory_location_problem
from lancens_cli.store.manifest import ManifestSnapshot

ZONE = "UTC"  # what a timestamp literal without a zone means, as `scan --where` reads it
EVERY_ROW = "true"  # the filter of a table whose partition values decide the whole condition
_OPENERS = 8  # partition tables opened (and counted, for a dry run) at once


@dataclass
class DeletedPartition:
    """One partition table the condition can match, and what the delete did there."""

    table: str
    location: str
    spec_version: int
    values: dict[str, Any]
    filter: str  # the Lance filter its rows were deleted by
    rows: int = 0  # rows deleted (a dry run: that would be)
    read_version: int | None = None  # the version published now (a dry run: before)


@dataclass
class PartitionDelete(Result):
    where: str
    rows: int
    partitions: list[DeletedPartition]
    partitions_total: int  # partition tables in the namespace
    manifest_version: int = 0
    rebases: int = 0
    dry_run: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "where": self.where,
            "rows_deleted": self.rows,
            "partitions_total": self.partitions_total,
            "partitions_matched": len(self.partitions),
            "manifest_version": self.manifest_version,
            "rebases": self.rebases,
            "partitions": [
                {
                    "table": p.table,
                    "location": p.location,
                    "spec_version": p.spec_version,
                    "values": {k: json_value(v) for k, v in p.values.items()},
                    "filter": p.filter,
                    "rows_deleted": p.rows,
                    "read_version": p.read_version,
                }
                for p in self.partitions
            ],
        }


@dataclass
class _Target:
    match: PartitionMatch
    filter: str


@dataclass
class DeletePlan:
    """What a delete will do, worked out before anything is written: the condition, the
    snapshot it was planned on, and each matched table with its filter."""

    where: str
    node: Node
    snapshot: ManifestSnapshot
    layout: Any
    targets: list[_Target]
    matched: set[str]  # object ids of every table the condition can match
    partitions_total: int

    def described(self) -> PartitionDelete:
        partitions = [_described(t) for t in self.targets]
        result = PartitionDelete(self.where, 0, partitions, self.partitions_total)
        result.manifest_version = self.snapshot.version
        return result


def plan_delete(ns: Namespace, where: str) -> DeletePlan:
    """The partition tables `where` can match (as `partitions --where` selects them, across
    spec versions) and each one's Lance filter, at the versions published now. Every input
    error is raised here, before a table is opened for writing."""
    snapshot, layout = partitioned_target(ns)
    node = delete_condition(where, layout.schema)
    selection = select_partitions(ns, node, strict=True)
    history = history_from_metadata(snapshot.metadata)
    residual = selection.residual_nodes
    targets = run_in_parallel(
        lambda m: _target(ns, m, residual.get(f"v{m.spec_version}"), layout.schema, history),
        selection.matches,
    )
    matched = {m.object_id for m in selection.matches}
    chosen = [t for t in targets if t is not None]
    for target in chosen:  # refused now, dry run too: a change goes to main only
        branch = target.match.published.branch
        if branch is not None:
            raise RefusedError(
                f"partition {target.match.table} is published on branch {branch!r}: delete, "
                "update and merge change main only (restore or republish main first)"
            )
    return DeletePlan(where, node, snapshot, layout, chosen, matched, selection.total)


def count_deletes(ns: Namespace, plan: DeletePlan) -> PartitionDelete:
    """A dry run: the rows each planned table would lose, counted from exactly those tables at
    their published versions; nothing is written."""
    result = plan.described()
    counts = run_in_parallel(lambda t: _count(ns, t), plan.targets)
    for part, count in zip(result.partitions, counts, strict=True):
        part.rows = count
    result.rows, result.dry_run = sum(counts), True
    return result


def delete_rows(
    ns: Namespace,
    plan: DeletePlan,
    progress: Callable[[int], Callable[[], None]] | None = None,
) -> PartitionDelete:
    """Delete the planned rows, every changed table published in one `__manifest` commit
    (none when no row matched)."""
    result = plan.described()
    touches = [delete_touch(t.match, t.filter) for t in plan.targets]
    spec = plan.layout.current
    write = PartitionWrite(spec.id, 0, touches, [f.field_id for f in spec.fields])
    done = commit_touches(
        ns, plan.snapshot, plan.layout, write, progress=progress, guard=commit_guard(ns, plan)
    )
    for part, touch in zip(result.partitions, touches, strict=True):
        part.rows = touch.rows_deleted
        part.read_version = touch.version if touch.rows_deleted else touch.base_version
    result.rows = sum(t.rows_deleted for t in touches)
    result.manifest_version, result.rebases = done.manifest_version, done.rebases
    return result


def delete_condition(where: str, schema: Any) -> Node:
    """The condition as the predicate model holds it, or why it cannot be applied exactly
    (a partitioned namespace's and a table's alike)."""
    from lancens_cli.partition.spark_conditions import split_condition  # sqlglot: when parsing

    if not where.strip():
        raise InvalidInputError("--where: give the condition the rows must meet")
    condition = split_condition(where, schema, session_zone=ZONE, label="--where")
    for part in condition.left:
        raise InvalidInputError(
            f"--where: lancens cannot apply {part.text!r} exactly ({part.reason}); nothing "
            "was changed"
        )
    nodes = condition.understood
    return nodes[0] if len(nodes) == 1 else flatten(And(tuple(nodes)))


def commit_guard(ns: Namespace, plan: DeletePlan) -> Callable[[ManifestSnapshot], None]:
    """What a change of the planned rows checks before it publishes (`_no_new_matches`)."""
    return _no_new_matches(ns, plan.node, plan.matched, plan.snapshot.version)


def _no_new_matches(
    ns: Namespace, node: Node, known: set[str], read_at: int
) -> Callable[[ManifestSnapshot], None]:
    """What the commit checks first: no partition table the condition can match was created
    since the selection (its rows would outlive a delete ordered after them). Such a delete
    publishes nothing and says so; a partition that only changed is rebased instead."""

    def guard(snapshot: ManifestSnapshot) -> None:
        if snapshot.version == read_at:
            return
        new = sorted(
            m.table
            for m in select_partitions(ns, node, strict=True).matches
            if m.object_id not in known
        )
        if new:
            raise ConcurrentModificationError(
                f"{len(new)} partition table(s) the condition can match were created while the "
                f"change ran ({new[0]}{', ...' if len(new) > 1 else ''}); nothing was changed: "
                "run it again"
            )

    return guard


def _target(
    ns: Namespace, match: PartitionMatch, residual: Node | None, schema: Any, history: list[Any]
) -> _Target | None:
    """One matched table with its Lance filter for the rows to delete (None: no row of it can
    meet the condition, e.g. a column it lacks reads as NULL)."""
    problem = directory_location_problem(ns.storage, match.location)
    if problem is not None:
        raise RefusedError(
            f"partition table {match.table}: lancens will not change its location: {problem} "
            "(see `lancens check`)"
        )
    row = {**match.published.as_json(), "location": match.location}
    dataset = open_published(ns.storage, row)
    sources = column_sources(dataset.schema, schema, history)
    renamed = {name: source for name, source in sources.items() if source != name}
    rendered = filter_for(residual, dataset.schema, renamed)
    if rendered is FALSE:
        return None
    return _Target(match, EVERY_ROW if rendered is None else rendered)


def _described(target: _Target) -> DeletedPartition:
    match = target.match
    return DeletedPartition(
        match.table,
        match.location,
        match.spec_version,
        match.values,
        target.filter,
        read_version=match.published.version,
    )


def _count(ns: Namespace, target: _Target) -> int:
    """The rows the delete would remove from one table, at the version published now."""
    row = {**target.match.published.as_json(), "location": target.match.location}
    return int(open_published(ns.storage, row).count_rows(filter=target.filter))


def delete_touch(
    match: PartitionMatch, delete_filter: str, rows_from_base: bool = False
) -> PartitionTouch:
    """The commit-path touch that deletes a matched table's rows by `delete_filter`
    (`rows_from_base`: an update's or a merge's, whose new rows were worked out from the
    published version)."""
    return PartitionTouch(
        values=tuple(match.values.values()),
        rows=None,
        table_id=match.object_id,
        location=match.location,
        base_ref=match.published,
        base_version=match.published.version,
        delete_filter=delete_filter,
        rows_from_base=rows_from_base,
    )


def run_in_parallel(call: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    """`call` over the items (tables), a few at a time: each is its own Lance table."""
    if len(items) < 2:
        return [call(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(_OPENERS, len(items))) as pool:
        return list(pool.map(call, items))
