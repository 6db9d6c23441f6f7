"""The calls page's live status: the socket token (a minute long, for the browser's own login
session, so ending it closes the socket) and the statuses the script catches up with."""

from urllib.parse import parse_qs, urlparse

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from rest_framework_simplejwt.tokens import AccessToken

from tests.factories import CallFactory, UserFactory

pytestmark = pytest.mark.django_db


def token_of(response) -> str:
    return parse_qs(urlparse(response.json()["wsUrl"]).query)["token"][0]


def test_the_socket_token_is_a_minute_long_for_the_consoles_session(browser_client, settings):
    settings.WS_PORT = 8001
    response = browser_client.post("/calls/socket-token")

    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    url = urlparse(response.json()["wsUrl"])
    assert (url.scheme, url.netloc, url.path) == ("ws", "testserver:8001", "/ws")
    claims = AccessToken(token_of(response))
    assert claims["sid"] == str(browser_client.login_session.pk)
    assert 0 < claims["exp"] - claims["iat"] <= 60


def test_the_socket_url_is_the_dashboards(browser_client, settings):
    settings.PUBLIC_WS_URL = "wss://relay.example.com/"

    response = browser_client.post("/calls/socket-token")

    assert response.json()["wsUrl"].startswith("wss://relay.example.com/ws?token=")


def test_a_signed_out_fetch_of_a_token_gets_401_json():
    response = Client().post("/calls/socket-token")

    assert response.status_code == 401 and response["Content-Type"] == "application/json"
    assert response.json()["code"] == "not_authenticated"


def test_the_token_is_a_post_that_checks_csrf(user, browser_client):
    csrf_checked = Client(enforce_csrf_checks=True)
    csrf_checked.cookies = browser_client.cookies  # signed in, but sends no CSRF token

    assert csrf_checked.post("/calls/socket-token").status_code == 403
    assert browser_client.get("/calls/socket-token").status_code == 405


@pytest.mark.django_db(transaction=True)
async def test_the_token_opens_the_socket_until_the_session_ends(communicator, browser_client):
    first = await sync_to_async(browser_client.post)("/calls/socket-token")
    socket, connected = await communicator(token=token_of(first))
    await socket.send_json_to({"type": "ping"})
    assert connected and (await socket.receive_json_from(timeout=2))["type"] == "pong"
    second = await sync_to_async(browser_client.post)("/calls/socket-token")

    await sync_to_async(browser_client.post)("/logout")  # ends the console's session

    closed = {"type": "websocket.close", "code": 4401}
    assert await socket.receive_output(timeout=2) == closed
    refused, _ = await communicator(token=token_of(second))
    assert await refused.receive_output(timeout=2) == closed
    after = await sync_to_async(browser_client.post)("/calls/socket-token")
    assert after.status_code == 401


def test_the_statuses_are_the_recent_calls_own(browser_client, user):
    CallFactory(owner=user, call_id="a/1", status="ringing")
    CallFactory(owner=user, call_id="b", status="completed")
    CallFactory(owner=UserFactory(), call_id="theirs", status="dialing")

    response = browser_client.get("/calls/status")

    assert response.status_code == 200
    assert response.json() == {"a/1": "ringing", "b": "completed"}


def test_signed_out_statuses_are_401_json():
    response = Client().get("/calls/status")

    assert response.status_code == 401
    assert response.json() == {"error": "Sign in again.", "code": "not_authenticated"}
