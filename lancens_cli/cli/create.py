"""`lancens create namespace|table|index`.

The service, store and schema modules are imported inside the commands so that `lancens --help`
starts without pyarrow or Lance.
"""

from __future__ import annotations

from typing import Annotated

import typer

from lancens_cli.cli.common import add_command
from lancens_cli.cli.dry_run import note_location_pattern
from lancens_cli.cli.options import DryRun, ExistOk, Property, SourceFile, SourceFormat
from lancens_cli.cli.output import message
from lancens_cli.cli.session import session
from lancens_cli.cli.views import summary_of, warnings_of
from lancens_cli.config import parse_key_values
from lancens_cli.errors import InvalidInputError

create_app = typer.Typer(
    name="create", help="Create a namespace, a table or an index.", no_args_is_help=True
)


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


def create_index(
    ident: Annotated[
        str | None,
        typer.Argument(
            metavar="[ID]",
            help="The table to index; none: every partition table of a partitioned root.",
        ),
    ] = None,
    column: Annotated[str, typer.Option("--column", metavar="C", help="The column to index.")] = "",
    index_type: Annotated[
        str,
        typer.Option(
            "--type",
            metavar="T",
            help="btree, bitmap, label_list, inverted (fts), ngram, zonemap, bloomfilter, "
            "ivf_pq, ivf_flat, ivf_sq, ivf_hnsw_sq, ivf_hnsw_pq, ivf_hnsw_flat.",
        ),
    ] = "",
    name: Annotated[
        str | None, typer.Option("--name", metavar="N", help="The index name (default C_idx).")
    ] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="Rebuild (or redefine) an index of that name.")
    ] = False,
    num_partitions: Annotated[
        int | None,
        typer.Option("--num-partitions", min=1, help="Vector indexes: IVF partitions."),
    ] = None,
    num_sub_vectors: Annotated[
        int | None,
        typer.Option("--num-sub-vectors", min=1, help="ivf_pq, ivf_hnsw_pq: PQ sub-vectors."),
    ] = None,
    metric: Annotated[
        str | None,
        typer.Option("--metric", help="Vector indexes: l2 (default), cosine, dot or hamming."),
    ] = None,
    dry_run: DryRun = False,
) -> None:
    """Create an index on a table, or on every partition table of a partitioned root.

    Without ID on a partitioned root, the index is built on every partition table published
    on main and all of them are published in one __manifest commit; the definition is kept in
    the namespace, so a partition table created later gets it at its first write (or at the
    next prune --optimize-indexes). Tables published by a tag or a branch are left alone and
    listed. A column the table or namespace lacks, or a type that does not fit it: exit 2,
    nothing built.

    ivf_pq and ivf_hnsw_pq train on 256 vectors at least: a partition table with fewer is left
    without the index and listed (a warning; exit 0), and prune --optimize-indexes builds it
    once the table has enough; one table named alone with fewer: exit 2, nothing built.
    """
    from lancens_cli.service.indexes.build import create_index as create
    from lancens_cli.service.indexes.definitions import definition

    params = {
        "num_partitions": num_partitions,
        "num_sub_vectors": num_sub_vectors,
        "metric": metric,
    }
    if not index_type:
        raise InvalidInputError("--type: give the index type (btree, fts, ivf_pq, ...)")
    index = definition(column, index_type, name, params)
    result = create(
        session().namespace,
        session().ident(ident),
        index,
        replace=replace,
        dry_run=dry_run,
        delimiter=session().delimiter,
    )
    session().emit(result)
    message(summary_of(result))
    for warning in warnings_of(result):  # left undone, not failed: the exit stays 0
        message(f"warning: {warning}")


add_command(create_app, "namespace", create_namespace)
add_command(create_app, "table", create_table)
add_command(create_app, "index", create_index)
