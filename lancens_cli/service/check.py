"""`check`: prove a namespace healthy, or list what is wrong; `--fix` repairs what is safe.

Safe repairs register table directories nothing references (under the object id their name
carries), delete unregistered table directories (V2 `<hash>_<id>` or root `<name>.lance`) that
hold only the data files of a write that never committed, and delete staged `__manifest` data
files of commits that did not land (both only when older than a grace period, so a write or
commit in flight in another process is never touched). Data of a table anyone could have read is
never deleted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Container
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from lancens_cli.errors import (
    CatalogDamagedError,
    InvalidInputError,
    LancensError,
    ManifestError,
)
from lancens_cli.models import (
    KIND_NAMESPACE,
    KIND_TABLE,
    MANIFEST_TABLE,
    OBJECT_ID_DELIMITER,
    STATE_DECLARED,
    STATE_UNCOMMITTED,
    Identifier,
    Result,
    to_plain,
    validate_name,
)
from lancens_cli.partition.rows import split_id, top_namespace
from lancens_cli.partition.spec import SPEC_NAMESPACE, specs_from_metadata
from lancens_cli.service.catalog.listing import nested_roots_message, roots_below
from lancens_cli.service.catalog.manifest_rows import (
    RENAME_INTENT_KEY,
    RENAMED_FROM_KEY,
    rename_intent,
    table_row,
)
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.check import check_partitions, fix_partitions
from lancens_cli.service.partitioned.naming import partition_labels
from lancens_cli.service.partitioned.published_check import check_published
from lancens_cli.store.containment import (
    JOBS_DIR,
    directory_location_problem,
    row_locations,
    shown,
)
from lancens_cli.store.manifest import (
    BASE_COLUMNS,
    KNOWN_READER_FLAGS,
    KNOWN_WRITER_FLAGS,
    ManifestEdit,
    ManifestSnapshot,
    decode_properties,
    metadata_problem,
    properties_problem,
)
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
from lancens_cli.store.verify import verify_table

DEFAULT_GRACE = timedelta(hours=1)


@dataclass
class Finding:
    code: str
    object: str | None
    location: str | None
    message: str
    fixable: bool = False
    fixed: bool = False


@dataclass
class CheckReport(Result):
    root: str
    scope: str
    findings: list[Finding] = field(default_factory=list)
    tables_checked: int = 0
    namespaces_checked: int = 0
    dry_run: bool = False
    # refused rows `--fix --drop-refused-rows` may remove: finding index -> (object_id, location)
    refused_rows: dict[int, tuple[str, Any]] = field(default_factory=dict, repr=False)
    # a finding's object (as shown) -> which partition it is, for partition tables
    labels: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def healthy(self) -> bool:
        return all(f.fixed for f in self.findings)

    @property
    def open_findings(self) -> int:
        return sum(1 for f in self.findings if not f.fixed)

    def add(self, code, object_id, location, message, fixable=False) -> Finding:
        finding = Finding(code, object_id, location, message, fixable)
        self.findings.append(finding)
        return finding

    def _finding_json(self, finding: Finding) -> dict[str, Any]:
        label = self.labels.get(finding.object) if finding.object else None
        return {**to_plain(finding), **(label.json_fields() if label is not None else {})}

    def to_json(self):
        return {
            "root": self.root,
            "scope": self.scope,
            "healthy": self.healthy,
            "tables_checked": self.tables_checked,
            "namespaces_checked": self.namespaces_checked,
            "dry_run": self.dry_run,
            "findings": [self._finding_json(f) for f in self.findings],
        }


def check(
    ns: Namespace,
    ident: Identifier,
    *,
    fix: bool = False,
    dry_run: bool = False,
    grace: timedelta = DEFAULT_GRACE,
    delimiter: str = ".",
    progress: Callable[[int], Callable[[], None]] | None = None,
    drop_refused_rows: bool = False,
) -> CheckReport:
    """`progress(total)` is called with the number of tables to verify; what it returns,
    once per table verified. `drop_refused_rows`: with `fix`, remove the catalog rows whose
    location the trust boundary refuses (the rows only, never what they point at)."""
    ns.require_root()
    report = CheckReport(ns.storage.root_uri, ident.display(delimiter), dry_run=dry_run)
    try:
        snapshot = ns.snapshot()
    except ManifestError as exc:
        report.add("manifest_unreadable", None, MANIFEST_TABLE, exc.message)
        return report
    if not ident.is_root and ns.kind_of(ident, snapshot) is None:
        ns.require_table(ident, snapshot)  # raises the right not-found error
    nested = roots_below(ns) if ident.is_root and not snapshot.exists else []
    if nested:  # the parent of real roots was given as the root
        report.add("not_a_root", None, None, nested_roots_message(ns, nested))
    if snapshot.exists:
        _check_manifest(snapshot, report)
        if ident.is_root:
            check_partitions(ns, snapshot, report)
        report.labels = {
            shown(Identifier.from_object_id(oid).display(delimiter)): label
            for oid, label in partition_labels(snapshot).items()
        }
    rows = _rows_in_scope(ns, snapshot, ident)
    _check_rows(ns, snapshot, rows, report, delimiter, grace, progress, drop_refused_rows)
    verdicts = row_locations(ns.storage, snapshot)
    check_published(
        ns, [r for r in rows if verdicts.problem(r["object_id"]) is None], report, delimiter
    )
    if ident.is_root:
        check_job_logs(ns, report, grace)
        check_orphans(ns, snapshot, report, delimiter, grace)
        if snapshot.exists:
            check_staged_files(ns, report, grace)
            _check_unreferenced_data(ns, snapshot, report, grace, delimiter)
    if fix and not dry_run:
        _apply_fixes(ns, report, grace)
    return report


def _rows_in_scope(ns: Namespace, snapshot: ManifestSnapshot, ident: Identifier) -> list[dict]:
    if ident.is_root:
        rows = list(snapshot.rows)
        # V1 tables known only from their directory are checked too.
        known = {r["location"] for r in rows if r["object_type"] == KIND_TABLE}
        for name, location in ns.visible_dir_tables(snapshot).items():
            if location not in known and name not in snapshot:
                rows.append(table_row(name, location, None))
        return rows
    row = snapshot.get(ident.object_id)
    if row is None:
        ref = ns.require_table(ident, snapshot)
        return [table_row(ident.object_id, ref.location, None)]
    return [row, *snapshot.children(ident.object_id, recursive=True)]


def _check_manifest(snapshot: ManifestSnapshot, report: CheckReport) -> None:
    schema = snapshot.table.schema
    base_objects = schema.field("base_objects") if "base_objects" in schema.names else None
    if base_objects is None or not pa.types.is_list(base_objects.type):
        report.add("manifest_schema", None, MANIFEST_TABLE, "base_objects is not a list column")
    if schema.field("object_id").nullable or schema.field("object_type").nullable:
        report.add(
            "manifest_schema", None, MANIFEST_TABLE, "object_id/object_type must be non-nullable"
        )
    extras = [n for n in schema.names if n not in BASE_COLUMNS]
    unknown = [
        n
        for n in extras
        if not n.startswith("partition_field_")
        and n not in ("read_version", "read_branch", "read_tag")
    ]
    if unknown:
        report.add(
            "manifest_schema", None, MANIFEST_TABLE, f"columns we do not understand: {unknown}"
        )
    if snapshot.reader_flags & ~KNOWN_READER_FLAGS or snapshot.writer_flags & ~KNOWN_WRITER_FLAGS:
        report.add(
            "manifest_feature_flags",
            None,
            MANIFEST_TABLE,
            f"feature flags reader={snapshot.reader_flags} writer={snapshot.writer_flags} "
            "are not ones this version understands",
        )
    counts = Counter(snapshot.table.column("object_id").to_pylist())
    for object_id, count in sorted(counts.items()):
        if count > 1:
            report.add(
                "duplicate_object_id",
                object_id,
                None,
                f"{count} rows share object_id {object_id!r}",
            )


def _check_table_properties(ns, row: dict, name: str, report) -> None:
    """A table row's metadata: readable, and no rename left half done."""
    location = row["location"]
    bad_metadata = metadata_problem(row.get("metadata"))
    if bad_metadata is not None:
        report.add("bad_metadata", name, shown(location or ""), bad_metadata)
    properties = decode_properties(row.get("metadata"))
    if RENAME_INTENT_KEY in properties:
        report.add("interrupted_rename", name, location, _interrupted_rename(ns, row, properties))
    if RENAMED_FROM_KEY in properties and ns.storage.exists(properties[RENAMED_FROM_KEY]):
        report.add(
            "interrupted_rename",
            name,
            properties[RENAMED_FROM_KEY],
            "the old directory of a finished rename is still there; rerun the rename",
        )


