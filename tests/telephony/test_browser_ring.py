"""Calls to the browser (issue 43): a number that forwards to "browser" rings every tab of its
owner whose phone is on (`incoming_call` with `ringBrowser`), beside its phone targets; the
first to take the call is bridged to the caller, and the others stop ringing. SIPp is the
caller (and the trunk, for the phone targets); aiortc, on a real socket, is the browser."""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest
from asgiref.sync import sync_to_async
from websockets.asyncio.client import connect

from calls.models import Call
from harness.live import wait_until
from harness.sip import Sipp
from history.models import AnsweredBy, CallStatus
from telephony.sip.rtp import hold_music
from tests.factories import NumberFactory
from tests.telephony.browser_peer import BROWSER_SAYS, Browser, until
from tests.telephony.conftest import agent_relay, bridge_log, call_in, wait_for_records
from tests.telephony.holding import (
    AS_CALLER,
    PLAY,
    SPEECH,
    frames_of,
    pause,
    reinvite,
    sdp_lines,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

TARGET = "+441134960200"
PCMA = 8


@pytest.fixture(scope="module")
def relay(tmp_path_factory, django_db_setup):
    """runrelay with the SIP agent; SIPp on `relay.trunk_port` is the phone targets' trunk."""
    process = agent_relay(tmp_path_factory.mktemp("browser-ring"))
    yield process
    process.stop()


def phones(relay, tmp_path, *, answering: str, answer_ms: int = 0):
    """SIPp as the trunk: the phone targets (forward_target.xml); `answering` answers."""
    return Sipp(
        tmp_path / "phones",
        "forward_target",
        port=relay.trunk_port,
        answering=answering,
        codec="0",
        codec_name="PCMU",
        answer_ms=answer_ms,
        actions="",
    )


def forwarding(user, *targets, ring_seconds=10):
    return NumberFactory(
        owner=user,
        alias="Shop",
        greeting="Hi.",
        forward_targets=list(targets),
        forward_ring_seconds=ring_seconds,
    )


class Tab:
    """A console tab: its socket, and its browser (aiortc) once it answers."""

    def __init__(self, ws) -> None:
        self.ws = ws
        self.browser: Browser | None = None

    async def phone(self, on: bool) -> None:
        await self.ws.send(json.dumps({"type": "phone", "on": on}))
        assert await self.next("phone") == {"type": "phone", "on": on}

    async def next(self, kind: str, timeout: float = 30, **fields) -> dict:
        """The next frame of `kind` with `fields` (others are passed over)."""
        async with asyncio.timeout(timeout):
            while True:
                frame = json.loads(await self.ws.recv())
                if frame["type"] == kind and all(frame.get(k) == v for k, v in fields.items()):
                    return frame

    async def answer(self, ring: str) -> None:
        self.browser = Browser()
        offer = await self.browser.offer()
        await self.ws.send(json.dumps({"type": "rtc_offer", "ring": ring, "sdp": offer}))
        answer = await self.next("rtc_answer", ring=ring)
        await self.browser.take(answer["sdp"])
        await until(lambda: self.browser.pc.connectionState == "connected", "the connection")

    async def close(self) -> None:
        if self.browser is not None:
            await self.browser.pc.close()


async def tabs_of(relay, login, count: int, *, phone: bool = True):
    sockets = [await connect(f"{relay.ws_base}/ws?token={login.token}") for _ in range(count)]
    tabs = [Tab(ws) for ws in sockets]
    for tab in tabs:
        await tab.phone(phone)
    return tabs


async def closed(tabs) -> None:
    for tab in tabs:
        await tab.close()
        await tab.ws.close()


def in_thread(function, *args, **kwargs):
    """A blocking helper (SIPp, the database) off the event loop, where aiortc's media runs."""
    return asyncio.to_thread(function, *args, **kwargs)


def bridge_line(relay, call_id: str) -> tuple[str, int, int]:
    """The bridge's log line: (the target's codec, packets relayed to it, to the caller)."""
    match = wait_until(
        lambda: bridge_log(relay.log_path.read_text(), call_id), deadline=10, what="the bridge"
    )
    return match[3], int(match[4]), int(match[5])


async def test_two_tabs_ring_one_answers_talks_both_ways_and_hangs_up(relay, tmp_path, user, login):
    number = await sync_to_async(forwarding)(user, "browser")
    first, second = tabs = await tabs_of(relay, login, 2)
    try:
        caller = await in_thread(call_in, relay.agent, tmp_path, "inbound_wait_bye", number.number)
        ring = await first.next("incoming_call", ringBrowser=True)
        assert ring == {
            "type": "incoming_call",
            "call": ring["call"],
            "seq": 1,
            "number_id": str(number.pk),
            "number": number.number,
            "caller_num": "+447700900123",
            "ts": ring["ts"],
            "ring": ring["ring"],
            "callId": ring["ring"],  # deprecated: the ring again
            "alias": "Shop",
            "ringBrowser": True,
        }
        assert re.fullmatch(r"ring-[0-9a-f]{16}", ring["ring"])
        assert (await second.next("incoming_call", ringBrowser=True))["ring"] == ring["ring"]

        await first.answer(ring["ring"])
        stopped = await second.next("rtc_hangup", ring=ring["ring"])
        assert (stopped["reason"], stopped["call"]) == ("answered_elsewhere", ring["call"])

        # The caller's recording reaches the page; the page's words reach the caller.
        browser = first.browser
        for _ in range(50):
            browser.track.push(BROWSER_SAYS)
            await asyncio.sleep(0.02)  # paced as a microphone sends, 20 ms a frame
        await until(lambda: len(browser.received) >= 25, "the caller's audio in the page")
        # The tab offered both laws (PCMU first); the caller speaks PCMA (inbound_wait_bye),
        # and the tab was answered in it: nothing is converted on the way (issue 55).
        assert {payload_type for payload_type, _ in browser.received} == {8}

        await first.ws.send(json.dumps({"type": "rtc_hangup", "ring": ring["ring"]}))
        assert await in_thread(caller.finish) == 0, caller  # Relay's BYE reached the caller
    finally:
        await closed(tabs)

    [record] = await in_thread(wait_for_records, number, 1)
    assert (record.status, record.answered_by, record.forwarded_to) == (
        CallStatus.ANSWERED,
        AnsweredBy.FORWARD,
        "browser",
    )
    codec, to_browser, to_caller = await in_thread(bridge_line, relay, record.sip_call_id)
    assert codec == "PCMA"  # the caller's
    assert to_browser >= 25
    assert to_caller >= 40  # of the 50 frames the page said


async def test_the_browser_wins_over_a_ringing_phone_which_is_cancelled(
    relay, tmp_path, user, login
):
    number = await sync_to_async(forwarding)(user, "browser", TARGET)
    phones_ = await in_thread(phones, relay, tmp_path, answering="nobody")
    [tab] = tabs = await tabs_of(relay, login, 1)
    try:
        caller = await in_thread(call_in, relay.agent, tmp_path, "inbound_wait_bye", number.number)
        ring = await tab.next("incoming_call", ringBrowser=True)
        await tab.answer(ring["ring"])
        assert await in_thread(phones_.finish) == 0, phones_  # its leg was CANCELed
        await tab.ws.send(json.dumps({"type": "rtc_hangup", "ring": ring["ring"]}))
        assert await in_thread(caller.finish) == 0, caller
    finally:
        await closed(tabs)

    [record] = await in_thread(wait_for_records, number, 1)
    assert (record.answered_by, record.forwarded_to) == (AnsweredBy.FORWARD, "browser")
    assert len(phones_.received("CANCEL")) == 1


async def test_a_phone_that_answers_first_wins_and_the_tab_stops_ringing(
    relay, tmp_path, user, login
):
    number = await sync_to_async(forwarding)(user, "browser", TARGET)
    phones_ = await in_thread(phones, relay, tmp_path, answering=re.escape(TARGET), answer_ms=500)
    [tab] = tabs = await tabs_of(relay, login, 1)
    try:
        caller = await in_thread(
            call_in,
            relay.agent,
            tmp_path,
            "inbound_message",
            number.number,
            greeting_ms=0,
            message_ms=1500,
        )
        ring = await tab.next("incoming_call", ringBrowser=True)
        stopped = await tab.next("rtc_hangup", ring=ring["ring"])
        assert stopped["reason"] == "answered_elsewhere"
        assert await in_thread(caller.finish) == 0, caller
        assert await in_thread(phones_.finish) == 0, phones_
    finally:
        await closed(tabs)

    [record] = await in_thread(wait_for_records, number, 1)
    assert (record.answered_by, record.forwarded_to) == (AnsweredBy.FORWARD, TARGET)


async def test_with_no_phone_on_voicemail_answers_at_once(relay, tmp_path, user, login):
    number = await sync_to_async(forwarding)(user, "browser", ring_seconds=30)
    tabs = await tabs_of(relay, login, 1, phone=False)  # open, its phone off
    try:
        started = time.monotonic()
        caller = await in_thread(
            call_in,
            relay.agent,
            tmp_path,
            "inbound_message",
            number.number,
            greeting_ms=0,
            message_ms=500,
        )
        assert await in_thread(caller.finish) == 0, caller
        assert time.monotonic() - started < 20  # the 30 s of ringing were never waited
    finally:
        await closed(tabs)

    [record] = await in_thread(wait_for_records, number, 1)
    assert (record.status, record.answered_by) == (CallStatus.ANSWERED, AnsweredBy.VOICEMAIL)
    call = await sync_to_async(Call.objects.get)(pk=record.pk)
    assert (call.answered_at - call.created_at).total_seconds() < 5


async def test_a_caller_who_hangs_up_while_it_rings_stops_the_tab_and_is_missed(
    relay, tmp_path, user, login
):
    number = await sync_to_async(forwarding)(user, "browser", ring_seconds=30)
    [tab] = tabs = await tabs_of(relay, login, 1)
    try:
        caller = await in_thread(
            call_in,
            relay.agent,
            tmp_path,
            "inbound_cancel",
            number.number,
            resend='  <pause milliseconds="3000"/>',
        )
        ring = await tab.next("incoming_call", ringBrowser=True)
        stopped = await tab.next("rtc_hangup", ring=ring["ring"])
        assert stopped["reason"] == "caller_hung_up"
        assert await in_thread(caller.finish) == 0, caller
    finally:
        await closed(tabs)

    [record] = await in_thread(wait_for_records, number, 1)
    assert (record.status, record.answered_by) == (CallStatus.MISSED, None)


async def test_a_caller_who_hangs_up_while_talking_ends_the_tabs_call(relay, tmp_path, user, login):
    number = await sync_to_async(forwarding)(user, "browser")
    [tab] = tabs = await tabs_of(relay, login, 1)
    try:
        caller = await in_thread(
            call_in,
            relay.agent,
            tmp_path,
            "inbound_message",
            number.number,
            greeting_ms=0,
            message_ms=2000,
        )
        ring = await tab.next("incoming_call", ringBrowser=True)
        await tab.answer(ring["ring"])
        ended = await tab.next("rtc_hangup", ring=ring["ring"])
        assert ended["reason"] == "ended"
        assert await in_thread(caller.finish) == 0, caller  # its BYE was answered
    finally:
        await closed(tabs)

    [record] = await in_thread(wait_for_records, number, 1)
    assert (record.status, record.answered_by, record.forwarded_to) == (
        CallStatus.ANSWERED,
        AnsweredBy.FORWARD,
        "browser",
    )


async def test_a_caller_that_holds_has_the_tab_hear_the_music_on_hold_then_the_caller_again(
    relay, tmp_path, user, login
):
    # Issue 58: the tab takes the ring; the caller (SIPp, PCMA, playing its recording)
    # holds with a=sendonly 2 s after the answer and resumes 3 s later. The number has no
    # music of its own: the tab hears Relay's, in the caller's law (the tab's, answered in it).
    number = await sync_to_async(forwarding)(user, "browser")
    music = frames_of(hold_music(PCMA))
    [tab] = tabs = await tabs_of(relay, login, 1)
    try:
        caller = await in_thread(
            call_in,
            relay.agent,
            tmp_path,
            "reinvite_caller",
            number.number,
            sdp_port="[media_port]",
            actions=PLAY
            + pause(2000)
            + reinvite(AS_CALLER, 2, sdp_lines(direction="sendonly"), expect="a=recvonly")
            + pause(3000)
            + reinvite(AS_CALLER, 3, sdp_lines(version=3), expect="a=sendrecv")
            + PLAY
            + pause(2000),
        )
        ring = await tab.next("incoming_call", ringBrowser=True)
        await tab.answer(ring["ring"])
        assert await in_thread(caller.finish) == 0, caller  # its BYE was answered
        assert (await tab.next("rtc_hangup", ring=ring["ring"]))["reason"] == "ended"
    finally:
        await closed(tabs)

    # The tab heard the caller, then the music alone (the caller's recording, which went on,
    # was not passed on), then the caller again.
    received = tab.browser.received
    assert {payload_type for payload_type, _ in received} == {PCMA}
    what = "".join(
        "m" if payload in music else "s" if payload in SPEECH else "o" for _, payload in received
    )
    assert re.fullmatch(r"o*s+m+o?s+o*", what), what
    assert 2.0 <= what.count("m") * 0.02 <= 3.6, what
    [record] = await in_thread(wait_for_records, number, 1)
    assert (record.status, record.forwarded_to) == (CallStatus.ANSWERED, "browser")
