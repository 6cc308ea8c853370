"""`join-plan`: can two partitioned namespaces be joined partition by partition.

Entry point: `plan.join_plan` (`plan.py`). `keys` parses `--on`, `relations` pairs the partition
fields of two specs, `groups` loads each side's partition tables and groups them on those fields.
"""
