"""A big local root's table directories are taken from the user's cache while the root cannot
have changed: the first page of `ls` over a million tables does not list a million entries.
Whatever changes the root (a table added, removed, renamed, a link that now leads nowhere), and
whatever is in the cache (damaged, another root's, unwritable), `ls` reads as a listing does."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import lance
import pyarrow as pa
import pytest
from helpers import CatalogReads, Root, invoke, ls_json, ls_pages, small_and_quick_listings

from lancens_cli.service.catalog import listing_index
from lancens_cli.store import link_record, listing_cache
from lancens_cli.store.tables import DEREGISTERED_MARKER

SETTLE_S = 0.15


@pytest.fixture(autouse=True)
def _small_and_quick(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    small_and_quick_listings(monkeypatch, tmp_path)


def _root(tmp_path: Path) -> Root:
    """A root with catalog rows, directory-only tables, a link to a table in the root and a link
    to one outside it, settled."""
    path = tmp_path / "root"
    root = Root(str(path), {}, path)
    assert invoke(*root.args, "init").exit_code == 0
    for name in ("a", "m"):
        assert invoke(*root.args, "create", "table", name, "--declare").exit_code == 0
    assert invoke(*root.args, "create", "namespace", "n").exit_code == 0
    for name in ("n.t", "n.a"):
        assert invoke(*root.args, "create", "table", name, "--declare").exit_code == 0
    for name in ("b", "c", "d", "e"):
        _table(path / f"{name}.lance")
    (path / "empty.lance").mkdir()
    os.symlink(path / "b.lance", path / "again.lance")
    _table(tmp_path / "outside.lance")
    os.symlink(tmp_path / "outside.lance", path / "out.lance")
    _settle()
    return root


def _table(path: Path) -> None:
    lance.write_dataset(pa.table({"v": [1]}), str(path))


def _settle() -> None:
    time.sleep(SETTLE_S)


def _uncached(root: Root, tmp_path: Path) -> dict:
    """What a command that finds no cache lists (a fresh cache directory each time)."""
    fresh = tmp_path / f"fresh-{time.monotonic_ns()}"
    return ls_json(root, env={"XDG_CACHE_HOME": str(fresh)})


class _RootListings:
    """Counts the passes over the root directory."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
        self.count = 0
        self._scandir = os.scandir
        self._root = str(root)
        monkeypatch.setattr(os, "scandir", self)

    def __call__(self, path=".", *args, **kwargs):
        if str(path).rstrip("/") == self._root:
            self.count += 1
        return self._scandir(path, *args, **kwargs)


def _cache_files(tmp_path: Path) -> list[Path]:
    """The root listings in the cache (not the listing indexes beside them)."""
    directory = tmp_path / "cache" / "lancens" / "listings"
    index_of = {
        Path(listing_index._file_of(str(p), recursive))
        for p in tmp_path.rglob("root")
        for recursive in (False, True)
    }
    return sorted(
        p for p in directory.glob("*") if not p.name.startswith(".") and p not in index_of
    )


def test_a_settled_big_root_is_listed_once_then_read_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _root(tmp_path)
    first = ls_json(root)
    assert [e["id"] for e in first["entries"]] == sorted(
        ["a", "m", "n", "b", "c", "d", "e", "empty", "again", "out"]
    )
    assert len(_cache_files(tmp_path)) == 1
    assert oct(_cache_files(tmp_path)[0].stat().st_mode & 0o777) == "0o600"
    listings = _RootListings(monkeypatch, root.local_path)
    assert ls_json(root) == first
    assert ls_json(root, "--limit", "2") == {**first, "entries": first["entries"][:2]} | {
        "next_page_token": first["entries"][1]["id"]
    }
    assert listings.count == 0