def _check_rows(
    ns, snapshot, rows, report, delimiter, grace: timedelta, progress=None, drop_refused=False
) -> None:
    tables = []
    verdicts = row_locations(ns.storage, snapshot)
    for row in rows:
        object_id, kind, location = row["object_id"], row["object_type"], row["location"]
        name = shown(Identifier.from_object_id(object_id).display(delimiter))
        try:
            for part in split_id(object_id):
                validate_name(part)
        except InvalidInputError as exc:
            report.add("invalid_object_id", name, location, exc.message)
        parent = Identifier.from_object_id(object_id).parent
        if not parent.is_root and not ns.namespace_exists(parent, snapshot):
            report.add(
                "missing_parent", name, location, f"parent namespace {parent.display()} is missing"
            )
        if kind == KIND_NAMESPACE:
            report.namespaces_checked += 1
            if location:
                report.add("bad_location", name, location, "a namespace row has a location")
            damaged = properties_problem(row)
            if damaged is not None:  # never fixed: only the user knows what they should say
                report.add("bad_properties", name, None, f"{damaged} (read as none)")
            continue
        if kind != KIND_TABLE:
            report.add("bad_object_type", name, location, f"unknown object_type {kind!r}")
            continue
        _check_table_properties(ns, row, name, report)
        refused = verdicts.problem(object_id)
        if refused is not None:  # reported, never opened (store/containment.py)
            report.add("bad_location", name, shown(refused.location), refused.reason, drop_refused)
            report.refused_rows[len(report.findings) - 1] = (object_id, location)
            continue
        if object_id not in snapshot:  # a `<name>.lance` directory found by listing
            problem = directory_location_problem(ns.storage, location)
            if problem is not None:
                report.add("bad_location", name, shown(location), problem)
                continue
        tables.append((name, location))
    report.tables_checked = len(tables)

    registered = snapshot.locations()

    def verify(item):
        name, location = item
        state = table_state(ns.storage, location)
        if state == STATE_DECLARED:
            return name, location, []
        if state == "missing":
            return name, location, [("table_missing", "the table directory does not exist", False)]
        if state == STATE_UNCOMMITTED and location not in registered:
            # a root `<name>.lance` known only from its directory: the debris of a killed
            # create (or a copy in progress), like an abandoned V2 directory
            return name, location, [_abandoned(ns, location, grace, UNCOMMITTED_WRITE)]
        try:
            problems = verify_table(ns.storage, location)
            return name, location, [(p.code, p.message, False) for p in problems]
        except LancensError as exc:
            return name, location, [("table_unloadable", exc.message, False)]

    workers = 4 if ns.storage.is_local else 16
    advance = progress(len(tables)) if progress else None
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for name, location, problems in pool.map(verify, tables):
            for code, message, fixable in problems:
                report.add(code, name, location, message, fixable)
            if advance:
                advance()


