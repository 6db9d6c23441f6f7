"""Deprecated for one release (issue 55): `python -m relay.daphne_server` runs
`relay.platform.daphne_server`, where the module now lives, so that a process manager written
for the release before still starts Daphne. Name the new module instead (CHANGELOG.md)."""

from relay.platform.daphne_server import main

if __name__ == "__main__":
    main()
