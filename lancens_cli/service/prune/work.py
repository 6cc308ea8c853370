"""What one `prune` run does besides expiring versions: the typed value of its work options.

Light (no Lance, no pyarrow), as `policy.py` is: the command builds it before it knows whether
the run's record answers it (service/prune/quiet.py), and the record's key holds it
(service/prune/record.py).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PruneWork:
    """`compact`: compact the tables' small fragments (`--compact`); `catalog_indexes`:
    rebuild `__manifest`'s own scalar indexes after the tables (the global `--indexes`);
    `optimize_indexes`: bring the tables' indexes current and build the namespace's
    definitions a partition table lacks (`--optimize-indexes`)."""

    compact: bool = False
    catalog_indexes: bool = False
    optimize_indexes: bool = False
