"""RTP for one call (RFC 3550): G.711 sent in 20 ms packets at the pace of a real clock, and
what comes back counted, with its loudness, so that a test (and an operator's log) can tell
that audio really travelled. For voicemail, what comes back can also be recorded (and turned
into a WAV file), and DTMF arrives as RFC 4733 telephone events.

A far end that puts the call on hold (its SDP stops receiving, telephony.sip.dialog) is sent
nothing (`hold`); when its stream is bridged to another, that other party (a phone, or a
browser's tab: `Holding`, shared with telephony.webrtc.leg) hears Relay's music on hold
(telephony.sip.music), or the number's own (`music_source`, issue 58), instead of what the
held end sends, until it resumes.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import struct
import wave
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import cache

import pylibsrtp

from telephony.sip.music import melody

FRAME_SAMPLES = 160  # 20 ms at 8 kHz, one byte per sample in G.711
FRAME_SECONDS = 0.02
SILENCE = {0: b"\xff" * FRAME_SAMPLES, 8: b"\xd5" * FRAME_SAMPLES}


def _ulaw_magnitude(code: int) -> int:
    code = ~code & 0xFF
    exponent, mantissa = (code >> 4) & 0x07, code & 0x0F
    return (((mantissa << 3) + 0x84) << exponent) - 0x84


def _codes(magnitude):
    return [(code, magnitude(code)) for code in range(256)]


def _alaw_magnitude(code: int) -> int:
    code ^= 0x55
    exponent, mantissa = (code >> 4) & 0x07, code & 0x0F
    if exponent == 0:
        return (mantissa << 4) + 8
    return ((mantissa << 4) + 0x108) << (exponent - 1)


# G.711 code -> |sample| / 128 (0..255), so that bytes.translate and sum() measure loudness
# at C speed.
LOUDNESS = {
    0: bytes(min(255, _ulaw_magnitude(c) >> 7) for c in range(256)),
    8: bytes(min(255, _alaw_magnitude(c) >> 7) for c in range(256)),
}
# G.711 code -> its 16-bit linear sample, little-endian (the sign bit is set for positive
# A-law samples and for negative mu-law ones).
LINEAR = {
    0: [struct.pack("<h", -m if c & 0x80 == 0 else m) for c, m in _codes(_ulaw_magnitude)],
    8: [struct.pack("<h", m if c & 0x80 else -m) for c, m in _codes(_alaw_magnitude)],
}


def _ulaw_code(sample: int) -> int:
    """The G.711 mu-law code of a 16-bit linear sample (ITU-T G.711, as Sun's g711.c)."""
    sign = 0x80 if sample < 0 else 0
    magnitude = min(abs(sample), 32635) + 0x84
    exponent = min(7, magnitude.bit_length() - 8)
    mantissa = (magnitude >> (exponent + 3)) & 0x0F
    return ~(sign | exponent << 4 | mantissa) & 0xFF


def _alaw_code(sample: int) -> int:
    """The G.711 A-law code of a 16-bit linear sample."""
    sign = 0x80 if sample >= 0 else 0
    magnitude = min(abs(sample), 32767) >> 3  # 13 bits
    if magnitude < 32:
        exponent, mantissa = 0, magnitude >> 1
    else:
        exponent = magnitude.bit_length() - 5
        mantissa = (magnitude >> exponent) & 0x0F
    return (sign | exponent << 4 | mantissa) ^ 0x55


# (from, to) -> a 256-byte table for bytes.translate: a bridge between a PCMU leg and a PCMA
# leg transcodes each packet at C speed, through the linear sample of each code.
_ENCODE = {0: _ulaw_code, 8: _alaw_code}
TRANSCODE = {
    (source, target): bytes(
        _ENCODE[target](struct.unpack("<h", LINEAR[source][code])[0]) for code in range(256)
    )
    for source, target in ((0, 8), (8, 0))
}


@cache
def hold_music(payload_type: int) -> bytes:
    """Relay's music on hold (telephony.sip.music) in G.711 of `payload_type` (0 or 8)."""
    return bytes(map(_ENCODE[payload_type], melody()))


def g711_in(payload: bytes, payload_type: int, wanted: int) -> bytes | None:
    """`payload` (G.711 of `payload_type`) in the codec of `wanted`: itself, translated
    PCMU <-> PCMA by table, or None when neither is possible (a bridge drops it)."""
    if payload_type == wanted:
        return payload
    table = TRANSCODE.get((payload_type, wanted))
    return None if table is None else payload.translate(table)


LOUD = 2  # mean loudness of a packet above silence: about -42 dBFS
# RFC 4733 event codes of the DTMF keys.
DTMF_KEYS = "0123456789*#ABCD"


def pcm_from_g711(audio: bytes, payload_type: int) -> bytes | None:
    """G.711 audio (`payload_type` 0 or 8) as 16-bit PCM at 8 kHz, mono (little-endian);
    None for any other payload type."""
    table = LINEAR.get(payload_type)
    return None if table is None else b"".join(map(table.__getitem__, audio))


def wav_from_g711(audio: bytes, payload_type: int) -> bytes:
    """G.711 audio (`payload_type` 0 or 8) as a 16-bit PCM WAV file at 8 kHz, mono: what
    every player plays."""
    return wav_from_pcm(pcm_from_g711(audio, payload_type))


def wav_from_pcm(pcm: bytes) -> bytes:
    """8 kHz 16-bit mono PCM (as LINEAR decodes G.711) as a WAV file."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(pcm)
    return buffer.getvalue()


@dataclass
class ReceivedAudio:
    packets: int = 0
    loud_packets: int = 0  # packets whose mean loudness is above silence
    loudness_total: int = 0
    payload_types: set = field(default_factory=set)

    @property
    def seconds(self) -> float:
        return round(self.packets * FRAME_SECONDS, 2)

    @property
    def speech_seconds(self) -> float:
        return round(self.loud_packets * FRAME_SECONDS, 2)


def _payload(packet: bytes) -> bytes | None:
    """An RTP packet's payload (RFC 3550 §5.1, §5.3.1): after the fixed header, its CSRC list
    and any header extension, and before any padding; None when the header says more than
    the packet holds."""
    start = 12 + 4 * (packet[0] & 0x0F)
    if packet[0] & 0x10:  # X: an extension, its length in 32-bit words after 4 bytes
        if len(packet) < start + 4:
            return None
        start += 4 + 4 * struct.unpack("!H", packet[start + 2 : start + 4])[0]
    end = len(packet)
    if packet[0] & 0x20:  # P: the last byte counts the padding, itself included
        end -= packet[-1]
    if end < start:
        return None
    return packet[start:end]


class Holding:
    """The hold of one end of a bridge (RFC 3264 §8.4), shared by a SIP leg's RtpStream and a
    browser's stream (telephony.webrtc.leg): while `held`, nothing is sent to this end and
    what it sends is not relayed; the stream it is bridged to plays the music on hold
    (`start_music`, on either kind of stream: a phone hears it, and so does a tab) until it
    resumes or the bridge ends. Subclasses set `_bridge` and `held` and honour `held` where
    they send and relay, and send a frame of what `play` plays with `_send`."""

    _bridge = None
    held = False
    # The music played here in place of Relay's own (the number's, issue 58): awaited as the
    # music starts, its G.711 in the law asked; None (or no source): Relay's own.
    music_source: Callable[[int], Awaitable[bytes | None]] | None = None
    music: asyncio.Task | None = None  # the music playing here

    @property
    def bridge(self):
        """The stream this one's audio is relayed to (a forwarded call's other leg)."""
        return self._bridge

    @bridge.setter
    def bridge(self, other) -> None:
        # A held stream's music plays on the stream it is bridged to while the bridge lasts.
        old, self._bridge = self._bridge, other
        if self.held and old is not None and old is not other:
            old.stop_music()
        if self.held and other is not None and old is not other:
            other.start_music()

    def hold(self, held: bool) -> None:
        """This end takes no audio (`held`), or takes it again. Bridged, the other party
        hears the music meanwhile."""
        if held == self.held:
            return
        self.held = held
        if self._bridge is not None:
            (self._bridge.start_music if held else self._bridge.stop_music)()

    @property
    def law(self) -> int:
        """The G.711 payload type of what `play` sends (the music too): this stream's."""
        return self.payload_type

    def start_music(self) -> None:
        """Play the music on hold, over and over, until stop_music."""
        if self.music is None or self.music.done():
            self.music = asyncio.get_running_loop().create_task(self._play_music())

    async def _play_music(self) -> None:
        law = self.law
        audio = None
        if self.music_source is not None:
            audio = await self.music_source(law)
        if not audio:
            # Made once per law, off the loop (a fraction of a second the calls never feel).
            audio = await asyncio.to_thread(hold_music, law)
        while True:
            await self.play(audio)

    def stop_music(self) -> None:
        if self.music is not None:
            self.music.cancel()
            self.music = None

    async def play(self, audio: bytes) -> None:
        """Send `audio` (G.711 of `law`) in real time, one frame per 20 ms
        against this stream's own fixed schedule (the loop's monotonic clock from the first
        frame), so that a late wake-up never stretches the message; return once its last
        frame has had its 20 ms. The loop's Pacer sends the frames of every stream
        playing, each through the stream's `_send(frame, marker=...)`."""
        loop = asyncio.get_running_loop()
        silence = SILENCE.get(self.law, b"\x00" * FRAME_SAMPLES)
        frames = [audio[i : i + FRAME_SAMPLES] for i in range(0, len(audio), FRAME_SAMPLES)]
        if frames and len(frames[-1]) < FRAME_SAMPLES:
            frames[-1] += silence[len(frames[-1]) :]
        if not frames:
            return
        playout = _Playout(self, frames, loop.time(), loop.create_future())
        pacer = Pacer.of(loop)
        pacer.add(playout)
        try:
            await playout.done
        finally:
            pacer.playing.discard(playout)


