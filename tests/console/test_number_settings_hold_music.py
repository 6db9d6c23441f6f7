"""The music on hold page (issue 58): what plays now, an upload through the session
(multipart, CSRF) checked as PUT /api/numbers/:id/hold-music checks it
(number_hold_music_set), the file played and removed; an outsider gets the not-found page."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from core.recordings import recordings_storage
from tests.factories import NumberFactory, music_wav
from virtual_numbers import services
from virtual_numbers.models import Number

pytestmark = pytest.mark.django_db(transaction=True)


def wav_file(seconds: float = 1.0, *, name="music.wav", content_type="audio/wav"):
    return SimpleUploadedFile(name, music_wav(seconds), content_type=content_type)


@pytest.fixture
def number(user):
    return NumberFactory(owner=user, alias="Shop")


def test_the_numbers_page_links_it(browser_client, number):
    page = browser_client.get("/numbers").content.decode()

    assert f'href="/numbers/{number.pk}/hold-music"' in page


def test_with_none_uploaded_the_page_says_relay_s_own_plays(browser_client, number):
    page = browser_client.get(f"/numbers/{number.pk}/hold-music").content.decode()

    assert "Held callers hear Relay's own music." in page
    assert "<audio" not in page
    assert 'enctype="multipart/form-data"' in page


def test_uploading_a_wav_keeps_it_and_the_page_plays_it(browser_client, number):
    response = browser_client.post(
        f"/numbers/{number.pk}/hold-music", {"file": wav_file(2.0)}, follow=True
    )

    assert response.redirect_chain == [(f"/numbers/{number.pk}/hold-music", 302)]
    page = response.content.decode()
    assert "on hold hear your music." in page
    assert "Held callers hear the music you uploaded (2.0 s)" in page
    src = f"/numbers/{number.pk}/hold-music/file"
    assert f'<audio controls preload="none" src="{src}"' in page
    played = browser_client.get(src)
    assert (played.status_code, played["Cache-Control"]) == (200, "private, no-store")
    number.refresh_from_db()
    with recordings_storage().open(number.hold_music, "rb") as stored:
        assert b"".join(played.streaming_content) == stored.read()


@pytest.mark.parametrize(
    ("upload", "said"),
    [
        (None, "Choose a WAV file to upload."),
        (
            SimpleUploadedFile("notes.txt", b"hello", content_type="text/plain"),
            "Choose a WAV file (.wav).",
        ),
        (
            SimpleUploadedFile("fake.wav", b"not audio at all", content_type="audio/wav"),
            "Not a WAV file (RIFF/WAVE).",
        ),
    ],
)
def test_a_file_that_is_not_a_wav_is_refused_on_the_page(browser_client, number, upload, said):
    response = browser_client.post(
        f"/numbers/{number.pk}/hold-music", {"file": upload} if upload else {}
    )

    assert response.status_code == 400
    assert said in response.content.decode()
    assert Number.objects.get(pk=number.pk).hold_music == ""


def test_music_too_long_or_too_big_is_refused_on_the_page(browser_client, number, settings):
    settings.HOLD_MUSIC_MAX_SECONDS = 1.0
    long = browser_client.post(f"/numbers/{number.pk}/hold-music", {"file": wav_file(2.0)})
    settings.HOLD_MUSIC_MAX_BYTES = 1000
    big = browser_client.post(f"/numbers/{number.pk}/hold-music", {"file": wav_file(0.5)})

    assert long.status_code == big.status_code == 400
    assert "Longer than 1 seconds." in long.content.decode()
    assert "The file is larger than 1000 bytes." in big.content.decode()
    assert Number.objects.get(pk=number.pk).hold_music == ""


def test_the_remove_button_deletes_the_file(browser_client, number):
    services.number_hold_music_set(number=number, wav=music_wav(1.0))
    name = number.hold_music

    response = browser_client.post(f"/numbers/{number.pk}/hold-music/remove", follow=True)

    assert "hear Relay&#x27;s own music again." in response.content.decode()
    assert Number.objects.get(pk=number.pk).hold_music == ""
    assert not recordings_storage().exists(name)
    again = browser_client.post(f"/numbers/{number.pk}/hold-music/remove", follow=True)
    assert f"{number.number} has no music of its own." in again.content.decode()


@pytest.mark.parametrize(
    ("method", "path"),
    [("get", "hold-music"), ("get", "hold-music/file"), ("post", "hold-music/remove")],
)
def test_another_users_number_is_the_not_found_page(browser_client, other_user, method, path):
    theirs = NumberFactory(owner=other_user)
    services.number_hold_music_set(number=theirs, wav=music_wav(1.0))

    response = getattr(browser_client, method)(f"/numbers/{theirs.pk}/{path}")

    assert response.status_code == 404
    assert recordings_storage().exists(theirs.hold_music)


def test_an_upload_to_another_users_number_is_the_not_found_page(browser_client, other_user):
    theirs = NumberFactory(owner=other_user)

    response = browser_client.post(f"/numbers/{theirs.pk}/hold-music", {"file": wav_file()})

    assert response.status_code == 404
    assert Number.objects.get(pk=theirs.pk).hold_music == ""


def test_the_upload_enforces_csrf(csrf_client, number):
    response = csrf_client.post(f"/numbers/{number.pk}/hold-music", {"file": wav_file()})

    assert response.status_code == 403
    assert Number.objects.get(pk=number.pk).hold_music == ""