def test_a_root_changed_less_than_a_tick_before_is_not_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _root(tmp_path)
    monkeypatch.setattr(link_record, "SETTLED_NS", 3_000_000_000)  # however slow this machine
    (root.local_path / "new.lance").mkdir()
    ls_json(root)  # the root's times have not settled: a change in the same tick could follow
    assert _cache_files(tmp_path) == []


def _add(root: Path, outside: Path) -> None:
    _table(root / "added.lance")


def _remove(root: Path, outside: Path) -> None:
    shutil.rmtree(root / "c.lance")


def _rename(root: Path, outside: Path) -> None:
    os.rename(root / "d.lance", root / "renamed.lance")


def _link_target_gone(root: Path, outside: Path) -> None:
    shutil.rmtree(outside)  # the root's own times do not move


def _link_target_back(root: Path, outside: Path) -> None:
    shutil.rmtree(outside)
    _settle()
    _ls_root(root)  # the cache now holds a link that leads nowhere
    _table(outside)


def _directory_swapped_for_a_file(root: Path, outside: Path) -> None:
    shutil.rmtree(root / "e.lance")
    (root / "e.lance").write_text("not a table")


def _times_set_back(root: Path, outside: Path) -> None:
    """A copy tool that sets the directory's modification time back after changing it."""
    before = os.stat(root)
    _table(root / "restored.lance")
    os.utime(root, ns=(before.st_atime_ns, before.st_mtime_ns))


def _ls_root(root: Path) -> None:
    assert invoke("--root", str(root), "ls", "--json").exit_code == 0


@pytest.mark.parametrize(
    "change",
    [
        _add,
        _remove,
        _rename,
        _link_target_gone,
        _link_target_back,
        _directory_swapped_for_a_file,
        _times_set_back,
    ],
)
def test_a_change_to_the_root_is_seen(tmp_path: Path, change) -> None:
    root = _root(tmp_path)
    ls_json(root)
    assert len(_cache_files(tmp_path)) == 1
    change(root.local_path, tmp_path / "outside.lance")
    assert ls_json(root) == _uncached(root, tmp_path)  # at once, before anything settles
    _settle()
    assert ls_json(root) == _uncached(root, tmp_path)
    assert ls_json(root) == _uncached(root, tmp_path)  # and from the cache written after it


@pytest.mark.parametrize("damage", ["empty", "garbage", "truncated", "another root's"])
def test_a_damaged_or_foreign_cache_file_is_a_listing_like_any_other(
    tmp_path: Path, damage: str
) -> None:
    root = _root(tmp_path)
    other = _root(tmp_path / "other")
    expected = ls_json(root)
    ls_json(other)
    mine, theirs = _cache_file_of(root), _cache_file_of(other)
    data = mine.read_bytes()
    mine.write_bytes(
        {
            "empty": b"",
            "garbage": b"\xff\xfe not a listing \0\0",
            "truncated": data[: len(data) - 7],
            "another root's": theirs.read_bytes(),
        }[damage]
    )
    assert ls_json(root) == expected


def _cache_file_of(root: Root) -> Path:
    return Path(listing_cache.file_of(str(root.local_path), ".lance"))


def test_a_cache_that_cannot_be_written_changes_nothing(tmp_path: Path) -> None:
    root = _root(tmp_path)
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache directory would be")
    result = invoke(*root.args, "ls", "--json", env={"XDG_CACHE_HOME": str(blocked)})
    assert result.exit_code == 0 and result.stderr == ""
    assert json.loads(result.stdout) == _uncached(root, tmp_path)


def test_every_command_that_lists_the_root_agrees_with_the_cache(tmp_path: Path) -> None:
    """`check` finds the same directory-only tables from the cache as from a listing."""
    root = _root(tmp_path)
    fresh = {"XDG_CACHE_HOME": str(tmp_path / "fresh")}
    uncached = invoke(*root.args, "check", "--json", env=fresh)
    ls_json(root)
    cached = invoke(*root.args, "check", "--json")
    assert (cached.exit_code, cached.stdout) == (uncached.exit_code, uncached.stdout)


