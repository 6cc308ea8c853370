"""A `__manifest` snapshot's lookups by object id answer alike whichever way they are made: the
first few by a scan of the Arrow column (a command that asks for one row of a million-row
catalog, as `describe` does, makes no Python string a row), later ones from a dict of every id.
A damaged catalog that repeats an id answers with the id's last row either way."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lancens_cli.store import manifest
from lancens_cli.store.manifest import ManifestSnapshot

IDS = st.sampled_from(["a", "b", "a$b", "é", "", "t1", "t10"]) | st.text(max_size=4)
ASKED = IDS | st.just("\udcff")  # a directory name that is not UTF-8: no row's id


@settings(max_examples=60, deadline=None)
@given(
    ids=st.lists(IDS | st.none(), max_size=30),
    asked=st.lists(ASKED, min_size=1, max_size=3 * manifest._SCANNED_LOOKUPS),
    split=st.integers(0, 30),
)
def test_lookups_by_scan_and_by_dict_find_the_same_row(ids, asked, split):
    schema = pa.schema([("object_id", pa.string()), ("row", pa.int64())])
    rows = pa.Table.from_pylist([{"object_id": i, "row": n} for n, i in enumerate(ids)], schema)
    chunked = pa.concat_tables([rows.slice(0, split), rows.slice(split)])  # two chunks
    snapshot = ManifestSnapshot(1, chunked, {})
    last = {i: n for n, i in enumerate(ids) if i is not None}
    for object_id in asked:
        found = snapshot.get(object_id)
        assert (found["row"] if found else None) == last.get(object_id)
        assert (object_id in snapshot) == (object_id in last)
    scanned = min(len(asked) * 2, manifest._SCANNED_LOOKUPS)
    assert snapshot._scans == scanned
    assert (snapshot._index is None) == (len(asked) * 2 <= manifest._SCANNED_LOOKUPS)
