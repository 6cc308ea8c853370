"""`describe` on a terminal: sections (table, storage, versions, schema, indexes), sizes in
binary units, times as dates, nested types as a tree.

Only the terminal view: piped and --json output render the same data as before (output.py).
"""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.tree import Tree

from lancens_cli.models import NamespaceDescription, RootDescription, TableDescription
from lancens_cli.partition.schema_evolution import HISTORY_KEY
from lancens_cli.schema_json import field_from_json
from lancens_cli.store.manifest import manifest_flag_names
from lancens_cli.words import human_bytes, human_time, plural, short


def render(console: Any, result: RootDescription | NamespaceDescription | TableDescription):
    """Print the sections of a description."""
    data = result.to_json()
    if isinstance(result, TableDescription):
        sections = _table_sections(data)
    elif isinstance(result, RootDescription):
        sections = _root_sections(data)
    else:
        sections = [("namespace", _pairs(_namespace_pairs(data)))]

    for title, body in sections:
        console.print(Panel(body, title=f"[bold]{title}[/]", title_align="left", expand=True))


# --- the sections -----------------------------------------------------------------------------


def _table_sections(data: dict[str, Any]) -> list[tuple[str, Any]]:
    details = data.get("details")
    head = [
        ("id", data["id"]),
        ("location", data["location"]),
        ("uri", data["uri"]),
        ("source", data["source"]),
        ("state", data["state"]),
        *_partition(data),
        *_properties(data.get("properties")),
    ]
    if details and "read_version" in details:
        head.append(("published version", details["read_version"]))
    sections: list[tuple[str, Any]] = [("table", _pairs(head))]
    if not details:
        return sections
    deleted = details["deletion_files"]
    storage = [
        ("rows", f"{details['rows']:,}"),
        ("fragments", details["fragments"]),
        ("data files", details["data_files"]),
        ("deletion files", f"{len(deleted)} ({plural(details['deleted_rows'], 'row')} deleted)"),
        ("on storage", human_bytes(details["bytes_on_storage"])),
        ("data storage version", details["data_storage_version"]),
        ("manifest naming", details["manifest_naming_scheme"]),
        ("reader features", _flag_text(details["reader_feature_flags"])),
        ("writer features", _flag_text(details["writer_feature_flags"])),
        *[(f"base path {b['id']}", _base_path(b)) for b in details["base_paths"]],
        *[(f"config {k}", v) for k, v in sorted(details["config"].items())],
        *[(f"metadata {k}", v) for k, v in sorted(details["metadata"].items())],
    ]
    sections.append(("storage", _pairs(storage)))
    tags = ", ".join(f"{name} -> v{version}" for name, version in details["tags"].items())
    versions = [
        ("version", details["version"]),
        ("latest version", details["latest_version"]),
        ("tags", tags or "none"),
        ("branches", ", ".join(details["branches"]) or "none"),
    ]
    body: Any = _pairs(versions)
    if data.get("versions"):
        body = Group(body, "", _versions_table(data["versions"]))
    sections.append(("versions", body))
    sections.append(("schema", schema_tree(details["schema"])))
    sections.append(("indexes", _indexes(details["indices"])))
    return sections


