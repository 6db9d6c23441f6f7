"""The browser's frames on the socket (issue 43): `rtc_offer` is a call like any other, checked
field by field (its SDP by core.webrtc, before anything reads it), and `rtc_hangup` reaches
only the user's own calls from the browser. No agent runs here: the calls stay queued."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from calls.models import Call
from tests.factories import CallFactory
from tests.ledger import aack
from tests.telephony.browser_peer import an_offer

pytestmark = pytest.mark.django_db(transaction=True)

TO = "+442079460123"


@pytest.fixture
def sip(settings):
    settings.TELEPHONY_PROVIDER = "sip"
    return settings


@pytest.fixture
async def offer() -> str:
    return await an_offer()


async def test_an_offer_is_a_call_acked_queued_and_kept_for_the_agent(
    sip, communicator, user, offer
):
    ws, _ = await communicator(user)

    await ws.send_json_to({"type": "rtc_offer", "callId": "b1", "to": TO, "sdp": offer})

    assert await ws.receive_json_from(timeout=5) == await aack("b1", "queued")
    call = await sync_to_async(Call.objects.get)(owner=user, call_id="b1")
    assert (call.rtc_offer, call.message, call.script) == (offer, "", None)


@pytest.mark.parametrize(
    ("frame", "field", "says"),
    [
        ({"sdp": "v=0\r\nm=audio 9 RTP/AVP 0\r\n"}, "sdp", "DTLS fingerprint"),
        ({"sdp": "x" * 20_000}, "sdp", "over"),
        ({"sdp": "v=0\x00"}, "sdp", "characters"),
        ({"sdp": 7}, "sdp", "string"),
        ({"sdp": None}, "sdp", ""),
        ({"to": "12"}, "to", "E.164"),
        ({"to": "+8613800138000"}, None, ""),  # the dialing policy's refusal
    ],
    ids=["no-fingerprint", "oversized", "nul", "a-number", "null", "bad-to", "refused-to"],
)
async def test_a_bad_offer_frame_gets_an_error_frame_and_places_nothing(
    sip, communicator, user, offer, frame, field, says
):
    ws, _ = await communicator(user)

    await ws.send_json_to({"type": "rtc_offer", "callId": "b1", "to": TO, "sdp": offer, **frame})

    error = await ws.receive_json_from(timeout=5)
    assert error["type"] == "error" and error["callId"] == "b1"
    if field is not None:
        assert error["code"] == "invalid_request"
        assert says in " ".join(error["fields"][field])
    else:
        assert error["code"] == "destination_not_allowed"
    assert not await sync_to_async(Call.objects.exists)()
    await ws.send_json_to({"type": "ping"})  # the socket is still open
    assert (await ws.receive_json_from(timeout=5))["type"] == "pong"


async def test_without_the_sip_agent_an_offer_is_refused(communicator, user, offer, settings):
    settings.TELEPHONY_PROVIDER = "simulated"
    ws, _ = await communicator(user)

    await ws.send_json_to({"type": "rtc_offer", "callId": "b1", "to": TO, "sdp": offer})

    error = await ws.receive_json_from(timeout=5)
    assert (error["type"], error["code"]) == ("error", "invalid_request")
    assert "SIP telephony agent" in error["error"]


async def test_rtc_hangup_cancels_the_users_own_browser_call_only(
    sip, communicator, user, other_user, offer
):
    mine = await sync_to_async(CallFactory)(owner=user, call_id="b1", rtc_offer=offer)
    await sync_to_async(CallFactory)(owner=other_user, call_id="theirs", rtc_offer=offer)
    await sync_to_async(CallFactory)(owner=user, call_id="spoken")
    ws, _ = await communicator(user)

    for call_id, code in (("theirs", "not_found"), ("spoken", "invalid_request")):
        await ws.send_json_to({"type": "rtc_hangup", "callId": call_id})
        error = await ws.receive_json_from(timeout=5)
        assert (error["type"], error["code"], error["callId"]) == ("error", code, call_id)
    await ws.send_json_to({"type": "rtc_hangup", "callId": "\udc80"})
    assert (await ws.receive_json_from(timeout=5))["code"] == "invalid_request"

    await ws.send_json_to({"type": "rtc_hangup", "callId": "b1"})
    status = await ws.receive_json_from(timeout=5)
    assert (status["type"], status["callId"], status["status"]) == ("call_status", "b1", "canceled")
    await sync_to_async(mine.refresh_from_db)()
    assert mine.status == "canceled"
    rows = Call.objects.values_list("status", flat=True)
    assert await sync_to_async(lambda: set(rows))() == {"canceled", "queued"}
