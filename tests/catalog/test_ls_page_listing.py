"""A page of `ls` on an object store lists the root's `<name>.lance` prefixes only as far as
the page: S3 and GCS list keys in order. Pages read exactly as the whole listing, whatever the
names (a name that is a prefix of another sorts after it as a key: `t.lance` > `t-1.lance`)."""

from __future__ import annotations

import json
from typing import Any

import lance
import pyarrow as pa
import pytest
from helpers import Root, invoke, put_object, root_fs
from hypothesis import given
from hypothesis import strategies as st

from lancens_cli.service.namespace import Namespace, _last_key

# names around `.` and `/` in byte order: `!` < `-` < `.` < `/` < `0` < `_` < `a`
NAME = st.text(alphabet="t!-.0_a", min_size=1, max_size=6)


def _ls(root: Root, *args: str) -> dict:
    result = invoke(*root.args, "ls", "--json", *args)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def _pages(root: Root, limit: int) -> list[list[dict]]:
    pages, token = [], None
    while True:
        args = ("--no-state", "--limit", str(limit), *(["--page-token", token] if token else []))
        doc = _ls(root, *args)
        pages.append(doc["entries"])
        token = doc["next_page_token"]
        if token is None:
            return pages


def _write_dir_table(root: Root, name: str) -> None:
    uri = f"{root.uri.rstrip('/')}/{name}.lance"
    lance.write_dataset(pa.table({"v": [1]}), uri, storage_options=root.storage_options or None)


def test_pages_read_as_the_whole_listing(any_root: Root) -> None:
    """Rows and directory-only tables interleaved, names that are prefixes of others, a row
    a directory also holds, a deregistered directory: every page size reads as one page."""
    assert invoke(*any_root.args, "init").exit_code == 0
    for name in ("m", "t-2", "t0", "ta", "z"):
        assert invoke(*any_root.args, "create", "table", name, "--declare").exit_code == 0
    for name in ("t", "t-1", "t_", "a", "a-b", "gone", "held"):
        _write_dir_table(any_root, name)
    assert invoke(*any_root.args, "deregister", "gone").exit_code == 0
    assert invoke(*any_root.args, "register", "shared", "held.lance").exit_code == 0
    whole = _ls(any_root, "--no-state")["entries"]
    assert [e["id"] for e in whole] == sorted(
        ["m", "t-2", "t0", "ta", "z", "t", "t-1", "t_", "a", "a-b", "shared"]
    )
    assert {e["id"]: e["source"] for e in whole}["shared"] == "both"
    for limit in (1, 2, 3, 5):
        pages = _pages(any_root, limit)
        assert [e for page in pages for e in page] == whole, limit
        assert all(len(page) == limit for page in pages[:-1])


@given(until=NAME, names=st.lists(NAME, max_size=20))
def test_no_name_up_to_the_bound_has_a_key_past_the_last_key(until: str, names: list[str]):
    last = _last_key(until)
    for name in names:
        if name <= until:  # as the store lists it: `<name>.lance/`
            assert f"{name}.lance/" <= last, (name, until, last)


class _Counting:
    """Counts the listing requests an fsspec file system sends (and sends them)."""

    def __init__(self, fs, method: str) -> None:
        self.calls = 0
        self._send = getattr(fs, method)

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self._send(*args, **kwargs)


@pytest.mark.parametrize(
    "store", [pytest.param("s3", marks=pytest.mark.s3), pytest.param("gcs", marks=pytest.mark.gcs)]
)
def test_a_range_is_listed_in_the_requests_it_needs(request, store: str) -> None:
    """1,100 prefixes: the whole listing takes two pages of a thousand; the names up to the
    tenth, one; the names between is the whole listing cut, whatever the bounds."""
    root: Root = request.getfixturevalue(f"{store}_root")
    fs, base = root_fs(root)
    # `d.lance-old/` and `d.lance.lance/` (a table named `d.lance`) sort before `d.lance/`
    names = [f"d{i:05d}" for i in range(1100)] + ["d", "d!", "d.lance", "d0-x", "e"]
    fs.pipe({f"{base}/{name}.lance/x": b"" for name in names})
    put_object(root, "not-a-table/x", b"")
    put_object(root, "d.lance-old/x", b"")
    storage = Namespace.from_properties(root.properties).storage
    files = storage._files
    method = "call_s3" if store == "s3" else "call"
    counting = _Counting(files.fs, method)
    setattr(files.fs, method, counting)
    everything = sorted(_names(storage, None, None))
    assert everything == sorted(f"{n}.lance" for n in names)
    counting.calls = 0
    first = _names(storage, None, _last_key("d00009"))
    assert counting.calls == 1
    wanted = sorted(f"{n}.lance" for n in names if n <= "d00009")
    assert len(wanted) == 14  # d, d!, d.lance, d0-x and the first ten
    assert sorted(n for n in first if n[: -len(".lance")] <= "d00009") == wanted
    for after, until in (
        ("d00005", "d00100"),
        ("d", "d0"),
        (None, "d"),
        ("d!", "d.lance"),
        (None, "e"),
        ("d01099", None),
    ):
        found = _names(storage, after, None if until is None else _last_key(until))
        wanted = sorted(f"{n}.lance" for n in names if _between(n, after, until))
        assert sorted(n for n in found if _between(n[: -len(".lance")], after, until)) == wanted


def _names(storage: Any, after: str | None, until: str | None) -> list[str]:
    """What `dir_names` found, as Python strings."""
    found = storage.dir_names("", ".lance", after, until)
    return [*found.text.to_pylist(), *found.odd]


def _between(name: str, after: str | None, until: str | None) -> bool:
    return (after is None or name > after) and (until is None or name <= until)
