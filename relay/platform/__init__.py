"""The roof's edge to other libraries' internals: gunicorn's gthread worker, Daphne and
Twisted's HTTP channel, channels-redis's layer and Django's PostgreSQL backend over psycopg.
Each library is pinned in pyproject.toml, each private name listed in tests/platform/edges.py,
and each module has its off switch (docs/decisions.md, issue 55)."""
