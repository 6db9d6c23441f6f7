"""The browser's leg (issue 43, its media): the agent's WebRTC peer (telephony/webrtc) against
aiortc as the browser, bridged to a SIP leg's RtpStream whose far end is a UDP socket of the
test's. G.711 crosses unchanged (or translated PCMU <-> PCMA by table), both ways; hostile
offers are refused with a sentence before the WebRTC stack reads them."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import itertools
import math
import socket
import struct

import av
import pytest

from core.webrtc import MAX_SDP_BYTES, OfferRefused, ice_servers, offer_problem
from harness.ports import free_rtp_range
from telephony.sip.rtp import FRAME_SAMPLES, LINEAR, TRANSCODE, RtpStream, hold_music
from telephony.webrtc.leg import BrowserLeg
from tests.telephony.browser_peer import BROWSER_SAYS, PHONE_SAYS, Browser, an_offer, until

pytestmark = pytest.mark.timeout(60)


class Phone:
    """A SIP leg's RtpStream on loopback, and the far end's UDP socket it talks to."""

    def __init__(self, payload_type: int) -> None:
        self.stream = RtpStream(payload_type)
        self.far = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.far.bind(("127.0.0.1", 0))
        self.far.setblocking(False)

    async def open(self) -> None:
        await self.stream.open("127.0.0.1", 0)
        self.stream.expect(*self.far.getsockname())

    def say(self, sequence: int, samples: list[int] | None = None) -> None:
        """PHONE_SAYS, or the 16-bit `samples` (160) in the stream's G.711."""
        header = struct.pack("!BBHII", 0x80, self.stream.payload_type, sequence, 160 * sequence, 7)
        payload = PHONE_SAYS if samples is None else pcmu(samples)
        self.far.sendto(header + payload, self.stream.sock.get_extra_info("sockname"))

    def heard(self) -> list[tuple[int, bytes]]:
        packets = []
        while True:
            try:
                packet = self.far.recv(2048)
            except BlockingIOError:
                return packets
            packets.append((packet[1] & 0x7F, packet[12:]))

    def close(self) -> None:
        self.stream.close()
        self.far.close()


async def both_talk(browser: Browser, phone: Phone) -> list[tuple[int, bytes]]:
    """Each side speaks, 20 ms a frame, until each has heard at least ten of the other's
    frames: what the phone heard (the browser keeps its own in `received`)."""
    heard_by_phone: list[tuple[int, bytes]] = []
    for n in range(1, 200):
        phone.say(n)
        browser.track.push(BROWSER_SAYS)
        heard_by_phone += phone.heard()
        if len(browser.received) >= 10 and len(heard_by_phone) >= 10:
            break
        await asyncio.sleep(0.02)
    return heard_by_phone + phone.heard()


@pytest.mark.parametrize(
    ("phone_codec", "fast_path"),
    [(0, True), (8, True), (8, False)],
    ids=["pcmu-phone", "pcma-phone", "pcma-phone-aiortc-path"],
)
async def test_g711_crosses_the_bridge_both_ways(settings, phone_codec, fast_path):
    # WEBRTC_FAST_PATH off (its off switch): the same audio crosses on aiortc's own path.
    settings.WEBRTC_FAST_PATH = fast_path
    browser, leg, phone = Browser(), BrowserLeg(label="test"), Phone(phone_codec)
    try:
        await phone.open()
        answer = await leg.answer(await browser.offer())
        audio = next(line for line in answer.splitlines() if line.startswith("m=audio "))
        assert set(audio.split()[3:]) <= {"0", "8"}, audio  # G.711 alone: nothing to transcode
        await browser.take(answer)
        await until(lambda: leg.pc.connectionState == "connected", "the DTLS-SRTP connection")
        # RTP takes the short path (telephony/webrtc/fastpath), unless it is switched off.
        assert (leg.stream.fast is not None) == fast_path
        leg.stream.bridge, phone.stream.bridge = phone.stream, leg.stream
        tapped: list[tuple[int, bytes]] = []  # a recorder's tap on the tab (issue 58)
        leg.stream.on_bridged = lambda payload, payload_type: tapped.append((payload_type, payload))

        heard_by_phone = await both_talk(browser, phone)

        browser_codec = leg.stream.payload_type
        assert browser_codec in (0, 8)
        assert len(browser.received) >= 10 and len(heard_by_phone) >= 10
        to_browser = TRANSCODE.get((phone_codec, browser_codec))
        expected = PHONE_SAYS.translate(to_browser) if to_browser else PHONE_SAYS
        assert set(browser.received) == {(browser_codec, expected)}
        to_phone = TRANSCODE.get((browser_codec, phone_codec))
        expected = BROWSER_SAYS.translate(to_phone) if to_phone else BROWSER_SAYS
        assert set(heard_by_phone) == {(phone_codec, expected)}
        # The recorder hears the tab as it came, decrypted, on either path, every frame.
        assert set(tapped) == {(browser_codec, BROWSER_SAYS)}
        assert len(tapped) >= len(heard_by_phone)
    finally:
        await leg.close()
        await browser.pc.close()
        phone.close()


