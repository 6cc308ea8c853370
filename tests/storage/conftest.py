"""Storage and what survives on it: S3 (moto) and GCS (fake-gcs-server) roots, secrets,
timeouts, kills at random moments (crash_harness.py), concurrent processes and mixed writers.

No fixture is used by this folder alone: roots and the moto server are in the root conftest,
each module's own fixtures in the module."""
