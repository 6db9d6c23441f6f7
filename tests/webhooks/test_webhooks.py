"""Signed status webhooks, against a real HTTP receiver on loopback (issue 17): every state
of a call arrives once, in order, signed; a receiver that was down gets everything after it
comes back; private addresses are refused unless WEBHOOK_ALLOW_PRIVATE."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.utils import timezone
from standardwebhooks import Webhook, WebhookVerificationError

from realtime.services import call_submit
from tests.conftest import drain_tasks
from webhooks.models import DeliveryStatus, WebhookDelivery, WebhookEndpoint
from webhooks.services import deliveries_sweep, delivery_retry

pytestmark = pytest.mark.django_db(transaction=True)

STATES = ["queued", "dialing", "ringing", "in_progress", "completed"]


class Receiver:
    """An HTTP server on 127.0.0.1 that keeps every POST (headers and raw body) and answers
    `status` (a list: one answer per request, the last repeated)."""

    def __init__(self):
        self.received: list[tuple[dict, bytes]] = []
        self.answers = [204]
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                status = (
                    receiver.answers.pop(0) if len(receiver.answers) > 1 else receiver.answers[0]
                )
                if status < 300:
                    receiver.received.append((dict(self.headers), body))
                self.send_response(status)
                if 300 <= status < 400:
                    self.send_header("Location", "http://127.0.0.1:1/elsewhere")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def events(self) -> list[dict]:
        return [json.loads(body) for _, body in self.received]


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.close()


@pytest.fixture
def private_allowed(settings):
    settings.WEBHOOK_ALLOW_PRIVATE = True  # the receiver is on loopback; this test alone


def set_webhook(client, url, **extra):
    return client.put("/api/user/webhook", {"url": url, **extra}, format="json")


def place(user, call_id="c1", **extra):
    data = {"callId": call_id, "to": "+442079460123", "message": "Hello", **extra}
    return call_submit(user=user, data=data)[0]


def test_every_state_of_a_call_arrives_once_in_order_signed(
    private_allowed, receiver, user, client_jwt
):
    created = set_webhook(client_jwt, receiver.url, events=["call_status"])
    assert created.status_code == 201
    secret = created.json()["secret"]
    assert secret.startswith("whsec_")

    place(user)
    drain_tasks()

    events = receiver.events()
    assert [e["status"] for e in events] == STATES
    assert {e["type"] for e in events} == {"call_status"} and {e["callId"] for e in events} == {
        "c1"
    }
    ids = [headers["webhook-id"] for headers, _ in receiver.received]
    assert len(set(ids)) == len(ids)
    for headers, body in receiver.received:
        # By the specification's own package...
        assert Webhook(secret).verify(body, headers)["type"] == "call_status"
        # ...and by hand: HMAC-SHA256 over id.timestamp.body, keyed by the decoded secret.
        key = base64.b64decode(secret.removeprefix("whsec_"))
        signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
        expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
        assert headers["webhook-signature"] == f"v1,{expected}"


def test_a_tampered_body_fails_verification(private_allowed, receiver, user, client_jwt):
    secret = set_webhook(client_jwt, receiver.url).json()["secret"]
    place(user)
    drain_tasks()
    headers, body = receiver.received[0]

    tampered = body.replace(b'"queued"', b'"completed"')

    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(tampered, headers)
    rotated = client_jwt.post("/api/user/webhook/rotate-secret").json()["secret"]
    with pytest.raises(WebhookVerificationError):
        Webhook(rotated).verify(body, headers)  # the old secret's signature


def test_a_receiver_that_was_down_gets_every_event_after_it_comes_back(
    private_allowed, receiver, user, client_jwt
):
    set_webhook(client_jwt, receiver.url, events=["call_status"])
    receiver.answers = [503]  # down

    place(user)
    drain_tasks()

    assert receiver.received == []
    pending = WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING)
    assert pending.count() == len(STATES)
    first = pending.order_by("id").first()
    assert first.attempts == 1 and first.next_attempt_at > timezone.now()
    # Later deliveries of the call wait for the first: none of them was tried.
    assert not pending.exclude(pk=first.pk).filter(attempts__gt=0).exists()

    receiver.answers = [204]  # back; the retry comes due
    pending.update(next_attempt_at=timezone.now() - timedelta(minutes=2))
    assert deliveries_sweep() >= 1
    drain_tasks()

    assert [e["status"] for e in receiver.events()] == STATES
    assert not WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING).exists()


def test_a_day_of_failures_disables_the_webhook_with_its_reason(
    private_allowed, receiver, user, client_jwt, settings
):
    set_webhook(client_jwt, receiver.url, events=["call_status"])
    receiver.answers = [500]
    place(user)
    drain_tasks()
    day_ago = timezone.now() - timedelta(hours=settings.WEBHOOK_RETRY_HOURS, minutes=1)
    WebhookDelivery.objects.update(created_at=day_ago, next_attempt_at=day_ago)
    WebhookEndpoint.objects.update(failing_since=day_ago)

    deliveries_sweep()
    drain_tasks()

    shown = client_jwt.get("/api/user/webhook").json()
    assert shown["enabled"] is False
    assert "answered 500" in shown["disabledReason"]
    assert "secret" not in shown
    assert WebhookDelivery.objects.filter(status=DeliveryStatus.FAILED).exists()
    # Setting it again turns it back on.
    assert set_webhook(client_jwt, receiver.url).json()["enabled"] is True


def test_a_call_status_callback_gets_that_calls_states(private_allowed, receiver, user, client_jwt):
    set_webhook(client_jwt, receiver.url, events=["call_record"])  # not call_status

    place(user, "with-callback", statusCallback=receiver.url)
    place(user, "without")
    drain_tasks()

    events = receiver.events()
    assert [e["status"] for e in events] == STATES
    assert {e["callId"] for e in events} == {"with-callback"}


def test_redirects_are_not_followed(private_allowed, receiver, user, client_jwt):
    set_webhook(client_jwt, receiver.url, events=["call_status"])
    receiver.answers = [302]

    place(user)
    drain_tasks()

    first = WebhookDelivery.objects.order_by("id").first()
    assert (first.status, first.response_status) == ("pending", 302)
    assert receiver.received == []


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:8080/hook", "http://localhost/hook", "http://[::1]/x", "http://10.1.2.3/"],
)
def test_a_url_leading_to_a_private_address_is_refused(client_jwt, url):
    response = set_webhook(client_jwt, url)

    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["url"]
    assert not WebhookEndpoint.objects.exists()


def test_a_private_address_is_refused_again_at_delivery(private_allowed, receiver, user, settings):
    client_settings = settings
    from accounts import services as accounts
    from tests.conftest import jwt_client

    client = jwt_client(accounts.session_open(user=user).token)
    set_webhook(client, receiver.url, events=["call_status"])
    client_settings.WEBHOOK_ALLOW_PRIVATE = False  # e.g. the DNS answer changed since

    place(user)
    drain_tasks()

    first = WebhookDelivery.objects.order_by("id").first()
    assert "private or local" in first.last_error
    assert receiver.received == []


def test_a_host_that_does_not_resolve_yet_is_accepted_and_its_deliveries_retried(user, client_jwt):
    # `.invalid` never resolves (RFC 2606): like a host whose DNS is not published yet.
    response = set_webhook(client_jwt, "https://hooks.relay-test.invalid/events")

    assert response.status_code == 201
    place(user)
    drain_tasks()
    first = WebhookDelivery.objects.order_by("id").first()
    assert first.status == DeliveryStatus.PENDING
    assert "does not resolve" in first.last_error


@pytest.mark.parametrize("method", ["put", "get", "delete", "patch"])
def test_rotate_secret_answers_other_methods_with_a_json_405(client_jwt, method):
    response = getattr(client_jwt, method)("/api/user/webhook/rotate-secret")

    assert response.status_code == 405
    assert response.json()["code"] == "method_not_allowed"
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        {"url": "ftp://example.com/x"},
        {"url": "http://user:pw@example.com/"},
        {"url": 5},
        {"url": "https://example.com/", "events": ["nope"]},
        {"url": "https://example.com/", "events": "call_status"},
        {},
    ],
)
def test_a_bad_webhook_is_refused_naming_the_field(client_jwt, body):
    response = client_jwt.put("/api/user/webhook", body, format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"


def test_the_webhook_is_the_owners_alone(private_allowed, receiver, client_jwt, outsider):
    set_webhook(client_jwt, receiver.url)

    assert outsider.get("/api/user/webhook").status_code == 404
    assert outsider.post("/api/user/webhook/rotate-secret").status_code == 404
    assert outsider.delete("/api/user/webhook").status_code == 404
    assert WebhookEndpoint.objects.count() == 1


def test_get_shows_the_webhook_without_its_secret_and_delete_removes_it(
    private_allowed, receiver, client_jwt
):
    made = set_webhook(client_jwt, receiver.url).json()
    changed = set_webhook(client_jwt, receiver.url, events=["incoming_call"])

    assert changed.status_code == 200 and "secret" not in changed.json()
    shown = client_jwt.get("/api/user/webhook").json()
    assert shown["secretId"] == made["secretId"] and shown["events"] == ["incoming_call"]
    assert "secret" not in shown
    assert client_jwt.delete("/api/user/webhook").json() == {"success": True}
    assert client_jwt.get("/api/user/webhook").status_code == 404


def test_without_a_webhook_nothing_is_queued(user):
    place(user)

    assert not WebhookDelivery.objects.exists()


def test_staff_retry_sends_a_given_up_delivery_again(private_allowed, receiver, user, client_jwt):
    set_webhook(client_jwt, receiver.url, events=["call_status"])
    place(user)
    drain_tasks()
    row = WebhookDelivery.objects.order_by("id").first()
    WebhookDelivery.objects.filter(pk=row.pk).update(status=DeliveryStatus.FAILED)
    receiver.received.clear()

    delivery_retry(row=row)
    drain_tasks()

    assert [e["status"] for e in receiver.events()] == ["queued"]
    assert WebhookDelivery.objects.get(pk=row.pk).status == DeliveryStatus.DELIVERED
