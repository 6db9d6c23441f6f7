"""The calls page: place a call (POST /api/calls's service), each refusal next to its field,
the same form posted twice placing one call, the list and its older page, cancel; another
user's call, CSRF and a signed-out browser."""

import re

import pytest
from django.test import Client

from calls.models import Call
from tests.factories import CallFactory, NumberFactory, UserFactory

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
    assert '<option value="cmn">cmn</option>' in html  # a voice Django has no name for
    assert '<option value="de">German (de)</option>' in html
    assert '<option value="+442079460042">Shop (+442079460042)</option>' in html
    assert "You have placed no call yet." in html
    assert len(call_id_of(html)) == 36  # a uuid4 made for this form


def test_placing_a_call_stores_it_and_lists_it(browser_client, user):
    number = NumberFactory(owner=user, number="+442079460042")
    call_id = call_id_of(browser_client.get("/calls").content.decode())

    response = place(browser_client, callId=call_id, language="de", from_number=number.number)

    assert response.status_code == 302 and response.url == "/calls"
    call = Call.objects.get(owner=user)
    assert (call.call_id, call.to, call.language) == (call_id, "+442079460123", "de")
    assert call.caller_id == "+442079460042"
    page = browser_client.get("/calls").content.decode()
    assert "Calling +442079460123." in page
    assert f'data-call-id="{call_id}"' in page and 'data-status="queued"' in page
    assert f'action="/calls/{call_id}/cancel"' in page


@pytest.mark.parametrize("mode", ["detect", "leave_message"])
def test_a_call_placed_from_the_form_may_ask_for_machine_detection(browser_client, user, mode):
    page = browser_client.get("/calls").content.decode()
    assert f'<option value="{mode}">' in page

    response = place(browser_client, callId="form-amd", machineDetection=mode)

    assert response.status_code == 302
    assert Call.objects.get(owner=user).machine_detection == mode


def test_a_call_placed_without_machine_detection_asks_for_none(browser_client, user):
    assert place(browser_client, callId="form-plain", machineDetection="").status_code == 302
    assert Call.objects.get(owner=user).machine_detection is None


def test_a_call_that_asked_who_answered_says_so_on_the_list(browser_client, user):
    CallFactory(owner=user, machine_detection="detect", answered_as="machine", status="completed")
    CallFactory(owner=user, status="completed")

    page = browser_client.get("/calls").content.decode()

    assert page.count("Answered by:") == 1
    assert "Answered by: An answering machine" in page


def test_the_same_form_posted_twice_places_one_call(browser_client, user):
    call_id = call_id_of(browser_client.get("/calls").content.decode())

    first = place(browser_client, callId=call_id)
    again = place(browser_client, callId=call_id, message="something else")

    assert first.status_code == again.status_code == 302
    assert Call.objects.filter(owner=user).count() == 1
    assert Call.objects.get(owner=user).message == "Your table is ready"
    assert "was already placed" in browser_client.get("/calls").content.decode()


@pytest.mark.parametrize(
    ("values", "field", "sentence"),
    [
        ({"to": "12"}, "to", "Must be a phone number in E.164 form"),
        ({"to": ""}, "to", "This field may not be blank."),
        ({"to": "+44" + "9" * 5000}, "to", "Must be a phone number in E.164 form"),
        ({"message": ""}, "message", "Must be 1 to 1000 characters."),
        ({"message": "x" * 1001}, "message", "Must be 1 to 1000 characters."),
        ({"message": "a\x00b"}, "message", "Must not contain NUL characters"),
        ({"language": "klingon"}, "language", "Not a language Relay speaks"),
        ({"language": ""}, "language", "This field may not be blank."),
        ({"from_number": "+442079460999"}, "from_number", "Not one of your numbers."),
        ({"machineDetection": "sometimes"}, "machineDetection", "is not a valid choice."),
        # destination_not_allowed: the dialing policy's sentence, by the number
        ({"to": "+19005550123"}, "to", "this service dials only numbers in GB"),
    ],
)
def test_a_refused_call_is_a_sentence_next_to_its_field(browser_client, values, field, sentence):
    response = place(browser_client, callId="form-1", **values)

    assert response.status_code == 400
    html = response.content.decode()
    assert f'id="id_{field}_errors"' in html and sentence in html
    assert f'aria-describedby="id_{field}_errors' in html
    assert 'value="form-1"' in html  # the same callId again: still one call at most
    assert not Call.objects.exists()


def test_a_lone_surrogate_is_refused_not_a_500(browser_client):
    body = "callId=form-1&to=%2B442079460123&language=en&message=a%ED%A0%80b"  # CESU-8 U+D800

    response = browser_client.post("/calls", body, content_type="application/x-www-form-urlencoded")

    # The request's decoding replaced the bytes, as a browser would have: stored as such.
    assert response.status_code == 302
    assert Call.objects.get().message.encode("utf-8").startswith(b"a\xef\xbf\xbd")