def _root_sections(data: dict[str, Any]) -> list[tuple[str, Any]]:
    head = [
        ("root", data["root"]),
        ("mode", data["mode"]),
        ("namespaces", data["namespaces"]),
        ("tables", data["tables"]),
    ]
    sections: list[tuple[str, Any]] = [
        ("root", _pairs(head)),
        ("config", _pairs(list(data["config"].items()))),
    ]
    manifest = data.get("manifest")
    if manifest is None:
        sections.append(("manifest", "no __manifest table yet"))
        return sections

    partitioning = manifest.get("partitioning")
    # The partitioning section below shows the specs and the schema these keys hold as JSON.
    shown = set()
    unreadable = (partitioning or {}).get("unreadable")
    if unreadable:
        partitioning = None
    elif partitioning:
        # shown in the partitioning section, as users read them
        shown = {"schema", HISTORY_KEY, "lancens.indexes"}
        shown |= {f"partition_spec_v{v}" for v in partitioning["spec_versions"]}
    rows = [
        ("version", manifest["version"]),
        ("rows", manifest["rows"]),
        ("data storage version", manifest["data_storage_version"]),
        ("reader features", _names(manifest_flag_names(manifest["reader_feature_flags"]))),
        ("writer features", _names(manifest_flag_names(manifest["writer_feature_flags"]))),
        ("extra columns", ", ".join(manifest["extra_columns"]) or "none"),
        *[
            (f"metadata {k}", short(str(v)))
            for k, v in manifest["metadata"].items()
            if k not in shown
        ],
    ]
    sections.append(("manifest", _pairs(rows)))
    sections.append(("indexes", _indexes(manifest["indexes"])))
    if unreadable:
        sections.append(("partitioning", f"damaged: {unreadable} (see `lancens check`)"))
    if partitioning:
        current = partitioning["current_spec"]
        by_spec = partitioning.get("partitions_by_spec", {})
        specs = [
            (
                f"spec v{s['id']}" + (" (current)" if s["id"] == current else ""),
                ", ".join(partitioning["spec_fields"][str(s["id"])])
                + f"; {plural(by_spec.get(str(s['id']), 0), 'partition table')}",
            )
            for s in partitioning["specs"]
        ]
        sizes = []
        if partitioning.get("rows") is not None:
            sizes.append(("rows", f"{partitioning['rows']:,}"))
        if partitioning.get("bytes") is not None:
            sizes.append(("data", human_bytes(partitioning["bytes"])))
        history = partitioning.get("earlier_schemas")
        sections.append(
            (
                "partitioning",
                _pairs(
                    [
                        ("partition tables", partitioning["partitions"]),
                        *sizes,
                        *specs,
                        *([("earlier schemas", history)] if history else []),
                        *_index_definitions(partitioning.get("indexes", [])),
                    ]
                ),
            )
        )
        fields = partitioning["schema"].get("fields", [])
        sections.append(("schema", schema_tree([_json_field(f) for f in fields])))
    return sections


def _partition(data: dict[str, Any]) -> list[tuple[str, Any]]:
    """A partition table: which partition it is (`data["partition_text"]`, as `ls` shows it)."""
    if data.get("partition") is None:
        return []
    return [("partition", f"{data['partition_text']} (spec v{data['spec_version']})")]


def _namespace_pairs(data: dict[str, Any]) -> list[tuple[str, Any]]:
    return [
        ("id", data["id"]),
        ("namespaces", data["namespaces"]),
        ("tables", data["tables"]),
        *([("damaged", data["damaged"])] if data.get("damaged") else []),
        *_properties(data.get("properties")),
    ]


# --- pieces ------------------------------------------------------------------------------------


def _pairs(pairs: list[tuple[str, Any]]):
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for key, value in pairs:
        grid.add_row(key, "-" if value is None else str(value))
    return grid


def _properties(properties: dict[str, Any] | None) -> list[tuple[str, Any]]:
    return [(f"property {k}", v) for k, v in sorted((properties or {}).items())]


def _names(names: list[str]) -> str:
    return ", ".join(names) or "none"


def _flag_text(flags: dict[str, Any] | None) -> str:
    return "unknown" if flags is None else _names(flags["names"])


def _base_path(base: dict[str, Any]) -> str:
    name = f" ({base['name']})" if base.get("name") else ""
    root = ", dataset root" if base.get("is_dataset_root") else ""
    return f"{base['path']}{name}{root}"


def _versions_table(versions: list[dict[str, Any]]):
    table = Table(title_justify="left", expand=False)
    for column in ("version", "date", "rows", "fragments", "deleted rows"):
        whole = column in ("version", "date")  # copied into --to-version / --to-timestamp
        justify = "left" if column == "date" else "right"
        table.add_column(column, justify=justify, no_wrap=whole, overflow="fold")
    for v in versions:
        table.add_row(
            str(v["version"]),
            human_time(v.get("timestamp")),
            _count(v.get("rows")),
            _count(v.get("fragments")),
            _count(v.get("deleted_rows")),
        )
    return table


