"""`create namespace` and `create table`.

A table is written first and registered second, in one manifest commit that re-checks the name:
of several processes racing for one new name exactly one wins. A loser removes the directory it
wrote, unless the directory is the shared `<name>.lance` of a root table, which it never owns:
there it removes only the files it wrote itself. `create` never deletes a file it did not write;
the debris of a killed write is `check --fix`'s, once older than the grace period.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lancens_cli.errors import (
    InvalidInputError,
    TableAlreadyExistsError,
    UnsupportedError,
)
from lancens_cli.models import (
    KIND_NAMESPACE,
    KIND_TABLE,
    SOURCE_DIRECTORY,
    STATE_UNCOMMITTED,
    Change,
    ChangeSet,
    Identifier,
)
from lancens_cli.service.catalog.manifest_rows import namespace_row, refuse_taken, table_row
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.refusals import refuse_spec_names
from lancens_cli.store.manifest import ManifestEdit, ManifestSnapshot
from lancens_cli.store.tables import (
    VERSIONS_DIR,
    table_state,
    v1_location,
    v2_location,
    v2_location_pattern,
    write_new_table,
    write_reserved_marker,
)


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
        refuse_spec_names(snapshot, ident)
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


def new_table_location(ns: Namespace, ident: Identifier, snapshot: ManifestSnapshot) -> str:
    """Spec 000: `<name>.lance` for root tables while dir listing is on, else `<hash>_<id>`.

    A `<name>.lance` directory that is already there (kept by `drop --keep-data`, or another
    table's after `rename --keep-location`) is never reused: the new table gets a V2 directory.
    """
    if len(ident.parts) == 1 and ns.config.dir_listing_enabled:
        location = v1_location(ident.name)
        if location not in snapshot.locations() and not ns.storage.exists(location):
            return location
    return v2_location(ident.object_id)


def refuse_uncommitted_write(ns: Namespace, ident: Identifier, snapshot: ManifestSnapshot) -> None:
    """Refuse the name of a root `<name>.lance` that holds only an uncommitted write's files.

    Spec 001 makes the directory a table. It may be the debris of a killed `create` or a copy
    still in progress (data before `_versions/`); the two look alike, so `create` writes over
    neither and deletes nothing: it says how the debris goes once nobody is writing it.
    """
    ref = ns.find_table(ident, snapshot)
    if ref is None or ref.source != SOURCE_DIRECTORY:
        return
    if table_state(ns.storage, ref.location) == STATE_UNCOMMITTED:
        raise TableAlreadyExistsError(
            f"table {ident.display()} already exists: {ref.location} holds only the data files "
            "of a table write that never committed (a killed create, or a copy in progress); "
            "nothing was changed. If no write is in flight, `lancens check --fix` deletes it "
            "once it is older than the grace period (--grace-minutes); then rerun the create"
        )


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
    refuse_spec_names(snapshot, ident)
    ns.require_namespace(ident.parent, snapshot)
    refuse_uncommitted_write(ns, ident, snapshot)  # even with --exist-ok: it holds no table
    if exist_ok and ns.find_table(ident, snapshot) is not None:
        return ChangeSet([Change("exists", KIND_TABLE, ident.display())], dry_run)
    refuse_taken(ns, ident, snapshot)
    location = new_table_location(ns, ident, snapshot)
    if dry_run:
        if location != v1_location(ident.name):  # the random prefix is drawn at creation
            location = v2_location_pattern(ident.object_id)
        return ChangeSet(
            [Change("create", KIND_TABLE, ident.display(), location, dry_run=True)], True
        )
    ns.require_writable(snapshot)  # before writing any data the manifest could not record
    # A V2 directory has a random name and is ours alone; the root `<name>.lance` is shared
    # with anyone racing for the same name until one of us commits its version 1.
    exclusive = location != v1_location(ident.name)
    written = None
    if declare:
        write_reserved_marker(ns.storage, location)
        owned = exclusive
    else:
        if schema is not None:
            data = pa.Table.from_batches([], schema=schema)
        try:
            written = write_new_table(ns.storage, location, data, exclusive=exclusive)
        except TableAlreadyExistsError:
            raise TableAlreadyExistsError(f"table {ident.display()} already exists") from None
        owned = True  # we committed version 1: the table is ours

    return register_new_table(
        ns, ident, location, properties, owned=owned, exclusive=exclusive, written=written
    )


def register_new_table(
    ns: Namespace,
    ident: Identifier,
    location: str,
    properties: dict[str, str] | None = None,
    *,
    owned: bool = True,
    exclusive: bool = True,
    written: Any = None,
) -> ChangeSet:
    """The manifest commit of a table whose version 1 is written: it re-checks the name.

    A loser removes what it wrote when it `owned` it (and a racer did not declare that very
    directory): the whole directory when it was `exclusive` to us (a random V2 name), else only
    the files of its own version 1 (`written`, the dataset it committed in a shared
    `<name>.lance`). `create table` and the Spark data source's `.save("ns.table")` of
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
        if owned and exclusive:
            ns.storage.delete_tree(location)
        elif owned and written is not None:
            _remove_own_version(ns, location, written)
        raise


def _remove_own_version(ns: Namespace, location: str, dataset: Any) -> None:
    """Undo our version 1 in a shared `<name>.lance`, removing only the files we wrote.

    Those are the version's manifest (with the version hint), its data files and its
    transaction file. If anyone committed a version on top meanwhile, the table is theirs too
    and everything stays. The directory goes only when nothing at all is left in it.
    """
    versions = [
        path
        for path, _ in ns.storage.walk_files(f"{location}/{VERSIONS_DIR}")
        if path.endswith(".manifest")
    ]
    if len(versions) != 1:
        return
    files = [
        f"data/{data_file.path}"
        for fragment in dataset.get_fragments()
        for data_file in fragment.data_files()
    ]
    try:
        transaction = dataset.read_transaction(1)
        files.append(f"_transactions/{transaction.read_version}-{transaction.uuid}.txn")
    except (ValueError, OSError, RuntimeError, AttributeError, TypeError):
        pass  # an unreferenced transaction file stays: harmless, `check --fix` may take it
    ns.storage.delete_tree(f"{location}/{VERSIONS_DIR}")  # first: it stops being a table at once
    for path in files:
        ns.storage.delete_file(f"{location}/{path}")
    if not any(True for _ in ns.storage.walk_files(location)):
        ns.storage.delete_tree(location)
