"""A big local directory's table names, kept between commands while the directory cannot have
changed, so that the first page of `ls` over a million tables does not list a million entries.

A command that lists a directory of at least `CACHED_FROM` entries writes what it found (the
names of the directories that end with the suffix asked for, and every link) to the user's cache
directory, under a name derived from the directory's path, with the directory's identity and
times (`link_record.stamp`). A later command takes them only while the directory still has that
identity and those times, by the rules the in-process link record follows (store/link_record.py):
the times had settled before the listing began, are finer than whole seconds, and move with
every entry added, removed or renamed in the directory; the change time moves with any change to
the directory itself, even one that sets its modification time back. What a link leads to can
change without the directory's times moving, so links are kept by name and looked at again by
each command.

The cache is never a source of truth: a file that is missing, damaged, of another format or of
another directory is a listing like any other; one that cannot be written is not written.

The names are kept as bytes, and made Arrow text when asked for: pyarrow is imported inside
`Listing.names`, so that judging locations (which needs only the links) loads no pyarrow.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
import zlib
from typing import TYPE_CHECKING, Any

from lancens_cli.store import link_record
from lancens_cli.store.link_record import Stamp
from lancens_cli.user_dirs import cache_home

if TYPE_CHECKING:
    from lancens_cli.store.arrow_text import Names

CACHED_FROM = 20_000  # entries: below this, listing the directory costs less than the file
FORMAT = "lancens-listing 2"
FORGOTTEN_AFTER_S = 30 * 86_400  # a cache file no command has written for this long is removed
_SEPARATOR = b"\0"  # the one byte no file name holds
_CHUNK = 65_536  # names joined into one bytes object at a time while a directory is listed


class Listing:
    """What one pass over a directory found: the directories ending with the suffix that are
    not links (`plain`: their names, each ended by a NUL byte, in a few bytes objects, not a
    Python string each), the links among those directories (`linked`), and every link.

    Python imports pyarrow only when `names` is asked for: judging locations needs only the
    links, and a prune answered from its record does not load pyarrow."""

    def __init__(self, plain: list[bytes], links: list[str], linked: list[str]) -> None:
        self.plain = plain
        self.links = links
        self.linked = linked

    @property
    def names(self) -> Names:
        """The directories ending with the suffix, links among them, as Arrow text."""
        from lancens_cli.store.arrow_text import joined, names_of, separated_names

        return joined([*(separated_names(blob) for blob in self.plain), names_of(self.linked)])


def listed(path: str, suffix: str) -> Listing | None:
    """The directories in `path` that end with `suffix`, and every link, from the cache while
    the directory cannot have changed, else from one pass over it (kept for a later command,
    and recorded for this one: store/link_record.py). None: no such directory."""
    before, started = link_record.stamp(path), time.time_ns()
    cached = cached_names(path, suffix)
    if cached is not None:
        link_record.record_links(path, before, started, cached.links, cached.linked)
        return cached
    plain: list[bytes] = []
    chunk: list[str] = []
    links: list[str] = []
    linked: list[str] = []  # links among the names
    seen = 0
    try:
        with os.scandir(path) as it:
            for entry in it:  # one loop, no object kept per entry: a million is a second
                seen += 1
                if entry.is_dir(follow_symlinks=False):  # a directory, not a link: one look
                    name = entry.name
                    if name.endswith(suffix):
                        chunk.append(name)
                        if len(chunk) == _CHUNK:
                            plain.append(_joined(chunk))
                            chunk = []
                elif entry.is_symlink():
                    name = entry.name
                    links.append(name)
                    if name.endswith(suffix) and _leads_to_directory(entry):
                        linked.append(name)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if chunk:
        plain.append(_joined(chunk))
    found = Listing(plain, links, linked)
    link_record.record_links(path, before, started, links, linked)
    keep(path, suffix, before, started, found, seen)
    return found


def _joined(names: list[str]) -> bytes:
    """Names as the bytes of a listing: each one's bytes (a name that is not UTF-8 as it was
    on disk), ended by NUL."""
    return (("\0".join(names)) + "\0").encode("utf-8", "surrogateescape")


def cached_names(path: str, suffix: str) -> Listing | None:
    """The cached listing of `path` (for `suffix`) while the directory is as it was then, with
    its links looked at again; None when there is none to trust."""
    now = link_record.stamp(path)
    if now is None:
        return None
    kept = _read(file_of(path, suffix), path, suffix, now)
    if kept is None:
        return None
    plain, links = kept
    linked = [name for name in links if name.endswith(suffix) and _is_dir(path, name)]
    return Listing([plain] if plain else [], links, linked)


def keep(
    path: str, suffix: str, before: Stamp | None, listed_at_ns: int, found: Listing, seen: int
) -> None:
    """Write what a listing of `seen` entries found, when it is worth a file and the directory
    had settled (`before`, taken before the listing began at `listed_at_ns`) and is the same
    after it; a cache that cannot be written is left alone."""
    if seen < CACHED_FROM or before is None:
        return
    if not link_record.unchanged_since(path, before, listed_at_ns):
        return
    facts = {"format": FORMAT, "path": path, "suffix": suffix, "stamp": before}
    write_file(file_of(path, suffix), {**facts, "links": found.links}, b"".join(found.plain))


def file_of(path: str, suffix: str) -> str | None:
    """The cache file of a directory and what was asked of it (a suffix, an index); None when
    there is no cache directory (no home directory to keep one in)."""
    home = cache_home()
    if home is None:
        return None
    key = hashlib.sha256(f"{os.path.abspath(path)}\n{suffix}".encode("utf-8", "surrogatepass"))
    return os.path.join(home, "listings", key.hexdigest()[:40])


def _own(found: os.stat_result) -> bool:
    """Whether a cache file is this user's and no one else may have written it: what another
    user could plant there is not taken (a cache directory pointed somewhere shared)."""
    return found.st_uid == os.getuid() and not found.st_mode & 0o022


def _read(file: str | None, path: str, suffix: str, now: Stamp) -> tuple[bytes, list[str]] | None:
    """The plain names (as `Listing` keeps them) and the links a cache file holds, when it is
    of this format, directory, suffix and stamp."""
    found = read_file(file, {"format": FORMAT, "path": path, "suffix": suffix, "stamp": now})
    if found is None:
        return None
    facts, body = found
    links = facts.get("links")
    if not isinstance(links, list) or not all(isinstance(link, str) for link in links):
        return None
    if body and not body.endswith(_SEPARATOR):
        return None
    return body, links


def read_file(file: str | None, expected: dict[str, Any]) -> tuple[dict[str, Any], bytes] | None:
    """A cache file's facts and body, when its facts include `expected` and its body is the
    one written (not cut short, not changed by hand); None for anything else."""
    data = _own_bytes(file, whole=True)
    if data is None:
        return None
    header, _, body = data.partition(b"\n")
    facts = _facts_of(header, expected)
    if facts is None or facts.get("crc32") != zlib.crc32(body):
        return None
    return facts, body


def read_facts(file: str | None, expected: dict[str, Any]) -> dict[str, Any] | None:
    """A cache file's facts alone, when they include `expected`: what it is of, without
    reading (or checking) its body."""
    header = _own_bytes(file, whole=False)
    return None if header is None else _facts_of(header, expected)


def _own_bytes(file: str | None, whole: bool) -> bytes | None:
    """The file (`whole`) or its first line, when it is this user's own (`_own`)."""
    if file is None:
        return None
    try:
        with open(file, "rb") as handle:
            if not _own(os.fstat(handle.fileno())):
                return None
            return handle.read() if whole else handle.readline()
    except OSError:
        return None


