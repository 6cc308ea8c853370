"""Partition selection: which partition tables a filter must read (spec 004 calls it
"Partition Pruning", Appendix D; here "prune" names the maintenance command alone).

A predicate over source columns becomes, per spec version, a filter over that version's
partition columns by evaluating the partition transforms on the predicate's literals. The one
rule that matters: a partition holding a matching row is never pruned. Every conversion below
is an implication (row matches => its partition matches the filter); whatever cannot be
converted that way becomes TRUE, never a guess.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as t

from lancens_cli.models import OBJECT_ID_DELIMITER
from lancens_cli.partition import transforms
from lancens_cli.partition.predicate import (
    FALSE,
    TRUE,
    And,
    Between,
    Comparison,
    Const,
    InList,
    IsNull,
    Node,
    Or,
    conjuncts,
    evaluate,
    flatten,
    negation_normal_form,
    to_sql,
    unambiguous,
    zone,
)
from lancens_cli.partition.schema import top_level_ids
from lancens_cli.partition.spec import PartitionField, PartitionSpec

MAX_COMBINATIONS = 1000  # IN-list products for multi-column fields
MONOTONE = ("year", "truncate")  # t(a) <= t(b) whenever a <= b
CYCLIC = {"month": 12, "day": 31, "hour": 24}  # unit steps in one cycle


class _NoSelection(Exception):
    """This atom / field pair gives no usable filter (the result is TRUE)."""


@dataclass(frozen=True)
class VersionPlan:
    """What one spec version keeps and what its scan must still check."""

    spec_id: int
    filter: Node  # over partition columns; TRUE or FALSE when trivial
    pushed: tuple[Node, ...]  # top-level predicate parts that narrowed `filter`
    residual_node: Node | None  # what the scan of this version's tables applies; None: nothing

    @property
    def residual(self) -> str | None:
        """The residual as SQL (what `partitions` shows)."""
        return to_sql(self.residual_node) if self.residual_node is not None else None

    @property
    def prefix(self) -> str:
        return f"v{self.spec_id}{OBJECT_ID_DELIMITER}"

    def clause(self) -> str | None:
        """This version's part of the `__manifest` filter (None when it keeps nothing)."""
        if self.filter == FALSE:
            return None
        head = f"object_id LIKE '{self.prefix}%'"
        if self.filter == TRUE:
            return head
        body = to_sql(self.filter)
        return f"{head} AND ({body})" if isinstance(self.filter, Or) else f"{head} AND {body}"

    def keeps(self, row: dict[str, Any]) -> bool:
        object_id = row.get("object_id") or ""
        return object_id.startswith(self.prefix) and evaluate(self.filter, row) is True


@dataclass(frozen=True)
class SelectionPlan:
    predicate: Node | None
    versions: tuple[VersionPlan, ...]

    def version(self, spec_id: int) -> VersionPlan:
        for version in self.versions:
            if version.spec_id == spec_id:
                return version
        raise KeyError(f"no spec version {spec_id} in this plan")

    def manifest_filter(self) -> str:
        """The Lance filter on `__manifest` selecting the tables to scan (Appendix D style)."""
        clauses = [c for c in (v.clause() for v in self.versions) if c is not None]
        if not clauses:
            return "object_type = 'table' AND false"
        if len(clauses) == 1:
            return f"object_type = 'table' AND ({clauses[0]})"
        joined = " OR ".join(f"({c})" for c in clauses)
        return f"object_type = 'table' AND ({joined})"

    def keeps(self, row: dict[str, Any]) -> bool:
        if row.get("object_type") != "table":
            return False
        return any(v.keeps(row) for v in self.versions)


def plan(predicate: Node | None, specs: list[PartitionSpec], schema: Any) -> SelectionPlan:
    """The selection plan of `predicate` (parsed against `schema`) for every spec version."""
    parts = conjuncts(predicate)
    versions = tuple(_Converter(spec, schema).version(parts) for spec in specs)
    return SelectionPlan(predicate, versions)


