"""Whether a process recorded by pid still runs: the one rule of the lock files that name their
holder (prune's leases, the JVM archive's build)."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """True while a process has `pid` (also another user's, which we may not signal)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