ABANDONED_CODE = "abandoned_table_write"
UNPUBLISHED_CODE = "unpublished_partition_table"  # a restore's: store/tables.py's marker
UNCOMMITTED_WRITE = "data files of a table write that never committed a version"
UNPUBLISHED_PARTITION = (
    "a partition table a write created but never published (it died before its __manifest commit)"
)
EMPTY_TABLE_DIRECTORY = "an empty table directory (a delete cut short, or a write just starting)"


def _expired(ns: Namespace, location: str, grace: timedelta) -> bool:
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
            fixable=_expired(ns, location, grace),
        )


def check_uncommitted_root_tables(
    ns: Namespace,
    snapshot: ManifestSnapshot,
    report: CheckReport,
    grace: timedelta,
    committed: Container[str] = (),
) -> None:
    """Root `<name>.lance` directories known only by listing that hold a write that never
    committed: the `abandoned_table_write` findings `check` makes while it verifies tables,
    for `prune`, which removes debris without verifying every table. `committed`: locations
    the caller saw a version of (not asked again: a write once committed stays so)."""
    known = {*snapshot.locations(), *committed}
    for name, location in ns.visible_dir_tables(snapshot, known).items():
        if name in snapshot:
            continue
        if directory_location_problem(ns.storage, location) is not None:
            continue  # never touched (store/containment.py)
        if table_state(ns.storage, location) != STATE_UNCOMMITTED:
            continue
        code, message, fixable = _abandoned(ns, location, grace, UNCOMMITTED_WRITE)
        report.add(code, name, location, message, fixable=fixable)


