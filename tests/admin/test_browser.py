"""Staff work in Django admin: proved in a real browser (Playwright driving Debian's Chromium).

Each test logs in through the login form, works the pages as a person would, and checks the
effect in the database. Screenshots of every page land in $TEST_ARTIFACTS_DIR/admin/ when
that is set (to look at them), else in the run's temporary directory: a test run leaves the
checkout as it found it.
"""

import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.db import connection

from accounts import services as accounts
from accounts.models import LoginSession, User
from tests.browser import NEEDS_CHROMIUM
from tests.conftest import jwt_client
from tests.factories import (
    CallFactory,
    CallRecordFactory,
    InventoryNumberFactory,
    NumberFactory,
    UserFactory,
)
from virtual_numbers.models import BlockedCaller, InventoryNumber, Number

ARTIFACTS = (
    Path(os.environ.get("TEST_ARTIFACTS_DIR") or tempfile.gettempdir()) / "relay-test-artifacts"
) / "admin"
STAFF_PASSWORD = "staff-password-long-enough"

pytestmark = [pytest.mark.django_db(transaction=True), NEEDS_CHROMIUM]


@pytest.fixture
def world(db):
    """A staff member, a customer with numbers, history, calls and sessions."""
    staff = User.objects.create_superuser("staff@example.com", STAFF_PASSWORD)
    customer = UserFactory(email="customer@example.com")
    number = NumberFactory(owner=customer, alias="Office", inventory__e164="+442079460001")
    for _ in range(5):
        CallRecordFactory(number=number, caller_num="+447700900666", status="missed")
    CallRecordFactory(number=number, caller_num="+447700900123", status="answered")
    session = accounts.session_open(user=customer).session
    queued = CallFactory(owner=customer, call_id="q1", caller_id=number.number)
    failed = CallFactory(
        owner=customer,
        call_id="f1",
        to="+442079460129",
        caller_id=number.number,
        status="failed",
        failure_reason="unreachable",
    )
    InventoryNumberFactory(e164="+442079460777")
    return {
        "staff": staff,
        "customer": customer,
        "number": number,
        "session": session,
        "queued": queued,
        "failed": failed,
    }


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def log_in(page, base: str, email: str, password: str) -> None:
    page.goto(f"{base}/admin/login/")
    page.fill("#id_username", email)
    page.fill("#id_password", password)
    page.click("input[type=submit]")


def run_action(page, base: str, path: str, action: str, pk) -> None:
    page.goto(f"{base}{path}")
    page.check(f"input[name=_selected_action][value='{pk}']")
    page.select_option("select[name=action]", action)
    page.click("button[name=index]")
    page.wait_for_selector("ul.messagelist")


def test_a_non_staff_user_is_refused(live_server, page, world):
    log_in(page, live_server.url, "customer@example.com", "correct-horse-battery-staple")

    assert page.url.endswith("/admin/login/")
    assert "staff account" in page.inner_text(".errornote")
    shot(page, "login-refused")


def test_the_index_shows_the_service_state(live_server, page, world):
    log_in(page, live_server.url, "staff@example.com", STAFF_PASSWORD)

    assert page.inner_text("#state-users") == "2"
    assert page.inner_text("#state-held") == "1"
    assert page.inner_text("#state-free") == "1"
    assert "f1" in page.inner_text("#state-failed")
    shot(page, "index")
    page.click("#state-failed a:text('f1')")
    page.wait_for_url("**/admin/calls/call/*/change/**")
    assert "unreachable" in page.inner_text("#content-main")
    shot(page, "call-request")


@pytest.mark.parametrize(
    "path",
    [
        "/admin/accounts/user/",
        "/admin/accounts/loginsession/",
        "/admin/numbers/number/",
        "/admin/numbers/inventorynumber/",
        "/admin/calls/call/?direction=inbound",
        "/admin/numbers/blockedcaller/",
        "/admin/calls/call/",
        "/admin/accounts/dialrefusal/",
    ],
)
def test_every_list_opens(live_server, page, world, path):
    log_in(page, live_server.url, "staff@example.com", STAFF_PASSWORD)

    response = page.goto(f"{live_server.url}{path}")

    assert response.status == 200
    assert page.locator("#changelist").count() == 1
    shot(page, path.strip("/").replace("/", "-"))


def test_filter_search_and_follow_links_both_ways(live_server, page, world):
    base = live_server.url
    log_in(page, base, "staff@example.com", STAFF_PASSWORD)

    # Filter the history by status.
    page.goto(f"{base}/admin/calls/call/?direction=inbound")
    page.click("#changelist-filter a:text('Missed')")
    page.wait_for_url("**outcome__exact=missed**")
    assert page.locator("#result_list tbody tr").count() == 5
    shot(page, "history-missed")

    # Search users by e-mail, then follow the user to their numbers and back.
    page.goto(f"{base}/admin/accounts/user/")
    page.fill("#searchbar", "customer@")
    page.press("#searchbar", "Enter")
    page.wait_for_url("**q=customer**")
    assert page.locator("#result_list tbody tr").count() == 1
    page.click("#result_list a:text('customer@example.com')")
    page.wait_for_url("**/admin/accounts/user/*/change/**")
    page.click(".field-related a:text('numbers')")
    page.wait_for_url("**/admin/numbers/number/?owner=**")
    assert "+442079460001" in page.inner_text("#result_list")
    page.click("#result_list a:text('customer@example.com')")  # number -> its owner
    page.wait_for_url("**/admin/accounts/user/*/change/**")
    assert f"/admin/accounts/user/{world['customer'].pk}/change/" in page.url

    # Whose is this number? Who keeps calling it?
    page.goto(f"{base}/admin/numbers/inventorynumber/?q=%2B442079460001")
    page.click("#result_list a:text('Office')")
    page.wait_for_url("**/admin/numbers/number/*/change/**")
    assert "+447700900666" in page.inner_text(".field-top_callers")
    assert "5 calls" in page.inner_text(".field-top_callers")
    shot(page, "number-top-callers")
    page.click(".field-top_callers a:text('+447700900666')")
    page.wait_for_url("**caller_id=**")
    assert page.locator("#result_list tbody tr").count() == 5


