"""manage.py under Relay's own settings and chosen variables: the tests that a setting is read,
or that a wrong one stops start-up with one line (harness.live.assert_refused_at_start_up)."""

from __future__ import annotations

import subprocess

from harness import live

# What every such start begins with: a secret, and a database of its own rather than var/'s.
BASE = {
    "SECRET_KEY": "settings-test-secret-key-" + "x" * 40,
    "DATABASE_URL": "sqlite:////tmp/relay-settings-test.sqlite3",
}


def manage(*argv: str, **env: str) -> subprocess.CompletedProcess:
    """`manage.py argv...` run to its end in this process's environment plus BASE and `env`.

    A test module binds its own good variables once, `functools.partial(manage, **GOOD)`,
    and each test names only the one it changes."""
    return live.manage(*argv, env=live.child_environ(**{**BASE, **env}))
