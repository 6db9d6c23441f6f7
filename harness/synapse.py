"""A real Synapse (the Matrix homeserver) for the Matrix tests, and a small client for its users.
tests/matrix/fixtures.py starts it for a test session.

Synapse runs from its own virtual environment, `.venv-synapse` (`make synapse`), never from
Relay's: it is a test fixture, not a dependency. `Synapse(workdir)` generates a configuration
there (SQLite, one plain-HTTP client listener on 127.0.0.1 at a free port, no federation, rate
limits raised far above anything a test does, logs to a file at WARNING) and `start()` serves it.
Users are registered through the shared-secret admin API; `MatrixUser` speaks the client-server
API over httpx, every request with a timeout.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import signal
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from harness.live import ROOT, wait_until
from harness.ports import free_port

SYNAPSE_PYTHON = ROOT / ".venv-synapse" / "bin" / "python"
SERVER_NAME = "localhost"
START_DEADLINE = 60  # seconds for Synapse to answer /_matrix/client/versions
STOP_GRACE = 20  # seconds between SIGTERM and SIGKILL
HTTP_TIMEOUT = 15  # seconds, every request but a long-polling sync
CLIENT = "/_matrix/client/v3"
ADMIN = "/_synapse/admin/v1"

# Far above anything a test does: only a test that asks for a limit (override_ratelimit) meets
# one. rc_room_creation and rc_joins_per_room are not in Synapse's sample config but have
# defaults (10 rooms, 10 joins a room, in a burst) that a suite of DM tests would reach.
_UNLIMITED = {"per_second": 1000, "burst_count": 1000}
RATE_LIMITS = {
    "rc_message": _UNLIMITED,
    "rc_registration": _UNLIMITED,
    "rc_login": {"address": _UNLIMITED, "account": _UNLIMITED, "failed_attempts": _UNLIMITED},
    "rc_joins": {"local": _UNLIMITED, "remote": _UNLIMITED},
    "rc_joins_per_room": _UNLIMITED,
    "rc_invites": {"per_room": _UNLIMITED, "per_user": _UNLIMITED, "per_issuer": _UNLIMITED},
    "rc_3pid_validation": _UNLIMITED,
    "rc_admin_redaction": _UNLIMITED,
    "rc_room_creation": _UNLIMITED,
}

# Run by SYNAPSE_PYTHON (PyYAML is one of Synapse's own dependencies): merge the JSON object on
# stdin into homeserver.yaml, drop the keys it lists, and point the log config at one file.
_EDIT_CONFIG = """
import json, sys, yaml
config_path, log_config_path = sys.argv[1], sys.argv[2]
edit = json.load(sys.stdin)
with open(config_path) as f:
    config = yaml.safe_load(f)
config.update(edit["set"])
for key in edit["drop"]:
    config.pop(key, None)
with open(config_path, "w") as f:
    yaml.safe_dump(config, f, sort_keys=False)
with open(log_config_path) as f:
    log = yaml.safe_load(f)
log["handlers"] = {"file": {**log["handlers"]["file"], "class": "logging.FileHandler"}}
log["handlers"]["file"].pop("when", None)
log["handlers"]["file"].pop("backupCount", None)
log["handlers"]["file"]["filename"] = edit["log_file"]
log["root"] = {"level": "WARNING", "handlers": ["file"]}
log["loggers"] = {"synapse.storage.SQL": {"level": "WARNING"}}
with open(log_config_path, "w") as f:
    yaml.safe_dump(log, f, sort_keys=False)
