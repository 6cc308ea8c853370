"""One prune run's inputs, as `run.prune` received them: what the run (service/prune/run.py)
and the record entries it leaves (service/prune/record_entries.py) both read, in a module of
its own so that neither imports the other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from lancens_cli.models import Identifier
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.prune.compact import Compaction
from lancens_cli.service.prune.policy import PrunePolicy
from lancens_cli.service.prune.report import TableResult
from lancens_cli.service.prune.table import TableWork
from lancens_cli.service.prune.work import PruneWork

# (ns, works, policy, dry_run, parallel, advance) -> (result, compaction) per work, in order
TableRunner = Callable[
    [Namespace, list[TableWork], PrunePolicy, bool, int, Callable[[int], None]],
    Iterable[tuple[TableResult, Compaction | None]],
]


@dataclass(frozen=True)
class PruneRequest:
    """One run's inputs, as `prune()` received them."""

    ns: Namespace
    idents: list[Identifier]
    policy: PrunePolicy
    dry_run: bool
    work: PruneWork
    parallel: int
    delimiter: str
    tasks: TableRunner | None
    definitions: list[dict[str, Any]] = field(default_factory=list)  # the namespace's

    @property
    def whole_root(self) -> bool:
        """No table or namespace named: the root's debris and `__manifest` are in scope."""
        return not any(not i.is_root for i in self.idents)