def selected(chosen: SelectionPlan, manifest_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The `__manifest` rows the plan keeps, in Python (the same semantics as the SQL)."""
    return [row for row in manifest_rows if chosen.keeps(row)]


# --------------------------------------------------------------------------- simplification


def all_of(items: list[Node]) -> Node:
    """AND with TRUE / FALSE folded; a repeated part is dropped (a weaker AND is still safe)."""
    out: list[Node] = []
    for item in items:
        for part in conjuncts(item):
            if part == FALSE:
                return FALSE
            if part != TRUE and part not in out:
                out.append(part)
    return flatten(And(tuple(out))) if out else TRUE


def any_of(items: list[Node]) -> Node:
    out: list[Node] = []
    for item in items:
        item = flatten(item)
        for part in item.items if isinstance(item, Or) else (item,):
            if part == TRUE:
                return TRUE
            if part != FALSE:
                out.append(part)
    return flatten(Or(tuple(out))) if out else FALSE


def _distinct(values: list[Any]) -> list[Any]:
    """Distinct values; 0.0 and -0.0 (or 1 and True) stay apart, since a hash tells them apart."""
    seen, out = set(), []
    for value in values:
        key = (type(value).__name__, repr(value))
        if key not in seen:
            seen.add(key)
            out.append(value)
    return out


def one_of(column: str, values: list[Any]) -> Node:
    """`column` equals one of `values` (None meaning NULL)."""
    values = _distinct(values)
    present = [v for v in values if v is not None]
    parts: list[Node] = []
    if len(present) == 1:
        parts.append(Comparison(column, "=", present[0]))
    elif present:
        parts.append(InList(column, tuple(present)))
    if len(present) != len(values):
        parts.append(IsNull(column))
    return any_of(parts)


# --------------------------------------------------------------------------- value checks


def _fit(value: Any, kind: Any) -> Any:
    """`value` as a literal of partition column type `kind`, or _NoSelection.

    Lance refuses a literal that does not convert to the column's type (an int64 literal
    against an int32 column, say), so only values that fit go into the filter.
    """
    value = _plain(value)
    if value is None:
        raise _NoSelection
    if t.is_boolean(kind) and isinstance(value, bool):
        return value
    if t.is_integer(kind) and isinstance(value, int) and not isinstance(value, bool):
        return _fit_int(value, kind)
    if t.is_floating(kind) and isinstance(value, float) and value == value:
        return value
    if t.is_decimal(kind) and isinstance(value, Decimal):
        return _fit_decimal(value, kind)
    if (t.is_string(kind) or t.is_large_string(kind)) and isinstance(value, str):
        return value
    if t.is_timestamp(kind) and isinstance(value, dt.datetime):
        return _fit_timestamp(value, kind)
    if t.is_date(kind) and isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value
    raise _NoSelection


def _plain(value: Any) -> Any:
    """A Python value from whatever a transform returned (Arrow or NumPy scalars too)."""
    if hasattr(value, "as_py"):
        return value.as_py()
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        return value.item()
    return value


def _fit_int(value: int, kind: Any) -> int:
    bits = kind.bit_width
    low, high = (
        (0, 2**bits - 1)
        if t.is_unsigned_integer(kind)
        else (
            -(2 ** (bits - 1)),
            2 ** (bits - 1) - 1,
        )
    )
    if not low <= value <= high:
        raise _NoSelection
    return value


def _fit_decimal(value: Decimal, kind: Any) -> Decimal:
    exponent = value.as_tuple().exponent
    if not isinstance(exponent, int) or -exponent > kind.scale:
        raise _NoSelection
    if abs(value) >= Decimal(10) ** (kind.precision - kind.scale):
        raise _NoSelection
    return value


def _fit_timestamp(value: dt.datetime, kind: Any) -> dt.datetime:
    """Rendered as wall time, so it must be in the column's own zone, unambiguously."""
    if kind.tz is None:
        if value.tzinfo is not None:
            raise _NoSelection
        return value
    if value.tzinfo is None:
        raise _NoSelection
    local = value.astimezone(zone(kind.tz))
    if not unambiguous(local):
        raise _NoSelection
    return local


