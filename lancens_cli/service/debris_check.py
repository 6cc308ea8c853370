"""`check` of what a listing of the root finds that no `__manifest` row accounts for: table
directories nothing references (to register, or the debris of a write that died: an abandoned
write, a partition table never published), staged `__manifest` data files of commits that did
not land, data files no version of a partition table references, and the logs of Spark jobs
whose driver died. Each is fixable only once older than the grace period, so a write in flight
in another process is never touched.

It stands apart from `check.py` and `manifest_check.py` because `prune` shares it: a prune
removes the same debris (`service/prune/debris.py`) without verifying every table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow.compute as pc

from lancens_cli.errors import CatalogDamagedError, InvalidInputError, LancensError
from lancens_cli.models import (
    KIND_NAMESPACE,
    KIND_TABLE,
    MANIFEST_TABLE,
    OBJECT_ID_DELIMITER,
    STATE_UNCOMMITTED,
    Identifier,
    validate_name,
)
from lancens_cli.parallel import ordered
from lancens_cli.partition.rows import split_id, top_namespace
from lancens_cli.partition.spec import SPEC_NAMESPACE, specs_from_metadata
from lancens_cli.service.catalog.manifest_rows import RENAMED_FROM_KEY, rename_intent
from lancens_cli.service.check_report import CheckReport
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.table_looks import TableLook
from lancens_cli.service.unreferenced_data import unreferenced_files
from lancens_cli.store.containment import JOBS_DIR, directory_location_problem, shown
from lancens_cli.store.manifest import ManifestSnapshot, decode_properties
from lancens_cli.store.row_verdicts import row_locations
from lancens_cli.store.storage import Storage
from lancens_cli.store.tables import (
    V1_SUFFIX,
    is_deregistered,
    is_v2_location,
    open_table,
    table_state,
    uncommitted_write,
    unpublished_record,
    v2_location_object_id,
)

ABANDONED_CODE = "abandoned_table_write"
UNPUBLISHED_CODE = "unpublished_partition_table"  # a restore's: store/tables.py's marker
UNCOMMITTED_WRITE = "data files of a table write that never committed a version"
UNPUBLISHED_PARTITION = (
    "a partition table a write created but never published (it died before its __manifest commit)"
)
EMPTY_TABLE_DIRECTORY = "an empty table directory (a delete cut short, or a write just starting)"


def past_grace(ns: Namespace, location: str, grace: timedelta) -> bool:
    """Nothing below `location` was written within the grace period (no write in flight).
    A directory with no file counts from its own time (a write may just have made it)."""
    changed = ns.storage.newest_change(location) or ns.storage.modified(location)
    return changed is None or datetime.now(UTC) - changed > grace


def check_job_logs(ns: Namespace, report: CheckReport, grace: timedelta) -> None:
    """The log of a Spark write job whose driver died (a finished or aborted job removes
    its own): past the grace, `--fix` removes it. The data files it names are findings of
    their own (`unreferenced_data_file`, `abandoned_table_write`)."""
    for entry in ns.storage.list_dir(JOBS_DIR):
        location = f"{JOBS_DIR}/{entry.name}"
        report.add(
            "abandoned_job_log",
            None,
            location,
            "the log of a Spark write job that never finished (its driver died)",
            fixable=past_grace(ns, location, grace),
        )


def check_uncommitted_root_tables(
    ns: Namespace,
    snapshot: ManifestSnapshot,
    report: CheckReport,
    grace: timedelta,
    committed: Iterable[str] = (),
) -> None:
    """Root `<name>.lance` directories known only by listing that hold a write that never
    committed: the `abandoned_table_write` findings `check` makes while it verifies tables,
    for `prune`, which removes debris without verifying every table. `committed`: locations
    the caller saw a version of (not asked again: a write once committed stays so)."""
    for name, location in ns.unregistered_dir_tables(snapshot, unless=set(committed)).items():
        if name in snapshot:
            continue
        if directory_location_problem(ns.storage, location) is not None:
            continue  # never touched (store/containment.py)
        if table_state(ns.storage, location) != STATE_UNCOMMITTED:
            continue
        code, message, fixable = abandoned(ns, location, grace, UNCOMMITTED_WRITE)
        report.add(code, name, location, message, fixable=fixable)


def abandoned(
    ns: Namespace, location: str, grace: timedelta, what: str, code: str = ABANDONED_CODE
) -> tuple[str, str, bool]:
    """An `abandoned_table_write` (or `unpublished_partition_table`) finding: fixable only
    once older than the grace."""
    expired = past_grace(ns, location, grace)
    message = what + ("" if expired else f" (younger than {grace}; may be a write in flight)")
    return code, message, expired


def _unpublished_words(record: dict) -> str:
    """What a restore's marker says: which restore stopped publishing the table, when."""
    return (
        f"a partition table the restore to __manifest version {record.get('restored_to')} "
        f"(made version {record.get('manifest_version')}, at {record.get('at')}) stopped "
        "publishing"
    )