# --- the listing index: a page of `ls` from the sorted listing kept beside the root's names ---


def _same_pages(root: Root, tmp_path: Path) -> None:
    """Every page of every size, of the root and of everything below it (`-R`), reads as one
    whole listing that found no cache (and, being whole, never reads the index)."""
    for extra in ((), ("-R",)):
        fresh = {"XDG_CACHE_HOME": str(tmp_path / f"fresh-{time.monotonic_ns()}")}
        whole = ls_json(root, *extra, env=fresh)["entries"]
        for limit in (1, 3, 4):
            pages = ls_pages(root, limit, *extra)
            assert [e for page in pages for e in page["entries"]] == whole, (extra, limit)
            assert all(len(page["entries"]) == limit for page in pages[:-1])


def test_a_page_costs_a_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a whole listing has written the index, no page reads the catalog whole or lists
    the root, and every page reads as the whole listing's."""
    root = _root(tmp_path)
    wholes = {extra: ls_json(root, *extra)["entries"] for extra in ((), ("-R",))}
    assert {e["id"] for e in wholes[("-R",)]} == {e["id"] for e in wholes[()]} | {"n.t", "n.a"}
    for recursive in (False, True):
        assert Path(listing_index._file_of(str(root.local_path), recursive)).exists()
    reads, listings = CatalogReads(monkeypatch), _RootListings(monkeypatch, root.local_path)
    for extra, whole in wholes.items():
        for limit in (1, 2, 4, 20):
            pages = ls_pages(root, limit, *extra)
            assert [e for page in pages for e in page["entries"]] == whole, limit
            assert all(len(page["entries"]) == limit for page in pages[:-1])
    assert (reads.count, listings.count) == (0, 0)


def _marker(directory: Path) -> None:
    (directory / DEREGISTERED_MARKER).write_text("")


def _created(root: Root, tmp_path: Path) -> None:
    assert invoke(*root.args, "create", "table", "c2", "--declare").exit_code == 0


def _dropped(root: Root, tmp_path: Path) -> None:
    assert invoke(*root.args, "drop", "m", "--yes").exit_code == 0


def _registered_elsewhere(root: Root, tmp_path: Path) -> None:
    """A row at a directory no row names: shown as held by it, until a marker appears there."""
    assert invoke(*root.args, "register", "shared", "c.lance").exit_code == 0
    _settle()
    ls_pages(root, 2)  # the index now holds the row and its directory
    _marker(root.local_path / "c.lance")


def _deregistered(root: Root, tmp_path: Path) -> None:
    assert invoke(*root.args, "deregister", "d").exit_code == 0  # a directory-only table


def _marked_by_another_writer(root: Root, tmp_path: Path) -> None:
    _marker(root.local_path / "e.lance")  # the root's times do not move


def _marker_taken_away(root: Root, tmp_path: Path) -> None:
    _marker(root.local_path / "e.lance")
    _settle()
    ls_pages(root, 2)  # the index now holds e.lance as hidden
    (root.local_path / "e.lance" / DEREGISTERED_MARKER).unlink()


def _row_through_a_link(root: Root, tmp_path: Path) -> None:
    """A row whose verdict its spelling cannot give: no index is kept for the catalog."""
    assert invoke(*root.args, "register", "linked", "again.lance").exit_code == 0


def _row_below_a_directory_turned_link(root: Root, tmp_path: Path) -> None:
    """A row inside a table's directory, which another writer swaps for a link out of the
    root: the row's verdict changes while the root's times do not."""
    nest = root.local_path / "nest"
    _table(nest / "inner.lance")
    assert invoke(*root.args, "register", "deep", "nest/inner.lance").exit_code == 0
    _settle()
    ls_pages(root, 2)
    shutil.rmtree(nest / "inner.lance")
    os.symlink(tmp_path / "outside.lance", nest / "inner.lance")


