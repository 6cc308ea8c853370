"""`join-plan`: can two partitioned namespaces be joined partition by partition (spec 004, SPJ)?

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

import re
from dataclasses import dataclass, field
from typing import Any

from lancens_cli.errors import InvalidInputError, LancensError
from lancens_cli.models import KIND_TABLE
from lancens_cli.partition.rows import dotted, split_id
from lancens_cli.partition.schema import id_of, top_level_ids
from lancens_cli.partition.spec import TIME_TRANSFORMS, PartitionField, PartitionSpec, Transform
from lancens_cli.service.namespace import Namespace
from lancens_cli.service.partition_layout import PartitionLayout, layout_of
from lancens_cli.words import plural

TABLE_NAME = "dataset"
_ON = re.compile(r"^\s*([lr])\.(.+?)\s*=\s*([lr])\.(.+?)\s*$", re.IGNORECASE | re.DOTALL)
_OTHER_FIELDS_NOTE = (
    "partition fields not on a join key do not prevent SPJ: partitions pair up on the join-key "
    "fields, and every combination of the other fields' values falls in the same group"
)

# --- the join keys ----------------------------------------------------------------------------


def parse_on(text: str) -> tuple[str, str]:
    """`l.a = r.b` (or `r.b = l.a`) -> ("a", "b")."""
    match = _ON.match(text)
    sides = (match.group(1).lower(), match.group(3).lower()) if match else None
    if match is None or sides not in (("l", "r"), ("r", "l")):
        raise InvalidInputError(f"--on {text!r}: expected 'l.<left column> = r.<right column>'")
    first, second = _unquote(match.group(2)), _unquote(match.group(4))
    return (first, second) if sides == ("l", "r") else (second, first)


def _unquote(name: str) -> str:
    name = name.strip()
    if len(name) >= 2 and name[0] == name[-1] and name[0] in '"`':
        name = name[1:-1]
    if not name:
        raise InvalidInputError("--on: a column name is empty")
    return name


@dataclass(frozen=True)
class JoinKey:
    """One `l.a = r.b` equality, resolved to the field ids partition specs refer to."""

    left: str
    right: str
    left_id: int
    right_id: int
    left_type: Any
    right_type: Any

    @property
    def text(self) -> str:
        return f"l.{self.left} = r.{self.right}"


def _family(kind: Any) -> str:
    """Types whose values (and hashes, spec: type-promotion resistant) compare equal."""
    import pyarrow.types as t

    if t.is_integer(kind):
        return "integer"
    if t.is_string(kind) or t.is_large_string(kind) or t.is_string_view(kind):
        return "string"
    if t.is_binary(kind) or t.is_large_binary(kind) or t.is_binary_view(kind):
        return "binary"
    if t.is_fixed_size_binary(kind):
        return "binary"
    if t.is_decimal(kind):
        return f"decimal with scale {kind.scale}"  # hashes use the unscaled value
    for name, test in (("date", t.is_date), ("timestamp", t.is_timestamp), ("time", t.is_time)):
        if test(kind):
            return name
    return str(kind)


def resolve_keys(on: list[tuple[str, str]], left_schema: Any, right_schema: Any) -> list[JoinKey]:
    """Column names -> JoinKeys; an unknown column or a repeated pair is invalid input."""
    if not on:
        raise InvalidInputError("give at least one join key with --on 'l.<col> = r.<col>'")
    keys: list[JoinKey] = []
    for left, right in on:
        text = f"l.{left} = r.{right}"
        left_id = _column_id(left_schema, left, "left", text)
        right_id = _column_id(right_schema, right, "right", text)
        key = JoinKey(
            left,
            right,
            left_id,
            right_id,
            top_level_ids(left_schema)[left_id].type,
            top_level_ids(right_schema)[right_id].type,
        )
        if any((k.left_id, k.right_id) == (left_id, right_id) for k in keys):
            raise InvalidInputError(f"--on {text!r} is given twice")
        keys.append(key)
    return keys


def _column_id(schema: Any, name: str, side: str, text: str) -> int:
    try:
        return id_of(schema, name)
    except InvalidInputError as exc:
        raise InvalidInputError(f"--on {text!r}: {side} {exc.message}") from None


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
            "left_transform": _display(self.left_field, left_names),
            "right_field": self.right_field.field_id,
            "right_transform": _display(self.right_field, right_names),
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


def _display(f: PartitionField, names: dict[int, str]) -> str:
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
    family = _family(key.left_type)
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
    import pyarrow.types as t

    return a == b or (t.is_integer(a) and t.is_integer(b))


def _relate_multi(keys: list[JoinKey], lf: PartitionField, rf: PartitionField) -> Relation | str:
    """multi_bucket on both sides: the same join columns in the same order."""
    pairs = {(k.left_id, k.right_id): k for k in keys}
    matched = [pairs.get(ids) for ids in zip(lf.source_ids, rf.source_ids, strict=False)]
    found = [k for k in matched if k is not None]
    if len(lf.source_ids) != len(rf.source_ids) or len(found) != len(matched):
        return "multi_bucket over different join columns (or another order) on the two sides"
    if any(_family(k.left_type) != _family(k.right_type) for k in found):
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
    lf, rf = _family(key.left_type), _family(key.right_type)
    if lf != rf:
        return f"left {key.left} is {key.left_type}, right {key.right} is {key.right_type}"
    return "; ".join(dict.fromkeys(tried)) or "no compatible partition fields"


def analyse(keys: list[JoinKey], left: PartitionSpec, right: PartitionSpec) -> SpecPairAnalysis:
    """Relations between the partition fields of two spec versions on the join keys."""
    relations: list[Relation] = []
    tried: dict[int, list[str]] = {}
    for index, key in enumerate(keys):
        tried[index] = []
        if _family(key.left_type) != _family(key.right_type):
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


# --- partitions and groups --------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionTable:
    """A partition's `dataset` table as the `__manifest` records it."""

    object_id: str
    location: str
    uri: str
    read_version: int | None
    read_branch: str | None
    read_tag: str | None
    spec_id: int
    values: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "table": self.object_id,
            "location": self.location,
            "uri": self.uri,
            "read_version": self.read_version,
            "spec_version": self.spec_id,
            "values": {k: _plain(v) for k, v in self.values.items()},
        }
        if self.read_branch is not None:
            out["read_branch"] = self.read_branch
        if self.read_tag is not None:
            out["read_tag"] = self.read_tag
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    return value.isoformat() if hasattr(value, "isoformat") else value


