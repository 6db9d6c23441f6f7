"""A number's voice application through the API (issue 41): `PUT /api/numbers/:id/voice`
sets a script or a URL, `GET` shows it and `DELETE` removes it, for the number's owner only;
every refusal a 400 naming its path, and nothing stored."""

import pytest

from tests.factories import NumberFactory
from voiceapps.models import VoiceApp

pytestmark = pytest.mark.django_db

MENU = [{"gather": {"numDigits": 1, "say": {"text": "Press 1 for opening hours."}}}]


@pytest.fixture
def number(user):
    return NumberFactory(owner=user)


def voice(number) -> str:
    return f"/api/numbers/{number.pk}/voice"


def test_a_script_answers_the_numbers_calls_until_removed(client_jwt, number):
    assert client_jwt.get(voice(number)).status_code == 404  # nothing yet

    put = client_jwt.put(voice(number), {"script": MENU}, format="json")

    assert put.status_code == 200
    body = put.json()
    assert body["url"] is None
    assert body["script"][0]["gather"] == {
        "numDigits": 1,
        "finishOnKey": "#",
        "timeout": 5,
        "say": {"text": "Press 1 for opening hours.", "loop": 1},
        "input": ["dtmf"],
    }
    assert client_jwt.get(voice(number)).json() == body

    assert client_jwt.delete(voice(number)).json() == {"success": True}
    assert client_jwt.get(voice(number)).status_code == 404
    assert client_jwt.delete(voice(number)).status_code == 404


def test_a_url_replaces_the_script(client_jwt, number, settings):
    settings.WEBHOOK_ALLOW_PRIVATE = True
    client_jwt.put(voice(number), {"script": MENU}, format="json")

    put = client_jwt.put(voice(number), {"url": "http://127.0.0.1:9/app"}, format="json")

    assert put.status_code == 200
    assert (put.json()["script"], put.json()["url"]) == (None, "http://127.0.0.1:9/app")
    assert VoiceApp.objects.get().script is None


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({}, "script"),
        ({"script": MENU, "url": "https://example.com/app"}, "script"),
        ({"script": [{"gather": {"numDigits": "one"}}]}, "script.0.gather.numDigits"),
        ({"script": [{"dial": {"targets": ["+8613800138000"]}}]}, "script"),  # the policy
        ({"url": "http://example.com/app"}, "url"),
        ({"url": "https://192.168.1.20/app"}, "url"),
        ({"url": 7}, "url"),
    ],
)
def test_an_invalid_application_is_a_400_naming_the_path(client_jwt, number, body, path):
    response = client_jwt.put(voice(number), body, format="json")

    assert response.status_code == 400
    assert path in response.json()["fields"], response.json()
    assert not VoiceApp.objects.exists()


def test_a_script_may_dial_but_never_one_of_relays_own_numbers(client_jwt, number):
    dial = {"dial": {"targets": ["+441134960200"], "callerId": "caller"}}
    assert client_jwt.put(voice(number), {"script": [dial]}, format="json").status_code == 200

    loop = [{"dial": {"targets": [number.number]}}]  # the number itself: the call would loop
    response = client_jwt.put(voice(number), {"script": loop}, format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "destination_not_allowed"
    assert VoiceApp.objects.get().script[0]["dial"]["targets"] == ["+441134960200"]


def test_a_lone_surrogate_in_a_script_is_a_400_naming_it(client_jwt, number):
    raw = '{"script": [{"say": {"text": "hi \\ud800"}}]}'  # JSON's escape, as a client sends it

    response = client_jwt.put(voice(number), raw, content_type="application/json")

    assert response.status_code == 400
    assert "script.0.say.text" in response.json()["fields"]
    assert not VoiceApp.objects.exists()


@pytest.mark.parametrize("method", ["get", "put", "delete"])
def test_another_users_number_is_a_404(outsider, number, method):
    VoiceApp.objects.create(number=number, script=MENU)

    response = getattr(outsider, method)(voice(number), {"script": MENU}, format="json")

    assert response.status_code == 404
    assert VoiceApp.objects.get().script == MENU


@pytest.mark.parametrize(
    "number_id",
    ["not-a-uuid", "5f0c2a9e-8d1b-4c3e-9a7f-2b6d4e8c1a30"],
    ids=["malformed", "unknown"],
)
def test_an_unknown_number_is_a_404(client_jwt, number_id):
    response = client_jwt.put(f"/api/numbers/{number_id}/voice", {"script": MENU}, format="json")

    assert response.status_code == 404


def test_deleting_the_number_deletes_its_application(client_jwt, number):
    client_jwt.put(voice(number), {"script": MENU}, format="json")

    assert client_jwt.delete(f"/api/numbers/{number.pk}").status_code in (200, 204)

    assert not VoiceApp.objects.exists()