async def test_a_phone_that_speaks_before_the_tab_connects_is_heard_once_it_has():
    # A callee that speaks as it answers (a call from the browser answered before the tab's
    # connection is up): the bridge relays to the leg before it connects. What comes after
    # the connection reaches the tab, every frame: nothing went out on aiortc's path first
    # whose RTP sequence the fast path's would fall behind (the tab's SRTP drops such
    # packets as replays).
    browser, leg, phone = Browser(), BrowserLeg(label="test"), Phone(0)
    try:
        await phone.open()
        answer = await leg.answer(await browser.offer(), law=0)
        leg.stream.bridge, phone.stream.bridge = phone.stream, leg.stream
        for n in range(1, 6):  # before the tab has even the answer
            phone.say(n)
            await asyncio.sleep(0.02)
        await browser.take(answer)
        n = 6
        while leg.pc.connectionState != "connected" and n < 500:
            phone.say(n)
            n += 1
            await asyncio.sleep(0.02)
        connected = n
        for n in range(connected, connected + 50):
            phone.say(n)
            await asyncio.sleep(0.02)
        await until(lambda: len(browser.received) >= 45, "the phone's frames in the tab")
        assert set(browser.received) == {(0, PHONE_SAYS)}
    finally:
        await leg.close()
        await browser.pc.close()
        phone.close()


@pytest.mark.parametrize("phone_codec", [0, 8], ids=["pcmu-phone", "pcma-phone"])
async def test_a_browser_offering_both_laws_is_answered_in_the_phone_legs_and_nothing_is_converted(
    phone_codec,
):
    """docs/telephony.md's "no audio is transcoded": a tab that offers PCMU and PCMA (PCMU
    first, as browsers do) is answered in the phone leg's law, and what each side says
    reaches the other byte for byte, in that law (issue 55)."""
    browser, leg, phone = Browser(), BrowserLeg(label="test"), Phone(phone_codec)
    try:
        await phone.open()
        offer = await browser.offer()
        assert offer.index("PCMU/8000") < offer.index("PCMA/8000")
        answer = await leg.answer(offer, law=phone_codec)
        audio = next(line for line in answer.splitlines() if line.startswith("m=audio "))
        assert audio.split()[3] == str(phone_codec), audio
        assert leg.stream.payload_type == phone_codec
        await browser.take(answer)
        await until(lambda: leg.pc.connectionState == "connected", "the DTLS-SRTP connection")
        leg.stream.bridge, phone.stream.bridge = phone.stream, leg.stream
        tapped: list[tuple[int, bytes]] = []  # a recorder's tap on the tab (issue 58)
        leg.stream.on_bridged = lambda payload, payload_type: tapped.append((payload_type, payload))

        heard_by_phone = await both_talk(browser, phone)

        assert set(browser.received) == {(phone_codec, PHONE_SAYS)}
        assert set(heard_by_phone) == {(phone_codec, BROWSER_SAYS)}
    finally:
        await leg.close()
        await browser.pc.close()
        phone.close()


