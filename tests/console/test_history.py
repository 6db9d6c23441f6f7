"""The history page: filters, newest first, the cursor; the voicemail streamed to its owner,
marked heard and deleted; another user's ids are the 404 page; CSRF; signed out."""

import io
import wave
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from calls.models import Recording
from core.recordings import recordings_storage
from history.services import record_inbound_call
from tests.factories import NumberFactory, UserFactory, voicemail_on
from tests.records import record_get, refreshed

pytestmark = pytest.mark.django_db

UNKNOWN = "00000000-0000-0000-0000-000000000000"


@pytest.fixture
def number(user):
    return NumberFactory(owner=user, alias="Office")


@pytest.fixture
def voicemail(number):
    return voicemail_on(number)


@pytest.fixture
def theirs():
    return voicemail_on(NumberFactory(owner=UserFactory()), caller="+447700900999")


def test_the_history_lists_the_calls_newest_first(browser_client, number, voicemail):
    now = timezone.now()
    record_inbound_call(
        number=number,
        caller_num="+447700900001",
        status="missed",
        duration=0,
        at=now - timedelta(hours=1),
    )
    record_inbound_call(
        number=number,
        caller_num="+447700900002",
        status="answered",
        duration=30,
        answered_by="forward",
        forwarded_to="+447700900555",
        at=now - timedelta(hours=2),
    )

    page = browser_client.get("/history").content.decode()

    assert page.index("+447700900123") < page.index("+447700900001") < page.index("+447700900002")
    assert "Office (" in page and "+447700900555" in page and "Forwarded" in page
    assert f'<audio controls preload="none" src="/history/{voicemail.pk}/recording"' in page
    assert ">New</span>" in page and "Mark heard" in page
    assert f"/history/{voicemail.pk}/delete?next=" in page


def test_the_filters_narrow_the_list(browser_client, user, number, voicemail):
    other = NumberFactory(owner=user, alias="Shop")
    record_inbound_call(number=other, caller_num="+447700900001", status="missed", duration=0)

    missed = browser_client.get("/history", {"status": "missed"}).content.decode()
    shop = browser_client.get("/history", {"number_id": str(other.pk)}).content.decode()
    office = browser_client.get("/history", {"number_id": str(number.pk)}).content.decode()

    assert "+447700900001" in missed and "+447700900123" not in missed
    assert "+447700900001" in shop and "+447700900123" not in shop
    assert "+447700900123" in office and "+447700900001" not in office
    assert f'<option value="{other.pk}" selected>Shop (' in shop


def test_older_calls_follow_the_cursor_with_the_filters(browser_client, number, settings):
    settings.HISTORY_MAX_LIMIT = 2  # the page size is clamped to it
    now = timezone.now()
    for minutes in range(3):
        record_inbound_call(
            number=number,
            caller_num=f"+44770090010{minutes}",
            status="missed",
            duration=0,
            at=now - timedelta(minutes=minutes),
        )
    first = browser_client.get("/history", {"status": "missed"})
    older = first.context["older"]

    assert older.startswith("/history?status=missed&before=")
    last = browser_client.get(older).content.decode()
    assert "+447700900102" in last and "+447700900100" not in last
    assert browser_client.get(older).context["older"] is None


@pytest.mark.parametrize(
    ("query", "field", "sentence"),
    [
        ({"status": "lost"}, "id_status_errors", "is not a valid choice"),
        ({"status": "a\x00b"}, "id_status_errors", "is not a valid choice"),
        ({"number_id": "nope"}, "id_number_id_errors", "Must be a valid UUID."),
        ({"number_id": "9" * 5000}, "id_number_id_errors", "Must be a valid UUID."),
        ({"before": "not-a-cursor"}, None, "Must be the nextCursor of an earlier page."),
    ],
)
def test_a_bad_filter_or_cursor_is_refused(browser_client, voicemail, query, field, sentence):
    response = browser_client.get("/history", query)

    assert response.status_code == 400
    body = response.content.decode()
    assert sentence in body
    assert f'id="{field}"' in body if field else 'role="alert"' in body
    assert "+447700900123" not in body


