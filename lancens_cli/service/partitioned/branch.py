"""Branch writes of partition tables (spec 004, Read Behavior: `read_branch` + `read_version`).

`write --branch B` (and `ingest --branch B`) append each partition's rows to branch `B` of its
table, so `main` of every table stays as it was; the write then publishes `read_branch=B`,
`read_version=<branch version>` in its one `__manifest` commit (the same commit path as any
partitioned write, `partitioned.write.commit_touches`). The branch is created where missing, from
the version the row publishes. A new partition's table gets an empty version 1 on `main` and
its rows on `B`.

What a row publishes decides where a write may go: a row on branch `B` (or on a tag of a `B`
version) takes writes to `B` only; a write to `main` of it is refused, since it would send
readers back to `main` and hide that branch's rows.
"""

from __future__ import annotations

import re
from typing import Any

from lancens_cli.errors import (
    InvalidInputError,
    InvalidTableStateError,
    RefusedError,
)
from lancens_cli.models import Identifier
from lancens_cli.store.catalog_rows import branch_name
from lancens_cli.store.partition_tables import open_partition_table
from lancens_cli.store.storage import Storage

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_ref_name(name: str | None, what: str) -> str | None:
    """A branch or tag name Lance and every object store take as a path segment."""
    if name is None:
        return None
    if not _NAME.match(name) or name == "main" or ".." in name:
        raise InvalidInputError(
            f"{what} {name!r} is not a valid name: letters, digits, '.', '_', '-' "
            "(not 'main', at most 128 characters)"
        )
    return name


def resolve_bases(storage: Storage, touches: list[Any]) -> None:
    """Resolve each existing partition's published line and refuse a write that cannot go on it.

    Sets `base_branch` / `base_version` (a tag is looked up in its table); raises before any
    table is written, so a refusal changes nothing.
    """
    for touch in touches:
        if touch.created:
            continue
        version, branch, tag = touch.base_ref.version, touch.base_ref.branch, touch.base_ref.tag
        if tag is not None:
            found = (open_partition_table(storage, touch.location).tags.list() or {}).get(tag)
            if found is None:
                raise InvalidTableStateError(
                    f"partition table {touch.location!r}: published tag {tag!r} does not exist; "
                    "run `lancens check`"
                )
            branch = branch_name(found.get("branch"))
            version = found.get("version")
        touch.base_branch = branch_name(branch)
        touch.base_version = None if version is None else int(version)
        _require_line(storage, touch)


def _require_line(storage: Storage, touch: Any) -> None:
    name = Identifier.from_object_id(touch.table_id).display()
    if touch.branch is None:
        if touch.base_branch is not None:
            raise RefusedError(
                f"partition {name} is published on branch {touch.base_branch!r}: write with "
                f"--branch {touch.base_branch} (a write to main would hide that branch's rows)"
            )
        return
    if touch.base_branch == touch.branch:
        return
    info = (open_partition_table(storage, touch.location).branches.list() or {}).get(touch.branch)
    if info is None:
        return  # created from the published version when the write commits
    parent = info.get("parent_branch")
    parent = branch_name(parent)
    if (parent, info.get("parent_version")) != (touch.base_branch, touch.base_version):
        start = f"{parent or 'main'} version {info.get('parent_version')}"
        raise RefusedError(
            f"branch {touch.branch!r} of partition {name} starts at {start}, not at the "
            f"published {touch.base_branch or 'main'} version {touch.base_version}: write to "
            "another branch"
        )
