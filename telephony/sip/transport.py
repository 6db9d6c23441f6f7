"""How SIP messages travel: one UDP socket, or one TCP connection to the trunk.

Both hand every parsed message to `on_message(message, source)` and send with
`send(message, destination)`. UDP retransmissions are the transaction layer's (ua.py); TCP is
reliable and the transaction layer does not retransmit over it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from telephony.sip.message import MAX_MESSAGE_BYTES, Message, SipParseError, parse

logger = logging.getLogger(__name__)


class UdpTransport(asyncio.DatagramProtocol):
    name = "UDP"
    reliable = False

    def __init__(self, on_message) -> None:
        self.on_message = on_message
        self.sock: asyncio.DatagramTransport | None = None

    async def start(self, host: str, port: int) -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        self.sock, _ = await loop.create_datagram_endpoint(lambda: self, local_addr=(host, port))
        return self.sock.get_extra_info("sockname")[:2]

    def datagram_received(self, data: bytes, addr) -> None:
        try:
            message = parse(data)
        except SipParseError as exc:
            logger.debug("dropped a SIP datagram from %s: %s", addr[0], exc)
            return
        self.on_message(message, addr[:2])

    def error_received(self, exc) -> None:
        # An ICMP error for an earlier datagram (nothing listening there): the transaction
        # timers decide what it means.
        logger.debug("SIP socket error: %s", exc)

    async def send(self, message: Message, destination: tuple[str, int]) -> None:
        if self.sock is not None:
            self.sock.sendto(message.encode(), destination)

    async def close(self) -> None:
        if self.sock is not None:
            self.sock.close()


class TcpTransport:
    """One connection to the trunk, opened on the first send and reopened when it drops, and
    a listener on the agent's port for connections the trunk opens (inbound calls): a
    response goes back on the connection its request came in on."""

    name = "TCP"
    reliable = True

    def __init__(self, on_message) -> None:
        self.on_message = on_message
        self.local: tuple[str, int] = ("", 0)
        self.bind: tuple[str, int] = ("", 0)
        self.connections: dict[tuple[str, int], asyncio.StreamWriter] = {}
        self.readers: set[asyncio.Task] = set()
        self.lock = asyncio.Lock()
        self.server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self.server = await asyncio.start_server(self._accept, host, port)
        self.bind = self.local = (host, self.server.sockets[0].getsockname()[1])
        return self.local

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")[:2]
        self.connections[peer] = writer
        try:
            await self._read(reader, peer)
        finally:
            writer.close()

    async def _connection(self, destination: tuple[str, int]) -> asyncio.StreamWriter:
        async with self.lock:
            writer = self.connections.get(destination)
            if writer is not None and not writer.is_closing():
                return writer
            reader, writer = await asyncio.open_connection(*destination)
            self.connections[destination] = writer
            task = asyncio.create_task(self._read(reader, destination))
            self.readers.add(task)
            task.add_done_callback(self.readers.discard)
            return writer

    async def _read(self, reader: asyncio.StreamReader, source: tuple[str, int]) -> None:
        buffer = b""
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while chunk := await reader.read(65536):
                buffer += chunk
                while True:
                    buffer = buffer.lstrip(b"\r\n")  # keep-alive CRLFs
                    end = buffer.find(b"\r\n\r\n")
                    if end < 0:
                        if len(buffer) > MAX_MESSAGE_BYTES:
                            return  # no message is that long: drop the connection
                        break
                    length = _content_length(buffer[:end])
                    total = end + 4 + length
                    if total > MAX_MESSAGE_BYTES:
                        return
                    if len(buffer) < total:
                        break
                    data, buffer = buffer[:total], buffer[total:]
                    try:
                        self.on_message(parse(data), source)
                    except SipParseError as exc:
                        logger.debug("dropped a SIP message on TCP: %s", exc)
        self.connections.pop(source, None)

    async def send(self, message: Message, destination: tuple[str, int]) -> None:
        try:
            writer = await self._connection(destination)
            writer.write(message.encode())
            await writer.drain()
        except OSError as exc:
            logger.warning("SIP over TCP to %s:%s failed: %s", *destination, exc)
            self.connections.pop(destination, None)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for writer in list(self.connections.values()):
            writer.close()
        for task in list(self.readers):
            task.cancel()


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() in (b"content-length", b"l"):
            value = value.strip()
            return int(value) if value.isdigit() else 0
    return 0