def _renderable(node: Node) -> Node:
    """Refuse a filter Lance could not read (checked once, where it is built)."""
    try:
        to_sql(node)
    except ValueError:
        raise _NoSelection from None
    return node


# --------------------------------------------------------------------------- conversion


@dataclass(frozen=True)
class _Result:
    filter: Node
    exact: bool  # the filter is the atom itself on identity columns: the scan need not recheck


_UNUSABLE = _Result(TRUE, False)


class _Converter:
    """Turns predicates over source columns into filters over one spec's partition columns."""

    def __init__(self, spec: PartitionSpec, schema: Any) -> None:
        self.spec = spec
        by_id = top_level_ids(schema)
        self.names = {fid: f.name for fid, f in by_id.items()}
        self.types = {f.name: f.type for f in by_id.values()}
        # A field whose source column is gone reads NULL for new rows only: never prune on it.
        self.fields = [f for f in spec.fields if all(s in self.names for s in f.source_ids)]
        self.on_column: dict[str, list[PartitionField]] = {}
        for f in self.fields:
            for name in dict.fromkeys(self.names[s] for s in f.source_ids):
                self.on_column.setdefault(name, []).append(f)

    def version(self, parts: list[Node]) -> VersionPlan:
        """Filter, pushed parts and residual of one version for the top-level conjuncts."""
        children = [(i, c) for i, p in enumerate(parts) for c in conjuncts(_nnf(p))]
        results = [self.convert(c) for _, c in children]
        derived = self.derived([c for _, c in children])
        used = {children[k][0] for k, r in enumerate(results) if r.filter != TRUE}
        used |= {children[k][0] for node, ks in derived if node != TRUE for k in ks}
        left = _residual(parts, children, results)
        return VersionPlan(
            spec_id=self.spec.id,
            filter=all_of([r.filter for r in results] + [node for node, _ in derived]),
            pushed=tuple(p for i, p in enumerate(parts) if i in used),
            residual_node=flatten(And(tuple(left))) if left else None,
        )

    def convert(self, node: Node) -> _Result:
        """The filter a node (in negation normal form) implies on this spec's columns."""
        if isinstance(node, Const):
            return _Result(node, True)
        if isinstance(node, And):
            results = [self.convert(item) for item in node.items]
            extra = [f for f, _ in self.derived(list(node.items))]
            exact = all(r.exact for r in results)
            return _Result(all_of([r.filter for r in results] + extra), exact)
        if isinstance(node, Or):
            results = [self.convert(item) for item in node.items]
            exact = all(r.exact for r in results)
            return _Result(any_of([r.filter for r in results]), exact)
        return self.atom(node)

    def atom(self, node: Node) -> _Result:
        fields = self.on_column.get(node.column, [])
        results = [self._atom_field(node, f) for f in fields]
        if not results:
            return _UNUSABLE
        exact = any(r.exact for r in results)
        return _Result(all_of([r.filter for r in results]), exact)

    def _atom_field(self, node: Node, field: PartitionField) -> _Result:
        try:
            return _atom_rule(self, node, field)
        except _NoSelection:
            return _UNUSABLE

    # ------------------------------------------------------------- transforms of literals

    def source_type(self, field: PartitionField, index: int = 0) -> Any:
        return self.types[self.names[field.source_ids[index]]]

    def transformed(self, field: PartitionField, values: list[Any]) -> Any:
        """The partition value of a row whose sources hold `values` (None: NULL)."""
        kinds = [self.source_type(field, i) for i in range(len(field.source_ids))]
        try:
            return transforms.value_of(field, list(values), kinds)
        except Exception:  # noqa: BLE001 - a literal the transform cannot take: no pruning
            raise _NoSelection from None

    def fitted(self, field: PartitionField, values: list[Any]) -> Any:
        return _fit(self.transformed(field, values), field.result_type)

    # ------------------------------------------------------------- AND-group derivations

    def derived(self, items: list[Node]) -> list[tuple[Node, list[int]]]:
        """Filters only a whole AND group implies, with the positions of the items used.

        Multi-column fields need every source bound by `=` / IN; a cyclic field (month, day,
        hour) can use a lower and an upper bound given by two different comparisons.
        """
        out = []
        for field in self.fields:
            try:
                if _is_multi(field):
                    out.append(self._bound_combinations(field, items))
                elif _kind(field) == "cyclic":
                    out.append(self._bounded_range(field, items))
            except _NoSelection:
                continue
        return out

    def _bound_combinations(self, field: PartitionField, items: list[Node]) -> Any:
        columns = [self.names[s] for s in field.source_ids]
        choices, used = [], set()
        for column in columns:
            found = [(k, b) for k, b in enumerate(binding(i, column) for i in items) if b]
            if not found or not self._hashable(column, _intersect([b for _, b in found])):
                raise _NoSelection
            choices.append(_intersect([b for _, b in found]))
            used |= {k for k, _ in found}
        total = 1
        for choice in choices:
            total *= len(choice)
        if total > MAX_COMBINATIONS:
            raise _NoSelection
        values = [self.transformed(field, list(c)) for c in itertools.product(*choices)]
        checked = [None if v is None else _fit(v, field.result_type) for v in values]
        return _renderable(one_of(field.column, checked)), sorted(used)

    def _bounded_range(self, field: PartitionField, items: list[Node]) -> Any:
        if not _source_ok("cyclic", field, self.source_type(field)):
            raise _NoSelection
        column = self.names[field.source_ids[0]]
        lows = [(k, lo) for k, i in enumerate(items) for lo in _lower(i, column)]
        highs = [(k, hi) for k, i in enumerate(items) for hi in _upper(i, column)]
        if not lows or not highs or len({k for k, _ in lows + highs}) < 2:
            raise _NoSelection  # a lone BETWEEN is converted on its own
        low = max(v for _, v in lows)
        high = min(v for _, v in highs)
        node = self.cyclic_range(field, low, high)
        return node, sorted({k for k, _ in lows + highs})

    def cyclic_range(self, field: PartitionField, low: Any, high: Any) -> Node:
        """month / day / hour values of every source value in [low, high] (spans < 1 cycle)."""
        kind = self.source_type(field)
        if low > high:
            return FALSE  # no value lies in the range, so no row matches
        points = _unit_starts(low, high, field.transform.type, kind)
        values = _apply(field, points, kind)
        return _renderable(one_of(field.column, [_fit(v, field.result_type) for v in values]))

    def _hashable(self, column: str, values: list[Any]) -> bool:
        """`x = 0.0` also matches -0.0, which hashes differently: floats with 0 are out."""
        if t.is_floating(self.types[column]):
            return all(v != 0 for v in values)
        return True


