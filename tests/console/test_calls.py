"""The calls page: place a call (POST /api/calls's service), each refusal next to its field,
the same form posted twice placing one call, the list and its older page, cancel; another
user's call, CSRF and a signed-out browser."""

import re

import pytest

from realtime.models import CallRequest
from tests.factories import NumberFactory

pytestmark = pytest.mark.django_db


def call_id_of(form_html: str) -> str:
    return re.search(r'name="callId" value="([^"]+)"', form_html).group(1)


def place(client, **values):
    data = {"to": "+442079460123", "message": "Your table is ready", "language": "en"}
    return client.post("/calls", {**data, **values})


def test_the_form_offers_the_languages_and_your_numbers(browser_client, user, settings):
    NumberFactory(owner=user, alias="Shop", number="+442079460042")

    html = browser_client.get("/calls").content.decode()

    assert f'<option value="{settings.TTS_DEFAULT_LANGUAGE}" selected>' in html
    assert '<option value="cmn">' in html
    assert '<option value="+442079460042">Shop (+442079460042)</option>' in html
    assert "You have placed no call yet." in html
    assert len(call_id_of(html)) == 36  # a uuid4 made for this form


def test_placing_a_call_stores_it_and_lists_it(browser_client, user):
    number = NumberFactory(owner=user, number="+442079460042")
    call_id = call_id_of(browser_client.get("/calls").content.decode())

    response = place(browser_client, callId=call_id, language="de", from_number=number.number)

    assert response.status_code == 302 and response.url == "/calls"
    call = CallRequest.objects.get(owner=user)
    assert (call.call_id, call.to, call.language) == (call_id, "+442079460123", "de")
    assert call.caller_id == "+442079460042"
    page = browser_client.get("/calls").content.decode()
    assert "Calling +442079460123." in page
    assert f'data-call-id="{call_id}"' in page and 'data-status="queued"' in page
    assert f'action="/calls/{call_id}/cancel"' in page


def test_the_same_form_posted_twice_places_one_call(browser_client, user):
    call_id = call_id_of(browser_client.get("/calls").content.decode())

    first = place(browser_client, callId=call_id)
    again = place(browser_client, callId=call_id, message="something else")

    assert first.status_code == again.status_code == 302
    assert CallRequest.objects.filter(owner=user).count() == 1
    assert CallRequest.objects.get(owner=user).message == "Your table is ready"
    assert "was already placed" in browser_client.get("/calls").content.decode()


@pytest.mark.parametrize(
    ("values", "field", "sentence"),
    [
        ({"to": "12"}, "to", "E.164"),
        ({"to": ""}, "to", ""),
        ({"message": ""}, "message", ""),
        ({"message": "x" * 1001}, "message", "1000"),
        ({"message": "a\x00b"}, "message", ""),
        ({"language": "klingon"}, "language", ""),
        ({"from_number": "+442079460999"}, "from_number", "Not one of your numbers."),
        ({"to": "+19005550123"}, "to", ""),  # premium rate: destination_not_allowed
    ],
)
def test_a_refused_call_is_a_sentence_next_to_its_field(browser_client, values, field, sentence):
    response = place(browser_client, callId="form-1", **values)

    assert response.status_code == 400
    html = response.content.decode()
    assert f'id="id_{field}_errors"' in html and sentence in html
    assert f'aria-describedby="id_{field}_errors' in html
    assert 'value="form-1"' in html  # the same callId again: still one call at most
    assert not CallRequest.objects.exists()


def test_a_lone_surrogate_is_refused_not_a_500(browser_client):
    body = "callId=form-1&to=%2B442079460123&language=en&message=a%ED%A0%80b"  # CESU-8 U+D800

    response = browser_client.post("/calls", body, content_type="application/x-www-form-urlencoded")

    # The request's decoding replaced the bytes, as a browser would have: stored as such.
    assert response.status_code == 302
    assert CallRequest.objects.get().message.encode("utf-8").startswith(b"a\xef\xbf\xbd")


def test_a_bad_call_id_is_said_above_the_form(browser_client):
    response = place(browser_client, callId="")

    assert response.status_code == 400
    assert 'class="errors-above"' in response.content.decode()
    assert not CallRequest.objects.exists()


def test_the_rate_limit_is_said_above_the_form_with_retry_after(browser_client, settings):
    settings.RATE_LIMIT_CALLS_PER_USER = "1/m"
    assert place(browser_client, callId="one").status_code == 302

    response = place(browser_client, callId="two")

    assert response.status_code == 429 and int(response["Retry-After"]) > 0
    assert 'class="errors-above"' in response.content.decode()
    assert CallRequest.objects.count() == 1


def test_the_daily_quota_is_said_above_the_form_with_retry_after(browser_client, user):
    user.calls_per_day = 1
    user.save()
    assert place(browser_client, callId="one").status_code == 302

    response = place(browser_client, callId="two")

    assert response.status_code == 429 and int(response["Retry-After"]) > 0
    assert 'class="errors-above"' in response.content.decode()
    assert CallRequest.objects.count() == 1