def _unreferenced_directories(storage: Storage, snapshot: ManifestSnapshot) -> list[str]:
    """The root's directories no row names, as a table's location or either side of a
    rename. Matched in Arrow: over a million tables, a Python set of the rows' locations and
    an entry object per directory are half a GB, and what is left is the few orphans."""
    listed, odd = storage.dir_names()
    table = snapshot.table
    if "location" in table.column_names and "object_type" in table.column_names:
        is_table = pc.equal(table.column("object_type"), KIND_TABLE)
        registered = table.column("location").filter(is_table).combine_chunks()
        listed = listed.filter(pc.invert(pc.is_in(listed, value_set=registered)))
    renamed = _rename_locations(snapshot)
    return [name for name in [*listed.to_pylist(), *odd] if name not in renamed]


def _rename_locations(snapshot: ManifestSnapshot) -> set[str]:
    """Both sides of the renames the rows record. Only a row whose metadata has the keys'
    text (or a `\\u` escape, which may spell them) is parsed."""
    table = snapshot.table
    if "metadata" not in table.column_names:
        return set()
    metadata = table.column("metadata")
    maybe = pc.or_(
        pc.match_substring(metadata, "lancens.rename"), pc.match_substring(metadata, "\\u")
    )
    found: set[str] = set()
    for text in metadata.filter(pc.fill_null(maybe, False)).to_pylist():
        properties = decode_properties(text)
        if RENAMED_FROM_KEY in properties:
            found.add(properties[RENAMED_FROM_KEY])
        intent = rename_intent({"metadata": text})
        copy = intent.get("location") if intent else None
        if copy:
            found.add(copy)
    return found


