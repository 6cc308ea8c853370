"""What dead writes leave behind, as `check` finds it: removed by `prune` past the grace
(never-committed table writes, staged `__manifest` files, a dead Spark job's log); orphan
directories that hold tables are only reported, never deleted.
"""

from __future__ import annotations

from lancens_cli.service.check_report import CheckReport
from lancens_cli.service.debris_check import (
    check_job_logs,
    check_orphans,
    check_staged_files,
    check_uncommitted_root_tables,
)
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.prune.policy import PrunePolicy
from lancens_cli.service.prune.report import DebrisResult

DEBRIS_CODES = (
    "abandoned_table_write",
    "unpublished_partition_table",  # a restore's, once no readable version publishes it
    "staged_manifest_file",
    "abandoned_job_log",
)


def remove_debris(
    ns: Namespace,
    policy: PrunePolicy,
    dry_run: bool,
    delimiter: str,
    committed: set[str],
    kept_versions: set[int] | None = None,
) -> list[DebrisResult]:
    """`check`'s findings about debris: deleted past the grace; orphan tables only reported.
    `committed`: the tables this run read versions of (no write of theirs is asked about);
    `kept_versions`: the `__manifest` versions the run keeps (a partition table a restore
    unpublished that only the others publish is named: the next run deletes it)."""
    findings = CheckReport(ns.storage.root_uri, "")
    snapshot = ns.snapshot()
    check_orphans(ns, snapshot, findings, delimiter, policy.grace, kept_versions)
    check_uncommitted_root_tables(ns, snapshot, findings, policy.grace, committed)
    check_job_logs(ns, findings, policy.grace)
    if snapshot.exists:
        check_staged_files(ns, findings, policy.grace)
    results = []
    for finding in findings.findings:
        location = finding.location  # (every fixable debris finding names its location)
        if finding.code in DEBRIS_CODES and finding.fixable and location is not None:
            action = "would delete" if dry_run else "deleted"
            if not dry_run:
                if finding.code in DEBRIS_CODES[:2] or ns.storage.is_dir(location):
                    ns.storage.delete_tree(location)
                else:
                    ns.storage.delete_file(location)
        elif finding.code in DEBRIS_CODES:
            action = "kept"
        else:
            action = "reported"
        results.append(
            DebrisResult(finding.code, finding.object, finding.location, action, finding.message)
        )
    return results
