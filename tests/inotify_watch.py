"""Watch directories for opens and reads with Linux inotify, through ctypes over libc.

Lance opens and reads files in Rust, where no Python hook sees it; the kernel does. A test that
must prove a command never touched anything outside a namespace root watches the directories
around the root and asserts that no event arrived:

- IN_OPEN on a directory (name "") means it was opened, i.e. listed;
- IN_OPEN on a file means it was opened, IN_ACCESS that it was read.

inotify watches the filesystem, not a process: reads done in-process (`invoke`) and by a
subprocess are both seen. Events name the real file, so a read through a symbolic link is
reported at the directory the link leads to.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
from pathlib import Path
from types import TracebackType

IN_ACCESS = 0x00000001
IN_OPEN = 0x00000020
IN_Q_OVERFLOW = 0x00004000
IN_ISDIR = 0x40000000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
WATCHED = IN_OPEN | IN_ACCESS

_HEADER = struct.Struct("iIII")  # int wd; uint32 mask, cookie, len; then char name[len]
_BUFFER = 64 * 1024

_libc = ctypes.CDLL(None, use_errno=True)
_libc.inotify_init1.argtypes = [ctypes.c_int]
_libc.inotify_init1.restype = ctypes.c_int
_libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
_libc.inotify_add_watch.restype = ctypes.c_int
_libc.read.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
_libc.read.restype = ctypes.c_ssize_t
_libc.close.argtypes = [ctypes.c_int]
_libc.close.restype = ctypes.c_int

Event = tuple[Path, str, int]  # (watched directory, name in it or "", mask)


def _fail(what: str) -> OSError:
    code = ctypes.get_errno()
    return OSError(code, f"{what}: {os.strerror(code)}")


class OutsideWatch:
    """Every open or read below `paths`, except at or below a path in `ignore`.

    Directories at or below an ignored path are not watched at all (the root's own reads would
    only fill the queue); an ignored directory that lies directly in a watched one is still
    reported there by name (opening `base/cat` reaches base's watch as "cat") and filtered out.
    Symbolic links are never followed while adding watches.
    """

    def __init__(self, paths: list[Path], ignore: set[Path] | frozenset[Path] = frozenset()):
        self.ignore = {Path(os.path.abspath(p)) for p in ignore}
        self._fd = _libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self._fd < 0:
            raise _fail("inotify_init1")
        self._dirs: dict[int, Path] = {}
        self._seen: list[Event] = []
        try:
            for path in paths:
                self._watch_tree(Path(os.path.abspath(path)))
            self._drain()  # the walk itself opened each directory while adding watches
        except BaseException:
            self.close()
            raise
        self._seen.clear()

    def _ignored(self, path: Path) -> bool:
        return any(path == p or p in path.parents for p in self.ignore)

    def _watch_tree(self, top: Path) -> None:
        for dirpath, dirnames, _ in os.walk(top, followlinks=False):
            here = Path(dirpath)
            if self._ignored(here):
                dirnames.clear()
                continue
            dirnames[:] = [d for d in dirnames if not self._ignored(here / d)]
            wd = _libc.inotify_add_watch(self._fd, os.fsencode(here), WATCHED)
            if wd < 0:
                raise _fail(f"inotify_add_watch {here}")
            self._dirs[wd] = here

    def _drain(self) -> None:
        buffer = ctypes.create_string_buffer(_BUFFER)
        while True:
            count = _libc.read(self._fd, buffer, _BUFFER)
            if count < 0:
                code = ctypes.get_errno()
                if code == errno.EINTR:
                    continue
                if code in (errno.EAGAIN, errno.EWOULDBLOCK):
                    return
                raise _fail("read inotify")
            if count == 0:
                return
            data, offset = buffer.raw[:count], 0
            while offset < count:
                wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
                offset += _HEADER.size
                name = os.fsdecode(data[offset : offset + length].rstrip(b"\0"))
                offset += length
                if mask & IN_Q_OVERFLOW:
                    raise AssertionError("inotify queue overflowed: events were lost")
                directory = self._dirs.get(wd)
                if directory is None or not mask & WATCHED:
                    continue  # IN_IGNORED and the like: a watch went away, nothing was read
                if not self._ignored(directory / name if name else directory):
                    self._seen.append((directory, name, mask))

    def events(self) -> list[Event]:
        """Every event so far outside the ignored paths (reads what is pending first)."""
        if self._fd >= 0:
            self._drain()
        return list(self._seen)

    def close(self) -> None:
        if self._fd >= 0:
            _libc.close(self._fd)
            self._fd = -1

    def __enter__(self) -> OutsideWatch:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self._drain()
        finally:
            self.close()


def describe(events: list[Event]) -> list[str]:
    """Events as readable lines for an assertion message: `IN_OPEN on /path`."""
    lines = []
    for directory, name, mask in events:
        kinds = [k for k, bit in (("IN_OPEN", IN_OPEN), ("IN_ACCESS", IN_ACCESS)) if mask & bit]
        where = directory / name if name else directory
        lines.append(f"{'|'.join(kinds)} on {where}{'/' if mask & IN_ISDIR or not name else ''}")
    return lines
