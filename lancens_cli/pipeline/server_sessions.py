"""The Connect sessions that commands on the warm server of `lancens spark start` reuse.

Connect gives every session its own Python worker daemons (its artifact UUID is in their
environment), which cost a command seconds to start and to import Lance in. So commands reuse
sessions (`session_url`): a few slots, each a session id a command holds (a lock file in the
state directory) while it runs, so that two commands at once never share one. A slot idle longer
than SESSION_REUSE gets a new id before the server's own idle timeout (SESSION_TIMEOUT, which
`spark_server.py` sets) has closed the old one for good.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
import uuid
from collections.abc import Iterator

from lancens_cli.pipeline.server_record import SparkServer, state_dir

SESSION_SLOTS = 2
SESSION_REUSE = 7 * 3600.0  # a working day's pauses keep their sessions
SESSION_TIMEOUT = "8h"
_HELD_SLOTS: list[int] = []  # the slot locks this process holds until it exits


def session_url(server: SparkServer) -> str:
    """The server's URL with the session id of a free slot, held by this process until it exits
    (the plain URL, a fresh session, when every slot is in use)."""
    for slot in range(SESSION_SLOTS):
        try:
            fd = os.open(
                state_dir() / f"spark-connect-session-{slot}", os.O_RDWR | os.O_CREAT, 0o600
            )
        except OSError:
            return server.url
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            session = _slot_session(fd, server)
        except OSError:
            os.close(fd)
            continue
        _HELD_SLOTS.append(fd)
        return f"{server.url}/;session_id={session}"
    return server.url


def _slot_session(fd: int, server: SparkServer) -> str:
    """The slot's session id: the one it holds when it belongs to this server and was used
    within SESSION_REUSE, else a new one; the slot is marked used now."""
    owner = f"{server.pid}@{server.started_at}"
    held = os.pread(fd, 4096, 0).decode("utf-8", "replace").split()
    idle = time.time() - os.fstat(fd).st_mtime
    if len(held) == 2 and held[0] == owner and idle < SESSION_REUSE:
        session = held[1]
    else:
        session = str(uuid.uuid4())
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{owner} {session}\n".encode(), 0)
    return session


@contextlib.contextmanager
def slots_held(server: SparkServer) -> Iterator[list[str]]:
    """The URLs with the session id of every free slot, held for the block only (then released,
    not kept until this process exits); fewer, or none, when other processes hold slots."""
    held = []
    try:
        urls = []
        for _ in range(SESSION_SLOTS):
            url = session_url(server)
            if url == server.url:
                break  # a slot some other process holds: it gets a session of its own
            urls.append(url)
            held.append(_HELD_SLOTS.pop())
        yield urls
    finally:
        for fd in held:
            os.close(fd)
