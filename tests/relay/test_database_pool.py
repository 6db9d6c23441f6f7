"""DATABASE_POOL_SIZE turns on Django's psycopg pool for PostgreSQL (settings only, no server)."""

import json

from harness.live import child_environ, run_python

PRINT_DB = (
    "import django, json; django.setup(); from django.conf import settings; "
    "db = settings.DATABASES['default']; "
    "print(json.dumps({'pool': db.get('OPTIONS', {}).get('pool'), 'age': db['CONN_MAX_AGE']}))"
)


def database_settings(**env) -> dict:
    child_env = child_environ(
        DJANGO_SETTINGS_MODULE="relay.settings",
        SECRET_KEY="test-only",
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/relay_settings_only",
    )
    # The default case must not inherit a pool size from the shell running the tests.
    child_env.pop("DATABASE_POOL_SIZE", None)
    child_env.update(env)
    out = run_python("-c", PRINT_DB, env=child_env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_no_pool_by_default():
    assert database_settings()["pool"] is None


def test_pool_size_turns_on_the_pool_and_drops_persistent_connections():
    db = database_settings(DATABASE_POOL_SIZE="4", DATABASE_CONN_MAX_AGE="60")
    assert db["pool"]["max_size"] == 4
    assert db["age"] == 0
