"""The namespace root on storage: local directories through `os`, object stores through fsspec.

Paths handed to this module are relative to the root and use `/`. Lance gets the same storage
options as fsspec (translated here), so both sides see the same bucket with the same credentials.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lancens_cli import interrupt
from lancens_cli.config import NamespaceConfig, parse_bool
from lancens_cli.errors import (
    ConfigError,
    InvalidInputError,
    StorageUnavailableError,
    describe_exception,
    lance_message,
)

# Lance (object_store) option names -> what fsspec's S3 and GCS file systems call them.
_S3_KEYS = {
    "access_key_id": "key",
    "aws_access_key_id": "key",
    "secret_access_key": "secret",
    "aws_secret_access_key": "secret",
    "session_token": "token",
    "aws_session_token": "token",
    "token": "token",
}
_S3_ENDPOINT_KEYS = ("endpoint", "aws_endpoint", "endpoint_url", "aws_endpoint_url")
_S3_REGION_KEYS = ("region", "aws_region")
DEFAULT_TIMEOUT_SECONDS = 30


@dataclass(frozen=True)
class DirEntry:
    name: str
    is_dir: bool


def check_relative(location: str) -> str:
    """Refuse a location that is absolute, a URI, or climbs out of the root."""
    if not location or location.startswith(("/", "\\")) or "://" in location:
        raise InvalidInputError(f"location {location!r} must be a path relative to the root")
    parts = location.replace("\\", "/").split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise InvalidInputError(f"location {location!r} must not contain '.', '..' or '//'")
    return "/".join(parts)


class Storage:
    """Operations on paths below one namespace root."""

    def __init__(self, config: NamespaceConfig) -> None:
        self.config = config
        self.root_uri = config.root
        self.scheme = config.scheme
        self.is_local = self.scheme == "file"
        self._root_path = self.root_uri[len("file://") :] if self.is_local else None
        self._fs: Any = None

    # --- addressing ---------------------------------------------------------------------
    def uri(self, rel: str = "") -> str:
        """The address Lance is given for a path below the root."""
        if self.is_local:
            return os.path.join(self._root_path, rel) if rel else self._root_path
        if not rel:
            return self.root_uri
        # Lance parses this as a URL: escape what would start a query or fragment, or decode.
        escaped = rel.replace("%", "%25").replace("#", "%23").replace("?", "%3F")
        return f"{self.root_uri}/{escaped}"

    def _path(self, rel: str = "") -> str:
        if self.is_local:
            return self.uri(rel)
        base = self.root_uri.split("://", 1)[1]
        return f"{base}/{rel}" if rel else base

    def relative(self, uri: str) -> str | None:
        """The location of a URI below the root, or None when it lies elsewhere."""
        for prefix in (self.uri(), self.root_uri):
            if uri.startswith(prefix.rstrip("/") + "/"):
                return uri[len(prefix.rstrip("/")) + 1 :]
        return None

    @property
    def lance_options(self) -> dict[str, str]:
        """Storage options for Lance: the spec's `storage.*`, prefix removed, plus a timeout."""
        options = dict(self.config.storage_options)
        if not self.is_local:
            options.setdefault("timeout", f"{DEFAULT_TIMEOUT_SECONDS}s")
        for key in TIMEOUT_KEYS:  # validated, and in a spelling Lance's parser accepts
            if key in options:
                options[key] = f"{round(_timeout_seconds(options, key) * 1000)}ms"
        return options

    # --- fsspec -------------------------------------------------------------------------
    @property
    def fs(self) -> Any:
        if self._fs is None:
            self._fs = self._make_fs()
        return self._fs

    def _make_fs(self) -> Any:
        options = self.config.storage_options
        if self.scheme == "s3":
            import s3fs

            kwargs: dict[str, Any] = {}
            client: dict[str, Any] = {}
            for key, value in options.items():
                lowered = key.lower()
                if lowered in _S3_KEYS:
                    kwargs[_S3_KEYS[lowered]] = value
                elif lowered in _S3_ENDPOINT_KEYS:
                    client["endpoint_url"] = value
                elif lowered in _S3_REGION_KEYS:
                    client["region_name"] = value
                elif lowered in ("skip_signature", "anonymous", "aws_skip_signature"):
                    kwargs["anon"] = parse_bool(key, value)
            timeout = _timeout_seconds(options)
            fs = s3fs.S3FileSystem(
                client_kwargs=client,
                config_kwargs={
                    "connect_timeout": _timeout_seconds(options, "connect_timeout", timeout),
                    "read_timeout": timeout,
                    "retries": {"max_attempts": 2, "mode": "standard"},
                },
                skip_instance_cache=True,
                **kwargs,
            )
            fs.retries = 1  # s3fs's own retry loop on top of botocore's: one is enough
            return fs
        if self.scheme == "gs":
            return _make_gcsfs(options)
        raise ConfigError(f"unsupported scheme {self.scheme!r}")

    def _remote(self, call, *args, **kwargs):
        """Run an fsspec call, turning transport failures into one clear error."""
        try:
            return call(*args, **kwargs)
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
        if self.is_local:
            if os.path.lexists(self._root_path) and not os.path.isdir(self._root_path):
                raise ConfigError(f"root {self.root_uri} is not a directory")
            return os.path.isdir(self._root_path)
        bucket = self._path().split("/", 1)[0]
        try:  # `info`, not `exists`: a bucket that does not answer must not read as missing
            self._remote(self.fs.info, bucket)
            return True
        except FileNotFoundError:
            return False

    def list_dir(self, rel: str = "") -> list[DirEntry]:
        """Immediate children of a directory; empty when it does not exist."""
        if self.is_local:
            try:
                with os.scandir(self._path(rel)) as it:
                    return [DirEntry(e.name, e.is_dir()) for e in it]
            except (FileNotFoundError, NotADirectoryError):
                return []
        try:
            infos = self._remote(self.fs.ls, self._path(rel), detail=True, refresh=True)
        except FileNotFoundError:
            return []
        base = self._path(rel).rstrip("/") + "/"
        entries = []
        for info in infos:
            name = info["name"].rstrip("/")
            name = name[len(base) :] if name.startswith(base) else name.rsplit("/", 1)[-1]
            if name:
                entries.append(DirEntry(name, info.get("type") == "directory"))
        return entries

    def exists(self, rel: str) -> bool:
        if self.is_local:
            return os.path.exists(self._path(rel))
        try:
            return bool(self._remote(self.fs.exists, self._path(rel)))
        except FileNotFoundError:
            return False

    def is_dir(self, rel: str) -> bool:
        """Whether `rel` is a directory (on an object store: a prefix with objects below)."""
        if self.is_local:
            return os.path.isdir(self._path(rel))
        try:
            info = self._remote(self.fs.info, self._path(rel))
        except FileNotFoundError:
            return False
        return info.get("type") == "directory"

    def walk_files(self, rel: str) -> Iterator[tuple[str, int]]:
        """Every file below `rel` as (path relative to `rel`, size)."""
        if self.is_local:
            top = self._path(rel)
            for dirpath, _dirs, files in os.walk(top):
                for name in files:
                    full = os.path.join(dirpath, name)
                    try:
                        size = os.path.getsize(full)
                    except OSError:
                        continue
                    yield os.path.relpath(full, top).replace(os.sep, "/"), size
            return
        try:
            found = self._remote(self.fs.find, self._path(rel), detail=True)
        except FileNotFoundError:
            return
        base = self._path(rel).rstrip("/") + "/"
        for name, info in found.items():
            if info.get("type") == "file" and name.startswith(base):
                yield name[len(base) :], int(info.get("size") or 0)

    def modified(self, rel: str) -> datetime | None:
        """When one file was last written (UTC), or None if it is not there."""
        if self.is_local:
            try:
                return datetime.fromtimestamp(os.path.getmtime(self._path(rel)), UTC)
            except OSError:
                return None
        try:
            return _modified(self._remote(self.fs.info, self._path(rel)))
        except FileNotFoundError:
            return None

    def newest_change(self, rel: str) -> datetime | None:
        """When a file below `rel` was last written (UTC), or None if there is no file."""
        if self.is_local:
            times = []
            for dirpath, _dirs, files in os.walk(self._path(rel)):
                for name in files:
                    with contextlib.suppress(OSError):
                        times.append(os.path.getmtime(os.path.join(dirpath, name)))
            return datetime.fromtimestamp(max(times), UTC) if times else None
        try:
            found = self._remote(self.fs.find, self._path(rel), detail=True)
        except FileNotFoundError:
            return None
        times = [_modified(info) for info in found.values() if info.get("type") == "file"]
        known = [t for t in times if t is not None]
        if len(known) != len(times):
            return datetime.now(UTC)  # unknown age counts as new: nothing is deleted on a guess
        return max(known) if known else None

    # --- changes ------------------------------------------------------------------------
    def ensure_root(self) -> None:
        if self.is_local:
            try:
                os.makedirs(self._root_path, exist_ok=True)
            except (FileExistsError, NotADirectoryError):  # a file on the way
                raise ConfigError(
                    f"root {self.root_uri}: a file is in the way of the directory"
                ) from None

    def write_text(self, rel: str, text: str) -> None:
        if self.is_local:
            path = self._path(rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
            return
        self._remote(self.fs.pipe_file, self._path(rel), text.encode("utf-8"))

    def read_bytes(self, rel: str) -> bytes:
        if self.is_local:
            with open(self._path(rel), "rb") as handle:
                return handle.read()
        return self._remote(self.fs.cat_file, self._path(rel))

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Replace a file as a whole: on local disk a new inode (a hard link to the old content,
        as `copy_tree` makes, is left untouched) moved into place atomically."""
        if self.is_local:
            path = self._path(rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            temporary = f"{path}.lancens-{os.getpid()}.tmp"
            with open(temporary, "wb") as handle:
                handle.write(data)
            os.replace(temporary, path)
            return
        self._remote(self.fs.pipe_file, self._path(rel), data)

    def delete_file(self, rel: str) -> None:
        if self.is_local:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self._path(rel))
            return
        with contextlib.suppress(FileNotFoundError):
            self._remote(self.fs.rm_file, self._path(rel))

    def delete_files(self, rels: list[str]) -> None:
        """Remove files; absent ones are fine. On an object store one batched request per
        thousand keys (s3fs and gcsfs batch `rm` of a list), not one request per file."""
        for rel in rels:
            check_relative(rel)
        if self.is_local:
            for rel in rels:
                self.delete_file(rel)
            return
        if rels:
            with contextlib.suppress(FileNotFoundError):
                self._remote(self.fs.rm, [self._path(rel) for rel in rels])

    def delete_tree(self, rel: str) -> None:
        """Remove a directory and everything below it; absent is fine (reruns)."""
        check_relative(rel)
        interrupt.mark_durable()  # no way back: a Ctrl-C from here on lets the command finish
        if self.is_local:
            path = self._path(rel)
            if os.path.isdir(path) and not os.path.islink(path):
                # `_versions/` first, as below: a half-deleted table stops being a table at once.
                versions = os.path.join(path, "_versions")
                if os.path.isdir(versions) and not os.path.islink(versions):
                    shutil.rmtree(versions, ignore_errors=False, onerror=_ignore_missing)
                shutil.rmtree(path, ignore_errors=False, onerror=_ignore_missing)
            elif os.path.lexists(path):
                os.remove(path)
            return
        files = [self._path(rel) + "/" + name for name, _ in self.walk_files(rel)]
        if files:
            # Manifests last: a half-deleted table stops looking like a table only at the end
            # would be worse; removing `_versions/` first makes it stop being one at once.
            files.sort(key=lambda f: "/_versions/" not in f)
            self._remote(self.fs.rm, files)

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
            if self.is_local:
                _link_or_copy(
                    os.path.join(self._path(src), name), os.path.join(self._path(dst), name)
                )
            else:
                self._remote(self.fs.copy, f"{self._path(src)}/{name}", f"{self._path(dst)}/{name}")


_GCS_TOKEN_PATH_KEYS = (
    "service_account",
    "google_service_account",
    "service_account_path",
    "google_service_account_path",
    "application_credentials",
    "google_application_credentials",
)
_GCS_ANONYMOUS_KEYS = ("skip_signature", "google_skip_signature", "anonymous", "allow_anonymous")


def _make_gcsfs(options: dict[str, str]) -> Any:
    """gcsfs for the options Lance reads (object_store's Google keys), independent of order.

    A service-account key with object_store's emulator extension (`gcs_base_url`,
    `disable_oauth`) sets the endpoint and anonymous access, as it does for Lance. With any custom
    endpoint the plain JSON-API client is used: gcsfs' default "extended" client asks a gRPC
    storage-layout API at the same host for every bucket and waits 60 s when that fails.
    """
    import json

    import gcsfs
    from gcsfs.core import GCSFileSystem as PlainGCSFileSystem

    kwargs: dict[str, Any] = {}
    endpoint = key_endpoint = None
    anonymous = False
    for key, value in options.items():
        lowered = key.lower()
        if lowered in _GCS_TOKEN_PATH_KEYS:
            kwargs["token"] = value
        elif lowered in ("service_account_key", "google_service_account_key"):
            try:
                info = json.loads(value)
            except ValueError:
                raise ConfigError(f"storage.{key}: not valid JSON") from None
            if not isinstance(info, dict):
                raise ConfigError(f"storage.{key}: not a JSON object")
            key_endpoint = info.get("gcs_base_url") or key_endpoint
            if parse_bool(f"storage.{key}.disable_oauth", info.get("disable_oauth", False)):
                anonymous = True
            else:
                kwargs["token"] = info
        elif lowered in ("endpoint", "google_endpoint", "endpoint_url"):
            endpoint = value
        elif lowered in ("project", "project_id"):
            kwargs["project"] = value
        elif lowered in _GCS_ANONYMOUS_KEYS:
            anonymous = anonymous or parse_bool(key, value)
    if anonymous:
        kwargs["token"] = "anon"
    endpoint = endpoint or key_endpoint
    if endpoint:
        return PlainGCSFileSystem(endpoint_url=endpoint, skip_instance_cache=True, **kwargs)
    return gcsfs.GCSFileSystem(skip_instance_cache=True, **kwargs)


def _link_or_copy(source: str, target: str) -> None:
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


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h)?\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
TIMEOUT_KEYS = ("timeout", "connect_timeout")


def _timeout_seconds(
    options: dict[str, str], key: str = "timeout", default: float = DEFAULT_TIMEOUT_SECONDS
) -> float:
    """A duration option (`30`, `30s`, `500ms`, `2m`) in seconds; it must be above zero."""
    if key not in options:
        return default
    match = _DURATION.match(options[key])
    seconds = float(match.group(1)) * _UNIT_SECONDS[(match.group(2) or "s").lower()] if match else 0
    if not seconds > 0:
        raise ConfigError(
            f"storage.{key}: {options[key]!r} is not a duration above zero (e.g. 30s, 500ms, 2m)"
        )
    return seconds


def _modified(info: dict) -> datetime | None:
    """The modification time in an fsspec listing entry (s3fs and gcsfs name it differently)."""
    value = info.get("LastModified") or info.get("updated") or info.get("mtime")
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return None