def _count(value: Any) -> str:
    return "-" if value is None else f"{value:,}"


def _indexes(indexes: list[dict[str, Any]]):
    if not indexes:
        return "none"

    table = Table(expand=False)
    for column in ("name", "type", "fields", "rows indexed", "unindexed rows"):
        table.add_column(column)
    for index in indexes:
        table.add_row(
            str(index.get("name")),
            str(index.get("type")),
            ", ".join(index.get("fields") or []),
            _count(index.get("rows")),
            _count(index.get("unindexed_rows")),
        )
    return table


def _index_definitions(definitions: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """A partitioned root's index definitions, and how many partition tables fall short."""
    pairs = []
    for d in definitions:
        if "error" in d:
            pairs.append(("indexes", f"damaged: {d['error']}"))
            continue
        short = f"{d['lacking']} of {d['partition_tables']} partition tables lack it"
        if d.get("too_few_rows"):
            short += f" ({d['too_few_rows']} with too few vectors to train it yet)"
        short += f", {d['missing_rows']} miss rows ({d['unindexed_rows']:,} unindexed)"
        if d["unreadable"]:
            short += f", {d['unreadable']} unreadable"
        pairs.append((f"index {d['name']}", f"{d['type'].lower()} on {d['column']}; {short}"))
    return pairs


# --- the schema tree -------------------------------------------------------------------------


def schema_tree(fields: list[dict[str, Any]]):
    """Columns as a tree: a struct's, list's or map's children indented under it."""
    tree = Tree(plural(len(fields), "column"), guide_style="dim")
    for field in fields:
        _add_field(tree, field["name"], field["type"], field.get("nullable", True))
    return tree


def _add_field(parent: Any, name: str, type_text: str, nullable: bool) -> None:
    children = type_children(type_text)
    shown = type_text if children is None else type_text.split("<", 1)[0]
    null = "" if nullable else " [dim]not null[/]"

    node = parent.add(f"[bold]{escape(name)}[/]  {escape(shown)}{null}")
    for child_name, child_type, child_nullable in children or []:
        _add_field(node, child_name, child_type, child_nullable)


_NESTED = ("struct", "list", "large_list", "list_view", "large_list_view", "fixed_size_list")


def type_children(type_text: str) -> list[tuple[str, str, bool]] | None:
    """The children of a nested Arrow type as Arrow prints it, or None for a leaf.

    `struct<a: int64, b: struct<c: string not null>>` -> [("a", "int64", True), ("b", ...)];
    `list<element: string>` -> [("element", "string", True)]; `map<string, int64>` ->
    [("key", "string", False), ("value", "int64", True)].
    """
    head, sep, rest = type_text.partition("<")
    if not sep or ">" not in rest:
        return None
    inner = rest[: rest.rindex(">")]
    parts = _split_top(inner)
    if head == "map" and len(parts) == 2:
        return [("key", parts[0], False), ("value", parts[1], True)]
    if head not in _NESTED:
        return None
    children = []
    for part in parts:
        name, colon, child = part.partition(": ")
        if not colon:
            return None  # not the shape we know: show the type as one line
        nullable = not child.endswith(" not null")
        children.append((name, child.removesuffix(" not null"), nullable))
    return children


def _split_top(text: str) -> list[str]:
    """Split `a: x, b: y<p, q>` at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char in "<([":
            depth += 1
        elif char in ">)]":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def _json_field(field: dict[str, Any]) -> dict[str, Any]:
    """A field of the partitioned namespace's JSON schema as `schema_fields` gives it."""
    arrow = field_from_json(field)
    return {"name": arrow.name, "type": str(arrow.type), "nullable": arrow.nullable}
