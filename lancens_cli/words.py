"""Words for the text a person reads: counts, sizes and times.

`plural` / `noun` say a count as words ("1 object", "2 directories", never "object(s)");
`human_bytes` gives sizes in binary units; `utc_iso` is a moment as every output shows it, text
and JSON alike (full precision, UTC, `Z`), and `human_time` the same text from an ISO string, so
a time printed anywhere names, given back, the moment it was printed from; `short` cuts a value
a line quotes to a length. Every layer that writes text uses them: command messages, progress
bars and terminal tables (cli/, describe_view.py), the summaries and error messages built in
service/, partition/ and pipeline/, and config errors (config.py). Results in `--json` keep
their plain numbers.
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
    """A moment as every output shows it, text and JSON: ISO 8601 in UTC to the microsecond,
    with `Z` ("2026-11-27T09:38:08.123456Z"). Always six digits: Lance's commit times are
    microseconds, and a time cut shorter names an earlier moment than the version's own (given
    back to `--to-timestamp`, the version before). A naive datetime is local time (what
    pylance's `versions()` gives)."""
    return when.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def human_time(iso: str | None) -> str:
    """An ISO timestamp as text output shows it: `utc_iso`'s form, "2026-11-27T09:38:08.123456Z"
    (one without an offset is taken as UTC); "-" for none."""
    if not iso:
        return "-"
    try:
        when = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    return utc_iso(when.replace(tzinfo=UTC) if when.tzinfo is None else when)


def short(text: str, limit: int = 120) -> str:
    """`text` whole when at most `limit` characters, else cut to `limit` ending in "…": how a
    terminal cell or an error message quotes a value of any length."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
