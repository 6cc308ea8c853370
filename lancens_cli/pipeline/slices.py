"""One slice of a planned read, read into Arrow batches: a read's pieces by `slice_reader`, a
change feed's by `change_reader`. Spark's tasks (`read.py`) and `scan`'s in-process engine
(`local_read.py`) read a slice here, the same code for both. The change reader is imported
inside `read_slice`, where a change feed is read: it loads Lance, and Spark's workers import
this module before they fork.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from lancens_cli.pipeline.slice_reader import read_piece

if TYPE_CHECKING:
    from lancens_cli.pipeline.pieces import Piece
    from lancens_cli.service.namespace import Namespace


def read_slice(
    ns: Namespace, pieces: tuple[Piece, ...], target: Any, workers: int = 1
) -> Iterator[Any]:
    """The rows of one slice's pieces, as batches in exactly `target`'s schema; a change
    feed's with their change columns, `workers` of its pieces read at once (a read's piece is
    one Lance scan, which reads on Lance's own threads)."""
    if any(piece.change is not None for piece in pieces):
        from lancens_cli.pipeline.change_reader import read_changes

        yield from read_changes(ns, pieces, target, workers)
        return
    for piece in pieces:
        yield from read_piece(ns, piece, target)
