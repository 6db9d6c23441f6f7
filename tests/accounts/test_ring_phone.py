"""GET/PUT /api/user/ring-phone (issue 57): the phone rung with a person's console tabs when a
ring list's member entry names them; the dialing policy refuses at save."""

import pytest

from accounts.models import DialRefusal, User
from accounts.selectors import account_export
from tests.dialing import REFUSED

pytestmark = pytest.mark.django_db

URL = "/api/user/ring-phone"


def test_none_is_set_until_told(client_jwt):
    assert client_jwt.get(URL).json() == {"ringPhone": None}


def test_put_sets_and_null_clears_it(client_jwt, user):
    response = client_jwt.put(URL, {"ringPhone": "+44 7400 123456"}, format="json")

    assert response.status_code == 200, response.content
    assert response.json() == {"ringPhone": "+447400123456"}
    assert User.objects.get(pk=user.pk).ring_phone == "+447400123456"
    assert client_jwt.get(URL).json() == {"ringPhone": "+447400123456"}

    assert client_jwt.put(URL, {"ringPhone": None}, format="json").json() == {"ringPhone": None}
    assert User.objects.get(pk=user.pk).ring_phone == ""


@pytest.mark.parametrize(
    "body", [{}, {"ringPhone": "07400"}, {"ringPhone": 447400123456}, {"ringPhone": ["+44"]}]
)
def test_bad_input_is_a_400_naming_the_field(client_jwt, user, body):
    response = client_jwt.put(URL, body, format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert "ringPhone" in response.json()["fields"]
    assert User.objects.get(pk=user.pk).ring_phone == ""


@pytest.mark.parametrize(("target", "reason", "overrides", "says"), REFUSED[:2])
def test_a_phone_the_policy_refuses_is_refused(client_jwt, user, target, reason, overrides, says):
    response = client_jwt.put(URL, {"ringPhone": target}, format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "destination_not_allowed"
    assert says in response.json()["error"]
    assert DialRefusal.objects.filter(user=user, reason=reason).count() == 1
    assert User.objects.get(pk=user.pk).ring_phone == ""


def test_it_is_rate_limited_per_user(settings, client_jwt):
    settings.RATE_LIMIT_FORWARDING_PER_USER = "2/h"
    body = {"ringPhone": "+447400123456"}

    codes = [client_jwt.put(URL, body, format="json").status_code for _ in range(3)]

    assert codes == [200, 200, 429]


def test_it_needs_credentials(api_client):
    assert api_client.get(URL).status_code == 401


def test_the_export_holds_it(client_jwt, user):
    client_jwt.put(URL, {"ringPhone": "+447400123456"}, format="json")

    assert account_export(user=User.objects.get(pk=user.pk))["profile"]["ringPhone"] == (
        "+447400123456"
    )
