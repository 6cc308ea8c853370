"""The relation algebra of `join-plan`: which partition fields of two specs pair up, and how.

For each join key we look at the partition fields whose source is that key on each side and
find a *relation*: a way to map a left partition value and a right partition value to one shared
group value, such that two rows with equal join keys always land in the same group:

* the same transform with the same parameters: the values themselves;
* bucket(N) vs bucket(M), M dividing N: the finer bucket modulo M (abs(h) % N % M = abs(h) % M);
* truncate(W1) vs truncate(W2) of integers, one dividing the other: the finer value truncated
  again by the coarser width; of strings or binaries, any widths: the shorter prefix;
* year / month / day / hour (date_part values): only the same part on both sides; a finer part
  alone (day) does not tell the coarser one (month), so a day side groups into month partitions
  only when it is also partitioned by month: the parts both sides share are the group;
* multi_bucket: both sides over the same join columns in the same order, counts dividing.

Partitions pair up on the related fields; every other field (not on a join key, an expression,
an unmatched part) only splits partitions further, so all its values fall in the same group.
A join key without a relation is not used for pairing (sound: rows equal on all keys are equal on
the used ones). The plan is compatible when at least one relation exists for every pair of spec
versions planned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow.types as t

from lancens_cli.partition.spec import TIME_TRANSFORMS, PartitionField, PartitionSpec, Transform
from lancens_cli.service.join.keys import JoinKey, key_family

OTHER_FIELDS_NOTE = (
    "partition fields not on a join key do not prevent SPJ: partitions pair up on the join-key "
    "fields, and every combination of the other fields' values falls in the same group"
)


# --- relations --------------------------------------------------------------------------------


@dataclass
class Relation:
    """How one left and one right partition field map to a shared group value."""

    keys: tuple[JoinKey, ...]
    left_field: PartitionField
    right_field: PartitionField
    description: str  # "same", "bucket 8 divides 16", ...
    common: Transform  # the coarser transform both sides reduce to
    left_step: tuple[str, int] | None = None  # ("mod" | "truncate" | "prefix", parameter)
    right_step: tuple[str, int] | None = None
    label: str = ""

    def left_value(self, values: dict[str, Any]) -> Any:
        return _coarsen(values.get(self.left_field.field_id), self.left_step)

    def right_value(self, values: dict[str, Any]) -> Any:
        return _coarsen(values.get(self.right_field.field_id), self.right_step)

    def to_json(self, left_names: dict[int, str], right_names: dict[int, str]) -> dict[str, Any]:
        return {
            "join_keys": [k.text for k in self.keys],
            "left_field": self.left_field.field_id,
            "left_transform": field_display(self.left_field, left_names),
            "right_field": self.right_field.field_id,
            "right_transform": field_display(self.right_field, right_names),
            "relation": self.description,
            "group_by": self.label,
            "left_value": _step_text(self.left_field.field_id, self.left_step),
            "right_value": _step_text(self.right_field.field_id, self.right_step),
        }


def _coarsen(value: Any, step: tuple[str, int] | None) -> Any:
    """A finer partition value as the coarser transform would have computed it."""
    if value is None or step is None:
        return value
    kind, parameter = step
    if kind == "mod":
        return value % parameter
    if kind == "truncate":  # toward zero, as transforms.py truncates integers (spec formula)
        rest = abs(value) % parameter
        return value - rest if value >= 0 else value + rest
    return value[:parameter]  # strings: code points (utf8_slice_codeunits); binaries: bytes


def _step_text(field_id: str, step: tuple[str, int] | None) -> str:
    if step is None:
        return field_id
    kind, parameter = step
    if kind == "mod":
        return f"{field_id} % {parameter}"
    if kind == "truncate":
        return f"{field_id} - ({field_id} % {parameter})"
    return f"left({field_id}, {parameter})"


def field_display(f: PartitionField, names: dict[int, str]) -> str:
    sources = [names.get(i, f"#{i}") for i in f.source_ids]
    if f.transform is None:
        return f"expr({f.expression}) over {', '.join(sources)}"
    return f.transform.display(sources)


def _transform(f: PartitionField) -> Transform:
    assert f.transform is not None  # callers pass transform fields only
    return f.transform


def _buckets(f: PartitionField) -> int:
    return int(_transform(f).num_buckets or 0)


def _width(f: PartitionField) -> int:
    return int(_transform(f).width or 0)


def _same(key: JoinKey, lf: PartitionField, rf: PartitionField) -> Relation:
    return Relation((key,), lf, rf, "same", _transform(lf))


def _relate_buckets(key: JoinKey, lf: PartitionField, rf: PartitionField) -> Relation | str:
    n, m = _buckets(lf), _buckets(rf)
    if n == m:
        return _same(key, lf, rf)
    coarse, fine = min(n, m), max(n, m)
    if fine % coarse:
        return f"bucket({n}) vs bucket({m}): neither count divides the other"
    step = ("mod", coarse)
    common = Transform("bucket", num_buckets=coarse)
    text = f"bucket {coarse} divides {fine}"
    if n > m:
        return Relation((key,), lf, rf, text, common, left_step=step)
    return Relation((key,), lf, rf, text, common, right_step=step)


def _relate_truncates(key: JoinKey, lf: PartitionField, rf: PartitionField) -> Relation | str:
    w1, w2 = _width(lf), _width(rf)
    if w1 == w2:
        return _same(key, lf, rf)
    family = key_family(key.left_type)
    if family == "integer":
        coarse, fine = max(w1, w2), min(w1, w2)
        if coarse % fine:
            return f"truncate({w1}) vs truncate({w2}): neither width divides the other"
        step, text = ("truncate", coarse), f"truncate {fine} divides {coarse}"
    elif family in ("string", "binary"):
        coarse = min(w1, w2)
        step, text = ("prefix", coarse), f"truncate {coarse} is a prefix of {max(w1, w2)}"
    else:
        return f"truncate({w1}) vs truncate({w2}) of {family}: only equal widths are matched"
    common = Transform("truncate", width=coarse)
    if step[1] == w1:
        return Relation((key,), lf, rf, text, common, right_step=step)
    return Relation((key,), lf, rf, text, common, left_step=step)


def _time_reason(lt: str, rt: str) -> str:
    order = list(TIME_TRANSFORMS)
    coarse, fine = sorted((lt, rt), key=order.index)
    side = "left" if lt == fine else "right"
    return (
        f"left {lt} vs right {rt}: {fine} partitions group into {coarse} partitions only when "
        f"the {side} side is also partitioned by {coarse}"
    )


def _relate_single(key: JoinKey, lf: PartitionField, rf: PartitionField) -> Relation | str:
    """The relation of two one-column transforms on the same join key, or why there is none."""
    lt, rt = _transform(lf), _transform(rf)
    if lt.type != rt.type:
        if lt.type in TIME_TRANSFORMS and rt.type in TIME_TRANSFORMS:
            return _time_reason(lt.type, rt.type)
        return f"left {lt.type} vs right {rt.type}: different transforms"
    if lt.type == "bucket":
        return _relate_buckets(key, lf, rf)
    if lt.type == "truncate":
        return _relate_truncates(key, lf, rf)
    if lt.type == "identity" and not _same_value_type(lf.result_type, rf.result_type):
        return f"identity of {lf.result_type} vs {rf.result_type}: different value types"
    return _same(key, lf, rf)


def _same_value_type(a: Any, b: Any) -> bool:
    return a == b or (t.is_integer(a) and t.is_integer(b))


def _relate_multi(keys: list[JoinKey], lf: PartitionField, rf: PartitionField) -> Relation | str:
    """multi_bucket on both sides: the same join columns in the same order."""
    pairs = {(k.left_id, k.right_id): k for k in keys}
    matched = [pairs.get(ids) for ids in zip(lf.source_ids, rf.source_ids, strict=False)]
    found = [k for k in matched if k is not None]
    if len(lf.source_ids) != len(rf.source_ids) or len(found) != len(matched):
        return "multi_bucket over different join columns (or another order) on the two sides"
    if any(key_family(k.left_type) != key_family(k.right_type) for k in found):
        return "multi_bucket over join columns of different types on the two sides"
    n, m = _buckets(lf), _buckets(rf)
    coarse, fine = min(n, m), max(n, m)
    if fine % coarse:
        return f"multi_bucket({n}) vs multi_bucket({m}): neither count divides the other"
    common = Transform("multi_bucket", num_buckets=coarse)
    text = "same" if n == m else f"multi_bucket {coarse} divides {fine}"
    step = ("mod", coarse) if n != m else None
    left_step, right_step = (step, None) if n > m else (None, step)
    return Relation(tuple(found), lf, rf, text, common, left_step, right_step)


# --- analysis of one pair of specs ------------------------------------------------------------


@dataclass
class KeyStatus:
    key: JoinKey
    relations: list[Relation]
    reason: str | None


@dataclass
class SpecPairAnalysis:
    """What the partition specs of one left and one right version allow."""

    left_spec: PartitionSpec
    right_spec: PartitionSpec
    relations: list[Relation]
    keys: list[KeyStatus]
    other_left: list[PartitionField]
    other_right: list[PartitionField]

    @property
    def compatible(self) -> bool:
        return bool(self.relations)

    @property
    def reasons(self) -> list[str]:
        unused = " (not used for pairing)" if self.compatible else ""
        found = [f"{s.key.text}: {s.reason}{unused}" for s in self.keys if s.reason]
        if not self.compatible and not found:
            found.append("no join key is partitioned compatibly on both sides")
        return found


def _fields_on(spec: PartitionSpec, column_id: int) -> list[PartitionField]:
    return [f for f in spec.fields if column_id in f.source_ids]


def _is_single(f: PartitionField) -> bool:
    return f.transform is not None and f.transform.type != "multi_bucket"


def _is_multi(f: PartitionField) -> bool:
    return f.transform is not None and f.transform.type == "multi_bucket"


def _pair(
    keys: list[JoinKey], key: JoinKey, lf: PartitionField, rf: PartitionField
) -> Relation | str:
    """The relation of two fields on `key`, or why there is none."""
    if lf.transform is None or rf.transform is None:
        side, f = ("left", lf) if lf.transform is None else ("right", rf)
        return f"{side} field {f.field_id} is an expression, which SPJ cannot match"
    if _is_single(lf) and _is_single(rf):
        return _relate_single(key, lf, rf)
    if _is_multi(lf) and _is_multi(rf):
        return _relate_multi(keys, lf, rf)
    return f"left {lf.transform.type} vs right {rf.transform.type}: different transforms"


def _key_reason(
    key: JoinKey, left: list[PartitionField], right: list[PartitionField], tried: list[str]
) -> str:
    if not left and not right:
        return "not partitioned on either side"
    if not left or not right:
        side = "left" if not left else "right"
        return f"not partitioned on the {side} side"
    lf, rf = key_family(key.left_type), key_family(key.right_type)
    if lf != rf:
        return f"left {key.left} is {key.left_type}, right {key.right} is {key.right_type}"
    return "; ".join(dict.fromkeys(tried)) or "no compatible partition fields"


def analyse(keys: list[JoinKey], left: PartitionSpec, right: PartitionSpec) -> SpecPairAnalysis:
    """Relations between the partition fields of two spec versions on the join keys."""
    relations: list[Relation] = []
    tried: dict[int, list[str]] = {}
    for index, key in enumerate(keys):
        tried[index] = []
        if key_family(key.left_type) != key_family(key.right_type):
            continue  # equal keys need not have equal partition values
        for lf in _fields_on(left, key.left_id):
            for rf in _fields_on(right, key.right_id):
                found = _pair(keys, key, lf, rf)
                if isinstance(found, Relation):
                    if not any(r.left_field == lf and r.right_field == rf for r in relations):
                        relations.append(found)
                else:
                    tried[index].append(found)
    statuses = []
    for index, key in enumerate(keys):
        mine = [r for r in relations if key in r.keys]
        reason = None
        if not mine:
            lfs, rfs = _fields_on(left, key.left_id), _fields_on(right, key.right_id)
            reason = _key_reason(key, lfs, rfs, tried[index])
        statuses.append(KeyStatus(key, mine, reason))
    used_left = {r.left_field.field_id for r in relations}
    used_right = {r.right_field.field_id for r in relations}
    _label(relations)
    return SpecPairAnalysis(
        left,
        right,
        relations,
        statuses,
        [f for f in left.fields if f.field_id not in used_left],
        [f for f in right.fields if f.field_id not in used_right],
    )


def _label(relations: list[Relation]) -> None:
    """Name each relation's group value after the common transform (unique names)."""
    seen: dict[str, int] = {}
    for r in relations:
        base = r.common.display([k.left for k in r.keys])
        seen[base] = seen.get(base, 0) + 1
        r.label = base if seen[base] == 1 else f"{base}#{seen[base]}"
