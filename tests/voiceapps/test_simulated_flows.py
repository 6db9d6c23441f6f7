"""Scripts run by the simulated provider (issue 41), whose callee presses SIMULATED_DIGITS,
against a real voice application on loopback: gather, branches, hooks (JSON and TwiML, slow,
failing, oversized, invalid), redirect, hangup and the limits. What the verbs report is in
the call's timeline, its call_status frames and its webhook deliveries; digits never in a
log."""

from __future__ import annotations

import logging

import pytest
from standardwebhooks import Webhook

from calls.models import Call
from realtime.services import call_submit
from tests.conftest import drain_tasks
from tests.voiceapps.conftest import Reply

pytestmark = pytest.mark.django_db(transaction=True)

CONFIRM = {"text": "Press 1 to confirm, 2 to cancel."}


def run(user, script, call_id="c1", **extra) -> Call:
    data = {"callId": call_id, "to": "+442079460120", "script": script, **extra}
    call_submit(user=user, data=data)
    drain_tasks()
    return Call.objects.get(owner=user, call_id=call_id)


def reports(call: Call) -> list[dict]:
    """The verbs' reports of the call's timeline, as GET /api/calls/:callId would show them."""
    return [
        {"event": e.kind, **(e.data or {}), **({"detail": e.detail} if e.detail else {})}
        for e in call.events.exclude(kind="")
    ]


def said(app, path="/said") -> list[str]:
    """The texts the app was told were said (a say's hook stand-in: a gather after it)."""
    return [body["result"]["digits"] for body in app.bodies(path)]


def test_an_appointment_reminder_reads_back_the_digit_through_its_hook(
    user, voice_app, webhook_secret, settings
):
    settings.SIMULATED_DIGITS = "1"
    hook = voice_app.answer("/confirm", Reply(body=[{"say": {"text": "Confirmed. Goodbye."}}]))
    script = [{"gather": {"numDigits": 1, "say": CONFIRM, "actionHook": hook}}]

    call = run(user, script)

    assert call.status == "completed"
    (path, headers, body), *_ = [r for r in voice_app.requests if r[0] == "/confirm"]
    payload = Webhook(webhook_secret).verify(body, headers)  # signed as webhooks are
    assert payload == {
        "callId": "c1",
        "call": str(call.pk),
        "direction": "outbound",
        "from": call.caller_id,
        "to": "+442079460120",
        "verb": "gather",
        "result": {"digits": "1", "reason": "numDigits"},
    }
    assert reports(call) == [
        {"event": "gathered", "verb": "gather", "result": {"digits": "1", "reason": "numDigits"}}
    ]
    # The report reaches the webhook too, as a call_status with the call's state.
    gathered = [e for e in voice_app.bodies("/events") if e.get("event") == "gathered"]
    assert gathered == [
        {
            "type": "call_status",
            "callId": "c1",
            "call": str(call.pk),
            "seq": call.events.get(kind="gathered").seq,
            "status": "in_progress",
            "ts": gathered[0]["ts"],
            "event": "gathered",
            "verb": "gather",
            "result": {"digits": "1", "reason": "numDigits"},
        }
    ]


@pytest.mark.parametrize(
    ("keys", "body", "result"),
    [
        ("4", {"numDigits": 1}, {"digits": "4", "reason": "numDigits"}),
        ("123", {"numDigits": 2}, {"digits": "12", "reason": "numDigits"}),
        ("12#", {}, {"digits": "12", "reason": "finishOnKey"}),
        ("12*", {"finishOnKey": "*"}, {"digits": "12", "reason": "finishOnKey"}),
        ("", {"numDigits": 1}, {"digits": "", "reason": "timeout"}),
        ("12", {"numDigits": 4}, {"digits": "12", "reason": "timeout"}),
        (
            "4",
            {"numDigits": 1, "input": ["dtmf", "speech"]},
            {"digits": "4", "reason": "numDigits", "speech": "", "confidence": 0.0},
        ),
        (
            "4",
            {"numDigits": 1, "input": ["speech"]},
            {"digits": "", "reason": "timeout", "speech": "", "confidence": 0.0},
        ),
    ],
    ids=[
        "numDigits",
        "numDigits-of-more",
        "finishOnKey",
        "other-finishOnKey",
        "none",
        "short",
        "speech-and-keys",
        "speech-only",
    ],
)
def test_gather_ends_by_numdigits_finishonkey_or_timeout(user, settings, keys, body, result):
    settings.SIMULATED_DIGITS = keys

    call = run(user, [{"gather": body}])

    assert reports(call) == [{"event": "gathered", "verb": "gather", "result": result}]


