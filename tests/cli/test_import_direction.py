"""Imports go one way, as docs/ARCHITECTURE.md "Layers" says: down the layers (cli > pipeline >
service > store, partition > the top modules), down the order of `service/`'s packages that the
section draws, and never both ways between two modules of one package. Every `import` counts:
at the top, inside a function, under `TYPE_CHECKING`."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "lancens_cli"
ARCHITECTURE = REPO / "docs" / "ARCHITECTURE.md"

# The layers, lowest first; a module imports its own layer and the ones below. `partition/` and
# `store/` are siblings: neither imports the other, but for the one sideways import below.
LAYER_LEVELS = {"top": 0, "partition": 1, "store": 1, "service": 2, "pipeline": 3, "cli": 4}
SIDEWAYS = {("lancens_cli.store.partition_tables", "lancens_cli.partition.schema")}
ENTRY = "lancens_cli.__main__"  # `python -m lancens_cli`: the command line's, like cli/app.py


def module_names(root: Path) -> dict[str, Path]:
    """Every module under `root` (a package directory) by its dotted name."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports_of(path: Path, modules: dict[str, Path]) -> list[tuple[str, int]]:
    """The modules of ours `path` imports, with the line: `from a.b import c` is `a.b.c` when
    that is a module, else `a.b`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                inner = f"{node.module}.{alias.name}"
                found.append((inner if inner in modules else node.module, node.lineno))
    return [(name, line) for name, line in found if name in modules]


def layer_of(module: str) -> str:
    parts = module.split(".")
    if module == ENTRY:
        return "cli"
    return parts[1] if len(parts) > 2 or parts[-1] in LAYER_LEVELS else "top"


def service_order(doc: str) -> list[list[str]]:
    """The order of `service/` the "Layers" section draws, lowest line first: each line's
    entries, a package (`prune/`) or a module (`check.py`, `catalog/manifest_rows.py`)."""
    section = doc.split("\n## Layers", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```\n(.*?)```", section, re.DOTALL)
    drawn = [b for b in blocks if "partitioned/" in b]
    assert len(drawn) == 1, "the Layers section draws the order of service/ in one ``` block"
    lines = [line.split("#", 1)[0] for line in drawn[0].splitlines()]
    entry = re.compile(r"(?<!\S)([a-z_]+/(?:[a-z_]+\.py)?|[a-z_]+\.py)(?!\S)")
    return [found for line in lines if (found := entry.findall(line))]


def service_place(module: str, order: list[list[str]]) -> tuple[str, int] | None:
    """A module of `service/`: its package (a sub-package, or a module at the top of
    `service/`) and the line of the most specific entry naming it; None for `service` itself."""
    rest = module.split(".")[2:]
    if not rest:
        return None
    names = [f"{rest[0]}.py"] if len(rest) == 1 else []
    names += [f"{rest[0]}/{rest[1]}.py"] if len(rest) > 1 else []
    names += [f"{rest[0]}/"]
    for name in names:
        for level, line in enumerate(order):
            if name in line:
                return rest[0], level
    raise AssertionError(f"{module} is in no line of the order of service/ (ARCHITECTURE.md)")


def import_violations(root: Path, order: list[list[str]]) -> list[str]:
    """Every import against the direction, named `importer:line -> imported (why)`."""
    modules = module_names(root)
    graph = {m: imports_of(p, modules) for m, p in modules.items()}
    found = []
    for module, imported in graph.items():
        for target, line in imported:
            why = _against(module, target, order)
            if why:
                found.append(f"{module}:{line} -> {target} ({why})")
    for module, imported in graph.items():
        package = module.rsplit(".", 1)[0]
        for target, line in dict(reversed(imported)).items():  # each module once, its first line
            both = any(t == module for t, _ in graph[target])
            if both and target.rsplit(".", 1)[0] == package and module < target:
                found.append(f"{module}:{line} <-> {target} (two modules import each other)")
    return sorted(set(found))


def _against(module: str, target: str, order: list[list[str]]) -> str | None:
    """Why `module` may not import `target`, or None."""
    mine, theirs = layer_of(module), layer_of(target)
    if (module, target) in SIDEWAYS:
        return None
    if LAYER_LEVELS[mine] < LAYER_LEVELS[theirs]:
        return f"{mine}/ imports up, from {theirs}/"
    if mine != theirs and LAYER_LEVELS[mine] == LAYER_LEVELS[theirs]:
        return f"{mine}/ imports its sibling {theirs}/"
    if mine != "service" or theirs != "service":
        return None
    here, there = service_place(module, order), service_place(target, order)
    if here is None or there is None:
        return None
    if here[1] < there[1]:
        return f"service/{here[0]} imports {there[0]}, above it in the order"
    if here[1] == there[1] and here[0] != there[0]:
        return f"service/{here[0]} imports {there[0]}, beside it in the order"
    return None


def test_every_import_goes_one_way():
    order = service_order(ARCHITECTURE.read_text(encoding="utf-8"))
    assert import_violations(PACKAGE, order) == []


def test_the_order_names_every_package_of_service_once():
    order = service_order(ARCHITECTURE.read_text(encoding="utf-8"))
    entries = [entry for line in order for entry in line]
    assert len(entries) == len(set(entries)), entries
    service = PACKAGE / "service"
    present = {p.name + "/" for p in service.iterdir() if (p / "__init__.py").exists()}
    present |= {p.name for p in service.glob("*.py") if p.name != "__init__.py"}
    assert present <= set(entries), sorted(present - set(entries))
    assert all((service / entry).exists() for entry in entries), entries


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / "lancens_cli" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "lancens_cli"


def test_the_checker_sees_each_kind_of_wrong_import(tmp_path):
    package = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "models.py": "",
            "store/__init__.py": "",
            "store/a.py": "from lancens_cli.partition import spec\n",
            "partition/__init__.py": "",
            "partition/spec.py": "",
            "service/__init__.py": "",
            "service/low/__init__.py": "",
            "service/low/rows.py": "",
            "service/low/x.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    from lancens_cli.service.high import y\n"
            ),
            "service/high/__init__.py": "",
            "service/high/y.py": "from lancens_cli.service.low import rows, x\n",
            "service/high/z.py": "def f():\n    from lancens_cli.cli import app\n",
            "service/side/__init__.py": "",
            "service/side/w.py": "import lancens_cli.service.high.y\n",
            "service/side/u.py": "from lancens_cli.service.side import t\n",
            "service/side/t.py": "from lancens_cli.service.side.u import thing\n",
            "cli/__init__.py": "",
            "cli/app.py": "from lancens_cli.service.high import z\nimport lancens_cli.models\n",
        },
    )
    order = [["low/rows.py"], ["low/"], ["high/", "side/"]]
    assert import_violations(package, order) == [
        "lancens_cli.service.high.z:2 -> lancens_cli.cli.app (service/ imports up, from cli/)",
        "lancens_cli.service.low.x:3 -> lancens_cli.service.high.y "
        "(service/low imports high, above it in the order)",
        "lancens_cli.service.side.t:1 <-> lancens_cli.service.side.u "
        "(two modules import each other)",
        "lancens_cli.service.side.w:1 -> lancens_cli.service.high.y "
        "(service/side imports high, beside it in the order)",
        "lancens_cli.store.a:1 -> lancens_cli.partition.spec (store/ imports its sibling "
        "partition/)",
    ]
