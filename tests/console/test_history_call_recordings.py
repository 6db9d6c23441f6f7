"""A bridged call's recording in the console's history (issue 58): played through the
session of the call's owner or a member of its number (never cached, by byte range too), its
length, "Incomplete" when cut, its transcript labelled by speaker; deleted by the owner after
a confirmation, never by a member; the 404 page for anyone else; CSRF; signed out."""

import pytest
from django.test import Client

from calls.models import Recording
from core.recordings import recordings_storage
from tests.console.conftest import sign_in
from tests.factories import NumberFactory, NumberMemberFactory, UserFactory, call_recorded_on
from virtual_numbers.models import NumberMember

pytestmark = pytest.mark.django_db

TRANSCRIPT = "caller: is the parcel ready\ncallee: yes since this morning"


@pytest.fixture
def number(user):
    return NumberFactory(owner=user, alias="Office")


@pytest.fixture
def recording(number):
    return call_recorded_on(number, seconds=2.5, transcript=TRANSCRIPT, transcript_confidence=0.81)


@pytest.fixture
def member(other_user, number):
    NumberMemberFactory(number=number, user=other_user)
    client = Client()
    sign_in(client, other_user)
    return client


def file_of(recording) -> str:
    return f"/call-recordings/{recording.pk}"


def delete_of(recording) -> str:
    return f"/call-recordings/{recording.pk}/delete"


def still_there(recording) -> bool:
    return Recording.objects.filter(pk=recording.pk).exists() and recordings_storage().exists(
        recording.name
    )


def test_the_history_plays_it_with_its_length_and_its_transcript_by_speaker(
    browser_client, recording
):
    page = browser_client.get("/history").content.decode()

    assert "<strong>Call recording</strong>, 2.5 s" in page
    assert f'<audio controls preload="none" src="{file_of(recording)}"' in page
    assert 'aria-label="Recording of the call from +447700900123"' in page
    assert "Automatic transcript, may be inaccurate (confidence 81%)" in page
    assert '<span class="speaker">Caller:</span> is the parcel ready' in page
    assert '<span class="speaker">Callee:</span> yes since this morning' in page
    assert page.index("Caller:") < page.index("Callee:")
    assert "Incomplete" not in page
    assert f'href="{delete_of(recording)}?next=/history">Delete the recording' in page


def test_the_calls_own_page_shows_it_too(browser_client, recording):
    page = browser_client.get(f"/history/{recording.call_id}").content.decode()

    assert f'src="{file_of(recording)}"' in page and "Callee:" in page


def test_a_cut_recording_says_it_is_incomplete(browser_client, number):
    call_recorded_on(number, seconds=0.48, incomplete=True)

    page = browser_client.get("/history").content.decode()

    assert "<strong>Call recording</strong>, 0.5 s" in page
    assert '<span class="incomplete">Incomplete</span>' in page
    assert "Automatic transcript" not in page  # none was made (TRANSCRIBE_ENGINE=off)


def test_a_pending_transcript_says_so(browser_client, recording):
    Recording.objects.filter(pk=recording.pk).update(transcript="", transcript_status="pending")

    page = browser_client.get("/history").content.decode()

    assert "Transcribing…" in page and "Automatic transcript" not in page


def test_the_owner_streams_it_whole_and_by_range_never_cached(browser_client, recording):
    whole = browser_client.get(file_of(recording))

    assert whole.status_code == 200
    assert whole["Content-Type"] == "audio/wav"
    assert whole["Cache-Control"] == "private, no-store"
    body = b"".join(whole.streaming_content)
    assert body[:4] == b"RIFF" and len(body) == 44 + 2.5 * 8000 * 4

    part = browser_client.get(file_of(recording), HTTP_RANGE="bytes=0-11")
    assert part.status_code == 206
    assert b"".join(part.streaming_content) == body[:12]


def test_a_member_sees_and_plays_it_but_cannot_delete_it(member, number, recording):
    page = member.get(f"/history?number_id={number.pk}").content.decode()

    assert f'src="{file_of(recording)}"' in page and "Caller:" in page
    assert "Delete the recording" not in page
    played = member.get(file_of(recording))
    assert played.status_code == 200 and played["Cache-Control"] == "private, no-store"

    for method in ("get", "post"):
        refused = getattr(member, method)(delete_of(recording))
        assert refused.status_code == 404 and "Not found" in refused.content.decode()
    assert still_there(recording)


def test_a_removed_member_can_no_longer_play_it(member, other_user, recording):
    NumberMember.objects.filter(user=other_user).delete()

    assert member.get(file_of(recording)).status_code == 404


def test_the_owner_deletes_it_after_a_confirmation(
    browser_client, recording, django_capture_on_commit_callbacks
):
    confirm = browser_client.get(delete_of(recording), {"next": "/history?status=answered"})

    page = confirm.content.decode()
    assert confirm.status_code == 200
    assert "Delete the recording of the call from +447700900123?" in page
    assert "Office (" in page and "The call stays in your history." in page
    assert still_there(recording)

    with django_capture_on_commit_callbacks(execute=True):
        response = browser_client.post(delete_of(recording), {"next": "/history?status=answered"})

    assert response.status_code == 302 and response.url == "/history?status=answered"
    assert not Recording.objects.filter(pk=recording.pk).exists()
    assert not recordings_storage().exists(recording.name)
    page = browser_client.get(f"/history/{recording.call_id}").content.decode()
    assert "is deleted" in page and "Call recording" not in page


def test_someone_elses_recording_is_the_not_found_page(browser_client):
    theirs = call_recorded_on(NumberFactory(owner=UserFactory()))

    for response in (
        browser_client.get(file_of(theirs)),
        browser_client.get(delete_of(theirs)),
        browser_client.post(delete_of(theirs)),
        browser_client.get("/call-recordings/not-an-id"),
    ):
        assert response.status_code == 404 and "Not found" in response.content.decode()
    assert still_there(theirs)


def test_deleting_enforces_csrf(csrf_client, recording):
    response = csrf_client.post(delete_of(recording))

    assert response.status_code == 403
    assert still_there(recording)


def test_a_signed_out_browser_is_sent_to_log_in(recording):
    response = Client().get(file_of(recording))

    assert response.status_code == 302
    assert response.url == f"/login?next={file_of(recording)}"
