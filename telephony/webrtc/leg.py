"""A browser's leg (issue 43): the agent answers the browser's offer as its WebRTC peer
(aiortc: ICE, DTLS-SRTP) and relays G.711 through the same bridge as a SIP leg.

`BrowserLeg.stream` has the relay interface of a SIP leg's `RtpStream` (`bridge`, `relay`,
`payload_type`, `relayed_packets`, `on_bridged`), so `telephony.dial` bridges it to a SIP leg,
and records that bridge (issue 58), as it does two SIP legs. Audio is not transcoded on the
common path: when the browser offers G.711 the answer keeps G.711 alone, what the SIP leg
relays goes to aiortc as encoded packets (its encoder only packs them), and what the browser
sends is taken off aiortc's receiver as RTP, before its decoder, and relayed on (PCMU and PCMA
translated by table where the legs differ, as between two SIP legs). A browser that offers
Opus and no G.711 is answered with Opus, and its audio transcoded (OpusTranscoder): the SIP
leg always speaks G.711.
"""

from __future__ import annotations

import asyncio
import contextlib
import fractions
import logging
import os
import struct
from collections.abc import Callable

import av
from aiortc import (
    RTCConfiguration,
    RTCIceServer,
    RTCPeerConnection,
    RTCRtpCodecCapability,
    RTCRtpSender,
    RTCSessionDescription,
)
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
from aiortc.sdp import candidate_from_sdp
from av.audio.resampler import AudioResampler
from channels.layers import get_channel_layer
from django.conf import settings

from core.webrtc import G711, OfferRefused, ice_servers_for, offer_problem, offered_codec
from telephony.sip.race import race, won
from telephony.sip.rtp import DTMF_KEYS, Holding, g711_in
from telephony.webrtc.fastpath import FastPath, hear_before_decoder
from telephony.webrtc.ports import in_range

logger = logging.getLogger(__name__)

TIME_BASE = fractions.Fraction(1, 8000)
QUEUED_FRAMES = 25  # half a second: past it the oldest relayed frame is dropped, not delayed
OPUS_MIME = "audio/opus"
KEY_MS, KEY_GAP_MS = 100, 60  # a keypad key's tone, and the silence before the next
KEY_VOLUME = 10  # -10 dBm0, as phones send
EVENT_PAYLOAD_TYPE = 101  # re-typed by the other leg to its own telephone-event


class RelayedAudio(MediaStreamTrack):
    """What the bridge relays to the browser, handed to aiortc's sender in order, one 20 ms
    frame each: encoded G.711 packets (bytes), which its encoder only packs, or decoded
    audio (av.AudioFrame) for its Opus encoder. It waits (sends nothing) while nothing comes."""

    kind = "audio"

    def __init__(self) -> None:
        super().__init__()
        self.frames: asyncio.Queue[bytes | av.AudioFrame] = asyncio.Queue()
        self.pts = 0

    def push(self, frame: bytes | av.AudioFrame) -> None:
        if self.frames.qsize() >= QUEUED_FRAMES:
            self.frames.get_nowait()  # a stalled browser: latency is worse than a lost frame
        self.frames.put_nowait(frame)

    async def recv(self) -> av.Packet | av.AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        frame = await self.frames.get()
        if isinstance(frame, bytes):
            frame, samples = av.Packet(frame), len(frame)  # one G.711 byte a sample
        else:
            samples = frame.samples
        frame.pts, frame.time_base = self.pts, TIME_BASE
        self.pts += samples
        return frame


def _pcm_codec(name: str, mode: str, rate: int = 8000) -> av.CodecContext:
    codec = av.CodecContext.create(name, mode)
    codec.sample_rate, codec.layout, codec.format = rate, "mono", "s16"
    return codec


