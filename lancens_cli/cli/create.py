"""`lancens create namespace|table`.

The service, store and schema modules are imported inside the commands so that `lancens --help`
starts without pyarrow or Lance.
"""

from __future__ import annotations

from typing import Annotated

import typer

from lancens_cli.cli.common import add_command
from lancens_cli.cli.dry_run import note_location_pattern
from lancens_cli.cli.options import DryRun, ExistOk, Property, SourceFile, SourceFormat
from lancens_cli.cli.session import session
from lancens_cli.config import parse_key_values
from lancens_cli.errors import InvalidInputError

create_app = typer.Typer(help="Create a namespace or a table.", no_args_is_help=True)


def _properties(pairs: list[str] | None) -> dict[str, str]:
    properties = parse_key_values(pairs, "property")
    for key, value in properties.items():
        if any(ord(c) < 32 for c in key + value):
            raise InvalidInputError(f"property {key!r} contains a control character")
    return properties


def create_namespace(
    ident: Annotated[str, typer.Argument(metavar="ID", help="The namespace, e.g. sales.eu")],
    prop: Property = None,
    exist_ok: ExistOk = False,
    dry_run: DryRun = False,
) -> None:
    """Create a namespace (needs the manifest); its parent must exist."""
    from lancens_cli.service.catalog.create import create_namespace as create

    session().emit(
        create(
            session().namespace,
            session().ident(ident),
            properties=_properties(prop),
            exist_ok=exist_ok,
            dry_run=dry_run,
        )
    )


def create_table(
    ident: Annotated[str, typer.Argument(metavar="ID", help="The table, e.g. sales.eu.orders")],
    schema: Annotated[
        str | None, typer.Option("--schema", metavar="FILE", help="JSON Arrow schema: empty table.")
    ] = None,
    source: SourceFile = None,
    fmt: SourceFormat = None,
    declare: Annotated[
        bool, typer.Option("--declare", help="Reserve the name and location, write no data.")
    ] = False,
    prop: Property = None,
    exist_ok: ExistOk = False,
    dry_run: DryRun = False,
) -> None:
    """Create a table from a file, from a schema, or declared only."""
    from lancens_cli.service.catalog.create import create_table as create

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
        session().namespace,
        session().ident(ident),
        data=data,
        schema=arrow_schema,
        declare=declare,
        properties=properties,
        exist_ok=exist_ok,
        dry_run=dry_run,
    )
    session().emit(result)
    note_location_pattern(result, session().json)


add_command(create_app, "namespace", create_namespace)
add_command(create_app, "table", create_table)