def _abandoned(
    ns: Namespace, location: str, grace: timedelta, what: str, code: str = ABANDONED_CODE
) -> tuple:
    """An `abandoned_table_write` (or `unpublished_partition_table`) finding: fixable only
    once older than the grace."""
    expired = _expired(ns, location, grace)
    message = what + ("" if expired else f" (younger than {grace}; may be a write in flight)")
    return code, message, expired


def _unpublished_words(record: dict) -> str:
    """What a restore's marker says: which restore stopped publishing the table, when."""
    return (
        f"a partition table the restore to __manifest version {record.get('restored_to')} "
        f"(made version {record.get('manifest_version')}, at {record.get('at')}) stopped "
        "publishing"
    )


def _interrupted_rename(ns: Namespace, row: dict, properties: dict[str, str]) -> str:
    """What to do about a row a rename journaled; never advice that cannot complete."""
    intent = rename_intent(row) or {}
    copy = intent.get("location")
    source_gone = not row["location"] or not ns.storage.exists(row["location"])
    if source_gone and not (copy and table_state(ns.storage, copy) == "ok"):
        name = Identifier.from_object_id(row["object_id"]).display()
        return (
            f"a rename was interrupted ({properties[RENAME_INTENT_KEY]}) and the table's data "
            f"is gone (dropped meanwhile?); `lancens drop {name} --yes` removes the row"
        )
    return (
        f"a rename was interrupted ({properties[RENAME_INTENT_KEY]}); "
        "rerun the same `lancens rename` to complete it"
    )


