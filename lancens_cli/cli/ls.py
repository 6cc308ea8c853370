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
    all_rows: Annotated[
        bool,
        typer.Option(
            "--all",
            help="On a partitioned root, also the namespaces between a spec version and its "
            "partition tables.",
        ),
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
        all_rows=all_rows,
    )
    session().emit(result)
    if result.partitioning and not session().json:
        summary = result.partitioning
        if "unreadable" in summary:
            message(f"partitioned namespace whose partitioning is damaged: {summary['unreadable']}")
            return
        current = summary["current_spec"]
        spec = ", ".join(summary["spec_fields"][str(current)])
        columns = ", ".join(f["name"] for f in summary["schema"]["fields"])
        message(
            f"partitioned namespace: {plural(len(summary['spec_versions']), 'spec version')}, "
            f"current v{current} ({spec}), {plural(summary['partitions'], 'partition table')}; "
            f"schema: {columns}"
        )
    if not result.entries and session().ident(namespace).is_root:
        from lancens_cli.service.catalog.listing import nested_roots_message, roots_below

        nested = roots_below(session().namespace)
        if nested:
            message(nested_roots_message(session().namespace, nested))
    if result.next_page_token and not session().json:
        message(f"more entries: --page-token {result.next_page_token}")