HOSTILE = {
    "not text": lambda sdp: 42,
    "oversized": lambda sdp: sdp + "a=x:" + "y" * MAX_SDP_BYTES + "\r\n",
    "NUL": lambda sdp: sdp.replace("v=0", "v=0\x00", 1),
    "a lone surrogate": lambda sdp: sdp + "a=x:\udc80\r\n",
    "no version": lambda sdp: sdp.replace("v=0\r\n", "", 1),
    "a line of no type": lambda sdp: sdp + "garbage\r\n",
    "no audio": lambda sdp: sdp.replace("m=audio", "m=video"),
    "no fingerprint": lambda sdp: "\r\n".join(
        line for line in sdp.split("\r\n") if not line.startswith("a=fingerprint")
    ),
    "no ICE": lambda sdp: "\r\n".join(
        line for line in sdp.split("\r\n") if not line.startswith("a=ice-pwd")
    ),
    "no codec of Relay's": lambda sdp: (
        sdp.replace("PCMU/8000", "X-PCMU/8000").replace("PCMA/8000", "X").replace("opus/", "X/")
    ),
    "a broken media line": lambda sdp: sdp.replace("m=audio ", "m=audio nine ", 1),
}


def tone(hertz: float, frame: int) -> list[int]:
    """20 ms of a sine at `hertz` (frame number `frame`), as 8 kHz 16-bit samples."""
    return [
        int(8000 * math.sin(2 * math.pi * hertz * (frame * 160 + n) / 8000)) for n in range(160)
    ]


def audio_frame(samples: list[int]) -> av.AudioFrame:
    """8 kHz 16-bit mono `samples` as PyAV's frame, what a microphone's track yields."""
    frame = av.AudioFrame(format="s16", layout="mono", samples=len(samples))
    frame.planes[0].update(struct.pack(f"<{len(samples)}h", *samples))
    frame.sample_rate = 8000
    return frame


def pcmu(samples: list[int]) -> bytes:
    encoder = av.CodecContext.create("pcm_mulaw", "w")
    encoder.sample_rate, encoder.layout, encoder.format = 8000, "mono", "s16"
    return b"".join(bytes(packet) for packet in encoder.encode(audio_frame(samples)))


def linear(frame: av.AudioFrame) -> list[int]:
    return list(struct.unpack(f"<{frame.samples}h", bytes(frame.planes[0])[: 2 * frame.samples]))


def pitch(samples: list[int], rate: int) -> float:
    """The frequency of a pure tone in `samples`, from how often it crosses zero."""
    crossings = sum(1 for a, b in itertools.pairwise(samples) if (a < 0) != (b < 0))
    return crossings / 2 / (len(samples) / rate)


async def test_a_browser_that_offers_opus_alone_is_answered_with_opus_and_both_hear_the_other():
    # No G.711 in the offer: the agent answers Opus and transcodes, each way. The browser's
    # 440 Hz reaches the phone as PCMU, the phone's 1 kHz reaches the browser as Opus.
    browser, leg, phone = Browser(codecs=("audio/opus",)), BrowserLeg(label="test"), Phone(0)
    decoder = av.CodecContext.create("libopus", "r")
    decoder.sample_rate, decoder.layout, decoder.format = 48000, "mono", "s16"
    try:
        await phone.open()
        offer = await browser.offer()
        assert "PCMU/8000" not in offer and "opus/48000" in offer
        answer = await leg.answer(offer)
        rtpmaps = [line for line in answer.splitlines() if line.startswith("a=rtpmap:")]
        assert [line.split()[1] for line in rtpmaps] == ["opus/48000/2"], rtpmaps
        await browser.take(answer)
        await until(lambda: leg.pc.connectionState == "connected", "the DTLS-SRTP connection")
        leg.stream.bridge, phone.stream.bridge = phone.stream, leg.stream
        tapped: list[tuple[int, bytes]] = []  # a recorder's tap on the tab (issue 58)
        leg.stream.on_bridged = lambda payload, payload_type: tapped.append((payload_type, payload))

        heard_by_phone: list[tuple[int, bytes]] = []
        for n in range(1, 400):
            phone.say(n, tone(1000, n))
            browser.track.push(audio_frame(tone(440, n)))
            heard_by_phone += phone.heard()
            if len(browser.received) >= 50 and len(heard_by_phone) >= 50:
                break
            await asyncio.sleep(0.02)

        assert {pt for pt, _ in heard_by_phone} == {0}  # the phone's own PCMU
        samples = [
            struct.unpack("<h", LINEAR[0][code])[0]
            for _, payload in heard_by_phone[-25:]
            for code in payload
        ]
        assert 400 < pitch(samples, 8000) < 480
        # The recorder hears the tab transcoded, as the phone does: the same PCMU frames.
        assert [payload for _, payload in tapped[: len(heard_by_phone)]] == [
            payload for _, payload in heard_by_phone
        ]
        assert {pt for pt, _ in tapped} == {0}
        opus_type = leg.stream.payload_type
        assert {pt for pt, _ in browser.received} == {opus_type}
        decoded = [
            sample
            for _, payload in browser.received[-25:]
            for frame in decoder.decode(av.Packet(payload))
            for sample in linear(frame)
        ]
        assert 950 < pitch(decoded, 48000) < 1050
    finally:
        await leg.close()
        await browser.pc.close()
        phone.close()


