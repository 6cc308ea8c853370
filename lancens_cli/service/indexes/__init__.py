"""Indexes across a namespace: `create index` and `prune --optimize-indexes`.

Entry points: `build.create_index` (`create index`: one table, or every published partition
table in one `__manifest` commit) and `optimize.optimize_for_prune` (one table's indexes
brought current inside a prune run; `actions` its words). `definitions` is the namespace's index
definitions in `__manifest` metadata and which index type fits which column; `steps` is Lance's
index work on one open table, which a partitioned write (a new partition table's first indexes)
and prune's compaction take too: both sit below the rest (docs/ARCHITECTURE.md, "Layers").
"""
