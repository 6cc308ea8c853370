"""Files written only if absent, and small JSON files read back: what a lease needs of storage.

A put-if-not-exists create is `O_EXCL` on local disk, `If-None-Match: *` on S3 and
`ifGenerationMatch=0` on GCS (fsspec's `mode="create"`); of two writers racing for one name
exactly one succeeds, and nobody's file is ever replaced.
"""

from __future__ import annotations

import json
import os

from lancens_cli.store.backoff import with_backoff
from lancens_cli.store.storage import Storage


def create_exclusive(storage: Storage, rel: str, text: str) -> bool:
    """Write a new file; False when it already exists (nobody's file is replaced)."""
    if storage.is_local:
        path = storage.uri(rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        return True
    target = storage.fs_path(rel)
    try:  # sent again while the store throttles it: a throttled request did nothing
        with_backoff(storage.fs.pipe_file, target, text.encode("utf-8"), mode="create")
        return True
    except FileExistsError:
        return False
    except Exception as exc:  # S3 answers 412 (a precondition failed) when the key exists
        words = str(exc).lower().replace("-", "")
        if "precondition" in words or "412" in words:
            return False
        storage.fail(exc)  # the storage's own words for a transport failure
        raise


def read_json(storage: Storage, rel: str) -> dict | None:
    try:
        if storage.is_local:
            with open(storage.uri(rel), encoding="utf-8") as handle:
                return json.loads(handle.read())
        return json.loads(storage.remote(storage.fs.cat_file, storage.fs_path(rel)))
    except (FileNotFoundError, ValueError):
        return None