@pytest.mark.parametrize("how", HOSTILE)
async def test_a_hostile_offer_is_refused_with_a_reason_and_the_leg_stays_closable(how):
    offer = HOSTILE[how](await an_offer())
    leg = BrowserLeg(label="test")
    try:
        with pytest.raises(OfferRefused) as refused:
            await leg.answer(offer)
        assert str(refused.value).startswith("the offer")
    finally:
        await leg.close()


async def test_a_real_offer_passes_the_checks():
    assert offer_problem(await an_offer()) is None


async def test_media_is_taken_only_from_the_certificate_the_offer_signalled():
    # The offer as signalled, but with another fingerprint: whoever completes the DTLS
    # handshake is not the tab that signalled it, and nothing it sends is relayed.
    browser, leg, phone = Browser(), BrowserLeg(label="test"), Phone(0)
    try:
        await phone.open()
        offer = await browser.offer()
        line = next(x for x in offer.split("\r\n") if x.startswith("a=fingerprint:sha-256 "))
        digits = line.split()[1]
        forged = digits[:-1] + ("0" if digits[-1] != "0" else "1")
        await browser.take(await leg.answer(offer.replace(digits, forged)))
        leg.stream.bridge, phone.stream.bridge = phone.stream, leg.stream
        for _ in range(25):
            browser.track.push(BROWSER_SAYS)
        await until(lambda: leg.pc.connectionState == "failed", "the DTLS handshake to fail")
        assert leg.stream.heard_packets == 0
        assert phone.heard() == []
    finally:
        await leg.close()
        await browser.pc.close()
        phone.close()


async def test_the_keypad_reaches_the_phone_as_rfc_4733_events_in_its_payload_type():
    leg, phone = BrowserLeg(label="test"), Phone(0)
    try:
        await phone.open()
        phone.stream.dtmf_payload_type = 96  # the phone's telephone-event, not the browser's
        leg.stream.bridge = phone.stream

        await leg.stream.press("5#")

        packets = []
        while True:
            try:
                packets.append(phone.far.recv(2048))
            except BlockingIOError:
                break
        assert {packet[1] & 0x7F for packet in packets} == {96}
        events = [
            (struct.unpack("!I", p[4:8])[0], p[12], bool(p[13] & 0x80), p[14] << 8 | p[15])
            for p in packets
        ]
        starts = sorted({timestamp for timestamp, *_ in events})
        assert len(starts) == 2  # one event each key, each at its own time
        for start, key in zip(starts, (5, 11), strict=True):  # "5", then "#"
            of_key = [e for e in events if e[0] == start]
            assert {event for _, event, _, _ in of_key} == {key}
            durations = [duration for _, _, end, duration in of_key if not end]
            assert durations == sorted(durations) and durations[0] == 160
            ends = [duration for _, _, end, duration in of_key if end]
            assert ends == [durations[-1]] * 3  # the end, three times
        first_packets = [p for p in packets if p[1] & 0x80]
        assert len(first_packets) == 2  # the marker on each key's first packet
    finally:
        await leg.close()
        phone.close()


