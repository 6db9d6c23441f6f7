"""`manage.py place_call`: place one call over a running Relay's WebSocket, as a user would,
and print every frame about it until it ends. For trying a trunk (docs/telephony.md) and for
operators; it opens a login session of the user it acts for."""

import json
import os
import secrets

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from websockets.exceptions import WebSocketException
from websockets.sync.client import connect

from accounts import services as accounts
from accounts.models import User
from calls.states import TERMINAL_STATES


def default_url() -> str:
    """The socket server of the `runrelay` (make run) serving from this checkout's var/,
    else where make run would put it: HOST, at WS_PORT or PORT + 1."""
    if settings.SERVING_URL_FILE.exists():
        return json.loads(settings.SERVING_URL_FILE.read_text())["ws"] + "/ws"
    host, port = os.environ.get("HOST", "127.0.0.1"), int(os.environ.get("PORT", "8000"))
    return f"ws://{host}:{os.environ.get('WS_PORT') or port + 1}/ws"


class Command(BaseCommand):
    help = "Place a call through a running Relay's WebSocket and print its frames."

    def add_arguments(self, parser):
        parser.add_argument("--email", required=True, help="the user the call is placed for")
        parser.add_argument("--to", required=True, help="E.164 number to ring")
        parser.add_argument("--message", required=True, help="what to say")
        parser.add_argument("--language", help="voice, e.g. en, de, cmn")
        parser.add_argument("--call-id", help="default: a new random one")
        parser.add_argument(
            "--url",
            default=default_url(),
            help="Relay's socket; default: the runrelay started from this checkout",
        )
        parser.add_argument("--timeout", type=float, default=120, help="seconds to wait")

    def handle(self, *args, email, to, message, language, call_id, url, timeout, **options):
        user = User.objects.filter(email__iexact=email).first()
        if user is None:
            raise CommandError(f"no user {email}")
        token = accounts.session_open(user=user).token
        frame = {
            "type": "call",
            "callId": call_id or f"cli-{secrets.token_hex(4)}",
            "to": to,
            "message": message,
        }
        if language:
            frame["language"] = language
        try:
            with connect(f"{url}?token={token}", open_timeout=10) as ws:
                ws.send(json.dumps(frame))
                while True:
                    received = json.loads(ws.recv(timeout=timeout))
                    if received.get("callId") != frame["callId"]:
                        continue
                    self.stdout.write(json.dumps(received))
                    if received["type"] == "error":
                        raise CommandError(received["error"])
                    if received["type"] == "call_status" and received["status"] in TERMINAL_STATES:
                        return
        except (OSError, TimeoutError, WebSocketException) as exc:
            raise CommandError(f"{url}: {exc}") from exc