class OpusTranscoder:
    """Opus (the browser's, 48 kHz) to and from G.711 (the SIP leg's, 8 kHz), one call's: a
    decoder and a resampler keep state from packet to packet. libopus and libswresample (in
    PyAV, as aiortc uses them) do the work, at C speed."""

    def __init__(self) -> None:
        self.opus = _pcm_codec("libopus", "r", rate=48000)
        self.down = AudioResampler(format="s16", layout="mono", rate=8000, frame_size=160)
        self.mulaw = _pcm_codec("pcm_mulaw", "w")
        self.g711 = {
            G711["PCMU"]: _pcm_codec("pcm_mulaw", "r"),
            G711["PCMA"]: _pcm_codec("pcm_alaw", "r"),
        }

    def from_browser(self, opus: bytes) -> list[bytes]:
        """An Opus packet as PCMU frames of 20 ms (none while the resampler fills)."""
        try:
            frames = self.opus.decode(av.Packet(opus))
        except av.FFmpegError:  # a damaged packet: passed over, as a lost one
            return []
        return [
            bytes(p) for f in frames for r in self.down.resample(f) for p in self.mulaw.encode(r)
        ]

    def to_browser(self, payload: bytes, payload_type: int) -> av.AudioFrame | None:
        """A G.711 payload as 8 kHz audio for aiortc's Opus encoder (it resamples)."""
        decoder = self.g711.get(payload_type)
        if decoder is None:
            return None
        frames = decoder.decode(av.Packet(payload))
        return frames[0] if frames else None


