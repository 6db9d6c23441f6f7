"""RTP pacing (issue 29): every stream playing on a loop is sent by one Pacer, each at its own
20 ms schedule from its first frame, so a message plays for its own length however many play
at once, and a play that is cancelled stops only its own frames."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest

from telephony.sip.rtp import Pacer, RtpStream

FRAME = b"\xff" * 160


def phone() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    return sock


async def stream_to(sock: socket.socket) -> RtpStream:
    stream = RtpStream(payload_type=0)
    await stream.open("127.0.0.1", 0)
    stream.expect(*sock.getsockname())
    return stream


async def drain(sock: socket.socket, count: int, timeout: float = 5) -> list[bytes]:
    loop = asyncio.get_running_loop()
    packets = []
    async with asyncio.timeout(timeout):
        while len(packets) < count:
            packets.append(await loop.sock_recv(sock, 2048))
    return packets


async def timed_play(stream: RtpStream, frames: int) -> float:
    loop = asyncio.get_running_loop()
    started = loop.time()
    await stream.play(FRAME * frames)
    return loop.time() - started


async def test_streams_playing_at_once_each_keep_their_own_length():
    phones = [phone() for _ in range(20)]
    streams = [await stream_to(p) for p in phones]
    try:
        # Twenty messages of 0.5 s, started 10 ms apart.
        plays = []
        for stream in streams:
            plays.append(asyncio.ensure_future(timed_play(stream, 25)))
            await asyncio.sleep(0.01)
        lengths = await asyncio.gather(*plays)
        received = await asyncio.gather(*(drain(p, 25) for p in phones))
    finally:
        for stream in streams:
            stream.close()
        for p in phones:
            p.close()

    assert all(0.5 <= length < 0.8 for length in lengths), lengths
    for packets in received:
        sequences = [struct.unpack("!H", p[2:4])[0] for p in packets]
        stamps = [struct.unpack("!I", p[4:8])[0] for p in packets]
        assert sequences == [(sequences[0] + i) & 0xFFFF for i in range(25)]
        assert stamps == [(stamps[0] + 160 * i) & 0xFFFFFFFF for i in range(25)]
        assert packets[0][1] & 0x80 and not any(p[1] & 0x80 for p in packets[1:])  # marker


async def test_a_cancelled_play_stops_only_its_own_frames():
    kept_phone, cut_phone = phone(), phone()
    kept, cut = await stream_to(kept_phone), await stream_to(cut_phone)
    try:
        whole = asyncio.ensure_future(kept.play(FRAME * 30))
        halted = asyncio.ensure_future(cut.play(FRAME * 30))
        await drain(cut_phone, 5)
        halted.cancel()
        await whole
        received = await drain(kept_phone, 30)
    finally:
        kept.close()
        cut.close()

    assert len(received) == 30 and kept.sent_packets == 30
    assert 5 <= cut.sent_packets < 25, cut.sent_packets
    assert not Pacer.of(asyncio.get_running_loop()).playing  # nothing left behind
    kept_phone.close()
    cut_phone.close()


async def test_nothing_to_play_returns_at_once():
    sock = phone()
    stream = await stream_to(sock)
    play = stream.play(b"")
    try:
        # "At once" is the coroutine finishing on its first step, without waiting on the loop
        # for the Pacer or a timer: a fact of the code, where a bound on the time it took
        # would measure how busy the machine is (under pytest-xdist, other tests share it).
        with pytest.raises(StopIteration):
            play.send(None)
        assert stream.sent_packets == 0
    finally:
        play.close()
        stream.close()
        sock.close()
