"""Partition selection: which partition tables a filter must read (spec 004 calls it
"Partition Pruning", Appendix D; here "prune" names the maintenance command alone).

A predicate over source columns becomes, per spec version, a filter over that version's
partition columns by evaluating the partition transforms on the predicate's literals. The one
rule that matters: a partition holding a matching row is never pruned. Every conversion below
is an implication (row matches => its partition matches the filter); whatever cannot be
converted that way becomes TRUE, never a guess.

Here: the plan and the rule of each transform. The values a rule reads from a predicate and
writes into a filter are `filter_values.py`'s; the calendar of month / day / hour ranges and of
zones is `time_ranges.py`'s.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import pyarrow.types as t

from lancens_cli.models import OBJECT_ID_DELIMITER
from lancens_cli.partition import transforms
from lancens_cli.partition.filter_values import (
    NoSelection,
    all_of,
    any_of,
    binding,
    fit,
    intersect,
    lower_bounds,
    one_of,
    renderable,
    upper_bounds,
)
from lancens_cli.partition.predicate import (
    FALSE,
    TRUE,
    And,
    Atom,
    Between,
    Comparison,
    Const,
    InList,
    IsNull,
    Node,
    Not,
    Or,
    conjuncts,
    evaluate,
    flatten,
    negation_normal_form,
    to_sql,
)
from lancens_cli.partition.schema import top_level_ids
from lancens_cli.partition.spec import PartitionField, PartitionSpec
from lancens_cli.partition.time_ranges import CYCLIC, bound_slack, partition_values, unit_starts

MAX_COMBINATIONS = 1000  # IN-list products for multi-column fields
MONOTONE = ("year", "truncate")  # t(a) <= t(b) whenever a <= b


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
        if isinstance(node, Not):  # not in negation normal form: nothing to convert
            return _UNUSABLE
        return self.atom(node)

    def atom(self, node: Atom) -> _Result:
        fields = self.on_column.get(node.column, [])
        results = [self._atom_field(node, f) for f in fields]
        if not results:
            return _UNUSABLE
        exact = any(r.exact for r in results)
        return _Result(all_of([r.filter for r in results]), exact)

    def _atom_field(self, node: Atom, field: PartitionField) -> _Result:
        try:
            return _atom_rule(self, node, field)
        except NoSelection:
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
            raise NoSelection from None

    def fitted(self, field: PartitionField, values: list[Any]) -> Any:
        return fit(self.transformed(field, values), field.result_type)

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
            except NoSelection:
                continue
        return out

    def _bound_combinations(self, field: PartitionField, items: list[Node]) -> Any:
        columns = [self.names[s] for s in field.source_ids]
        choices, used = [], set()
        for column in columns:
            found = [(k, b) for k, b in enumerate(binding(i, column) for i in items) if b]
            if not found or not self._hashable(column, intersect([b for _, b in found])):
                raise NoSelection
            choices.append(intersect([b for _, b in found]))
            used |= {k for k, _ in found}
        total = 1
        for choice in choices:
            total *= len(choice)
        if total > MAX_COMBINATIONS:
            raise NoSelection
        values = [self.transformed(field, list(c)) for c in itertools.product(*choices)]
        checked = [None if v is None else fit(v, field.result_type) for v in values]
        return renderable(one_of(field.column, checked)), sorted(used)

    def _bounded_range(self, field: PartitionField, items: list[Node]) -> Any:
        if not _source_ok("cyclic", field, self.source_type(field)):
            raise NoSelection
        column = self.names[field.source_ids[0]]
        lows = [(k, lo) for k, i in enumerate(items) for lo in lower_bounds(i, column)]
        highs = [(k, hi) for k, i in enumerate(items) for hi in upper_bounds(i, column)]
        if not lows or not highs or len({k for k, _ in lows + highs}) < 2:
            raise NoSelection  # a lone BETWEEN is converted on its own
        low = max(v for _, v in lows)
        high = min(v for _, v in highs)
        node = self.cyclic_range(field, low, high)
        return node, sorted({k for k, _ in lows + highs})

    def cyclic_range(self, field: PartitionField, low: Any, high: Any) -> Node:
        """month / day / hour values of every source value in [low, high] (spans < 1 cycle)."""
        kind = self.source_type(field)
        if low > high:
            return FALSE  # no value lies in the range, so no row matches
        if field.transform is None:  # an expression: no unit to step by
            raise NoSelection
        points = unit_starts(low, high, field.transform.type, kind)
        values = partition_values(field, points, kind)
        return renderable(one_of(field.column, [fit(v, field.result_type) for v in values]))

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


def _atom_rule(conv: _Converter, node: Atom, field: PartitionField) -> _Result:
    if isinstance(node, IsNull):
        return _null_rule(node, field)
    if _is_multi(field):
        raise NoSelection  # needs every source bound: see _Converter.derived
    kind = _kind(field)
    if kind == "identity":
        return _Result(renderable(_identity(node, field)), True)
    if not _source_ok(kind, field, conv.source_type(field)):
        raise NoSelection
    if kind == "monotone":
        return _Result(_monotone(conv, node, field), False)
    if kind == "cyclic":
        return _Result(_cyclic(conv, node, field), False)
    return _Result(_hashed(conv, node, field), False)


def _null_rule(node: IsNull, field: PartitionField) -> _Result:
    """Built-in transforms map NULL to NULL and a value to a value (multi_bucket: NULL only if
    every source is NULL, so only IS NOT NULL carries over); expressions promise neither."""
    if field.transform is None:
        raise NoSelection
    if _is_multi(field) and not node.negated:
        raise NoSelection
    exact = field.transform.type == "identity"
    return _Result(IsNull(field.column, node.negated), exact)


def _identity(node: Node, field: PartitionField) -> Node:
    kind, column = field.result_type, field.column
    if isinstance(node, Comparison):
        return Comparison(column, node.op, fit(node.literal, kind))
    if isinstance(node, InList):
        return InList(column, tuple(fit(v, kind) for v in node.literals))
    assert isinstance(node, Between)
    return Between(column, fit(node.low, kind), fit(node.high, kind))


def _source_ok(kind: str, field: PartitionField, source: Any) -> bool:
    """Where the ordering argument holds: dates / timestamps for time transforms; integers,
    decimals and strings (byte order = code point order) for truncate; floats never, since
    0.0 = -0.0 and NaN would have to be reasoned about."""
    if t.is_floating(source):
        return False
    truncate = field.transform is not None and field.transform.type == "truncate"
    if kind == "monotone" and truncate:
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
    outward (`bound_slack`), so no row of a year the range reaches is ever left out."""
    column = field.column
    down, up = bound_slack(field, conv.source_type(field))
    if isinstance(node, Comparison):
        if node.op not in _WIDEN:
            raise NoSelection
        if node.op == "=":
            return renderable(Comparison(column, "=", conv.fitted(field, [node.literal])))
        moved = up(node.literal) if node.op in ("<", "<=") else down(node.literal)
        return renderable(Comparison(column, _WIDEN[node.op], conv.fitted(field, [moved])))
    if isinstance(node, InList):
        return renderable(one_of(column, [conv.fitted(field, [v]) for v in node.literals]))
    assert isinstance(node, Between)
    low, high = conv.fitted(field, [down(node.low)]), conv.fitted(field, [up(node.high)])
    return renderable(Between(column, low, high))


def _cyclic(conv: _Converter, node: Node, field: PartitionField) -> Node:
    """month / day / hour repeat: only `=`, IN and a short closed range carry over."""
    if isinstance(node, Comparison):
        if node.op != "=":
            raise NoSelection
        return renderable(Comparison(field.column, "=", conv.fitted(field, [node.literal])))
    if isinstance(node, InList):
        return renderable(one_of(field.column, [conv.fitted(field, [v]) for v in node.literals]))
    assert isinstance(node, Between)
    return conv.cyclic_range(field, node.low, node.high)


def _hashed(conv: _Converter, node: Node, field: PartitionField) -> Node:
    """Hashes and expressions: only the values `=` / IN pin down."""
    column = conv.names[field.source_ids[0]]
    values = binding(node, column)
    if not values or not conv._hashable(column, values):
        raise NoSelection
    out = [conv.transformed(field, [v]) for v in values]
    return renderable(
        one_of(field.column, [None if v is None else fit(v, field.result_type) for v in out])
    )
