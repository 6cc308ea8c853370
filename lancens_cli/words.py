"""Words for the text a person reads: counts, sizes and times.

`plural` / `noun` say a count as words ("1 object", "2 directories", never "object(s)");
`human_bytes` and `human_time` give sizes in binary units and timestamps as dates. Every layer
that writes text uses them: command messages, progress bars and terminal tables (cli/,
describe_view.py), the summaries and error messages built in service/ and pipeline/, and config
errors (config.py). Results in `--json` keep their plain numbers.
"""

from __future__ import annotations

from datetime import datetime

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


def human_time(iso: str | None) -> str:
    """An ISO timestamp as a date a person reads: "2026-11-22 22:49:41" (offset kept)."""
    if not iso:
        return "-"
    try:
        return datetime.fromisoformat(iso).isoformat(sep=" ", timespec="seconds")
    except ValueError:
        return iso
