"""Issue 53, findings 4 and 5: where Relay sends requests users name. A call's statusCallback
is refused when it is submitted, as webhook and hook URLs are, not at every delivery after;
and an IPv6 address that carries an IPv4 one (NAT64, 6to4, IPv4-compatible, Teredo) is
judged by that IPv4 address, or refused where it cannot be read (core.urls.EMBEDDED_IPV4)."""

import pytest
from asgiref.sync import sync_to_async

from calls.models import Call
from webhooks.models import WebhookEndpoint

# One row a form of core.urls.EMBEDDED_IPV4, each carrying a private IPv4 address.
PRIVATE_BEHIND_IPV6 = {
    "IPv4-mapped ::ffff:10.0.0.1": "http://[::ffff:10.0.0.1]/hook",
    "IPv4-compatible ::10.0.0.1": "http://[::10.0.0.1]/hook",
    "IPv4-compatible ::172.16.0.1": "http://[::ac10:1]/hook",
    "NAT64 64:ff9b::/96 to 10.0.0.1": "http://[64:ff9b::10.0.0.1]/hook",
    "NAT64 64:ff9b::/96 to 127.0.0.1": "http://[64:ff9b::7f00:1]/hook",
    "NAT64 local use 64:ff9b:1::/48": "http://[64:ff9b:1::a00:1]/hook",
    "NAT64 local use, a public IPv4 too": "http://[64:ff9b:1:808:8:800::]/hook",
    "6to4 2002::/16 to 10.0.0.1": "http://[2002:a00:1::1]/hook",
    "6to4 2002::/16 to 172.16.5.4": "http://[2002:ac10:504::]/hook",
    "Teredo 2001::/32": "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook",
}

# The same forms carrying a public IPv4 address lead where that address leads: allowed.
PUBLIC_BEHIND_IPV6 = {
    "NAT64 64:ff9b::/96 to 8.8.8.8": "http://[64:ff9b::808:808]/hook",
    "6to4 2002::/16 to 8.8.8.8": "http://[2002:808:808::1]/hook",
    "a plain global IPv6 address": "http://[2001:4860:4860::8888]/hook",
}


@pytest.mark.django_db
@pytest.mark.parametrize("url", PRIVATE_BEHIND_IPV6.values(), ids=PRIVATE_BEHIND_IPV6.keys())
def test_a_webhook_to_a_private_ipv4_behind_an_ipv6_form_is_refused(client_jwt, url):
    response = client_jwt.put("/api/user/webhook", {"url": url}, format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert list(response.json()["fields"]) == ["url"]
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("url", PUBLIC_BEHIND_IPV6.values(), ids=PUBLIC_BEHIND_IPV6.keys())
def test_a_webhook_to_a_public_address_behind_an_ipv6_form_is_kept(client_jwt, url):
    response = client_jwt.put("/api/user/webhook", {"url": url}, format="json")

    assert response.status_code == 201, response.content
    assert WebhookEndpoint.objects.get().url == url


@pytest.mark.django_db
@pytest.mark.parametrize("url", PRIVATE_BEHIND_IPV6.values(), ids=PRIVATE_BEHIND_IPV6.keys())
def test_a_voice_hook_to_a_private_ipv4_behind_an_ipv6_form_is_refused(client_jwt, url):
    https = url.replace("http://", "https://")
    script = [{"verb": "gather", "actionHook": https}]
    response = client_jwt.post(
        "/api/calls",
        {"callId": "hooked", "to": "+442079460123", "script": script},
        format="json",
    )

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert not Call.objects.exists()


# --- statusCallback, checked at submit ------------------------------------------------------
STATUS_CALLBACKS = [
    "http://127.0.0.1:8080/status",
    "http://localhost/status",
    "http://10.1.2.3/status",
    "http://[::1]/status",
    "http://169.254.169.254/latest/meta-data",
    "http://[64:ff9b::a9fe:a9fe]/latest/meta-data",
]


def call_body(call_id: str, status_callback: str) -> dict:
    return {
        "callId": call_id,
        "to": "+442079460123",
        "message": "Hello",
        "statusCallback": status_callback,
    }


@pytest.mark.django_db
@pytest.mark.parametrize("url", STATUS_CALLBACKS)
def test_a_status_callback_to_a_private_address_is_refused_over_rest(client_jwt, url):
    response = client_jwt.post("/api/calls", call_body("cb", url), format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert list(response.json()["fields"]) == ["statusCallback"]
    assert not Call.objects.exists()


@pytest.mark.django_db(transaction=True)
async def test_a_status_callback_to_a_private_address_is_refused_on_the_socket(communicator, user):
    ws, connected = await communicator(user)
    assert connected
    await ws.send_json_to({"type": "call", **call_body("cb", "http://[2002:a00:1::1]/status")})

    frame = await ws.receive_json_from(timeout=5)

    assert frame["type"] == "error"
    assert frame["code"] == "invalid_request"
    assert frame["callId"] == "cb"
    assert list(frame["fields"]) == ["statusCallback"]
    await ws.send_json_to({"type": "ping"})
    assert (await ws.receive_json_from(timeout=5))["type"] == "pong"  # the socket stays open
    assert not await sync_to_async(Call.objects.exists)()


@pytest.mark.django_db
def test_a_status_callback_that_does_not_resolve_yet_is_accepted(client_jwt):
    # `.invalid` never resolves (RFC 2606): like a host whose DNS is not published yet; each
    # delivery resolves it again and checks where it leads then.
    url = "https://status.relay-test.invalid/cb"
    response = client_jwt.post("/api/calls", call_body("later", url), format="json")

    assert response.status_code == 202, response.content
    assert Call.objects.get(call_id="later").status_callback == url


@pytest.mark.django_db
def test_where_private_addresses_are_allowed_a_private_status_callback_is_kept(
    client_jwt, settings
):
    settings.WEBHOOK_ALLOW_PRIVATE = True

    response = client_jwt.post(
        "/api/calls", call_body("lan", "http://10.1.2.3/status"), format="json"
    )

    assert response.status_code == 202, response.content
    assert Call.objects.get(call_id="lan").status_callback == "http://10.1.2.3/status"