def test_a_speech_gathers_hook_gets_its_result_and_twilios_names_for_it(
    user, voice_app, webhook_secret, settings
):
    settings.SIMULATED_DIGITS = ""  # the simulated callee says nothing and presses nothing
    hook = voice_app.answer("/heard", Reply(body=[{"hangup": {}}]))

    run(user, [{"gather": {"input": ["speech"], "timeout": 1, "actionHook": hook}}])

    (path, headers, body), *_ = [r for r in voice_app.requests if r[0] == "/heard"]
    payload = Webhook(webhook_secret).verify(body, headers)
    assert payload["result"] == {"digits": "", "reason": "timeout", "speech": "", "confidence": 0.0}
    assert (payload["SpeechResult"], payload["Confidence"]) == ("", 0.0)
    # A key gather's hook has neither (the reminder above: its body exactly).


def test_a_menu_routes_by_digit_with_no_web_server(user, settings):
    settings.SIMULATED_DIGITS = "2,9"
    menu = {
        "numDigits": 1,
        "say": {"text": "Press 1 for sales, 2 for support."},
        "branches": {
            "1": [{"gather": {"numDigits": 1, "timeout": 1}}, {"hangup": {}}],
            "2": [{"pause": {"seconds": 2}}, {"gather": {"numDigits": 1, "timeout": 2}}],
            "default": [{"hangup": {}}],
        },
    }

    call = run(user, [{"gather": menu}, {"say": {"text": "Never said: the branch replaced it"}}])

    assert [r["result"]["digits"] for r in reports(call)] == ["2", "9"]
    assert call.status == "completed"


def test_digits_that_match_no_branch_take_the_default(user, settings):
    settings.SIMULATED_DIGITS = "7,5"
    menu = {"numDigits": 1, "branches": {"1": [{"hangup": {}}], "default": [{"gather": {}}]}}

    call = run(user, [{"gather": menu}])

    assert [r["result"]["digits"] for r in reports(call)] == ["7", "5"]


def test_hangup_ends_the_script(user):
    call = run(user, [{"say": {"text": "Goodbye."}}, {"hangup": {}}, {"gather": {}}])

    assert reports(call) == [] and call.status == "completed"


def test_redirect_runs_the_script_its_url_answers(user, voice_app, webhook_secret, settings):
    settings.SIMULATED_DIGITS = "3"
    next_part = voice_app.answer("/next", Reply(body=[{"gather": {"numDigits": 1}}]))

    call = run(user, [{"redirect": {"url": next_part}}, {"say": {"text": "Not reached."}}])

    assert voice_app.bodies("/next")[0]["verb"] == "redirect"
    assert reports(call) == [
        {"event": "gathered", "verb": "gather", "result": {"digits": "3", "reason": "numDigits"}}
    ]


def test_a_script_that_asked_who_answered_tells_its_hooks(user, voice_app, webhook_secret):
    who = voice_app.answer("/who", Reply(body=[{"say": {"text": "Hello."}}]))

    call = run(user, [{"redirect": {"url": who}}], machineDetection="detect")

    [asked] = voice_app.bodies("/who")
    assert (asked["answeredBy"], asked["AnsweredBy"]) == ("human", "human")
    assert reports(call)[0] == {
        "event": "detected",
        "answeredBy": "human",
        "detail": "the simulated callee",
    }
    assert call.answered_as == "human"


def test_a_hook_may_answer_twiml(user, voice_app, webhook_secret, settings):
    settings.SIMULATED_DIGITS = "1,42#"
    twiml = (
        '<?xml version="1.0" encoding="UTF-8"?><Response>'
        '<Say language="en-GB">Enter your account number.</Say>'
        '<Gather finishOnKey="#" timeout="4"><Say>Then press hash.</Say></Gather>'
        "</Response>"
    )
    hook = voice_app.answer("/twiml", Reply(body=twiml, content_type="text/xml"))

    call = run(user, [{"gather": {"numDigits": 1, "actionHook": hook}}])

    assert [r["result"] for r in reports(call)] == [
        {"digits": "1", "reason": "numDigits"},
        {"digits": "42", "reason": "finishOnKey"},
    ]


