"""A namespace root on an object store (S3, GCS), through fsspec (`Storage`'s remote side).

Every call goes through `remote`, which sends it again while the store throttles it
(store/backoff.py) and turns the transport's many failures into one clear
StorageUnavailableError; a missing object stays FileNotFoundError for the callers to decide.
S3 deletes are our own `DeleteObjects` requests: S3 answers one with the keys it did not delete
(`SlowDown` under load), which s3fs's `rm` drops without a word.

store/arrow_text.py (pyarrow) is imported inside `dir_names`: a command that never lists
table names loads no pyarrow through this module.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from lancens_cli.errors import StorageUnavailableError, describe_exception, lance_message
from lancens_cli.store.backoff import THROTTLING_CODES, waits, with_backoff
from lancens_cli.store.dir_entry import DirEntry
from lancens_cli.store.manifest_names import deletion_phases
from lancens_cli.store.storage_options import make_fs

if TYPE_CHECKING:
    from lancens_cli.store.arrow_text import Names


class ObjectStoreFiles:
    """Keys below an object-store root; `rel` is relative to it and uses `/`."""

    def __init__(self, root_uri: str, scheme: str, options: dict[str, str]) -> None:
        self.root_uri = root_uri
        self.scheme = scheme
        self.options = options
        self._fs: Any = None

    @property
    def fs(self) -> Any:
        if self._fs is None:
            self._fs = make_fs(self.scheme, self.options)
        return self._fs

    def path(self, rel: str = "") -> str:
        base = self.root_uri.split("://", 1)[1]
        return f"{base}/{rel}" if rel else base

    def remote(self, call, *args, **kwargs):
        """Run an fsspec call (again, after a wait, while the store throttles it), turning
        transport failures into one clear error."""
        try:
            return with_backoff(lambda: call(*args, **kwargs))
        except Exception as exc:
            self.fail(exc)

    def fail(self, exc: Exception):
        """Raise a failure of the store in words (FileNotFoundError stays as it is)."""
        try:
            raise exc
        except FileNotFoundError:
            raise
        except PermissionError as exc:
            raise StorageUnavailableError(
                f"access denied at {self.root_uri}: {exc.strerror or exc}"
            ) from None
        except OSError as exc:
            detail = describe_exception(exc).removeprefix("storage error: ")
            raise StorageUnavailableError(f"storage error at {self.root_uri}: {detail}") from None
        except Exception as exc:  # botocore / aiohttp errors have no common base
            raise StorageUnavailableError(
                f"storage at {self.root_uri} did not answer: {lance_message(exc)}"
            ) from None

    # --- queries ------------------------------------------------------------------------
    def root_exists(self) -> bool:
        bucket = self.path().split("/", 1)[0]
        try:  # `info`, not `exists`: a bucket that does not answer must not read as missing
            self.remote(self.fs.info, bucket)
            return True
        except FileNotFoundError:
            return False

    def holds_name_ending(self, rel: str, suffix: str) -> bool:
        return any(entry.name.endswith(suffix) for entry in self.list_dir(rel))

    def list_dir(self, rel: str) -> list[DirEntry]:
        try:
            infos = self.remote(self.fs.ls, self.path(rel), detail=True, refresh=True)
        except FileNotFoundError:
            return []
        base = self.path(rel).rstrip("/") + "/"
        entries = []
        for info in infos:
            name = info["name"].rstrip("/")
            name = name[len(base) :] if name.startswith(base) else name.rsplit("/", 1)[-1]
            if name:
                entries.append(DirEntry(name, info.get("type") == "directory"))
        return entries

    def dir_names(
        self, rel: str, suffix: str, after: str | None = None, until: str | None = None
    ) -> Names:
        """`_prefix_names`, as Arrow text."""
        from lancens_cli.store.arrow_text import names_of

        return names_of(self._prefix_names(rel, suffix, after, until))

    def _prefix_names(
        self, rel: str, suffix: str, after: str | None = None, until: str | None = None
    ) -> list[str]:
        """The names of the prefixes in `rel` that end with `suffix`. With `after` and
        `until`, at least those after the name `after` whose keys below `rel` (`<name>/`, the
        slash included: `t.lance-old/` sorts before `t.lance/`) are at most `until`: S3 and
        GCS list keys in order, so the listing starts past `after` and its pages stop past
        `until`, a request per thousand names wanted, not per thousand in `rel`."""
        bucket, _, key = self.path(rel).partition("/")
        if (after is None and until is None) or not self._lists_in_order(bucket):
            return [e.name for e in self.list_dir(rel) if e.is_dir and e.name.endswith(suffix)]
        prefix = f"{key}/" if key else ""
        pages = _s3_pages if self.scheme == "s3" else _gcs_pages
        names: list[str] = []
        try:
            for page in pages(self, bucket, prefix, prefix + after if after else None):
                for found in page:
                    below = found[len(prefix) :]  # `<name>/`: keys order with the slash
                    if until is not None and below > until:
                        return names
                    name = below.rstrip("/")
                    if (after is None or name > after) and name.endswith(suffix):
                        names.append(name)
        except FileNotFoundError:  # no bucket: nothing listed, as `list_dir` answers
            return []
        return names

    def _lists_in_order(self, bucket: str) -> bool:
        """S3 general-purpose buckets and GCS list keys in byte order from a start key; S3
        Express directory buckets (`--x-s3`) list in no order and take no start key."""
        return self.scheme == "gs" or (self.scheme == "s3" and not bucket.endswith("--x-s3"))

    def exists(self, rel: str) -> bool:
        try:
            return bool(self.remote(self.fs.exists, self.path(rel)))
        except FileNotFoundError:
            return False

    def entry_exists(self, rel: str) -> bool:
        """Whether `rel` is an object or a prefix, in one request on S3: a listing of the
        names that start with it, cut at the next `/` (`exists` asks twice for a missing
        key: the object, then whether it is a prefix)."""
        if self.scheme != "s3":
            return self.exists(rel)
        bucket, key = self.path(rel).split("/", 1)
        try:
            page = self.remote(
                self.fs.call_s3, "list_objects_v2", Bucket=bucket, Prefix=key, Delimiter="/"
            )
        except FileNotFoundError:  # no such bucket, as `exists` answers it
            return False
        if any(o.get("Key") == key for o in page.get("Contents", [])):
            return True
        if any(p.get("Prefix") == f"{key}/" for p in page.get("CommonPrefixes", [])):
            return True
        # names that only start with it (`key-x`) filled the page: ask the long way
        return bool(page.get("IsTruncated")) and self.exists(rel)

    def dir_exists(self, rel: str) -> bool:
        """A directory is never an object: one listing (`entry_exists`) answers for it."""
        return self.entry_exists(rel)

    def is_dir(self, rel: str) -> bool:
        """A prefix with objects below it."""
        try:
            info = self.remote(self.fs.info, self.path(rel))
        except FileNotFoundError:
            return False
        return info.get("type") == "directory"

    def walk_files(self, rel: str) -> Iterator[tuple[str, int]]:
        try:
            found = self.remote(self.fs.find, self.path(rel), detail=True)
        except FileNotFoundError:
            return
        base = self.path(rel).rstrip("/") + "/"
        for name, info in found.items():
            if info.get("type") == "file" and name.startswith(base):
                yield name[len(base) :], int(info.get("size") or 0)

    def file_names(self, rel: str) -> Iterator[str]:
        """`walk_files`'s paths without their sizes (one listing either way)."""
        for name, _size in self.walk_files(rel):
            yield name

    def modified(self, rel: str) -> datetime | None:
        try:
            return modified_of(self.remote(self.fs.info, self.path(rel)))
        except FileNotFoundError:
            return None

    def newest_change(self, rel: str) -> datetime | None:
        try:
            found = self.remote(self.fs.find, self.path(rel), detail=True)
        except FileNotFoundError:
            return None
        times = [modified_of(info) for info in found.values() if info.get("type") == "file"]
        known = [t for t in times if t is not None]
        if len(known) != len(times):
            return datetime.now(UTC)  # unknown age counts as new: nothing is deleted on a guess
        return max(known) if known else None

    # --- changes ------------------------------------------------------------------------
    def ensure_root(self) -> None:
        """Nothing to do: a bucket prefix exists as soon as an object is written below it."""

    def write_text(self, rel: str, text: str) -> None:
        self.remote(self.fs.pipe_file, self.path(rel), text.encode("utf-8"))

    def read_bytes(self, rel: str) -> bytes:
        """One GET. s3fs otherwise asks for the object's size first (a HEAD, to read a large
        object in parallel parts): a second request for every manifest prune reads."""
        if self.scheme == "s3":
            return self.remote(self.fs.cat_file, self.path(rel), max_concurrency=1)
        return self.remote(self.fs.cat_file, self.path(rel))

    def write_bytes(self, rel: str, data: bytes) -> None:
        self.remote(self.fs.pipe_file, self.path(rel), data)

    def delete_file(self, rel: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.remote(self.fs.rm_file, self.path(rel))

    def delete_files(self, rels: list[str]) -> None:
        """One batched request per thousand keys (gcsfs batches `rm` of a list itself)."""
        if not rels:
            return
        paths = [self.path(rel) for rel in rels]
        if self.scheme != "s3":
            with contextlib.suppress(FileNotFoundError):
                self.remote(self.fs.rm, paths)
            return
        bucket = paths[0].split("/", 1)[0]
        keys = [path.split("/", 1)[1] for path in paths]
        for start in range(0, len(keys), 1000):
            self._delete_keys(bucket, keys[start : start + 1000])
        for path in paths:
            self.fs.invalidate_cache(path)

    def _delete_keys(self, bucket: str, keys: list[str]) -> None:
        """One `DeleteObjects` of at most 1,000 keys; the keys S3 skipped while throttling are
        sent again after a wait; any other key it could not delete is an error."""
        pending, failed = keys, []
        for wait in [*waits(), None]:
            answer = self.remote(
                self.fs.call_s3,
                "delete_objects",
                Bucket=bucket,
                Delete={"Objects": [{"Key": key} for key in pending], "Quiet": True},
            )
            failed = [e for e in answer.get("Errors", []) if e.get("Code") != "NoSuchKey"]
            throttled = [e["Key"] for e in failed if e.get("Code") in THROTTLING_CODES]
            if not throttled or len(throttled) < len(failed) or wait is None:
                break
            pending = throttled
            time.sleep(wait)
        if failed:
            first = failed[0]
            raise StorageUnavailableError(
                f"storage error at {self.root_uri}: {len(failed)} object(s) not deleted "
                f"({first.get('Code')}: {first.get('Message')}; first {first.get('Key')})"
            )

    def delete_tree(self, rel: str) -> None:
        files = [name for name, _ in self.walk_files(rel)]
        for phase in deletion_phases(files):  # never an older version readable in its place
            self.delete_files([f"{rel}/{name}" for name in phase])

    def copy_file(self, src: str, dst: str) -> None:
        self.remote(self.fs.copy, self.path(src), self.path(dst))


def modified_of(info: dict) -> datetime | None:
    """The modification time in an fsspec listing entry (s3fs and gcsfs name it differently)."""
    value = info.get("LastModified") or info.get("updated") or info.get("mtime")
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return None


def _s3_pages(files: ObjectStoreFiles, bucket: str, prefix: str, start: str | None):
    """The common prefixes below `prefix`, a page (a request) at a time, from past `start`."""
    params: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "Delimiter": "/"}
    if start:
        params["StartAfter"] = start
    while True:
        page = files.remote(files.fs.call_s3, "list_objects_v2", **params)
        yield [found["Prefix"] for found in page.get("CommonPrefixes", [])]
        if not page.get("IsTruncated"):
            return
        params["ContinuationToken"] = page["NextContinuationToken"]


def _gcs_pages(files: ObjectStoreFiles, bucket: str, prefix: str, start: str | None):
    """`_s3_pages` through the GCS JSON API (`startOffset` is inclusive: the caller skips
    a name equal to `start`)."""
    params: dict[str, Any] = {"prefix": prefix, "delimiter": "/", "maxResults": 1000}
    if start:
        params["startOffset"] = start
    while True:
        page = files.remote(files.fs.call, "GET", "b/{}/o", bucket, json_out=True, **params)
        yield page.get("prefixes", [])
        if not page.get("nextPageToken"):
            return
        params["pageToken"] = page["nextPageToken"]
