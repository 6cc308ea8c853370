"""A branch's own old versions: which stay, and expiring the rest with Lance.

A branch (spec 002: `tree/<name>/`) has a version history of its own, which grows with every
commit to it exactly as the main one does. Its versions stay on the same rules as a table's
(service/prune/protect.py), read per branch:

- `latest`, `newest <n>`, `younger than <window>`: the branch's own newest versions;
- `tag <name>`: a tag on a version of this branch;
- `branch <child> starts here`: the version of this branch another branch was created from;
- `published read_version`: a version of this branch that a kept `__manifest` version publishes
  with `read_branch` (spec 004).

Nothing of a branch is expired when a shallow clone reads the table: the clone map does not say
which branch a clone reads through. Lance runs the expiry on a handle checked out at the branch
head (`checkout_version((branch, None))`); measured on pylance 14.0.2 it removes only that
branch's manifests and the files below `tree/<name>/` no remaining version of it references, and
leaves the main lineage and other branches alone.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lancens_cli.service.prune.expire import expire_listed
from lancens_cli.service.prune.policy import PrunePolicy, show_duration
from lancens_cli.store.catalog_rows import branch_name
from lancens_cli.store.version_files import VersionInfo, version_files

if TYPE_CHECKING:
    from lancens_cli.store.storage import Storage


@dataclass(slots=True)
class BranchState:
    name: str
    versions: list[VersionInfo]
    tags: dict[str, int]  # tags on versions of this branch
    children: dict[str, int]  # branch -> the version of this branch it starts from


@dataclass(slots=True)
class BranchPlan:
    name: str
    protected: dict[int, list[str]]
    expire: list[int]


def read_branch_states(storage: Storage, location: str, ds: Any) -> list[BranchState]:
    """Every branch of the table with its versions (one listing each), tags and children."""
    branches = ds.branches.list()
    tags: dict[str, dict[str, int]] = defaultdict(dict)
    for name, tag in ds.tags.list().items():
        if branch_name(tag.get("branch")) is not None and tag.get("version") is not None:
            tags[tag["branch"]][name] = int(tag["version"])
    children: dict[str, dict[str, int]] = defaultdict(dict)
    for name, branch in branches.items():
        parent = branch.get("parent_branch")
        if branch_name(parent) is not None and branch.get("parent_version") is not None:
            children[parent][name] = int(branch["parent_version"])
    states = []
    for name in sorted(branches):
        files = version_files(storage, f"{location}/tree/{name}")
        versions = [VersionInfo(v, when) for v, (_file, when) in sorted(files.items())]
        states.append(BranchState(name, versions, tags.get(name, {}), children.get(name, {})))
    return states


def plan_branches(
    branch_states: Sequence[BranchState],
    published: dict[str, set[int]],
    policy: PrunePolicy,
    now: datetime,
    read_by_clones: bool,
) -> tuple[list[BranchPlan], list[str]]:
    """Each branch's plan, and notes for the table's report; `published` holds, by branch, the
    versions kept `__manifest` versions publish with `read_branch`."""
    if not branch_states:
        return [], []
    if read_by_clones:
        return [], ["branch versions kept: a shallow clone reads this table"]
    window = show_duration(policy.older_than)
    cutoff = now - policy.older_than
    plans = []
    for branch in branch_states:
        if not branch.versions:
            continue
        protected: dict[int, list[str]] = defaultdict(list)
        ordered = [v.version for v in branch.versions]
        protected[ordered[-1]].append("latest")
        for version in ordered[-policy.retain :]:
            protected[version].append(f"newest {policy.retain}")
        for info in branch.versions:
            if info.timestamp >= cutoff:
                protected[info.version].append(f"younger than {window}")
        for name, version in branch.tags.items():
            protected[version].append(f"tag {name}")
        for name, version in branch.children.items():
            protected[version].append(f"branch {name} starts here")
        for version in published.get(branch.name, ()):
            protected[version].append(f"published read_version of read_branch {branch.name}")
        expire = [v for v in ordered if v not in protected]
        kept = {v: reasons for v, reasons in sorted(protected.items()) if v in set(ordered)}
        plans.append(BranchPlan(branch.name, kept, expire))
    return plans, []


def expire_branches(
    storage: Storage,
    location: str,
    ds: Any,
    plans: list[BranchPlan],
    policy: PrunePolicy,
    dry_run: bool,
    judged_at: float | None = None,
) -> list[tuple[str, list[int], Any]]:
    """Run each branch's plan on a handle at its head: (branch, versions removed, Lance stats);
    `judged_at` as in `expire_listed`."""
    done: list[tuple[str, list[int], Any]] = []
    for plan in plans:
        if not plan.expire:
            continue
        head = ds.checkout_version((plan.name, None))
        branch_dir = f"{location}/tree/{plan.name}"
        removed, stats = expire_listed(
            head,
            plan.expire,
            policy,
            dry_run,
            functools.partial(version_files, storage, branch_dir),
            storage.delete_pace,
            judged_at,
        )
        done.append((plan.name, removed, stats))
    return done
