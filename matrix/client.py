"""The one adapter to the homeserver: the client-server API calls the bot makes, over httpx
with its one access token (MATRIX_BOT_ACCESS_TOKEN: a new login per send would be a new
device, and Synapse de-duplicates transaction ids per device).

Every failure is a MatrixError with what the caller needs to decide: the HTTP status (None:
the homeserver was not reached or timed out), Matrix's errcode, and for a 429 how long the
server asked to wait.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

import httpx
from django.conf import settings

TIMEOUT = httpx.Timeout(10.0, connect=3.0)
USER_AGENT = "Relay-Matrix/1"


@dataclass
class MatrixError(Exception):
    status: int | None  # None: not reached, or no answer in time
    errcode: str = ""
    error: str = ""
    retry_after: float | None = None  # seconds, on a 429

    def __str__(self) -> str:
        if self.status is None:
            return f"homeserver unreachable: {self.error}"[:300]
        text = f"{self.status} {self.errcode} {self.error}".strip()
        if self.retry_after is not None:
            text += f" (retry after {round(self.retry_after * 1000)} ms)"
        return text[:300]

    @property
    def unreachable(self) -> bool:
        """Down, timed out or failing (5xx): worth retrying later."""
        return self.status is None or self.status >= 500


def _path(*parts: str) -> str:
    return "/".join(quote(part, safe="") for part in parts)


class MatrixClient:
    def __init__(self, *, homeserver: str | None = None, token: str | None = None):
        self.homeserver = (homeserver or settings.MATRIX_HOMESERVER_URL).rstrip("/")
        self.token = token or settings.MATRIX_BOT_ACCESS_TOKEN
        self.user_id = settings.MATRIX_BOT_USER_ID

    def request(self, method: str, path: str, *, json=None, params=None, timeout=None) -> dict:
        url = f"{self.homeserver}/_matrix/client/v3/{path}"
        headers = {"Authorization": f"Bearer {self.token}", "User-Agent": USER_AGENT}
        try:
            response = httpx.request(
                method,
                url,
                json=json,
                params=params,
                headers=headers,
                timeout=timeout or TIMEOUT,
                follow_redirects=False,
            )
        except httpx.HTTPError as exc:
            raise MatrixError(None, error=f"{type(exc).__name__}: {exc}") from None
        try:
            body = response.json()
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        if response.status_code >= 300:
            retry_after = None
            if response.status_code == 429:
                retry_after = _retry_after(response, body)
            raise MatrixError(
                response.status_code,
                errcode=str(body.get("errcode", ""))[:100],
                error=str(body.get("error", ""))[:200],
                retry_after=retry_after,
            )
        return body

    # --- the calls the bot makes ---------------------------------------------------------
    def whoami(self) -> str:
        return self.request("GET", "account/whoami").get("user_id", "")

    def profile_exists(self, user_id: str) -> bool:
        """Whether `user_id` exists: its profile answers (404: it does not)."""
        try:
            self.request("GET", _path("profile", user_id))
        except MatrixError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def create_direct_room(self) -> str:
        """A private room marked direct (trusted_private_chat), with nobody invited yet: the
        caller saves its id before inviting, so a retry never makes a second room."""
        body = self.request(
            "POST",
            "createRoom",
            json={"preset": "trusted_private_chat", "is_direct": True, "name": "Relay"},
        )
        return body["room_id"]

    def invite_direct(self, room_id: str, user_id: str) -> None:
        """Invite `user_id` with `is_direct` on the invite (the member event's content), so
        their client shows the room as a direct chat. Inviting twice is harmless."""
        self.request(
            "PUT",
            _path("rooms", room_id, "state", "m.room.member", user_id),
            json={"membership": "invite", "is_direct": True},
        )

    def direct_rooms_add(self, user_id: str, room_id: str) -> None:
        """Add the room to the bot's `m.direct` account data (read, then written back)."""
        path = _path("user", self.user_id, "account_data", "m.direct")
        try:
            direct = self.request("GET", path)
        except MatrixError as exc:
            if exc.status != 404:
                raise
            direct = {}
        rooms = [room for room in direct.get(user_id, []) if isinstance(room, str)]
        if room_id in rooms:
            return
        direct[user_id] = [*rooms, room_id]
        self.request("PUT", path, json=direct)

    def send_notice(self, room_id: str, txn_id: str, content: dict) -> str:
        body = self.request(
            "PUT", _path("rooms", room_id, "send", "m.room.message", txn_id), json=content
        )
        return body.get("event_id", "")

    def leave(self, room_id: str) -> None:
        self.request("POST", _path("rooms", room_id, "leave"), json={})

    def sync(self, *, since: str, timeout_ms: int) -> dict:
        params = {"timeout": str(timeout_ms), "filter": SYNC_FILTER}
        if since:
            params["since"] = since
        wait = httpx.Timeout(timeout_ms / 1000 + 15.0, connect=3.0)
        return self.request("GET", "sync", params=params, timeout=wait)


# What the bot reads: its rooms' messages and memberships; no presence, no account data, no
# ephemeral events. The timeline limit is generous so a gap is rare; a gap (`limited`) is
# logged, and the commands in it are not seen.
SYNC_FILTER = (
    '{"presence":{"types":[]},"account_data":{"types":[]},'
    '"room":{"ephemeral":{"types":[]},"account_data":{"types":[]},'
    '"state":{"types":["m.room.member"],"lazy_load_members":false},'
    '"timeline":{"types":["m.room.message","m.room.member"],"limit":100}}}'
)


def _retry_after(response: httpx.Response, body: dict) -> float:
    """How long a 429 asks to wait: `retry_after_ms` in the body, else `Retry-After`, else a
    second."""
    ms = body.get("retry_after_ms")
    if isinstance(ms, int | float) and ms >= 0:
        return ms / 1000
    header = response.headers.get("Retry-After", "")
    if header.isdigit():
        return float(header)
    return 1.0
