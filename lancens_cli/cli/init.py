"""`lancens init`: make the root directory of a new namespace.

The service module is imported inside the command so that `lancens --help` starts without pyarrow or
Lance.
"""

from __future__ import annotations

from lancens_cli.cli.session import session


def init() -> None:
    """Create the root directory (local roots); on object stores check that the bucket exists."""
    from lancens_cli.service.namespace import init_root

    session().emit(init_root(session().namespace))