@pytest.mark.parametrize(
    "change",
    [
        _row_below_a_directory_turned_link,
        _created,
        _dropped,
        _registered_elsewhere,
        _deregistered,
        _marked_by_another_writer,
        _marker_taken_away,
        _row_through_a_link,
    ],
)
def test_pages_from_the_index_follow_every_change(tmp_path: Path, change) -> None:
    root = _root(tmp_path)
    ls_pages(root, 2)
    assert Path(listing_index._file_of(str(root.local_path), False)).exists()
    change(root, tmp_path)
    _same_pages(root, tmp_path)  # at once
    _settle()
    _same_pages(root, tmp_path)  # written again after the change, and read
    _same_pages(root, tmp_path)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "flipped"])
def test_a_damaged_index_is_a_whole_listing(tmp_path: Path, damage: str) -> None:
    root = _root(tmp_path)
    ls_pages(root, 2)
    index = Path(listing_index._file_of(str(root.local_path), False))
    data = index.read_bytes()
    middle = len(data) // 2
    index.write_bytes(
        {
            "garbage": b"{}\nnot arrow",
            "truncated": data[:middle],
            "flipped": data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :],
        }[damage]
    )
    _same_pages(root, tmp_path)


def _paged(root: Root, limit: int, *extra: str) -> list[dict]:
    return [e for page in ls_pages(root, limit, *extra) for e in page["entries"]]


def _whole(root: Root, tmp_path: Path, *extra: str) -> list[dict]:
    fresh = {"XDG_CACHE_HOME": str(tmp_path / f"fresh-{time.monotonic_ns()}")}
    return ls_json(root, *extra, env=fresh)["entries"]


def _indexed(root: Root, recursive: bool = False) -> bool:
    return Path(listing_index._file_of(str(root.local_path), recursive)).exists()


@pytest.mark.parametrize("when", ["target goes", "target comes"])
def test_a_root_link_is_followed_again_by_every_page(tmp_path: Path, when: str) -> None:
    """Where a link in the root leads can change while the root's times stand still."""
    root = _root(tmp_path)
    os.symlink(tmp_path / "later", root.local_path / "later.lance")  # leads nowhere yet
    _settle()
    ls_pages(root, 2)
    assert _indexed(root)
    if when == "target goes":
        shutil.rmtree(tmp_path / "outside.lance")
    else:
        _table(tmp_path / "later")
    assert _paged(root, 2) == _whole(root, tmp_path)


def test_an_index_of_a_listing_without_directories_is_not_taken_for_one_with(
    tmp_path: Path,
) -> None:
    root = _root(tmp_path)
    for i in range(5):
        assert invoke(*root.args, "create", "table", f"r{i}", "--declare").exit_code == 0
    _settle()
    assert invoke(*root.args, "--no-dir-listing", "ls", "--limit", "2").exit_code == 0
    assert _paged(root, 2) == _whole(root, tmp_path)


def test_a_catalog_replaced_in_place_at_the_same_version_is_listed_anew(tmp_path: Path) -> None:
    """Another root's `__manifest` copied over this one's: the root's times do not move."""
    root = _root(tmp_path)
    other = Root(str(tmp_path / "other"), {}, tmp_path / "other")
    assert invoke(*other.args, "init").exit_code == 0
    for name in ("x", "y", "z", "w", "v"):
        assert invoke(*other.args, "create", "table", name, "--declare").exit_code == 0
    mine, theirs = root.local_path / "__manifest", other.local_path / "__manifest"
    assert lance.dataset(str(mine)).version == lance.dataset(str(theirs)).version
    ls_pages(root, 2)
    assert _indexed(root)
    before = os.stat(root.local_path)
    for child in mine.iterdir():
        shutil.rmtree(child) if child.is_dir() else child.unlink()
    shutil.copytree(theirs, mine, dirs_exist_ok=True)
    after = os.stat(root.local_path)
    assert (before.st_mtime_ns, before.st_ctime_ns) == (after.st_mtime_ns, after.st_ctime_ns)
    assert _paged(root, 2) == _whole(root, tmp_path)


