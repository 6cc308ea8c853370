"""A namespace root on local disk, through `os` (the `Storage` facade's `file://` side).

store/arrow_text.py (pyarrow) is imported inside `dir_names`: a command that never lists
table names loads no pyarrow through this module.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from lancens_cli.errors import ConfigError
from lancens_cli.store import listing_cache
from lancens_cli.store.dir_entry import DirEntry
from lancens_cli.store.manifest_names import deletion_phases

if TYPE_CHECKING:
    from lancens_cli.store.arrow_text import Names


class LocalFiles:
    """Paths below a local root; `rel` is relative to it and uses `/`."""

    def __init__(self, root_uri: str) -> None:
        self.root_uri = root_uri
        self.root_path = root_uri[len("file://") :]

    def path(self, rel: str = "") -> str:
        return os.path.join(self.root_path, rel) if rel else self.root_path

    # --- queries ------------------------------------------------------------------------
    def root_exists(self) -> bool:
        if os.path.lexists(self.root_path) and not os.path.isdir(self.root_path):
            raise ConfigError(f"root {self.root_uri} is not a directory")
        return os.path.isdir(self.root_path)

    def list_dir(self, rel: str) -> list[DirEntry]:
        try:
            with os.scandir(self.path(rel)) as it:
                return [DirEntry(e.name, e.is_dir()) for e in it]
        except (FileNotFoundError, NotADirectoryError):
            return []

    def holds_name_ending(self, rel: str, suffix: str) -> bool:
        """Whether any entry of `rel` ends with `suffix`, stopping at the first (no entry
        object kept: `ls` asks it of every table's `_versions/`)."""
        try:
            with os.scandir(self.path(rel)) as it:
                return any(entry.name.endswith(suffix) for entry in it)
        except (FileNotFoundError, NotADirectoryError):
            return False

    def dir_names(
        self, rel: str, suffix: str, after: str | None = None, until: str | None = None
    ) -> Names:
        """The names of the directories in `rel` that end with `suffix`, without an entry
        object each; the links the same pass meets are recorded (store/link_record.py), so
        that judging locations below `rel` need not list it again. A directory lists in no
        order: `after` and `until` (a range some names must lie in) are no help here; a big
        one's names are taken from the cache while it cannot have changed
        (store/listing_cache.py)."""
        from lancens_cli.store.arrow_text import NO_NAMES

        found = listing_cache.listed(self.path(rel), suffix)
        return NO_NAMES if found is None else found.names

    def exists(self, rel: str) -> bool:
        return os.path.exists(self.path(rel))

    def is_dir(self, rel: str) -> bool:
        return os.path.isdir(self.path(rel))

    def dir_exists(self, rel: str) -> bool:
        return self.exists(rel)

    def entry_exists(self, rel: str) -> bool:
        return os.path.lexists(self.path(rel))

    def walk_files(self, rel: str) -> Iterator[tuple[str, int]]:
        top = self.path(rel)
        for dirpath, _dirs, files in os.walk(top):
            for name in files:
                full = os.path.join(dirpath, name)
                try:
                    size = os.path.getsize(full)
                except OSError:
                    continue
                yield os.path.relpath(full, top).replace(os.sep, "/"), size

    def file_names(self, rel: str) -> Iterator[str]:
        """`walk_files`'s paths without their sizes: no `stat` a file (the directory entries
        say which are directories), the same files (a link that leads to no file is none)."""
        yield from _names_below(self.path(rel), "")

    def modified(self, rel: str) -> datetime | None:
        try:
            return datetime.fromtimestamp(os.path.getmtime(self.path(rel)), UTC)
        except OSError:
            return None

    def newest_change(self, rel: str) -> datetime | None:
        times = []
        for dirpath, _dirs, files in os.walk(self.path(rel)):
            for name in files:
                with contextlib.suppress(OSError):
                    times.append(os.path.getmtime(os.path.join(dirpath, name)))
        return datetime.fromtimestamp(max(times), UTC) if times else None

    # --- changes ------------------------------------------------------------------------
    def ensure_root(self) -> None:
        try:
            os.makedirs(self.root_path, exist_ok=True)
        except (FileExistsError, NotADirectoryError):  # a file on the way
            raise ConfigError(
                f"root {self.root_uri}: a file is in the way of the directory"
            ) from None

    def write_text(self, rel: str, text: str) -> None:
        path = self.path(rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)

    def read_bytes(self, rel: str) -> bytes:
        with open(self.path(rel), "rb") as handle:
            return handle.read()

    def write_bytes(self, rel: str, data: bytes) -> None:
        """A new inode moved into place atomically (a hard link to the old content stays)."""
        path = self.path(rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = f"{path}.lancens-{os.getpid()}.tmp"
        with open(temporary, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)

    def delete_file(self, rel: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.path(rel))

    def delete_files(self, rels: list[str]) -> None:
        for rel in rels:
            self.delete_file(rel)

    def delete_tree(self, rel: str) -> None:
        path = self.path(rel)
        if os.path.isdir(path) and not os.path.islink(path):
            # `_versions/` first, its newest manifest last: a half-deleted table stops being a
            # table at once, and never reads as an older version
            versions = os.path.join(path, "_versions")
            if os.path.isdir(versions) and not os.path.islink(versions):
                with contextlib.suppress(FileNotFoundError):
                    names = [f"_versions/{n}" for n in os.listdir(versions)]
                    for phase in deletion_phases(names):
                        self.delete_files([f"{rel}/{name}" for name in phase])
                shutil.rmtree(versions, ignore_errors=False, onerror=_ignore_missing)
            shutil.rmtree(path, ignore_errors=False, onerror=_ignore_missing)
        elif os.path.lexists(path):
            os.remove(path)

    def copy_file(self, src: str, dst: str) -> None:
        """Hard-link (Lance never changes a data file in place), else copy across devices."""
        source, target = self.path(src), self.path(dst)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.lexists(target):
            os.remove(target)  # left by an interrupted copy
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)


def _ignore_missing(func, path, exc_info) -> None:
    if not isinstance(exc_info[1], FileNotFoundError):
        raise exc_info[1]


def _names_below(top: str, prefix: str) -> Iterator[str]:
    """The files below `top` as `os.walk` finds them (links to directories are not entered),
    as paths that start with `prefix`."""
    try:
        with os.scandir(top) as entries:
            listed = list(entries)
    except OSError:
        return
    if not os.access(top, os.X_OK):
        return  # names readable, files not reachable: `walk_files` cannot size them either
    for entry in listed:
        try:
            if entry.is_dir():
                if not entry.is_symlink():
                    yield from _names_below(entry.path, f"{prefix}{entry.name}/")
                continue
            if entry.is_symlink() and not os.path.exists(entry.path):
                continue  # leads nowhere: `walk_files` cannot size it either
        except OSError:
            continue
        yield prefix + entry.name
