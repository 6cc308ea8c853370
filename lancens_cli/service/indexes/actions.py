"""What `prune --optimize-indexes` says of each index of a table (service/indexes/optimize.py).

Apart from the work itself (no Lance, no pyarrow here) so that prune's report
(service/prune/report.py), which a run answered from its record builds without Lance, reads the
same words.
"""

from __future__ import annotations

from enum import StrEnum


class IndexAction(StrEnum):
    """One index's `action` in a prune's table result: its text is the JSON's."""

    CURRENT = "current"  # nothing to add
    MISSING = "missing"  # a definition the table lacks (before the work)
    TOO_FEW_ROWS = "too few rows"  # too few vectors to train it yet: left until there are
    UNINDEXED_ROWS = "unindexed rows"  # rows the index does not cover (before the work)
    WOULD_BUILD = "would build"  # a dry run's MISSING
    WOULD_OPTIMIZE = "would optimize"  # a dry run's UNINDEXED_ROWS
    BUILT = "built"  # MISSING, done
    OPTIMIZED = "optimized"  # UNINDEXED_ROWS, done


# the actions of work done, and of work a dry run would do
DONE = frozenset((IndexAction.BUILT, IndexAction.OPTIMIZED))
PLANNED = frozenset((IndexAction.WOULD_BUILD, IndexAction.WOULD_OPTIMIZE))
