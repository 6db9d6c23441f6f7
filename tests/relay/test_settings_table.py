"""The environment variables Relay reads are exactly those of README.md's table, both ways.

Settings read every variable through the typed readers of relay/settings/readers.py, which
record each name in READ; the test reads READ in a process whose environment sets none of
Relay's variables, so that what a developer's shell exports (PLANS=free,pro) does not count.
"""

import os
import re

from harness.live import ROOT, run_python

SETTINGS = ROOT / "relay" / "settings"
# Not settings: runrelay's own options, whose defaults (--host, --port) these give.
RUNRELAY_OPTIONS = {"HOST", "PORT"}
RUNRELAY = ROOT / "relay" / "management" / "commands" / "runrelay.py"


def readme_variables() -> set[str]:
    """The variables named in the first column of the README's table of variables."""
    text = (ROOT / "README.md").read_text()
    table = text.split("| variable | default | meaning |\n|---|---|---|\n", 1)[1]
    names = set()
    for row in table.split("\n\n", 1)[0].splitlines():
        first_cell = row.split(" | ", 1)[0]
        names |= set(re.findall(r"`([A-Z][A-Z0-9_]*)`", first_cell))
    return names


def variables_read(tmp_path) -> set[str]:
    """What the readers read while the settings load, with none of Relay's variables set."""
    code = "import relay.settings, relay.settings.readers as r; print(*sorted(r.READ))"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
        "SECRET_KEY": "settings-table-test-secret-key-" + "x" * 30,
        "RELAY_VAR_DIR": str(tmp_path),
    }
    result = run_python("-c", code, env=env)
    assert result.returncode == 0, result.stderr
    return set(result.stdout.split())


def test_every_variable_read_is_in_the_readme_table(tmp_path):
    assert variables_read(tmp_path) - readme_variables() == set()


def test_every_variable_in_the_readme_table_is_read(tmp_path):
    assert readme_variables() - RUNRELAY_OPTIONS - variables_read(tmp_path) == set()


def test_host_and_port_are_runrelays_options():
    source = RUNRELAY.read_text()
    for name in RUNRELAY_OPTIONS:
        assert f'os.environ.get("{name}"' in source, name


def test_settings_read_the_environment_only_through_the_readers():
    """A section that read a variable itself would escape READ, and so the table."""
    sections = [path for path in SETTINGS.glob("*.py") if path.name != "readers.py"]
    assert len(sections) > 5
    for path in sections:
        source = path.read_text()
        assert not re.search(r"\benviron\b|getenv", source), path.name