def test_twiml_relative_urls_resolve_against_the_document_they_came_in(
    user, voice_app, webhook_secret, settings
):
    """Twilio's form (issue 56): each relative URL against its own document's URL, the next
    one against the new document's."""
    settings.SIMULATED_DIGITS = "1,2"
    xml = "text/xml"
    entry = voice_app.answer(
        "/ivr/entry",
        Reply(body="<Response><Gather numDigits='1' action='/next'/></Response>", content_type=xml),
    )
    voice_app.answer(
        "/next",
        Reply(body="<Response><Redirect>menu/next2</Redirect></Response>", content_type=xml),
    )
    voice_app.answer(
        "/menu/next2",
        Reply(
            body="<Response><Gather numDigits='1' action='?step=3'/></Response>", content_type=xml
        ),
    )

    call = run(user, [{"redirect": {"url": entry}}])

    assert [path for path, _, _ in voice_app.requests if path != "/events"] == [
        "/ivr/entry",
        "/next",  # not /ivr/next: "/next" is from the root
        "/menu/next2",  # against /next's URL, not /ivr/entry's
        "/menu/next2?step=3",
    ]
    assert voice_app.bodies("/next")[0]["result"] == {"digits": "1", "reason": "numDigits"}
    assert voice_app.bodies("/menu/next2")[0]["verb"] == "redirect"
    assert voice_app.bodies("/menu/next2?step=3")[0]["result"]["digits"] == "2"
    assert [r["event"] for r in reports(call)] == ["gathered", "gathered"]


def test_a_twiml_relative_url_that_resolves_to_a_bad_one_fails_the_hook_only(
    user, voice_app, webhook_secret, settings
):
    settings.SIMULATED_DIGITS = "1,2"
    bad = "<Response><Redirect>javascript:alert(1)</Redirect></Response>"
    hook = voice_app.answer("/ivr/entry", Reply(body=bad, content_type="application/xml"))

    call = run(
        user, [{"gather": {"numDigits": 1, "actionHook": hook}}, {"gather": {"numDigits": 1}}]
    )

    first, failed, second = reports(call)
    assert failed == {
        "event": "hook_failed",
        "verb": "gather",
        "detail": "answered an invalid script: script.0.redirect.url: "
        "Must be an http or https URL with a host.",
    }
    assert second["result"]["digits"] == "2" and call.status == "completed"  # went on


@pytest.mark.parametrize(
    ("reply", "failure"),
    [
        (Reply(status=500), "answered 500"),
        (Reply(body="x" * (64 * 1024 + 1), content_type="text/plain"), "more than 64 KiB"),
        (Reply(body=[{"whisper": {}}]), "answered an invalid script: script.0"),
        (Reply(body="{not json", content_type="application/json"), "answered no script"),
        (Reply(body="<Response><Sing/></Response>", content_type="application/xml"), "<Sing>"),
        (Reply(body="<!DOCTYPE x [<!ENTITY a 'b'>]><Response/>", content_type="text/xml"), "TwiML"),
        (Reply(delay=1.5), "no answer within 0.5 s"),
    ],
    ids=["error", "oversized", "invalid", "not-json", "unknown-twiml", "entities", "slow"],
)
def test_a_hook_that_fails_is_reported_and_the_script_goes_on(
    user, voice_app, webhook_secret, settings, reply, failure
):
    settings.VOICE_HOOK_TIMEOUT = 0.5
    settings.SIMULATED_DIGITS = "1,2"
    hook = voice_app.answer("/broken", reply)

    call = run(
        user, [{"gather": {"numDigits": 1, "actionHook": hook}}, {"gather": {"numDigits": 1}}]
    )

    first, failed, second = reports(call)
    assert first["event"] == "gathered" and second["result"]["digits"] == "2"  # went on
    assert failed["event"] == "hook_failed" and failed["verb"] == "gather"
    assert failure in failed["detail"]
    assert call.status == "completed"


def test_an_empty_answer_continues_the_script(user, voice_app, webhook_secret, settings):
    settings.SIMULATED_DIGITS = "1,2,3"
    empty = voice_app.answer("/empty", Reply(status=204), Reply(body=[]))

    call = run(
        user,
        [
            {"gather": {"numDigits": 1, "actionHook": empty}},
            {"gather": {"numDigits": 1, "actionHook": empty}},
            {"gather": {"numDigits": 1}},
        ],
    )

    assert [r["result"]["digits"] for r in reports(call)] == ["1", "2", "3"]


