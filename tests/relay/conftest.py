import pytest

from tests.live import PrivateRedis


@pytest.fixture
def redis(tmp_path):
    """A Redis of the test's own, which the test may stop, restart or freeze."""
    server = PrivateRedis(tmp_path / "redis")
    try:
        yield server
    finally:
        server.stop()  # SIGKILL also ends a paused server
