"""Lance's cleanup of exactly the versions a plan lets go, for a table or one of its branches."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from lancens_cli.service.prune.policy import PrunePolicy
from lancens_cli.store.delete_pace import DeletePace, lance_rate


def expire_listed(
    handle: Any,
    versions: list[int],
    policy: PrunePolicy,
    dry_run: bool,
    still_there: Callable[[], Iterable[int]],
    pace: DeletePace | None = None,
) -> tuple[list[int], Any]:
    """Expire `versions` of the lineage `handle` is on: (the versions removed, Lance's stats).

    The same `older_than` goes to Lance, which re-checks each version's age by its own clock and
    keeps a younger one; a dry run asks `explain_cleanup_old_versions` instead and changes
    nothing. `still_there()` lists the lineage's versions, asked only when Lance kept some.
    With a `pace` (`--delete-rate-limit`), Lance deletes at the share of the rate it reserves.
    """
    arguments = {
        "older_than": policy.older_than,
        "versions": versions,
        "error_if_tagged_old_versions": False,
    }
    if dry_run:
        stats = handle.explain_cleanup_old_versions(**arguments).stats
        return versions[: stats.old_versions], stats
    with lance_rate(pace) as limit:
        if limit is not None:
            arguments["delete_rate_limit"] = limit
        stats = handle.cleanup_old_versions(**arguments)
    if stats.old_versions == len(versions):
        return list(versions), stats
    remaining = set(still_there())
    return [v for v in versions if v not in remaining], stats