def test_actions_run_through_the_services(live_server, page, world):
    base = live_server.url
    customer, number = world["customer"], world["number"]
    old_digest = customer.api_key_digest
    log_in(page, base, "staff@example.com", STAFF_PASSWORD)

    run_action(page, base, "/admin/accounts/user/", "end_all_sessions", customer.pk)
    assert not LoginSession.objects.filter(user=customer, active=True).exists()

    run_action(page, base, "/admin/accounts/user/", "regenerate_api_keys", customer.pk)
    customer.refresh_from_db()
    assert customer.api_key_digest != old_digest

    record = number.calls.filter(direction="inbound", caller_id="+447700900123").get()
    run_action(page, base, "/admin/calls/call/", "block_callers", record.pk)
    assert BlockedCaller.objects.filter(number=number, caller_num="+447700900123").exists()

    run_action(page, base, "/admin/calls/call/", "cancel_calls", world["queued"].pk)
    world["queued"].refresh_from_db()
    assert world["queued"].status == "canceled"
    shot(page, "call-canceled")

    run_action(page, base, "/admin/numbers/number/", "release", number.pk)
    assert not Number.objects.filter(pk=number.pk).exists()
    assert InventoryNumber.objects.filter(e164="+442079460001", holding__isnull=True).exists()


def post_call(client, call_id: str, to: str):
    return client.post("/api/calls", {"callId": call_id, "to": to, "message": "Hi"}, format="json")


def post_call_in_a_thread(client, call_id: str, to: str):
    """post_call off Playwright's thread, whose event loop the events of a committed call
    must not meet, on a database connection of its own, closed after."""

    def run():
        try:
            return post_call(client, call_id, to)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(run).result()


def test_fraud_review_flags_filters_widens_and_clears(live_server, page, world, settings):
    """A customer refused again and again is flagged; staff find them by the filter, read
    what was refused, let them call France, move them to another plan and set their own
    limit, then clear the flag."""
    base = live_server.url
    customer = world["customer"]
    settings.FRAUD_FLAG_REFUSALS_PER_HOUR = 3
    settings.PLANS = {**settings.PLANS, "pro": {**settings.PLANS["free"], "calls_per_day": 500}}
    client = jwt_client(accounts.session_open(user=customer).token)
    for n in range(3):
        refused = post_call(client, f"x{n}", "+33123456789")
        assert refused.json()["code"] == "destination_not_allowed"
    log_in(page, base, "staff@example.com", STAFF_PASSWORD)

    page.goto(f"{base}/admin/accounts/user/")
    page.click("#changelist-filter a:text('Flagged')")
    page.wait_for_url("**flagged=yes**")
    assert page.locator("#result_list tbody tr").count() == 1
    assert "flagged" in page.inner_text("#result_list")
    shot(page, "users-flagged")

    page.goto(f"{base}/admin/accounts/dialrefusal/?q=customer%40")
    assert page.locator("#result_list tbody tr").count() == 3
    assert "country" in page.inner_text("#result_list")

    page.goto(f"{base}/admin/accounts/user/{customer.pk}/change/")
    assert "3 (flagged at 3)" in page.inner_text(".field-refusals_last_hour")
    page.fill("#id_dial_countries", "fr, fr,ZZ")
    page.click("input[name=_save]")
    assert "ZZ" in page.inner_text(".field-dial_countries .errorlist")
    page.fill("#id_dial_countries", "fr")
    page.select_option("#id_plan", "pro")
    page.fill("#id_concurrent_calls", "2")  # its queued call and one more
    page.click("input[name=_save]")
    page.wait_for_selector("ul.messagelist")
    customer.refresh_from_db()
    assert (customer.dial_countries, customer.plan, customer.concurrent_calls) == ("FR", "pro", 2)
    placed = post_call_in_a_thread(client, "fr", "+33123456789")
    third = post_call_in_a_thread(client, "fr2", "+33123456780")
    assert placed.status_code == 202, placed.content
    assert third.json()["code"] == "quota_exceeded"

    run_action(page, base, "/admin/accounts/user/", "clear_fraud_flags", customer.pk)
    customer.refresh_from_db()
    assert customer.fraud_flagged_at is None
    assert "Cleared 1 flag(s)." in page.inner_text("ul.messagelist")


def test_no_page_shows_a_pin_password_hash_or_api_key(live_server, page, world):
    base = live_server.url
    customer, number = world["customer"], world["number"]
    log_in(page, base, "staff@example.com", STAFF_PASSWORD)
    secrets = [
        customer.password,
        customer.password.split("$")[-1],
        customer.api_key,
        customer.api_key_ciphertext,
        number.pin_hash,
        number.pin_hash.split("$")[-1],
    ]

    for path in (
        f"/admin/accounts/user/{customer.pk}/change/",
        f"/admin/numbers/number/{number.pk}/change/",
        "/admin/accounts/user/",
        "/admin/numbers/number/",
    ):
        page.goto(f"{base}{path}")
        html = page.content()
        assert not [s for s in secrets if s and s in html], path
    shot(page, "number-list")