def test_a_damaged_catalog_is_reported_as_the_whole_listing_reports_it(tmp_path: Path) -> None:
    root = _root(tmp_path)
    ls_pages(root, 2)
    for data in (root.local_path / "__manifest" / "data").iterdir():
        data.write_bytes(b"garbage")
    fresh = {"XDG_CACHE_HOME": str(tmp_path / "fresh")}
    whole = invoke(*root.args, "ls", "--limit", "2", env=fresh)
    paged = invoke(*root.args, "ls", "--limit", "2")
    assert whole.exit_code not in (0, 18)  # a catalog that cannot be read, never "internal"
    assert (paged.exit_code, paged.stdout, paged.stderr) == (
        whole.exit_code,
        whole.stdout,
        whole.stderr,
    )


def test_a_marker_after_the_page_leaves_no_token_to_a_page_that_is_not_there(
    tmp_path: Path,
) -> None:
    root = _root(tmp_path)
    ids = [e["id"] for e in _whole(root, tmp_path)]
    assert ids[-1] == "out"  # out.lance leads to outside.lance, which no row names
    ls_pages(root, len(ids) - 1)
    _marker(tmp_path / "outside.lance")
    fresh = {"XDG_CACHE_HOME": str(tmp_path / "fresh")}
    paged = invoke(*root.args, "ls", "--limit", str(len(ids) - 1))
    whole = invoke(*root.args, "ls", "--limit", str(len(ids) - 1), env=fresh)
    assert (paged.stdout, paged.stderr) == (whole.stdout, whole.stderr)
    assert "more entries" not in paged.stderr


