"""`lancens versions`: what each version keeps and why, from prune's own decision.

The service modules are imported inside the command so that `lancens --help` starts without pyarrow
or Lance.
"""

from __future__ import annotations

from typing import Annotated

import typer

from lancens_cli.cli.options import ForceWindow, Grace, OlderThan, Retain
from lancens_cli.cli.partition_option import Partition, SpecVersion, partition_target
from lancens_cli.cli.session import session
from lancens_cli.models import KIND_TABLE, MANIFEST_TABLE, Identifier


def versions(
    ident: Annotated[
        str | None,
        typer.Argument(
            metavar="[ID]",
            help="A table (every version), a namespace or nothing (a line per table), or "
            "__manifest (the catalog's own versions).",
        ),
    ] = None,
    older_than: OlderThan = "7d",
    retain: Retain = 1,
    grace: Grace = "24h",
    force: ForceWindow = False,
    partition: Partition = None,
    spec_version: SpecVersion = None,
) -> None:
    """Show every version a table keeps and why (latest, tags, branches, what __manifest
    publishes, shallow clones, newest, young), and what `prune` with the same options would
    remove now. Changes nothing."""
    from lancens_cli.service.prune.policy import PrunePolicy
    from lancens_cli.service.versions import namespace_versions, table_versions

    policy = PrunePolicy.from_options(older_than, retain, grace, force)
    ns = session().namespace
    delimiter = session().delimiter
    if ident == MANIFEST_TABLE:
        session().emit(table_versions(ns, Identifier((MANIFEST_TABLE,)), policy, delimiter))
        return
    target = partition_target(ident, partition, spec_version) or session().ident(ident)
    ns.require_root()
    if not target.is_root and ns.kind_of(target, ns.snapshot()) == KIND_TABLE:
        session().emit(table_versions(ns, target, policy, delimiter))
        return
    if not target.is_root:
        ns.require_namespace(target, ns.snapshot())
    session().emit(namespace_versions(ns, target, policy, delimiter))