def _residual(
    parts: list[Node], children: list[tuple[int, Node]], results: list[_Result]
) -> list[Node]:
    """What the scan must still check: each top-level part as written, minus the pieces the
    partition filter enforces exactly (identity columns); a part only partly enforced keeps
    its other pieces, in negation normal form."""
    left: list[Node] = []
    for i, part in enumerate(parts):
        mine = [(c, r) for (j, c), r in zip(children, results, strict=True) if j == i]
        kept = [c for c, r in mine if not r.exact]
        if len(kept) == len(mine):
            left.append(part)
        else:
            left.extend(kept)
    return left


def _nnf(node: Node) -> Node:
    return negation_normal_form(node)


def _is_multi(field: PartitionField) -> bool:
    return len(field.source_ids) > 1


def _kind(field: PartitionField) -> str:
    """identity / monotone / cyclic / hash (bucket, multi_bucket and expressions)."""
    if field.transform is None:
        return "hash"
    name = field.transform.type
    if name == "identity":
        return "identity"
    if name in MONOTONE:
        return "monotone"
    if name in CYCLIC:
        return "cyclic"
    return "hash"


def _atom_rule(conv: _Converter, node: Node, field: PartitionField) -> _Result:
    if isinstance(node, IsNull):
        return _null_rule(node, field)
    if _is_multi(field):
        raise _NoSelection  # needs every source bound: see _Converter.derived
    kind = _kind(field)
    if kind == "identity":
        return _Result(_renderable(_identity(node, field)), True)
    if not _source_ok(kind, field, conv.source_type(field)):
        raise _NoSelection
    if kind == "monotone":
        return _Result(_monotone(conv, node, field), False)
    if kind == "cyclic":
        return _Result(_cyclic(conv, node, field), False)
    return _Result(_hashed(conv, node, field), False)