@pytest.mark.parametrize("phone_codec", [0, 8], ids=["pcmu-phone", "pcma-phone"])
async def test_a_held_browser_has_the_phone_hear_the_music_and_nothing_of_its_own_until_resumed(
    phone_codec,
):
    browser, leg, phone = Browser(), BrowserLeg(label="test"), Phone(phone_codec)
    music = hold_music(phone_codec)
    frames = {music[i : i + FRAME_SAMPLES] for i in range(0, len(music), FRAME_SAMPLES)}
    try:
        await phone.open()
        phone.stream.dtmf_payload_type = 101
        await browser.take(await leg.answer(await browser.offer(), law=phone_codec))
        await until(lambda: leg.pc.connectionState == "connected", "the DTLS-SRTP connection")
        leg.stream.bridge, phone.stream.bridge = phone.stream, leg.stream
        assert len(await both_talk(browser, phone)) >= 10

        leg.stream.hold(True)
        phone.heard()  # what was on its way before the hold
        browser.received.clear()
        await leg.stream.press("1")  # keys pressed on hold are not passed on either
        held: list[tuple[int, bytes]] = []
        for n in range(200, 300):  # both go on talking, as a microphone and a phone do
            phone.say(n)
            browser.track.push(BROWSER_SAYS)
            held += phone.heard()
            if len(held) >= 25:
                break
            await asyncio.sleep(0.02)
        assert len(held) >= 25
        # The phone heard the music on hold alone, in its own law: no word and no key of the
        # browser's; the browser was sent nothing.
        assert {payload_type for payload_type, _ in held} == {phone_codec}
        assert {payload for _, payload in held} <= frames
        assert browser.received == []

        leg.stream.hold(False)
        assert phone.stream.music is None  # the music stops at the resume
        phone.heard()
        resumed = await both_talk(browser, phone)
        assert BROWSER_SAYS in {payload for _, payload in resumed[-5:]}
        assert not {payload for _, payload in resumed[-5:]} & frames
        assert len(browser.received) >= 10
    finally:
        await leg.close()
        await browser.pc.close()
        phone.close()


@pytest.mark.parametrize(
    ("phone_codec", "fast_path"),
    [(8, True), (0, False)],
    ids=["pcma-phone", "pcmu-phone-aiortc-path"],
)
async def test_a_phone_that_holds_has_the_browser_hear_the_music_until_it_resumes(
    settings, phone_codec, fast_path
):
    # The other way round (issue 58): the phone's end holds, as its re-INVITE does; the tab
    # hears Relay's music in its own law, on either path, and the phone again at the resume.
    settings.WEBRTC_FAST_PATH = fast_path
    browser, leg, phone = Browser(), BrowserLeg(label="test"), Phone(phone_codec)
    music = hold_music(phone_codec)
    frames = {music[i : i + FRAME_SAMPLES] for i in range(0, len(music), FRAME_SAMPLES)}
    try:
        await phone.open()
        await browser.take(await leg.answer(await browser.offer(), law=phone_codec))
        await until(lambda: leg.pc.connectionState == "connected", "the DTLS-SRTP connection")
        assert (leg.stream.fast is not None) == fast_path
        leg.stream.bridge, phone.stream.bridge = phone.stream, leg.stream
        assert len(await both_talk(browser, phone)) >= 10

        phone.stream.hold(True)
        before = len(browser.received)
        for n in range(200, 400):  # the phone goes on sending, as a PBX's own music would
            phone.say(n)
            if sum(payload in frames for _, payload in browser.received[before:]) >= 50:
                break
            await asyncio.sleep(0.02)
        held = browser.received[before:]
        # A frame or two of the phone's was on its way; then the music alone, in the tab's
        # law (the phone's: answered in it), none of the phone's words.
        since = next(i for i, (_, payload) in enumerate(held) if payload in frames)
        assert since <= 5, since
        assert {payload_type for payload_type, _ in held} == {phone_codec}
        assert all(payload in frames for _, payload in held[since:])
        assert sum(payload in frames for _, payload in held) >= 50

        phone.stream.hold(False)
        assert leg.stream.music is None  # the music stops at the resume
        await both_talk(browser, phone)
        for n in range(400, 500):  # until what the tab hears is the phone again, alone
            phone.say(n)
            if [payload for _, payload in browser.received[-5:]] == [PHONE_SAYS] * 5:
                break
            await asyncio.sleep(0.02)
        assert [payload for _, payload in browser.received[-5:]] == [PHONE_SAYS] * 5
    finally:
        await leg.close()
        await browser.pc.close()
        phone.close()
    assert leg.stream.music is None


