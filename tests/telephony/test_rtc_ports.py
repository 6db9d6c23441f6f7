"""telephony/webrtc/ports.py: every event loop that binds a leg's candidates is wrapped once,
including a new loop that takes the address (the id()) of one that was collected."""

import asyncio
import gc

from harness.ports import free_rtp_range
from telephony.webrtc import ports


async def _bound_port(port_range: range) -> int:
    loop = asyncio.get_running_loop()
    with ports.in_range(port_range):
        transport, _ = await loop.create_datagram_endpoint(
            asyncio.DatagramProtocol, local_addr=("127.0.0.1", 0)
        )
    try:
        return transport.get_extra_info("sockname")[1]
    finally:
        transport.close()


def test_every_new_loop_binds_in_the_range_even_at_a_collected_loops_address():
    port_range = free_rtp_range(10)
    addresses = set()
    for _ in range(30):
        loop = asyncio.new_event_loop()
        addresses.add(id(loop))
        try:
            assert loop.run_until_complete(_bound_port(port_range)) in port_range
        finally:
            loop.close()
        del loop
        gc.collect()  # its address free for the next loop to take, as CPython often does
    assert len(addresses) < 30  # some loop did reuse an address: the case that went unwrapped


def test_a_loop_is_wrapped_once():
    loop = asyncio.new_event_loop()
    try:
        ports.install(loop)
        wrapped = loop.create_datagram_endpoint
        ports.install(loop)
        assert loop.create_datagram_endpoint is wrapped
    finally:
        loop.close()
