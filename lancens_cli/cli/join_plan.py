"""`lancens join-plan`: which partitions of two partitioned namespaces join without a shuffle.

The service module is imported inside the command so that `lancens --help` starts without pyarrow or
Lance.
"""

from __future__ import annotations

from typing import Annotated

import typer

from lancens_cli.cli.options import JoinKeys, LeftRoot, RightRoot, TimestampAsOf, VersionAsOf
from lancens_cli.cli.output import message
from lancens_cli.cli.session import session
from lancens_cli.cli.views import summary_of
from lancens_cli.errors import InvalidInputError


def join_plan(
    left_root: LeftRoot,
    right_root: RightRoot,
    on: JoinKeys = ...,  # type: ignore[assignment]
    all_versions: Annotated[
        bool,
        typer.Option(
            "--all-versions",
            help="Also plan partitions written under older spec versions (each pair of "
            "versions on its own); by default only the current spec of each side is planned.",
        ),
    ] = False,
    version_as_of: VersionAsOf = None,
    timestamp_as_of: TimestampAsOf = None,
) -> None:
    """Plan a storage partitioned join (SPJ) of two partitioned namespaces.

    Reads both __manifest tables and pairs partitions whose join-key fields are compatible:
    the same transform, bucket counts that divide, truncate widths that divide (prefixes for
    strings), the same time parts. Prints one group per set of partitions to join together,
    with each table's location and read_version. Storage options, --profile and the
    environment apply to both roots; --root is not used.

    Time travel: --timestamp-as-of plans both roots as of one moment; --version-as-of N plans
    each root as its own __manifest version N published it.

    Exit codes: 0 with a plan, compatible or not ("compatible": false and the reasons are an
    answer); 2 for a bad --on, an unknown column or a root that is not a partitioned
    namespace; 3 when a root does not exist.
    """
    from lancens_cli.service.join.plan import join_plan as plan_join
    from lancens_cli.service.join.plan import parse_on

    if session().root is not None:
        raise InvalidInputError("join-plan takes LEFT_ROOT and RIGHT_ROOT as arguments, not --root")
    keys = [parse_on(text) for text in on]
    left = session().namespace_at(left_root)
    right = session().namespace_at(right_root).as_of(version_as_of, timestamp_as_of)
    left = left.as_of(version_as_of, timestamp_as_of)
    result = plan_join(left, right, keys, all_versions=all_versions)
    session().emit(result)
    message(summary_of(result))
