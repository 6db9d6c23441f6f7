"""Blind transfer over SIP (issue 58): the phone that took a forwarded call sends REFER (RFC
3515) and the caller is handed on. SIPp is the caller (calling the agent) and the trunk: the
phone that answers and refers, and the transfer's target (harness/sipp/transfer_phones.xml,
its REFER and NOTIFY steps from harness.sip.refer and .notified). What the agent relayed each
way after the transfer is read from its log line of the new bridge."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time

import pytest
from asgiref.sync import sync_to_async
from websockets.asyncio.client import connect

from accounts.services import session_open
from calls.models import Call, Leg, LegRole
from harness.live import http, wait_until
from harness.ports import udp_port_taken
from harness.sip import Sipp, hang_up, notified, refer
from history.models import AnsweredBy, CallStatus
from telephony.sip.message import Message
from telephony.sip.refer import Refusal, refer_replaces, refer_target
from tests.factories import NumberFactory
from tests.telephony.browser_peer import Browser, call_from_the_browser, next_frame, status_frames
from tests.telephony.conftest import CALLER, agent_relay, call_in, wait_for_records

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

PHONE = "+441134960200"  # the number's ring list: the phone that takes the call
TARGET = "+441134960300"  # who it is handed on to, and answers
NOBODY = "+441134960301"  # who it is handed on to, and rings out
SECOND = "+441134960302"  # who TARGET hands it on to in turn, and answers
REFUSED = "+33123456789"  # a country DIAL_ALLOWED_COUNTRIES leaves out
REPLACES = "abc%40x%3Bto-tag%3D1%3Bfrom-tag%3D2"  # RFC 3891, escaped in a URI: attended


@pytest.fixture(scope="module")
def relay(tmp_path_factory, django_db_setup):
    """runrelay with the SIP agent; SIPp on `relay.trunk_port` is the trunk a test starts."""
    process = agent_relay(tmp_path_factory.mktemp("transfer"))
    yield process
    process.stop()


def forwarding(user, ring_seconds=5):
    return NumberFactory(
        owner=user,
        alias="Shop",
        greeting="Hi.",
        forward_targets=[PHONE],
        forward_ring_seconds=ring_seconds,
    )


def trunk(
    relay,
    tmp_path,
    phone_actions: str,
    *,
    calls: int,
    phone: str = PHONE,
    targets: tuple[str, ...] = (TARGET,),
    relayer: str = "none",
    target_actions: str = "",
) -> Sipp:
    """SIPp as the trunk: `phone` answers and runs `phone_actions`, `targets` answer and play
    SIPp's capture (`relayer` among them runs `target_actions` then), any other number rings
    out."""
    return Sipp(
        tmp_path / "trunk",
        "transfer_phones",
        port=relay.trunk_port,
        calls=calls,
        phone=re.escape(phone),
        target="(" + "|".join(re.escape(target) for target in targets) + ")",
        answer_ms=300,
        phone_actions=phone_actions,
        relayer=re.escape(relayer),
        target_actions=target_actions,
    )


def transfer_bridge(relay, call_id: str, *, count: int = 1, kind: str = "inbound call"):
    """The agent's log line of the `count`-th bridge after a transfer (each hand-on logs the
    bridge it ends): (seconds, packets relayed to the new target, packets relayed to the
    caller)."""
    pattern = (
        rf"{kind} {re.escape(call_id)}, transferred: bridged (\d+) s \(caller \w+, "
        r"target \w+\); relayed (\d+) packets to the target, (\d+) to the caller"
    )

    def logged() -> list | None:
        lines = re.findall(pattern, relay.log_path.read_text())
        return lines if len(lines) >= count else None

    found = wait_until(logged, deadline=10, what="the transfer's bridge log line")
    return tuple(int(value) for value in found[count - 1])


def invited(sipp: Sipp) -> list[str]:
    return [
        re.search(r"^INVITE sip:([^@]+)@", block, re.MULTILINE).group(1)
        for block in sipp.received("INVITE")
    ]


def legs_of(record) -> list[tuple[str, str, bool]]:
    return [
        (leg.role, leg.target, leg.answered_at is not None)
        for leg in Leg.objects.filter(call_id=record.pk).order_by("created_at")
    ]


def test_a_refer_hands_the_caller_on_to_the_target_and_the_phone_is_told_and_hung_up(
    relay, tmp_path, user
):
    number = forwarding(user)
    phone = refer(f"<sip:{TARGET}@127.0.0.1;user=phone>", expect=202, after_ms=1000) + notified(
        "100 Trying", "200 OK"
    )
    sipp = trunk(relay, tmp_path, phone, calls=2)
    caller = call_in(
        relay.agent, tmp_path, "inbound_message", number.number, greeting_ms=0, message_ms=6000
    )
    assert caller.finish() == 0, caller
    assert sipp.finish() == 0, sipp  # 202, both NOTIFYs and the BYE came to the phone

    [record] = wait_for_records(number, 1)
    assert (record.status, record.answered_by, record.forwarded_to, record.transferred_to) == (
        CallStatus.ANSWERED,
        AnsweredBy.FORWARD,
        PHONE,
        TARGET,
    )
    assert 4 <= record.duration <= 8, record.duration
    assert not record.recording  # no voicemail: the target took it
    # One call in the ledger, the phone's leg and the transfer's, both taken.
    assert Call.objects.filter(number=number).count() == 1
    assert legs_of(record) == [
        (LegRole.FORWARD_TARGET, PHONE, True),
        (LegRole.TRANSFER_TARGET, TARGET, True),
    ]
    # The target was dialled once, from the caller, and the caller heard it: the capture it
    # played was relayed to the caller (several seconds of 20 ms packets), and back.
    assert invited(sipp) == [PHONE, TARGET]
    invite = sipp.received("INVITE")[1]
    assert re.search(rf"^From: <sip:{re.escape(CALLER)}@", invite, re.MULTILINE), invite
    seconds, to_target, to_caller = transfer_bridge(relay, record.sip_call_id)
    assert seconds >= 2 and to_caller >= 100 and to_target >= 100, (seconds, to_target, to_caller)
    # The NOTIFYs: an implicit subscription (Event: refer), the last one ending it.
    notifies = sipp.received("NOTIFY")
    assert len(notifies) == 2, notifies
    assert "message/sipfrag" in notifies[0] and "active" in notifies[0], notifies[0]
    assert "terminated" in notifies[1] and "SIP/2.0 200 OK" in notifies[1], notifies[1]


def test_the_api_hands_a_bridged_call_on_and_the_agent_hangs_the_phone_up(relay, tmp_path, user):
    number = forwarding(user)
    sipp = trunk(relay, tmp_path, "", calls=2)  # the phone only waits for its BYE
    caller = call_in(
        relay.agent, tmp_path, "inbound_message", number.number, greeting_ms=0, message_ms=6000
    )
    leg = wait_until(
        lambda: Leg.objects.filter(
            call__number=number, phone=PHONE, answered_at__isnull=False
        ).first(),
        deadline=20,
        what="the phone's leg bridged",
    )
    token = session_open(user=user).token
    status, body = http(
        "POST", f"{relay.base}/api/calls/{leg.call_id}/transfer", {"to": TARGET}, token
    )
    assert (status, body) == (
        202,
        {"call": str(leg.call_id), "to": TARGET, "status": "transferring"},
    ), body
    assert caller.finish() == 0, caller
    assert sipp.finish() == 0, sipp  # the phone got its BYE, the target answered

    [record] = wait_for_records(number, 1)
    assert (record.status, record.forwarded_to, record.transferred_to) == (
        CallStatus.ANSWERED,
        PHONE,
        TARGET,
    )
    assert invited(sipp) == [PHONE, TARGET]
    assert sipp.received("NOTIFY") == []  # no REFER, nobody to notify
    _seconds, _to_target, to_caller = transfer_bridge(relay, record.sip_call_id)
    assert to_caller >= 100, to_caller
    # Once transferred, the call is no longer one the API can hand on.
    status, body = http(
        "POST", f"{relay.base}/api/calls/{leg.call_id}/transfer", {"to": TARGET}, token
    )
    assert (status, body["code"]) == (409, "call_not_transferable"), body


def test_the_target_that_took_the_call_hands_it_on_again_with_its_own_refer(relay, tmp_path, user):
    number = forwarding(user)
    phone = refer(f"<tel:{TARGET}>", expect=202, after_ms=800) + notified("100 Trying", "200 OK")
    again = refer(f"<tel:{SECOND}>", expect=202, after_ms=800) + notified("100 Trying", "200 OK")
    sipp = trunk(
        relay,
        tmp_path,
        phone,
        calls=3,
        targets=(TARGET, SECOND),
        relayer=TARGET,
        target_actions=again,
    )
    caller = call_in(
        relay.agent, tmp_path, "inbound_message", number.number, greeting_ms=0, message_ms=6000
    )
    assert caller.finish() == 0, caller
    assert sipp.finish() == 0, sipp  # both referrers were told 200 and hung up

    [record] = wait_for_records(number, 1)
    assert (record.status, record.forwarded_to, record.transferred_to) == (
        CallStatus.ANSWERED,
        PHONE,
        SECOND,  # the last one taken
    )
    assert not record.recording
    assert legs_of(record) == [
        (LegRole.FORWARD_TARGET, PHONE, True),
        (LegRole.TRANSFER_TARGET, TARGET, True),
        (LegRole.TRANSFER_TARGET, SECOND, True),
    ]
    assert invited(sipp) == [PHONE, TARGET, SECOND]
    # The caller ended bridged to SECOND: the second bridge after a transfer relayed its audio.
    _seconds, _to_target, to_caller = transfer_bridge(relay, record.sip_call_id, count=2)
    assert to_caller >= 50, to_caller
    assert len(sipp.received("NOTIFY")) == 4  # two to the phone, two to TARGET


async def test_the_api_hands_the_callee_of_a_call_from_the_browser_on(relay, tmp_path, user):
    # The tab (aiortc) calls PHONE; the API hands PHONE on to TARGET, which answers, talks
    # 2.5 s and hangs up; PHONE is then hung up by Relay.
    await sync_to_async(NumberFactory)(owner=user, alias="Shop")
    sipp = trunk(
        relay, tmp_path, "", calls=2, relayer=TARGET, target_actions=hang_up(after_ms=2500)
    )
    token = (await sync_to_async(session_open)(user=user)).token
    browser = Browser()
    try:
        async with connect(f"{relay.ws_base}/ws?token={token}") as ws:
            await call_from_the_browser(ws, browser, "out-1", PHONE)
            url = f"{relay.base}/api/calls/out-1/transfer"
            status, body = await asyncio.to_thread(http, "POST", url, {"to": TARGET}, token)
            assert (status, body["to"], body["status"]) == (202, TARGET, "transferring"), body
            ended = await next_frame(ws, "out-1", "rtc_hangup")
            assert (ended["reason"], ended["to"]) == ("transferred", TARGET)
            assert (await status_frames(ws, "out-1"))[-1] == "completed"
            # Over: nothing to hand on any more.
            status, body = await asyncio.to_thread(http, "POST", url, {"to": TARGET}, token)
            assert (status, body["code"]) == (409, "call_not_transferable"), body
    finally:
        await browser.pc.close()
    assert await asyncio.to_thread(sipp.finish) == 0, sipp
    call = await sync_to_async(Call.objects.get)(call_id="out-1")
    assert await sync_to_async(legs_of)(call) == [(LegRole.TRANSFER_TARGET, TARGET, True)]
    assert invited(sipp) == [PHONE, TARGET]
    # The callee was bridged to TARGET: its audio relayed to the callee.
    _seconds, _to_target, to_callee = await asyncio.to_thread(
        transfer_bridge, relay, str(call.pk), kind="call"
    )
    assert to_callee >= 50, to_callee


async def test_a_target_that_does_not_answer_gives_the_callee_back_to_the_tab(
    relay, tmp_path, user
):
    # The tab's own Transfer (call_transfer by callId) to NOBODY, which rings out: the tab has
    # the callee back and is told so; it then hangs up, which ends the call.
    await sync_to_async(NumberFactory)(owner=user, alias="Shop")
    sipp = trunk(relay, tmp_path, "", calls=2)
    token = (await sync_to_async(session_open)(user=user)).token
    browser = Browser()
    try:
        async with connect(f"{relay.ws_base}/ws?token={token}") as ws:
            await call_from_the_browser(ws, browser, "out-2", PHONE)
            frame = {"type": "call_transfer", "callId": "out-2", "to": NOBODY}
            await ws.send(json.dumps(frame))
            assert (await next_frame(ws, "out-2", "call_transfer"))["status"] == "transferring"
            back = await next_frame(ws, "out-2", "call_transfer")
            assert (back["status"], back["reason"], back["to"]) == ("returned", "no_answer", NOBODY)
            await browser.pc.close()  # the tab, given the callee back, hangs up
            assert (await status_frames(ws, "out-2"))[-1] == "completed"
    finally:
        await browser.pc.close()
    assert await asyncio.to_thread(sipp.finish) == 0, sipp  # NOBODY CANCELed, PHONE's BYE
    call = await sync_to_async(Call.objects.get)(call_id="out-2")
    assert await sync_to_async(legs_of)(call) == [(LegRole.TRANSFER_TARGET, NOBODY, False)]
    assert "the transfer was not taken; back to the tab" in relay.log_path.read_text()


def test_an_attended_transfer_sends_the_targets_invite_replaces(relay, tmp_path, user):
    number = forwarding(user)
    phone = refer(
        f"<sip:{TARGET}@127.0.0.1;user=phone?Replaces={REPLACES}>", expect=202, after_ms=1000
    ) + notified("100 Trying", "200 OK")
    sipp = trunk(relay, tmp_path, phone, calls=2)
    caller = call_in(
        relay.agent, tmp_path, "inbound_message", number.number, greeting_ms=0, message_ms=5000
    )
    assert caller.finish() == 0, caller
    assert sipp.finish() == 0, sipp

    [record] = wait_for_records(number, 1)
    assert (record.forwarded_to, record.transferred_to) == (PHONE, TARGET)
    invite = sipp.received("INVITE")[1]
    # RFC 3891: the target is asked to replace its call with the phone by Relay's.
    assert re.search(r"^Replaces: abc@x;to-tag=1;from-tag=2\r?$", invite, re.MULTILINE), invite
    _seconds, _to_target, to_caller = transfer_bridge(relay, record.sip_call_id)
    assert to_caller >= 100, to_caller


def test_an_attended_transfer_not_taken_brings_the_caller_back_to_the_phone(relay, tmp_path, user):
    number = forwarding(user)
    phone = refer(f"<tel:{NOBODY}?Replaces={REPLACES}>", expect=202, after_ms=1000) + notified(
        "100 Trying", "480 Temporarily Unavailable"
    )
    sipp = trunk(relay, tmp_path, phone, calls=2)
    # The caller stays past NOBODY's 5 s of ringing, then hangs up: the phone gets the BYE.
    caller = call_in(
        relay.agent, tmp_path, "inbound_message", number.number, greeting_ms=0, message_ms=9000
    )
    assert caller.finish() == 0, caller
    assert sipp.finish() == 0, sipp  # 480 told, no BYE until the caller left

    [record] = wait_for_records(number, 1)
    assert (record.status, record.forwarded_to, record.recording) == (
        CallStatus.ANSWERED,
        PHONE,
        "",
    )  # no voicemail: back to the phone
    assert 8 <= record.duration <= 11, record.duration
    log = relay.log_path.read_text()
    assert "the transfer was not taken; back to the transferor" in log
    bye = sipp.received("BYE")
    assert len(bye) == 1, bye  # the phone's, after the caller's; NOBODY was CANCELed


def test_refused_refers_leave_the_call_bridged_as_it_was(relay, tmp_path, user):
    number = forwarding(user)
    phone = (
        refer("<http://example.com/>", expect=400, after_ms=800)
        + refer(f"<tel:{REFUSED}>", expect=403, cseq=2)
        + refer(f"<sip:{TARGET}@127.0.0.1?Subject=hello>", expect=403, cseq=3)
    )
    sipp = trunk(relay, tmp_path, phone, calls=1)
    caller = call_in(
        relay.agent, tmp_path, "inbound_message", number.number, greeting_ms=0, message_ms=4000
    )
    assert caller.finish() == 0, caller
    assert sipp.finish() == 0, sipp  # the refusals, then the BYE once the caller hung up

    [record] = wait_for_records(number, 1)
    assert (record.status, record.forwarded_to, record.transferred_to) == (
        CallStatus.ANSWERED,
        PHONE,
        None,
    )
    assert 3 <= record.duration <= 6, record.duration
    assert invited(sipp) == [PHONE]  # nobody else was dialled
    assert sipp.received("NOTIFY") == []
    assert legs_of(record) == [(LegRole.FORWARD_TARGET, PHONE, True)]


def test_a_transfer_target_that_does_not_answer_sends_the_caller_to_voicemail(
    relay, tmp_path, user
):
    number = forwarding(user)
    phone = refer(f"<tel:{NOBODY}>", expect=202, after_ms=1000) + notified(
        "100 Trying", "480 Temporarily Unavailable"
    )
    sipp = trunk(relay, tmp_path, phone, calls=2)
    # The caller talks from 6 s after the answer on: past the 5 s NOBODY rings, the
    # greeting and the beep, into the voicemail's recording.
    caller = call_in(
        relay.agent, tmp_path, "inbound_message", number.number, greeting_ms=6000, message_ms=5500
    )
    assert caller.finish() == 0, caller
    assert sipp.finish() == 0, sipp  # the phone was told 480 and hung up; NOBODY CANCELed

    [record] = wait_for_records(number, 1)
    assert (record.status, record.forwarded_to, record.transferred_to) == (
        CallStatus.ANSWERED,
        PHONE,
        NOBODY,
    )
    assert record.recording, "voicemail recorded nothing"
    assert invited(sipp) == [PHONE, NOBODY]
    assert sipp.received("CANCEL"), sipp
    assert legs_of(record) == [
        (LegRole.FORWARD_TARGET, PHONE, True),
        (LegRole.TRANSFER_TARGET, NOBODY, False),
    ]


def test_a_refer_outside_any_call_is_refused_403(relay):
    host, port = relay.agent.rsplit(":", 1)
    wait_until(lambda: udp_port_taken(int(port)), deadline=30, what="the agent")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.settimeout(10)
        me = f"127.0.0.1:{sock.getsockname()[1]}"
        request = (
            f"REFER sip:relay@{host}:{port} SIP/2.0\r\n"
            f"Via: SIP/2.0/UDP {me};branch=z9hG4bK-refer-{time.monotonic_ns()}\r\n"
            "Max-Forwards: 70\r\n"
            f"From: <sip:phone@{me}>;tag=1\r\n"
            f"To: <sip:relay@{host}:{port}>\r\n"
            f"Call-ID: refer-{time.monotonic_ns()}@127.0.0.1\r\n"
            "CSeq: 1 REFER\r\n"
            f"Contact: <sip:phone@{me}>\r\n"
            f"Refer-To: <tel:{TARGET}>\r\n"
            "Content-Length: 0\r\n\r\n"
        )
        sock.sendto(request.encode(), (host, int(port)))
        answer = sock.recv(65535).decode()
    assert answer.startswith("SIP/2.0 403 "), answer


NOT_SIP = "Bad Request (Refer-To is not a sip:, sips: or tel: URI)"
NO_USER = "Bad Request (a SIP Refer-To must name a user and a host)"
REFER_TOS = [
    (f"<tel:{TARGET}>", TARGET),
    ("<tel:+44-113-496-0300;phone-context=+44>", TARGET),
    (f"<sip:{TARGET}@trunk.example.com;user=phone>", TARGET),
    (f'"Desk" <sips:{TARGET}@trunk.example.com>', TARGET),
    ("<sip:alice@pbx.example.com;transport=tcp>", "sip:alice@pbx.example.com"),
    ("sip:alice@pbx.example.com", "sip:alice@pbx.example.com"),
    (
        "<http://example.com/>",
        Refusal(400, "Bad Request (Refer-To is not a sip:, sips: or tel: URI)"),
    ),
    ("<tel:0113 496 0300>", Refusal(400, "Bad Request (a tel: Refer-To must be a global number)")),
    (
        "<sip:pbx.example.com>",
        Refusal(400, "Bad Request (a SIP Refer-To must name a user and a host)"),
    ),
    ("<sip:bob@pbx.example.com?Replaces=1%3Bto-tag%3D2%3Bfrom-tag%3D3>", "sip:bob@pbx.example.com"),
    (
        "<sip:bob@pbx.example.com?Subject=hello>",
        Refusal(403, "Forbidden (a Refer-To header other than Replaces)"),
    ),
]


@pytest.mark.parametrize(("value", "expected"), REFER_TOS)
def test_a_refer_to_is_read_as_a_number_a_sip_uri_or_refused(value, expected):
    request = Message(method="REFER", uri="sip:relay@127.0.0.1")
    request.headers = [("Refer-To", value)]
    assert refer_target(request) == expected


def test_an_attended_transfers_replaces_is_read_unescaped():
    request = Message(method="REFER", uri="sip:relay@127.0.0.1")
    request.headers = [("Refer-To", f"<sip:{TARGET}@pbx.example.com?Replaces={REPLACES}>")]
    assert (refer_target(request), refer_replaces(request)) == (
        TARGET,
        "abc@x;to-tag=1;from-tag=2",
    )
    request.headers = [("Refer-To", f"<tel:{TARGET}>")]
    assert refer_replaces(request) == ""


def test_none_or_two_refer_tos_are_400():
    request = Message(method="REFER", uri="sip:relay@127.0.0.1")
    assert refer_target(request).status == 400
    request.headers = [("Refer-To", f"<tel:{TARGET}>"), ("Refer-To", f"<tel:{NOBODY}>")]
    assert refer_target(request).status == 400


def test_a_refer_from_the_caller_is_refused_403_and_the_call_goes_on(relay, tmp_path, user):
    # The caller's own dialog is no bridged phone's: a caller cannot send itself elsewhere
    # on the owner's account.
    number = forwarding(user)
    sipp = trunk(relay, tmp_path, "", calls=1)
    caller = call_in(
        relay.agent,
        tmp_path,
        "caller_refers",
        number.number,
        refer_ms=1000,
        refer_to=f"<tel:{TARGET}>",
        refer_status=403,
        message_ms=2000,
    )
    assert caller.finish() == 0, caller  # 403, then its own BYE answered
    assert sipp.finish() == 0, sipp  # the phone stayed bridged until the caller left

    [record] = wait_for_records(number, 1)
    assert (record.status, record.forwarded_to, record.transferred_to) == (
        CallStatus.ANSWERED,
        PHONE,
        None,
    )
    assert invited(sipp) == [PHONE]
