import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.core.cache import cache
from hypothesis.configuration import set_hypothesis_home_dir
from rest_framework.test import APIClient

from accounts import services
from core import ratelimit
from harness.live import HANDSHAKE_DEADLINE
from relay import settings as relay_settings
from relay.asgi import application
from tests.factories import UserFactory

# The session's real Synapse (`synapse`, `synapse_admin`, `matrix_user_factory`), for the
# Matrix tests and the console's alike; a real SMTP server and the test's `mailbox`; how
# the suite spreads over xdist workers (modules whole, the longest first); and how a
# transactional test empties PostgreSQL after itself (DELETE, not TRUNCATE).
pytest_plugins = ["tests.matrix.fixtures", "tests.smtp", "tests.scheduling", "tests.pgflush"]

# Hypothesis keeps caches in ./.hypothesis even with no example database; a test run leaves
# the checkout as it found it, so they go to the temporary directory.
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "relay-hypothesis")


@pytest.fixture(autouse=True)
def _fast_password_hasher(settings, tmp_path_factory):
    # Argon2 costs tens of milliseconds a hash by design; the suite hashes hundreds of
    # passwords. Tests of production hashing (tests/accounts/test_password_hashing.py)
    # restore Relay's hashers for themselves.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # With hashes of microseconds the cap on hashing only adds chance 503s to the
    # tests that race twenty requests at the database; the cap's own tests set it to 1.
    settings.PASSWORD_HASH_CONCURRENCY = 100
    # Likewise the threads of a process that may serve requests that hash: the in-process live
    # server serves its races on as many threads as they have requests.
    settings.PASSWORD_HASH_THREADS = 100
    # The slots' lock files go under the run's temporary directory, not the checkout's var/.
    settings.PASSWORD_HASHING_SLOTS_DIR = tmp_path_factory.getbasetemp() / "hashing-slots"


@pytest.fixture
def real_hashers(settings):
    """Relay's own hashers at OWASP's minimum, the defaults, instead of the fast one above;
    tests may set other PASSWORD_ARGON2_* values on the returned settings."""
    settings.PASSWORD_HASHERS = relay_settings.PASSWORD_HASHERS
    settings.PASSWORD_ARGON2_TIME_COST = 2
    settings.PASSWORD_ARGON2_MEMORY_KIB = 19456
    settings.PASSWORD_ARGON2_PARALLELISM = 1
    return settings


@pytest.fixture(autouse=True)
def _fresh_cache():
    # Rate-limit counters live in the cache; each test starts from zero.
    cache.clear()
    yield
    cache.clear()


@pytest.fixture(autouse=True)
def _rate_windows_begin_with_the_test(monkeypatch):
    # core.ratelimit counts in fixed windows of the clock (a second's, a minute's, an hour's):
    # a test whose few requests straddled a minute's end had them counted in two windows, and
    # the one it expected refused went through (one run in a few hundred). Its clock here runs
    # at the real pace from the start of an hour, so a test's requests share their window.
    # Processes the test starts (harness.live) keep the real clock.
    offset = -time.time() % 3600
    monkeypatch.setattr(ratelimit, "time", SimpleNamespace(time=lambda: time.time() + offset))


@pytest.fixture
def api_client() -> APIClient:
    return APIClient()


@pytest.fixture
def user(db, request):
    """A user; in a test marked `unmetered`, one whose plan's quotas the test's load never
    reaches: it tests load, not quotas (tests/accounts/test_quotas.py does)."""
    return UserFactory(unmetered=request.node.get_closest_marker("unmetered") is not None)


@pytest.fixture
def other_user(db):
    return UserFactory()


@pytest.fixture
def login(user) -> services.AuthResult:
    """An open login session of `user`, with its JWT."""
    return services.session_open(user=user)


def jwt_client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def api_key_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=key)
    return client


@pytest.fixture
def client_jwt(login) -> APIClient:
    return jwt_client(login.token)


@pytest.fixture
def client_key(user) -> APIClient:
    return api_key_client(user.api_key)


@pytest.fixture
def outsider(other_user) -> APIClient:
    """`other_user`'s client (a JWT of its own login session): the one who must see nothing
    of `user`'s."""
    return jwt_client(services.session_open(user=other_user).token)