class BrowserStream(Holding):
    """The browser's side of a bridge, with a SIP leg's RtpStream interface. Its tab's Hold
    (`rtc_hold`) holds it as a SIP phone's re-INVITE holds an RtpStream (Holding): the
    other party hears the music on hold, and nothing passes either way until the resume.
    The other way, a phone that holds has the tab hear the music (Holding.start_music):
    played at its pace into this stream's audio out, as the phone's audio would come, in
    the tab's G.711 law (an Opus tab's is PCMU, transcoded on the way), until the resume."""

    dtmf_payload_type = None  # keys go from the browser to the phone, not the other way

    def __init__(self) -> None:
        self.payload_type = G711["PCMU"]  # until the answer says which
        self.opus: OpusTranscoder | None = None  # set when the answer is Opus
        self.fast: FastPath | None = None  # RTP's short path, once the leg is connected
        # Set once the leg is connected and its fast path opened, or not (WEBRTC_FAST_PATH
        # off, or aiortc's internals missing): which path G.711 leaves on is decided.
        self.path_decided = False
        self.sequence = 0  # of the G.711 packets made from Opus
        self.track = RelayedAudio()
        self.relayed_packets = 0
        self.heard_packets = 0
        # The browser's audio SSRC and last timestamp: the keypad's RFC 4733 events are sent
        # as that stream's, at its time, so the other leg re-stamps both alike.
        self.ssrc, self.timestamp = struct.unpack("!II", os.urandom(8))
        self.keys = asyncio.Lock()
        # A recorded bridge (telephony.sip.recorder, issue 58): what the tab says while
        # bridged, in G.711, as a SIP leg's RtpStream hands it on.
        self.on_bridged: Callable[[bytes, int], None] | None = None

    @property
    def law(self) -> int:
        """The G.711 law the music is played in: the tab's, PCMU for an Opus tab."""
        return self.payload_type if self.opus is None else G711["PCMU"]

    def relay(self, packet: bytes, payload: bytes, *, event: bool) -> None:
        """A packet the other leg heard, on to the browser in this leg's codec."""
        if event or self.held:  # a held tab is sent nothing (as a held phone, RtpStream)
            return
        if self._to_browser(payload, packet[1] & 0x7F):
            self.relayed_packets += 1

    def _send(self, payload: bytes, *, marker: bool = False) -> None:
        """A 20 ms frame of what `play` plays (the music on hold, G.711 of `law`), to the
        browser as a relayed packet goes (the Pacer's call; `marker` is the fast path's)."""
        if not self.held:
            self._to_browser(payload, self.law)

    def _to_browser(self, payload: bytes, payload_type: int) -> bool:
        """A G.711 payload on to the browser in this leg's codec; False when it cannot be."""
        if self.opus is not None:
            frame = self.opus.to_browser(payload, payload_type)
        else:
            frame = g711_in(payload, payload_type, self.payload_type)
        if frame is None:
            return False
        if self.fast is not None and isinstance(frame, bytes):
            self.fast.send(frame)
        elif isinstance(frame, bytes) and not self.path_decided:
            # Before the connection, G.711 is not queued for aiortc's sender: it would start
            # the sender's RTP sequence, and the fast path's own, opened a moment later, would
            # fall behind it, its packets dropped by the tab's SRTP as replays (a callee that
            # speaks as it answers). The tab loses only what aiortc would have sent it late,
            # once connected (its queue's last half second).
            return False
        else:
            self.track.push(frame)  # Opus to encode, or aiortc's own path
        return True

    async def heard(self, packet, arrival_time_ms: int) -> None:
        """An RTP packet from the browser on aiortc's path (its receiver hands it here,
        decrypted and checked, in place of its decoder): before the fast path is open."""
        self.heard_rtp(
            packet.payload_type,
            packet.marker,
            packet.sequence_number,
            packet.timestamp,
            packet.ssrc,
            packet.payload,
        )

    def heard_rtp(self, payload_type, marker, sequence, timestamp, ssrc, payload) -> None:
        """An RTP packet from the browser, decrypted: on to the other leg."""
        self.heard_packets += 1
        other = self.bridge
        if other is None or self.held:  # a held tab's sound is not passed on (nor recorded)
            return
        if self.opus is not None:
            if payload_type == self.payload_type:
                self._relay_transcoded(other, ssrc, payload)
            return
        if payload_type not in G711.values():
            return
        self.ssrc, self.timestamp = ssrc, timestamp
        header = struct.pack(
            "!BBHII", 0x80, (0x80 if marker else 0) | payload_type, sequence, timestamp, ssrc
        )
        self._relay(other, header + payload, payload)

    def _relay(self, other, packet: bytes, payload: bytes) -> None:
        """What the tab said (G.711: after SRTP, on either path, and after Opus is
        transcoded) on to the bridged stream, and to the recorder of a recorded bridge."""
        other.relay(packet, payload, event=False)
        if self.on_bridged is not None:
            self.on_bridged(payload, packet[1] & 0x7F)

    def _relay_transcoded(self, other, ssrc: int, opus: bytes) -> None:
        """The browser's Opus packet, on to the other leg as PCMU packets of this stream's
        own: the browser's SSRC, an 8 kHz clock and a sequence of their own."""
        self.ssrc = ssrc
        for payload in self.opus.from_browser(opus):
            self.sequence = (self.sequence + 1) & 0xFFFF
            self.timestamp = (self.timestamp + len(payload)) & 0xFFFFFFFF
            header = struct.pack(
                "!BBHII", 0x80, G711["PCMU"], self.sequence, self.timestamp, self.ssrc
            )
            self._relay(other, header + payload, payload)

    async def press(self, digits: str) -> None:
        """The page's keypad: each key (of DTMF_KEYS) sent on to the other leg as an RFC 4733
        event of KEY_MS, KEY_GAP_MS apart, in the order pressed (nothing when unbridged)."""
        async with self.keys:
            for key in digits:
                if key in DTMF_KEYS:  # the socket checked them; a stranger's are passed over
                    await self._press(DTMF_KEYS.index(key))
                await asyncio.sleep(KEY_GAP_MS / 1000)  # the gap between two keys' tones

    async def _press(self, event: int) -> None:
        start = (self.timestamp + 160) & 0xFFFFFFFF
        steps = KEY_MS // 20
        for step in range(1, steps + 1):
            self._event(event, start, 160 * step, end=False, first=step == 1)
            await asyncio.sleep(0.02)  # one packet a 20 ms frame, as the tone lasts
        for _ in range(3):  # the end packet, three times (RFC 4733 section 2.5.1.4)
            self._event(event, start, 160 * steps, end=True, first=False)
        # The next key starts later, even while no audio comes (a muted microphone): its own
        # timestamp makes it a new event.
        self.timestamp = (start + 8 * (KEY_MS + KEY_GAP_MS)) & 0xFFFFFFFF

    def _event(self, event: int, start: int, duration: int, *, end: bool, first: bool) -> None:
        other = self.bridge
        if other is None or self.held:  # keys pressed on hold are not passed on either
            return
        header = struct.pack(
            "!BBHII", 0x80, (0x80 if first else 0) | EVENT_PAYLOAD_TYPE, 0, start, self.ssrc
        )
        payload = struct.pack("!BBH", event, (0x80 if end else 0) | KEY_VOLUME, duration)
        other.relay(header + payload, payload, event=True)


