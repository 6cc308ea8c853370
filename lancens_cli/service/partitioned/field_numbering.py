"""`check` of the namespace schema's field ids against Lance's numbering, and `--fix`.

Spec 004 wants field ids "consistent across partition tables", and Lance numbers every table's
fields itself. A namespace made by an older lancens numbered a vector's element and not a
map's entries, so each column after one has another id in the namespace schema than in every
partition table (partition/renumber.py). The repair is safe when the partition tables agree
among themselves: the schema, its history and every spec's `source_ids` take their ids in one
`__manifest` metadata commit; no table changes.
"""

from __future__ import annotations

from typing import Any

from lancens_cli.errors import InvalidInputError
from lancens_cli.models import MANIFEST_TABLE, Identifier
from lancens_cli.partition.renumber import (
    Renumbering,
    lance_paths,
    numbering_faults,
    renumbered,
)
from lancens_cli.partition.schema import schema_to_text
from lancens_cli.partition.schema_evolution import (
    HISTORY_KEY,
    history_from_metadata,
    history_text,
    shape,
)
from lancens_cli.partition.spec import SCHEMA_KEY
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.evolve_schema import TableSchema, published_table_schemas
from lancens_cli.service.partitioned.layout import PartitionLayout, layout_of
from lancens_cli.store.manifest import ManifestEdit, ManifestSnapshot

CODE = "namespace_field_ids_unlike_lance"


def check_numbering(
    snapshot: ManifestSnapshot, layout: PartitionLayout, tables: list[TableSchema], report: Any
) -> bool:
    """Report a namespace schema numbered unlike Lance; True when it is (the per-table id
    comparison would then repeat this one finding for every table)."""
    faults = numbering_faults(layout.schema)
    if not faults:
        return False
    try:
        plan = plan_renumbering(snapshot, layout, tables)
        remedy = f"--fix renumbers it from the partition tables ({_moves(plan)})"
    except InvalidInputError as exc:
        plan, remedy = None, f"--fix cannot renumber it: {exc.message}"
    shown = "; ".join(faults[:3]) + (f"; and {len(faults) - 3} more" if len(faults) > 3 else "")
    report.add(
        CODE,
        None,
        MANIFEST_TABLE,
        f"the namespace schema's field ids are not Lance's ({shown}), so columns after "
        f"these have other ids than in the partition tables; {remedy}",
        fixable=plan is not None,
    )
    return True


def plan_renumbering(
    snapshot: ManifestSnapshot, layout: PartitionLayout, tables: list[TableSchema]
) -> Renumbering:
    """The schema, history and specs renumbered as the partition tables at the current
    schema are numbered (InvalidInputError, in words, when they disagree)."""
    paths = lance_paths(layout.schema)
    current = [t for t in tables if shape(t.schema) == shape(layout.schema)]
    agreed: dict[str, int] | None = None
    for table in current:
        ids = {p: table.ids[p] for p in paths if p in table.ids}
        if agreed is None:
            agreed = ids
        elif ids != agreed:
            path = next(p for p in paths if ids.get(p) != agreed.get(p))
            first = Identifier.from_object_id(current[0].row["object_id"]).display()
            other = Identifier.from_object_id(table.row["object_id"]).display()
            raise InvalidInputError(
                f"the partition tables disagree ({path} has id {agreed.get(path)} in {first}, "
                f"{ids.get(path)} in {other}); rewrite the namespace: `lancens scan --to DIR`, "
                "then `add-partition-spec` and `write` into a new root"
            )
    history = history_from_metadata(snapshot.metadata)
    return renumbered(layout.schema, history, layout.specs, agreed)


def _moves(plan: Renumbering) -> str:
    moves = [f"{p} {old}->{new}" for p, (old, new) in plan.moved.items() if old is not None]
    shown = ", ".join(moves[:4]) + (", ..." if len(moves) > 4 else "")
    return shown or "ids added where Lance numbers a field"


def fix_numbering(ns: Namespace, report: Any) -> None:
    """Renumber in one `__manifest` metadata commit, planned on the newest snapshot."""
    findings = [f for f in report.findings if f.code == CODE and f.fixable and not f.fixed]
    if not findings:
        return

    def plan(snapshot: ManifestSnapshot, edit: ManifestEdit) -> None:
        layout = layout_of(snapshot)
        if layout is None or not numbering_faults(layout.schema):
            return  # renumbered already (this commit landed, or another fix did)
        tables = published_table_schemas(ns.storage, snapshot, layout)
        renumbering = plan_renumbering(snapshot, layout, tables)
        updates = {SCHEMA_KEY: schema_to_text(renumbering.schema)}
        if HISTORY_KEY in snapshot.metadata:
            updates[HISTORY_KEY] = history_text(renumbering.history)
        updates |= {spec.key: spec.to_text() for spec in renumbering.specs}
        edit.set_metadata(updates)

    ns.manifest.mutate(plan)
    for finding in findings:
        finding.fixed = True
        finding.message += "; fixed"
