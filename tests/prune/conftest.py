"""`prune` and `versions`: what stays readable, kills, races with writers and compaction, clones,
S3, and the same run as Spark tasks (prune_namespace.py builds the namespace they share).

Roots, S3 and `spark` are in the root conftest, each module's own fixtures in the module; the
throttling, counting S3 server (throttled_s3.py) is here, for the modules that count requests."""

import pytest
from throttled_s3 import ThrottledS3


@pytest.fixture
def counted():
    """A ThrottledS3 server of this test's own (calm until told to throttle)."""
    server = ThrottledS3()
    server.start()
    yield server
    server.stop()