class BrowserLeg:
    """One browser's WebRTC peer connection. `answer(offer)` returns the answer's SDP (every
    candidate in it: no trickle needed); media flows once the browser has it; `close()` ends
    it. `ice_servers` are RTCIceServer dicts (agent_ice_servers), `ports` the agent's share
    of RTC_PORT_RANGE (None: the kernel's). `names` name the call in the frames its tab is
    sent about it (a call placed: its `callId`; a ring: `ring`, `call` and `callId`)."""

    def __init__(
        self,
        *,
        ice_servers: list[dict] = (),
        ports: range | None = None,
        label: str = "",
        names: dict | None = None,
    ) -> None:
        servers = [
            RTCIceServer(
                urls=server["urls"],
                username=server.get("username"),
                credential=server.get("credential"),
            )
            for server in ice_servers
        ]
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=servers))
        self.ports = ports
        self.stream = BrowserStream()
        self.label = label
        self.names = dict(names or {})
        # Set once the browser is gone: its connection closed (a hang-up, the tab closed) or
        # failed (its network, or a handshake with another certificate than the one offered).
        self.ended = asyncio.Event()
        self.connected = asyncio.Event()  # ICE and DTLS are up: media flows
        self.signals = ""  # the channel its tab's signals reach the agent on (ring.py)
        self.tasks: list[asyncio.Task] = []  # cancelled by close()
        self.transceiver = None  # the call's audio, once answered

        @self.pc.on("connectionstatechange")
        def _state() -> None:
            if self.pc.connectionState == "connected":
                self._open_fast_path()
                self.stream.path_decided = True
                self.connected.set()
            if self.pc.connectionState in ("closed", "failed"):
                self.ended.set()

    async def answer(self, offer: str, *, law: int | None = None) -> str:
        """The answer to the browser's `offer` (OfferRefused with the reason when it is none
        this leg takes). `law` is the G.711 payload type of the phone leg the browser is to
        be bridged to, when it is known: of the laws the browser offers, that one is
        answered, so that no packet is converted (else PCMU, the browser's usual first)."""
        problem = offer_problem(offer)
        if problem is not None:
            raise OfferRefused(problem)
        try:
            # Ours before the offer's: its first audio section takes this transceiver, whose
            # codecs are negotiated as the offer is set, in our order (answer_codecs).
            transceiver = self.pc.addTransceiver(self.stream.track, direction="sendrecv")
            transceiver.setCodecPreferences(answer_codecs(offer, law))
            await self.pc.setRemoteDescription(RTCSessionDescription(sdp=offer, type="offer"))
            for other in self.pc.getTransceivers():
                if other is not transceiver:
                    other.direction = "inactive"  # one voice per call
            with in_range(self.ports):  # the candidates' sockets, bound as it gathers
                await self.pc.setLocalDescription(await self.pc.createAnswer())
        except OfferRefused:
            raise
        except Exception as exc:  # aiortc's own refusal of what the checks let through
            refusal = type(exc).__name__
            logger.info("%s: the WebRTC stack refused an offer (%s)", self.label, refusal)
            raise OfferRefused("the offer cannot be answered") from None
        answer = self.pc.localDescription.sdp
        self.stream.payload_type = _answered_payload_type(answer)
        if self.stream.payload_type not in G711.values():
            self.stream.opus = OpusTranscoder()
        hear_before_decoder(transceiver.receiver, self.stream.heard)
        self.transceiver = transceiver
        return answer

    def _open_fast_path(self) -> None:
        if not settings.WEBRTC_FAST_PATH:
            return  # aiortc's own path: the fast one reads its internals
        if self.transceiver is not None and self.stream.fast is None:
            self.stream.fast = FastPath.open(
                self.transceiver, self.stream.payload_type, self.stream.heard_rtp
            )

    async def add_candidate(self, candidate: str, sdp_mid: str | None) -> None:
        """A candidate the browser found after its offer (trickle ICE, an `rtc_candidate`
        frame, checked by core.webrtc.candidate_problem). One aiortc cannot read is passed
        over: the offer's own candidates still stand."""
        try:
            parsed = candidate_from_sdp(candidate.removeprefix("a=").removeprefix("candidate:"))
            parsed.sdpMid = sdp_mid
            if sdp_mid is None:
                parsed.sdpMLineIndex = 0
            await self.pc.addIceCandidate(parsed)
        except Exception as exc:  # noqa: BLE001 - a stranger's text: never the call's end
            logger.info("%s: a candidate was passed over (%s)", self.label, type(exc).__name__)

    async def held_by_tab(self, held: bool, tab) -> None:
        """The tab's Hold or Resume (`rtc_hold`): its stream held or taken again, and the tab
        (its socket's channel, `tab`) answered `rtc_hold` with the state now in force."""
        self.stream.hold(held)
        logger.info("%s: the browser %s the call", self.label, "held" if held else "resumed")
        layer = get_channel_layer()
        if layer is None or not isinstance(tab, str):
            return
        frame = {"type": "rtc_hold", **self.names, "hold": self.stream.held}
        with contextlib.suppress(Exception):  # a socket gone, the layer down: nobody to tell
            await layer.send(tab, {"type": "rtc.event", "event": frame})

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        self.stream.stop_music()
        if self.stream.fast is not None:
            self.stream.fast.close()
            self.stream.fast = None
        self.stream.track.stop()
        with contextlib.suppress(Exception):
            await self.pc.close()
        self.ended.set()


