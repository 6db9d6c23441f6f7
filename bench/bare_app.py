"""The baseline server: a bare ASGI app with no framework, for http_bare_asgi, ws_idle and ws_ping.

HTTP answers every request with a small JSON body; a WebSocket answers `ping` with the same `pong`
frame Relay sends. Served by Daphne (Relay's WebSocket server, so ws_idle and ws_ping's ratios
isolate Django and Channels) and, for http_bare_asgi only, by uvicorn for reference. Relay's HTTP
figures are set against the plain Django view under gunicorn instead (bench/plain_urls.py).
"""

import json
import time

BODY = b'{"status":"ok","service":"bare"}'
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]


async def app(scope, receive, send):
    if scope["type"] == "http":
        await _http(receive, send)
    elif scope["type"] == "websocket":
        await _websocket(receive, send)
    elif scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return


async def _http(receive, send):
    # Drain the body so keep-alive connections stay in step.
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": BODY})


async def _websocket(receive, send):
    while True:
        message = await receive()
        if message["type"] == "websocket.connect":
            await send({"type": "websocket.accept"})
        elif message["type"] == "websocket.receive":
            try:
                frame = json.loads(message.get("text") or message.get("bytes") or b"")
            except ValueError:
                continue
            if isinstance(frame, dict) and frame.get("type") == "ping":
                pong = {"type": "pong", "ts": int(time.time() * 1000)}
                await send({"type": "websocket.send", "text": json.dumps(pong)})
        elif message["type"] == "websocket.disconnect":
            return
