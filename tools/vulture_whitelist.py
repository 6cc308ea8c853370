"""Names vulture cannot see used: the frameworks we plug into call them.

`vulture lancens_cli tools/vulture_whitelist.py --min-confidence 60 --ignore-decorators
@view,@summary,@warning` must print nothing (test_code_health.py runs it). Add a name here
only when a framework calls it; vulture reads this file, nothing runs it.
"""
# ruff: noqa: B018, F821

_.list_commands  # click.Group override (cli/app.py)
_.format_commands  # click.Group override (cli/app.py)
_.find_spec  # importlib meta path finder protocol (pandas_late.py)
_.__loader__  # read by the import system: a module's loader (pandas_late.py)
_.__signature__  # read by typer to build a command's options (cli/app.py, cli/common.py)
_.IDENTIFIERS  # read by sqlglot's tokenizer (partition/predicate_parser.py)
_.disabled  # read by logging (pipeline/spark_session.py)
_.abort  # called by Spark when a write job fails (pipeline/write_commit.py)
_.manifests  # a field of base_paths.Relocation, read by its callers
_.tables_added  # fields of store/commit_record.CommitChanges, read as a whole by its to_json
_.tables_removed
_.tables_republished
_.namespaces_added
_.namespaces_removed
_.row_id_meta  # read by Lance: a new fragment's stable row ids (table_rows/update.py)