def test_another_users_number_is_the_404_page(browser_client, theirs):
    response = browser_client.get("/history", {"number_id": str(theirs.number_id)})

    assert response.status_code == 404
    assert "There is nothing of yours here." in response.content.decode()
    assert "+447700900999" not in browser_client.get("/history").content.decode()


def test_a_lone_surrogate_in_the_query_is_refused(browser_client):
    response = browser_client.get("/history?number_id=%ED%A0%80&status=%ED%A0%80")

    assert response.status_code == 400
    assert 'id="id_number_id_errors"' in response.content.decode()


# --- the voicemail -------------------------------------------------------------------------
def test_the_owner_hears_the_message_through_the_session(browser_client, voicemail):
    response = browser_client.get(f"/history/{voicemail.pk}/recording")

    assert response.status_code == 200
    assert response["Content-Type"] == "audio/wav"
    assert response["Cache-Control"] == "private, no-store"
    assert response["Content-Disposition"].startswith("inline")
    with wave.open(io.BytesIO(b"".join(response.streaming_content))) as wav:
        assert (wav.getframerate(), wav.getnframes()) == (8000, 8000)


def test_the_player_seeks_by_byte_range(browser_client, voicemail):
    """Chromium asks `bytes=0-`, then ranges to seek; Safari plays only what answers them."""
    whole = b"".join(browser_client.get(f"/history/{voicemail.pk}/recording").streaming_content)

    response = browser_client.get(f"/history/{voicemail.pk}/recording", HTTP_RANGE="bytes=44-")

    assert response.status_code == 206
    assert response["Content-Range"] == f"bytes 44-{len(whole) - 1}/{len(whole)}"
    assert response["Cache-Control"] == "private, no-store"
    assert b"".join(response.streaming_content) == whole[44:]
    past = browser_client.get(f"/history/{voicemail.pk}/recording", HTTP_RANGE="bytes=99999-")
    assert (past.status_code, past["Content-Range"]) == (416, f"bytes */{len(whole)}")


def test_a_signed_out_browser_gets_no_audio(voicemail):
    for path in (
        "/history",
        f"/history/{voicemail.pk}/recording",
        f"/history/{voicemail.pk}/delete",
    ):
        response = Client().get(path)

        assert response.status_code == 302
        assert response.url.startswith("/login?next=/history")
    assert Client().post(f"/history/{voicemail.pk}/heard").status_code == 302
    voicemail = refreshed(voicemail)
    assert not voicemail.heard


@pytest.mark.parametrize("kind", ["theirs", "unknown", "malformed", "no-message"])
def test_a_message_that_is_not_yours_is_the_404_page(browser_client, voicemail, theirs, kind):
    record_id = {"theirs": theirs.pk, "unknown": UNKNOWN, "malformed": "x\x00%ED%A0%80"}.get(
        kind, voicemail.pk
    )
    if kind == "no-message":
        Recording.objects.filter(call_id=voicemail.pk).update(name="")

    for method, path in [
        ("get", "recording"),
        ("get", "delete"),
        ("post", "delete"),
        ("post", "heard"),
    ]:
        response = getattr(browser_client, method)(f"/history/{record_id}/{path}")
        assert response.status_code == 404, (method, path)
        assert "There is nothing of yours here." in response.content.decode()
    theirs = refreshed(theirs)
    assert theirs.recording and not theirs.heard


def test_a_message_whose_file_is_gone_is_the_404_page(browser_client, voicemail):
    recordings_storage().delete(voicemail.recording)

    response = browser_client.get(f"/history/{voicemail.pk}/recording")

    assert response.status_code == 404
    assert "There is nothing of yours here." in response.content.decode()


def test_marking_a_message_heard_goes_back_to_the_page(browser_client, voicemail):
    back = f"/history?number_id={voicemail.number_id}"
    response = browser_client.post(f"/history/{voicemail.pk}/heard", {"next": back})

    assert response.status_code == 302 and response.url == back
    voicemail = refreshed(voicemail)
    assert voicemail.heard
    page = browser_client.get(back).content.decode()
    assert "is marked heard" in page and ">New</span>" not in page and "Mark heard" not in page


def test_heard_never_sends_the_browser_off_the_site(browser_client, voicemail):
    response = browser_client.post(
        f"/history/{voicemail.pk}/heard", {"next": "https://evil.example/history"}
    )

    assert response.status_code == 302 and response.url == "/history"


