"""`lancens add-partition-spec`.

The partition, schema, store and service modules are imported inside the command so that `lancens
--help` starts without pyarrow or Lance.
"""

from __future__ import annotations

from typing import Annotated

import typer

from lancens_cli.cli.options import DryRun
from lancens_cli.cli.output import message
from lancens_cli.cli.session import session
from lancens_cli.cli.views import summary_of
from lancens_cli.errors import InvalidInputError


def add_partition_spec(
    field: Annotated[
        list[str] | None,
        typer.Option(
            "--field",
            "-f",
            metavar="FIELD",
            help="A partition field, in order: col, year(col) as id, bucket(16, col), "
            'truncate(4, col), multi_bucket(8, a, b), "expr(<sql>, col) -> int32 as id".',
        ),
    ] = None,
    spec: Annotated[
        str | None,
        typer.Option("--spec", metavar="FILE", help="The fields as a partition spec JSON file."),
    ] = None,
    schema: Annotated[
        str | None,
        typer.Option(
            "--schema",
            metavar="PATH",
            help="Namespace schema (first spec only): JSON Arrow schema, Parquet file or "
            "Lance table.",
        ),
    ] = None,
    like: Annotated[
        str | None,
        typer.Option("--like", metavar="TABLE", help="Take the namespace schema from a table."),
    ] = None,
    dry_run: DryRun = False,
) -> None:
    """Make the root a partitioned namespace, or add the next partition spec version.

    The first spec stores the namespace schema and partition_spec_v1 in the __manifest
    metadata, creates namespace v1 and adds the partition columns. A later one adds
    partition_spec_v<N+1>, reusing the field id of any field defined the same way.
    """
    from lancens_cli.partition.field_syntax import parse_field
    from lancens_cli.schema_json import read_json_file
    from lancens_cli.service.partitioned.spec_change import add_partition_spec as add
    from lancens_cli.store.schema_sources import load_schema_source

    if (field is None) == (spec is None):
        raise InvalidInputError("give the fields with --field (repeatable) or --spec FILE")
    if schema is not None and like is not None:
        raise InvalidInputError("give the schema with --schema or --like, not both")
    arrow_schema = load_schema_source(schema) if schema is not None else None
    if like is not None:
        from lancens_cli.store.tables import open_table

        ns = session().namespace
        ref = ns.require_table(session().ident(like), ns.snapshot())
        arrow_schema = open_table(ns.storage, ref.location).schema
    change = add(
        session().namespace,
        requests=[parse_field(f) for f in field] if field is not None else None,
        spec_document=read_json_file(spec, "spec file") if spec is not None else None,
        schema=arrow_schema,
        dry_run=dry_run,
    )
    session().emit(change)
    message(summary_of(change))
    for warning in change.warnings:  # not an error: the spec is valid, only likely unmeant
        message(f"warning: {warning}")
