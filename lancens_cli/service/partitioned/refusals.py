"""Names a partitioned root keeps for itself (spec 004): `v<N>` and everything below it.

`v<N>` is the namespace of partition spec version N and is made by `add-partition-spec`; its
partition namespaces and `dataset` tables are made by partitioned writes, which give them their
partition values and publish them. Anything a user created there would pass for a partition
(or block the next spec version), so `create` refuses it and changes nothing.
"""

from __future__ import annotations

from lancens_cli.errors import RefusedError
from lancens_cli.models import Identifier
from lancens_cli.partition.spec import SPEC_NAMESPACE
from lancens_cli.service.partitioned.layout import layout_of
from lancens_cli.store.manifest import ManifestSnapshot


def refuse_spec_names(snapshot: ManifestSnapshot, ident: Identifier) -> None:
    """Refuse a user's namespace or table named `v<N>` or below one, on a partitioned root.

    The existing spec namespace itself is let through: creating it again is an "already
    exists" (exit 4), as for any namespace.
    """
    if ident.is_root or not snapshot.exists or not SPEC_NAMESPACE.match(ident.parts[0]):
        return
    layout = layout_of(snapshot)
    if layout is None:
        return
    first = ident.parts[0]
    own = {spec.namespace for spec in layout.specs}
    if first in own and len(ident.parts) == 1:
        return
    if first in own:
        raise RefusedError(
            f"{ident.display()} is inside {first}, the namespace of partition spec "
            f"{first}: its partitions are made by `lancens write` / `lancens ingest`; nothing "
            "was changed"
        )
    raise RefusedError(
        f"{Identifier((first,)).display()} is reserved on a partitioned root for partition "
        f"spec version {first[1:]} (`lancens add-partition-spec` creates it); nothing was changed"
    )


def refuse_moving_spec_objects(snapshot: ManifestSnapshot, ident: Identifier) -> None:
    """Refuse renaming a spec namespace or anything in it: `__manifest` locates partitions by
    their place under `v<N>` (spec 004), so a moved partition table is no partition any more."""
    if ident.is_root or not snapshot.exists:
        return
    layout = layout_of(snapshot)
    if layout is None or ident.parts[0] not in {spec.namespace for spec in layout.specs}:
        return
    raise RefusedError(
        f"{ident.display()} belongs to partition spec {ident.parts[0]}: its partitions stay where "
        "partitioned writes put them; nothing was changed"
    )