async def test_an_opus_tab_hears_the_number_s_music_transcoded_while_the_phone_holds():
    # The tab speaks Opus alone; the bridge's music is the number's own (music_source, here a
    # 1 kHz tone in PCMU, the law an Opus tab's music is played in): the tab decodes 1 kHz.
    browser, leg, phone = Browser(codecs=("audio/opus",)), BrowserLeg(label="test"), Phone(0)
    decoder = av.CodecContext.create("libopus", "r")
    decoder.sample_rate, decoder.layout, decoder.format = 48000, "mono", "s16"
    asked: list[int] = []

    async def own_music(law: int) -> bytes:
        asked.append(law)
        return b"".join(pcmu(tone(1000, n)) for n in range(50))

    try:
        await phone.open()
        await browser.take(await leg.answer(await browser.offer()))
        await until(lambda: leg.pc.connectionState == "connected", "the DTLS-SRTP connection")
        leg.stream.music_source = phone.stream.music_source = own_music
        leg.stream.bridge, phone.stream.bridge = phone.stream, leg.stream
        for n in range(1, 100):  # the phone speaks (440 Hz) until the tab hears it
            phone.say(n, tone(440, n))
            if len(browser.received) >= 10:
                break
            await asyncio.sleep(0.02)

        phone.stream.hold(True)
        before = len(browser.received)
        for n in range(100, 300):  # the held phone goes on sending its 440 Hz, unheard
            phone.say(n, tone(440, n))
            if len(browser.received) - before >= 60:
                break
            await asyncio.sleep(0.02)
        assert asked == [0]
        decoded = [
            sample
            for _, payload in browser.received[-25:]
            for frame in decoder.decode(av.Packet(payload))
            for sample in linear(frame)
        ]
        assert 950 < pitch(decoded, 48000) < 1050
    finally:
        await leg.close()
        await browser.pc.close()
        phone.close()
    assert leg.stream.music is None  # the leg's close stopped it


async def test_the_legs_candidates_take_ports_of_rtc_port_range_and_the_sip_sockets_do_not():
    ports = free_rtp_range(10)
    browser, leg = Browser(), BrowserLeg(label="test", ports=ports)
    other = RtpStream(0)
    try:
        answer = await leg.answer(await browser.offer())
        await other.open("127.0.0.1", 0)  # asked for the kernel's port, outside any leg

        candidates = [line for line in answer.splitlines() if line.startswith("a=candidate:")]
        assert candidates
        assert all(int(line.split()[5]) in ports for line in candidates), candidates
        assert other.sock.get_extra_info("sockname")[1] not in ports
    finally:
        await leg.close()
        await browser.pc.close()
        other.close()


def test_turn_urls_get_credentials_of_their_own_that_coturn_checks_and_stun_urls_none():
    servers = ice_servers(
        urls=("stun:stun.example.net:3478", "turn:turn.example.net:3478?transport=udp"),
        secret="s3cret",
        ttl=600,
        name="relay-agent",
        now=1_000_000,
    )

    assert servers[0] == {"urls": "stun:stun.example.net:3478"}
    turn = servers[1]
    assert turn["urls"] == ["turn:turn.example.net:3478?transport=udp"]
    assert turn["username"] == "1000600:relay-agent"  # expiry:name
    digest = hmac.new(b"s3cret", b"1000600:relay-agent", hashlib.sha1).digest()
    assert turn["credential"] == base64.b64encode(digest).decode()
    assert "s3cret" not in repr(servers)
    assert ice_servers(urls=("turn:t:3478",), secret="", ttl=60, name="x", now=0) == [
        {"urls": ["turn:t:3478"]}
    ]
