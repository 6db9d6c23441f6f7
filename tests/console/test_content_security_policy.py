"""The Content-Security-Policy header (relay/content_security_policy.py, docs/console.md): the
console's strict policy on every console page and API answer, connect-src widened to the
socket's origin, the admin under its own policy, and templates that need nothing more."""

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.http import JsonResponse
from django.test import Client
from django.urls import URLPattern, reverse
from django.urls import path as url_path

from console.urls import urlpatterns as console_routes
from tests.factories import (
    CallFactory,
    CallRecordFactory,
    NumberFactory,
    NumberMemberFactory,
    call_recorded_on,
)

pytestmark = pytest.mark.django_db

HEADER = "Content-Security-Policy"


def policy_of(response) -> dict[str, list[str]]:
    """The response's policy as {directive: [source, ...]} (django-csp orders them freely)."""
    directives = [part.split() for part in response[HEADER].split(";")]
    return {name: sources for name, *sources in directives}


def console_policy(socket_origin: str) -> dict[str, list[str]]:
    return {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'"],
        "connect-src": ["'self'", socket_origin],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
    }


def test_every_console_route_answers_under_the_strict_policy(browser_client, user):
    number = NumberFactory(owner=user)
    ids = {
        "number_id": number.id,
        "record_id": CallRecordFactory(number=number).id,
        "call_id": CallFactory(owner=user).call_id,
        "session_id": browser_client.login_session.pk,
        "token": "0" * 32 + ".not-a-live-token",  # a mailed link's: its page says it is dead
        "member_id": NumberMemberFactory(number=number).id,
        "recording_id": call_recorded_on(number).pk,
    }
    routes = [route for route in console_routes if isinstance(route, URLPattern)]
    assert len(routes) == len(console_routes)  # no include() whose routes this loop would miss

    for route in routes:
        kwargs = {name: ids[name] for name in route.pattern.converters}
        url = reverse(f"console:{route.name}", kwargs=kwargs)
        response = browser_client.get(url)
        assert response.status_code < 500, url
        assert policy_of(response) == console_policy("ws://testserver"), url


@pytest.mark.parametrize("path", ["/login", "/register", "/no-such-page"])
def test_signed_out_pages_and_the_not_found_page_have_the_policy_too(client, path):
    assert policy_of(client.get(path)) == console_policy("ws://testserver")


def test_the_socket_origin_is_public_ws_url_without_its_path(browser_client, settings):
    settings.PUBLIC_WS_URL = "wss://ws.example.com:8443/relay/"

    response = browser_client.get("/calls")

    assert policy_of(response)["connect-src"] == ["'self'", "wss://ws.example.com:8443"]
    token = browser_client.post("/calls/socket-token").json()
    assert token["wsUrl"].startswith("wss://ws.example.com:8443/")  # the socket the page opens


def test_the_derived_socket_origin_follows_the_request(browser_client, settings):
    settings.PUBLIC_WS_URL = ""
    settings.WS_PORT = None

    plain = browser_client.get("/calls", headers={"host": "localhost:8000"})
    secure = browser_client.get("/calls", headers={"host": "localhost:8000"}, secure=True)

    assert policy_of(plain)["connect-src"] == ["'self'", "ws://localhost:8000"]
    assert policy_of(secure)["connect-src"] == ["'self'", "wss://localhost:8000"]


def test_the_derived_socket_origin_is_at_ws_port_when_the_socket_listens_apart(
    browser_client, settings
):
    settings.PUBLIC_WS_URL = ""
    settings.WS_PORT = 8001

    response = browser_client.get("/calls", headers={"host": "localhost:8000"})

    assert policy_of(response)["connect-src"] == ["'self'", "ws://localhost:8001"]
    token = browser_client.post("/calls/socket-token", headers={"host": "localhost:8000"})
    assert token.json()["wsUrl"].startswith("ws://localhost:8001/ws?")


def test_api_answers_carry_the_strict_policy(client_jwt, client):
    assert policy_of(client_jwt.get("/api/user/me")) == console_policy("ws://testserver")
    assert policy_of(client.get("/api/user/me")) == console_policy("ws://testserver")  # 401


def test_swagger_ui_is_left_without_a_policy_for_its_inline_script(client):
    response = client.get("/api/docs")

    assert response.status_code == 200
    assert HEADER not in response


def test_the_admin_has_its_own_policy_and_still_works(staff_client, user):
    admin_policy = {
        **console_policy("ws://testserver"),
        "style-src": ["'self'", "'unsafe-inline'"],
        "connect-src": ["'self'"],
    }
    for path in ["/admin/", "/admin/accounts/user/", f"/admin/accounts/user/{user.pk}/change/"]:
        response = staff_client.get(path)
        assert response.status_code == 200, path
        assert policy_of(response) == admin_policy, path
    assert policy_of(Client().get("/admin/login/")) == admin_policy


# Markup the strict policy refuses: an inline <script> (json_script's data block runs nothing
# and is allowed), an inline event handler, a style attribute or a <style> element.
REFUSED_MARKUP = {
    "inline script": re.compile(r"<script(?![^>]*\bsrc=)[^>]*>"),
    "event handler attribute": re.compile(r"<[^>]+\son[a-z]+\s*=", re.IGNORECASE),
    "style attribute": re.compile(r"<[^>]+\sstyle\s*=", re.IGNORECASE),
    "style element": re.compile(r"<style[\s>]", re.IGNORECASE),
    "javascript: URL": re.compile(r"javascript:", re.IGNORECASE),
}


def test_no_console_template_carries_what_the_policy_refuses():
    templates = sorted((Path(settings.BASE_DIR) / "console" / "templates").rglob("*.html"))
    assert templates

    found = [
        f"{template.name}: {what}"
        for template in templates
        for what, pattern in REFUSED_MARKUP.items()
        if pattern.search(template.read_text())
    ]

    assert found == []


def plain(request):
    return JsonResponse({"ok": True})


urlpatterns = [url_path("plain", plain)]


def test_a_urlconf_without_the_admin_still_gets_the_policy(client, settings):
    # The bench serves one plain view under Relay's middleware with a URLconf of its own
    # (bench/plain_urls.py); asking where the admin lives must not turn it into a 500.
    settings.ROOT_URLCONF = __name__

    response = client.get("/plain")

    assert response.status_code == 200
    assert policy_of(response) == console_policy("ws://testserver")
