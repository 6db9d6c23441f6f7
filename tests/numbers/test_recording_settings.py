"""PUT and GET /api/numbers/:id/recording (issue 58): whether a number's forwarded calls are
recorded, and what both parties hear first."""

import pytest

from tests.factories import NumberFactory, NumberMemberFactory

pytestmark = pytest.mark.django_db


def put(client, number, body):
    return client.put(f"/api/numbers/{number.pk}/recording", body, format="json")


def test_recording_is_off_by_default_with_the_default_announcement(user, client_jwt):
    number = NumberFactory(owner=user)

    response = client_jwt.get(f"/api/numbers/{number.pk}/recording")

    assert response.status_code == 200
    assert response.json() == {
        "enabled": False,
        "announce": "",
        "announcement": "This call may be recorded.",
    }


def test_the_owner_turns_recording_on_with_their_own_announcement_and_off(user, client_jwt):
    number = NumberFactory(owner=user)

    response = put(client_jwt, number, {"enabled": True, "announce": "  Calls are recorded.  "})

    assert response.status_code == 200
    assert response.json() == {
        "enabled": True,
        "announce": "Calls are recorded.",
        "announcement": "Calls are recorded.",
    }
    number.refresh_from_db()
    assert (number.recording_enabled, number.recording_announce) == (True, "Calls are recorded.")
    assert client_jwt.get(f"/api/numbers/{number.pk}/recording").json()["enabled"] is True

    # A PUT replaces the whole: the announcement left out is the default again.
    off = put(client_jwt, number, {"enabled": False})

    assert off.json() == {
        "enabled": False,
        "announce": "",
        "announcement": "This call may be recorded.",
    }


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "enabled"),
        ({"enabled": "yes"}, "enabled"),
        ({"enabled": 1}, "enabled"),
        ({"enabled": None}, "enabled"),
        ({"enabled": True, "announce": "a" * 501}, "announce"),
        ({"enabled": True, "announce": 42}, "announce"),
        ({"enabled": True, "announce": "bell\x07"}, "announce"),
        ({"enabled": True, "announce": None}, "announce"),
    ],
)
def test_bad_input_is_a_400_naming_its_field_and_changes_nothing(user, client_jwt, body, field):
    number = NumberFactory(owner=user, recording_enabled=True, recording_announce="Kept.")

    response = put(client_jwt, number, body)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert list(response.json()["fields"]) == [field]
    number.refresh_from_db()
    assert (number.recording_enabled, number.recording_announce) == (True, "Kept.")


def test_an_announcement_of_500_characters_is_taken(user, client_jwt):
    number = NumberFactory(owner=user)

    response = put(client_jwt, number, {"enabled": True, "announce": "a" * 500})

    assert (response.status_code, response.json()["announce"]) == (200, "a" * 500)


def test_another_users_number_is_404_to_read_and_to_set(user, outsider):
    number = NumberFactory(owner=user)

    assert outsider.get(f"/api/numbers/{number.pk}/recording").status_code == 404
    response = put(outsider, number, {"enabled": True})

    assert (response.status_code, response.json()["code"]) == (404, "not_found")
    number.refresh_from_db()
    assert number.recording_enabled is False


def test_a_member_of_the_number_cannot_set_it(user, other_user, outsider):
    number = NumberFactory(owner=user)
    NumberMemberFactory(number=number, user=other_user)

    response = put(outsider, number, {"enabled": True})

    assert response.status_code == 404
    number.refresh_from_db()
    assert number.recording_enabled is False


def test_unauthenticated_is_401(api_client, user):
    number = NumberFactory(owner=user)

    assert put(api_client, number, {"enabled": True}).status_code == 401
