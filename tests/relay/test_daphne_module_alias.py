"""The release before's `python -m relay.daphne_server` still starts Daphne for one release
(CHANGELOG.md, Deprecated): a process manager written for it keeps working."""

import subprocess
import sys

from harness.live import ROOT, child_environ


def test_the_old_module_name_starts_the_platform_daphne_server():
    result = subprocess.run(  # noqa: S603 - our own module
        [sys.executable, "-m", "relay.daphne_server", "--help"],
        cwd=ROOT,
        env=child_environ(PUBLIC_URL="http://127.0.0.1:8000"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert "--websocket-max-message-size" in result.stdout
