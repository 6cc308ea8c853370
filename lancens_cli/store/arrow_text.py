"""File names as Arrow text: what Arrow can hold (UTF-8) in one array, the rest beside it.

A file name that is not UTF-8, which `os.scandir` gives with surrogates, can be no catalog
row's, and Arrow cannot hold it: such names are kept apart, in Python, and are few.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


class Names(NamedTuple):
    """Names as `arrow_strings` splits them: `text`, an Arrow string array; `odd`, those that
    are not UTF-8."""

    text: Any
    odd: list[str]


NO_NAMES = Names(pa.array([], pa.string()), [])


def arrow_strings(values: Sequence[str]) -> tuple[Any, list[str]]:
    """The values Arrow can hold as UTF-8 text, as an array, and the others."""
    try:
        return pa.array(values, pa.string()), []
    except UnicodeEncodeError:
        odd = [value for value in values if not _is_utf8(value)]
        kept = [value for value in values if _is_utf8(value)]
        return pa.array(kept, pa.string()), odd


def names_of(values: Sequence[str]) -> Names:
    """`arrow_strings` as `Names`."""
    return Names(*arrow_strings(values))


def joined(parts: Sequence[Names]) -> Names:
    """Names found in parts (a listing converted a chunk at a time), as one."""
    if not parts:
        return NO_NAMES
    text = pa.concat_arrays([part.text for part in parts])
    return Names(text, [name for part in parts for name in part.odd])


def separated_names(blob: bytes) -> Names:
    """Names each ended by a NUL byte, as `Names`: the bytes become the array's data as they
    are (no Python string per name) when they are UTF-8; otherwise name by name."""
    if not blob:
        return NO_NAMES
    try:
        blob.decode("utf-8")
    except UnicodeDecodeError:
        return names_of(blob[:-1].decode("utf-8", "surrogateescape").split("\0"))
    ends = np.flatnonzero(np.frombuffer(blob, np.uint8) == 0)
    offsets = np.empty(len(ends) + 1, np.int64)
    offsets[0] = 0
    offsets[1:] = ends - np.arange(len(ends))  # each name's end, less the NULs before it
    data = blob.replace(b"\0", b"")
    text = pa.LargeStringArray.from_buffers(len(ends), pa.py_buffer(offsets), pa.py_buffer(data))
    return Names(text.cast(pa.string()), [])


def contiguous(values: Any) -> Any:
    """One array of a chunked one's values; its only chunk as it is (Arrow's `combine_chunks`
    copies even one chunk)."""
    if isinstance(values, pa.ChunkedArray):
        return values.chunk(0) if values.num_chunks == 1 else values.combine_chunks()
    return values


REPEATS_AT_ONCE = 65_536  # values of a sorted order compared at a time


def sorted_repeats(values: Any, order: Any) -> Any:
    """The values that are there more than once (each once per repeat), as one array, found
    by comparing neighbours in `order` (the sort of `values`, one array: a take from a
    chunked one joins its chunks each time) a slice at a time, each slice overlapping the
    last by one: a sorted copy of a million paths at once was 40 MiB more of a listing's
    peak."""
    found = []
    for start in range(0, len(order) - 1, REPEATS_AT_ONCE):
        ordered = values.take(order[start : start + REPEATS_AT_ONCE + 1])
        repeated = ordered[1:].filter(pc.equal(ordered[1:], ordered[:-1]))
        if len(repeated):
            found.append(repeated)
    return pa.chunked_array(found, values.type).combine_chunks()


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
