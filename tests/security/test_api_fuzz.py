"""Schemathesis against the live server's /api/schema with every check, stateful where the
schema links operations: zero server errors, zero responses that break the schema."""

import json
import subprocess
import sys
import urllib.request

import pytest

from harness.live import ROOT, RelayProcess, relay_env
from virtual_numbers.services import inventory_provision

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]

OPEN_LIMITS = {
    f"RATE_LIMIT_{name}": "1000000/m"
    for name in (
        "AUTH_PER_IP",
        "AUTH_PER_EMAIL",
        "CAPTCHA_PER_IP",
        "CAPTCHA_VERIFY_PER_IP",
        "CALLS_PER_USER",
        "PASSWORD_RESET_PER_IP",
        "PASSWORD_RESET_PER_EMAIL",
    )
}
HOOKS = ROOT / "tests" / "security" / "schemathesis_hooks.py"  # audio/wav sent as bytes
# Operations that end the credentials the run uses; they get a run of their own at the end.
CREDENTIAL_ENDING = ["auth_logout", "user_api_key_regenerate", "user_session_end"]


def register(base: str) -> dict:
    body = json.dumps(
        {"email": "fuzz@example.com", "password": "a-long-passphrase-for-fuzzing"}
    ).encode()
    request = urllib.request.Request(  # noqa: S310 - the test's own server
        f"{base}/api/auth/register", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        return json.loads(response.read())


def schemathesis(
    base: str, auth: str, tmp_path, *extra: str, examples: int = 15
) -> subprocess.CompletedProcess:
    """One schemathesis run. `auth` is the [auth.openapi] section naming the security scheme
    and its credential, so the auth checks know which credential to break."""
    config = tmp_path / f"schemathesis-{abs(hash(auth))}.toml"
    config.write_text((ROOT / "schemathesis.toml").read_text() + "\n" + auth)
    return subprocess.run(  # noqa: S603
        [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "--config-file",
            str(config),
            "run",
            f"{base}/api/schema",
            "--checks",
            "all",
            "--max-examples",
            str(examples),
            "--seed",
            "20261122",
            "--generation-database",
            "none",
            "--report-dir",
            str(tmp_path / "reports"),
            *extra,
        ],
        cwd=tmp_path,  # schemathesis keeps its cache under the working directory
        env=relay_env(tmp_path, SCHEMATHESIS_HOOKS=str(HOOKS)),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def bearer(token: str) -> str:
    return f'[auth.openapi.bearerAuth]\nbearer = "{token}"\n'


def api_key(key: str) -> str:
    return f'[auth.openapi.apiKeyAuth]\napi_key = "{key}"\n'


@pytest.fixture
def relay(tmp_path):
    inventory_provision(start="+442079460000", count=1000)
    process = RelayProcess(tmp_path / "server", **OPEN_LIMITS)
    yield process
    process.stop()


def test_the_api_holds_to_its_schema_under_generated_requests(relay, tmp_path):
    account = register(relay.base)
    exclude = [arg for op in CREDENTIAL_ENDING for arg in ("--exclude-operation-id", op)]

    runs = {
        "jwt": schemathesis(relay.base, bearer(account["token"]), tmp_path, *exclude),
        # The same operations again with the other credential: its auth checks need fewer
        # examples (the generated bodies were the JWT run's to try).
        "api key": schemathesis(
            relay.base, api_key(account["user"]["apiKey"]), tmp_path, *exclude, examples=5
        ),
    }
    # Last, the operations that end a session or replace the key, with a fresh login.
    runs["ending"] = schemathesis(
        relay.base,
        bearer(register_again(relay.base)),
        tmp_path,
        *[arg for op in CREDENTIAL_ENDING for arg in ("--include-operation-id", op)],
    )

    for name, run in runs.items():
        assert run.returncode == 0, f"{name} run:\n{run.stdout[-6000:]}\n{run.stderr[-2000:]}"
        assert " passed" in run.stdout


def register_again(base: str) -> str:
    body = json.dumps(
        {"email": "fuzz@example.com", "password": "a-long-passphrase-for-fuzzing"}
    ).encode()
    request = urllib.request.Request(  # noqa: S310
        f"{base}/api/auth/login", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        return json.loads(response.read())["token"]
