"""The account page, the API key and the login sessions: owner, outsider, CSRF, signed out."""

import pytest
from django.test import Client

from accounts import services
from accounts.models import LoginSession
from tests.conftest import api_key_client, jwt_client
from tests.console.conftest import sign_in
from tests.factories import LoginSessionFactory

pytestmark = pytest.mark.django_db


def test_the_account_page_shows_the_profile_quotas_key_and_sessions(browser_client, user):
    other = services.session_open(user=user).session

    page = browser_client.get("/account")

    html = page.content.decode()
    assert page.status_code == 200
    assert user.email in html and "free" in html
    assert "Calls in the last 24 hours" in html and "Calls up at once" in html
    assert user.api_key not in html  # masked: "Reveal" asks for the password
    assert f"…{user.api_key[-4:]}" in html and "/account/api-key/reveal" in html
    assert "(this browser)" in html
    assert f"/account/sessions/{other.pk}/end" in html
    assert f"/account/sessions/{browser_client.login_session.pk}/end" in html
    assert "No webhook" in html and "none" in html


def test_an_ended_session_is_listed_without_an_end_button(browser_client, user):
    ended = LoginSessionFactory(user=user, active=False)

    html = browser_client.get("/account").content.decode()

    assert "Ended." in html
    assert f"/account/sessions/{ended.pk}/end" not in html


def test_regenerating_the_api_key_asks_first(browser_client, user):
    page = browser_client.get("/account/api-key")

    assert page.status_code == 200
    assert "the old key stops working at once" in page.content.decode()
    user.refresh_from_db()
    assert api_key_client(user.api_key).get("/api/user/me").status_code == 200


def test_the_regenerated_key_works_on_the_api_and_the_old_one_is_refused(browser_client, user):
    old = user.api_key

    response = browser_client.post("/account/api-key")

    user.refresh_from_db()
    assert user.api_key != old
    assert response.status_code == 200  # shown at once, on its page: never a redirect to it
    assert f'value="{user.api_key}"' in response.content.decode()
    assert "Your API key is replaced" in response.content.decode()
    assert user.api_key not in browser_client.get("/account").content.decode()
    assert api_key_client(user.api_key).get("/api/user/me").status_code == 200
    assert api_key_client(old).get("/api/user/me").status_code == 401


def test_regenerating_keeps_the_key_out_of_the_logs(browser_client, user, caplog):
    caplog.set_level("DEBUG")

    browser_client.post("/account/api-key")

    user.refresh_from_db()
    assert user.api_key not in caplog.text


def test_ending_another_session_refuses_its_jwt_on_the_api(browser_client, user):
    other = services.session_open(user=user)
    assert jwt_client(other.token).get("/api/user/me").status_code == 200

    response = browser_client.post(f"/account/sessions/{other.session.pk}/end")

    assert response.status_code == 302 and response.url == "/account"
    assert jwt_client(other.token).get("/api/user/me").status_code == 401
    assert browser_client.get("/account").status_code == 200  # this browser goes on


def test_ending_this_browsers_own_session_signs_it_out(browser_client):
    mine = browser_client.login_session

    response = browser_client.post(f"/account/sessions/{mine.pk}/end")

    assert response.status_code == 302 and response.url == "/login"
    assert not LoginSession.objects.get(pk=mine.pk).active
    again = browser_client.get("/account")
    assert again.status_code == 302 and again.url.startswith("/login?next=")


@pytest.mark.parametrize("session_id", ["theirs", "unknown", "not-a-uuid", "1" * 500])
def test_a_session_not_yours_is_the_not_found_page(browser_client, other_user, session_id):
    theirs = services.session_open(user=other_user).session
    ids = {"theirs": theirs.pk, "unknown": "5f0c2d9a-8b7e-4c61-a3d2-1e0f9a8b7c6d"}

    response = browser_client.post(f"/account/sessions/{ids.get(session_id, session_id)}/end")

    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")
    assert "Not found" in response.content.decode()
    assert LoginSession.objects.get(pk=theirs.pk).active


def test_ending_a_session_is_a_post(browser_client):
    mine = browser_client.login_session

    response = browser_client.get(f"/account/sessions/{mine.pk}/end")

    assert response.status_code == 405
    assert LoginSession.objects.get(pk=mine.pk).active


def test_the_key_and_session_forms_enforce_csrf(csrf_client, user):
    old = user.api_key
    other = services.session_open(user=user).session

    assert csrf_client.post("/account/api-key").status_code == 403
    assert csrf_client.post(f"/account/sessions/{other.pk}/end").status_code == 403

    user.refresh_from_db()
    assert user.api_key == old
    assert LoginSession.objects.get(pk=other.pk).active


@pytest.mark.parametrize(
    "path",
    [
        "/account",
        "/account/api-key",
        "/account/matrix",
        "/account/webhook",
        "/account/webhook/rotate",
        "/account/webhook/delete",
    ],
)
def test_a_signed_out_account_page_is_sent_to_log_in(path):
    response = Client().get(path)

    assert response.status_code == 302 and response.url.startswith("/login?next=")


def test_a_signed_out_session_end_is_sent_to_log_in(user):
    session = services.session_open(user=user).session

    response = Client().post(f"/account/sessions/{session.pk}/end")

    assert response.status_code == 302 and response.url.startswith("/login?next=")
    assert LoginSession.objects.get(pk=session.pk).active


def test_signing_in_again_lists_both_browsers(user):
    first, second = Client(), Client()
    sign_in(first, user)
    sign_in(second, user)

    html = second.get("/account").content.decode()

    assert html.count("(this browser)") == 1
    assert html.count("/end") == 2