def _null_rule(node: IsNull, field: PartitionField) -> _Result:
    """Built-in transforms map NULL to NULL and a value to a value (multi_bucket: NULL only if
    every source is NULL, so only IS NOT NULL carries over); expressions promise neither."""
    if field.transform is None:
        raise _NoSelection
    if _is_multi(field) and not node.negated:
        raise _NoSelection
    exact = field.transform.type == "identity"
    return _Result(IsNull(field.column, node.negated), exact)


def _identity(node: Node, field: PartitionField) -> Node:
    kind, column = field.result_type, field.column
    if isinstance(node, Comparison):
        return Comparison(column, node.op, _fit(node.literal, kind))
    if isinstance(node, InList):
        return InList(column, tuple(_fit(v, kind) for v in node.literals))
    assert isinstance(node, Between)
    return Between(column, _fit(node.low, kind), _fit(node.high, kind))


def _source_ok(kind: str, field: PartitionField, source: Any) -> bool:
    """Where the ordering argument holds: dates / timestamps for time transforms; integers,
    decimals and strings (byte order = code point order) for truncate; floats never, since
    0.0 = -0.0 and NaN would have to be reasoned about."""
    if t.is_floating(source):
        return False
    if kind == "monotone" and field.transform.type == "truncate":
        return (
            t.is_integer(source)
            or t.is_decimal(source)
            or t.is_string(source)
            or (t.is_large_string(source))
        )
    if kind in ("monotone", "cyclic"):
        return t.is_date(source) or t.is_timestamp(source)
    return True


_WIDEN = {"=": "=", "<": "<=", "<=": "<=", ">": ">=", ">=": ">="}


def _monotone(conv: _Converter, node: Node, field: PartitionField) -> Node:
    """t non-decreasing: x < c => t(x) <= t(c); x > c => t(x) >= t(c); `!=` tells nothing.

    `year` of a timestamp in a named zone is wall time, which a zone's change of offset can
    set back (by at most a day in the time zone database): a bound is first moved that far
    outward (`_slack`), so no row of a year the range reaches is ever left out."""
    column = field.column
    down, up = _slack(field, conv.source_type(field))
    if isinstance(node, Comparison):
        if node.op not in _WIDEN:
            raise _NoSelection
        if node.op == "=":
            return _renderable(Comparison(column, "=", conv.fitted(field, [node.literal])))
        moved = up(node.literal) if node.op in ("<", "<=") else down(node.literal)
        return _renderable(Comparison(column, _WIDEN[node.op], conv.fitted(field, [moved])))
    if isinstance(node, InList):
        return _renderable(one_of(column, [conv.fitted(field, [v]) for v in node.literals]))
    assert isinstance(node, Between)
    low, high = conv.fitted(field, [down(node.low)]), conv.fitted(field, [up(node.high)])
    return _renderable(Between(column, low, high))


_ZONE_SETBACK = dt.timedelta(days=3)  # beyond any backward jump of a zone's wall clock