@pytest.mark.parametrize("call_id", ["", "x" * 65, "a\x07b"])
def test_a_bad_call_id_is_said_above_the_form(browser_client, call_id):
    response = place(browser_client, callId=call_id)

    assert response.status_code == 400
    assert 'class="errors-above"' in response.content.decode()
    assert not Call.objects.exists()


def test_the_rate_limit_is_said_above_the_form_with_retry_after(browser_client, settings):
    settings.RATE_LIMIT_CALLS_PER_USER = "1/m"
    assert place(browser_client, callId="one").status_code == 302

    response = place(browser_client, callId="two")

    assert response.status_code == 429 and int(response["Retry-After"]) > 0
    assert 'class="errors-above"' in response.content.decode()
    assert Call.objects.count() == 1


def test_the_daily_quota_is_said_above_the_form_with_retry_after(browser_client, user):
    user.calls_per_day = 1
    user.save()
    assert place(browser_client, callId="one").status_code == 302

    response = place(browser_client, callId="two")

    assert response.status_code == 429 and int(response["Retry-After"]) > 0
    assert 'class="errors-above"' in response.content.decode()
    assert Call.objects.count() == 1


def test_the_list_is_newest_first_with_an_older_page(browser_client, user):
    for i in range(22):
        CallFactory(owner=user, call_id=f"old/{i:02}", to=f"+4420794601{i:02}")

    first = browser_client.get("/calls").content.decode()

    ids = re.findall(r'data-call-id="([^"]+)"', first)
    assert len(ids) == 20 and ids[0] == "old/21"
    cursor = re.search(r'href="/calls\?before=([^"]+)">Older calls', first).group(1)
    older = browser_client.get(f"/calls?before={cursor}").content.decode()
    assert re.findall(r'data-call-id="([^"]+)"', older) == ["old/01", "old/00"]


@pytest.mark.parametrize("cursor", ["nonsense", "A" * 31, "A" * 33, "%00", "%ED%A0%80", ""])
def test_a_malformed_cursor_is_the_404_page(browser_client, cursor):
    response = browser_client.get(f"/calls?before={cursor}")

    assert response.status_code == 404
    assert "console/not_found.html" in [t.name for t in response.templates]


def test_an_ended_call_has_no_cancel_button(browser_client, user):
    CallFactory(owner=user, call_id="done", status="completed")

    html = browser_client.get("/calls").content.decode()

    assert 'data-status="completed"' in html and "Completed" in html
    assert "/calls/done/cancel" not in html


def test_cancelling_a_call_ends_it(browser_client, user):
    call = CallFactory(owner=user, call_id="order/7", status="ringing")

    response = browser_client.post("/calls/order/7/cancel")

    assert response.status_code == 302 and response.url == "/calls"
    call.refresh_from_db()
    assert call.status == "canceled"
    assert "is canceled" in browser_client.get("/calls").content.decode()


def test_cancelling_an_ended_call_is_a_sentence_on_the_calls_page(browser_client, user):
    CallFactory(owner=user, call_id="done", status="busy")

    response = browser_client.post("/calls/done/cancel")

    assert response.status_code == 409
    assert "The call has already ended (busy)." in response.content.decode()


@pytest.mark.parametrize("call_id", ["theirs", "unknown", "bad%00id", "x" * 65])
def test_another_users_or_an_unknown_call_is_the_404_page(browser_client, call_id):
    theirs = CallFactory(owner=UserFactory(), call_id="theirs", status="ringing")

    response = browser_client.post(f"/calls/{call_id}/cancel")

    assert response.status_code == 404
    assert "console/not_found.html" in [t.name for t in response.templates]
    theirs.refresh_from_db()
    assert theirs.status == "ringing"


def test_cancel_is_a_post(browser_client, user):
    CallFactory(owner=user, call_id="c", status="ringing")

    assert browser_client.get("/calls/c/cancel").status_code == 405


def test_the_forms_enforce_csrf(csrf_client, user):
    call = CallFactory(owner=user, call_id="c", status="ringing")

    placed = csrf_client.post("/calls", {"callId": "x", "to": "+442079460123", "message": "Hi"})
    canceled = csrf_client.post("/calls/c/cancel")

    assert placed.status_code == canceled.status_code == 403
    call.refresh_from_db()
    assert call.status == "ringing" and Call.objects.count() == 1


@pytest.mark.parametrize("path", ["/calls", "/calls?before=x"])
def test_a_signed_out_browser_is_sent_to_log_in(path):
    response = Client().get(path)

    assert response.status_code == 302 and response.url.startswith("/login?next=")
