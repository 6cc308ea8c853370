"""What a `__manifest` table row publishes, as a typed value: the rule written once.

A `__manifest` row arrives from Lance as a dict of its columns. The rule for what a table row
sends a reader to (the directory namespace specification's Read Behavior: `read_tag` alone, else
`read_branch` with `read_version`, else `read_version` of main, else main's latest) is written
here once, as `PublishedRef`, with how to open it and how to say it; every reader of a row asks it
instead of reading the three columns itself.

`store.tables` (which loads Lance) is imported inside `PublishedRef.open`: commands that only
read rows, such as prune's quiet answer, import this module before Lance is needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lancens_cli.errors import InvalidTableStateError, lance_message
from lancens_cli.store.storage import Storage

# The columns that say what a table row publishes (spec: Manifest Table Schema), in the order
# `__manifest` holds them.
READ_VERSION, READ_BRANCH, READ_TAG = "read_version", "read_branch", "read_tag"
READ_COLUMNS = (READ_VERSION, READ_BRANCH, READ_TAG)


def branch_name(value: Any) -> str | None:
    """The branch a Lance ref names, None for main (Lance writes main as None or "main")."""
    return None if value in (None, "main") else str(value)


@dataclass(frozen=True)
class PublishedRef:
    """What a table row sends readers to: a tag, else a branch's version, else a version of
    main; none of the three is main's latest version."""

    version: int | None = None
    branch: str | None = None
    tag: str | None = None

    @classmethod
    def of(cls, row: Mapping[str, Any] | None) -> PublishedRef:
        """The reference a row (or a dict of the `read_*` columns) holds; absent: the latest."""
        if row is None:
            return LATEST
        version, branch, tag = (row.get(name) for name in READ_COLUMNS)
        return cls(
            None if version is None else int(version),
            None if branch is None else str(branch),
            None if tag is None else str(tag),
        )

    @property
    def is_tag(self) -> bool:
        return self.tag is not None

    @property
    def is_branch(self) -> bool:
        """A version of a branch other than main (a tag that names a branch's version: no)."""
        return self.tag is None and self.branch is not None

    @property
    def on_main(self) -> bool:
        """Neither a tag nor a branch: a version of main, or main's latest."""
        return self.tag is None and self.branch is None

    @property
    def main_version(self) -> int | None:
        """The version of main it pins; None for a tag, a branch or the latest."""
        return self.version if self.on_main else None

    def target(self) -> int | str | tuple[str, int | None] | None:
        """What Lance's `checkout_version` takes: the tag, (branch, version), the version, or
        None for the latest of main."""
        if self.tag is not None:
            return self.tag
        if self.branch is not None:
            return (self.branch, self.version)
        return self.version

    def columns(self) -> dict[str, Any]:
        """The `read_*` columns that hold this reference in a row."""
        if self.tag is not None:
            return {READ_VERSION: None, READ_BRANCH: None, READ_TAG: self.tag}
        return {READ_VERSION: self.version, READ_BRANCH: self.branch, READ_TAG: None}

    def as_json(self) -> dict[str, Any]:
        """The reference as JSON output shows it: the three columns, the unset ones null."""
        return {READ_VERSION: self.version, READ_BRANCH: self.branch, READ_TAG: self.tag}

    def words(self) -> str:
        """The reference in a sentence: `tag 'nightly'`, `branch 'dev' version 3`."""
        if self.tag is not None:
            return f"tag {self.tag!r}"
        if self.branch is not None:
            return f"branch {self.branch!r} version {self.version}"
        return f"version {self.version}"

    def cell(self) -> str:
        """The reference as one table cell: `v7`, `tag nightly`, `branch dev v3`, `latest`."""
        if self.tag is not None:
            return f"tag {self.tag}"
        shown = "latest" if self.version is None else f"v{self.version}"
        return f"branch {self.branch} {shown}" if self.branch else shown

    def open(self, storage: Storage, location: str) -> Any:
        """The table at `location`, checked out at this reference."""
        from lancens_cli.store.tables import open_table

        target = self.target()
        if isinstance(target, tuple):
            dataset = open_table(storage, location)
            try:
                return dataset.checkout_version(target)
            except (ValueError, OSError, RuntimeError) as exc:
                raise InvalidTableStateError(
                    f"table at {location!r}: branch {target[0]!r} version {target[1]} "
                    f"cannot be loaded: {lance_message(exc)}"
                ) from None
        return open_table(storage, location, version=target)

    def branch_in(self, dataset: Any) -> str | None:
        """The branch of the version this names (None: main); a tag is looked up in
        `dataset`, the table it belongs to."""
        if self.tag is not None:
            return branch_name(((dataset.tags.list() or {}).get(self.tag) or {}).get("branch"))
        return branch_name(self.branch)


LATEST = PublishedRef()


def open_published(storage: Storage, row: Mapping[str, Any]) -> Any:
    """Open a table row's table at the version `__manifest` publishes for readers."""
    return PublishedRef.of(row).open(storage, row["location"])
