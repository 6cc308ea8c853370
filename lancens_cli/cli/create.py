"""`lancens create namespace|table`."""

from __future__ import annotations

from typing import Annotated

import typer

from lancens_cli.cli.app import app
from lancens_cli.cli.common import SESSION, command

create_app = typer.Typer(help="Create a namespace or a table.", no_args_is_help=True)
app.add_typer(create_app, name="create")

PropertyOpt = Annotated[
    list[str] | None,
    typer.Option("--property", metavar="KEY=VALUE", help="A property to store. Repeatable."),
]
ExistOkOpt = Annotated[bool, typer.Option("--exist-ok", help="Succeed if it already exists.")]
DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", help="Show what would change; change nothing.")
]


def _properties(pairs: list[str] | None) -> dict[str, str]:
    from lancens_cli.config import parse_key_values
    from lancens_cli.errors import InvalidInputError

    properties = parse_key_values(pairs, "property")
    for key, value in properties.items():
        if any(ord(c) < 32 for c in key + value):
            raise InvalidInputError(f"property {key!r} contains a control character")
    return properties


@command(create_app, "namespace")
def create_namespace(
    ident: Annotated[str, typer.Argument(metavar="ID", help="The namespace, e.g. sales.eu")],
    prop: PropertyOpt = None,
    exist_ok: ExistOkOpt = False,
    dry_run: DryRunOpt = False,
) -> None:
    """Create a namespace (needs the manifest); its parent must exist."""
    from lancens_cli.service.create import create_namespace as create

    SESSION.emit(
        create(
            SESSION.namespace,
            SESSION.ident(ident),
            properties=_properties(prop),
            exist_ok=exist_ok,
            dry_run=dry_run,
        )
    )


@command(create_app, "table")
def create_table(
    ident: Annotated[str, typer.Argument(metavar="ID", help="The table, e.g. sales.eu.orders")],
    schema: Annotated[
        str | None, typer.Option("--schema", metavar="FILE", help="JSON Arrow schema: empty table.")
    ] = None,
    source: Annotated[
        str | None,
        typer.Option(
            "--from", metavar="FILE", help="Parquet, CSV, JSON lines or a Lance dataset to load."
        ),
    ] = None,
    fmt: Annotated[
        str | None,
        typer.Option("--format", help="Format of --from: parquet, csv, jsonl, lance."),
    ] = None,
    declare: Annotated[
        bool, typer.Option("--declare", help="Reserve the name and location, write no data.")
    ] = False,
    prop: PropertyOpt = None,
    exist_ok: ExistOkOpt = False,
    dry_run: DryRunOpt = False,
) -> None:
    """Create a table from a file, from a schema, or declared only."""
    from lancens_cli.cli.dry_run import note_location_pattern
    from lancens_cli.errors import InvalidInputError
    from lancens_cli.service.create import create_table as create

    if sum(x is not None for x in (schema, source)) + int(declare) != 1:
        raise InvalidInputError("give exactly one of --schema, --from or --declare")
    properties = _properties(prop)
    arrow_schema = data = None
    if schema is not None:
        from lancens_cli.schema_json import load_schema_file

        arrow_schema = load_schema_file(schema)
    if source is not None:
        from lancens_cli.store.sources import open_source

        data = open_source(source, fmt)
    result = create(
        SESSION.namespace,
        SESSION.ident(ident),
        data=data,
        schema=arrow_schema,
        declare=declare,
        properties=properties,
        exist_ok=exist_ok,
        dry_run=dry_run,
    )
    SESSION.emit(result)
    note_location_pattern(result, SESSION.json)
