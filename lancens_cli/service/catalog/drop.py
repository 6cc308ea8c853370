"""`drop`, `register` and `deregister`.

Drop deletes the table data first and removes the manifest row second: a process killed between
the two leaves a row whose directory is gone or half gone, and a rerun of the same drop finishes
the job. The opposite order would leave untracked data behind.
"""

from __future__ import annotations

from collections.abc import Callable

from lancens_cli.errors import (
    InvalidInputError,
    NamespaceNotEmptyError,
    TableAlreadyExistsError,
    TableNotFoundError,
)
from lancens_cli.models import (
    KIND_NAMESPACE,
    KIND_TABLE,
    OBJECT_ID_DELIMITER,
    SOURCE_DIRECTORY,
    STATE_OK,
    Change,
    ChangeSet,
    Identifier,
)
from lancens_cli.service.catalog.dependents import attach, outside_dependents, refuse
from lancens_cli.service.catalog.manifest_rows import DROPPING_KEY, refuse_taken, table_row
from lancens_cli.service.namespace import Namespace, stale_rename_sources
from lancens_cli.service.partitioned.refusals import refuse_spec_names
from lancens_cli.store.containment import directory_location_problem
from lancens_cli.store.manifest import (
    ManifestEdit,
    ManifestSnapshot,
    decode_properties,
    encode_properties,
)
from lancens_cli.store.row_verdicts import row_locations
from lancens_cli.store.storage import check_relative
from lancens_cli.store.tables import (
    DEREGISTERED_MARKER,
    table_state,
    write_deregistered_marker,
)


def plan_drop(
    ns: Namespace,
    ident: Identifier,
    *,
    cascade: bool,
    delimiter: str = ".",
    dependents: bool = False,
) -> ChangeSet:
    """What dropping `ident` would remove (also the --dry-run answer).

    With `dependents`, the tables outside the drop that read the dropped data through base
    paths are found and attached to the plan.
    """
    plan = _plan_drop(ns, ident, cascade, delimiter)
    if dependents:
        locations = [c.location for c in plan.changes if c.kind == KIND_TABLE and c.location]
        attach(plan, outside_dependents(ns, ns.snapshot(), locations, delimiter))
    return plan


def refuse_breaking(plan: ChangeSet, ident: Identifier, delimiter: str = ".") -> None:
    """Exit 5 when deleting the planned data would break a table outside the drop."""
    if plan.dependents:
        refuse(
            f"deleting the data of {ident.display(delimiter)}",
            plan.dependents,
            "drop those tables first, or use --keep-data",
        )


def _plan_drop(ns: Namespace, ident: Identifier, cascade: bool, delimiter: str) -> ChangeSet:
    if ident.is_root:
        raise InvalidInputError("the root namespace cannot be dropped")
    ns.require_root()
    snapshot = ns.snapshot()
    if len(ident.parts) > 1:
        ns.require_namespace(ident.parent, snapshot)
    row = snapshot.get(ident.object_id)
    if row is not None and row["object_type"] == KIND_NAMESPACE:
        below = snapshot.children(ident.object_id, recursive=True)
        if below and not cascade:
            raise NamespaceNotEmptyError(
                f"namespace {ident.display(delimiter)} is not empty ({len(below)} objects); "
                "use --cascade to drop it with everything in it"
            )
        verdicts = row_locations(ns.storage, snapshot)
        for r in below:  # one refused row refuses the whole cascade: nothing is deleted
            verdicts.require(r["object_id"])
        # Deepest first, so a namespace goes after everything in it.
        ordered = sorted(below, key=lambda r: -r["object_id"].count(OBJECT_ID_DELIMITER))
        changes = [
            Change(
                "drop",
                r["object_type"],
                Identifier.from_object_id(r["object_id"]).display(delimiter),
                r["location"],
            )
            for r in ordered
        ]
        changes.append(Change("drop", KIND_NAMESPACE, ident.display(delimiter)))
        return ChangeSet(changes)
    ref = ns.find_table(ident, snapshot)
    if ref is None:
        raise TableNotFoundError(f"{ident.display(delimiter)} does not exist")
    return ChangeSet([Change("drop", KIND_TABLE, ident.display(delimiter), ref.location)])


