"""How each command's result is shown: one registry from result type to its view.

A result is a `models.Result`: plain data with its JSON document (`to_json()`). What a person sees
is decided here, and only here: the columns and rows of the table a terminal shows (and a pipe
gets as tab-separated lines), the table's title, and the summary line a command writes to
stderr. `output.emit` asks this registry (`registry.py`), never the result; one module per group
of commands holds their views.

It imports every one of those modules for what importing them does: their decorators (`view`,
`summary`, `warning`) register each view as the module loads, and `view_of` finds only what is
registered. It also re-exports the names commands import from `lancens_cli.cli.views`.
"""

from lancens_cli.cli.views import catalog, history, indexes, partitioned, spark
from lancens_cli.cli.views.catalog import prune_title
from lancens_cli.cli.views.history import restore_question
from lancens_cli.cli.views.registry import View, summary_of, view_of, warnings_of
from lancens_cli.cli.views.spark import join_explain_lines

__all__ = [
    "View",
    "catalog",
    "history",
    "indexes",
    "join_explain_lines",
    "partitioned",
    "prune_title",
    "restore_question",
    "spark",
    "summary_of",
    "view_of",
    "warnings_of",
]
