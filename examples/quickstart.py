"""From nothing to a placed call: register, solve the CAPTCHA, take a number, open the
WebSocket, place a call and print its status until it ends (docs/quickstart.md).

    .venv/bin/python examples/quickstart.py
    .venv/bin/python examples/quickstart.py --base http://127.0.0.1:8000 --to +442079460123

It needs nothing but the standard library and `websockets` (in Relay's .venv). If the socket
drops, it reconnects with a growing pause and catches up on what it missed from
`GET /api/calls/{callId}`, so no state is lost and none is printed twice.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import urllib.error
import urllib.parse
import urllib.request

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

TERMINAL = {"completed", "busy", "no_answer", "failed", "canceled"}


def api(
    base: str, method: str, path: str, body=None, token: str | None = None, missing_ok=False
) -> dict | None:
    """One JSON request; Relay's error body is raised as SystemExit with its code (a 404 is
    None instead, with `missing_ok`)."""
    request = urllib.request.Request(  # noqa: S310 - the Relay the user named
        base + path,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Content-Type": "application/json"},
    )
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=15) as response:  # noqa: S310
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        if error.code == 404 and missing_ok:
            return None
        problem = json.loads(error.read())
        raise SystemExit(
            f"{method} {path}: {error.code} {problem['code']}: {problem['error']}"
        ) from None


def sign_up(base: str, email: str, password: str) -> str:
    """Register (or log in, if the e-mail is taken by this password) and return the JWT."""
    try:
        answer = api(base, "POST", "/api/auth/register", {"email": email, "password": password})
    except SystemExit as refused:
        if "email_taken" not in str(refused):
            raise
        answer = api(base, "POST", "/api/auth/login", {"email": email, "password": password})
    print(f"signed in as {answer['user']['email']} (API key {answer['user']['apiKey'][:6]}...)")
    return answer["token"]


def take_number(base: str, token: str) -> str:
    """The caller's first number, or a new one behind the CAPTCHA."""
    held = api(base, "GET", "/api/numbers", token=token)["numbers"]
    if held:
        return held[0]["number"]
    challenge = api(base, "GET", "/api/captcha")
    print(f"CAPTCHA: {challenge['question']}")
    solved = api(
        base,
        "POST",
        "/api/captcha/verify",
        {
            "a": challenge["a"],
            "b": challenge["b"],
            "answer": challenge["a"] + challenge["b"],
            "challengeId": challenge["challengeId"],
        },
    )
    pin = f"{secrets.randbelow(10**6):06d}"
    number = api(
        base,
        "POST",
        "/api/numbers",
        {"alias": "Quickstart", "pin": pin, "captchaToken": solved["token"]},
        token=token,
    )
    print(f"took the number {number['number']} (PIN {pin}; it is never shown again)")
    return number["number"]


async def follow_call(base: str, token: str, call: dict) -> str:
    """Send the call frame and print every state of the call until it ends; reconnect and
    catch up if the socket drops. Returns the final status."""
    seen: list[str] = []

    def show(status: str, extra: str = "") -> None:
        if status not in seen:
            seen.append(status)
            print(f"  {status}{extra}")

    pause = 0.5
    while True:
        ws_url = api(base, "GET", "/api/dashboard", token=token)["wsUrl"]
        try:
            async with connect(ws_url, open_timeout=10) as ws:
                # The same callId again is safe: Relay acks the existing call, never a second.
                await ws.send(json.dumps(call))
                # Catch up on what happened while we were away (on the first pass the call
                # may not be stored yet: its ack and states then come on the socket).
                path = f"/api/calls/{urllib.parse.quote(call['callId'], safe='')}"
                detail = api(base, "GET", path, token=token, missing_ok=True)
                if detail is not None:
                    for event in detail["timeline"]:
                        show(event["status"])
                    if detail["status"] in TERMINAL:
                        return detail["status"]
                pause = 0.5
                async for raw in ws:
                    frame = json.loads(raw)
                    if frame.get("callId") != call["callId"]:
                        continue
                    if frame["type"] == "call_ack":
                        print(f"acked: {frame['status']}")
                    elif frame["type"] == "call_status":
                        known = [key for key in ("duration", "reason") if key in frame]
                        extra = "".join(f" ({key} {frame[key]})" for key in known)
                        show(frame["status"], extra)
                        if frame["status"] in TERMINAL:
                            return frame["status"]
                    elif frame["type"] == "error":
                        raise SystemExit(f"refused: {frame['code']}: {frame['error']}")
        except (ConnectionClosed, OSError) as lost:
            print(f"socket lost ({type(lost).__name__}); reconnecting in {pause:.1f} s")
            await asyncio.sleep(pause)
            pause = min(pause * 2, 10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="http://127.0.0.1:8000", help="Relay's HTTP address")
    parser.add_argument("--email", default=f"quickstart-{secrets.token_hex(4)}@example.com")
    parser.add_argument("--password", default="a-quickstart-passphrase")
    parser.add_argument("--to", default="+442079460123", help="the number to ring (E.164)")
    parser.add_argument("--message", default="Hello from the Relay quickstart.")
    args = parser.parse_args()

    token = sign_up(args.base, args.email, args.password)
    caller_id = take_number(args.base, token)
    call = {
        "type": "call",
        "callId": f"quickstart-{secrets.token_hex(6)}",
        "to": args.to,
        "message": args.message,
    }
    print(f"calling {args.to} from {caller_id} as {call['callId']}:")
    final = asyncio.run(follow_call(args.base, token, call))
    return 0 if final == "completed" else 1


if __name__ == "__main__":
    sys.exit(main())
