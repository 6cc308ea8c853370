"""A prune run's table results, kept on disk as they come rather than in memory.

A run over 100,000 tables makes 100,000 results (what was removed, which versions stay and
why: about 0.7 KB each). The report needs them only to count them and to print them, both a
pass in order, so each is written as one JSON line to an unnamed temporary file (in the
system's temporary directory, never in the root) and read back a block at a time. When that
directory cannot take them (none, read-only, full), the results are held in memory instead:
the run costs memory, never its report.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from typing import IO

from lancens_cli.service.prune.report import TableResult

BLOCK = 1 << 16  # bytes read at a time


class ResultLog:
    """An append-only sequence of `TableResult`s in the order appended; every iteration reads
    them back from the start (iterations may overlap: each keeps its own position)."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._held: list[TableResult] | None = None  # in memory, when the file failed
        self._end = 0
        self._count = 0
        try:  # removed by the system when closed or when the process ends, however it ends
            # unbuffered, written and read at explicit offsets: a failed write leaves nothing
            # pending that a later read would have to flush
            self._file = tempfile.TemporaryFile(buffering=0)  # noqa: SIM115 - as the report
        except OSError:
            self._held = []

    def append(self, result: TableResult) -> None:
        if self._held is None:
            line = json.dumps(result.to_json(), separators=(",", ":")).encode() + b"\n"
            try:
                self._write(line)
            except OSError:  # the temporary directory is full: the rest in memory
                self._held = list(self._read())
        if self._held is not None:
            self._held.append(result)
        self._count += 1

    def _write(self, line: bytes) -> None:
        """The whole line after the last whole one; `_end` moves only once all of it is."""
        assert self._file is not None
        done = 0
        while done < len(line):  # a write may take part of the line (then the rest fails)
            done += os.pwrite(self._file.fileno(), line[done:], self._end + done)
        self._end += len(line)

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[TableResult]:
        return iter(self._held) if self._held is not None else self._read()

    def _read(self) -> Iterator[TableResult]:
        """What the file holds up to its last whole line, from the start."""
        position, rest, end = 0, b"", self._end
        while position < end and self._file is not None:
            block = os.pread(self._file.fileno(), min(BLOCK, end - position), position)
            if not block:
                raise OSError(f"the results' temporary file ends at {position} of {end} bytes")
            position += len(block)
            *lines, rest = (rest + block).split(b"\n")
            for line in lines:
                yield TableResult.from_json(json.loads(line))