def _slack(field: PartitionField, kind: Any) -> tuple[Any, Any]:
    """How to move a lower and an upper bound so that a monotone transform stays safe."""
    if field.transform.type == "year" and zone_of(kind) not in (None, "fixed"):

        def down(value: Any) -> Any:
            return value - _ZONE_SETBACK if isinstance(value, dt.datetime) else value

        def up(value: Any) -> Any:
            return value + _ZONE_SETBACK if isinstance(value, dt.datetime) else value

        return down, up
    return (lambda value: value), (lambda value: value)


_FIXED_OFFSET = re.compile(r"^[+-]\d{2}:?\d{2}$")


def zone_of(kind: Any) -> str | None:
    """None for dates, naive timestamps and UTC; "fixed" for a fixed offset; else the name."""
    if not t.is_timestamp(kind) or kind.tz is None or kind.tz.upper() in ("UTC", "Z", "ETC/UTC"):
        return None
    return "fixed" if _FIXED_OFFSET.match(kind.tz) else kind.tz


def _cyclic(conv: _Converter, node: Node, field: PartitionField) -> Node:
    """month / day / hour repeat: only `=`, IN and a short closed range carry over."""
    if isinstance(node, Comparison):
        if node.op != "=":
            raise _NoSelection
        return _renderable(Comparison(field.column, "=", conv.fitted(field, [node.literal])))
    if isinstance(node, InList):
        return _renderable(one_of(field.column, [conv.fitted(field, [v]) for v in node.literals]))
    assert isinstance(node, Between)
    return conv.cyclic_range(field, node.low, node.high)


def _hashed(conv: _Converter, node: Node, field: PartitionField) -> Node:
    """Hashes and expressions: only the values `=` / IN pin down."""
    column = conv.names[field.source_ids[0]]
    values = binding(node, column)
    if not values or not conv._hashable(column, values):
        raise _NoSelection
    out = [conv.transformed(field, [v]) for v in values]
    return _renderable(
        one_of(field.column, [None if v is None else _fit(v, field.result_type) for v in out])
    )


# --------------------------------------------------------------------------- bindings and bounds


def binding(node: Node, column: str) -> list[Any] | None:
    """The values `column` can hold when `node` is TRUE, if `=` / IN pin them down."""
    if isinstance(node, Comparison):
        return [node.literal] if node.column == column and node.op == "=" else None
    if isinstance(node, InList):
        matches = node.column == column and not node.negated
        return _distinct(list(node.literals)) if matches else None
    if isinstance(node, And):
        found = [b for b in (binding(i, column) for i in node.items) if b is not None]
        return _intersect(found) if found else None
    if isinstance(node, Or):
        found = [binding(i, column) for i in node.items]
        if any(b is None for b in found):
            return None
        return _distinct([v for b in found for v in b])
    return None


def _intersect(bindings: list[list[Any]]) -> list[Any]:
    """Values of the first binding the others allow (a matching row equals one of them)."""
    first, rest = bindings[0], bindings[1:]
    return [v for v in first if all(any(v == w for w in b) for b in rest)]


def _lower(node: Node, column: str) -> list[Any]:
    if isinstance(node, Comparison) and node.column == column and node.op in (">", ">="):
        return [node.literal]
    if isinstance(node, Between) and node.column == column and not node.negated:
        return [node.low]
    return []


def _upper(node: Node, column: str) -> list[Any]:
    if isinstance(node, Comparison) and node.column == column and node.op in ("<", "<="):
        return [node.literal]
    if isinstance(node, Between) and node.column == column and not node.negated:
        return [node.high]
    return []


# --------------------------------------------------------------------------- cyclic ranges


