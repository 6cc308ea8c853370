"""Where lancens keeps what it may rebuild at any time: the user's cache directory."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def cache_home(environ: Mapping[str, str] | None = None) -> Path:
    """`$XDG_CACHE_HOME/lancens`, else `~/.cache/lancens` (a relative XDG path is ignored, as
    the XDG specification says). Nothing kept here is a source of truth: deleting it costs
    time, never data."""
    environ = os.environ if environ is None else environ
    xdg = environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "lancens"