def test_a_hook_without_a_webhook_secret_is_not_sent(user, voice_app):
    hook = voice_app.url("/unsigned")

    call = run(user, [{"gather": {"numDigits": 1, "actionHook": hook}}])

    assert voice_app.bodies("/unsigned") == []
    assert reports(call)[1]["detail"].startswith("no webhook secret")


def test_too_many_steps_hang_up_with_a_limit_event(user, settings):
    settings.VOICE_MAX_STEPS = 3
    settings.SIMULATED_DIGITS = "5"
    call = run(user, [{"gather": {"numDigits": 1}}] * 5)

    *gathered, limit = reports(call)
    assert len(gathered) == 3
    assert limit == {"event": "limit", "limit": "steps", "detail": limit["detail"]}
    assert "more than 3 verbs run" in limit["detail"]
    assert call.status == "completed" and "more than 3 verbs run" in call.failure_reason


def test_redirects_past_the_limit_hang_up(user, voice_app, webhook_secret, settings):
    settings.VOICE_MAX_REDIRECTS = 2
    loop_url = voice_app.url("/loop")
    voice_app.answer("/loop", Reply(body=[{"redirect": {"url": loop_url}}]))

    call = run(user, [{"redirect": {"url": loop_url}}])

    assert len(voice_app.bodies("/loop")) == 2
    assert reports(call)[-1]["limit"] == "redirects"


def test_hooks_past_the_limit_hang_up(user, voice_app, webhook_secret, settings):
    settings.VOICE_MAX_HOOKS = 2
    hook = voice_app.answer("/again", Reply(status=204))

    call = run(user, [{"gather": {"numDigits": 1, "actionHook": hook}}] * 4)

    assert len(voice_app.bodies("/again")) == 2
    assert reports(call)[-1]["limit"] == "hooks"


def test_the_call_detail_shows_what_the_verbs_reported(user, client_jwt, settings):
    settings.SIMULATED_DIGITS = "9#"
    call = run(user, [{"gather": {}}])

    timeline = client_jwt.get("/api/calls/c1").json()["timeline"]

    gathered = [row for row in timeline if "event" in row]
    assert gathered == [
        {
            "seq": call.events.get(kind="gathered").seq,
            "status": "in_progress",
            "at": gathered[0]["at"],
            "detail": "",
            "event": "gathered",
            "verb": "gather",
            "result": {"digits": "9", "reason": "finishOnKey"},
        }
    ]
    assert [row["status"] for row in timeline][-2:] == ["in_progress", "completed"]


def test_digits_never_reach_a_log(user, voice_app, webhook_secret, settings, caplog):
    settings.SIMULATED_DIGITS = "860531#"
    hook = voice_app.answer("/pin", Reply(status=500))
    caplog.set_level(logging.DEBUG)

    call = run(user, [{"gather": {"actionHook": hook}}])

    assert reports(call)[0]["result"]["digits"] == "860531"
    assert "860531" not in caplog.text


@pytest.mark.parametrize(
    ("targets", "result"),
    [
        (["+441134960200"], {"dialStatus": "completed", "answeredBy": "+441134960200"}),
        (["+441134960207"], {"dialStatus": "busy", "answeredBy": None}),
        (["+441134960208"], {"dialStatus": "no_answer", "answeredBy": None}),
    ],
    ids=["answered", "busy", "no-answer"],
)
def test_dial_reports_how_the_target_answered_and_the_script_goes_on(user, targets, result):
    script = [{"dial": {"targets": targets}}, {"gather": {"numDigits": 1}}]

    call = run(user, script)

    dialed, gathered = reports(call)
    assert dialed["event"] == "dialed"
    assert {key: dialed["result"][key] for key in result} == result
    assert gathered["event"] == "gathered"


def test_a_dial_a_hook_answers_to_a_refused_target_fails_without_ringing_it(
    user, voice_app, webhook_secret, settings
):
    settings.SIMULATED_DIGITS = "1"
    refused = [{"dial": {"targets": ["+8613800138000"]}}]  # outside DIAL_ALLOWED_COUNTRIES
    hook = voice_app.answer("/route", Reply(body=refused))

    call = run(user, [{"gather": {"numDigits": 1, "actionHook": hook}}])

    assert reports(call)[-1] == {
        "event": "dialed",
        "verb": "dial",
        "result": {"dialStatus": "failed", "answeredBy": None, "duration": 0},
    }
