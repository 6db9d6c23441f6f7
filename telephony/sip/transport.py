"""How SIP messages travel: one UDP socket, or TCP or TLS connections to the trunk.

Each hands every parsed message to `on_message(message, source)` and sends with
`send(message, destination)`. UDP retransmissions are the transaction layer's (ua.py); TCP and
TLS are reliable and the transaction layer does not retransmit over them. `ready(destination)`
opens the connection a call is about to use, so that a TLS peer whose certificate does not
verify ends the call at once, saying so (RFC 3261 §26.3.1), and never falls back to TCP or UDP.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl

from telephony.sip.message import (
    MAX_MESSAGE_BYTES,
    Message,
    SipParseError,
    parse,
    stream_content_length,
)

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT = 10.0  # seconds for a TCP connection and its TLS handshake
RECEIVE_BUFFER_BYTES = 4 * 1024 * 1024  # the UDP socket's, for bursts of answers


class TransportError(OSError):
    """A connection that could not be made: its message says why, fit for a call's reason."""


class UdpTransport(asyncio.DatagramProtocol):
    name = "UDP"
    reliable = False

    def __init__(self, on_message) -> None:
        self.on_message = on_message
        self.sock: asyncio.DatagramTransport | None = None

    async def start(self, host: str, port: int) -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        self.sock, _ = await loop.create_datagram_endpoint(lambda: self, local_addr=(host, port))
        # A burst of calls answers all at once: with the system's default buffer (about
        # 200 KiB) the kernel dropped 180s and 200s of a 200-call burst, and their INVITEs
        # were resent. Asked for 4 MiB; the kernel caps it at net.core.rmem_max.
        with contextlib.suppress(OSError):
            self.sock.get_extra_info("socket").setsockopt(
                socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER_BYTES
            )
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

    async def ready(self, destination: tuple[str, int]) -> None:
        """Nothing to open: UDP has no connections."""

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
        self.server = await asyncio.start_server(self._accept, host, port, **self._listening())
        self.bind = self.local = (host, self.server.sockets[0].getsockname()[1])
        return self.local

    def _listening(self) -> dict:
        return {}

    def _connecting(self, destination: tuple[str, int]) -> dict:
        return {}

    async def ready(self, destination: tuple[str, int]) -> None:
        """The connection to `destination`, opened now if there is none; TransportError
        when it cannot be."""
        try:
            await asyncio.wait_for(self._connection(destination), CONNECT_TIMEOUT)
        except OSError as exc:
            raise TransportError(_why(self.name, exc)) from exc

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
            reader, writer = await asyncio.open_connection(
                *destination, **self._connecting(destination)
            )
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
                    try:
                        length = stream_content_length(buffer[:end])
                    except SipParseError as exc:
                        # RFC 4475 3.1.2.3, 3.3.9: "the framing error is not recoverable,
                        # and the connection should be closed".
                        logger.debug("closed a SIP connection: %s", exc)
                        return
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
            logger.warning("SIP to %s:%s failed: %s", *destination, _why(self.name, exc))
            self.connections.pop(destination, None)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for writer in list(self.connections.values()):
            writer.close()
        for task in list(self.readers):
            task.cancel()


class TlsTransport(TcpTransport):
    """TCP under TLS (RFC 3261 §26.2.1, RFC 5922 for the names). Outbound, the peer's
    certificate is verified against its host name (`names` maps an address to the name it
    was found by: the trunk's) with the CA bundle of `client`; inbound, `server` (the agent's
    own certificate) serves the calls a trunk sends over TLS, when it is given."""

    name = "TLS"

    def __init__(
        self,
        on_message,
        *,
        client: ssl.SSLContext,
        server: ssl.SSLContext | None,
        names: dict[tuple[str, int], str],
    ) -> None:
        super().__init__(on_message)
        self.client, self.server_context, self.names = client, server, names

    def _listening(self) -> dict:
        return {"ssl": self.server_context} if self.server_context is not None else {}

    async def start(self, host: str, port: int) -> tuple[str, int]:
        if self.server_context is None:
            # No certificate of our own: calls out only, from an ephemeral local port.
            self.bind = self.local = (host, port)
            return self.local
        return await super().start(host, port)

    def _connecting(self, destination: tuple[str, int]) -> dict:
        return {
            "ssl": self.client,
            "server_hostname": self.names.get(destination, destination[0]),
            "ssl_handshake_timeout": 10,
        }


def tls_contexts(
    *, ca_file: str = "", cert_file: str = "", key_file: str = ""
) -> tuple[ssl.SSLContext, ssl.SSLContext | None]:
    """The client context (verification on, against `ca_file` or the system's CAs, with our
    certificate for mutual TLS when given) and the server context (None without one)."""
    client = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca_file or None)
    client.minimum_version = ssl.TLSVersion.TLSv1_2
    server = None
    if cert_file:
        client.load_cert_chain(cert_file, key_file)
        server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server.minimum_version = ssl.TLSVersion.TLSv1_2
        server.load_cert_chain(cert_file, key_file)
    return client, server


def _why(transport: str, exc: OSError) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS certificate verification failed: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError):
        return f"TLS handshake failed: {exc.reason or exc}"
    if isinstance(exc, TimeoutError):
        return f"{transport} connection timed out"
    return f"{transport} connection failed: {exc.strerror or exc}"