class BrowserTalk:
    """An answered SIP call's talk (telephony.sip.uac) for a call from the browser: the leg
    and the call bridged both ways until the browser is gone (returning hangs the call up),
    or the call ends first (then this is cancelled). `music` is what either end hears while
    the other holds (Holding.music_source; None: Relay's own). Given a `transfer`
    (telephony.outbound_transfer, issue 58), the callee may be handed on while bridged: its
    `asked()` returns a target once one is asked for, and `hand_on(target, call, leg)` says
    whether the tab has the callee back after (the target did not take it, both still on)."""

    ended_by = ""  # no script limit ends it

    def __init__(self, leg: BrowserLeg, *, music=None, transfer=None) -> None:
        self.leg, self.music, self.transfer = leg, music, transfer

    async def __call__(self, call) -> None:
        browser, phone = self.leg.stream, call.stream
        browser.music_source = phone.music_source = self.music
        while True:
            browser.bridge, phone.bridge = phone, browser
            try:
                target = await self._until_handed_on()
            finally:
                browser.bridge = phone.bridge = None
            if target is None or not await self.transfer.hand_on(target, call, self.leg):
                return

    async def _until_handed_on(self) -> str | None:
        """The target of a transfer asked for while bridged; None once the browser is gone."""
        if self.transfer is None:
            await self.leg.ended.wait()
            return None
        _gone, asked = await race(self.leg.ended.wait(), self.transfer.asked())
        return asked.result() if won(asked) else None


def answer_codecs(offer: str, law: int | None) -> list[RTCRtpCodecCapability]:
    """The codecs an answer to `offer` may take, first the one it is to take: G.711 alone when
    the browser offers it, the phone leg's `law` first (setCodecPreferences: an answer
    lists the codecs in the order of the answerer's preferences, JSEP, RFC 8829), else Opus
    alone (transcoded)."""
    if offered_codec(offer.splitlines()) == "G711":
        laws = sorted(G711, key=lambda name: G711[name] != law)  # a stable sort: PCMU, PCMA
        wanted = [f"audio/{name}" for name in laws]
    else:
        wanted = [OPUS_MIME]
    capabilities = RTCRtpSender.getCapabilities("audio").codecs
    return [codec for mime in wanted for codec in capabilities if codec.mimeType == mime]


def _answered_payload_type(answer: str) -> int:
    """The first payload type of the answer's audio section: the one aiortc sends."""
    for line in answer.splitlines():
        if line.startswith("m=audio "):
            return int(line.split()[3])
    raise OfferRefused("the offer cannot be answered")


def agent_ice_servers() -> list[dict]:
    """The agent's STUN and TURN servers (RTC_ICE_SERVERS), TURN with credentials of its own
    for RTC_TURN_TTL."""
    return ice_servers_for("relay-agent")


def agent_rtc_ports(index: int = 0) -> range:
    """Agent `index`'s share of RTC_PORT_RANGE (SIP_AGENTS side by side, as RTP's)."""
    first, last = settings.RTC_PORTS
    share = (last - first + 1) // max(1, settings.SIP_AGENTS)
    return range(first + index * share, first + (index + 1) * share)