def _referenced(snapshot: ManifestSnapshot) -> set[str]:
    """The directories the rows name: tables, and both sides of a rename."""
    referenced = set(snapshot.locations())
    for (metadata,) in snapshot.columns("metadata"):
        if not metadata:
            continue
        properties = decode_properties(metadata)
        if RENAMED_FROM_KEY in properties:
            referenced.add(properties[RENAMED_FROM_KEY])
        intent = rename_intent({"metadata": metadata})
        if intent:
            referenced.add(intent.get("location"))
    return referenced


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
    referenced = _referenced(snapshot)
    spec_namespaces = _spec_namespaces(snapshot)
    history = _PublishedHistory(ns, kept_versions)
    for entry in ns.storage.list_dir():
        if not entry.is_dir or entry.name in referenced or entry.name == MANIFEST_TABLE:
            continue
        v1_hidden = (
            not is_v2_location(entry.name)
            and entry.name.endswith(V1_SUFFIX)
            and not ns.config.dir_listing_enabled
            and ns.config.manifest_enabled
        )
        if not is_v2_location(entry.name) and not v1_hidden:
            continue
        leads_out = directory_location_problem(ns.storage, entry.name)
        if leads_out is not None:  # a link out of the root: reported, never listed or read
            report.add("bad_location", None, shown(entry.name), leads_out)
            continue
        if is_deregistered(ns.storage, entry.name):  # asked last: a request on object stores
            continue  # forgotten on purpose (deregister, drop --keep-data)
        if v1_hidden:
            object_id = name = entry.name[: -len(V1_SUFFIX)]
        else:
            object_id = v2_location_object_id(entry.name)
            name = Identifier.from_object_id(object_id).display(delimiter) if object_id else None
        unpublished = (
            not v1_hidden and bool(object_id) and top_namespace(object_id) in spec_namespaces
        )
        if (
            unpublished
            and snapshot.exists
            and _unpublished_partition(ns, history, entry.name, name, grace, report)
        ):
            continue
        children = ns.storage.list_dir(entry.name)
        empty = not children and not v1_hidden  # what a SIGKILL inside `delete_tree` leaves
        if unpublished or empty or uncommitted_write(ns.storage, entry.name, children) is not None:
            what = (
                UNPUBLISHED_PARTITION
                if unpublished
                else EMPTY_TABLE_DIRECTORY
                if empty
                else UNCOMMITTED_WRITE
            )
            code, message, fixable = _abandoned(ns, entry.name, grace, what)
            report.add(code, name, entry.name, message, fixable=fixable)
            continue
        if v1_hidden:
            report.add(
                "orphan_table_directory",
                name,
                entry.name,
                "a <name>.lance directory is invisible with dir listing off and no row for it",
                fixable=_registrable(ns, snapshot, object_id),
            )
            continue
        registrable = _registrable(ns, snapshot, object_id)
        taken = object_id is not None and object_id in snapshot
        report.add(
            "orphan_table_directory",
            name,
            entry.name,
            "a V2 table directory that no manifest row references"
            + (
                f"; {name} is another table now: `register` it under a new name or `drop` it"
                if taken and not registrable
                else ""
            ),
            fixable=registrable,
        )


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
    code, message, fixable = _abandoned(ns, location, grace, message, UNPUBLISHED_CODE)
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


def _registrable(ns: Namespace, snapshot: ManifestSnapshot, object_id: str | None) -> bool:
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


def _check_unreferenced_data(
    ns: Namespace, snapshot: ManifestSnapshot, report: CheckReport, grace: timedelta, delimiter
) -> None:
    """Data files in a partition table that no version references: what the tasks of a
    Spark write (`ingest`, the `lancens` data source) leave in existing partition tables when
    the driver dies before it commits them. Past the grace, `--fix` deletes them.

    Only partition tables: their data directories are written by partitioned writers alone.
    Any other table's unreferenced files may be another tool's, and are never touched.
    """
    spec_namespaces = _spec_namespaces(snapshot)
    verdicts = row_locations(ns.storage, snapshot)
    tables = [
        row
        for row in snapshot.rows
        if row["object_type"] == KIND_TABLE
        and verdicts.problem(row["object_id"]) is None
        and row.get("location")
        and top_namespace(row["object_id"]) in spec_namespaces
        and OBJECT_ID_DELIMITER in row["object_id"]
    ]
    if not tables:
        return

    def scan(row: dict) -> tuple[dict, list[tuple[str, bool]]]:
        location = row["location"]
        try:
            dataset = open_table(ns.storage, location)
            tracked = set(dataset.tracked_files().read_all().column("path").to_pylist())
        except (LancensError, OSError, ValueError, RuntimeError):
            return row, []  # reported by the table checks
        # our own listing, not Lance's: it also shows the staging file of a write killed
        # half-way through a data file (Lance's listing leaves those out)
        found = _unreferenced(ns, location, "data", tracked, grace)
        # a branch write (`write --branch`) puts its files in `tree/<branch>/data`
        try:
            branches = list(dataset.branches.list())
        except (OSError, ValueError, RuntimeError):
            branches = []
        for name in branches:
            try:
                head = dataset.checkout_version((name, None))
                files = head.tracked_files().read_all().to_pylist()
            except (OSError, ValueError, RuntimeError):
                continue  # an unreadable branch head is the published-version check's finding
            own = {f["path"] for f in files if f["base_uri"].rstrip("/").endswith(f"tree/{name}")}
            found += _unreferenced(ns, location, f"tree/{name}/data", own, grace, f"tree/{name}/")
        return row, found

    workers = 4 if ns.storage.is_local else 16
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for row, files in pool.map(scan, tables):
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