def drop(
    ns: Namespace,
    ident: Identifier,
    *,
    cascade: bool = False,
    keep_data: bool = False,
    dry_run: bool = False,
    delimiter: str = ".",
    force: bool = False,
    progress: Callable[[int], Callable[[], None]] | None = None,
) -> ChangeSet:
    """`progress(total)` is called with the number of tables whose data goes; what it
    returns, once per table deleted."""
    plan = plan_drop(ns, ident, cascade=cascade, delimiter=delimiter, dependents=not keep_data)
    for change in plan.changes:
        change.dry_run = dry_run
        if keep_data and change.kind == KIND_TABLE:
            change.detail = "data kept"
    if dry_run:
        plan.dry_run = True
        return plan
    if not force and not keep_data:
        refuse_breaking(plan, ident, delimiter)
    ns.require_writable(ns.snapshot())  # never delete data the manifest would keep pointing at
    tables = [c for c in plan.changes if c.kind == KIND_TABLE and c.location]
    if not keep_data:
        if ns.config.manifest_enabled:
            _mark_dropping(ns, tables, delimiter)
        advance = progress(len(tables)) if progress else None
        for change in tables:
            ns.storage.delete_tree(_table_location(change))
            if advance:
                advance()
    else:
        # Mark what we forget, so that neither dir listing nor `check --fix` brings it back.
        for change in tables:
            location = _table_location(change)
            if ns.storage.exists(location):
                write_deregistered_marker(ns.storage, location)
    if ns.config.manifest_enabled:
        ids = {Identifier.parse(c.id, delimiter).object_id for c in plan.changes}

        def remove(snapshot: ManifestSnapshot, edit: ManifestEdit) -> None:
            if not cascade:
                _require_not_renamed(snapshot, tables, delimiter)
            for object_id in ids:
                edit.remove(object_id)
            if cascade:  # anything created below the namespace meanwhile goes too
                for row in snapshot.children(ident.object_id, recursive=True):
                    edit.remove(row["object_id"])

        ns.manifest.mutate(remove)
    return plan


def _table_location(change: Change) -> str:
    """The location of a table whose data a drop deletes (`tables` keeps those with one)."""
    if change.location is None:
        raise ValueError(f"table {change.id}: a drop of its data needs its location")
    return change.location


def _mark_dropping(ns: Namespace, tables: list[Change], delimiter: str) -> None:
    """One commit that marks every table row about to lose its data, before anything is deleted.

    A rename commits compare-and-swap too, and refuses a marked row: so either the rename landed
    first (the row moved: this drop exits 3 and deletes nothing, the renamed table is whole) or
    the mark did (the rename exits 4). Without it, a rename landing between this drop's look-up
    and its delete would lose the renamed table's data. A killed drop leaves the mark; its rerun
    finishes the drop.
    """
    wanted = {Identifier.parse(c.id, delimiter).object_id: c for c in tables}

    def mark(snapshot: ManifestSnapshot, edit: ManifestEdit) -> None:
        for object_id, change in wanted.items():
            row = snapshot.get(object_id)
            if row is None:
                location = _table_location(change)
                moved = snapshot.locations().get(location) not in (None, object_id)
                if (
                    moved
                    or location in stale_rename_sources(snapshot)
                    or not ns.storage.exists(location)
                ):
                    raise TableNotFoundError(
                        f"table {change.id} no longer exists: another process renamed or "
                        "dropped it meanwhile; nothing was dropped"
                    )
                continue  # known from its directory only
            if row["location"] != change.location:
                raise TableNotFoundError(
                    f"table {change.id} changed its location meanwhile (renamed?); "
                    "nothing was dropped"
                )
            properties = decode_properties(row["metadata"])
            if DROPPING_KEY not in properties:
                properties[DROPPING_KEY] = "true"
                edit.replace(object_id, metadata=encode_properties(properties))

    if wanted:
        ns.manifest.mutate(mark)


