"""Counts in words for messages: "1 object", "2 directories", never "object(s)"."""

from __future__ import annotations

_IRREGULAR = {"directory": "directories", "index": "indexes", "entry": "entries"}


def noun(count: int, word: str, many: str | None = None) -> str:
    """`word` as `count` of it is said: "table" for 1, "tables" otherwise (0 too)."""
    if count == 1:
        return word
    return many or _IRREGULAR.get(word) or word + "s"


def plural(count: int, word: str, many: str | None = None) -> str:
    """The count and its noun: "1 table", "0 tables", "3 directories"."""
    return f"{count} {noun(count, word, many)}"
