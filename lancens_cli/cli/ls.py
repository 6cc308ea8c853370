"""`lancens ls`: namespaces and tables.

The service module is imported inside the command so that `lancens --help` starts without pyarrow or
Lance.
"""

from __future__ import annotations

from typing import Annotated

import typer

from lancens_cli.cli.output import message
from lancens_cli.cli.session import session
from lancens_cli.words import plural


def ls(
    namespace: Annotated[
        str | None, typer.Argument(help="Namespace to list (default: the root).")
    ] = None,
    recursive: Annotated[
        bool, typer.Option("--recursive", "-R", help="List everything below, not just children.")
    ] = False,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="At most N entries.")] = None,
    page_token: Annotated[
        str | None, typer.Option("--page-token", help="Continue after this entry.")
    ] = None,
    no_state: Annotated[
        bool, typer.Option("--no-state", help="Skip looking inside table directories.")
    ] = False,
) -> None:
    """List namespaces and tables: kind, location, where each is known from, and state."""
    from lancens_cli.service.catalog.listing import list_namespace

    result = list_namespace(
        session().namespace,
        session().ident(namespace),
        recursive=recursive,
        limit=limit,
        page_token=page_token,
        with_state=not no_state,
        delimiter=session().delimiter,
    )
    session().emit(result)
    if result.partitioning and not session().json:
        summary = result.partitioning
        if "unreadable" in summary:
            message(f"partitioned namespace whose partitioning is damaged: {summary['unreadable']}")
            return
        versions = ", ".join(f"v{v}" for v in summary["spec_versions"])
        columns = ", ".join(f["name"] for f in summary["schema"]["fields"])
        message(
            f"partitioned namespace: spec versions {versions} (current v{summary['current_spec']}),"
            f" {plural(summary['partitions'], 'partition table')}; schema: {columns}"
        )
    if result.next_page_token and not session().json:
        message(f"more entries: --page-token {result.next_page_token}")