class RtpStream(Holding, asyncio.DatagramProtocol):
    """A bound RTP socket: `play(audio)` sends it and returns when the last packet has left."""

    def __init__(self, payload_type: int, *, latching: bool = True) -> None:
        self.payload_type = payload_type
        # Where audio goes: the SDP's address (`expect`), then the source latched onto.
        self.remote: tuple[str, int] | None = None
        self.latching = latching
        self.latch = Latch()
        self.sock: asyncio.DatagramTransport | None = None
        self.received = ReceivedAudio()
        self.sent_packets = 0
        # Voicemail: audio in this stream's codec is appended while `recording` is not None,
        # and `last_sound` is the loop time of the last loud packet (silence detection).
        self.recording: bytearray | None = None
        self.last_sound = 0.0
        # DTMF (RFC 4733): each key press is handed once to `on_dtmf`.
        self.dtmf_payload_type: int | None = None
        self.on_dtmf: Callable[[str], None] | None = None
        # Machine detection (telephony.detection): each packet's audio and payload type as it
        # arrives, while someone listens.
        self.on_audio: Callable[[bytes, int], None] | None = None
        self._dtmf_active: tuple[int, int] | None = None  # (timestamp, event) of a press
        self._dtmf_ended: tuple[int, int] | None = None
        # SRTP (RFC 3711), once keys are agreed (`secure`): libsrtp protects what leaves and
        # authenticates what arrives; a packet that fails is dropped before anything reads it.
        self.srtp_out: pylibsrtp.Session | None = None
        self.srtp_in: pylibsrtp.Session | None = None
        # Random starts (RFC 3550 §5.1), from the OS: they make packets hard to forge.
        self.sequence, self.timestamp, self.ssrc = struct.unpack("!HII", os.urandom(10))
        # A forwarded call: what this stream hears is relayed to the other leg's stream
        # (`relay`), which sends it on in its own codec, payload types, sequence and SSRC.
        self._bridge: RtpStream | None = None
        self.relayed_packets = 0
        # A recorded bridge (telephony.sip.recorder): what this end says while bridged.
        self.on_bridged: Callable[[bytes, int], None] | None = None
        # Hold (RFC 3264 §8.4): the far end takes no audio now; nothing is sent to it, and
        # what it sends is not relayed: the stream it is bridged to plays its music instead
        # (Holding: `music`, from `music_source` or Relay's own).
        self.held = False
        self.music: asyncio.Task | None = None
        self.music_source: Callable[[int], Awaitable[bytes | None]] | None = None
        self.remote_key: bytes | None = None  # the far end's SRTP key (`secure`)
        # The other leg's SSRC -> what is added to its timestamps to make ours: the timing
        # of what is relayed (gaps, an RFC 4733 event's duration) is kept as it came.
        self._timestamp_offsets: dict[int, int] = {}

    def secure(self, *, local_key: bytes, remote_key: bytes) -> None:
        """Encrypt with `local_key` and accept only what `remote_key` authenticates
        (AES_CM_128_HMAC_SHA1_80, keys and salts of 30 bytes)."""
        self.srtp_out = pylibsrtp.Session(
            pylibsrtp.Policy(key=local_key, ssrc_type=pylibsrtp.Policy.SSRC_ANY_OUTBOUND)
        )
        self.rekey(remote_key)

    def rekey(self, remote_key: bytes) -> None:
        """Accept only what `remote_key` authenticates from now on (a far end's new key in a
        re-INVITE, RFC 4568 §7.1.4); what Relay sends keeps its key."""
        self.remote_key = remote_key
        self.srtp_in = pylibsrtp.Session(
            pylibsrtp.Policy(key=remote_key, ssrc_type=pylibsrtp.Policy.SSRC_ANY_INBOUND)
        )

    def stop_music(self) -> None:
        super().stop_music()
        # What is relayed from now on is timed from where the music left off.
        self._timestamp_offsets.clear()

    def expect(self, host: str, port: int) -> None:
        """Media is to come from, and go to, `host`:`port` (the far end's SDP). From now on
        only packets the latch admits are heard: keys and audio from a third party must not
        reach a mailbox or a message."""
        self.remote = (host, port)
        self.latch.start((host, port), enabled=self.latching)

    async def open(self, host: str, port: int) -> None:
        loop = asyncio.get_running_loop()
        self.sock, _ = await loop.create_datagram_endpoint(lambda: self, local_addr=(host, port))

    def datagram_received(self, data: bytes, addr) -> None:
        if len(data) < 12 or data[0] >> 6 != 2:
            return
        if self.remote is None:
            return  # no SDP yet: nobody is expected
        if self.srtp_in is not None:
            try:
                data = self.srtp_in.unprotect(data)
            except pylibsrtp.Error:
                return  # forged, replayed or damaged: never heard, never latched onto
        source = (addr[0], addr[1])
        admitted = self.latch.admit(
            source,
            struct.unpack("!I", data[8:12])[0],
            struct.unpack("!H", data[2:4])[0],
            asyncio.get_running_loop().time(),
        )
        if not admitted:
            return
        if self.latch.source is not None and self.remote != self.latch.source:
            self.remote = self.latch.source  # symmetric RTP: audio goes back where it came from
        payload_type = data[1] & 0x7F
        payload = _payload(data)
        if payload is None:
            return  # its header says more than the packet holds
        event = payload_type == self.dtmf_payload_type and self.dtmf_payload_type is not None
        if self._bridge is not None and not self.held:  # a held end's sound is not passed on
            self._bridge.relay(data, payload, event=event)
            if self.on_bridged is not None and not event:
                self.on_bridged(payload, payload_type)
        if event:
            self._telephone_event(struct.unpack("!I", data[4:8])[0], payload)
            return
        self.received.packets += 1
        self.received.payload_types.add(payload_type)
        table = LOUDNESS.get(payload_type)
        if table is not None and self._bridge is None:  # a bridge only relays: nobody listens
            loudness = sum(payload.translate(table))
            self.received.loudness_total += loudness
            if payload and loudness / len(payload) >= LOUD:
                self.received.loud_packets += 1
                self.last_sound = asyncio.get_running_loop().time()
            if self.recording is not None and payload_type == self.payload_type:
                self.recording += payload
            if self.on_audio is not None:
                self.on_audio(payload, payload_type)

    def _telephone_event(self, timestamp: int, payload: bytes) -> None:
        """One RFC 4733 packet: a press is reported on its first packet. Its end packet is
        sent three times, and a press whose first packets were lost is reported on its end;
        the same key pressed again is a new press even at the same timestamp (a sender that
        replays one recorded press, as SIPp does), because the last one had ended."""
        if len(payload) < 4 or payload[0] >= len(DTMF_KEYS):
            return
        press, ended = (timestamp, payload[0]), bool(payload[1] & 0x80)
        if not ended:
            if press != self._dtmf_active:
                self._dtmf_active, self._dtmf_ended = press, None
                self._dtmf(press[1])
            return
        if press == self._dtmf_active:
            self._dtmf_active, self._dtmf_ended = None, press
        elif press != self._dtmf_ended:
            self._dtmf_ended = press
            self._dtmf(press[1])

    def _dtmf(self, event: int) -> None:
        if self.on_dtmf is not None:
            self.on_dtmf(DTMF_KEYS[event])

    def error_received(self, exc) -> None:
        pass  # ICMP for a far end that stopped listening: the call's end is SIP's to say

    def _send(self, payload: bytes, *, marker: bool = False) -> None:
        # On hold, a message goes on at its pace unheard: its clock runs as if it were sent.
        if self._emit(self.payload_type, self.timestamp, payload, marker=marker) or self.held:
            self.timestamp = (self.timestamp + FRAME_SAMPLES) & 0xFFFFFFFF

    def _emit(self, payload_type: int, timestamp: int, payload: bytes, *, marker: bool) -> bool:
        if self.sock is None or self.remote is None or self.held:
            return False
        header = struct.pack(
            "!BBHII",
            0x80,
            (0x80 if marker else 0) | payload_type,
            self.sequence,
            timestamp,
            self.ssrc,
        )
        packet = header + payload
        if self.srtp_out is not None:
            packet = self.srtp_out.protect(packet)
        self.sock.sendto(packet, self.remote)
        self.sequence = (self.sequence + 1) & 0xFFFF
        self.sent_packets += 1
        return True

    def relay(self, packet: bytes, payload: bytes, *, event: bool) -> None:
        """Send on a packet the other leg of a bridge heard (plain RTP, and its payload): G.711
        transcoded when the legs' codecs differ (TRANSCODE), an RFC 4733 event with this
        leg's telephone-event payload type (dropped when this leg has none), anything else
        dropped. Header extensions and padding are the other leg's and stay there."""
        payload_type = packet[1] & 0x7F
        if event:
            payload_type = self.dtmf_payload_type
            if payload_type is None:
                return
        elif payload_type != self.payload_type:
            payload = g711_in(payload, payload_type, self.payload_type)
            if payload is None:
                return
            payload_type = self.payload_type
        timestamp, ssrc = struct.unpack("!II", packet[4:12])
        offset = self._timestamp_offsets.get(ssrc)
        if offset is None:
            if len(self._timestamp_offsets) >= 8:  # a peer that keeps changing SSRC
                self._timestamp_offsets.clear()
            offset = self._timestamp_offsets[ssrc] = (self.timestamp - timestamp) & 0xFFFFFFFF
        timestamp = (timestamp + offset) & 0xFFFFFFFF
        if self._emit(payload_type, timestamp, payload, marker=bool(packet[1] & 0x80)):
            self.relayed_packets += 1
            if not event:
                self.timestamp = (timestamp + len(payload)) & 0xFFFFFFFF

    def record(self) -> None:
        """Start recording what arrives in this stream's codec; silence is timed from now."""
        self.recording = bytearray()
        self.last_sound = asyncio.get_running_loop().time()

    def close(self) -> None:
        self.stop_music()
        if self.sock is not None:
            self.sock.close()
            self.sock = None


