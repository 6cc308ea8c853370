"""The rail before a table directory moves or goes: the tables that read from it.

`rename` (when it moves a directory) and `drop` (when it deletes data) ask which other tables of
the namespace reach files below the directories they touch through base paths (shallow clones,
spec 002), and refuse with exit 5, naming them, unless `--force`.
"""

from __future__ import annotations

from collections.abc import Iterable

from lancens_cli.errors import RefusedError
from lancens_cli.models import KIND_TABLE, ChangeSet, Identifier
from lancens_cli.service.namespace import Namespace
from lancens_cli.store.base_path_readers import Dependent, find_dependents
from lancens_cli.store.manifest import ManifestSnapshot
from lancens_cli.store.row_verdicts import row_locations
from lancens_cli.words import plural


def namespace_tables(ns: Namespace, snapshot: ManifestSnapshot, delimiter: str) -> dict[str, str]:
    """location -> display name of every table the namespace knows (rows and directories)."""
    verdicts = row_locations(ns.storage, snapshot)
    tables: dict[str, str] = {}
    for object_id, object_type, location in snapshot.columns(
        "object_id", "object_type", "location"
    ):  # tuples a batch at a time: no dict per row kept for a million rows
        if object_type != KIND_TABLE or not location:
            continue
        if verdicts.problem(object_id) is not None:
            continue  # never opened (store/containment.py)
        tables[location] = Identifier.from_object_id(object_id).display(delimiter)
    if ns.config.dir_listing_enabled:
        for name, location in ns.visible_dir_tables(snapshot).items():
            tables.setdefault(location, name)
    return tables


def outside_dependents(
    ns: Namespace, snapshot: ManifestSnapshot, locations: Iterable[str], delimiter: str
) -> list[Dependent]:
    """Tables outside `locations` whose base paths point into one of them."""
    targets = sorted(set(locations))
    if not targets:
        return []
    taken = set(targets)
    tables = namespace_tables(ns, snapshot, delimiter)
    others = {location: name for location, name in tables.items() if location not in taken}
    found = find_dependents(ns.storage, others, targets)  # a target's own reads go with it
    return [d for target in targets for d in found[target]]


def attach(plan: ChangeSet, dependents: list[Dependent], moved: str | None = None) -> None:
    """Show the dependents in the output: JSON `dependents`, and each change's detail.

    A change names the directory it drops; a move names its new one, so `moved` says which
    directory the (single) change of a rename takes away.
    """
    plan.dependents = [
        {"table": d.table, "location": d.location, "needs": d.needs, "via": d.via}
        for d in dependents
    ]
    for change in plan.changes:
        mine = [d.describe() for d in dependents if d.needs == (moved or change.location)]
        if mine:
            note = "read by " + "; ".join(mine)
            change.detail = f"{change.detail}; {note}" if change.detail else note


def refuse(what: str, dependents: list[dict], advice: str) -> None:
    """Exit 5, naming every dependent (as `attach` shows them) and how to go on."""
    names = "; ".join(f"{d['table']} ({', '.join(d['via'])})" for d in dependents)
    raise RefusedError(
        f"{what} would break {plural(len(dependents), 'table')} that read its files through "
        "base paths: "
        f"{names}; {advice}, or use --force to do it anyway"
    )
