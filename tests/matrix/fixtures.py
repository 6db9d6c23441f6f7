"""The real Synapse as fixtures, for every test that asks, wherever it lives: the Matrix tests
here, and the console's (tests/console), whose Matrix id check asks the homeserver too. A
conftest in tests/matrix would hide them from tests/console, so tests/conftest.py registers
this module as a plugin (`pytest_plugins`). The server is session-scoped and lazy: it starts
when the first test that needs it runs, and never in a run that has none.
"""

import os
import uuid
from collections.abc import Callable, Iterator

import pytest

from harness.synapse import MatrixUser, Synapse, synapse_available


@pytest.fixture(scope="session")
def synapse(tmp_path_factory) -> Iterator[Synapse]:
    """One real Synapse for the session (`make synapse` installs it). Missing, it skips the
    tests that need it on a developer's machine and fails them in CI."""
    if reason := synapse_available():
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    server = Synapse(tmp_path_factory.mktemp("synapse"))
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def synapse_admin(synapse: Synapse) -> MatrixUser:
    """A server admin of the session's Synapse, "@relay-admin:localhost"."""
    return synapse.register("relay-admin", admin=True)


@pytest.fixture
def matrix_user_factory(synapse: Synapse) -> Callable[..., MatrixUser]:
    """make(prefix="user", admin=False): a new user "@<prefix>-<8 hex>:localhost"."""

    def make(prefix: str = "user", *, admin: bool = False) -> MatrixUser:
        return synapse.register(f"{prefix}-{uuid.uuid4().hex[:8]}", admin=admin)

    return make
