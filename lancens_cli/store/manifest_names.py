"""A table's manifest file names (`_versions/{version}.manifest`, or in the V2 scheme
`{u64::MAX - version:020}.manifest`), and the order in which a table's files are deleted.

A table reads its newest manifest. Deleting a table's files must never leave an older version
readable in its place: a reader would get rows of the past as if they were the table. So the
older manifests go first, then each `_versions/` directory's newest alone, then the rest
(data, transactions). Until the newest goes the table reads as it did; once it is gone the
table is none. One request for every manifest could remove the newest first (gcsfs deletes a
batch in parallel; a local directory is removed in no set order).
"""

from __future__ import annotations

import posixpath

from lancens_cli.models import VERSIONS_DIR

U64_MAX = 2**64 - 1


def version_from_manifest_name(name: str) -> int | None:
    stem = name[: -len(".manifest")] if name.endswith(".manifest") else ""
    if not (stem.isascii() and stem.isdigit()):  # as Lance parses it: `²` is no version
        return None
    number = int(stem)
    return U64_MAX - number if len(stem) == 20 and number > 2**63 else number


def deletion_phases(files: list[str]) -> list[list[str]]:
    """`files` (paths below a table's directory) in the groups to delete one after another:
    the manifests but each `_versions/` directory's newest, those newest, then the rest."""
    newest: dict[str, tuple[int, str]] = {}
    for path in files:
        directory, name = posixpath.split(path)
        version = version_from_manifest_name(name)
        if version is None or not _is_versions(directory):
            continue
        if directory not in newest or version > newest[directory][0]:
            newest[directory] = (version, path)
    last = {path for _, path in newest.values()}
    older = [p for p in files if _is_versions(posixpath.dirname(p)) and p not in last]
    rest = [p for p in files if not _is_versions(posixpath.dirname(p))]
    return [group for group in (older, sorted(last), rest) if group]


def _is_versions(directory: str) -> bool:
    return posixpath.basename(directory) == VERSIONS_DIR
