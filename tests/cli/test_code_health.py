"""The code's shape, checked as CI checks anything else: lint, dead code, private names used
across modules, the service layer grouped by capability, and imports inside functions only where
the module's docstring says why."""

from __future__ import annotations

import ast
import collections
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "lancens_cli"


def _tool(name: str) -> list[str]:
    if shutil.which(name) is None and not (Path(sys.executable).parent / name).exists():
        pytest.fail(f"{name} is part of the test extra: pip install -e '.[test]'")
    return [sys.executable, "-m", name]


def test_ruff_finds_nothing():
    run = subprocess.run(
        [*_tool("ruff"), "check", "lancens_cli", "tests", "bench", "scripts", "tools"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr


VULTURE_ARGS = [
    "lancens_cli",
    "tools/vulture_whitelist.py",
    "--min-confidence",
    "60",
    "--ignore-decorators",
    "@view,@summary,@warning",  # cli/views/ registers views by decorator
]


def test_vulture_finds_no_unused_code():
    run = subprocess.run(
        [*_tool("vulture"), *VULTURE_ARGS],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0 and not run.stdout, run.stdout + run.stderr


def private_names_used_across_modules(root: Path) -> list[str]:
    """`from lancens_cli.x import _name` and `module._name` where `module` is one of ours."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        ours: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lancens_cli"):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{path.relative_to(root)}:{node.lineno} {alias.name}")
                    ours.add(alias.asname or alias.name)
            elif isinstance(node, ast.Import):
                ours.update(a.asname or a.name for a in node.names if a.name.startswith("lancens"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name)
                and node.value.id in ours
            ):
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.value.id}.{node.attr}")
    return found


def test_no_private_name_is_used_outside_its_module():
    assert private_names_used_across_modules(PACKAGE) == []


def test_the_checker_sees_a_private_import(tmp_path):
    (tmp_path / "a.py").write_text("from lancens_cli.store.storage import _secret\n")
    (tmp_path / "b.py").write_text("from lancens_cli.store import storage\nstorage._path('x')\n")
    assert private_names_used_across_modules(tmp_path) == ["a.py:1 _secret", "b.py:2 storage._path"]


def test_service_modules_are_grouped_by_capability():
    for folder in [PACKAGE, *(p for p in PACKAGE.rglob("*") if p.is_dir())]:
        if folder.name == "__pycache__":
            continue
        modules = [p.stem for p in folder.glob("*.py") if p.stem != "__init__"]
        prefixes = collections.Counter(m.split("_")[0] for m in modules)
        families = {prefix: n for prefix, n in prefixes.items() if n >= 3}
        assert not families, f"{folder.relative_to(REPO)}: modules named by one prefix {families}"
    loose = [p for p in (PACKAGE / "service").glob("*.py") if p.stem != "__init__"]
    assert len(loose) <= 12, sorted(p.name for p in loose)
    for package in (PACKAGE / "service").iterdir():
        if (package / "__init__.py").exists():
            doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text()))
            assert doc and "Entry point" in doc, f"{package.name}/__init__.py names no entry point"


def function_level_imports(root: Path) -> dict[Path, list[ast.Import | ast.ImportFrom]]:
    """Each module's `import` statements inside a function (at any depth), by path."""
    found: dict[Path, list[ast.Import | ast.ImportFrom]] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        seen: set[int] = set()
        for func in ast.walk(tree):
            if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(func):
                    if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in seen:
                        seen.add(id(node))
                        found.setdefault(path, []).append(node)
    return found


def unexplained_function_imports(root: Path) -> list[str]:
    """Modules with an import inside a function whose docstring does not say why."""
    unexplained = []
    for path in function_level_imports(root):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        doc = " ".join(doc.split())  # a sentence may wrap anywhere
        if "imported inside" not in doc and "imported where" not in doc:
            unexplained.append(str(path.relative_to(root)))
    return unexplained


def late_stdlib_imports(root: Path) -> list[str]:
    """Standard-library imports inside a function of a module under service/, store/, partition/."""
    return [
        f"{path.relative_to(root)}:{node.lineno}"
        for path, nodes in function_level_imports(root).items()
        if path.relative_to(root).parts[0] in ("service", "store", "partition")
        for node in nodes
        for name in (
            [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        )
        if name.split(".")[0] in sys.stdlib_module_names
    ]


def test_a_module_that_imports_inside_a_function_says_why():
    """Imports belong at the top of a module. One inside a function is allowed only where it keeps
    `lancens --help` fast, lets a module import without pyspark, or keeps Lance out of a process
    before Spark forks it; the module docstring then says which, in a sentence containing
    "imported inside" or "imported where" ("Service modules are imported inside the command so
    that `lancens --help` starts without pyarrow or Lance.")."""
    assert unexplained_function_imports(PACKAGE) == []


def test_lower_layers_import_the_standard_library_at_the_top():
    """`lancens --help` never loads service/, store/ or partition/, so nothing there imports a
    standard-library module inside a function."""
    assert late_stdlib_imports(PACKAGE) == []


def test_the_import_checkers_see_imports_inside_functions(tmp_path):
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "a.py").write_text('"""A."""\n\n\ndef f():\n    import os\n')
    (tmp_path / "b.py").write_text(
        '"""B: `x` is imported\nwhere used."""\n\n\ndef f():\n    import x\n'
    )
    (tmp_path / "c.py").write_text('"""C."""\n\nimport os\n')
    assert unexplained_function_imports(tmp_path) == ["store/a.py"]
    assert late_stdlib_imports(tmp_path) == ["store/a.py:5"]


MAX_FUNCTION_LINES = 80


def _long_functions(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name}")
    return found


def test_no_function_is_longer_than_a_screen():
    """A function that needs more than 80 lines is doing several jobs: split it."""
    assert _long_functions(PACKAGE) == []


def test_the_length_check_sees_a_long_function(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (package / "m.py").write_text(f"def long():\n{body}\n")
    assert _long_functions(package) == ["pkg/m.py:1 long"]


def test_every_rendered_result_type_exists():
    """cli/views/ names result types by their qualified name (so that `ls` never imports the
    Spark pipeline): each name must be a class that exists."""
    import importlib

    names = set()
    for path in sorted((PACKAGE / "cli" / "views").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("view", "summary"):
                names.update(a.value for a in node.args if isinstance(a, ast.Constant))
    assert len(names) > 10, names
    for qualified in sorted(names):
        module, _, name = qualified.rpartition(".")
        assert isinstance(getattr(importlib.import_module(module), name), type), qualified


def test_every_import_of_our_own_names_resolves():
    """Imports inside functions run only when their path runs: a name that moved or was renamed
    would fail in front of a user, so each is resolved here."""
    import importlib

    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module):
                continue
            if node.module.split(".")[0] != "lancens_cli":
                continue
            module = importlib.import_module(node.module)
            for alias in node.names:
                if hasattr(module, alias.name):
                    continue
                try:
                    importlib.import_module(f"{node.module}.{alias.name}")
                except ImportError:
                    missing.append(f"{path.relative_to(REPO)}:{node.lineno} {alias.name}")
    assert missing == []
