"""A read's predicate over tables that lack some of its columns (an earlier schema generation).

A table written before `evolve-schema` added a column has no such column: its rows read it as
NULL, and the Lance filter of that table is the predicate with the column folded to NULL.
"""

from __future__ import annotations

from lancens_cli.partition.predicate import (
    FALSE,
    TRUE,
    And,
    Const,
    IsNull,
    Node,
    Not,
    Or,
    flatten,
    negation_normal_form,
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
