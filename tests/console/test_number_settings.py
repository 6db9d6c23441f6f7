"""Rename a number, change its PIN, give it back: owner, outsider, each error, CSRF."""

import pytest
from django.contrib.auth.hashers import check_password
from django.test import Client

from tests.factories import NumberFactory
from virtual_numbers.models import Number

pytestmark = pytest.mark.django_db


@pytest.fixture
def number(user):
    return NumberFactory(owner=user, alias="Shop")


def test_renaming_a_number_saves_the_alias(browser_client, number):
    form = browser_client.get(f"/numbers/{number.pk}/alias").content.decode()
    assert 'value="Shop"' in form

    response = browser_client.post(f"/numbers/{number.pk}/alias", {"alias": "  Office  "})

    assert response.status_code == 302 and response.url == "/numbers"
    number.refresh_from_db()
    assert number.alias == "Office"


@pytest.mark.parametrize(
    ("alias", "sentence"),
    [("", "Must be 1 to 64 characters"), ("a\x07b", "Must not contain control characters.")],
)
def test_a_bad_alias_is_refused_next_to_it(browser_client, number, alias, sentence):
    response = browser_client.post(f"/numbers/{number.pk}/alias", {"alias": alias})

    assert response.status_code == 400
    assert 'id="id_alias_errors"' in response.content.decode()
    assert sentence in response.content.decode()
    number.refresh_from_db()
    assert number.alias == "Shop"


def test_changing_the_pin_takes_the_current_one(browser_client, number):
    response = browser_client.post(
        f"/numbers/{number.pk}/pin", {"currentPin": "1234", "newPin": "739155"}
    )

    assert response.status_code == 302
    number.refresh_from_db()
    assert check_password("739155", number.pin_hash)


def test_a_wrong_current_pin_is_refused_next_to_it(browser_client, number):
    response = browser_client.post(
        f"/numbers/{number.pk}/pin", {"currentPin": "9999", "newPin": "739155"}
    )

    assert response.status_code == 403
    assert 'id="id_currentPin_errors"' in response.content.decode()
    assert "The current PIN is wrong." in response.content.decode()
    number.refresh_from_db()
    assert check_password("1234", number.pin_hash)


def test_a_bad_new_pin_is_refused_next_to_it(browser_client, number):
    response = browser_client.post(
        f"/numbers/{number.pk}/pin", {"currentPin": "1234", "newPin": "12ab"}
    )

    assert response.status_code == 400
    assert 'id="id_newPin_errors"' in response.content.decode()
    assert "Must be 4 to 8 digits." in response.content.decode()


def test_wrong_pins_lock_the_pin_as_the_api_does(browser_client, number):
    for _ in range(5):
        browser_client.post(f"/numbers/{number.pk}/pin", {"currentPin": "9999", "newPin": "5555"})

    response = browser_client.post(
        f"/numbers/{number.pk}/pin", {"currentPin": "1234", "newPin": "5555"}
    )

    assert response.status_code == 429
    assert "Retry-After" in response.headers
    assert "Too many wrong PINs" in response.content.decode()


def test_giving_a_number_back_asks_first(browser_client, number):
    page = browser_client.get(f"/numbers/{number.pk}/delete")

    assert page.status_code == 200 and "cannot be undone" in page.content.decode()
    assert Number.objects.filter(pk=number.pk).exists()


def test_confirming_gives_the_number_back(browser_client, number):
    response = browser_client.post(f"/numbers/{number.pk}/delete")

    assert response.status_code == 302
    assert not Number.objects.filter(pk=number.pk).exists()


@pytest.mark.parametrize("page", ["alias", "pin", "delete"])
@pytest.mark.parametrize("method", ["get", "post"])
def test_another_users_number_is_a_not_found_page(browser_client, other_user, page, method):
    theirs = NumberFactory(owner=other_user, alias="Theirs")

    response = getattr(browser_client, method)(f"/numbers/{theirs.pk}/{page}")

    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")
    assert "Not found" in response.content.decode()
    theirs.refresh_from_db()
    assert theirs.alias == "Theirs"


def test_a_malformed_number_id_is_a_not_found_page(browser_client):
    response = browser_client.get("/numbers/not-a-uuid/alias")

    assert response.status_code == 404
    assert "Not found" in response.content.decode()


@pytest.mark.parametrize(
    ("page", "data"),
    [
        ("alias", {"alias": "Stolen"}),
        ("pin", {"currentPin": "1234", "newPin": "5555"}),
        ("delete", {}),
    ],
)
def test_number_forms_enforce_csrf(csrf_client, number, page, data):
    response = csrf_client.post(f"/numbers/{number.pk}/{page}", data)

    assert response.status_code == 403
    number.refresh_from_db()
    assert number.alias == "Shop" and check_password("1234", number.pin_hash)


def test_the_create_form_enforces_csrf(csrf_client, inventory):
    response = csrf_client.post("/numbers/new", {"alias": "A", "pin": "4821", "answer": "1"})

    assert response.status_code == 403
    assert not Number.objects.exists()


def test_a_signed_out_number_page_is_sent_to_log_in(number):
    response = Client().get(f"/numbers/{number.pk}/pin")

    assert response.status_code == 302 and response.url.startswith("/login?next=")
