"""The namespace root on storage: one `Storage` API over local disk and object stores.

Paths handed to this module are relative to the root and use `/`. The work is done by
`local_storage.LocalFiles` (through `os`) or `object_storage.ObjectStoreFiles` (through
fsspec); Lance gets the same storage options as fsspec (`storage_options`), so both sides see
the same bucket with the same credentials. Callers only ever see `Storage`.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from lancens_cli import interrupt
from lancens_cli.config import NamespaceConfig
from lancens_cli.errors import InvalidInputError, NamespaceNotFoundError
from lancens_cli.store.delete_pace import DeletePace
from lancens_cli.store.dir_entry import DirEntry
from lancens_cli.store.local_storage import LocalFiles
from lancens_cli.store.manifest_names import deletion_phases
from lancens_cli.store.object_storage import ObjectStoreFiles
from lancens_cli.store.storage_options import lance_options

if TYPE_CHECKING:
    from lancens_cli.store.arrow_text import Names

__all__ = ["DirEntry", "Storage", "check_relative"]

# A relative path of plain names, none of them `.` or `..` (no name starts with a dot), no
# backslash, no scheme: accepted as it is, without the splits below (a catalog of 100k rows
# judges 100k locations).
_PLAIN = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9_.\-]*(?:/[A-Za-z0-9_\-][A-Za-z0-9_.\-]*)*")


def check_relative(location: str) -> str:
    """Refuse a location that is absolute, a URI, or climbs out of the root."""
    if _PLAIN.fullmatch(location):
        return location
    if not location or location.startswith(("/", "\\")) or "://" in location:
        raise InvalidInputError(f"location {location!r} must be a path relative to the root")
    parts = location.replace("\\", "/").split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise InvalidInputError(f"location {location!r} must not contain '.', '..' or '//'")
    return "/".join(parts)


def canonical_uri(uri: str, local: bool) -> str | None:
    """A location's one spelling: the real path of a local file (symlinks, `//` and `..`
    resolved), `scheme://bucket/normalised/key` on an object store; None when it cannot be
    told (a relative local path: relative to what?)."""
    if local:
        path = uri
        if uri.startswith("file:"):  # every spelling Lance records: file:/p, file:///p,
            parts = urlsplit(uri)  # file://localhost/p, percent-encoded as RFC 8089 says
            if parts.netloc not in ("", "localhost"):
                return None  # a file on another host: not one of ours
            path = unquote(parts.path)
        if not path.startswith("/"):
            return None
        return os.path.realpath(path)
    scheme, sep, rest = uri.partition("://")
    if not sep:
        return None
    bucket, _, key = rest.partition("/")
    key = posixpath.normpath("/" + key).lstrip("/") if key else ""
    if key.startswith(".."):
        return None
    return f"{scheme}://{bucket}/{key}" if key else f"{scheme}://{bucket}"


class Storage:
    """Operations on paths below one namespace root."""

    def __init__(self, config: NamespaceConfig) -> None:
        self.config = config
        self.root_uri = config.root
        self.scheme = config.scheme
        self.is_local = self.scheme == "file"
        self._files: LocalFiles | ObjectStoreFiles = (
            LocalFiles(self.root_uri)
            if self.is_local
            else ObjectStoreFiles(self.root_uri, self.scheme, config.storage_options)
        )
        self.delete_pace: DeletePace | None = None  # `prune --delete-rate-limit`, for its run

    # --- addressing ---------------------------------------------------------------------
    def uri(self, rel: str = "") -> str:
        """The address Lance is given for a path below the root."""
        if self.is_local:
            return self._files.path(rel)
        if not rel:
            return self.root_uri
        # Lance parses this as a URL: escape what would start a query or fragment, or decode.
        escaped = rel.replace("%", "%25").replace("#", "%23").replace("?", "%3F")
        return f"{self.root_uri}/{escaped}"

    def fs_path(self, rel: str = "") -> str:
        """The path the file system is given (local path, or `bucket/key` for fsspec)."""
        return self._files.path(rel)

    def canonical(self, uri: str) -> str | None:
        """`uri` in its one spelling on this storage (see `canonical_uri`)."""
        return canonical_uri(uri, self.is_local)

    def relative(self, uri: str) -> str | None:
        """The location of a URI below the root, or None when it lies elsewhere.

        Spellings are compared in canonical form: on local disk the real path (the root or
        the URI reached through a symlink, `//`, `..`), on object stores the bucket and the
        normalised key; a clone made through any spelling of its source is found.
        """
        found, root = self.canonical(uri), self.canonical(self.uri())
        if found is not None and root is not None:
            root = root.rstrip("/")
            return found[len(root) + 1 :] if found.startswith(root + "/") else None
        for prefix in (self.uri(), self.root_uri):  # a spelling with no canonical form
            if uri.startswith(prefix.rstrip("/") + "/"):
                return uri[len(prefix.rstrip("/")) + 1 :]
        return None

    @property
    def lance_options(self) -> dict[str, str]:
        """Storage options for Lance: the spec's `storage.*`, prefix removed, plus a timeout."""
        return lance_options(self.config.storage_options, self.is_local)

    # --- fsspec (object stores only) ----------------------------------------------------
    @property
    def _object_store(self) -> ObjectStoreFiles:
        """The object store side; local disk has none (AttributeError, as it always had)."""
        if not isinstance(self._files, ObjectStoreFiles):
            raise AttributeError(f"{self.root_uri} is on local disk: no fsspec file system")
        return self._files

    @property
    def fs(self) -> Any:
        return self._object_store.fs

    def remote(self, call, *args, **kwargs):
        """Run an fsspec call, turning transport failures into one clear error."""
        return self._object_store.remote(call, *args, **kwargs)

    def fail(self, exc: Exception):
        """Raise an object store's failure in the storage's own words (no call, no retry)."""
        self._object_store.fail(exc)

    # --- queries ------------------------------------------------------------------------
    def root_exists(self) -> bool:
        return self._files.root_exists()

    def require_root(self) -> None:
        if not self.root_exists():
            raise NamespaceNotFoundError(f"root {self.root_uri} does not exist")

    def list_dir(self, rel: str = "") -> list[DirEntry]:
        """Immediate children of a directory; empty when it does not exist."""
        return self._files.list_dir(rel)

    def holds_name_ending(self, rel: str, suffix: str) -> bool:
        """Whether an entry of the directory `rel` ends with `suffix` (False when it does not
        exist); locally, without listing the rest."""
        return self._files.holds_name_ending(rel, suffix)

    def dir_names(
        self, rel: str = "", suffix: str = "", after: str | None = None, until: str | None = None
    ) -> Names:
        """The names of the directories in `rel` ending with `suffix`, as Arrow text (a
        million names are no million Python strings); empty when it does not exist. Cheaper
        than `list_dir` where only names are wanted. `after` < name <= `until` (byte order)
        asks for those between: an object store lists only as far as that; a local
        directory, in no order, is listed whole (more names, never fewer)."""
        return self._files.dir_names(rel, suffix, after, until)

    def exists(self, rel: str) -> bool:
        return self._files.exists(rel)

    def entry_exists(self, rel: str) -> bool:
        """Whether anything is named `rel`: a file, a directory (on an object store a key or
        a prefix), a link; one request on S3."""
        return self._files.entry_exists(rel)

    def dir_exists(self, rel: str) -> bool:
        """Whether the directory `rel` is there (as `exists` answers it), in one listing request
        on S3, where `exists` asks for an object first, which a directory never is."""
        return self._files.dir_exists(rel)

    def is_dir(self, rel: str) -> bool:
        """Whether `rel` is a directory (on an object store: a prefix with objects below)."""
        return self._files.is_dir(rel)

    def walk_files(self, rel: str) -> Iterator[tuple[str, int]]:
        """Every file below `rel` as (path relative to `rel`, size)."""
        return self._files.walk_files(rel)

    def file_names(self, rel: str) -> Iterator[str]:
        """Every file below `rel` as a path relative to it (`walk_files` without sizes: no
        `stat` a file on local disk)."""
        return self._files.file_names(rel)

    def modified(self, rel: str) -> datetime | None:
        """When one file was last written (UTC), or None if it is not there."""
        return self._files.modified(rel)

    def newest_change(self, rel: str) -> datetime | None:
        """When a file below `rel` was last written (UTC), or None if there is no file."""
        return self._files.newest_change(rel)

    # --- changes ------------------------------------------------------------------------
    def ensure_root(self) -> None:
        self._files.ensure_root()

    def write_text(self, rel: str, text: str) -> None:
        self._files.write_text(rel, text)

    def read_bytes(self, rel: str) -> bytes:
        return self._files.read_bytes(rel)

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Replace a file as a whole: on local disk a new inode (a hard link to the old content,
        as `copy_tree` makes, is left untouched) moved into place atomically."""
        self._files.write_bytes(rel, data)

    def delete_file(self, rel: str) -> None:
        if self.delete_pace is not None:
            self.delete_pace.take(1)
        self._files.delete_file(rel)

    def delete_files(self, rels: list[str]) -> None:
        """Remove files; absent ones are fine. On an object store one batched request per
        thousand keys, not one request per file; with a `delete_pace`, batches of what it
        allows, each when it allows it."""
        for rel in rels:
            check_relative(rel)
        pace = self.delete_pace
        if pace is None:
            self._files.delete_files(rels)
            return
        for start in range(0, len(rels), pace.batch):
            batch = rels[start : start + pace.batch]
            pace.take(len(batch))
            self._files.delete_files(batch)

    def delete_tree(self, rel: str) -> None:
        """Remove a directory and everything below it; absent is fine (reruns)."""
        check_relative(rel)
        interrupt.mark_durable()  # no way back: a Ctrl-C from here on lets the command finish
        if self.delete_pace is not None:  # file by file at the pace, manifests first
            link = self.is_local and os.path.islink(self.fs_path(rel))
            # (a symlink is removed, never walked: what it leads to is not ours)
            files = [] if link else [name for name, _ in self.walk_files(rel)]
            for phase in deletion_phases(files):  # never an older version readable instead
                self.delete_files([f"{rel}/{name}" for name in phase])
            if not files:
                self.delete_pace.take(1)  # a single file or link, or nothing
        self._files.delete_tree(rel)

    def remove_empty_dir(self, rel: str) -> None:
        """Remove a directory if it is empty (local disk; object stores have none to remove).
        Never recursive: a concurrent writer's new file keeps it."""
        check_relative(rel)
        if self.is_local:
            with contextlib.suppress(OSError):
                os.rmdir(self.fs_path(rel))

    def copy_file(self, src: str, dst: str) -> None:
        """Copy one file (hard-linked on local disk: Lance never changes a data file)."""
        check_relative(src)
        check_relative(dst)
        self._files.copy_file(src, dst)

    def copy_tree(self, src: str, dst: str) -> None:
        """Copy a table directory; a rerun after a partial copy completes it.

        On local disk files are hard-linked (instant, no second copy of the data; Lance never
        changes a data file in place), falling back to copying across file systems. The
        manifests go last, so that a partial copy is not yet a table.
        """
        check_relative(src)
        check_relative(dst)
        files = sorted(self.walk_files(src), key=lambda item: "_versions/" in item[0])
        for name, _ in files:
            self._files.copy_file(f"{src}/{name}", f"{dst}/{name}")
