"""`prune`: namespace-wide maintenance that never removes a version a reader can be sent to.

Entry point: `run.prune` (`run.py`, which orchestrates a run; `request` is what it was asked);
`decide` is the one decision of what every version keeps (`versions` shows it),
`manifest_upkeep` is `__manifest`'s own part, `debris` what dead writes leave, `record_entries`
what a run leaves the next one. `policy` and `work` are the typed values a run obeys, `protect`
decides which versions of a table stay and why, `table` does one table's work (in a driver
thread or a Spark task), `expire` and `branches` hand exactly the expired versions to Lance,
`compact` merges small fragments and publishes compacted partition tables, `lease` keeps one
run per root.
"""
