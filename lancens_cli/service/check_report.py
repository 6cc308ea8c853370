"""What `check` reports: its findings, one per problem, and the report that holds them.

Apart from `check.py` so that the checks (`manifest_check.py`, `debris_check.py`, the
partitioned ones) and prune's debris removal fill a report without importing the command that
runs them all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lancens_cli.models import Result, to_plain


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
