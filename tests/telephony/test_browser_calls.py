"""Calls from the browser (issue 43, the outbound call without the console's page): a tab,
here aiortc as the browser, sends `rtc_offer` on its socket; the call is a call like any
(acked, policy, the calls list); the agent that claims it answers with `rtc_answer`, dials the
trunk (SIPp, which echoes), and bridges the tab to the callee. The tab closing its connection
hangs up; `rtc_hangup` ends the call as a cancel does."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket

import pytest
from asgiref.sync import sync_to_async
from websockets.asyncio.client import connect

from calls.models import Call
from harness.sip import free_udp_port
from telephony.sip.rtp import FRAME_SAMPLES, TRANSCODE, hold_music
from tests.factories import NumberFactory
from tests.ledger import aack
from tests.telephony.browser_peer import (
    BROWSER_SAYS,
    Browser,
    call_from_the_browser,
    next_frame,
    status_frames,
    until,
    until_status,
)
from tests.telephony.holding import (
    AS_TARGET,
    PLAY,
    SPEECH,
    frames_of,
    pause,
    reinvite,
    sdp_lines,
    upload_music,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

TO = "+442079460123"
PCMU = 0
PCMA = 8


async def test_a_call_from_the_browser_talks_to_the_callee_and_ends_when_the_tab_hangs_up(
    sip_relay, sipp, login
):
    far_end = sipp("uas", echo=True)
    browser = Browser()
    try:
        async with connect(f"{sip_relay.ws_base}/ws?token={login.token}") as ws:
            offer = await browser.offer()
            await ws.send(json.dumps({"type": "rtc_offer", "callId": "b1", "to": TO, "sdp": offer}))
            ack = json.loads(await ws.recv())
            assert ack == await aack("b1", "queued")
            answer = await next_frame(ws, "b1", "rtc_answer")
            await browser.take(answer["sdp"])
            await until(lambda: browser.pc.connectionState == "connected", "the connection")
            await next_frame(ws, "b1", "call_status")  # on its way: dialing, then answered

            # The tab speaks; SIPp echoes; the tab hears its own words back, byte for byte.
            for _ in range(250):
                browser.track.push(BROWSER_SAYS)
                if len(browser.received) >= 10:
                    break
                await asyncio.sleep(0.02)
            assert len(browser.received) >= 10
            assert {payload for _, payload in browser.received} == {BROWSER_SAYS}

            await browser.pc.close()  # the tab hangs up
            assert (await status_frames(ws, "b1"))[-1] == "completed"
    finally:
        await browser.pc.close()
    call = await sync_to_async(Call.objects.get)(call_id="b1")
    assert (call.status, call.to, call.message) == ("completed", TO, "")
    assert far_end.finish() == 0  # the agent's BYE ended SIPp's call
    assert far_end.invites() == [call.sip_call_id]


async def test_rtc_hangup_while_it_rings_cancels_the_call(sip_relay, sipp, login):
    far_end = sipp("ring")
    browser = Browser()
    try:
        async with connect(f"{sip_relay.ws_base}/ws?token={login.token}") as ws:
            offer = await browser.offer()
            await ws.send(json.dumps({"type": "rtc_offer", "callId": "b2", "to": TO, "sdp": offer}))
            await browser.take((await next_frame(ws, "b2", "rtc_answer"))["sdp"])
            await until_status(ws, "b2", "ringing")
            await ws.send(json.dumps({"type": "rtc_hangup", "callId": "b2"}))
            assert (await status_frames(ws, "b2"))[-1] == "canceled"
    finally:
        await browser.pc.close()
    assert far_end.finish() == 0  # it was sent CANCEL


async def test_the_keypad_of_a_call_from_the_browser_reaches_the_callee_as_rfc_4733(
    sip_relay, sipp, login
):
    # SIPp answers; the audio its SDP names is a socket of the test's, which reads it all.
    audio = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    audio.bind(("127.0.0.1", free_udp_port()))
    audio.setblocking(False)
    far_end = sipp("answer_media_at", audio_port=audio.getsockname()[1])
    browser = Browser()
    events: set[int] = set()
    try:
        async with connect(f"{sip_relay.ws_base}/ws?token={login.token}") as ws:
            await call_from_the_browser(ws, browser, "b3", TO)
            await ws.send(json.dumps({"type": "rtc_dtmf", "callId": "b3", "digits": "7"}))

            def heard_seven() -> bool:
                while True:
                    try:
                        packet = audio.recv(2048)
                    except BlockingIOError:
                        return 7 in events
                    if packet[1] & 0x7F == 101:
                        events.add(packet[12])

            for _ in range(500):  # the browser keeps talking meanwhile, as a microphone does
                browser.track.push(BROWSER_SAYS)
                if heard_seven():
                    break
                await asyncio.sleep(0.02)
            await ws.send(json.dumps({"type": "rtc_hangup", "callId": "b3"}))
            # rtc_hangup ends it as a cancel does; its end is written before the test ends.
            assert (await status_frames(ws, "b3"))[-1] == "canceled"
    finally:
        await browser.pc.close()
        audio.close()
    assert events == {7}
    assert await asyncio.to_thread(far_end.finish) == 0


async def test_a_call_from_the_browser_held_has_the_callee_hear_the_music_until_resumed(
    sip_relay, sipp, login
):
    # SIPp answers (PCMU); the audio its SDP names is a socket of the test's, which reads what
    # Relay sends the callee: the tab's words, or the music on hold.
    audio = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    audio.bind(("127.0.0.1", free_udp_port()))
    audio.setblocking(False)
    far_end = sipp("answer_media_at", audio_port=audio.getsockname()[1])
    browser = Browser()
    music = hold_music(PCMU)
    frames = {music[i : i + FRAME_SAMPLES] for i in range(0, len(music), FRAME_SAMPLES)}
    keys: list[int] = []

    def heard() -> list[bytes]:
        payloads = []
        while True:
            try:
                packet = audio.recv(2048)
            except BlockingIOError:
                return payloads
            if packet[1] & 0x7F == PCMU:
                payloads.append(packet[12:])
            elif packet[1] & 0x7F == 101:
                keys.append(packet[12])

    async def talking_until(enough) -> list[bytes]:
        """The tab speaks, 20 ms a frame, until what the callee heard is `enough`."""
        payloads: list[bytes] = []
        for _ in range(500):
            browser.track.push(BROWSER_SAYS)
            payloads += heard()
            if enough(payloads):
                return payloads
            await asyncio.sleep(0.02)
        raise AssertionError(f"the callee heard {len(payloads)} packets, not enough")

    try:
        async with connect(f"{sip_relay.ws_base}/ws?token={login.token}") as ws:
            await call_from_the_browser(ws, browser, "b5", TO)
            await talking_until(lambda p: p.count(BROWSER_SAYS) >= 10)

            await ws.send(json.dumps({"type": "rtc_hold", "callId": "b5", "hold": True}))
            assert (await next_frame(ws, "b5", "rtc_hold")) == {
                "type": "rtc_hold",
                "callId": "b5",
                "hold": True,
            }
            await ws.send(json.dumps({"type": "rtc_dtmf", "callId": "b5", "digits": "9"}))
            # A few packets of the tab's were on their way; then the music alone, no word of
            # the tab's (which goes on talking) and no key.
            held = await talking_until(lambda p: sum(x in frames for x in p) >= 50)
            since = next(i for i, payload in enumerate(held) if payload in frames)
            assert all(payload in frames for payload in held[since:])
            assert since <= 10, since
            assert keys == []

            # Another user's, or no, call of this tab's: an error frame, the call goes on.
            await ws.send(json.dumps({"type": "rtc_hold", "callId": "nope", "hold": False}))
            error = await next_frame(ws, "nope", "error")
            assert error["code"] == "not_found"
            await ws.send(json.dumps({"type": "rtc_hold", "callId": "b5", "hold": "no"}))
            error = await next_frame(ws, "b5", "error")
            assert (error["code"], list(error["fields"])) == ("invalid_request", ["hold"])

            await ws.send(json.dumps({"type": "rtc_hold", "callId": "b5", "hold": False}))
            assert (await next_frame(ws, "b5", "rtc_hold"))["hold"] is False
            resumed = await talking_until(lambda p: p[-10:] == [BROWSER_SAYS] * 10)
            assert resumed.count(BROWSER_SAYS) >= 10
            await ws.send(json.dumps({"type": "rtc_hangup", "callId": "b5"}))
            assert (await status_frames(ws, "b5"))[-1] == "canceled"
    finally:
        await browser.pc.close()
        audio.close()
    assert await asyncio.to_thread(far_end.finish) == 0


async def test_a_callee_that_holds_has_the_tab_hear_the_music_of_the_number_it_calls_from(
    sip_relay, sipp, login, user, client_jwt, settings, tmp_path
):
    # Issue 58: a call from the browser "from" a number whose owner uploaded music; the
    # callee (SIPp, PCMA, playing its recording) holds with a=sendonly 2 s after the answer
    # and resumes 3 s later. The tab (answered in PCMU before the callee existed) hears the
    # number's music in its own law, never Relay's, then the callee again (PCMA translated).
    number = await sync_to_async(NumberFactory)(owner=user)
    own = await sync_to_async(upload_music)(
        client_jwt, settings, number, sip_relay.workdir, tmp_path / "tts", PCMU
    )
    relay_music = frames_of(hold_music(PCMU))
    speech = {payload.translate(TRANSCODE[(PCMA, PCMU)]) for payload in SPEECH}
    assert not own & relay_music
    far_end = sipp(
        "hold_target",
        sdp_port="[media_port]",
        actions=PLAY
        + pause(2000)
        + reinvite(AS_TARGET, 1, sdp_lines(direction="sendonly"), expect="a=recvonly")
        + pause(3000)
        + reinvite(AS_TARGET, 2, sdp_lines(version=3), expect="a=sendrecv")
        + PLAY,
    )
    browser = Browser()

    def heard() -> str:
        return "".join(
            "n" if payload in own else "m" if payload in relay_music else "s" if payload in speech
            else "o"
            for _, payload in browser.received
        )  # fmt: skip

    try:
        async with connect(f"{sip_relay.ws_base}/ws?token={login.token}") as ws:
            await call_from_the_browser(ws, browser, "b6", TO, **{"from": number.number})
            # Until the tab hears the callee again, half a second of it after the music (or
            # the deadline: what it heard is asserted below).
            with contextlib.suppress(AssertionError):
                await until(lambda: re.search(r"n+o?s{25}", heard()), "the callee after music")
            await browser.pc.close()  # the tab hangs up
            assert (await status_frames(ws, "b6"))[-1] == "completed"
    finally:
        await browser.pc.close()
    what = heard()
    assert {payload_type for payload_type, _ in browser.received} == {PCMU}
    assert re.fullmatch(r"o*s+n+o?s+o*", what), what
    assert 2.0 <= what.count("n") * 0.02 <= 3.6, what
    assert await asyncio.to_thread(far_end.finish) == 0  # the agent's BYE ended SIPp's call
    call = await sync_to_async(Call.objects.get)(call_id="b6")
    assert (call.status, call.number_id) == ("completed", number.pk)
