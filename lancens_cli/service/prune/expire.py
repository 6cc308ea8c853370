"""Lance's cleanup of exactly the versions a plan lets go, for a table or one of its branches."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import timedelta
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
    judged_at: float | None = None,
) -> tuple[list[int], Any]:
    """Expire `versions` of the lineage `handle` is on: (the versions removed, Lance's stats).

    Lance re-checks each version's age by its own clock and keeps a younger one, against the
    cutoff the plan judged by (`judged_at`, the run's start, less `--older-than`), not a later
    one: a version written after the table was read (a table removed and written anew under
    its path during the run, whose version numbers the plan's may name) is never old enough.
    A dry run asks `explain_cleanup_old_versions` instead and changes nothing. `still_there()`
    lists the lineage's versions, asked only when Lance kept some. With a `pace`
    (`--delete-rate-limit`), Lance deletes at the share of the rate it reserves.
    """
    arguments: dict[str, Any] = {"versions": versions, "error_if_tagged_old_versions": False}
    if dry_run:
        arguments["older_than"] = _window(policy, judged_at)
        stats = handle.explain_cleanup_old_versions(**arguments).stats
        return versions[: stats.old_versions], stats
    with lance_rate(pace) as limit:  # (which may wait for a share of the rate)
        if limit is not None:
            arguments["delete_rate_limit"] = limit
        arguments["older_than"] = _window(policy, judged_at)
        stats = handle.cleanup_old_versions(**arguments)
    if stats.old_versions == len(versions):
        return list(versions), stats
    remaining = set(still_there())
    return [v for v in versions if v not in remaining], stats


def _window(policy: PrunePolicy, judged_at: float | None) -> timedelta:
    """`--older-than` as Lance must take it now for its cutoff to be the plan's."""
    if judged_at is None:
        return policy.older_than
    return policy.older_than + timedelta(seconds=max(0.0, time.time() - judged_at))
