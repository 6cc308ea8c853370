"""Words for the text a person reads: counts, sizes and times.

`plural` / `noun` say a count as words ("1 object", "2 directories", never "object(s)");
`human_bytes` and `human_time` give sizes in binary units and timestamps as dates (`utc_iso` is
the same moment as results keep it in JSON: full precision, UTC, `+00:00`). Every layer
that writes text uses them: command messages, progress bars and terminal tables (cli/,
describe_view.py), the summaries and error messages built in service/ and pipeline/, and config
errors (config.py). Results in `--json` keep their plain numbers.
"""

from __future__ import annotations

from datetime import UTC, datetime

_IRREGULAR = {"directory": "directories", "index": "indexes", "entry": "entries"}


def noun(count: int, word: str, many: str | None = None) -> str:
    """`word` as `count` of it is said: "table" for 1, "tables" otherwise (0 too)."""
    if count == 1:
        return word
    return many or _IRREGULAR.get(word) or word + "s"


def plural(count: int, word: str, many: str | None = None) -> str:
    """The count and its noun: "1 table", "0 tables", "3 directories"."""
    return f"{count} {noun(count, word, many)}"


def human_bytes(size: float) -> str:
    """A size in binary units: "512 B", "5.2 KiB", "1.3 GiB"."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def utc_iso(when: datetime) -> str:
    """A moment as JSON results keep it: ISO 8601 in UTC, full precision, with its offset
    ("2026-11-27T09:38:08.123456+00:00"). A naive datetime is local time (what pylance's
    `versions()` gives)."""
    return when.astimezone(UTC).isoformat()


def human_time(iso: str | None) -> str:
    """An ISO timestamp as text output shows it: UTC to the second, "2026-11-27T09:38:08Z"
    (one without an offset is taken as UTC)."""
    if not iso:
        return "-"
    try:
        when = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")