EARLY_SECONDS = 0.001  # a frame may leave this much before its time, with others due with it


class _Playout:
    """One `play`: the stream, its frames, when its first frame was due, the next frame, and
    the future that completes when the last frame's time is over."""

    __slots__ = ("stream", "frames", "start", "index", "done")

    def __init__(self, stream, frames: list[bytes], start: float, done: asyncio.Future) -> None:
        self.stream, self.frames, self.start, self.done = stream, frames, start, done
        self.index = 0


class Pacer:
    """Sends the frames of every stream playing on one event loop, from one task: each frame
    at its own stream's time (start + index x 20 ms, never a sum of sleeps), at most
    EARLY_SECONDS early so that frames due together leave in one wake-up. One task instead
    of a sleeping task per stream: with 200 calls playing, a few hundred wake-ups a second
    instead of 10,000, and the loop keeps time."""

    _pacers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.playing: set[_Playout] = set()
        self.task: asyncio.Task | None = None
        self.wake = asyncio.Event()

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> Pacer:
        pacer = cls._pacers.get(loop)
        if pacer is None:
            pacer = cls._pacers[loop] = cls(loop)
        return pacer

    def add(self, playout: _Playout) -> None:
        self.playing.add(playout)
        self.wake.set()
        if self.task is None or self.task.done():
            self.task = self.loop.create_task(self._run())

    async def _run(self) -> None:
        loop = self.loop
        while self.playing:
            self.wake.clear()
            now = loop.time()
            soonest = now + 1.0
            for playout in list(self.playing):
                soonest = min(soonest, self._send_due(playout, now))
            if not self.playing:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self.wake.wait(), max(0.0, soonest - EARLY_SECONDS - loop.time())
                )

    def _send_due(self, playout: _Playout, now: float) -> float:
        """Send what of `playout` is due by now (and EARLY_SECONDS); when its next frame, or
        its end, is due. A finished or abandoned playout leaves the pacer."""
        if playout.done.done():
            self.playing.discard(playout)
            return now + 1.0
        frames, stream = playout.frames, playout.stream
        try:
            while playout.index < len(frames):
                due = playout.start + playout.index * FRAME_SECONDS
                if due > now + EARLY_SECONDS:
                    return due
                stream._send(frames[playout.index], marker=playout.index == 0)
                playout.index += 1
        except Exception as exc:  # a stream that cannot send ends its own play, not others'
            self.playing.discard(playout)
            playout.done.set_exception(exc)
            return now + 1.0
        end = playout.start + len(frames) * FRAME_SECONDS
        if end <= now:
            self.playing.discard(playout)
            playout.done.set_result(None)
            return now + 1.0
        return end


