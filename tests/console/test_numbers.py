"""The numbers pages: list, take one through the CAPTCHA, rename, change the PIN, give back.
Every error the API has shows on the form; another user's number is a 404 page."""

import re

import pytest
from django.contrib.auth.hashers import check_password

from captcha.models import CaptchaChallenge
from tests.factories import NumberFactory
from virtual_numbers.models import Number

pytestmark = pytest.mark.django_db


def challenge_of(response) -> dict:
    """The hidden CAPTCHA fields of the create form, and the right answer."""
    page = response.content.decode()
    found = dict(re.findall(r'name="(challengeId|a|b)" value="([^"]+)"', page))
    challenge = CaptchaChallenge.objects.get(pk=found["challengeId"])
    return {**found, "answer": str(challenge.a + challenge.b)}


def take(client, *, alias="Office", pin="4821", answer=None) -> object:
    fields = challenge_of(client.get("/numbers/new"))
    if answer is not None:
        fields["answer"] = answer
    return client.post("/numbers/new", {"alias": alias, "pin": pin, **fields})


@pytest.fixture
def number(user):
    return NumberFactory(owner=user, alias="Shop")


def test_the_list_shows_the_users_numbers_only(browser_client, number, other_user):
    theirs = NumberFactory(owner=other_user)

    page = browser_client.get("/numbers").content.decode()

    assert number.number in page and "Shop" in page
    assert theirs.number not in page


def test_the_create_form_asks_the_captchas_question(browser_client, inventory):
    response = browser_client.get("/numbers/new")

    challenge = CaptchaChallenge.objects.get(pk=challenge_of(response)["challengeId"])
    assert f"what is {challenge.a} + {challenge.b}?" in response.content.decode()


def test_a_right_answer_takes_a_number(browser_client, user, inventory):
    response = take(browser_client)

    assert response.status_code == 302 and response.url == "/numbers"
    number = Number.objects.get(owner=user)
    assert number.alias == "Office" and check_password("4821", number.pin_hash)
    assert f"{number.number} is yours." in browser_client.get("/numbers").content.decode()


def test_a_wrong_answer_is_refused_next_to_it_with_a_new_question(browser_client, inventory):
    first = challenge_of(browser_client.get("/numbers/new"))
    response = browser_client.post(
        "/numbers/new", {"alias": "Office", "pin": "4821", **first, "answer": "0"}
    )

    assert response.status_code == 400
    assert 'id="id_answer_errors"' in response.content.decode()
    assert "The CAPTCHA answer is wrong." in response.content.decode()
    assert challenge_of(response)["challengeId"] != first["challengeId"]
    assert not Number.objects.exists()


def test_an_answer_not_in_digits_is_refused_next_to_it(browser_client, inventory):
    response = take(browser_client, answer="forty")

    assert response.status_code == 400
    assert "Type the sum, in digits." in response.content.decode()


def test_a_spent_challenge_is_refused(browser_client, inventory):
    fields = challenge_of(browser_client.get("/numbers/new"))
    browser_client.post("/numbers/new", {"alias": "A", "pin": "4821", **fields})

    response = browser_client.post("/numbers/new", {"alias": "B", "pin": "4821", **fields})

    assert response.status_code == 400
    assert "unknown, already used or expired" in response.content.decode()
    assert Number.objects.count() == 1


@pytest.mark.parametrize(
    ("alias", "pin", "field", "sentence"),
    [
        ("", "4821", "alias", "Must be 1 to 64 characters after trimming."),
        ("x" * 65, "4821", "alias", "Must be 1 to 64 characters after trimming."),
        ("Office", "12", "pin", "Must be 4 to 8 digits."),
    ],
)
def test_a_bad_alias_or_pin_is_refused_next_to_it(
    browser_client, inventory, alias, pin, field, sentence
):
    response = take(browser_client, alias=alias, pin=pin)

    assert response.status_code == 400
    assert f'id="id_{field}_errors"' in response.content.decode()
    assert sentence in response.content.decode()
    assert not Number.objects.exists()


def test_an_empty_inventory_is_said_above_the_form(browser_client):
    response = take(browser_client)

    assert response.status_code == 503
    assert 'class="errors-above"' in response.content.decode()


def test_the_plans_limit_is_said_above_the_form(browser_client, user, inventory):
    for _ in range(user.number_limit):
        NumberFactory(owner=user)

    response = take(browser_client)

    assert response.status_code == 409
    assert 'class="errors-above"' in response.content.decode()


def test_captcha_questions_are_rate_limited_like_the_apis(browser_client, settings):
    settings.RATE_LIMIT_CAPTCHA_PER_IP = "1/m"
    browser_client.get("/numbers/new")

    response = browser_client.get("/numbers/new")

    assert "Too many requests" in response.content.decode()
    assert 'name="challengeId"' not in response.content.decode()


def test_captcha_answers_are_rate_limited_like_the_apis(browser_client, inventory, settings):
    settings.RATE_LIMIT_CAPTCHA_VERIFY_PER_IP = "1/m"
    take(browser_client, answer="0")

    response = take(browser_client)

    assert response.status_code == 429
    assert not Number.objects.exists()


def test_the_home_page_is_the_numbers(browser_client):
    response = browser_client.get("/")

    assert response.status_code == 302 and response.url == "/numbers"


@pytest.mark.parametrize(
    "tampered", [{"challengeId": "not-a-uuid"}, {"a": "x"}, {"a": "0", "b": "0", "answer": "0"}]
)
def test_a_tampered_challenge_is_refused_next_to_the_answer(browser_client, inventory, tampered):
    fields = challenge_of(browser_client.get("/numbers/new")) | tampered

    response = browser_client.post("/numbers/new", {"alias": "A", "pin": "4821", **fields})

    assert response.status_code == 400
    assert 'id="id_answer_errors"' in response.content.decode()
    assert not Number.objects.exists()
