"""A real voice application on loopback: an HTTP server whose answers each test sets per
path (JSON, TwiML, WAV files, slow, failing, oversized), keeping every request it got."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@dataclass
class Reply:
    status: int = 200
    body: bytes | str | list | None = None  # a list is sent as JSON
    content_type: str = "application/json"
    delay: float = 0.0  # seconds before answering


class VoiceApp:
    def __init__(self) -> None:
        self.replies: dict[str, list[Reply]] = {}
        self.requests: list[tuple[str, dict, bytes]] = []
        self.lock = threading.Lock()
        app = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with app.lock:
                    app.requests.append((self.path, dict(self.headers), body))
                    queue = app.replies.get(self.path) or [Reply(status=204)]
                    reply = queue.pop(0) if len(queue) > 1 else queue[0]
                if reply.delay:
                    time.sleep(reply.delay)  # the app is slow: the hook's timeout is tested
                payload = reply.body
                if isinstance(payload, list):
                    payload = json.dumps(payload)
                payload = (
                    (payload or "").encode() if isinstance(payload, str | type(None)) else payload
                )
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", reply.content_type)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # Relay gave up on a slow or oversized answer and hung up

            do_GET = do_POST  # noqa: N815 - a WAV to play is fetched, not posted to

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return self.base + path

    def answer(self, path: str, *replies: Reply) -> str:
        self.replies[path] = list(replies)
        return self.url(path)

    def bodies(self, path: str | None = None) -> list[dict]:
        return [json.loads(body) for p, _, body in self.requests if path in (None, p)]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def voice_app(settings):
    settings.WEBHOOK_ALLOW_PRIVATE = True  # the app is on loopback
    app = VoiceApp()
    yield app
    app.close()


@pytest.fixture
def webhook_secret(user, client_jwt, voice_app) -> str:
    """The user's webhook (it signs their calls' hooks), pointed at the app's /events."""
    response = client_jwt.put("/api/user/webhook", {"url": voice_app.url("/events")}, format="json")
    assert response.status_code == 201
    return response.json()["secret"]
