"""What a dry run's output cannot show by itself.

`store.tables` is imported inside `note_location_pattern` so that `lancens --help` starts without
pyarrow or Lance.
"""

from __future__ import annotations

from lancens_cli.cli.output import message
from lancens_cli.models import ChangeSet


def note_location_pattern(result: ChangeSet, json_mode: bool) -> None:
    """Explain a `<hash>_<id>` location: the real run draws the prefix, so none is shown."""
    from lancens_cli.store.tables import HASH_PLACEHOLDER

    if json_mode or not result.dry_run:
        return
    if any((c.location or "").startswith(HASH_PLACEHOLDER) for c in result.changes):
        message(
            f"dry run: {HASH_PLACEHOLDER} stands for 8 random hex digits, drawn when the "
            "directory is created"
        )
