"""The account page's "Download my data" and "Delete my account": the same services as
`GET /api/user/export` and `DELETE /api/user/me`, behind a button and a confirmation."""

import io
import json
import re
import zipfile

import pytest
from django.contrib.messages import get_messages

from accounts.models import User
from tests.accounts.data import holdings_of
from tests.factories import DEFAULT_PASSWORD, two_factor_on
from virtual_numbers.models import InventoryNumber

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_account_page_offers_the_download_and_the_deletion(browser_client):
    page = browser_client.get("/account").content.decode()

    assert 'action="/account/export"' in page and "Download my data" in page
    assert 'href="/account/delete"' in page and "Delete my account" in page
    assert "<script>" not in page.split('id="data-heading"')[1].split("</section>")[0]


def test_download_my_data_is_the_zip_the_api_gives(browser_client, user):
    held = holdings_of(user)

    response = browser_client.post("/account/export")

    assert response.status_code == 200
    assert response["Content-Disposition"].startswith('attachment; filename="relay-export-')
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    account = json.loads(archive.read("account.json"))
    assert account["profile"]["email"] == user.email
    assert archive.read(f"voicemail/{held.voicemail.pk}.wav") == held.audio


def test_the_download_is_a_post_and_is_rate_limited(browser_client, settings):
    settings.RATE_LIMIT_EXPORT_PER_USER = "1/h"
    assert browser_client.get("/account/export").status_code == 405
    assert browser_client.post("/account/export").status_code == 200

    again = browser_client.post("/account/export")

    assert again.status_code == 302 and again["Location"] == "/account"
    [message] = list(get_messages(again.wsgi_request))
    assert re.search(r"Try again in \d+ minutes?\.$", str(message))


def test_the_deletion_asks_for_the_password_first(browser_client, user):
    page = browser_client.get("/account/delete").content.decode()

    assert "Delete your account?" in page
    assert 'type="password"' in page and 'autocomplete="current-password"' in page
    assert "authenticator" not in page  # no second factor enrolled: no code asked for
    assert User.objects.filter(pk=user.pk).exists()


def test_the_code_is_asked_for_where_a_second_factor_is_enrolled(browser_client, user):
    secret, recovery = two_factor_on(user, keep=browser_client.login_session)

    assert 'autocomplete="one-time-code"' in browser_client.get("/account/delete").content.decode()
    refused = browser_client.post("/account/delete", {"password": DEFAULT_PASSWORD})
    assert refused.status_code == 400  # the code's field left empty
    assert 'id="id_otp_errors"' in refused.content.decode()
    assert User.objects.filter(pk=user.pk).exists()
    response = browser_client.post(
        "/account/delete", {"password": DEFAULT_PASSWORD, "otp": f" {recovery[0]} "}
    )

    assert response.status_code == 302
    assert not User.objects.filter(pk=user.pk).exists()


def test_a_wrong_password_is_shown_on_its_field_and_deletes_nothing(browser_client, user):
    response = browser_client.post("/account/delete", {"password": "not-the-password"})

    assert response.status_code == 403
    page = response.content.decode()
    assert 'id="id_password_errors"' in page and "The current password is wrong." in page
    assert User.objects.filter(pk=user.pk).exists()


def test_a_password_with_nul_is_a_400(browser_client, user):
    response = browser_client.post("/account/delete", {"password": "a\x00b"})

    assert response.status_code == 400
    assert User.objects.filter(pk=user.pk).exists()


def test_deleting_signs_out_and_leaves_nothing(browser_client, user):
    held = holdings_of(user)

    response = browser_client.post("/account/delete", {"password": DEFAULT_PASSWORD})

    assert response.status_code == 302 and response["Location"] == "/login"
    assert not User.objects.filter(pk=user.pk).exists()
    entry = InventoryNumber.objects.get(pk=held.number.inventory_id)
    assert not InventoryNumber.objects.filter(pk=entry.pk, holding__isnull=False).exists()
    after = browser_client.get("/account")
    assert after.status_code == 302 and after["Location"].startswith("/login")
    login = browser_client.get("/login").content.decode()
    assert "Your account is deleted" in login


def test_the_data_forms_enforce_csrf(csrf_client, user):
    assert csrf_client.post("/account/export").status_code == 403
    assert csrf_client.post("/account/delete", {"password": DEFAULT_PASSWORD}).status_code == 403
    assert User.objects.filter(pk=user.pk).exists()
