"""The Procfile names processes that exist: every manage.py command, every server module."""

import importlib
import re
import shlex

import pytest
from django.core.management import get_commands

from harness.live import ROOT


def procfile() -> dict[str, list[str]]:
    entries = {}
    for line in (ROOT / "Procfile").read_text().splitlines():
        name, _, command = line.partition(":")
        entries[name.strip()] = shlex.split(command)
    return entries


def test_the_procfile_has_every_long_running_process_and_the_release_step():
    assert set(procfile()) == {"web", "ws", "worker", "agent", "matrix", "release"}


@pytest.mark.parametrize("name", sorted(procfile()))
def test_each_procfile_command_names_something_relay_has(name, settings):
    # What the servers need to start outside DEBUG (relay.serving), as a deployment sets it.
    settings.PUBLIC_URL = "https://relay.example.com"
    argv = procfile()[name]
    if argv[:2] == ["python", "manage.py"]:
        assert argv[2] in get_commands()
    elif argv[:2] == ["python", "-m"]:
        importlib.import_module(argv[2])
    else:
        assert argv[0] == "gunicorn"
        config = next(arg for arg in argv if arg.startswith("python:"))
        importlib.import_module(config.removeprefix("python:"))
        module, _, attribute = argv[-1].partition(":")
        assert hasattr(importlib.import_module(module), attribute)
    # The same commands docs/operations.md gives, so the two cannot drift apart.
    operations = (ROOT / "docs/operations.md").read_text()
    core = " ".join(a for a in argv if not re.search(r"\$\{", a) and a not in ("python",))
    core = core.split(" -b ")[0].split(" --index")[0]
    assert core in operations
