"""File names as Arrow text: what Arrow can hold (UTF-8) in one array, the rest beside it.

A file name that is not UTF-8, which `os.scandir` gives with surrogates, can be no catalog
row's, and Arrow cannot hold it: such names are kept apart, in Python, and are few.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa


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


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