def _unit_starts(low: Any, high: Any, unit: str, kind: Any) -> list[Any]:
    """`low` and every instant in (low, high] where the transform's value may change.

    Each value in [low, high] shares its partition value with the latest of these points at
    or before it. Dates, naive and UTC timestamps: the starts of each month / day / hour. A
    timestamp in another zone: every whole minute, for wall time there moves by whole minutes
    between changes of offset, and those fall on whole minutes too (checked: an offset of
    seconds, a zone's local mean time before standard time, is refused). Refused beyond one
    cycle: it would keep every partition anyway.
    """
    if t.is_date(kind):
        return _walk(low, high, "month" if unit == "month" else "day", _next_date)
    if zone_of(kind) is not None:
        return _zoned_minutes(low, high, unit, kind)
    if isinstance(low, dt.datetime) and low.tzinfo is not None:
        low, high = low.astimezone(dt.UTC), high.astimezone(dt.UTC)
    return _walk(low, high, unit, _next_stamp)


_CYCLE_SPAN = {
    "hour": dt.timedelta(days=1),
    "day": dt.timedelta(days=31),
    "month": dt.timedelta(days=366),
}


def _zoned_minutes(low: dt.datetime, high: dt.datetime, unit: str, kind: Any) -> Any:
    """`low` and every whole minute in (low, high], as an array of `kind` (wall time in a
    zone other than UTC changes value only at whole minutes, as long as its offsets are
    whole minutes)."""
    if high - low > _CYCLE_SPAN[unit]:
        raise _NoSelection
    minute = 60_000_000
    start = _epoch_micros(low)
    first = -(-start // minute) * minute
    micros = np.concatenate(([start], np.arange(first, _epoch_micros(high) + 1, minute)))
    instants = pa.array(micros, pa.timestamp("us", tz=kind.tz))
    offsets = pc.subtract(
        pc.local_timestamp(instants).cast(pa.int64()), instants.cast(pa.int64())
    ).to_numpy()
    if (offsets % minute).any():
        raise _NoSelection  # a zone's local mean time: offsets of seconds
    return instants


def _epoch_micros(value: dt.datetime) -> int:
    aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
    delta = aware - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _walk(low: Any, high: Any, unit: str, step: Any) -> list[Any]:
    points, point = [low], step(low, unit)
    while point <= high:
        points.append(point)
        if len(points) > CYCLIC[unit]:
            raise _NoSelection
        point = step(point, unit)
    return points


def _next_date(day: dt.date, unit: str) -> dt.date:
    if unit == "month":
        return dt.date(day.year + day.month // 12, day.month % 12 + 1, 1)
    return day + dt.timedelta(days=1)


def _next_stamp(stamp: dt.datetime, unit: str) -> dt.datetime:
    if unit == "hour":
        return stamp.replace(minute=0, second=0, microsecond=0) + dt.timedelta(hours=1)
    midnight = stamp.replace(hour=0, minute=0, second=0, microsecond=0)
    if unit == "day":
        return midnight + dt.timedelta(days=1)
    return midnight.replace(year=stamp.year + stamp.month // 12, month=stamp.month % 12 + 1, day=1)


def _apply(field: PartitionField, points: list[Any], kind: Any) -> list[Any]:
    """Partition values of `points`, through the same vectorized code the writer uses."""
    try:
        if isinstance(points, pa.Array):  # whole minutes already: floor `low` to the unit
            array = pc.floor_temporal(points, unit="second").cast(kind)
        else:
            array = pa.array([_floor_to_unit(p, kind) for p in points], type=kind)
        return list(dict.fromkeys(transforms.apply_field(field, [array], len(points)).to_pylist()))
    except Exception:  # noqa: BLE001 - no pruning rather than a guess
        raise _NoSelection from None


def _floor_to_unit(point: Any, kind: Any) -> Any:
    """A coarser column cannot hold sub-unit parts; flooring keeps the same date parts."""
    if not t.is_timestamp(kind) or kind.unit in ("us", "ns"):
        return point
    micro = point.microsecond
    return point.replace(microsecond=0 if kind.unit == "s" else micro - micro % 1000)
