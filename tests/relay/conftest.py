import pytest

from harness.private import PrivateRedis


@pytest.fixture
def redis(tmp_path):
    """A Redis of the test's own, which the test may stop, restart or freeze."""
    server = PrivateRedis(tmp_path / "redis")
    try:
        yield server
    finally:
        server.stop()  # SIGKILL also ends a paused server


@pytest.fixture
def schema(client, db):
    """The OpenAPI document /api/schema serves, as JSON."""
    response = client.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()
