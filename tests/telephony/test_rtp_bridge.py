"""The media of a forwarded call (issue 28): two of Relay's RTP streams bridged on loopback,
with plain UDP sockets as the two phones. What one phone sends reaches the other in that
leg's codec (PCMU and PCMA transcoded), with that leg's telephone-event payload type, its
own sequence numbers and SSRC, and the sender's timing kept."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest

from telephony.sip.rtp import LINEAR, TRANSCODE, RtpStream, hold_music


def linear(payload_type: int, code: int) -> int:
    return struct.unpack("<h", LINEAR[payload_type][code])[0]


@pytest.mark.parametrize("source,target", [(0, 8), (8, 0)], ids=["pcmu-to-pcma", "pcma-to-pcmu"])
def test_every_g711_code_is_transcoded_to_the_code_of_the_other_law_that_holds_its_sample(
    source, target
):
    table = TRANSCODE[(source, target)]
    levels = sorted({linear(target, code) for code in range(256)})
    for code in range(256):
        sample = linear(source, code)
        got = linear(target, table[code])
        # G.711's own quantisation: the sample lies within half a step of the level chosen
        # (the step of the law at that level, whichever side the sample is on).
        at = levels.index(got)
        below = got - levels[at - 1] if at else 0
        above = levels[at + 1] - got if at + 1 < len(levels) else 0
        assert abs(sample - got) <= max(below, above) / 2 + 1, (code, sample, got)
        # and the same sign, or silence
        assert sample * got >= 0 or abs(got) <= 8, (code, sample, got)
    silence = {0: 0xFF, 8: 0xD5}
    assert abs(linear(target, table[silence[source]])) <= 8


def rtp(payload_type: int, sequence: int, timestamp: int, payload: bytes, *, marker=False):
    return (
        struct.pack(
            "!BBHII", 0x80, (0x80 if marker else 0) | payload_type, sequence, timestamp, 0x1234
        )
        + payload
    )


def phone() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    return sock


async def heard(sock: socket.socket, count: int) -> list[bytes]:
    loop = asyncio.get_running_loop()
    packets = []
    async with asyncio.timeout(5):
        while len(packets) < count:
            packets.append(await loop.sock_recv(sock, 2048))
    return packets


@pytest.fixture
async def bridge():
    """(caller phone, caller's leg in PCMA with events at 101, target's leg in PCMU with
    events at 96, target phone), the legs bridged to each other."""
    caller, target = phone(), phone()
    to_caller, to_target = RtpStream(payload_type=8), RtpStream(payload_type=0)
    for stream in (to_caller, to_target):
        await stream.open("127.0.0.1", 0)
    to_caller.expect(*caller.getsockname())
    to_target.expect(*target.getsockname())
    to_caller.dtmf_payload_type, to_target.dtmf_payload_type = 101, 96
    to_caller.bridge, to_target.bridge = to_target, to_caller
    yield caller, to_caller, to_target, target
    for stream in (to_caller, to_target):
        stream.close()
    caller.close()
    target.close()


def address(stream: RtpStream):
    return stream.sock.get_extra_info("sockname")


async def test_the_callers_audio_and_keys_reach_the_target_in_its_codec_and_types(bridge):
    caller, to_caller, to_target, target = bridge
    loud = bytes(range(0, 160))
    for index in range(3):
        caller.sendto(
            rtp(8, 7 + index, 1000 + 160 * index, loud, marker=index == 0), address(to_caller)
        )
    # An RFC 4733 event (key 1, at the timestamp of the next frame) and a gap of one frame.
    caller.sendto(rtp(101, 10, 1480, bytes([1, 0x0A, 0, 160])), address(to_caller))
    caller.sendto(rtp(8, 11, 1800, loud), address(to_caller))

    packets = await heard(target, 5)

    headers = [struct.unpack("!BBHII", p[:12]) for p in packets]
    assert [h[1] & 0x7F for h in headers] == [0, 0, 0, 96, 0]
    assert [bool(h[1] & 0x80) for h in headers] == [True, False, False, False, False]
    assert all(h[4] == to_target.ssrc for h in headers)
    sequences = [h[2] for h in headers]
    assert sequences == [(sequences[0] + i) & 0xFFFF for i in range(5)]
    stamps = [h[3] for h in headers]
    assert [(s - stamps[0]) & 0xFFFFFFFF for s in stamps] == [0, 160, 320, 480, 800]
    assert packets[0][12:] == loud.translate(TRANSCODE[(8, 0)])
    assert packets[3][12:] == bytes([1, 0x0A, 0, 160])
    assert to_target.relayed_packets == 5


async def test_the_targets_audio_reaches_the_caller_in_pcma_and_events_without_a_type_are_dropped(
    bridge,
):
    caller, to_caller, to_target, target = bridge
    to_caller.dtmf_payload_type = None  # the caller offered no telephone-event
    audio = b"\x20" * 160
    target.sendto(rtp(96, 1, 50, bytes([5, 0x0A, 0, 160])), address(to_target))
    target.sendto(rtp(0, 2, 50, audio), address(to_target))
    target.sendto(rtp(9, 3, 210, audio), address(to_target))  # G.722: no codec of this bridge
    target.sendto(rtp(0, 4, 370, audio), address(to_target))

    packets = await heard(caller, 2)

    assert [p[1] & 0x7F for p in packets] == [8, 8]
    assert packets[0][12:] == audio.translate(TRANSCODE[(0, 8)])
    assert to_target.received.packets == 3  # it heard all three frames; only G.711 went on
    assert to_caller.relayed_packets == 2


async def test_header_extensions_and_padding_are_never_taken_for_audio(bridge):
    caller, to_caller, to_target, target = bridge
    audio = bytes(range(100, 260 - 100)) + bytes(100)  # 160 bytes
    extension = struct.pack("!HH", 0xBEDE, 2) + b"\x10\x01\x02\x03" + b"\x22\x04\x05\x06"
    packet = bytearray(rtp(8, 1, 1000, extension + audio + b"\x00\x00\x00\x04"))
    packet[0] |= 0x10 | 0x20  # X and P
    caller.sendto(bytes(packet), address(to_caller))
    # A packet whose extension runs past its end is dropped.
    broken = bytearray(rtp(8, 2, 1160, struct.pack("!HH", 0xBEDE, 200) + audio))
    broken[0] |= 0x10
    caller.sendto(bytes(broken), address(to_caller))
    caller.sendto(rtp(8, 3, 1320, audio), address(to_caller))

    packets = await heard(target, 2)

    assert [p[12:] for p in packets] == [audio.translate(TRANSCODE[(8, 0)])] * 2
    assert packets[0][0] & 0x30 == 0  # no extension, no padding of the other leg's
    assert to_caller.received.packets == 2


# --- hold (issue 58) ------------------------------------------------------------------------------
async def test_a_held_stream_sends_nothing_and_its_clock_runs_on():
    far_end = phone()
    stream = RtpStream(payload_type=8)
    await stream.open("127.0.0.1", 0)
    stream.expect(*far_end.getsockname())
    try:
        stream.hold(True)
        await stream.play(b"\x10" * 160 * 3)  # played out, unheard
        assert stream.sent_packets == 0
        stream.hold(False)
        await stream.play(b"\x20" * 160)

        [packet] = await heard(far_end, 1)
        assert packet[12:] == b"\x20" * 160
        # Three frames of 20 ms went by unsent: the timestamp says so.
        assert stream.timestamp == (struct.unpack("!I", packet[4:8])[0] + 160) & 0xFFFFFFFF
    finally:
        stream.close()
        far_end.close()


async def test_a_bridged_end_that_holds_has_the_other_hear_the_music_until_it_resumes(bridge):
    caller, to_caller, to_target, target = bridge
    music = hold_music(8)

    to_target.hold(True)  # the target put the call on hold
    target.sendto(rtp(0, 1, 0, b"\x20" * 160), address(to_target))  # its own music: not passed
    caller.sendto(rtp(8, 1, 0, b"\x30" * 160), address(to_caller))  # nothing goes to the target
    packets = await heard(caller, 5)

    assert [p[12:] for p in packets] == [music[i * 160 : (i + 1) * 160] for i in range(5)]
    assert to_caller.relayed_packets == 0 and to_target.sent_packets == 0

    to_target.hold(False)  # resumed: the bridge relays again, and the music stops
    assert to_caller.music is None
    audio = b"\x40" * 160
    target.sendto(rtp(0, 2, 160, audio), address(to_target))
    relayed = await _first(caller, lambda p: p[12:] == audio.translate(TRANSCODE[(0, 8)]))
    assert relayed and to_caller.relayed_packets == 1


async def test_the_music_stops_with_the_bridge(bridge):
    caller, to_caller, to_target, target = bridge
    to_caller.hold(True)
    assert to_target.music is not None

    to_caller.bridge = to_target.bridge = None

    assert to_target.music is None


async def _first(sock: socket.socket, wanted) -> bytes:
    """The first packet `sock` hears that is `wanted` (music still on its way is passed)."""
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(5):
        while not wanted(packet := await loop.sock_recv(sock, 2048)):
            pass
    return packet
