"""TwiML's relative URLs (issue 56): every URL a document names resolves against the URL it
was requested at (RFC 3986), as Twilio resolves them, and the resolved URL passes the checks
any hook URL passes. Through the hooks' public reader (voiceapps.hooks.answer_read), with the
answer a loopback server would give; the whole path through a call is in
test_simulated_flows.py and, on a real SIP call, tests/telephony/test_inbound_apps.py."""

from __future__ import annotations

import pytest

from core.signedhttp import Answer
from voiceapps.hooks import answer_read

DOCUMENT = "https://app.example.com/ivr/entry?step=1"


def twiml(body: str) -> Answer:
    return Answer(status=200, content_type="text/xml; charset=utf-8", body=body.encode())


def redirect_to(url: str) -> str:
    """Where `<Redirect>url</Redirect>`, answered to a request to DOCUMENT, leads."""
    answer = answer_read(
        twiml(f"<Response><Redirect>{url}</Redirect></Response>"), base_url=DOCUMENT
    )
    assert answer.failure == "", answer.failure
    ((name, body),) = answer.script[0].items()
    assert name == "redirect"
    return body["url"]


@pytest.mark.parametrize(
    ("written", "resolved"),
    [
        ("/next", "https://app.example.com/next"),
        ("next", "https://app.example.com/ivr/next"),
        ("menu/next?x=1", "https://app.example.com/ivr/menu/next?x=1"),
        ("../x", "https://app.example.com/x"),
        ("?a=b", "https://app.example.com/ivr/entry?a=b"),
        ("//other.example.com/x", "https://other.example.com/x"),
        ("https://elsewhere.example.org/y", "https://elsewhere.example.org/y"),
    ],
    ids=[
        "absolute-path",
        "relative-path",
        "with-query",
        "dot-dot",
        "query",
        "scheme-relative",
        "absolute",
    ],
)
def test_a_relative_url_resolves_against_the_documents_url(written, resolved):
    assert redirect_to(written) == resolved


def test_every_url_a_document_names_is_resolved():
    document = (
        "<Response>"
        "<Play>hold.wav</Play>"
        "<Gather numDigits='1' action='/digits'><Play>/prompts/menu.wav</Play></Gather>"
        "<Record action=' recorded '/>"  # an attribute's spaces are not the URL's
        "<Dial action='../dialed'><Number>+441134960200</Number></Dial>"
        "<Redirect>?again=1</Redirect>"
        "</Response>"
    )

    answer = answer_read(twiml(document), base_url=DOCUMENT)

    assert answer.failure == ""
    play, gather, record, dial, redirect = (next(iter(v.values())) for v in answer.script)
    assert play["url"] == "https://app.example.com/ivr/hold.wav"
    assert gather["actionHook"] == "https://app.example.com/digits"
    assert gather["play"]["url"] == "https://app.example.com/prompts/menu.wav"
    assert record["actionHook"] == "https://app.example.com/ivr/recorded"
    assert dial["actionHook"] == "https://app.example.com/dialed"
    assert redirect["url"] == "https://app.example.com/ivr/entry?again=1"


def test_the_says_and_keys_of_a_document_are_not_urls():
    document = "<Response><Say>next</Say><Gather finishOnKey='#'><Say>/x</Say></Gather></Response>"

    answer = answer_read(twiml(document), base_url=DOCUMENT)

    say, gather = (next(iter(v.values())) for v in answer.script)
    assert say["text"] == "next" and gather["say"]["text"] == "/x"
    assert gather["finishOnKey"] == "#" and "actionHook" not in gather


def failure_of(url: str) -> str:
    answer = answer_read(
        twiml(f"<Response><Redirect>{url}</Redirect></Response>"), base_url=DOCUMENT
    )
    assert answer.script is None
    return answer.failure


@pytest.mark.parametrize(
    ("relative", "absolute", "reason"),
    [
        ("javascript:x", "javascript:x", "Must be an http or https URL with a host."),
        ("http:next", "http:next", "Must be an http or https URL with a host."),
        ("//10.0.0.7/digits", "https://10.0.0.7/digits", "10.0.0.7 is a private or local address"),
        ("//127.0.0.1:8000/x", "https://127.0.0.1:8000/x", "127.0.0.1 is a private or local"),
        ("//[::1", "https://[::1", "Must be a valid http or https URL."),
        ("?" + "a" * 2000, DOCUMENT.split("?")[0] + "?" + "a" * 2000, "at most 2000 characters"),
    ],
    ids=["javascript", "other-scheme", "private", "loopback", "broken-ipv6", "too-long"],
)
def test_a_relative_url_that_resolves_to_a_bad_one_fails_as_the_bad_one_does(
    relative, absolute, reason
):
    failure = failure_of(relative)

    assert failure.startswith("answered an invalid script: script.0.redirect.url: ")
    assert reason in failure
    assert failure == failure_of(absolute)  # the same refusal as the URL written out


def test_a_relative_url_leads_to_loopback_only_where_the_setting_allows_it(settings):
    settings.WEBHOOK_ALLOW_PRIVATE = True
    local = "http://127.0.0.1:8000/ivr/entry"
    answer = answer_read(twiml("<Response><Redirect>/next</Redirect></Response>"), base_url=local)

    assert answer.script == [{"redirect": {"url": "http://127.0.0.1:8000/next"}}]


def test_an_empty_url_is_refused_not_taken_for_the_documents_own():
    assert "may not be blank" in failure_of("")
    assert (
        "may not be blank"
        in answer_read(twiml("<Response><Gather action=''/></Response>"), base_url=DOCUMENT).failure
    )


def test_a_json_scripts_urls_stay_absolute():
    """Relay's own verbs hold absolute URLs wherever the script comes from (docs/decisions.md,
    "TwiML's relative URLs")."""
    answer = answer_read(
        Answer(
            status=200, content_type="application/json", body=b'[{"redirect": {"url": "/next"}}]'
        ),
        base_url=DOCUMENT,
    )

    assert answer.failure == (
        "answered an invalid script: script.0.redirect.url: "
        "Must be an http or https URL with a host."
    )
