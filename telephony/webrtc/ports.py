"""RTC_PORT_RANGE for the agent's WebRTC legs. aioice (aiortc's ICE) binds each host candidate
to a port the kernel picks (address, 0), and has no setting for a range; a firewall in front of
the agent needs one. So, while a leg gathers its candidates (BrowserLeg.answer), the agent's
event loop binds such a socket to a free port of the agent's share of the range instead.

Only a bind asked with port 0 inside `in_range()` is moved: the SIP and RTP sockets of the
same loop ask for their own ports and are never touched.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import secrets
from collections.abc import Iterator

_range: contextvars.ContextVar[range | None] = contextvars.ContextVar("rtc_ports", default=None)


class NoFreePort(OSError):
    """Every port of RTC_PORT_RANGE is taken."""


def install(loop: asyncio.AbstractEventLoop) -> None:
    """Wrap `loop.create_datagram_endpoint` (once) so that in_range() applies."""
    # The wrapper marks the loop it is installed on, and goes with it: a set of id(loop)
    # would count a new loop that took a collected one's id as already wrapped.
    if getattr(loop.create_datagram_endpoint, "in_rtc_range", False):
        return
    original = loop.create_datagram_endpoint

    async def bind(protocol_factory, local_addr=None, **kwargs):
        ports = _range.get()
        if ports is None or local_addr is None or local_addr[1] != 0:
            return await original(protocol_factory, local_addr=local_addr, **kwargs)
        start = secrets.randbelow(len(ports))
        for n in range(len(ports)):
            port = ports[(start + n) % len(ports)]
            try:
                return await original(protocol_factory, local_addr=(local_addr[0], port), **kwargs)
            except OSError:
                continue  # taken: the next one
        raise NoFreePort(f"no free UDP port in {ports.start}-{ports.stop - 1}")

    bind.in_rtc_range = True
    loop.create_datagram_endpoint = bind


@contextlib.contextmanager
def in_range(ports: range | None) -> Iterator[None]:
    """Within the block (and the tasks it starts), sockets bound to port 0 take one of
    `ports`; None leaves them to the kernel."""
    if ports is None:
        yield
        return
    install(asyncio.get_running_loop())
    token = _range.set(ports)
    try:
        yield
    finally:
        _range.reset(token)
