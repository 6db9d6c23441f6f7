"""Bad input against live servers under runrelay, gunicorn (relay/gunicorn_conf.py) and Daphne
(relay/daphne_server.py): what they refuse before Django runs is a JSON error with a status,
never a dropped connection or an HTML page; what Django and the consumer refuse is a 4xx or an
error frame, never a 500 or a 1011."""

import json
import socket

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from accounts import services as accounts
from tests.live import RelayProcess

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


@pytest.fixture
def relay(tmp_path):
    process = RelayProcess(tmp_path, "--no-worker")
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
