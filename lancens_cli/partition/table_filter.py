"""A condition over the namespace schema as one partition table's Lance filter, for a read
(`scan`, the data source) and for a change (`delete`) alike.

A table written before `evolve-schema` added a column has no such column: its rows read it as
NULL, and the Lance filter of that table is the predicate with the column folded to NULL. A
column it holds under an earlier name is filtered by that name.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

import pyarrow as pa

from lancens_cli.partition.predicate import (
    FALSE,
    TRUE,
    And,
    Const,
    IsNull,
    Node,
    Not,
    Or,
    columns_of,
    flatten,
    negation_normal_form,
    to_sql,
)

# --------------------------------------------------------------------------- missing columns


def without_columns(node: Node, missing: set[str]) -> Node:
    """`node` for rows whose `missing` columns are all NULL (an old table lacks them).

    In negation normal form the predicate is monotone in its atoms, so an atom that is
    UNKNOWN may be taken as FALSE without changing which rows are TRUE.
    """
    return _fold(negation_normal_form(node), missing)


def _fold(node: Node, missing: set[str]) -> Node:
    if isinstance(node, Const):
        return node
    if isinstance(node, And | Or):
        items = [_fold(item, missing) for item in node.items]
        stop, skip = (FALSE, TRUE) if isinstance(node, And) else (TRUE, FALSE)
        if stop in items:
            return stop
        kept = tuple(i for i in items if i != skip)
        return flatten(type(node)(kept)) if kept else skip
    if isinstance(node, Not):  # NNF leaves none; an UNKNOWN inside stays UNKNOWN outside
        return node if _fold(node.item, missing) is node.item else FALSE
    if node.column not in missing:
        return node
    if isinstance(node, IsNull):
        return FALSE if node.negated else TRUE
    return FALSE


def filter_for(
    node: Node | None,
    table_schema: pa.Schema,
    renamed: dict[str, str | None] | None = None,
) -> Any:
    """The Lance filter for one table, rendered from the condition here and only here:
    columns it lacks read as NULL (FALSE: skip it), a column it holds under an earlier name
    is filtered by that name."""
    if node is None:
        return None
    renamed = renamed or {}
    names = set(table_schema.names)
    missing = {c for c in columns_of(node) if renamed.get(c, c) not in names}
    if not missing and not renamed:
        return to_sql(node)
    folded = without_columns(node, missing)
    if renamed and folded not in (FALSE, TRUE):
        folded = _rename_columns(folded, {k: v for k, v in renamed.items() if v})
    if folded == FALSE:
        return FALSE
    return None if folded == TRUE else to_sql(folded)


def _rename_columns(node: Node, names: dict[str, str]) -> Node:
    """`node` with its columns named as the table names them."""
    if isinstance(node, And | Or):
        return type(node)(tuple(_rename_columns(i, names) for i in node.items))
    if isinstance(node, Not):
        return Not(_rename_columns(node.item, names))
    column = getattr(node, "column", None)
    if column in names:
        return replace(cast(Any, node), column=names[column])
    return node
