"""Timers around named functions of a measured process, installed as their modules load.

A bench that accounts for every second of a command runs it in-process under `ProbeHook`: each
(module, attribute path, label) of its list is wrapped as soon as the module has run, so the
functions are timed whoever calls them (Spark's own included). Each call appends (label, start,
end, nesting level) to `calls`; a name a checkout lacks is skipped, so one list serves old and
new code alike.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

Probed = list[tuple[str, str, str]]  # (module, attribute path, label)


def timed(function: Any, label: str, calls: list, depth: threading.local) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        level = getattr(depth, "level", 0)
        depth.level = level + 1
        started = time.time()
        try:
            return function(*args, **kwargs)
        finally:
            calls.append((label, started, time.time(), level))
            depth.level = level

    wrapper.__wrapped__ = function  # type: ignore[attr-defined]
    return wrapper


class ProbeHook:
    """A meta path finder that times the probed functions as soon as their module has run."""

    def __init__(self, probed: Probed, calls: list) -> None:
        self.probed, self.calls, self.depth = probed, calls, threading.local()
        self.names = {name for name, _, _ in probed}

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in self.names:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        run = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            self.patch(module)

        spec.loader.exec_module = exec_module
        return spec

    def patch(self, module: Any) -> None:
        for name, path, label in self.probed:
            if name != module.__name__:
                continue
            *owners, attr = path.split(".")
            owner = module
            for part in owners:
                owner = getattr(owner, part, None)
            if owner is not None and hasattr(owner, attr):
                setattr(owner, attr, timed(getattr(owner, attr), label, self.calls, self.depth))
