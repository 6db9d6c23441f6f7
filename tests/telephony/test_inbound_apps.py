"""A number's voice application answering its incoming calls (issue 41): SIPp calls the number
as the trunk would and presses keys; a real voice application on loopback answers the hooks.
The blocklist comes first, the record says `answered_by: "app"`, and an application that
gives no script leaves the call to voicemail."""

from __future__ import annotations

import re

import pytest
from standardwebhooks import Webhook

from harness.live import RelayProcess, wait_until
from harness.sip import MESSAGE_SECONDS, Sipp, free_udp_port, presses
from tests.factories import BlockedCallerFactory, NumberFactory
from tests.telephony.conftest import CALLER, call_in, sip_env, wait_for_records
from tests.voiceapps.conftest import Reply
from virtual_numbers.models import OpeningHours
from voiceapps.services import voice_app_set
from voiceapps.verbs import script_check
from webhooks.services import webhook_set

pytestmark = [
    pytest.mark.usefixtures("calls_settled"),
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(240),
]


@pytest.fixture(scope="module")
def relay(tmp_path_factory, django_db_setup):
    """runrelay with the SIP agent, whose hooks may go to loopback; calls to a number without
    an application ring 1 s before voicemail answers."""
    workdir = tmp_path_factory.mktemp("inbound-apps")
    trunk = free_udp_port()
    env = sip_env(
        workdir,
        trunk,
        INBOUND_RING_SECONDS=1,
        WEBHOOK_ALLOW_PRIVATE="true",
        VOICE_HOOK_TIMEOUT="2",
    )
    process = RelayProcess(workdir, log=workdir / "relay.log", **env)
    process.agent, process.trunk_port = env["SIP_BIND"], trunk
    yield process
    process.stop()


@pytest.fixture
def secret(user, app) -> str:
    """The user's webhook secret, which signs their numbers' hooks."""
    return webhook_set(user=user, url=app.url("/events"), events=["incoming_call"])[1]


@pytest.fixture
def number(user, secret):
    return NumberFactory(owner=user, alias="Shop")


def caller_pressing(relay, tmp_path, number, keys: str, *, before_ms=1500):
    return call_in(
        relay.agent,
        tmp_path,
        "inbound_keys",
        number.number,
        before_ms=before_ms,
        presses=presses(keys),
        hangup_timeout_ms=30000,
    )


def test_a_menu_answers_the_call_and_its_hook_gets_the_digit(relay, tmp_path, number, app, secret):
    hook = app.answer("/menu", Reply(body=[{"say": {"text": "We are open nine to five."}}]))
    menu = {"numDigits": 1, "say": {"text": "Press 1 for opening hours."}, "actionHook": hook}
    voice_app_set(number=number, script=script_check([{"gather": menu}]))

    caller = caller_pressing(relay, tmp_path, number, "1")

    assert caller.finish(60) == 0, caller  # the script ended, and Relay hung up
    (record,) = wait_for_records(number, 1)
    assert (record.status, record.answered_by) == ("answered", "app")
    (_, headers, body), *_ = [r for r in app.requests if r[0] == "/menu"]
    payload = Webhook(secret).verify(body, headers)
    assert payload["direction"] == "inbound" and payload["from"] == CALLER
    assert (payload["to"], payload["numberId"]) == (number.number, str(number.pk))
    assert payload["result"] == {"digits": "1", "reason": "numDigits"}


def test_a_url_gives_each_call_its_script(relay, tmp_path, number, app):
    twiml = "<Response><Gather numDigits='2' timeout='5' action='{}'/></Response>"
    digits = app.url("/digits")
    entry = app.answer(
        "/entry", Reply(body=twiml.format(digits), content_type="text/xml; charset=utf-8")
    )
    voice_app_set(number=number, url=entry)

    caller = caller_pressing(relay, tmp_path, number, "42")

    assert caller.finish(60) == 0, caller
    (first,) = app.bodies("/entry")
    assert set(first) == {"call", "sipCallId", "callId", "direction", "from", "to", "numberId"}
    wait_until(lambda: app.bodies("/digits"), deadline=10, what="the digits' hook")
    assert app.bodies("/digits")[0]["result"] == {"digits": "42", "reason": "numDigits"}
    (record,) = wait_for_records(number, 1)
    assert record.answered_by == "app"
    # `call` names the call as its record does; `callId` is its SIP Call-ID, one release more.
    assert (first["call"], first["sipCallId"]) == (str(record.pk), record.sip_call_id)
    assert first["callId"] == record.sip_call_id


