"""Importing Lance does not load pandas, and pandas loaded later works as ever
(lancens_cli/pandas_late.py). Each case runs in a fresh interpreter: the test process has both
loaded already."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import lance
import pyarrow as pa


def _run(code: str) -> dict:
    """`code` in a new interpreter; what it printed last, as JSON."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_lance_loads_without_pandas_and_pandas_loaded_after_converts_as_ever(tmp_path):
    """A command that uses pandas after Lance (anything on Spark) gets pyarrow's pandas
    conversions whole: a Categorical is a dictionary array, a DataFrame keeps its pandas
    metadata, Lance writes a DataFrame and reads back to one."""
    seen = _run(
        f"""
        import json, sys
        from lancens_cli import pandas_late
        hook = pandas_late.install()
        import lance, pyarrow as pa
        after_lance = "pandas" in sys.modules
        loader = type(lance.__loader__).__name__
        import pandas as pd
        kind = str(pa.array(pd.Series(pd.Categorical(["a", "b", "a"]))).type)
        meta = sorted(pa.Table.from_pandas(pd.DataFrame({{"x": [1]}})).schema.metadata or {{}})
        lance.write_dataset(pd.DataFrame({{"x": [1, 2]}}), {str(tmp_path / "t.lance")!r})
        back = lance.dataset({str(tmp_path / "t.lance")!r}).to_table().to_pandas()["x"].tolist()
        print(json.dumps({{
            "after_lance": after_lance, "refused": hook.refused, "loader": loader,
            "kind": kind, "meta": [m.decode() for m in meta], "back": back,
            "hook_left": hook in sys.meta_path,
        }}))
        """
    )
    assert seen == {
        "after_lance": False,
        "refused": True,
        "loader": "SourceFileLoader",  # Lance's module keeps its own loader
        "kind": "dictionary<values=string, indices=int8, ordered=0>",
        "meta": ["pandas"],
        "back": [1, 2],
        "hook_left": False,  # gone once pandas is loaded
    }


def test_pandas_loaded_first_is_left_alone():
    seen = _run(
        """
        import json, sys
        import pandas
        from lancens_cli import pandas_late
        print(json.dumps({"hook": pandas_late.install() is not None}))
        """
    )
    assert seen == {"hook": False}


def test_only_the_thread_importing_lance_is_refused_pandas():
    """While one thread imports Lance (and is refused pandas), another thread importing pandas
    gets it, and pyarrow, told "no pandas" by the first, learns of it."""
    seen = _run(
        """
        import json, sys, threading
        from lancens_cli import pandas_late
        hook = pandas_late.install()
        import pyarrow.lib
        hook._lance_starts()  # this thread is importing Lance from here on
        try:
            import pandas
            refused_here = False
        except ImportError:
            refused_here = True
        got = {}
        def other():
            import pandas as pd
            import pyarrow as pa
            got["kind"] = str(pa.array(pd.Series(pd.Categorical(["a"]))).type)
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        print(json.dumps({**got, "refused_here": refused_here, "refused": hook.refused}))
        """
    )
    assert seen == {
        "kind": "dictionary<values=string, indices=int8, ordered=0>",
        "refused_here": True,
        "refused": True,
    }


def test_a_look_up_of_pandas_after_lance_changes_nothing():
    """`importlib.util.find_spec("pandas")` (as lancedb and PySpark ask) after Lance, then an
    import: pyarrow still learns of pandas."""
    seen = _run(
        """
        import importlib.util, json
        from lancens_cli import pandas_late
        pandas_late.install()
        import lance
        found = importlib.util.find_spec("pandas") is not None
        import pandas as pd, pyarrow as pa
        kind = str(pa.array(pd.Series(pd.Categorical(["a"]))).type)
        print(json.dumps({"found": found, "kind": kind}))
        """
    )
    assert seen == {"found": True, "kind": "dictionary<values=string, indices=int8, ordered=0>"}


def test_a_pandas_pyarrow_refuses_is_a_warning_not_a_failed_import(tmp_path):
    """A pandas older than pyarrow supports imports as without the hook (pyarrow warns)."""
    fake = tmp_path / "pandas"
    fake.mkdir()
    (fake / "__init__.py").write_text('__version__ = "2.0.0"\n')
    seen = _run(
        f"""
        import json, sys, warnings
        sys.path.insert(0, {str(tmp_path)!r})
        from lancens_cli import pandas_late
        pandas_late.install()
        import lance
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import pandas
        print(json.dumps({{"version": pandas.__version__,
                          "warned": any("2.2.2" in str(w.message) for w in caught)}}))
        """
    )
    assert seen == {"version": "2.0.0", "warned": True}


def test_the_cli_reads_a_table_through_lance_without_pandas(tmp_path):
    """`lancens describe` of a real table in a new process: its answer, and no pandas."""
    lance.write_dataset(pa.table({"x": [1, 2, 3]}), tmp_path / "t.lance")
    seen = _run(
        f"""
        import json, sys, io, contextlib
        sys.argv = ["lancens", "--root", {str(tmp_path)!r}, "--json", "describe", "t"]
        from lancens_cli.cli.app import main
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                main()
        except SystemExit as exc:
            assert not exc.code, exc.code
        print(json.dumps({{"rows": json.loads(out.getvalue())["details"]["rows"],
                          "pandas": "pandas" in sys.modules}}))
        """
    )
    assert seen == {"rows": 3, "pandas": False}