def admin_signed_in(client, user) -> None:
    """`client` signed in to the admin as `user` the way its login leaves a browser
    (relay.admin_signin): Django's session auth bound to a LoginSession of its own, no code
    given. A shortcut like force_login, for tests of the admin's pages rather than of its
    sign-in (tests/admin/test_sign_in.py), under the suite's REQUIRE_STAFF_2FA=False."""
    from relay import admin_signin

    client.force_login(user)
    session = client.session
    admin_signin.bind(session, services.session_open(user=user).session, second_factor=False)
    session.save()


@pytest.fixture
def staff_client(client, db):
    """Django's test client signed in to the admin as a superuser (admin_signed_in)."""
    from accounts.models import User

    admin_signed_in(
        client, User.objects.create_superuser("admin@example.com", "admin-password-long")
    )
    return client


@pytest.fixture
def inventory(db):
    """Ten free inventory numbers."""
    from virtual_numbers.services import inventory_provision

    inventory_provision(start="+442079460100", count=10)


@pytest.fixture
def captcha_token(db):
    """A factory of fresh, valid CAPTCHA tokens (as the API returns them)."""
    from captcha import services as captcha

    def make() -> str:
        challenge = captcha.captcha_challenge_issue()
        token = captcha.captcha_verify(
            a=challenge.a,
            b=challenge.b,
            answer=challenge.a + challenge.b,
            challenge_id=challenge.pk,
        )
        return str(token.pk)

    return make


@pytest.fixture
async def communicator():
    """A factory of connected WebSocket communicators on relay.asgi.application, through
    Channels' WebsocketCommunicator; every one it makes is disconnected at teardown.

    `await communicator(user)` opens a login session of `user` and connects with its JWT;
    `await communicator(token=...)` connects with that query token (None: no token at all),
    and `headers` are the handshake's. Returns the communicator and whether the handshake
    was accepted. Tests that use it need `django_db(transaction=True)`.
    """
    opened: list[WebsocketCommunicator] = []

    async def connect(user=None, *, token: str | None = None, headers=None):
        if user is not None:
            token = (await sync_to_async(services.session_open)(user=user)).token
        path = "/ws" if token is None else f"/ws?token={token}"
        socket = WebsocketCommunicator(application, path, headers=headers or [])
        opened.append(socket)
        connected, _ = await socket.connect(timeout=HANDSHAKE_DEADLINE)
        return socket, connected

    yield connect
    for socket in opened:
        await socket.disconnect()


class Clock:
    """Moves django.utils.timezone.now forward without sleeping."""

    def __init__(self, monkeypatch):
        from django.utils import timezone

        self._real_now = timezone.now
        self.offset = None
        monkeypatch.setattr(timezone, "now", self.now)

    def now(self):
        from datetime import timedelta

        return self._real_now() + (self.offset or timedelta())

    def advance(self, **delta):
        from datetime import timedelta

        self.offset = (self.offset or timedelta()) + timedelta(**delta)


@pytest.fixture
def clock(monkeypatch) -> Clock:
    return Clock(monkeypatch)


@pytest.fixture(autouse=True)
def _instant_simulated_calls(settings):
    settings.SIMULATED_STEP_SECONDS = 0
    settings.SIMULATED_TALK_SCALE = 0


def drain_tasks(max_rounds: int = 1000) -> None:
    """Run every task that is due, in this process (so the in-memory channel layer is shared),
    until none is left: what a worker would do, without signals or sleeping."""
    from unittest import mock

    from django_tasks_db.management.commands import db_worker
    from django_tasks_db.management.commands.db_worker import Worker

    # The worker recycles connections between tasks; inside a test that would close the
    # connection holding the test's transaction.
    with mock.patch.object(db_worker, "close_old_connections", lambda: None):
        _run_worker(Worker, max_rounds)


def _run_worker(Worker, max_rounds: int) -> None:  # noqa: N803 - a class
    Worker(
        queue_names=["default", "transcribe"],
        interval=0,
        batch=True,
        backend_name="default",
        startup_delay=False,
        max_tasks=max_rounds,
        worker_id="test-worker",
        excluded_queue_names=[],
    ).run()


def pytest_sessionfinish(session, exitstatus):
    """Leave var/ as the run found it: SQLite's -wal and -shm files outlive the test database
    that pytest-django deletes when a live-server child still had it open."""
    from django.conf import settings

    database = settings.DATABASES["default"]
    if database["ENGINE"] != "django.db.backends.sqlite3":
        return
    name = Path(database.get("TEST", {}).get("NAME") or "")
    if name.name and not name.exists():
        for suffix in ("-wal", "-shm"):
            name.with_name(name.name + suffix).unlink(missing_ok=True)