@dataclass
class Side:
    """One namespace of the join: its layout and its partition tables by spec version."""

    label: str
    root: str
    layout: PartitionLayout
    tables: dict[int, list[PartitionTable]]

    @property
    def names(self) -> dict[int, str]:
        return {i: f.name for i, f in top_level_ids(self.layout.schema).items()}

    def spec(self, spec_id: int) -> PartitionSpec:
        return next(s for s in self.layout.specs if s.id == spec_id)


def load_side(label: str, ns: Namespace) -> Side:
    """Read one root; errors name the side. Not partitioned: invalid input (as for `write`)."""
    try:
        ns.require_manifest(f"join-plan ({label} root)")
        ns.require_root()
        snapshot = ns.snapshot()
        layout = layout_of(snapshot)
    except LancensError as exc:
        raise type(exc)(f"{label}: {exc.message}") from None
    if layout is None:
        raise InvalidInputError(
            f"{label} root {ns.storage.root_uri} is not a partitioned namespace (its __manifest "
            "has no partition spec): run `lancens add-partition-spec` there first"
        )
    tables: dict[int, list[PartitionTable]] = {s.id: [] for s in layout.specs}
    for row in snapshot.rows:
        found = _partition_table(row, layout.specs, ns)
        if found is not None:
            tables[found.spec_id].append(found)
    return Side(label, ns.storage.root_uri, layout, tables)


