"""The kernel's edge to other libraries' internals: every module of core that uses a private
name of Django, DRF, drf-spectacular or django-tasks-db lives here, each library pinned in
pyproject.toml and each name listed in tests/platform/edges.py (docs/decisions.md, issue 55)."""
