"""`--partition K=V` (repeatable) and `--spec-version N`: a partition table named by its values,
for the commands that take a table (`describe`, `versions`, `prune`).

The service module is imported inside `partition_target`, so that `--help` starts without
pyarrow or Lance.
"""

from __future__ import annotations

from typing import Annotated

import typer

from lancens_cli.cli.session import session
from lancens_cli.errors import InvalidInputError
from lancens_cli.models import Identifier

Partition = Annotated[
    list[str] | None,
    typer.Option(
        "--partition",
        metavar="K=V",
        help="A partition table by its values (repeatable), under the current spec or "
        "--spec-version; e.g. --partition country=US --partition event_year=2024.",
    ),
]
SpecVersion = Annotated[
    int | None,
    typer.Option(
        "--spec-version", metavar="N", min=1, help="With --partition: the spec version it is of."
    ),
]


def partition_target(
    given: str | None, partition: list[str] | None, spec_version: int | None
) -> Identifier | None:
    """The partition table `--partition` names (exit 3 for none or several, naming the
    candidates), or None when it was not given. An ID given as well is refused (exit 2)."""
    if spec_version is not None and not partition:
        raise InvalidInputError("--spec-version goes with --partition")
    if not partition:
        return None
    if given is not None:
        raise InvalidInputError("give a table ID or --partition, not both")
    from lancens_cli.service.partitioned.naming import find_partition

    ns = session().namespace
    ns.require_root()
    return find_partition(ns.snapshot(), partition, spec_version)
