"""Where lancens keeps what it may rebuild at any time: the user's cache directory."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def cache_home(environ: Mapping[str, str] | None = None) -> Path | None:
    """`$XDG_CACHE_HOME/lancens`, else `~/.cache/lancens` (a relative XDG path is ignored, as
    the XDG specification says); None when neither names a place (no home directory, as for
    a container's user without one). Nothing kept here is a source of truth: deleting it costs
    time, never data."""
    environ = os.environ if environ is None else environ
    xdg = environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "lancens"
    home = environ.get("HOME") or os.path.expanduser("~")
    if not os.path.isabs(home):  # expanduser gives "~" back when it finds no home
        return None
    return Path(home) / ".cache" / "lancens"
