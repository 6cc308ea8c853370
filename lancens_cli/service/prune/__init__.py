"""`prune`: namespace-wide maintenance that never removes a version a reader can be sent to.

Entry point: `run.prune` (`run.py`). `policy` is the typed value a run obeys, `protect` decides
which versions of a table stay and why, `table` does one table's work (in a driver thread or a
Spark task), `expire` and `branches` hand exactly the expired versions to Lance, `compact` merges
small fragments and publishes compacted partition tables, `lease` keeps one run per root.
"""