def test_a_twilio_app_with_relative_urls_moves_as_it_is(relay, tmp_path, number, app):
    """Twilio's own form (issue 56): the gather's action and the redirect are relative, each
    resolved against the URL of the document it came in."""
    xml = "text/xml; charset=utf-8"
    gather = "<Gather numDigits='1' timeout='5' action='/next'><Say>Press a key.</Say></Gather>"
    entry = app.answer("/ivr/entry", Reply(body=f"<Response>{gather}</Response>", content_type=xml))
    app.answer(
        "/next", Reply(body="<Response><Redirect>next2</Redirect></Response>", content_type=xml)
    )
    app.answer("/next2", Reply(body="<Response><Hangup/></Response>", content_type=xml))
    voice_app_set(number=number, url=entry)

    caller = caller_pressing(relay, tmp_path, number, "7")

    assert caller.finish(60) == 0, caller  # Relay hung up: /next2's <Hangup/> was run
    # "/next" from the root, not /ivr/next; "next2" against /next's URL, not /ivr/next2.
    assert [path for path, _, _ in app.requests if path != "/events"] == [
        "/ivr/entry",
        "/next",
        "/next2",
    ]
    (gathered,) = app.bodies("/next")
    assert (gathered["verb"], gathered["result"]) == (
        "gather",
        {"digits": "7", "reason": "numDigits"},
    )
    (redirected,) = app.bodies("/next2")
    assert (redirected["verb"], redirected["result"]) == ("redirect", {})
    assert redirected["call"] == gathered["call"] == app.bodies("/ivr/entry")[0]["call"]
    (record,) = wait_for_records(number, 1)
    assert (record.status, record.answered_by) == ("answered", "app")


def test_an_application_that_fails_leaves_the_call_to_voicemail(relay, tmp_path, number, app):
    entry = app.answer("/down", Reply(status=502))
    voice_app_set(number=number, url=entry)

    caller = call_in(
        relay.agent, tmp_path, "inbound_message", number.number, greeting_ms=5000, message_ms=1000
    )

    assert caller.finish(60) == 0, caller
    (record,) = wait_for_records(number, 1)
    assert (record.status, record.answered_by) == ("answered", "voicemail")
    assert len(app.bodies("/down")) == 1


def test_a_closed_number_goes_to_voicemail_without_asking_its_application(
    relay, tmp_path, number, app
):
    # Issue 57: do not disturb closes the number; its application is never asked (no hook
    # fetched), and the owner's webhook hears of no incoming_call, since nothing rings.
    entry = app.answer("/entry", Reply(body=[{"say": {"text": "Hello."}}]))
    voice_app_set(number=number, url=entry)
    OpeningHours.objects.create(number=number, time_zone="UTC", do_not_disturb=True)

    caller = call_in(
        relay.agent, tmp_path, "inbound_message", number.number, greeting_ms=5000, message_ms=1000
    )

    assert caller.finish(60) == 0, caller
    (record,) = wait_for_records(number, 1)
    assert (record.status, record.answered_by) == ("answered", "voicemail")
    assert app.requests == []  # neither /entry nor an incoming_call to /events, seconds later


def test_the_blocklist_comes_before_the_application(relay, tmp_path, number, app):
    voice_app_set(number=number, script=script_check([{"say": {"text": "Hello."}}]))
    BlockedCallerFactory(number=number, caller_num=CALLER)

    caller = call_in(relay.agent, tmp_path, "inbound_refused", number.number, status=603)

    assert caller.finish(60) == 0, caller
    (record,) = wait_for_records(number, 1)
    assert record.status == "blocked"
    assert app.requests == []


def test_record_in_a_numbers_application_is_its_voicemail(relay, tmp_path, number):
    script = [{"say": {"text": "Leave a message."}}, {"record": {"beep": False}}]
    voice_app_set(number=number, script=script_check(script))

    caller = call_in(
        relay.agent,
        tmp_path,
        "inbound_message",
        number.number,
        greeting_ms=2500,
        message_ms=int(MESSAGE_SECONDS * 1000) + 200,
    )

    assert caller.finish(60) == 0, caller  # the caller hung up while recording
    (record,) = wait_for_records(number, 1)
    assert (record.status, record.answered_by) == ("answered", "app")
    assert record.recording and abs(record.recording_seconds - MESSAGE_SECONDS) <= 1


def test_a_script_that_dials_first_answers_the_caller_only_when_the_target_answers(
    relay, tmp_path, number
):
    from calls.models import Call, Leg

    target = "+441134960200"
    dial = {"targets": [target], "timeout": 10, "callerId": "caller"}
    voice_app_set(number=number, script=script_check([{"dial": dial}]))
    parties = Sipp(
        tmp_path / "parties",
        "dial_parties",
        port=relay.trunk_port,
        target=re.escape(target),
        busy="none",
        answer_ms=1500,
        talk_ms=2000,
    )

    caller = caller_pressing(relay, tmp_path, number, "", before_ms=0)

    assert caller.finish(60) == 0, caller  # the target hung up, the script ended: Relay's BYE
    assert parties.finish() == 0, parties
    (record,) = wait_for_records(number, 1)
    assert (record.status, record.answered_by) == ("answered", "app")
    assert 1 <= record.duration <= 4
    (leg,) = Leg.objects.filter(call_id=record.pk)
    ledger = Call.objects.get(pk=record.pk)
    assert (leg.role, leg.dial, leg.status) == ("dial_target", 1, "ended")
    # Answer on bridge: the caller was answered once the target had answered, not before.
    assert leg.answered_at <= ledger.answered_at
    assert (ledger.answered_at - ledger.created_at).total_seconds() >= 1.5
    # The target sees the caller, and the number the call was for (RFC 5806).
    (invite,) = parties.received("INVITE")
    assert f"From: <sip:{CALLER}@" in invite
    assert f"Diversion: <sip:{number.number}@" in invite