def check_orphans(
    ns: Namespace,
    snapshot: ManifestSnapshot,
    report,
    delimiter,
    grace: timedelta,
    kept_versions: set[int] | None = None,
) -> None:
    """Table directories nothing references. `kept_versions`: the `__manifest` versions a
    prune keeps; a partition table only the others publish is named before it goes."""
    spec_namespaces = _spec_namespaces(snapshot)
    history = _PublishedHistory(ns, kept_versions)
    for directory in _unreferenced_directories(ns.storage, snapshot):
        if directory == MANIFEST_TABLE:
            continue
        v1_hidden = (
            not is_v2_location(directory)
            and directory.endswith(V1_SUFFIX)
            and not ns.config.dir_listing_enabled
            and ns.config.manifest_enabled
        )
        if not is_v2_location(directory) and not v1_hidden:
            continue
        leads_out = directory_location_problem(ns.storage, directory)
        if leads_out is not None:  # a link out of the root: reported, never listed or read
            report.add("bad_location", None, shown(directory), leads_out)
            continue
        if is_deregistered(ns.storage, directory):  # asked last: a request on object stores
            continue  # forgotten on purpose (deregister, drop --keep-data)
        object_id, name = _orphan_id(directory, v1_hidden, delimiter)
        unpublished = bool(
            not v1_hidden and object_id and top_namespace(object_id) in spec_namespaces
        )
        if (
            unpublished
            and snapshot.exists
            and _unpublished_partition(ns, history, directory, name, grace, report)
        ):
            continue
        children = ns.storage.list_dir(directory)
        empty = not children and not v1_hidden  # what a SIGKILL inside `delete_tree` leaves
        if unpublished or empty or uncommitted_write(ns.storage, directory, children) is not None:
            what = (
                UNPUBLISHED_PARTITION
                if unpublished
                else EMPTY_TABLE_DIRECTORY
                if empty
                else UNCOMMITTED_WRITE
            )
            code, message, fixable = abandoned(ns, directory, grace, what)
            report.add(code, name, directory, message, fixable=fixable)
            continue
        if v1_hidden:
            report.add(
                "orphan_table_directory",
                name,
                directory,
                "a <name>.lance directory is invisible with dir listing off and no row for it",
                fixable=is_registrable(ns, snapshot, object_id),
            )
            continue
        registrable = is_registrable(ns, snapshot, object_id)
        taken = object_id is not None and object_id in snapshot
        report.add(
            "orphan_table_directory",
            name,
            directory,
            "a V2 table directory that no manifest row references"
            + (
                f"; {name} is another table now: `register` it under a new name or `drop` it"
                if taken and not registrable
                else ""
            ),
            fixable=registrable,
        )


def _orphan_id(directory: str, v1_hidden: bool, delimiter: str) -> tuple[str | None, str | None]:
    """The object id a table directory's name carries, and that object as shown."""
    if v1_hidden:
        name = directory[: -len(V1_SUFFIX)]
        return name, name
    object_id = v2_location_object_id(directory)
    return object_id, Identifier.from_object_id(object_id).display(delimiter) if object_id else None


class _PublishedHistory:
    """The table locations readable `__manifest` versions publish (and those a prune keeps),
    read once, and only when a partition table is unpublished."""

    def __init__(self, ns: Namespace, kept_versions: set[int] | None) -> None:
        self._ns, self._kept_versions = ns, kept_versions
        self._by_version: dict[int, set[str]] | None = None

    def _published(self, keep: Callable[[int], bool]) -> set[str]:
        if self._by_version is None:
            self._by_version = self._ns.manifest.published_by_version()
        newest = max(self._by_version, default=None)
        return set().union(
            *(found for v, found in self._by_version.items() if v == newest or keep(v))
        )

    def all(self) -> set[str]:
        return self._published(lambda version: True)

    def kept(self) -> set[str]:
        kept = self._kept_versions
        return self.all() if kept is None else self._published(lambda version: version in kept)


def _unpublished_partition(
    ns: Namespace, history: _PublishedHistory, location: str, name, grace: timedelta, report
) -> bool:
    """A partition table no row publishes now: nothing to say while time travel reads it;
    named when only versions a prune expires publish it, or when a restore's marker says the
    restore stopped publishing it. False: none of these (a dead write's, said by the caller)."""
    if location in history.kept():
        return True
    restored = unpublished_record(ns.storage, location)
    if location in history.all():
        words = _unpublished_words(restored) if restored else UNPUBLISHED_PARTITION
        report.add(
            UNPUBLISHED_CODE,
            name,
            location,
            f"{words}; only __manifest versions this prune expires publish it: the next prune "
            "deletes it",
        )
        return True
    if restored is None:
        return False
    message = f"{_unpublished_words(restored)}; no readable __manifest version publishes it"
    code, message, fixable = abandoned(ns, location, grace, message, UNPUBLISHED_CODE)
    report.add(code, name, location, message, fixable=fixable)
    return True