def test_deleting_a_message_asks_first_and_keeps_the_record(
    browser_client, voicemail, django_capture_on_commit_callbacks
):
    name = voicemail.recording
    confirm = browser_client.get(
        f"/history/{voicemail.pk}/delete?next=/history%3Fstatus%3Danswered"
    )

    assert confirm.status_code == 200
    assert "Delete the message from +447700900123?" in confirm.content.decode()
    assert 'name="next" value="/history?status=answered"' in confirm.content.decode()
    assert record_get(pk=voicemail.pk).recording == name

    with django_capture_on_commit_callbacks(execute=True):
        response = browser_client.post(
            f"/history/{voicemail.pk}/delete", {"next": "/history?status=answered"}
        )

    assert response.status_code == 302 and response.url == "/history?status=answered"
    voicemail = refreshed(voicemail)
    assert (voicemail.recording, voicemail.recording_seconds) == ("", None)
    assert not recordings_storage().exists(name)
    assert browser_client.get(f"/history/{voicemail.pk}/recording").status_code == 404


def test_the_writes_need_the_csrf_token(csrf_client, voicemail):
    for path in ("heard", "delete"):
        assert csrf_client.post(f"/history/{voicemail.pk}/{path}").status_code == 403
    voicemail = refreshed(voicemail)
    assert voicemail.recording and not voicemail.heard
    assert "csrfmiddlewaretoken" in csrf_client.get("/history").content.decode()


def test_the_list_and_the_audio_take_no_post(browser_client, voicemail):
    assert browser_client.post("/history").status_code == 405
    assert browser_client.post(f"/history/{voicemail.pk}/recording").status_code == 405
    assert browser_client.get(f"/history/{voicemail.pk}/heard").status_code == 405


def test_a_call_has_its_own_page_with_its_transcript_marked_as_a_draft(
    browser_client, voicemail, theirs
):
    Recording.objects.filter(call_id=voicemail.pk).update(
        transcript="call me back about the parcel",
        transcript_confidence=0.734,
        transcript_status="done",
    )

    page = browser_client.get(f"/history/{voicemail.pk}")

    html = page.content.decode()
    assert page.status_code == 200
    assert "Automatic transcript, may be inaccurate (confidence 73%)" in html
    assert "call me back about the parcel" in html
    assert f'src="/history/{voicemail.pk}/recording"' in html
    assert browser_client.get(f"/history/{theirs.pk}").status_code == 404
    assert browser_client.get(f"/history/{UNKNOWN}").status_code == 404
    assert browser_client.get("/history/not-a-uuid").status_code == 404


@pytest.mark.parametrize(
    ("status", "words"),
    [("pending", "Transcribing…"), ("failed", "could not be transcribed"), ("off", None)],
)
def test_a_transcript_not_done_says_where_it_stands(browser_client, voicemail, status, words):
    Recording.objects.filter(call_id=voicemail.pk).update(transcript_status=status)

    html = browser_client.get("/history").content.decode()

    assert "Automatic transcript" not in html
    for sentence in ("Transcribing…", "could not be transcribed"):
        assert (sentence in html) == (sentence == words)


@pytest.mark.django_db(transaction=True)
def test_a_transferred_call_is_one_answered_call_saying_who_it_was_transferred_to(
    browser_client, number
):
    # As the agent writes it (issue 58): forwarded to a phone that took it, then handed on.
    from telephony import services

    call = services.inbound_call_open(
        sip_call_id="transferred@test", number=number, caller_num="+447700900002", ringing=False
    )
    [leg] = services.forward_legs_open(
        call=call, number=number, sip_call_ids={"+441134960200": "phone@test"}
    )
    services.forward_leg_bridged(call=call, leg=leg)
    [moved] = services.transfer_legs_open(call=call, sip_call_ids={"+441134960300": "to@test"})
    services.dial_leg_bridged(leg=moved)
    services.inbound_call_record(call=call, status="answered", duration=40)

    page = browser_client.get("/history").content.decode()

    assert page.count("+447700900002") == 1  # one call
    assert "Answered" in page and "Forwarded to</dt><dd>+441134960200" in page
    assert "Transferred to</dt><dd>+441134960300" in page
