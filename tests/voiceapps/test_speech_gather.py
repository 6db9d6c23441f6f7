"""A speech gather (issue 56): `gather`'s `input`, `hints`, `speechTimeout` and `language`,
checked as every verb field is (POST /api/calls names each bad one), stored with their
defaults, and TwiML's `<Gather input="speech">` translated to them (through the hooks'
public reader, as a loopback app's answer would be read). The call itself, SIPp speaking to
it, is in tests/telephony/test_inbound_apps.py."""

from __future__ import annotations

import pytest

from calls.models import Call
from core.signedhttp import Answer
from voiceapps.hooks import answer_read

pytestmark = pytest.mark.django_db(transaction=True)


def submit(client, script):
    body = {"callId": "c1", "to": "+442079460120", "script": script}
    return client.post("/api/calls", body, format="json")


def test_a_speech_gather_is_stored_with_its_speech_defaults(client_jwt):
    script = [{"gather": {"input": ["speech", "dtmf"], "numDigits": 1}}]

    assert submit(client_jwt, script).status_code == 202

    assert Call.objects.get().script == [
        {
            "gather": {
                "numDigits": 1,
                "finishOnKey": "#",
                "timeout": 5,
                "input": ["dtmf", "speech"],
                "hints": [],
                "speechTimeout": "auto",
                "language": "en",
            }
        }
    ]


def test_a_key_gather_stays_as_it_was_with_its_input_named(client_jwt):
    assert submit(client_jwt, [{"gather": {}}]).status_code == 202

    assert Call.objects.get().script == [
        {"gather": {"finishOnKey": "#", "timeout": 5, "input": ["dtmf"]}}
    ]


def test_a_speech_gathers_fields_are_kept_as_given(client_jwt):
    gather = {
        "input": ["speech"],
        "hints": ["opening hours", "sales"],
        "speechTimeout": 3,
        "language": "en-gb",
    }
    assert submit(client_jwt, [{"gather": gather}]).status_code == 202

    stored = Call.objects.get().script[0]["gather"]
    assert {key: stored[key] for key in gather} == gather


@pytest.mark.parametrize(
    ("gather", "field", "message"),
    [
        ({"input": []}, "input", "Ensure this field has at least 1 elements."),
        ({"input": "speech"}, "input", None),
        ({"input": ["voice"]}, "input.0", None),
        ({"input": ["speech", "speech"]}, "input", "Must name each input once."),
        ({"input": ["speech"], "hints": "sales"}, "hints", None),
        ({"input": ["speech"], "hints": [""]}, "hints.0", "Must be 1 to 100 characters."),
        ({"input": ["speech"], "hints": ["x" * 101]}, "hints.0", "Must be 1 to 100 characters."),
        ({"input": ["speech"], "hints": ["a"] * 51}, "hints", None),
        ({"input": ["speech"], "hints": ["a\u0000"]}, "hints.0", None),
        ({"input": ["speech"], "speechTimeout": 0}, "speechTimeout", None),
        ({"input": ["speech"], "speechTimeout": 11}, "speechTimeout", None),
        ({"input": ["speech"], "speechTimeout": "soon"}, "speechTimeout", None),
        ({"input": ["speech"], "speechTimeout": True}, "speechTimeout", None),
        ({"input": ["speech"], "speechTimeout": 1.5}, "speechTimeout", None),
        ({"input": ["speech"], "language": "xx"}, "language", None),
        (
            {"input": ["speech"], "language": "de"},
            "language",
            "Relay's speech recognition hears English only; use en, en-us or en-gb.",
        ),
        (
            {"hints": ["sales"]},
            "hints",
            'Only for a gather whose input holds "speech".',
        ),
        ({"speechTimeout": 2}, "speechTimeout", None),
    ],
)
def test_a_bad_speech_field_is_a_400_naming_it(client_jwt, gather, field, message):
    response = submit(client_jwt, [{"say": {"text": "hi"}}, {"gather": gather}])

    assert response.status_code == 400, response.content
    fields = response.json()["fields"]
    path = f"script.1.gather.{field}"
    assert path in fields, fields
    if message is not None:
        assert fields[path] == [message]
    assert not Call.objects.exists()


def twiml_gather(attributes: str) -> dict:
    body = f"<Response><Gather {attributes}><Say>Which one?</Say></Gather></Response>"
    answer = answer_read(
        Answer(status=200, content_type="text/xml", body=body.encode()),
        base_url="https://app.example.com/ivr",
    )
    assert answer.failure == "", answer.failure
    ((name, gather),) = answer.script[0].items()
    assert name == "gather"
    return gather


def test_twiml_speech_gather_becomes_relays():
    gather = twiml_gather(
        'input="speech dtmf" hints="opening hours, sales ,," speechTimeout="auto" '
        'language="en-US" timeout="4" action="/heard"'
    )

    assert gather["input"] == ["dtmf", "speech"]
    assert gather["hints"] == ["opening hours", "sales"]
    assert gather["speechTimeout"] == "auto"
    assert gather["language"] == "en-us"
    assert gather["timeout"] == 4
    assert gather["actionHook"] == "https://app.example.com/heard"


def test_twiml_speech_timeout_in_seconds_and_a_region_relay_has_no_voice_for():
    gather = twiml_gather('input="speech" speechTimeout="2" language="en-AU"')

    assert (gather["input"], gather["speechTimeout"], gather["language"]) == (
        ["speech"],
        2,
        "en",
    )


def test_twiml_gather_without_input_is_a_key_gather():
    gather = twiml_gather('numDigits="1"')

    assert gather["input"] == ["dtmf"] and "hints" not in gather


def test_twiml_speech_gather_with_a_bad_value_is_a_failed_answer_naming_it():
    body = '<Response><Gather input="speech" speechTimeout="later"/></Response>'
    answer = answer_read(
        Answer(status=200, content_type="text/xml", body=body.encode()), base_url=""
    )

    assert answer.script is None
    assert answer.failure.startswith("answered an invalid script: script.0.gather.speechTimeout")
