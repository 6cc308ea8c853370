"""Indexes across a namespace: `create index` and `prune --optimize-indexes`.

Entry points: `build.create_index` (`create index`: one table, or every published partition
table in one `__manifest` commit) and `optimize.optimize_for_prune` (one table's indexes
brought current inside a prune run). `definitions` is the namespace's index definitions in
`__manifest` metadata and which index type fits which column.
"""