def _require_not_renamed(snapshot, tables: list[Change], delimiter: str) -> None:
    """A table renamed while we deleted its directory: exit 3, do not report it dropped.

    The directory we deleted was then the old one a moving rename had copied from (the rename
    refuses to commit once `_versions/` lost a file), so the renamed table is whole.
    """
    for change in tables:
        object_id = Identifier.parse(change.id, delimiter).object_id
        owner = snapshot.locations().get(change.location)
        if owner not in (None, object_id) or change.location in stale_rename_sources(snapshot):
            raise TableNotFoundError(
                f"table {change.id} no longer exists: another process renamed it meanwhile"
            )


def register(
    ns: Namespace,
    ident: Identifier,
    location: str,
    *,
    properties: dict[str, str] | None = None,
    allow_non_lance: bool = False,
    dry_run: bool = False,
) -> ChangeSet:
    """Record an existing table directory (relative to the root) under a name."""
    if ident.is_root:
        raise InvalidInputError("a table needs a name")
    location = check_relative(location.rstrip("/"))
    ns.require_manifest("register")
    ns.require_root()
    problem = directory_location_problem(ns.storage, location)  # before anything is read
    if problem is not None:
        raise InvalidInputError(f"cannot register {location!r}: {problem}")
    state = table_state(ns.storage, location)
    if state != STATE_OK and not allow_non_lance:
        raise InvalidInputError(f"{location!r} is not a Lance table ({state})")
    change = Change("register", KIND_TABLE, ident.display(), location, dry_run=dry_run)

    def plan(snapshot: ManifestSnapshot, edit: ManifestEdit) -> ChangeSet:
        refuse_spec_names(snapshot, ident)
        ns.require_namespace(ident.parent, snapshot)
        refuse_taken(ns, ident, snapshot)
        owner = snapshot.locations().get(location)
        if owner is not None:
            raise TableAlreadyExistsError(f"{location!r} is already registered as {owner}")
        if not dry_run:
            edit.add(table_row(ident.object_id, location, properties))
        return ChangeSet([change], dry_run)

    if dry_run:
        snapshot = ns.snapshot()
        return plan(snapshot, ManifestEdit(snapshot))
    result = ns.manifest.mutate(plan)
    ns.storage.delete_file(f"{location}/{DEREGISTERED_MARKER}")  # registered again: visible
    return result


def deregister(ns: Namespace, ident: Identifier, *, dry_run: bool = False) -> ChangeSet:
    """Forget a table but keep its files.

    The directory gets the reference's `.lance-deregistered` marker, which both tools honour:
    a root `<name>.lance` does not reappear through directory listing, and `check --fix` does
    not register a V2 directory again as an orphan.
    """
    if ident.is_root:
        raise InvalidInputError("the root namespace cannot be deregistered")
    ns.require_root()
    snapshot = ns.snapshot()
    if len(ident.parts) > 1:
        ns.require_namespace(ident.parent, snapshot)
    ref = ns.find_table(ident, snapshot)
    if ref is None:
        raise TableNotFoundError(f"table {ident.display()} does not exist")
    change = Change("deregister", KIND_TABLE, ident.display(), ref.location, dry_run=dry_run)
    if dry_run:
        return ChangeSet([change], True)
    if ns.storage.exists(ref.location):
        write_deregistered_marker(ns.storage, ref.location)
    if ref.source != SOURCE_DIRECTORY and ns.config.manifest_enabled:

        def plan(snapshot: ManifestSnapshot, edit: ManifestEdit) -> None:
            if snapshot.get(ident.object_id) is None:
                raise TableNotFoundError(f"table {ident.display()} does not exist")
            edit.remove(ident.object_id)

        ns.manifest.mutate(plan)
    return ChangeSet([change])