def _partition_table(row: dict, specs: list[PartitionSpec], ns: Namespace) -> PartitionTable | None:
    """`v<N>$<level>...$dataset` with one level per field of spec N, else None."""
    if row["object_type"] != KIND_TABLE:
        return None
    parts = split_id(row["object_id"])
    spec = next((s for s in specs if s.namespace == parts[0]), None)
    if spec is None or parts[-1] != TABLE_NAME or len(parts) != len(spec.fields) + 2:
        return None
    location = row["location"] or ""
    return PartitionTable(
        row["object_id"],
        location,
        ns.storage.uri(location),
        row.get("read_version"),
        row.get("read_branch"),
        row.get("read_tag"),
        spec.id,
        {f.field_id: row.get(f.column) for f in spec.fields},
    )


@dataclass
class Group:
    """Partitions joined together: every matching row pair lies within one group."""

    left_spec: int
    right_spec: int
    key: dict[str, Any]
    left: list[PartitionTable] = field(default_factory=list)
    right: list[PartitionTable] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "specs": {"left": self.left_spec, "right": self.right_spec},
            "key": {k: _plain(v) for k, v in self.key.items()},
            "left": [t.to_json() for t in self.left],
            "right": [t.to_json() for t in self.right],
        }


def _sort_key(values: tuple[Any, ...]) -> tuple:
    return tuple((v is None, v if v is not None else 0) for v in values)


def group_partitions(
    analysis: SpecPairAnalysis, left: list[PartitionTable], right: list[PartitionTable]
) -> list[Group]:
    """Partitions of both sides by their group value (empty when no relation)."""
    if not analysis.compatible:
        return []
    relations = analysis.relations
    labels = [r.label for r in relations]
    groups: dict[tuple[Any, ...], Group] = {}

    def group(values: tuple[Any, ...]) -> Group:
        if values not in groups:
            key = dict(zip(labels, values, strict=True))
            groups[values] = Group(analysis.left_spec.id, analysis.right_spec.id, key)
        return groups[values]

    for t in left:
        group(tuple(r.left_value(t.values) for r in relations)).left.append(t)
    for t in right:
        group(tuple(r.right_value(t.values) for r in relations)).right.append(t)
    for g in groups.values():
        g.left.sort(key=lambda t: t.object_id)
        g.right.sort(key=lambda t: t.object_id)
    return [groups[k] for k in sorted(groups, key=_sort_key)]


# --- the plan ---------------------------------------------------------------------------------


@dataclass
class JoinPlan:
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
            out.append(_OTHER_FIELDS_NOTE)
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
                "left": [f"{f.field_id} = {_display(f, ln)}" for f in p.other_left],
                "right": [f"{f.field_id} = {_display(f, rn)}" for f in p.other_right],
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

    @property
    def title(self) -> str:
        if not self.compatible:
            return "join plan: not compatible"
        c = self.counts()
        return (
            f"join plan: {plural(c['groups'], 'group')} of {c['left_partitions']} left and "
            f"{plural(c['right_partitions'], 'right partition')}"
        )

    def table_rows(self) -> tuple[list[str], list[list[Any]]]:
        """One row per group; when not compatible, one row per reason."""
        if not self.compatible:
            return ["reason"], [[r] for r in self.reasons]
        several = len(self.pairs) > 1
        labels = [r.label for r in self.current.relations]
        header = ["specs", "key"] if several else labels
        header += ["left", "left tables", "right", "right tables"]
        rows = []
        for g in self.groups:
            if several:
                key = ", ".join(f"{k}={_plain(v)}" for k, v in g.key.items())
                lead = [f"v{g.left_spec} x v{g.right_spec}", key]
            else:
                lead = [_plain(v) for v in g.key.values()]
            rows.append([*lead, len(g.left), _ids(g.left), len(g.right), _ids(g.right)])
        return header, rows

    def summary(self) -> str:
        if not self.compatible:
            return f"not compatible: {self.reasons[0]}" if self.reasons else "not compatible"
        c = self.counts()
        return (
            f"compatible ({self.scope}): {plural(c['groups'], 'group')}, "
            f"{c['matched_groups']} with partitions on both sides"
        )


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
