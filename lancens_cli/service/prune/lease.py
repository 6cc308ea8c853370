"""One `prune` at a time per root: a lease file with an owner and an expiry.

Leases are numbered files `.lancens-prune/lease-<n>` written with put-if-not-exists (`O_EXCL`
on local disk, `If-None-Match: *` on S3, `ifGenerationMatch=0` on GCS through fsspec's
exclusive create). To take the lease a run reads the newest lease: if it is live, the run stops
with exit 4; otherwise it creates the next number. Of two runs racing for the same number
exactly one create succeeds, so no two runs ever hold a lease at once, without deleting anybody
else's file first. A killed run's lease expires (its expiry passes, or on the same host its
process is gone), so it never blocks the next run for long; a live run renews its lease.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from lancens_cli.errors import ConcurrentModificationError
from lancens_cli.processes import pid_alive
from lancens_cli.store.containment import LEASE_DIR
from lancens_cli.store.exclusive_files import create_exclusive, read_json
from lancens_cli.store.storage import Storage

LEASE_SECONDS = int(os.environ.get("LANCENS_PRUNE_LEASE_SECONDS", "600"))


def _is_live(lease: dict | None) -> bool:
    if not lease:
        return False  # unreadable or half-written: a dead run's, treated as expired
    try:
        expires = datetime.fromisoformat(lease["expires"])
    except (KeyError, ValueError, TypeError):
        return False
    if expires <= datetime.now(UTC):
        return False
    if lease.get("host") == socket.gethostname() and isinstance(lease.get("pid"), int):
        return pid_alive(lease["pid"])
    return True


@dataclass
class Lease:
    storage: Storage
    number: int
    owner: str = field(default_factory=lambda: uuid.uuid4().hex)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @property
    def rel(self) -> str:
        return f"{LEASE_DIR}/lease-{self.number:012d}"

    def body(self) -> str:
        return json.dumps(
            {
                "owner": self.owner,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "taken": datetime.now(UTC).isoformat(),
                "expires": (datetime.now(UTC) + timedelta(seconds=LEASE_SECONDS)).isoformat(),
            }
        )

    def _renew(self) -> None:
        while not self._stop.wait(max(LEASE_SECONDS / 4, 1)):
            with contextlib.suppress(Exception):  # a missed renewal only shortens the lease
                self.storage.write_text(self.rel, self.body())

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.storage.delete_file(self.rel)


def _numbers(storage: Storage) -> list[int]:
    found = []
    for entry in storage.list_dir(LEASE_DIR):
        name = entry.name.rsplit("/", 1)[-1]
        if name.startswith("lease-") and name[6:].isdigit():
            found.append(int(name[6:]))
    return sorted(found)


def acquire(storage: Storage) -> Lease:
    """Take the root's prune lease or raise ConcurrentModificationError (exit 4) at once."""
    numbers = _numbers(storage)
    for number in reversed(numbers):
        lease = read_json(storage, f"{LEASE_DIR}/lease-{number:012d}")
        if lease is not None and _is_live(lease):
            raise ConcurrentModificationError(
                f"another prune holds the lease on {storage.root_uri} (owner {lease['owner']}, "
                f"host {lease.get('host')}, pid {lease.get('pid')}, until {lease['expires']})"
            )
    mine = Lease(storage, (numbers[-1] + 1) if numbers else 1)
    if not create_exclusive(storage, mine.rel, mine.body()):
        raise ConcurrentModificationError(
            f"another prune took the lease on {storage.root_uri} at the same moment"
        )
    for number in numbers:  # expired leases of killed runs
        storage.delete_file(f"{LEASE_DIR}/lease-{number:012d}")
    mine._thread = threading.Thread(target=mine._renew, daemon=True)
    mine._thread.start()
    return mine
