"""A prune run's table results, kept on disk as they come rather than in memory.

A run over 100,000 tables makes 100,000 results (what was removed, which versions stay and
why: about 0.7 KB each). The report needs them only to count them and to print them, both a
pass in order, so each is written as one JSON line to an unnamed temporary file (in the
system's temporary directory, never in the root) and read back a block at a time. They are
written a block at a time too: a write per result was 4,000 writes in the run's main thread
(0.34 s) for 4,000 tables, a write per block is 45. When that directory cannot take them
(none, read-only, full), the results are held in memory instead: the run costs memory, never
its report.
"""

from __future__ import annotations

import itertools
import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from typing import IO, overload

from lancens_cli.service.prune.report import ResultTotals, TableResult

BLOCK = 1 << 16  # bytes read at a time


class ResultLog(Sequence[TableResult]):
    """An append-only sequence of `TableResult`s in the order appended; every iteration reads
    them back from the start (iterations may overlap: each keeps its own position). What the
    report sums over them is kept as they come (`totals`): printing a report reads them once.
    A position (`log[i]`) is read from the start too: a log is read in order."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._held: list[TableResult] | None = None  # in memory, when the file failed
        self._end = 0
        self._pending: list[bytes] = []  # whole lines not yet written, under BLOCK bytes
        self._pending_bytes = 0
        self._count = 0
        self.totals = ResultTotals()  # the report's sums and failed tables, without a read
        try:  # removed by the system when closed or when the process ends, however it ends
            # unbuffered (lines are gathered in `_pending`), written and read at explicit
            # offsets: a failed write leaves nothing in the file's buffer for a read to flush
            self._file = tempfile.TemporaryFile(buffering=0)  # noqa: SIM115 - as the report
        except OSError:
            self._held = []

    def append(self, result: TableResult) -> None:
        if self._held is None:
            line = json.dumps(result.to_json(), separators=(",", ":")).encode() + b"\n"
            self._pending.append(line)
            self._pending_bytes += len(line)
            if self._pending_bytes >= BLOCK:
                self._flush()
        else:
            self._held.append(result)
        self._count += 1
        self.totals.add(result)

    def _flush(self) -> None:
        """The pending lines written; when the temporary directory is full, every result
        so far is held in memory instead, and the rest go there."""
        pending, self._pending, self._pending_bytes = self._pending, [], 0
        if not pending or self._held is not None:
            return
        try:
            self._write(b"".join(pending))
        except OSError:
            written = list(self._read())
            self._held = written + [TableResult.from_json(json.loads(line)) for line in pending]

    def _write(self, lines: bytes) -> None:
        """The whole lines after the last whole one; `_end` moves only once all are."""
        assert self._file is not None
        done = 0
        while done < len(lines):  # a write may take part of them (then the rest fails)
            done += os.pwrite(self._file.fileno(), lines[done:], self._end + done)
        self._end += len(lines)

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> TableResult: ...

    @overload
    def __getitem__(self, index: slice) -> list[TableResult]: ...

    def __getitem__(self, index: int | slice) -> TableResult | list[TableResult]:
        if isinstance(index, slice):
            return list(self)[index]
        position = range(self._count)[index]  # (an IndexError past the end)
        return next(itertools.islice(iter(self), position, None))

    def __iter__(self) -> Iterator[TableResult]:
        self._flush()
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