def test_no_home_directory_means_no_cache_and_the_same_listing(tmp_path: Path) -> None:
    root = _root(tmp_path)
    result = invoke(
        *root.args, "ls", "--json", "--limit", "2", env={"XDG_CACHE_HOME": None, "HOME": "~"}
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["entries"] == _whole(root, tmp_path)[:2]


def test_a_cache_file_another_user_could_have_written_is_not_taken(tmp_path: Path) -> None:
    root = _root(tmp_path)
    ls_pages(root, 2)
    index = Path(listing_index._file_of(str(root.local_path), False))
    index.chmod(0o666)
    assert listing_cache.read_file(str(index), {}) is None
    assert _paged(root, 2) == _whole(root, tmp_path)


TOKENS = ["again", "b", "bb", "n", "n.a", "n/t", "zz", "0", "a$", "é", "n$a", "~", "n."]


@pytest.mark.parametrize("delimiter", [".", "/"])
@pytest.mark.parametrize("extra", [(), ("-R",)])
def test_any_token_reads_as_the_whole_listing_reads_it(
    tmp_path: Path, delimiter: str, extra: tuple[str, ...]
) -> None:
    """Names of directory-only tables, names in no listing, and odd spellings, as text and as
    JSON: the same output, the same messages, the same exit code."""
    root = _root(tmp_path)
    ls_pages(root, 2, *extra)
    assert _indexed(root, bool(extra))
    fresh = {"XDG_CACHE_HOME": str(tmp_path / "fresh")}
    for token in TOKENS:
        for limit in ("1", "3"):
            for json_flag in ((), ("--json",)):
                args = (*root.args, "--delimiter", delimiter, "ls", *json_flag, *extra)
                args = (*args, "--limit", limit, "--page-token", token)
                paged, whole = invoke(*args), invoke(*args, env=fresh)
                assert (paged.exit_code, paged.stdout, paged.stderr) == (
                    whole.exit_code,
                    whole.stdout,
                    whole.stderr,
                ), (token, limit, json_flag)


class _CatalogOnlyRoot(Root):
    """The same root, read with directory listing off: `__manifest` alone names the tables."""

    @property
    def args(self) -> list[str]:
        return [*super().args, "--no-dir-listing"]


def _catalog_only(tmp_path: Path) -> Root:
    """`_root`, with enough catalog rows at its top to count as big without its directories."""
    root = _root(tmp_path)
    for name in ("f", "g"):
        assert invoke(*root.args, "create", "table", name, "--declare").exit_code == 0
    _settle()
    return _CatalogOnlyRoot(root.uri, root.storage_options, root.local_path)


def test_with_directory_listing_off_a_page_costs_a_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The root is still read once for its links (a row can lead through one); after that, a
    page neither reads the catalog whole nor lists the root."""
    root = _catalog_only(tmp_path)
    wholes = {extra: ls_json(root, *extra)["entries"] for extra in ((), ("-R",))}
    assert {e["id"] for e in wholes[()]} == {"a", "f", "g", "m", "n"}
    reads, listings = CatalogReads(monkeypatch), _RootListings(monkeypatch, root.local_path)
    for extra, whole in wholes.items():
        for limit in (1, 2, 4):
            assert _paged(root, limit, *extra) == whole, (extra, limit)
    assert (reads.count, listings.count) == (0, 0)


def _link_to_a_row_directory(root: Root, tmp_path: Path) -> None:
    """A link placed beside a row's directory, leading into it: the row shares its directory."""
    assert invoke(*root.args, "register", "bee", "b.lance").exit_code == 0
    _settle()
    ls_pages(root, 2)
    os.symlink(root.local_path / "b.lance", root.local_path / "alias.lance")
    assert invoke(*root.args, "register", "alias", "alias.lance").exit_code == 0


@pytest.mark.parametrize(
    "change",
    [
        _created,
        _dropped,
        _registered_elsewhere,
        _row_through_a_link,
        _row_below_a_directory_turned_link,
        _link_to_a_row_directory,
    ],
)
def test_with_directory_listing_off_pages_follow_every_change(tmp_path: Path, change) -> None:
    root = _catalog_only(tmp_path)
    ls_pages(root, 2)
    assert _indexed(root)
    change(root, tmp_path)
    _same_pages(root, tmp_path)
    _settle()
    _same_pages(root, tmp_path)
    _same_pages(root, tmp_path)


def test_indexes_with_and_without_directory_listing_are_not_mixed(tmp_path: Path) -> None:
    root = _root(tmp_path)
    only = _CatalogOnlyRoot(root.uri, root.storage_options, root.local_path)
    for _ in range(2):
        for either in (root, only, root):
            assert _paged(either, 2) == _whole(either, tmp_path)


def test_names_of_every_spelling_read_back_from_the_cache_as_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache keeps names as bytes and hands them over as Arrow text: names that are not
    UTF-8, names in other scripts and names split across the listing's chunks read back as
    a listing of the directory finds them."""
    monkeypatch.setattr(listing_cache, "_CHUNK", 3)
    root = _root(tmp_path)
    for name in ("é", "東京", "a b", "x-1", "x.1", "x_1"):
        _table(root.local_path / f"{name}.lance")
    os.mkdir(os.path.join(os.fsencode(root.local_path), b"caf\xe9.lance"))
    os.mkdir(os.path.join(os.fsencode(root.local_path), b"\xff\xfe.lance"))
    _settle()
    listed = ls_json(root)
    assert len(_cache_files(tmp_path)) == 1
    ids = {e["id"] for e in listed["entries"]}
    assert {"é", "東京", "a b", "x-1", "x.1", "x_1"} <= ids
    assert len(ids) == len(listed["entries"]) == 18
    listings = _RootListings(monkeypatch, root.local_path)
    assert ls_json(root) == listed == _uncached(root, tmp_path)
    assert listings.count == 1  # the uncached one
    found = listing_cache.cached_names(str(root.local_path), ".lance")
    assert found is not None
    names = found.names
    expected = {e.name for e in os.scandir(root.local_path) if e.name.endswith(".lance")}
    assert {*names.text.to_pylist(), *names.odd} == expected
    assert sorted(names.odd) == sorted(
        n for n in expected if n.encode("utf-8", "surrogateescape").startswith((b"caf", b"\xff"))
    )


def test_a_link_that_loops_is_no_table_and_stops_no_listing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `<name>.lance` link to itself (the kernel says: too many levels of links) is no
    directory, listed or cached; the root's other tables are listed as before."""
    root = _root(tmp_path)
    loop = root.local_path / "loop.lance"
    os.symlink(loop, loop)
    _settle()
    listed = ls_json(root)
    assert "loop" not in {e["id"] for e in listed["entries"]} and len(listed["entries"]) == 10
    assert ls_json(root) == listed == _uncached(root, tmp_path)
    found = listing_cache.listed(str(root.local_path), ".lance")
    assert found is not None and "loop.lance" in found.links
    assert "loop.lance" not in found.names.text.to_pylist()


def test_which_rows_a_directory_holds_reads_alike_for_a_big_and_a_small_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing big enough to be kept works out which rows a directory holds beside the
    directories' own hiding (finished renames, markers); a small one as it always did. Both
    read alike: a row registered at a directory table, a rename's old directory back again,
    a row at it, and a marker on a held directory."""
    root = _root(tmp_path)
    path = root.local_path

    def both() -> list[dict]:
        monkeypatch.setattr(listing_cache, "CACHED_FROM", 4)
        whole = ls_json(root)["entries"]  # keeps the index the pages are read from
        paged = [entry for page in ls_pages(root, 2) for entry in page["entries"]]
        monkeypatch.setattr(listing_cache, "CACHED_FROM", 10**9)
        small = _uncached(root, tmp_path)["entries"]
        assert whole == paged == small
        return small

    assert invoke(*root.args, "register", "shared", "c.lance").exit_code == 0
    assert {e["id"]: e["source"] for e in both()}["shared"] == "both"
    assert invoke(*root.args, "rename", "b", "moved").exit_code == 0
    moved = next(e["location"] for e in both() if e["id"] == "moved")
    shutil.copytree(path / moved, path / "b.lance")  # the old directory, back again
    _settle()
    both()
    assert invoke(*root.args, "register", "atold", "b.lance").exit_code == 0
    _settle()
    both()
    _marker(path / "c.lance")
    _settle()
    assert {e["id"]: e["source"] for e in both()}["shared"] == "manifest"


@pytest.mark.parametrize("whole_from_index", [listing_index.WHOLE_FROM_INDEX, 3])
def test_a_listing_without_a_limit_reads_the_index_only_when_it_is_short(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, whole_from_index: int
) -> None:
    """`ls` without `--limit` of a root whose listing is short takes it from the index; a
    longer one is listed whole, as it was, in chunks. Either reads as a whole listing."""
    monkeypatch.setattr(listing_index, "WHOLE_FROM_INDEX", whole_from_index)
    root = _root(tmp_path)
    for extra in ((), ("-R",)):
        fresh = {"XDG_CACHE_HOME": str(tmp_path / f"fresh-{time.monotonic_ns()}")}
        whole = ls_json(root, *extra, env=fresh)
        ls_json(root, *extra)  # keeps the index
        index = Path(listing_index._file_of(str(root.local_path), bool(extra)))
        kept = index.stat()
        reads = CatalogReads(monkeypatch)
        assert ls_json(root, *extra) == whole
        short = len(whole["entries"]) <= whole_from_index
        assert (reads.count == 0) == short, (extra, reads.count)
        now = index.stat()  # either way, the index found is kept as it was, not written again
        assert (now.st_ino, now.st_mtime_ns) == (kept.st_ino, kept.st_mtime_ns)