def _unreferenced(
    ns: Namespace,
    location: str,
    directory: str,
    tracked: set[str],
    grace: timedelta,
    prefix: str = "",
) -> list[tuple[str, bool]]:
    """Files below `location/directory` that `tracked` (paths relative to the dataset or
    branch root, with `prefix` the branch's place in the table) does not name, with whether
    each is older than the grace."""
    now = datetime.now(UTC)
    found = []
    for path, _size in ns.storage.walk_files(f"{location}/{directory}"):
        inside = f"{directory}/{path}"
        if inside[len(prefix) :] in tracked:
            continue
        modified = ns.storage.modified(f"{location}/{inside}")
        found.append((inside, modified is not None and now - modified > grace))
    return found


def _drop_refused_rows(ns: Namespace, report: CheckReport) -> None:
    """Remove, in one `__manifest` commit, the refused rows `--drop-refused-rows` asked for,
    each only if it still holds the location that was refused."""
    wanted = {i: item for i, item in report.refused_rows.items() if report.findings[i].fixable}
    if not wanted:
        return

    def remove(snapshot: ManifestSnapshot, edit: ManifestEdit) -> None:
        for i, (object_id, location) in wanted.items():
            row = snapshot.get(object_id)
            report.findings[i].fixed = row is not None and row.get("location") == location
            if report.findings[i].fixed:
                edit.remove(object_id)

    ns.manifest.mutate(remove)
    for i in wanted:
        if report.findings[i].fixed:
            report.findings[
                i
            ].message += "; row removed from the catalog (nothing it names was touched)"


def _apply_fixes(ns: Namespace, report: CheckReport, grace: timedelta) -> None:
    fix_partitions(ns, report)
    _drop_refused_rows(ns, report)
    registrations = [f for f in report.findings if f.fixable and f.code == "orphan_table_directory"]
    if registrations:

        def register(snapshot: ManifestSnapshot, edit: ManifestEdit) -> None:
            for finding in registrations:
                finding.fixed = False  # re-planned from scratch on every retry
            for finding in registrations:
                object_id = (
                    v2_location_object_id(finding.location)
                    if is_v2_location(finding.location)
                    else finding.location[: -len(V1_SUFFIX)]
                )
                if _registrable(ns, snapshot, object_id) and finding.location not in (
                    snapshot.locations()
                ):
                    edit.add(table_row(object_id, finding.location, None))
                    finding.fixed = True

        ns.manifest.mutate(register)
        for finding in registrations:
            if finding.fixed:
                finding.message += "; registered"
    for finding in report.findings:
        if finding.fixable and finding.code in (ABANDONED_CODE, UNPUBLISHED_CODE):
            if not _expired(ns, finding.location, grace):
                finding.message += "; written to meanwhile, so kept"
                continue
            ns.storage.delete_tree(finding.location)
            finding.fixed = True
            finding.message += "; deleted"
        if finding.fixable and finding.code == "abandoned_job_log":
            if ns.storage.is_dir(finding.location):
                ns.storage.delete_tree(finding.location)
            else:  # an aborted job's marker
                ns.storage.delete_file(finding.location)
            ns.storage.remove_empty_dir(JOBS_DIR)
            finding.fixed = True
            finding.message += "; deleted"
        if finding.fixable and finding.code in ("staged_manifest_file", "unreferenced_data_file"):
            ns.storage.delete_file(finding.location)
            finding.fixed = True
            finding.message += "; deleted"
