"""`GET /metrics`: who may read it, and that each series counts what it says, in-process.
The same series summed over runrelay's processes: tests/relay/test_runrelay.py."""

import logging
from datetime import timedelta

import pytest
from django.utils import timezone
from django_tasks_db.models import DBTaskResult
from prometheus_client.parser import text_string_to_metric_families

from calls.states import CallState
from history.services import record_inbound_call
from realtime.pipeline import call_transition
from realtime.providers import Step
from tests.factories import CallFactory, NumberFactory
from webhooks.models import WebhookDelivery
from webhooks.tasks import deliver_webhook

TOKEN = "metrics-test-token-0123456789"


@pytest.fixture
def token(settings):
    settings.METRICS_TOKEN = TOKEN
    return TOKEN


def scrape(client, token=TOKEN) -> dict[tuple[str, tuple], float]:
    """The samples of /metrics as {(name, sorted labels): value}."""
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def sample(samples: dict, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.mark.django_db
def test_metrics_is_not_there_without_a_token(api_client, settings):
    settings.METRICS_TOKEN = ""
    response = api_client.get("/metrics", HTTP_AUTHORIZATION="Bearer anything-at-all-here")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", f"Basic {TOKEN}", "Bearer wrong-token-0123456789", f"Bearer {TOKEN}x"],
)
def test_metrics_refuses_anything_but_the_bearer_token(api_client, token, authorization, caplog):
    headers = {} if authorization is None else {"HTTP_AUTHORIZATION": authorization}
    with caplog.at_level(logging.WARNING, logger="relay.security"):
        response = api_client.get("/metrics", **headers)
    assert response.status_code == 401
    assert response.json()["code"] == "authentication_failed"
    assert response["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert "metrics refused" in caplog.text
    assert TOKEN not in caplog.text and "wrong-token" not in caplog.text


@pytest.mark.django_db
def test_guessing_the_token_is_rate_limited(api_client, token):
    statuses = [
        api_client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer guess-{n:020d}").status_code
        for n in range(11)
    ]
    assert statuses == [401] * 10 + [429]
    # The right token still reads: only failures count.
    assert api_client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200


@pytest.mark.django_db
def test_a_scraper_asking_for_openmetrics_gets_it(api_client, token):
    response = api_client.get(
        "/metrics",
        HTTP_AUTHORIZATION=f"Bearer {token}",
        HTTP_ACCEPT="application/openmetrics-text; version=1.0.0",
    )
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/openmetrics-text")
    assert response.content.decode().rstrip().endswith("# EOF")


@pytest.mark.django_db
def test_metrics_takes_get_only(api_client, token):
    response = api_client.post("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 405


@pytest.mark.django_db
def test_requests_are_counted_by_route_method_and_status(api_client, token):
    before = scrape(api_client)
    for _ in range(3):
        assert api_client.get("/api/user/me").status_code == 401
    api_client.generic("BREW", "/api/user/me")
    assert api_client.get("/no/such/path").status_code == 404
    after = scrape(api_client)

    def delta(name, **labels):
        return sample(after, name, **labels) - sample(before, name, **labels)

    me = {"route": "user-me", "method": "GET"}
    assert delta("relay_http_requests_total", status="401", **me) == 3
    assert delta("relay_http_request_duration_seconds_count", **me) == 3
    assert delta("relay_http_request_duration_seconds_bucket", le="+Inf", **me) == 3
    # A method outside HTTP's list and a path that matches nothing take fixed labels.
    assert delta("relay_http_requests_total", route="user-me", method="other", status="401") == 1
    assert delta("relay_http_requests_total", route="unmatched", method="GET", status="404") == 1
    assert not [key for key in after if ("method", "BREW") in key[1]]


@pytest.mark.django_db(transaction=True)
def test_calls_ending_and_inbound_records_are_counted_by_status(api_client, token):
    call = CallFactory(status=CallState.RINGING)
    number = NumberFactory()
    before = scrape(api_client)
    assert call_transition(
        call=call, step=Step(status=CallState.BUSY), expected_status=CallState.RINGING
    )
    record_inbound_call(number=number, caller_num="+447700900123", status="missed", duration=0)
    after = scrape(api_client)
    assert sample(after, "relay_calls_ended_total", status="busy") == (
        sample(before, "relay_calls_ended_total", status="busy") + 1
    )
    assert sample(after, "relay_inbound_calls_total", status="missed") == (
        sample(before, "relay_inbound_calls_total", status="missed") + 1
    )


@pytest.mark.django_db
def test_outbox_depth_and_age_and_worker_lag_are_read_off_the_database(api_client, token, user):
    empty = scrape(api_client)
    assert sample(empty, "relay_outbox_pending", outbox="webhooks") == 0
    assert ("relay_outbox_pending", (("outbox", "matrix"),)) in empty  # every outbox shows
    assert sample(empty, "relay_outbox_oldest_pending_age_seconds", outbox="webhooks") == 0
    assert sample(empty, "relay_worker_lag_seconds") == 0

    an_hour_ago = timezone.now() - timedelta(hours=1)
    for _ in range(2):
        row = WebhookDelivery.objects.create(
            user=user, url="https://hooks.example.com/", event_type="call_record", payload="{}"
        )
    WebhookDelivery.objects.filter(pk=row.pk).update(created_at=an_hour_ago)
    deliver_webhook.enqueue(delivery_id=row.pk)  # due now, and no worker in this test
    DBTaskResult.objects.update(enqueued_at=an_hour_ago)
    later = timezone.now() + timedelta(hours=1)
    deliver_webhook.using(run_after=later).enqueue(delivery_id=row.pk)  # not due: no lag

    samples = scrape(api_client)
    assert sample(samples, "relay_outbox_pending", outbox="webhooks") == 2
    assert sample(samples, "relay_outbox_oldest_pending_age_seconds", outbox="webhooks") >= 3600
    assert 3600 <= sample(samples, "relay_worker_lag_seconds") < 3700
    assert sample(samples, "relay_tasks_due") == 1


@pytest.mark.django_db
def test_refused_destinations_quota_refusals_and_flags_are_counted(
    api_client, token, settings, client_jwt
):
    settings.FRAUD_FLAG_REFUSALS_PER_HOUR = 3
    settings.PLANS = {"free": {**settings.PLANS["free"], "concurrent_calls": 1}}
    before = scrape(api_client)

    def call(call_id: str, to: str):
        body = {"callId": call_id, "to": to, "message": "Hi"}
        return client_jwt.post("/api/calls", body, format="json").status_code

    assert call("premium", "+449012345678") == 400
    assert call("abroad", "+33123456789") == 400
    assert call("placed", "+442079460120") == 202
    assert call("second", "+442079460121") == 429
    assert call("third", "+442079460122") == 429
    after = scrape(api_client)

    def grew(name: str, **labels) -> float:
        return sample(after, name, **labels) - sample(before, name, **labels)

    assert grew("relay_dial_refusals_total", reason="premium_rate") == 1
    assert grew("relay_dial_refusals_total", reason="country") == 1
    assert grew("relay_quota_refusals_total", quota="concurrent_calls") == 2
    assert grew("relay_users_flagged_total") == 1  # at the third refusal, once