def _facts_of(header: bytes, expected: dict[str, Any]) -> dict[str, Any] | None:
    """A header's facts, when they include `expected` (as JSON reads it back: tuples are
    lists)."""
    try:
        facts = json.loads(header)
    except ValueError:
        return None
    wanted = json.loads(json.dumps(expected))
    if not isinstance(facts, dict) or {k: facts.get(k) for k in wanted} != wanted:
        return None
    return facts


def write_file(file: str | None, facts: dict[str, Any], body: Any) -> None:
    """Write the facts (and the body's checksum) on a line, then the body: whole or not at all
    (a reader never sees half of one), readable by this user only (table names can be
    private); forget the cache files nobody has written for long. A cache that cannot be
    written is not written. `body` is any buffer (an Arrow one too): it is written as it is,
    not copied behind the header first."""
    if file is None:
        return
    header = json.dumps({**facts, "crc32": zlib.crc32(body)}).encode()
    with contextlib.suppress(OSError):
        _write(file, header + b"\n", body)


def _write(file: str, header: bytes, body: Any) -> None:
    directory = os.path.dirname(file)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".writing-")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(header)
            out.write(body)
        os.replace(temporary, file)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _forget_old(directory)


def _forget_old(directory: str) -> None:
    oldest = time.time() - FORGOTTEN_AFTER_S
    with os.scandir(directory) as entries:
        for entry in entries:
            with contextlib.suppress(OSError):
                if entry.stat(follow_symlinks=False).st_mtime < oldest:
                    os.unlink(entry.path)


def _leads_to_directory(entry: os.DirEntry[str]) -> bool:
    """Whether a link leads to a directory: False where it leads nowhere a directory is (a
    loop too, where `is_dir` raises), as `os.path.isdir` answers and as a cached listing
    asks it."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def _is_dir(path: str, name: str) -> bool:
    return os.path.isdir(os.path.join(path, name))
