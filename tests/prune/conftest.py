"""`prune` and `versions`: what stays readable, kills, races with writers and compaction, clones,
S3, and the same run as Spark tasks (prune_namespace.py builds the namespace they share).

No fixture is used by this folder alone: roots, S3 and `spark` are in the root conftest, each
module's own fixtures in the module."""
