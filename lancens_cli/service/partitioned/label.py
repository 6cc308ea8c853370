"""Which partition a partition table is: its spec version and values, as text and as JSON.

Kept apart from `naming.py` (which reads the catalog) so that what only shows a label, a
`prune` answered from its record (service/prune/quiet.py), imports neither pyarrow nor Lance.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from lancens_cli.models import json_value

# a text value that would read as something else in `k=v, k=v` is written as a JSON string
_NEEDS_QUOTES = set(',="\\')


@dataclass(frozen=True)
class PartitionLabel:
    """Which partition a partition table is: its spec version and its values, in spec order."""

    spec_version: int
    values: tuple[tuple[str, Any], ...]  # (partition field id, value as the row holds it)

    def text(self) -> str:
        """`country=US, event_year=2024`; NULL as `null`, awkward strings quoted."""
        return ", ".join(f"{name}={_shown(value)}" for name, value in self.values)

    def json_fields(self) -> dict[str, Any]:
        """The keys a JSON object about a partition table carries."""
        return {
            "partition": {name: json_value(value) for name, value in self.values},
            "spec_version": self.spec_version,
        }


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        plain = value and value == value.strip() and value != "null"
        if plain and not (_NEEDS_QUOTES & set(value)) and value.isprintable():
            return value
        return json.dumps(value, ensure_ascii=False)
    return str(json_value(value))