"""


def synapse_available() -> str | None:
    """None when `.venv-synapse` can import Synapse, else why not (for a skip or a failure)."""
    if not SYNAPSE_PYTHON.exists():
        return f"{SYNAPSE_PYTHON} does not exist: run `make synapse`"
    result = subprocess.run(  # noqa: S603 - our own interpreter
        [str(SYNAPSE_PYTHON), "-c", "import synapse"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if result.returncode != 0:
        tail = result.stderr.strip().splitlines()[-1:] or ["(no output)"]
        return f"{SYNAPSE_PYTHON} cannot import synapse: {tail[0]}; run `make synapse`"
    return None


class MatrixError(Exception):
    """A Matrix API call answered with an error status: `status` and the JSON `body`."""

    def __init__(self, method: str, url: str, status: int, body: Any):
        self.status = status
        self.body = body
        super().__init__(f"{method} {url} answered {status}: {body}")


def quote_id(value: str) -> str:
    """A Matrix id (user, room, event, transaction, type) as one segment of a URL path."""
    return quote(value, safe="")


def _call(
    method: str,
    url: str,
    *,
    token: str | None = None,
    json_body: Any = None,
    params: dict | None = None,
    timeout: float = HTTP_TIMEOUT,
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.request(
        method, url, headers=headers, json=json_body, params=params, timeout=timeout
    )


def _json(response: httpx.Response) -> Any:
    try:
        body = response.json()
    except ValueError:
        body = response.text
    if response.is_error:
        raise MatrixError(response.request.method, str(response.url), response.status_code, body)
    return body


@dataclass
class MatrixUser:
    """A registered user of a Synapse and the client-server calls the tests make as them.
    Calls raise MatrixError on an error status; `request` gives the raw response instead."""

    url: str
    user_id: str
    access_token: str
    device_id: str

    def request(
        self,
        method: str,
        path: str,
        json_body: Any = None,
        *,
        params: dict | None = None,
        timeout: float = HTTP_TIMEOUT,
    ) -> httpx.Response:
        """`method path` (under the server's URL, e.g. "/_matrix/client/v3/..."), as this user."""
        return _call(
            method,
            f"{self.url}{path}",
            token=self.access_token,
            json_body=json_body,
            params=params,
            timeout=timeout,
        )

    def _api(self, method: str, path: str, json_body: Any = None, **kwargs) -> Any:
        return _json(self.request(method, f"{CLIENT}{path}", json_body, **kwargs))

    def sync(self, since: str | None = None, timeout_ms: int = 0, full_state: bool = False) -> dict:
        params: dict[str, Any] = {"timeout": timeout_ms}
        if since:
            params["since"] = since
        if full_state:
            params["full_state"] = "true"
        return self._api("GET", "/sync", params=params, timeout=timeout_ms / 1000 + HTTP_TIMEOUT)

    def create_room(self, **body) -> str:
        """POST /createRoom with `body` (invite=[...], is_direct=True, preset=...): the room id."""
        return self._api("POST", "/createRoom", body)["room_id"]

    def join(self, room_id: str) -> str:
        return self._api("POST", f"/join/{quote_id(room_id)}", {})["room_id"]

    def leave(self, room_id: str) -> None:
        self._api("POST", f"/rooms/{quote_id(room_id)}/leave", {})

    def send_content(self, room_id: str, content: dict, txn_id: str | None = None) -> str:
        """An m.room.message with `content`; its event id. The same `txn_id` sends it once."""
        txn_id = txn_id or uuid.uuid4().hex
        path = f"/rooms/{quote_id(room_id)}/send/m.room.message/{quote_id(txn_id)}"
        return self._api("PUT", path, content)["event_id"]

    def send_text(self, room_id: str, body: str, txn_id: str | None = None) -> str:
        return self.send_content(room_id, {"msgtype": "m.text", "body": body}, txn_id)

    def messages(self, room_id: str, limit: int = 50) -> list[dict]:
        """The room's latest `limit` events (GET /messages?dir=b), oldest first."""
        params = {"dir": "b", "limit": limit}
        chunk = self._api("GET", f"/rooms/{quote_id(room_id)}/messages", params=params)["chunk"]
        return list(reversed(chunk))

    def account_data(self, type: str) -> dict | None:
        """This user's global account data of `type`, or None when there is none."""
        path = f"{CLIENT}/user/{quote_id(self.user_id)}/account_data/{quote_id(type)}"
        response = self.request("GET", path)
        if response.status_code == 404:
            return None
        return _json(response)

    def invited_rooms(self) -> dict[str, list[dict]]:
        """Room id -> its invite_state events, for every room this user is invited to now."""
        invites = self.sync().get("rooms", {}).get("invite", {})
        return {room_id: room["invite_state"]["events"] for room_id, room in invites.items()}

    def wait_for_invite(
        self, deadline: float = 30, room_id: str | None = None
    ) -> tuple[str, list[dict]]:
        """The first pending invite (to `room_id` if given): (room id, invite_state events)."""

        def invite() -> tuple[str, list[dict]] | None:
            for invited, events in self.invited_rooms().items():
                if room_id is None or invited == room_id:
                    return invited, events
            return None

        return wait_until(
            invite, deadline=deadline, what=f"an invite for {self.user_id}", interval=0.1
        )

    def wait_for_events(self, room_id: str, predicate, deadline: float = 30) -> list[dict]:
        """Poll the room's latest events (`messages`, oldest first) until `predicate(events)`
        is true; those events."""

        def matched() -> list[dict] | None:
            events = self.messages(room_id)
            return events if predicate(events) else None

        return wait_until(
            matched, deadline=deadline, what=f"events in {room_id} as {self.user_id}", interval=0.1
        )


class Synapse:
    """A Synapse configured in `workdir`, server name "localhost", on a free port of 127.0.0.1
    that stays the same across stop() and start() (as do its data)."""

    server_name = SERVER_NAME

    def __init__(self, workdir: Path):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path = self.workdir / "homeserver.yaml"
        self.log_path = self.workdir / "homeserver.log"
        self.output_path = self.workdir / "stdout.log"  # what Synapse prints, kept off ours
        self.port = free_port()
        self.registration_shared_secret = secrets.token_urlsafe(32)
        self.proc: subprocess.Popen | None = None
        self._generate_config()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self, *argv: str, stdin: str | None = None) -> None:
        result = subprocess.run(  # noqa: S603 - our own interpreter and arguments
            [str(SYNAPSE_PYTHON), *argv],
            cwd=self.workdir,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"{SYNAPSE_PYTHON} {' '.join(argv[:3])} failed:\n{result.stdout}{result.stderr}"
            )

    def _generate_config(self) -> None:
        self._run(
            "-m",
            "synapse.app.homeserver",
            "--server-name",
            SERVER_NAME,
            "--config-path",
            str(self.config_path),
            "--generate-config",
            "--report-stats=no",
            "--data-directory",
            str(self.workdir),
        )
        settings = {
            "listeners": [
                {
                    "port": self.port,
                    "bind_addresses": ["127.0.0.1"],
                    "type": "http",
                    "tls": False,
                    "x_forwarded": False,
                    "resources": [{"names": ["client"], "compress": False}],
                }
            ],
            "database": {
                "name": "sqlite3",
                "args": {"database": str(self.workdir / "homeserver.db")},
            },
            "federation_domain_whitelist": [],
            "trusted_key_servers": [],
            "suppress_key_server_warning": True,
            "registration_shared_secret": self.registration_shared_secret,
            "enable_registration": False,
            "report_stats": False,
            "presence": {"enabled": False},
            "media_store_path": str(self.workdir / "media_store"),
            "signing_key_path": str(self.workdir / f"{SERVER_NAME}.signing.key"),
            "log_config": str(self.workdir / f"{SERVER_NAME}.log.config"),
            "bcrypt_rounds": 4,  # registering a user hashes its password; the minimum is enough
            # Synapse answers a repeated identical /sync (same since, timeout, filter) from a
            # cache for 2 minutes by default: a poll with no `since` would never see news.
            "caches": {"sync_response_cache_duration": 0},
            **RATE_LIMITS,
        }
        edit = {"set": settings, "drop": ["pid_file"], "log_file": str(self.log_path)}
        self._run(
            "-c",
            _EDIT_CONFIG,
            str(self.config_path),
            settings["log_config"],
            stdin=json.dumps(edit),
        )

    def start(self, deadline: float = START_DEADLINE) -> None:
        """Start Synapse and wait until it serves /_matrix/client/versions; on failure stop it
        and raise with the end of its log."""
        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError("Synapse is already running")
        with self.output_path.open("ab") as output:
            self.proc = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
                [str(SYNAPSE_PYTHON), "-m", "synapse.app.homeserver", "-c", str(self.config_path)],
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
            )

        def serving() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"Synapse exited during start-up ({self.proc.returncode})")
            try:
                response = httpx.get(f"{self.url}/_matrix/client/versions", timeout=2)
            except httpx.HTTPError:
                return False
            return response.status_code == 200

        try:
            wait_until(serving, deadline=deadline, what="Synapse to serve", interval=0.1)
        except AssertionError as error:
            self.stop()
            raise AssertionError(f"{error}{self._log_tail()}") from None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after STOP_GRACE seconds. The data stay for start()."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def _log_tail(self) -> str:
        parts = []
        for path in (self.log_path, self.output_path):
            if path.exists() and (text := path.read_text(errors="replace").strip()):
                parts.append(f"\n--- the end of {path}:\n{text[-3000:]}")
        return "".join(parts)

    def register(
        self, localpart: str, password: str | None = None, admin: bool = False
    ) -> MatrixUser:
        """A new user through the shared-secret registration API (a nonce, then an HMAC-SHA1
        of nonce, user, password and admin flag), with an access token and a device."""
        password = password or secrets.token_urlsafe(16)
        nonce = _json(_call("GET", f"{self.url}{ADMIN}/register"))["nonce"]
        mac = hmac.new(self.registration_shared_secret.encode(), digestmod=hashlib.sha1)
        mac.update(b"\x00".join([nonce.encode(), localpart.encode(), password.encode()]))
        mac.update(b"\x00admin" if admin else b"\x00notadmin")
        body = {
            "nonce": nonce,
            "username": localpart,
            "password": password,
            "admin": admin,
            "mac": mac.hexdigest(),
        }
        result = _json(_call("POST", f"{self.url}{ADMIN}/register", json_body=body))
        return MatrixUser(self.url, result["user_id"], result["access_token"], result["device_id"])

    def override_ratelimit(
        self, admin: MatrixUser, user_id: str, messages_per_second: int, burst_count: int
    ) -> dict:
        """Give `user_id` its own message rate limit (rc_message), set by `admin`. Synapse
        takes whole numbers only (0.01 is refused with 400 M_INVALID_PARAM), and 0 for
        messages_per_second exempts the user instead: the strictest limit is 1 a second."""
        body = {"messages_per_second": messages_per_second, "burst_count": burst_count}
        path = f"{ADMIN}/users/{quote_id(user_id)}/override_ratelimit"
        return _json(admin.request("POST", path, body))

    def clear_ratelimit(self, admin: MatrixUser, user_id: str) -> None:
        """Back to the server's rc_message for `user_id`."""
        _json(admin.request("DELETE", f"{ADMIN}/users/{quote_id(user_id)}/override_ratelimit"))
