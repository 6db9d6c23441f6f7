"""The account page's mail about calls: three switches saved with one button through the
API's serializer and service, shown as saved; CSRF; signed out; a GET is refused."""

import pytest
from django.test import Client

from tests.console.pages import csrf_signed_in

pytestmark = pytest.mark.django_db


def switches(user) -> tuple[bool, bool, bool]:
    user.refresh_from_db()
    return (user.voicemail_email, user.attach_audio, user.missed_call_email)


def test_the_account_page_shows_the_switches_as_they_are(browser_client, user):
    html = browser_client.get("/account").content.decode()

    assert "Mail about calls" in html
    assert 'name="voicemailEmail"' in html and 'name="missedCallEmail"' in html
    # attachAudio is on by default, the two mails off
    assert 'name="attachAudio" id="id_attachAudio" checked' in html
    assert 'name="voicemailEmail" id="id_voicemailEmail" checked' not in html
    assert "automatic transcript, which may be inaccurate" in html


def test_ticking_and_saving_sets_all_three(browser_client, user):
    response = browser_client.post(
        "/account/mail-notices", {"voicemailEmail": "on", "missedCallEmail": "on"}, follow=True
    )

    assert response.redirect_chain == [("/account#mail-heading", 302)]
    assert "Your mail notices are saved." in response.content.decode()
    assert switches(user) == (True, False, True)  # an unticked box is off
    html = response.content.decode()
    assert 'name="voicemailEmail" id="id_voicemailEmail" checked' in html
    assert 'name="attachAudio" id="id_attachAudio" checked' not in html

    browser_client.post("/account/mail-notices", {"attachAudio": "on"})
    assert switches(user) == (False, True, False)


def test_the_switches_are_the_users_own(browser_client, user, other_user):
    browser_client.post("/account/mail-notices", {"voicemailEmail": "on"})

    assert switches(other_user) == (False, True, False)
    assert switches(user) == (True, False, False)


def test_the_form_enforces_csrf_and_post(user, browser_client):
    assert (
        csrf_signed_in(user).post("/account/mail-notices", {"voicemailEmail": "on"}).status_code
        == 403
    )
    assert browser_client.get("/account/mail-notices").status_code == 405
    assert switches(user) == (False, True, False)


def test_signed_out_goes_to_the_login_page(user):
    response = Client().post("/account/mail-notices", {"voicemailEmail": "on"})

    assert response.status_code == 302 and response.url.startswith("/login")
    assert switches(user) == (False, True, False)
