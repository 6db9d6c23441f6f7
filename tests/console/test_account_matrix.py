"""The Matrix id and the notices' switches: set, cleared, each error next to the field. Whether
an id exists is asked of the session's real Synapse, as the API's Matrix tests ask it."""

import re
from urllib.parse import quote

import pytest

from harness import ports
from harness.synapse import SERVER_NAME, MatrixUser
from matrix.models import MatrixRoom
from tests.console.pages import csrf_signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def matrix_on(settings):
    """Matrix on, its homeserver a port where nothing listens."""
    settings.MATRIX_ENABLED = True
    settings.MATRIX_HOMESERVER_URL = f"http://127.0.0.1:{ports.free_port()}"
    settings.MATRIX_BOT_ACCESS_TOKEN = "syt_unused"
    settings.MATRIX_BOT_USER_ID = "@relay:localhost"


@pytest.fixture
def matrix_on_synapse(settings, synapse, matrix_user_factory) -> MatrixUser:
    """Matrix on, its homeserver the session's Synapse, and a bot account of this test's own
    (the bot asks the homeserver whether an id exists, with its own token)."""
    bot = matrix_user_factory("relay-bot-console")
    settings.MATRIX_ENABLED = True
    settings.MATRIX_HOMESERVER_URL = synapse.url
    settings.MATRIX_BOT_ACCESS_TOKEN = bot.access_token
    settings.MATRIX_BOT_USER_ID = bot.user_id
    return bot


def test_the_matrix_page_shows_the_id_and_its_status(browser_client, user):
    user.matrix_id = "@alice:localhost"
    user.save(update_fields=["matrix_id"])

    page = browser_client.get("/account/matrix")

    html = page.content.decode()
    assert page.status_code == 200
    assert 'value="@alice:localhost"' in html
    assert "No Matrix id, or Matrix is off here" in html
    assert len(re.findall(r"\schecked[\s>]", html)) == 2  # not the phone switch's aria-checked


def test_setting_the_matrix_id_invites_it(
    browser_client, user, matrix_on_synapse, matrix_user_factory
):
    alice = matrix_user_factory("alice")

    response = browser_client.post("/account/matrix", {"matrixId": alice.user_id})

    assert response.status_code == 302 and response.url == "/account"
    user.refresh_from_db()
    assert (user.matrix_id, user.matrix_status) == (alice.user_id, "invited")
    assert MatrixRoom.objects.filter(user=user, matrix_id=alice.user_id).exists()
    html = browser_client.get("/account").content.decode()
    assert f"Your Matrix id is {alice.user_id}." in html and "invited" in html


def test_an_empty_field_clears_the_matrix_id(browser_client, user):
    user.matrix_id = "@alice:localhost"
    user.save(update_fields=["matrix_id"])

    response = browser_client.post("/account/matrix", {"matrixId": ""})

    assert response.status_code == 302
    user.refresh_from_db()
    assert user.matrix_id is None


@pytest.mark.parametrize(
    ("matrix_id", "status", "sentence"),
    [
        ("alice", 400, "Not a valid Matrix user ID."),
        ("@Alice:localhost", 400, "Not a valid Matrix user ID."),
        (" @alice:localhost", 400, "Not a valid Matrix user ID."),
        ("@a:" + "b" * 2000, 400, "no more than 1024 characters"),
        ("@a%ED%A0%80:b", 400, "Not a valid Matrix user ID."),  # a lone surrogate, encoded
        ("@a\x00:b", 400, "Null characters are not allowed."),  # the serializer says it
    ],
)
def test_a_bad_matrix_id_is_refused_next_to_it(browser_client, user, matrix_id, status, sentence):
    body = f"matrixId={matrix_id if '%' in matrix_id else quote(matrix_id)}"
    response = browser_client.post("/account/matrix", body, "application/x-www-form-urlencoded")

    html = response.content.decode()
    assert response.status_code == status
    assert sentence in html
    assert 'id="id_matrixId_errors"' in html
    assert 'aria-describedby="id_matrixId_errors id_matrixId_helptext"' in html
    user.refresh_from_db()
    assert user.matrix_id is None


def test_an_unknown_matrix_user_is_refused_next_to_it(browser_client, user, matrix_on_synapse):
    nobody = f"@nobody-here:{SERVER_NAME}"  # never registered: the factory's ids have a suffix

    response = browser_client.post("/account/matrix", {"matrixId": nobody})

    assert response.status_code == 400
    assert "No such user on its homeserver." in response.content.decode()
    assert 'id="id_matrixId_errors"' in response.content.decode()
    user.refresh_from_db()
    assert user.matrix_id is None
    assert not MatrixRoom.objects.exists()


def test_an_unreachable_homeserver_is_a_503_next_to_the_field(browser_client, user, matrix_on):
    response = browser_client.post("/account/matrix", {"matrixId": "@alice:localhost"})

    assert response.status_code == 503
    assert response["Retry-After"] == "30"
    assert "could not be asked" in response.content.decode()
    assert 'id="id_matrixId_errors"' in response.content.decode()
    user.refresh_from_db()
    assert user.matrix_id is None


def test_new_matrix_ids_are_rate_limited_next_to_the_field(browser_client, matrix_on, settings):
    settings.RATE_LIMIT_MATRIX_ID_PER_USER = "1/h"
    browser_client.post("/account/matrix", {"matrixId": "@user1:localhost"})

    response = browser_client.post("/account/matrix", {"matrixId": "@user2:localhost"})

    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert 'id="id_matrixId_errors"' in response.content.decode()


def test_the_notices_switch_off_without_touching_the_id(browser_client, user, matrix_on):
    user.matrix_id = "@alice:localhost"
    user.save(update_fields=["matrix_id"])

    response = browser_client.post(
        "/account/matrix", {"save": "notifications", "matrixInbound": "on"}
    )

    assert response.status_code == 302 and response.url == "/account"
    user.refresh_from_db()
    assert (user.matrix_inbound, user.matrix_outbound) == (True, False)
    assert user.matrix_id == "@alice:localhost"  # the homeserver (down) was never asked


def test_the_matrix_forms_enforce_csrf(user):
    client = csrf_signed_in(user)

    assert client.post("/account/matrix", {"matrixId": "@eve:localhost"}).status_code == 403
    assert client.post("/account/matrix", {"save": "notifications"}).status_code == 403
    user.refresh_from_db()
    assert user.matrix_id is None and user.matrix_inbound and user.matrix_outbound
