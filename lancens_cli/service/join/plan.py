"""`join-plan`: can two partitioned namespaces be joined partition by partition (spec 004, SPJ)?

The answer; the key syntax is `keys`, the relation algebra `relations`, loading and grouping
the partitions `groups` (all in this package).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lancens_cli.models import Result
from lancens_cli.partition.rows import dotted
from lancens_cli.service.join.groups import (
    Group,
    PartitionTable,
    Side,
    group_partitions,
    load_side,
)
from lancens_cli.service.join.keys import JoinKey, parse_on, resolve_keys

__all__ = ["JoinPlan", "PartitionTable", "Side", "join_plan", "parse_on"]
from lancens_cli.service.join.relations import (
    OTHER_FIELDS_NOTE,
    SpecPairAnalysis,
    analyse,
    field_display,
)
from lancens_cli.service.namespace import Namespace

# --- the plan ---------------------------------------------------------------------------------


@dataclass
class JoinPlan(Result):
    """The answer of `join-plan`; `compatible: false` is an answer, not an error."""

    left: Side
    right: Side
    keys: list[JoinKey]
    pairs: list[SpecPairAnalysis]
    groups: list[Group]
    all_versions: bool = False

    @property
    def compatible(self) -> bool:
        return all(p.compatible for p in self.pairs)

    @property
    def reasons(self) -> list[str]:
        several = len(self.pairs) > 1
        out = []
        for p in self.pairs:
            prefix = f"left v{p.left_spec.id} x right v{p.right_spec.id}: " if several else ""
            out += [prefix + r for r in p.reasons]
        return out

    @property
    def current(self) -> SpecPairAnalysis:
        return self.pairs[0]

    @property
    def scope(self) -> str:
        if self.all_versions:
            return "every spec version with partitions on each side"
        return "the current partition spec of each side"

    def planned(self, side: Side) -> list[int]:
        ids = {p.left_spec.id if side is self.left else p.right_spec.id for p in self.pairs}
        return sorted(ids)

    def not_covered(self, side: Side) -> list[PartitionTable]:
        planned = self.planned(side)
        return [t for i, ts in side.tables.items() if i not in planned for t in ts]

    def counts(self) -> dict[str, int]:
        return {
            "left_partitions": sum(len(self.left.tables[i]) for i in self.planned(self.left)),
            "right_partitions": sum(len(self.right.tables[i]) for i in self.planned(self.right)),
            "left_not_covered": len(self.not_covered(self.left)),
            "right_not_covered": len(self.not_covered(self.right)),
            "groups": len(self.groups),
            "matched_groups": sum(1 for g in self.groups if g.left and g.right),
        }

    def notes(self) -> list[str]:
        out = [f"planned from {self.scope}"]
        for side in (self.left, self.right):
            missed = self.not_covered(side)
            if missed:
                versions = ", ".join(f"v{i}" for i in sorted({t.spec_id for t in missed}))
                out.append(
                    f"{len(missed)} {side.label} partition table(s) written under older specs "
                    f"({versions}) are not in this plan: join them with a shuffle, or plan "
                    "them with --all-versions"
                )
        if any(p.other_left or p.other_right for p in self.pairs if p.compatible):
            out.append(OTHER_FIELDS_NOTE)
        return out

    def _side_json(self, side: Side) -> dict[str, Any]:
        return {
            "root": side.root,
            "current_spec": side.layout.current.id,
            "spec_versions_planned": self.planned(side),
        }

    def _pair_json(self, p: SpecPairAnalysis) -> dict[str, Any]:
        ln, rn = self.left.names, self.right.names
        return {
            "left_spec": p.left_spec.id,
            "right_spec": p.right_spec.id,
            "compatible": p.compatible,
            "keys": [
                {
                    "left": s.key.left,
                    "right": s.key.right,
                    "used": bool(s.relations),
                    "relations": [r.to_json(ln, rn) for r in s.relations],
                    "reason": s.reason,
                }
                for s in p.keys
            ],
            "other_fields": {
                "left": [f"{f.field_id} = {field_display(f, ln)}" for f in p.other_left],
                "right": [f"{f.field_id} = {field_display(f, rn)}" for f in p.other_right],
            },
            "reasons": p.reasons,
        }

    def to_json(self) -> dict[str, Any]:
        current = self._pair_json(self.current)
        return {
            "compatible": self.compatible,
            "scope": self.scope,
            "left": self._side_json(self.left),
            "right": self._side_json(self.right),
            "on": [{"left": k.left, "right": k.right} for k in self.keys],
            "keys": current["keys"],
            "other_fields": current["other_fields"],
            "reasons": self.reasons,
            "notes": self.notes(),
            "spec_pairs": [self._pair_json(p) for p in self.pairs],
            "counts": self.counts(),
            "groups": [g.to_json() for g in self.groups],
        }


def _ids(tables: list[PartitionTable]) -> str:
    return ", ".join(dotted(t.object_id) for t in tables)


def _spec_pairs(left: Side, right: Side, all_versions: bool) -> list[tuple[int, int]]:
    """The current pair first; with all_versions also every pair of versions holding tables."""
    current = (left.layout.current.id, right.layout.current.id)
    if not all_versions:
        return [current]
    lefts = [i for i, ts in left.tables.items() if ts] or [current[0]]
    rights = [i for i, ts in right.tables.items() if ts] or [current[1]]
    others = sorted((a, b) for a in lefts for b in rights if (a, b) != current)
    return [current, *others]


def join_plan(
    left: Namespace, right: Namespace, on: list[tuple[str, str]], all_versions: bool = False
) -> JoinPlan:
    """Which partitions of `left` and `right` can be joined directly on the `on` columns."""
    left_side, right_side = load_side("left", left), load_side("right", right)
    keys = resolve_keys(on, left_side.layout.schema, right_side.layout.schema)
    pairs, groups = [], []
    for left_id, right_id in _spec_pairs(left_side, right_side, all_versions):
        analysis = analyse(keys, left_side.spec(left_id), right_side.spec(right_id))
        pairs.append(analysis)
        groups += group_partitions(analysis, left_side.tables[left_id], right_side.tables[right_id])
    return JoinPlan(left_side, right_side, keys, pairs, groups, all_versions)
