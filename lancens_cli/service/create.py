"""`create namespace` and `create table`.

A table is written first and registered second, in one manifest commit that re-checks the name:
of several processes racing for one new name exactly one wins. A loser removes the directory it
wrote, unless the directory is the shared `<name>.lance` of a root table, which it never owns.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from lancens_cli.errors import (
    InvalidInputError,
    NamespaceAlreadyExistsError,
    TableAlreadyExistsError,
    UnsupportedError,
)
from lancens_cli.models import (
    KIND_NAMESPACE,
    KIND_TABLE,
    SOURCE_DIRECTORY,
    Change,
    ChangeSet,
    Identifier,
)
from lancens_cli.service.namespace import Namespace
from lancens_cli.store.manifest import ManifestEdit, ManifestSnapshot, encode_properties
from lancens_cli.store.tables import (
    uncommitted_write,
    v1_location,
    v2_location,
    write_new_table,
    write_reserved_marker,
)


def table_row(object_id: str, location: str, properties: dict[str, str] | None) -> dict:
    return {
        "object_id": object_id,
        "object_type": KIND_TABLE,
        "location": location,
        "metadata": encode_properties(properties),
        "base_objects": None,
    }


def namespace_row(object_id: str, properties: dict[str, str] | None = None, **columns) -> dict:
    """A namespace row; `columns` are extra ones (a partition namespace's values)."""
    return {
        "object_id": object_id,
        "object_type": KIND_NAMESPACE,
        "location": None,
        "metadata": encode_properties(properties),
        "base_objects": None,
        **columns,
    }


def refuse_taken(ns: Namespace, ident: Identifier, snapshot: ManifestSnapshot) -> None:
    """Raise the right 'already exists' error if anything answers to `ident`."""
    existing = ns.kind_of(ident, snapshot)
    if existing == KIND_NAMESPACE:
        raise NamespaceAlreadyExistsError(f"namespace {ident.display()} already exists")
    if existing == KIND_TABLE:
        raise TableAlreadyExistsError(f"table {ident.display()} already exists")


def create_namespace(
    ns: Namespace,
    ident: Identifier,
    *,
    properties: dict[str, str] | None = None,
    exist_ok: bool = False,
    dry_run: bool = False,
) -> ChangeSet:
    if ident.is_root:
        raise InvalidInputError("the root namespace always exists")
    ns.require_manifest("creating a namespace")
    ns.require_root()

    def plan(snapshot: ManifestSnapshot, edit: ManifestEdit) -> ChangeSet:
        ns.require_namespace(ident.parent, snapshot)
        if exist_ok and ns.namespace_exists(ident, snapshot):
            return ChangeSet([Change("exists", KIND_NAMESPACE, ident.display())], dry_run)
        refuse_taken(ns, ident, snapshot)
        if not dry_run:
            edit.add(namespace_row(ident.object_id, properties))
        change = Change("create", KIND_NAMESPACE, ident.display(), dry_run=dry_run)
        return ChangeSet([change], dry_run)

    if dry_run:
        return plan(ns.snapshot(), ManifestEdit(ns.snapshot()))
    return ns.manifest.mutate(plan)


def new_table_location(
    ns: Namespace, ident: Identifier, snapshot: ManifestSnapshot, *, adopt: bool = False
) -> str:
    """Spec 000: `<name>.lance` for root tables while dir listing is on, else `<hash>_<id>`.

    A `<name>.lance` directory that is already there (kept by `drop --keep-data`, or another
    table's after `rename --keep-location`) is never reused: the new table gets a V2 directory.
    The exception (`adopt`) is the debris of a write that never committed.
    """
    if len(ident.parts) == 1 and ns.config.dir_listing_enabled:
        location = v1_location(ident.name)
        if location not in snapshot.locations() and (adopt or not ns.storage.exists(location)):
            return location
    return v2_location(ident.object_id)


def interrupted_root_write(
    ns: Namespace, ident: Identifier, snapshot: ManifestSnapshot
) -> list[str] | None:
    """The files of a root table write that died before its version 1, if that is all there is.

    Spec 001 makes any `<name>.lance` directory a table, but one that holds only the data
    files of an uncommitted write was never a table anyone could read: a rerun of the `create`
    that left it writes the table there instead of refusing the name.
    """
    ref = ns.find_table(ident, snapshot)
    if ref is None or ref.source != SOURCE_DIRECTORY or ref.location != v1_location(ident.name):
        return None
    return uncommitted_write(ns.storage, ref.location)


DEBRIS_AGE = timedelta(minutes=1)


def _remove_debris(ns: Namespace, location: str, debris: list[str]) -> None:
    """Delete the dead write's files once our version 1 is in: nobody can commit them now.

    Only files older than DEBRIS_AGE go: a younger one may be a racer's, still being written
    (on local disk, a temporary file it is about to rename), and pulling it away would fail
    that racer with an I/O error instead of the clean "already exists" it is owed. What is
    left is unreferenced and harmless.
    """
    now = datetime.now(UTC)
    for path in debris:
        changed = ns.storage.modified(f"{location}/{path}")
        if changed is not None and now - changed > DEBRIS_AGE:
            ns.storage.delete_file(f"{location}/{path}")


def create_table(
    ns: Namespace,
    ident: Identifier,
    *,
    data: Any = None,
    schema: Any = None,
    declare: bool = False,
    properties: dict[str, str] | None = None,
    exist_ok: bool = False,
    dry_run: bool = False,
) -> ChangeSet:
    """Create a table from data (a RecordBatchReader or Table), an empty schema, or declared."""
    if ident.is_root:
        raise InvalidInputError("a table needs a name")
    if sum(x is not None for x in (data, schema)) + int(declare) != 1:
        raise InvalidInputError("give exactly one of --schema, --from or --declare")
    if len(ident.parts) > 1:
        ns.require_manifest("a table in a child namespace")
    if properties and not ns.config.manifest_enabled:
        raise UnsupportedError("table properties need the manifest (manifest_enabled is false)")
    ns.require_root()

    snapshot = ns.snapshot()
    ns.require_namespace(ident.parent, snapshot)
    debris = None if declare else interrupted_root_write(ns, ident, snapshot)
    if debris is None:
        if exist_ok and ns.find_table(ident, snapshot) is not None:
            return ChangeSet([Change("exists", KIND_TABLE, ident.display())], dry_run)
        refuse_taken(ns, ident, snapshot)
    location = new_table_location(ns, ident, snapshot, adopt=debris is not None)
    if dry_run:
        return ChangeSet(
            [Change("create", KIND_TABLE, ident.display(), location, dry_run=True)], True
        )
    ns.require_writable(snapshot)  # before writing any data the manifest could not record
    # A V2 directory has a random name and is ours alone; the root `<name>.lance` is shared
    # with anyone racing for the same name until one of us commits its version 1.
    exclusive = location != v1_location(ident.name)
    if declare:
        write_reserved_marker(ns.storage, location)
        owned = exclusive
    else:
        if schema is not None:
            import pyarrow as pa

            data = pa.Table.from_batches([], schema=schema)
        try:
            write_new_table(ns.storage, location, data, exclusive=exclusive)
        except TableAlreadyExistsError:
            raise TableAlreadyExistsError(f"table {ident.display()} already exists") from None
        owned = True  # we committed version 1: the directory is ours
        _remove_debris(ns, location, debris or [])

    return register_new_table(ns, ident, location, properties, owned=owned)


def register_new_table(
    ns: Namespace,
    ident: Identifier,
    location: str,
    properties: dict[str, str] | None = None,
    *,
    owned: bool = True,
) -> ChangeSet:
    """The manifest commit of a table whose version 1 is written: it re-checks the name.

    A loser removes the directory it wrote when it `owned` it (and a racer did not declare
    that very directory). `create table` and the Spark data source's `.save("ns.table")` of
    a new table both end here.
    """
    change = Change("create", KIND_TABLE, ident.display(), location)
    if not ns.config.manifest_enabled:
        return ChangeSet([change])

    def plan(snapshot: ManifestSnapshot, edit: ManifestEdit) -> ChangeSet:
        nonlocal owned
        ns.require_namespace(ident.parent, snapshot)
        row = snapshot.get(ident.object_id)
        if row is not None:
            if row["location"] == location:
                owned = False  # a racer declared this very directory: it is theirs
            raise TableAlreadyExistsError(f"table {ident.display()} already exists")
        edit.add(table_row(ident.object_id, location, properties))
        return ChangeSet([change])

    try:
        return ns.manifest.mutate(plan)
    except BaseException:
        if owned:
            ns.storage.delete_tree(location)
        raise
