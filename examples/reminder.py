"""An appointment reminder that asks for a key, placed from the WebSocket, with the digit read
back (docs/voice-apps.md): register (or sign in), open the socket, send a `call` frame whose
`script` says the reminder and gathers one key, and print every state and what the callee
pressed until the call ends.

    .venv/bin/python examples/reminder.py
    .venv/bin/python examples/reminder.py --base http://127.0.0.1:8000 --to +442079460123

On the simulated provider (the default) the callee presses SIMULATED_DIGITS' first group
(`1`); on a SIP trunk, the person who answers does. Needs nothing but the standard library
and `websockets`; it borrows the quickstart's two helpers (examples/quickstart.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets

from quickstart import TERMINAL, api, sign_up
from websockets.asyncio.client import connect

REMINDER = [
    {"say": {"text": "Hello. Your appointment is tomorrow at nine."}},
    {
        "gather": {
            "numDigits": 1,
            "timeout": 8,
            "say": {"text": "Press 1 to confirm, or 2 to cancel."},
            "branches": {
                "1": [{"say": {"text": "Thank you, see you tomorrow."}}],
                "2": [{"say": {"text": "Your appointment is cancelled."}}],
                "default": [{"say": {"text": "We did not get that. Goodbye."}}],
            },
        }
    },
]


async def remind(base: str, token: str, to: str) -> str:
    """Place the reminder and print its states and the key pressed; the final status."""
    call_id = f"reminder-{secrets.token_hex(4)}"
    ws_url = api(base, "GET", "/api/dashboard", token=token)["wsUrl"]
    async with connect(ws_url, open_timeout=10) as ws:
        await ws.send(json.dumps({"type": "call", "callId": call_id, "to": to, "script": REMINDER}))
        while True:
            frame = json.loads(await ws.recv())
            if frame.get("callId") != call_id:
                continue
            if frame["type"] == "error":
                raise SystemExit(f"refused: {frame['code']}: {frame['error']}")
            if frame["type"] != "call_status":
                continue
            if frame.get("event") == "gathered":
                result = frame["result"]
                print(f"  pressed {result['digits'] or 'nothing'} ({result['reason']})")
            elif "event" in frame:
                print(f"  {frame['event']}: {frame.get('detail', '')}")
            else:
                print(f"  {frame['status']}")
            if frame["status"] in TERMINAL and "event" not in frame:
                return frame["status"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="http://localhost:8000", help="Relay's address")
    parser.add_argument("--to", default="+442079460123", help="whom to remind (E.164)")
    parser.add_argument("--email", default=f"reminder-{secrets.token_hex(4)}@example.com")
    parser.add_argument("--password", default=secrets.token_urlsafe(12))
    args = parser.parse_args()
    token = sign_up(args.base, args.email, args.password)
    print(f"reminding {args.to}")
    status = asyncio.run(remind(args.base, token, args.to))
    raise SystemExit(0 if status == "completed" else 1)


if __name__ == "__main__":
    main()
