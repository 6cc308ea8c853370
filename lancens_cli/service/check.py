"""`check`: prove a namespace healthy, or list what is wrong; `--fix` repairs what is safe.

Safe repairs register table directories nothing references (under the object id their name
carries), delete unregistered table directories (V2 `<hash>_<id>` or root `<name>.lance`) that
hold only the data files of a write that never committed, and delete staged `__manifest` data
files of commits that did not land (both only when older than a grace period, so a write or
commit in flight in another process is never touched). Data of a table anyone could have read is
never deleted.

Here: the report, the order of the checks, and the fixes. The checks are `manifest_check.py`
(`__manifest` and every table its rows name) and `debris_check.py` (what a listing of the root
finds that no row accounts for); `partitioned/layout_check.py` and
`partitioned/published_check.py` are the partitioned half.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from functools import partial

from lancens_cli.errors import ManifestError
from lancens_cli.models import (
    MANIFEST_TABLE,
    Identifier,
)
from lancens_cli.service.catalog.listing import nested_roots_message, roots_below
from lancens_cli.service.catalog.manifest_rows import table_row
from lancens_cli.service.check_report import CheckReport
from lancens_cli.service.debris_check import (
    ABANDONED_CODE,
    UNPUBLISHED_CODE,
    check_job_logs,
    check_orphans,
    check_staged_files,
    check_unreferenced_data,
    is_registrable,
    past_grace,
)
from lancens_cli.service.manifest_check import check_manifest, check_rows
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partitioned.layout_check import check_partitions, fix_partitions
from lancens_cli.service.partitioned.naming import partition_labels
from lancens_cli.service.partitioned.published_check import check_published
from lancens_cli.service.table_looks import latest_known, look_at_partition_tables, schema_known
from lancens_cli.store.containment import JOBS_DIR, shown
from lancens_cli.store.manifest import ManifestEdit, ManifestSnapshot
from lancens_cli.store.row_verdicts import row_locations
from lancens_cli.store.tables import V1_SUFFIX, is_v2_location, v2_location_object_id

DEFAULT_GRACE = timedelta(hours=1)


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
    looks = (  # each partition table opened once for every check that asks it
        look_at_partition_tables(ns, snapshot, grace, progress)
        if ident.is_root and snapshot.exists
        else {}
    )
    if snapshot.exists:
        check_manifest(snapshot, report)
        if ident.is_root:
            check_partitions(ns, snapshot, report, partial(schema_known, looks))
        report.labels = {
            shown(Identifier.from_object_id(oid).display(delimiter)): label
            for oid, label in partition_labels(snapshot).items()
        }
    rows = _rows_in_scope(ns, snapshot, ident)
    check_rows(ns, snapshot, rows, report, delimiter, grace, progress, drop_refused_rows, looks)
    verdicts = row_locations(ns.storage, snapshot)
    check_published(
        ns,
        (r for r in rows if verdicts.problem(r["object_id"]) is None),
        report,
        delimiter,
        partial(latest_known, looks),
    )
    if ident.is_root:
        check_job_logs(ns, report, grace)
        check_orphans(ns, snapshot, report, delimiter, grace)
        if snapshot.exists:
            check_staged_files(ns, report, grace)
            check_unreferenced_data(ns, snapshot, report, grace, delimiter, looks)
    if fix and not dry_run:
        _apply_fixes(ns, report, grace)
    return report


@dataclass(frozen=True)
class _RootRows:
    """Every row of the root, the catalog's made a batch at a time as each pass reads them
    (`check` passes over them twice; a million rows held as dicts is a third of a GB), then
    the V1 tables known only from their directory."""

    snapshot: ManifestSnapshot
    directory_rows: list[dict]

    def __iter__(self) -> Iterator[dict]:
        yield from self.snapshot.each_row()
        yield from self.directory_rows


def _rows_in_scope(ns: Namespace, snapshot: ManifestSnapshot, ident: Identifier) -> Iterable[dict]:
    if ident.is_root:
        # V1 tables known only from their directory are checked too.
        only_listed = ns.unregistered_dir_tables(snapshot, unnamed=True)
        extra = [table_row(name, location, None) for name, location in only_listed.items()]
        return _RootRows(snapshot, extra)
    row = snapshot.get(ident.object_id)
    if row is None:
        ref = ns.require_table(ident, snapshot)
        return [table_row(ident.object_id, ref.location, None)]
    return [row, *snapshot.children(ident.object_id, recursive=True)]


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
                location = finding.location
                if location is None:  # an orphan finding always names its directory
                    continue
                object_id = (
                    v2_location_object_id(location)
                    if is_v2_location(location)
                    else location[: -len(V1_SUFFIX)]
                )
                if (
                    object_id
                    and is_registrable(ns, snapshot, object_id)
                    and location not in snapshot.locations()
                ):
                    edit.add(table_row(object_id, location, None))
                    finding.fixed = True

        ns.manifest.mutate(register)
        for finding in registrations:
            if finding.fixed:
                finding.message += "; registered"
    for finding in report.findings:
        location = finding.location
        if not finding.fixable or location is None:
            continue
        if finding.code in (ABANDONED_CODE, UNPUBLISHED_CODE):
            if not past_grace(ns, location, grace):
                finding.message += "; written to meanwhile, so kept"
                continue
            ns.storage.delete_tree(location)
            finding.fixed = True
            finding.message += "; deleted"
        if finding.code == "abandoned_job_log":
            if ns.storage.is_dir(location):
                ns.storage.delete_tree(location)
            else:  # an aborted job's marker
                ns.storage.delete_file(location)
            ns.storage.remove_empty_dir(JOBS_DIR)
            finding.fixed = True
            finding.message += "; deleted"
        if finding.code in ("staged_manifest_file", "unreferenced_data_file"):
            ns.storage.delete_file(location)
            finding.fixed = True
            finding.message += "; deleted"
