"""The rows a row change read and is about to delete, by their addresses in the version it
read them at, so that the commit deletes exactly those rows without evaluating its filter on
every fragment again.

`update` and `merge` read the rows they replace before they write anything: the same read can
keep each row's address (Lance's `_rowaddr`: the fragment id in the high 32 bits, the row's
offset in it in the low 32). A commit whose table line holds exactly that version's fragments
(the base the change was worked out from, as the commit path guarantees for such a change)
then gives each fragment that holds some of them its deletions by offset; any other line, or
a Lance without the way to delete by offset, is deleted from by the filter, as before. Either
way the rows that go are the same: the filter is what selected them at that version.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

ADDRESS_COLUMN = "_rowaddr"  # what Lance names a row's address in a read `with_row_address`


@dataclass(frozen=True)
class KnownRows:
    """Row addresses (`_rowaddr`) read from main's `version` of the table at `location`."""

    location: str
    version: int
    addresses: Any  # a pyarrow array (or chunked array) of uint64

    def offsets_by_fragment(self) -> dict[int, list[int]]:
        """Each fragment id that holds some of the rows, with their offsets in it."""
        values = np.asarray(self.addresses.to_numpy(zero_copy_only=False), dtype=np.uint64)
        fragments = (values >> np.uint64(32)).astype(np.int64)
        offsets = (values & np.uint64(0xFFFFFFFF)).astype(np.int64)
        order = np.argsort(fragments, kind="stable")
        fragments, offsets = fragments[order], offsets[order]
        starts = np.flatnonzero(np.diff(fragments, prepend=-1))
        bounds = [*starts.tolist(), len(fragments)]
        return {
            int(fragments[start]): offsets[start:end].tolist()
            for start, end in zip(bounds[:-1], bounds[1:], strict=True)
        }


def known_rows_of(location: str, version: int, read: Any, on_main: bool) -> KnownRows | None:
    """The addresses a read `with_row_address` holds, when it read `version` of main of the
    table at `location` (`on_main`; a read of a branch is deleted from by its filter)."""
    if ADDRESS_COLUMN not in read.column_names or not on_main:
        return None
    return KnownRows(location, version, read.column(ADDRESS_COLUMN))
