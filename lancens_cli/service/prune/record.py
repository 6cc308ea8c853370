"""What the last prune saw of each table, so that the next run skips the tables nothing changed.

A cron run over thousands of tables, most untouched since the last run, should cost about one
listing per table. The record, `.lancens-prune/record.json.gz` inside the root (written under
the prune lease, so by one run at a time), keeps per table location:

- `digest`: the digest of the table's listing (`store/version_files.TableListing.digest`: every
  path below the table, and each object's size and time or each local directory's time);
- `pins`: a digest of what the kept `__manifest` versions publish of the table;
- `dependents`: a digest of the shallow clones that read it (their locations and listings);
- `bases`: the locations the table itself reads through base paths (it may be a clone);
- `due`: the first moment something of the table ages into the policy (a version past
  `--older-than` or `--grace`, a file past `--grace`), or none;
- `checked`: when the table was last evaluated in full.

A table is skipped only when all of these hold; any doubt means a full evaluation:

- the record exists, parses, is of this format and of exactly this policy;
- the listing's digest is the recorded one, so no version, tag, branch or file came or went;
- what `__manifest` publishes of it and the clones that read it are as recorded;
- `due` has not come, and `checked` is less than `MAX_AGE` ago;
- the run can read every table (an unreadable one makes every table keep everything).

Skipping only ever omits work: a skipped table loses nothing, so a wrong record can delay a
deletion, never cause one. The digest does not depend on a clock's resolution: locally it holds
each file's inode (Lance replaces a file by renaming a new one into place), on object stores
each object's ETag and size.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from lancens_cli.service.prune.policy import PrunePolicy
from lancens_cli.store.containment import LEASE_DIR
from lancens_cli.store.storage import Storage
from lancens_cli.store.version_files import TableListing

RECORD = f"{LEASE_DIR}/record.json.gz"
FORMAT = 1
MAX_AGE = timedelta(days=7)


def policy_key(policy: PrunePolicy, compact: bool, indexes: bool) -> str:
    """Everything a run's decisions depend on besides the tables themselves."""
    return json.dumps(
        {"format": FORMAT, **policy.to_json(), "compact": compact, "indexes": indexes},
        sort_keys=True,
    )


def digest_of(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def due_after(listing: TableListing, policy: PrunePolicy, now: datetime) -> datetime | None:
    """The first moment after `now` at which anything the listing saw ages into the policy:
    a version other than the newest `--retain` past `--older-than` (any version, branches'
    too, when the table has tags or branches), anything past `--grace`; None when nothing
    will (then only a change brings the table back)."""
    by_number = [when for _version, (_name, when) in sorted(listing.versions.items())]
    aging = listing.times if listing.has_refs else tuple(by_number[: -policy.retain])
    ahead = [when + policy.older_than for when in aging]
    ahead += [when + policy.grace for when in listing.times]
    ahead = [moment for moment in ahead if moment > now]
    return min(ahead) if ahead else None


@dataclass(frozen=True)
class Entry:
    """One table as the last run left it."""

    digest: str
    pins: str
    dependents: str
    bases: list[str]
    due: datetime | None
    checked: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "digest": self.digest,
            "pins": self.pins,
            "dependents": self.dependents,
            "bases": self.bases,
            "due": self.due.isoformat() if self.due else None,
            "checked": self.checked.isoformat(),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Entry:
        due = data["due"]
        return cls(
            str(data["digest"]),
            str(data["pins"]),
            str(data["dependents"]),
            [str(b) for b in data["bases"]],
            datetime.fromisoformat(due) if due else None,
            datetime.fromisoformat(data["checked"]),
        )


@dataclass
class PruneRecord:
    """The record a run read (`entries`) and the one it will leave (`next`)."""

    policy: str
    entries: dict[str, Entry] = field(default_factory=dict)
    next: dict[str, Entry] = field(default_factory=dict)

    @classmethod
    def load(cls, storage: Storage, policy: str) -> PruneRecord:
        """The last run's record; an empty one when it is missing, damaged, of another
        format or of another policy (then every table is evaluated in full)."""
        record = cls(policy)
        try:
            data = json.loads(gzip.decompress(storage.read_bytes(RECORD)))
            if data.get("format") != FORMAT or data.get("policy") != policy:
                return record
            record.entries = {
                str(location): Entry.from_json(entry) for location, entry in data["tables"].items()
            }
        except Exception:  # noqa: BLE001 - a record we cannot read is no record
            record.entries = {}
        return record

    def unchanged(self, location: str, digest: str, now: datetime) -> Entry | None:
        """The entry of a table whose listing is as recorded and whose time has not come."""
        entry = self.entries.get(location)
        if entry is None or not digest or entry.digest != digest:
            return None
        if now - entry.checked > MAX_AGE or now < entry.checked:
            return None
        if entry.due is not None and now >= entry.due:
            return None
        return entry

    def save(self, storage: Storage) -> None:
        """Replace the record with `next` as one whole file."""
        data = {
            "format": FORMAT,
            "policy": self.policy,
            "tables": {location: e.to_json() for location, e in sorted(self.next.items())},
        }
        storage.write_bytes(RECORD, gzip.compress(json.dumps(data).encode(), compresslevel=5))
