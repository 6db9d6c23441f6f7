"""The webhook: set (its secret shown once), changed, its secret rotated, removed; each error
next to its field, the not-found page without a webhook, CSRF on every POST."""

import pytest

from tests.console.pages import csrf_signed_in
from webhooks import selectors
from webhooks.models import EVENT_TYPES, WebhookEndpoint
from webhooks.services import webhook_set

pytestmark = pytest.mark.django_db

PUBLIC = "https://8.8.8.8/relay-events"  # an address literal: public, and no DNS asked


@pytest.fixture
def endpoint(user):
    endpoint, _secret = webhook_set(user=user, url=PUBLIC, events=["call_status"])
    return endpoint


def test_making_the_webhook_shows_its_secret_once(browser_client, user, caplog):
    caplog.set_level("DEBUG")
    response = browser_client.post("/account/webhook", {"url": PUBLIC, "events": ["call_record"]})

    endpoint = WebhookEndpoint.objects.get(user=user)
    secret = selectors.webhook_secret(endpoint)
    assert response.status_code == 201
    assert response["Cache-Control"] == "no-store"
    assert secret.startswith("whsec_") and f'value="{secret}"' in response.content.decode()
    assert secret not in caplog.text
    assert (endpoint.url, endpoint.events) == (PUBLIC, ["call_record"])
    account = browser_client.get("/account").content.decode()
    assert secret not in account and PUBLIC in account and endpoint.secret_id in account
    assert secret not in browser_client.get("/account/webhook").content.decode()


def test_no_event_ticked_is_all_of_them(browser_client, user):
    browser_client.post("/account/webhook", {"url": PUBLIC})

    assert WebhookEndpoint.objects.get(user=user).events == list(EVENT_TYPES)


def test_changing_the_webhook_shows_no_secret(browser_client, user, endpoint):
    form = browser_client.get("/account/webhook").content.decode()
    assert f'value="{PUBLIC}"' in form and 'value="call_status" ' in form

    response = browser_client.post(
        "/account/webhook", {"url": "https://8.8.4.4/hook", "events": ["incoming_call"]}
    )

    assert response.status_code == 302 and response.url == "/account"
    endpoint.refresh_from_db()
    assert (endpoint.url, endpoint.events) == ("https://8.8.4.4/hook", ["incoming_call"])


@pytest.mark.parametrize(
    ("data", "field", "sentence"),
    [
        ({"url": ""}, "url", "may not be blank"),
        ({"url": "ftp://8.8.8.8/x"}, "url", "Must be an http or https URL with a host."),
        ({"url": "http://127.0.0.1/hook"}, "url", "webhooks go to public addresses"),
        ({"url": "http://10.1.2.3/hook"}, "url", "webhooks go to public addresses"),
        ({"url": "https://8.8.8.8/" + "a" * 2000}, "url", "Must be at most 2000 characters."),
        ({"url": PUBLIC, "events": ["call_status", "nope"]}, "events", "is not a valid choice"),
    ],
)
def test_a_bad_webhook_is_refused_next_to_the_field(browser_client, user, data, field, sentence):
    response = browser_client.post("/account/webhook", data)

    html = response.content.decode()
    assert response.status_code == 400
    assert f'id="id_{field}_errors"' in html and sentence in html
    assert not WebhookEndpoint.objects.filter(user=user).exists()


def test_a_nul_in_the_url_is_refused_by_the_form(browser_client, user):
    response = browser_client.post("/account/webhook", {"url": "https://8.8.8.8/\x00"})

    assert 'id="id_url_errors"' in response.content.decode()
    assert not WebhookEndpoint.objects.filter(user=user).exists()


def test_rotating_the_secret_asks_first_then_shows_the_new_one(browser_client, endpoint):
    old = selectors.webhook_secret(endpoint)
    page = browser_client.get("/account/webhook/rotate")
    assert page.status_code == 200 and "signs nothing more" in page.content.decode()

    response = browser_client.post("/account/webhook/rotate")

    endpoint.refresh_from_db()
    new = selectors.webhook_secret(endpoint)
    assert new != old
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    assert f'value="{new}"' in response.content.decode()
    assert new not in browser_client.get("/account").content.decode()


def test_removing_the_webhook_asks_first(browser_client, user, endpoint):
    page = browser_client.get("/account/webhook/delete")
    assert page.status_code == 200 and PUBLIC in page.content.decode()
    assert WebhookEndpoint.objects.filter(user=user).exists()

    response = browser_client.post("/account/webhook/delete")

    assert response.status_code == 302 and response.url == "/account"
    assert not WebhookEndpoint.objects.filter(user=user).exists()


@pytest.mark.parametrize("page", ["rotate", "delete"])
@pytest.mark.parametrize("method", ["get", "post"])
def test_without_a_webhook_rotate_and_remove_are_not_found(
    browser_client, other_user, page, method
):
    webhook_set(user=other_user, url=PUBLIC, events=[])  # someone else's is not yours

    response = getattr(browser_client, method)(f"/account/webhook/{page}")

    assert response.status_code == 404
    assert "Not found" in response.content.decode()
    assert WebhookEndpoint.objects.filter(user=other_user).count() == 1


def test_the_webhook_forms_enforce_csrf(user, endpoint):
    csrf_client = csrf_signed_in(user)
    secret = selectors.webhook_secret(endpoint)

    assert csrf_client.post("/account/webhook", {"url": "https://8.8.4.4/"}).status_code == 403
    assert csrf_client.post("/account/webhook/rotate").status_code == 403
    assert csrf_client.post("/account/webhook/delete").status_code == 403

    endpoint.refresh_from_db()
    assert endpoint.url == PUBLIC and selectors.webhook_secret(endpoint) == secret