LATCH_SECONDS = 5.0  # a source can be latched onto only this long after the first packet
LATCH_PACKETS = 3  # in-sequence packets of one SSRC from one source before it is latched


class Latch:
    """Symmetric RTP (RFC 4961's idea, as Asterisk's `rtp_symmetric` and FreeSWITCH's
    auto-adjust do it): which source a stream's packets are taken from.

    Before anything is latched, packets from the SDP address are heard. A source (address
    and port) that sends LATCH_PACKETS packets of one SSRC with consecutive sequence numbers
    within LATCH_SECONDS of the stream's first packet (from anyone) is latched onto, whether
    it is the SDP address or another one (a caller behind NAT sends from an address its SDP
    does not name). From then on only that source is heard and every other one is dropped;
    so is every other source once the window has closed. With latching off, only the SDP
    address is ever heard (its host, whatever the port).
    """

    def __init__(self) -> None:
        self.expected: tuple[str, int] | None = None
        self.enabled = True
        self.opened: float | None = None  # when the first packet came
        self.source: tuple[str, int] | None = None
        # Each candidate source: (its SSRC, the last sequence number, packets in sequence).
        self.candidates: dict[tuple[str, int], tuple[int, int, int]] = {}

    def start(self, expected: tuple[str, int], *, enabled: bool) -> None:
        self.expected, self.enabled, self.opened = expected, enabled, None
        self.source = None
        self.candidates.clear()

    def admit(self, source: tuple[str, int], ssrc: int, sequence: int, now: float) -> bool:
        """Whether a packet from `source` with `ssrc` and `sequence` is to be heard."""
        if self.expected is None:
            return False
        if not self.enabled:
            return source[0] == self.expected[0]
        if self.source is not None:
            # The latched source may change its SSRC (RFC 4733 events from a separate
            # generator, or a new media server behind the same address); no one else is heard.
            return source == self.source
        if self.opened is None:
            self.opened = now
        if now - self.opened <= LATCH_SECONDS and self._learn(source, ssrc, sequence):
            self.source = source
            self.candidates.clear()
            return True
        return source == self.expected

    def _learn(self, source: tuple[str, int], ssrc: int, sequence: int) -> bool:
        known = self.candidates.get(source)
        count = 1
        if known is not None and known[0] == ssrc and sequence == (known[1] + 1) & 0xFFFF:
            count = known[2] + 1
        if len(self.candidates) < 16 or known is not None:  # a flood of sources learns nothing
            self.candidates[source] = (ssrc, sequence, count)
        return count >= LATCH_PACKETS
