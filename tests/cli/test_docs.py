"""Generated docs match the app; CI runs the README's test line; --help stays light."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import modules_loaded_by

REPO = Path(__file__).resolve().parents[2]
GENERATOR = REPO / "scripts" / "generate_docs.py"
MAN = REPO / "man" / "lancens.1"
COMMANDS = ["init", "ls", "describe", "create", "rename", "drop", "register", "deregister"]
HEAVY = ["lance", "pyarrow", "pyspark", "fsspec", "pydantic"]  # pydantic: typer >= 0.29


def _env() -> dict[str, str]:
    env = {**os.environ, "NO_COLOR": "1", "LANCE_LOG": "error"}
    for key in [k for k in env if k.startswith("LANCENS_") or k == "_LANCENS_COMPLETE"]:
        del env[key]
    return env


def _man_text() -> str:
    """The roff source with the escapes that matter for matching undone."""
    text = MAN.read_text(encoding="utf-8")
    return re.sub(r"\\f[BIRP]", "", text).replace("\\-", "-").replace("\\&", "")


def test_generated_docs_are_up_to_date():
    """Drift: completions/ and man/lancens.1 equal what the live app generates."""
    proc = subprocess.run(
        [sys.executable, str(GENERATOR), "--check"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=_env(),
        timeout=120,
    )
    assert proc.returncode == 0, (
        "generated docs are stale; run `python scripts/generate_docs.py`\n" + proc.stderr
    )


def test_check_mode_names_stale_files(tmp_path, monkeypatch, capsys):
    """--check exits 1 and names the file that differs, without rewriting it."""
    monkeypatch.syspath_prepend(str(GENERATOR.parent))
    import generate_docs

    outputs = [*generate_docs.COMPLETION_FILES.values(), generate_docs.MAN_FILE]
    for rel in outputs:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, tmp_path / rel)
    (tmp_path / "man" / "lancens.1").write_text("stale\n", encoding="utf-8")
    monkeypatch.setattr(generate_docs, "OUTPUT_ROOT", tmp_path)

    assert generate_docs.main(["--check"]) == 1
    assert "man/lancens.1" in capsys.readouterr().err
    assert (tmp_path / "man" / "lancens.1").read_text(encoding="utf-8") == "stale\n"
    assert generate_docs.main([]) == 0
    assert generate_docs.main(["--check"]) == 0
    for rel in outputs:
        assert (tmp_path / rel).read_bytes() == (REPO / rel).read_bytes()


def test_man_page_mentions_every_command():
    text = _man_text()
    for name in COMMANDS:
        assert re.search(rf'^\.SS "{re.escape(name)}"$', text, re.M), f"no section for {name}"
        assert f"lancens {name}" in text
    for name in ("create namespace", "create table"):
        assert f'.SS "{name}"' in text
        assert f"lancens {name} [OPTIONS] ID" in text
    for section in (
        "NAME",
        "SYNOPSIS",
        "DESCRIPTION",
        "COMMANDS",
        "EXIT STATUS",
        "ENVIRONMENT",
        "FILES",
        "EXAMPLES",
    ):
        assert f".SH {section}" in text


def test_man_page_renders_without_warnings():
    groff = shutil.which("groff")
    assert groff is not None, "groff (Debian groff-base) is needed to check the man page"
    proc = subprocess.run(
        [groff, "-man", "-ww", "-z", str(MAN)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and not proc.stderr, proc.stderr


def test_ci_runs_the_readme_test_command_verbatim():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", readme, flags=re.S)
    lines = [
        line
        for block in blocks
        for line in block.splitlines()
        if line.startswith("python -m pip install -e '.[test]'")
    ]
    assert lines, "the README has no `python -m pip install -e '.[test]'` line"
    command = lines[0]
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert command in ci.splitlines(), f".ci/run does not run {command!r}"


def test_bash_completion_script_completes_commands():
    """The generated bash script talks the protocol the installed app answers."""
    bash = shutil.which("bash")
    assert bash is not None
    # The script runs `env _LANCENS_COMPLETE=complete_bash ... $1`, $1 being the command name,
    # so it needs the installed console script (`python -m lancens_cli` has another prog name).
    bindir = Path(sys.executable).parent
    assert (bindir / "lancens").exists(), "install the package (pip install -e .) first"
    script = f"""
        set -e
        export PATH="{bindir}:$PATH"
        source "{REPO / "completions" / "lancens.bash"}"
        COMP_WORDS=(lancens cr); COMP_CWORD=1
        _lancens_completion lancens
        printf '%s\\n' "${{COMPREPLY[@]}}"
        COMP_WORDS=(lancens create t); COMP_CWORD=2
        _lancens_completion lancens
        printf '%s\\n' "${{COMPREPLY[@]}}"
    """
    proc = subprocess.run(
        [bash, "--norc", "--noprofile", "-c", script],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["create", "table"], proc.stdout + proc.stderr


@pytest.mark.parametrize(
    "args", [["--help"], ["ls", "--help"], ["create", "table", "--help"], ["prune", "--help"]]
)
def test_help_does_not_import_heavy_modules(args):
    probe = (
        "import json, sys\n"
        f"HEAVY = {set(HEAVY)!r}\n"
        f"sys.argv = ['lancens', *{args!r}]\n"
        "from lancens_cli.cli.app import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "sys.stdout.flush()\n"
        "print('\\n@@' + json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in HEAVY)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Usage" in proc.stdout
    loaded = json.loads(proc.stdout.rsplit("@@", 1)[1])
    assert loaded == [], f"`lancens {' '.join(args)}` imported {loaded}"


def test_a_prune_with_work_imports_no_predicate_parser_and_no_spark(tmp_path):
    """A cron prune pays for what it uses: sqlglot (a tenth of a second) is imported by the
    commands that read a predicate, Spark by those that run on it, never by a local prune;
    pandas (a fifth of a second) by none of them through Lance (lancens_cli/pandas_late.py)."""
    import lance
    import pyarrow as pa

    for name in ("a", "b"):
        for mode in ("create", "append", "append"):
            lance.write_dataset(pa.table({"x": [1]}), tmp_path / f"{name}.lance", mode=mode)
    args = [
        "--root", str(tmp_path), "--json", "prune", "--older-than", "1s", "--force", "--yes"
    ]  # fmt: skip
    report, loaded = modules_loaded_by(
        args, {"sqlglot", "pyspark", "pandas"}, before="import time; time.sleep(1.1)"
    )
    assert json.loads(report)["totals"]["versions_removed"] == 4
    assert loaded == []


def test_the_architecture_map_names_every_module_of_service_and_store():
    """docs/ARCHITECTURE.md is the map a newcomer reads first: a module added to `service/`
    or `store/` without a word there fails here."""
    doc = (REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    unnamed = [
        str(path.relative_to(REPO))
        for layer in ("service", "store")
        for path in sorted((REPO / "lancens_cli" / layer).rglob("*.py"))
        if path.name != "__init__.py"
        and not re.search(rf"(?<![\w]){re.escape(path.stem)}(?![\w])", doc)
    ]
    assert unnamed == []
