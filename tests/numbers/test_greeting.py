"""PUT /api/numbers/:id/greeting: what voicemail says to the number's callers."""

import pytest

from tests.factories import NumberFactory

pytestmark = pytest.mark.django_db


def put(client, number, body):
    return client.put(f"/api/numbers/{number.pk}/greeting", body, format="json")


def test_the_owner_sets_and_clears_the_greeting(user, client_jwt):
    number = NumberFactory(owner=user)

    response = put(client_jwt, number, {"greeting": "  You reached the shop. Speak up!  "})

    assert response.status_code == 200
    assert response.json()["greeting"] == "You reached the shop. Speak up!"
    assert client_jwt.get("/api/numbers").json()["numbers"][0]["greeting"] == (
        "You reached the shop. Speak up!"
    )
    number.refresh_from_db()
    assert number.greeting == "You reached the shop. Speak up!"

    cleared = put(client_jwt, number, {"greeting": ""})

    assert (cleared.status_code, cleared.json()["greeting"]) == (200, "")


def test_a_greeting_of_500_characters_is_taken_and_501_is_not(user, client_jwt):
    number = NumberFactory(owner=user)

    assert put(client_jwt, number, {"greeting": "a" * 500}).status_code == 200
    response = put(client_jwt, number, {"greeting": "a" * 501})

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert "greeting" in response.json()["fields"]


@pytest.mark.parametrize(
    "greeting", [None, 42, ["hi"], {"a": 1}, "line\x07bell", "bad\u2028separator"]
)
def test_a_bad_greeting_is_refused_naming_the_field(user, client_jwt, greeting):
    number = NumberFactory(owner=user, greeting="kept")

    response = put(client_jwt, number, {"greeting": greeting})

    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["greeting"]
    number.refresh_from_db()
    assert number.greeting == "kept"


def test_a_missing_greeting_is_refused(user, client_jwt):
    response = put(client_jwt, NumberFactory(owner=user), {})

    assert (response.status_code, list(response.json()["fields"])) == (400, ["greeting"])


def test_another_users_number_is_not_found(outsider, user):
    number = NumberFactory(owner=user)

    response = put(outsider, number, {"greeting": "mine now"})

    assert (response.status_code, response.json()["code"]) == (404, "not_found")
    number.refresh_from_db()
    assert number.greeting == ""
