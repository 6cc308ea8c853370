"""Partitioned namespaces (the Lance "Partitioned Namespace" specification).

Entry point for writes: `write.write_partitioned` (`write.py`, one multi-partition transaction).
`layout` reads the partition layout `__manifest` records, `spec_change` is `add-partition-spec`,
`evolve_schema` changes the namespace schema, `partitions` answers which partition tables a
filter must read, `branch` and `tags` write and name snapshots, `layout_check` and `published_check`
are `check`'s partitioned half, `refusals` guards the names a partitioned root keeps for itself.
"""
