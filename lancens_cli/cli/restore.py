"""`lancens restore`: a past version back as the newest, history kept.

The service module is imported inside the command so that `lancens --help` starts without pyarrow
or Lance.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from lancens_cli.cli.common import confirm_destruction
from lancens_cli.cli.options import DryRun, Yes
from lancens_cli.cli.output import message
from lancens_cli.cli.session import session
from lancens_cli.cli.views import restore_question, summary_of, warnings_of
from lancens_cli.errors import InvalidInputError

if TYPE_CHECKING:
    from lancens_cli.service.history.restore import RestoreResult


def restore(
    ident: Annotated[
        str | None,
        typer.Argument(
            metavar="[ID]",
            help="A table to restore; nothing for a partitioned root (every partition, as a "
            "__manifest version published them).",
        ),
    ] = None,
    to_version: Annotated[
        str | None,
        typer.Option(
            "--to-version", metavar="N", help="The version to restore (of __manifest, or ID's)."
        ),
    ] = None,
    to_timestamp: Annotated[
        str | None,
        typer.Option(
            "--to-timestamp",
            metavar="T",
            help="Restore the newest version committed at or before T (ISO 8601; UTC when it "
            "has no offset).",
        ),
    ] = None,
    dry_run: DryRun = False,
    yes: Yes = False,
) -> None:
    """Make a past version the newest again; the versions in between stay readable by time
    travel until prune lets them go.

    A partitioned root: one __manifest commit after which readers see exactly what version N
    published (the partitions N did not have are no longer published; their tables stay on
    disk). Specs and the schema stay as they are now. A table: Lance's restore of its version
    N. A partition table is refused: restore its namespace. A write that lands while the
    restore runs is restored over, and the result says so. A restored partition table has
    the indexes its restored version had: the namespace's index definitions it lacks are
    named (a warning), with the command that builds them (prune --optimize-indexes).
    """
    _check_words(to_version, to_timestamp)
    from lancens_cli.service.history.restore import (
        plan_namespace_restore,
        plan_table_restore,
        restore_namespace,
        restore_table,
    )

    ns = session().namespace
    if ident is None:
        planned = plan_namespace_restore(ns, to_version, to_timestamp)
    else:
        target = session().ident(ident)
        planned = plan_table_restore(ns, target, to_version, to_timestamp, session().delimiter)
    if dry_run or planned.nothing_to_restore:  # a rerun asks nothing: exit 0
        _emit(planned.answer(dry_run))
        return
    confirm_destruction(restore_question(planned), yes, harm="change what readers see")
    if ident is None:
        result = restore_namespace(ns, planned)
    else:
        result = restore_table(ns, session().ident(ident), planned)
    _emit(result)


def _emit(result: RestoreResult) -> None:
    """The result, its summary and its warnings (indexes the restored tables lack)."""
    session().emit(result)
    message(summary_of(result))
    for warning in warnings_of(result):
        message(f"warning: {warning}")


def _check_words(to_version: str | None, to_timestamp: str | None) -> None:
    """The version or time named, checked before anything is read (exit 2 for words)."""
    if (to_version is None) == (to_timestamp is None):
        raise InvalidInputError("give exactly one of --to-version N and --to-timestamp T")
    from lancens_cli.store.version_pick import parse_moment, parse_version

    if to_version is not None:
        parse_version(to_version)
        return
    parse_moment(to_timestamp or "")
