"""Daphne, with one WebSocket option its command line does not offer.

Autobahn, under Daphne, "fails by drop": a connection it must fail (a frame over the size
limit) is cut without a close frame, so the client never learns why. With failByDrop off it
sends the close frame first, and an oversized frame reaches the client as close code 1009.
Run as `python -m relay.daphne_server <daphne arguments>` (runrelay does).
"""

from daphne import server, ws_protocol
from daphne.cli import CommandLineInterface


class WebSocketFactory(ws_protocol.WebSocketFactory):
    def resetProtocolOptions(self):  # noqa: N802 - autobahn's name
        super().resetProtocolOptions()
        self.failByDrop = False


def main() -> None:
    server.WebSocketFactory = WebSocketFactory  # Server.run() builds its factory from this
    CommandLineInterface.entrypoint()


if __name__ == "__main__":
    main()
