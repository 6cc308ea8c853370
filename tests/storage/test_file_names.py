"""`Storage.file_names` (what `check` lists of every table) names exactly the files
`walk_files` finds, without a `stat` a file: on generated trees of directories, files, links
to files and to directories, links that lead nowhere or loop, a FIFO, and a directory whose
names can be read but not its files."""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from lancens_cli.config import NamespaceConfig
from lancens_cli.store.storage import Storage

KINDS = ("dir", "file", "link-file", "link-dir", "broken", "loop", "fifo", "unsearchable")


def _build(top, plan: list[tuple[int, str]]) -> None:
    """Each (parent, kind) adds an entry under the `parent`-th directory made so far."""
    dirs = [top]
    for number, (parent, kind) in enumerate(plan):
        where = dirs[parent % len(dirs)]
        path = os.path.join(where, f"e{number}")
        if kind == "dir":
            os.mkdir(path)
            dirs.append(path)
        elif kind == "file":
            with open(path, "wb") as out:
                out.write(b"x" * number)
        elif kind == "link-file":
            target = os.path.join(top, f"target{number}")
            with open(target, "wb"):
                pass
            os.symlink(target, path)
        elif kind == "link-dir":
            os.symlink(dirs[0], path)  # an entered link would loop: it must not be entered
        elif kind == "broken":
            os.symlink(os.path.join(top, "nowhere"), path)
        elif kind == "loop":
            os.symlink(path, path)
        elif kind == "unsearchable":  # names readable, files not reachable (but by root)
            os.mkdir(path)
            (open(os.path.join(path, "inside"), "wb")).close()
            os.chmod(path, 0o600)
        else:
            os.mkfifo(path)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.sampled_from(KINDS)), max_size=25))
def test_file_names_are_the_files_walk_files_finds(tmp_path_factory, plan):
    top = tmp_path_factory.mktemp("tree")
    table = top / "t.lance"
    table.mkdir()
    _build(str(table), plan)
    storage = Storage(NamespaceConfig(root="file://" + str(top)))
    try:
        walked = sorted(name for name, _size in storage.walk_files("t.lance"))
        assert sorted(storage.file_names("t.lance")) == walked
    finally:
        for folder, dirs, _files in os.walk(table):
            for name in dirs:
                if not os.path.islink(os.path.join(folder, name)):
                    os.chmod(os.path.join(folder, name), 0o700)
    assert list(storage.file_names("absent.lance")) == []