def _spec_namespaces(snapshot: ManifestSnapshot) -> set[str]:
    """`v1`, `v2`, ... of a partitioned root: tables below them exist only once published."""
    try:
        return {spec.namespace for spec in specs_from_metadata(snapshot.metadata)}
    except CatalogDamagedError:  # the specs cannot be read: every `v<N>` row may be one
        return {
            object_id
            for object_id, kind in snapshot.columns("object_id", "object_type")
            if kind == KIND_NAMESPACE and SPEC_NAMESPACE.match(object_id or "")
        }


def is_registrable(ns: Namespace, snapshot: ManifestSnapshot, object_id: str | None) -> bool:
    if not object_id or not ns.config.manifest_enabled:
        return False
    try:
        for part in split_id(object_id):
            validate_name(part)
    except InvalidInputError:
        return False
    ident = Identifier.from_object_id(object_id)
    return object_id not in snapshot and ns.namespace_exists(ident.parent, snapshot)


def _staged_files(ns: Namespace, grace: timedelta) -> list[tuple[str, bool]]:
    """__manifest data files no version references, with whether they are past the grace."""
    return _untracked_data(ns.manifest.open_dataset(), grace)


def _untracked_data(ds: Any, grace: timedelta) -> list[tuple[str, bool]]:
    """A table's data files no version references, with whether they are past the grace."""
    tracked = set(ds.tracked_files().read_all().column("path").to_pylist())
    now = datetime.now(UTC)
    staged = []
    for row in ds.all_files().read_all().to_pylist():
        path = row["path"]
        if path.startswith("data/") and path not in tracked:
            modified = row["last_modified"]
            staged.append((path, modified is not None and now - modified > grace))
    return staged


def check_staged_files(ns: Namespace, report: CheckReport, grace: timedelta) -> None:
    for path, expired in _staged_files(ns, grace):
        report.add(
            "staged_manifest_file",
            None,
            f"{MANIFEST_TABLE}/{path}",
            "a __manifest data file of a commit that did not land"
            + ("" if expired else f" (younger than {grace}; may belong to a commit in flight)"),
            fixable=expired,
        )


def check_unreferenced_data(
    ns: Namespace,
    snapshot: ManifestSnapshot,
    report: CheckReport,
    grace: timedelta,
    delimiter,
    looks: dict[str, TableLook] | None = None,
) -> None:
    """Data files in a partition table that no version references: what the tasks of a
    Spark write (`ingest`, the `lancens` data source) leave in existing partition tables when
    the driver dies before it commits them. Past the grace, `--fix` deletes them.

    Only partition tables: their data directories are written by partitioned writers alone.
    Any other table's unreferenced files may be another tool's, and are never touched.
    """
    spec_namespaces = _spec_namespaces(snapshot)
    if not spec_namespaces:
        return
    verdicts = row_locations(ns.storage, snapshot)
    tables = [  # (not a dict for every row of the catalog: a million of them are a third of a GB)
        {"object_id": object_id, "location": location}
        for object_id, kind, location in snapshot.columns("object_id", "object_type", "location")
        if kind == KIND_TABLE
        and location
        and OBJECT_ID_DELIMITER in object_id
        and top_namespace(object_id) in spec_namespaces
        and verdicts.problem(object_id) is None
    ]
    if not tables:
        return

    def scan(row: dict) -> tuple[dict, list[tuple[str, bool]]]:
        location = row["location"]
        look = looks.get(location) if looks is not None else None
        if look is not None and look.unreferenced is not None:
            return row, list(look.unreferenced)  # found by the one open of each table
        try:
            dataset = open_table(ns.storage, location)
        except LancensError:
            return row, []  # reported by the table checks
        return row, unreferenced_files(ns, dataset, location, grace)

    workers = 4 if ns.storage.is_local else 16
    for row, files in ordered(scan, tables, workers):  # bounded, unlike pool.map
        for path, expired in files:
            report.add(
                "unreferenced_data_file",
                Identifier.from_object_id(row["object_id"]).display(delimiter),
                f"{row['location']}/{path}",
                "a data file no table version references (a write that died before "
                "its commit)"
                + ("" if expired else f" (younger than {grace}; may be a write in flight)"),
                fixable=expired,
            )
