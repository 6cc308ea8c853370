"""One entry of a directory listing, the same for local disk and object stores."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DirEntry:
    name: str
    is_dir: bool
