"""Which version of a Lance table a user names: `--version-as-of N` / `--to-version N`, or
the newest committed at or before a time (`--timestamp-as-of T` / `--to-timestamp T`).

One rule for `__manifest` (time travel, restore, diff of a namespace) and for any table
(restore and diff of one table): a version must still be readable, a time without an offset is
UTC, and a version that is not there names the readable ones (exit 3).

A version's time is Lance's commit time, the `timestamp` of its manifest as `ds.versions()`
gives it (`commit_time`), and nothing else: every command that prints a version's time prints
this one (`words.utc_iso`, to the microsecond), so the time printed for version N, given back,
names N. (A file's modification time is not it: it can fall before the commit, and names the
version before.) Versions committed within one microsecond cannot be told apart by time: a time
names the newest of them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from lancens_cli.errors import InvalidInputError, TableVersionNotFoundError
from lancens_cli.words import utc_iso


def commit_time(entry: dict[str, Any]) -> datetime:
    """The commit time, in UTC, of one entry of `ds.versions()`: the one time of a version that
    every command shows and every timestamp option is compared with.

    Lance gives naive local times, as `datetime.astimezone` reads them."""
    return entry["timestamp"].astimezone(UTC)


def version_history(dataset: Any) -> list[tuple[int, datetime]]:
    """(version, commit time in UTC) of every readable version of a Lance dataset, oldest first."""
    return sorted((int(v["version"]), commit_time(v)) for v in dataset.versions())


def pick_version(
    history: list[tuple[int, datetime]],
    version: str | int | None,
    timestamp: str | None,
    what: str,
) -> int:
    """The version `version` names (it must be in `history`), or the newest committed at or
    before `timestamp` (ISO 8601; without an offset, UTC). `what` names the table in messages
    ("__manifest version 7 does not exist ...")."""
    if version is not None and timestamp is not None:
        raise InvalidInputError("give a version or a timestamp, not both")
    if not history:
        raise TableVersionNotFoundError(f"{what} has no versions")
    span = f"readable versions are {history[0][0]} to {history[-1][0]}"
    if version is not None:
        wanted = parse_version(version)
        if wanted not in {number for number, _ in history}:
            raise TableVersionNotFoundError(
                f"{what} version {wanted} does not exist or was pruned; {span}"
            )
        return wanted
    if timestamp is None:
        raise InvalidInputError("give a version or a timestamp")
    moment = parse_moment(timestamp)
    before = [number for number, when in history if when <= moment]
    if not before:
        first = utc_iso(history[0][1])  # whole: given back, it names that version
        raise TableVersionNotFoundError(
            f"no {what} version was committed at or before {moment.isoformat()} (the oldest "
            f"readable, version {history[0][0]}, is from {first}); {span}"
        )
    return before[-1]


def parse_version(version: str | int) -> int:
    try:
        wanted = int(str(version).strip())
    except ValueError:
        raise InvalidInputError(f"version {version!r} is not a whole number") from None
    return wanted


def parse_moment(timestamp: str) -> datetime:
    """An ISO 8601 time as an instant (UTC when it has no offset)."""
    try:
        moment = datetime.fromisoformat(str(timestamp).strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInputError(
            f"timestamp {timestamp!r} is not ISO 8601 (e.g. 2025-12-10T08:00:00Z)"
        ) from None
    try:
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00+14:00: before year 1 in UTC
        raise InvalidInputError(
            f"timestamp {timestamp!r} is out of range: in UTC it must fall in the years 1 to 9999"
        ) from None
