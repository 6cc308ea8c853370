"""History of a namespace: what changed (diff) and putting a past state back (restore).

Entry point of `diff`: `diff.diff`, which compares two `__manifest` versions of a partitioned
root, or two versions of one table; `transactions.operations` says what Lance's transactions
record each version did. `restore.py` puts a past version back.
"""
