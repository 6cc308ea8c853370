"""What one `prune` run may do: the retention window, the grace, and the rails around them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from lancens_cli.errors import InvalidInputError, RefusedError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|min|h|d|w)\s*$", re.IGNORECASE)
_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
MIN_WINDOW = timedelta(hours=1)  # below this a version or file may belong to a running write
MAX_WINDOW = timedelta(days=36500)  # a century: beyond it "older than" reaches before any date


def parse_duration(text: str, option: str) -> timedelta:
    """`7d`, `24h`, `90m`, `30s`, `2w`: a unit is required so `7` is never taken for seconds."""
    match = _DURATION.match(text or "")
    if not match:
        raise InvalidInputError(
            f"{option}: {text!r} is not a duration (a number and a unit: 30s, 90m, 24h, 7d, 2w)"
        )
    try:
        value = timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2).lower()])
    except OverflowError:
        value = None
    if value is None or value > MAX_WINDOW:
        raise InvalidInputError(
            f"{option}: {text.strip()!r} is out of range (at most {MAX_WINDOW.days}d)"
        )
    return value


def show_duration(value: timedelta) -> str:
    """A duration as `parse_duration` reads it back, exactly: `7d`, `90m`, `30s`, `0.5s`."""
    seconds, micro = divmod(value // timedelta(microseconds=1), 1_000_000)
    if micro:
        return f"{seconds}.{micro:06d}".rstrip("0") + "s"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


@dataclass(frozen=True)
class PrunePolicy:
    """Retention: versions older than `older_than` go, except the newest `retain` and every
    protected one; debris (never-committed writes, staged files, unpublished versions) goes
    once older than `grace`."""

    older_than: timedelta = timedelta(days=7)
    retain: int = 1
    grace: timedelta = timedelta(hours=24)
    force: bool = False

    @classmethod
    def from_options(cls, older_than: str, retain: int, grace: str, force: bool) -> PrunePolicy:
        """The policy the command line gives (`prune`, `versions`), checked."""
        policy = cls(
            older_than=parse_duration(older_than, "--older-than"),
            retain=retain,
            grace=parse_duration(grace, "--grace"),
            force=force,
        )
        policy.check()
        return policy

    def check(self) -> None:
        if self.retain < 1:
            raise InvalidInputError("--retain must be at least 1 (the newest version stays)")
        for option, value in (("--older-than", self.older_than), ("--grace", self.grace)):
            if value < MIN_WINDOW and not self.force:
                raise RefusedError(
                    f"{option} {show_duration(value)} is under 1 hour: a running write or a "
                    "reader may still need what it would delete; pass --force to allow it"
                )

    def to_json(self) -> dict[str, Any]:
        """The policy as every place that keeps or sends it writes it: the report, the
        record's key (service/prune/record.py), a Spark task's job (service/prune/table.py)."""
        return {
            "older_than": show_duration(self.older_than),
            "retain": self.retain,
            "grace": show_duration(self.grace),
            "force": self.force,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PrunePolicy:
        """Back from `to_json`, exactly (a policy checked where it was made)."""
        return cls(
            older_than=parse_duration(data["older_than"], "older_than"),
            retain=int(data["retain"]),
            grace=parse_duration(data["grace"], "grace"),
            force=bool(data["force"]),
        )
