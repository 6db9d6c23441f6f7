"""Bad input against live servers under runrelay, gunicorn (relay/gunicorn_conf.py) and Daphne
(relay/platform/daphne_server.py): what they refuse before Django runs is a JSON error with a
status, never a dropped connection or an HTML page; what Django and the consumer refuse is a 4xx or
an error frame, never a 500 or a 1011."""

import base64
import json
import os
import socket
import struct
import urllib.request

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from accounts import services as accounts
from harness.live import RelayProcess, http, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


METRICS_TOKEN = "daphne-server-metrics-token-0123456789"


@pytest.fixture
def relay(tmp_path):
    process = RelayProcess(tmp_path, "--no-worker", METRICS_TOKEN=METRICS_TOKEN)
    yield process
    process.stop()


def exchange(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes; read the whole answer until the server closes (Connection: close)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(request)
        received = b""
        while chunk := conn.recv(65536):
            received += chunk
    assert received, "the server closed the connection without answering"
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {
        name.lower(): value.strip()
        for name, _, value in (line.partition(":") for line in header_lines)
    }
    if headers.get("transfer-encoding") == "chunked":
        body = dechunk(body)
    return int(status_line.split()[1]), headers, body


def dechunk(data: bytes) -> bytes:
    body = b""
    while True:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            return body
        body, data = body + data[:size], data[size + 2 :]


def get(path: str, *headers: str, host: str = "127.0.0.1") -> bytes:
    lines = [f"GET {path} HTTP/1.1", f"Host: {host}", "Connection: close", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def post_json(path: str, body: str) -> bytes:
    data = body.encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    )
    return head.encode() + data


# What the server allows the request head in all, past its per-line limits: Daphne (Twisted)
# counts the bytes, gunicorn the header lines.
TOO_MUCH_HEAD = {
    "gunicorn": ("101 headers", [f"X-Part-{i}: b" for i in range(101)]),
    "daphne": ("headers over 16 KB in all", [f"X-Part-{i}: {'b' * 1000}" for i in range(20)]),
}


@pytest.mark.parametrize("server", ["gunicorn", "daphne"])
def test_requests_refused_before_django_runs_get_json_errors(relay, server):
    port = relay.port if server == "gunicorn" else relay.ws_port
    too_much_name, too_much_headers = TOO_MUCH_HEAD[server]
    cases = {
        "a 20 KB header": (get("/healthz", "X-Big: " + "a" * 20_000), 431, "header_too_large"),
        too_much_name: (get("/healthz", *too_much_headers), 431, "header_too_large"),
        "a 20 KB URL": (get("/api/history?x=" + "c" * 20_000), 414, "uri_too_long"),
        "a header line without a colon": (get("/healthz", "no colon here"), 400, "invalid_request"),
        "a vertical tab in a header value": (
            get("/healthz", "X-Odd: a\x0bb"),
            400,
            "invalid_request",
        ),
        "a non-ASCII path": (
            b"GET /api/\xc3\xa9 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
            400,
            "invalid_request",
        ),
    }
    for name, (request, status, code) in cases.items():
        got_status, headers, body = exchange(port, request)

        assert got_status == status, name
        assert headers["content-type"] == "application/json", name
        assert json.loads(body)["code"] == code, name
        assert json.loads(body)["error"], name

    # And the server is still serving.
    assert exchange(port, get("/healthz"))[0] == 200


def test_bad_bodies_and_frames_that_broke_make_run_are_refused_and_the_socket_stays_open(
    relay, user
):
    bodies = [
        r'{"email": "a\ud800@example.com", "password": "a-long-passphrase"}',
        "[" * 30_000 + "]" * 30_000,
        '{"email": ' + "9" * 5000 + "}",
    ]
    for body in bodies:
        status, headers, raw = exchange(relay.port, post_json("/api/auth/register", body))
        assert (status, json.loads(raw)["code"]) == (400, "invalid_request"), body[:40]
    status, _, raw = exchange(relay.port, get("/healthz", host="evil.example"))
    assert (status, json.loads(raw)["code"]) == (400, "invalid_request")

    token = accounts.session_open(user=user).token
    frames = [
        r'{"type": "call", "callId": "c\ud800", "to": "+442079460120", "message": "hi"}',
        r'{"type": "call", "callId": "c1", "to": "+442079460120", "message": "x\u0000"}',
        "[" * 30_000 + "]" * 30_000,
        '{"type": "ping", "n": ' + "9" * 5000 + "}",
    ]
    with connect(f"{relay.ws_base}/ws?token={token}", open_timeout=10) as ws:
        for frame in frames:
            ws.send(frame)
            reply = json.loads(ws.recv(timeout=10))
            assert (reply["type"], reply["code"]) == ("error", "invalid_request"), frame[:40]
            ws.send('{"type": "ping"}')
            assert json.loads(ws.recv(timeout=10))["type"] == "pong"


def test_a_websocket_handshake_to_an_unknown_path_is_closed_with_4404(relay, user):
    token = accounts.session_open(user=user).token

    with (
        connect(f"{relay.ws_base}/wsx?token={token}", open_timeout=10) as ws,
        pytest.raises(ConnectionClosed) as closed,
    ):
        ws.recv(timeout=10)

    assert closed.value.rcvd.code == 4404


def open_socket(port: int, token: str) -> socket.socket:
    """A WebSocket client of the bare minimum: it does the handshake and then only what the
    test says, so it can leave the server's close frame unanswered (every library answers)."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=10)
    key = base64.b64encode(os.urandom(16)).decode()
    conn.sendall(
        (
            f"GET /ws?token={token} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += conn.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    return conn


def read_frame(conn: socket.socket) -> tuple[int, bytes]:
    """(opcode, payload) of the server's next frame (servers never mask)."""

    def exactly(size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = conn.recv(size - len(data))
            assert chunk, "the server closed the connection"
            data += chunk
        return data

    first, second = exactly(2)
    size = second & 0x7F
    if size == 126:
        (size,) = struct.unpack("!H", exactly(2))
    elif size == 127:
        (size,) = struct.unpack("!Q", exactly(8))
    return first & 0x0F, exactly(size)


def open_sockets(base: str) -> float:
    request = urllib.request.Request(f"{base}/metrics")  # noqa: S310 - our server
    request.add_header("Authorization", f"Bearer {METRICS_TOKEN}")
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        text = response.read().decode()
    (line,) = [ln for ln in text.splitlines() if ln.startswith("relay_websocket_connections ")]
    return float(line.split()[1])


def test_events_for_a_socket_that_is_closing_are_dropped_and_its_consumer_still_ends(
    tmp_path, user
):
    """Between the close frame and the end of TCP, autobahn refuses to send ("Attempt to send
    on a closed protocol"). An event for the user in that moment crashed the consumer: its
    disconnect never ran, so the socket stayed counted open and in its groups. Here the server
    closes (the socket's login session ended) and the client leaves the close frame unanswered
    while a call's `queued` event is pushed to it."""
    log = tmp_path / "relay.log"
    relay = RelayProcess(tmp_path, "--no-worker", METRICS_TOKEN=METRICS_TOKEN, log=log)
    try:
        closing_socket_gets_an_event(relay, user)
    finally:
        relay.stop()
    assert "ws connect" in log.read_text()
    assert "Exception inside application" not in log.read_text()


def closing_socket_gets_an_event(relay: RelayProcess, user) -> None:
    login = accounts.session_open(user=user)
    conn = open_socket(relay.ws_port, login.token)
    wait_until(lambda: open_sockets(relay.base) == 1, deadline=30, what="the socket counted")

    status, _ = http(
        "DELETE", f"{relay.base}/api/user/sessions/{login.session.pk}", token=login.token
    )
    assert status == 200
    opcode, payload = read_frame(conn)
    assert (opcode, struct.unpack("!H", payload[:2])[0]) == (0x8, 4401)
    # Still unanswered: the server is closing, and an event for the user arrives.
    key = {"X-API-Key": user.api_key}
    request = urllib.request.Request(  # noqa: S310 - our server
        f"{relay.base}/api/calls",
        data=json.dumps({"callId": "closing-1", "to": "+442079460123", "message": "Hi"}).encode(),
        headers={"Content-Type": "application/json", **key},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        assert response.status == 202
    # The server gives up on the close handshake after autobahn's closeHandshakeTimeout (a
    # second) and aborts the connection; the event went out well within it.
    with pytest.raises(ConnectionResetError):
        conn.recv(1)
    conn.close()

    wait_until(lambda: open_sockets(relay.base) == 0, deadline=30, what="the socket counted closed")
