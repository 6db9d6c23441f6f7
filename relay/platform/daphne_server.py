"""Daphne, with the WebSocket and HTTP behaviour its command line does not offer.

Autobahn, under Daphne, "fails by drop": a connection it must fail (a frame over the size
limit) is cut without a close frame, so the client never learns why. With failByDrop off it
sends the close frame first, and an oversized frame reaches the client as close code 1009.

Twisted's HTTP channel and Daphne's request parse the request line and headers before any of
Relay's code runs. A line over 16 KiB made Twisted drop the connection with no status at all,
its other refusals are a bare "400 Bad Request", and Daphne's own errors (a non-ASCII path,
an invalid header) are HTML pages; here each is a JSON error in Relay's shape: 414
`uri_too_long`, 431 `header_too_large`, 400 `invalid_request`, 500 `server_error`.

The channel overrides Twisted's `_respondToBadRequestAndDisconnect` and reads its
`_receivedHeaderSize` (Twisted pinned to its release; tests/platform/edges.py checks each).
DAPHNE_JSON_REFUSALS=false serves through Twisted's own channel instead: what it refuses is
then its bare 400 (and a line over 16 KiB a dropped connection), everything else the same.

Run as `python -m relay.platform.daphne_server <daphne arguments>` (runrelay does).
"""

import logging
import os
import re
import sys
from http import HTTPStatus

from daphne import http_protocol, server, ws_protocol
from daphne.cli import CommandLineInterface
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from twisted.web import http

from relay.server_errors import error_body, error_response
from relay.serving import serving_settings_check

logger = logging.getLogger("relay.http")

# "METHOD SP target": the start of a request line; a header line is "Name: value".
_REQUEST_LINE = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+ ")


class WebSocketProtocol(ws_protocol.WebSocketProtocol):
    def serverAccept(self, subprotocol=None, headers=()):  # noqa: N802 - Daphne's name
        # ASGI lets websocket.accept carry response headers (Relay's X-Request-Id); Daphne
        # drops them, though autobahn takes them with the subprotocol as a pair.
        self.handshake_deferred.callback(
            (
                subprotocol,
                {name.decode("latin-1"): value.decode("latin-1") for name, value in headers},
            )
        )
        del self.handshake_deferred

    def handle_reply(self, message):
        if message.get("type") == "websocket.accept":
            self.serverAccept(message.get("subprotocol"), message.get("headers") or ())
            return
        if message.get("type") == "websocket.send" and self.state in (
            self.STATE_CLOSING,
            self.STATE_CLOSED,
        ):
            # Between a close frame (either side's) and the end of TCP, autobahn refuses to
            # send: "Attempt to send on a closed protocol", raised into the application. A
            # frame for a socket that is going cannot reach it anyway; Daphne drops what is
            # sent once the socket is gone, and this drops it a moment earlier, so the
            # consumer lives to take its websocket.disconnect.
            logger.debug("dropped a frame for a closing socket")
            return
        super().handle_reply(message)


class WebSocketFactory(ws_protocol.WebSocketFactory):
    protocol = WebSocketProtocol

    def resetProtocolOptions(self):  # noqa: N802 - autobahn's name
        super().resetProtocolOptions()
        self.failByDrop = False


class HTTPChannel(http.HTTPChannel):
    """Twisted's HTTP/1.1 channel, refusing what it cannot parse with a JSON error."""

    def lineLengthExceeded(self, line):  # noqa: N802 - Twisted's name
        # A single line over MAX_LENGTH (16 KiB): Twisted would drop the connection.
        if _REQUEST_LINE.match(line):
            self.refuse(414, "URI Too Long", f"The request line is over {self.MAX_LENGTH} bytes.")
        else:
            self.refuse(
                431,
                "Request Header Fields Too Large",
                f"A request header is over {self.MAX_LENGTH} bytes.",
            )

    def lineReceived(self, line):  # noqa: N802 - Twisted's name
        # Twisted counts the request line and headers against totalHeadersSize and answers
        # a bare 400 past it; this is the same count, answered as what it is.
        if self._receivedHeaderSize + len(line) > self.totalHeadersSize:
            self.refuse(
                431,
                "Request Header Fields Too Large",
                f"The request headers are over {self.totalHeadersSize} bytes in all.",
            )
            return
        super().lineReceived(line)

    def _respondToBadRequestAndDisconnect(self):  # noqa: N802 - Twisted's name
        # Every other request Twisted cannot parse (no colon, NUL in a value, a bad
        # Content-Length, too many headers).
        self.refuse(400, "Bad Request", "The request is not valid HTTP/1.1.")

    def refuse(self, status: int, reason: str, message: str) -> None:
        """Answer `status` with Relay's JSON error body and close the connection."""
        logger.warning("refused a request before reading it: %s %s", status, message)
        self.transport.write(error_response(status, reason, message))
        self.loseConnection()


class WebRequest(http_protocol.WebRequest):
    """Daphne's request, with its errors (bad header bytes, a non-ASCII path or query
    string, an application that failed or timed out) as JSON instead of an HTML page."""

    def setResponseCode(self, code, message=None):  # noqa: N802 - Twisted's name
        # Twisted has no phrase for some codes (a 429 went out as "429 Unknown Status").
        if message is None and code in HTTPStatus._value2member_map_:
            message = HTTPStatus(code).phrase.encode()
        super().setResponseCode(code, message)

    def basic_error(self, status, status_text, body):
        if status < 500:  # Daphne logs its 5xx itself
            logger.warning("refused a request before reading it: %s %s", status, body)
        self.handle_reply(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"Content-Type", b"application/json")],
            }
        )
        self.handle_reply(
            {"type": "http.response.body", "body": error_body(status, body.rstrip(".") + ".")}
        )


class HTTPFactory(http_protocol.HTTPFactory):
    def protocol(self):
        if not settings.DAPHNE_JSON_REFUSALS:
            return super().protocol()  # Twisted's own channel: its internals left alone
        # What twisted.web.http.HTTPFactory.protocol builds, around Relay's channel.
        return http._GenericHTTPChannelProtocol(HTTPChannel())

    def buildProtocol(self, addr):  # noqa: N802 - Twisted's name
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = WebRequest
        return protocol


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "relay.settings")
    try:
        serving_settings_check()
    except ImproperlyConfigured as exc:
        sys.exit(f"Relay cannot start: {exc}")
    # Server.__init__ and Server.run() build their factories from these names.
    server.WebSocketFactory = WebSocketFactory
    server.HTTPFactory = HTTPFactory
    CommandLineInterface.entrypoint()


if __name__ == "__main__":
    main()
