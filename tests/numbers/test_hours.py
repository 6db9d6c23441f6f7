"""PUT/GET/DELETE /api/numbers/:id/hours (issue 57): a number's opening hours, closed dates,
closed greeting and do-not-disturb, stored whole and checked whole; `openNow` from the same
open_at the inbound desk reads (tests/numbers/test_opening_hours.py tries it hour by hour)."""

from datetime import UTC, date, datetime, timedelta

import pytest
from django.utils import timezone

from tests.factories import NumberFactory
from virtual_numbers.models import OpeningHours
from virtual_numbers.selectors import number_closed, numbers_export

pytestmark = pytest.mark.django_db

SHOP = {
    "timeZone": "Europe/London",
    "weekly": [{"days": ["mon", "tue", "wed", "thu", "fri"], "start": "09:00", "end": "17:30"}],
    "closedDates": ["2026-12-25"],
    "doNotDisturb": False,
    "closedGreeting": "The shop is closed.",
}
NOTHING_RECORDED = {"closedGreetingRecordingUrl": None, "closedGreetingRecordingSeconds": None}
NONE_SET = {
    "timeZone": None,
    "weekly": [],
    "closedDates": [],
    "doNotDisturb": False,
    "closedGreeting": "",
    **NOTHING_RECORDED,
    "openNow": True,
}


@pytest.fixture
def number(user):
    return NumberFactory(owner=user)


@pytest.fixture
def at(monkeypatch):
    """Fix the API's clock at a UTC instant: `at(2026, 1, 12, 10, 0)`."""

    def fix(*parts):
        instant = datetime(*parts, tzinfo=UTC)
        monkeypatch.setattr(timezone, "now", lambda: instant)

    return fix


def url(number) -> str:
    return f"/api/numbers/{number.pk}/hours"


def put(client, number, body):
    if isinstance(body, str):  # raw JSON: what the test client cannot encode
        return client.put(url(number), body, content_type="application/json")
    return client.put(url(number), body, format="json")


def test_a_number_has_no_hours_until_told_and_is_open(client_jwt, number):
    response = client_jwt.get(url(number))

    assert response.status_code == 200
    assert response.json() == NONE_SET


def test_put_stores_the_hours_and_answers_them_with_open_now(client_jwt, number, at):
    at(2026, 1, 12, 10, 0)  # Monday 10:00 GMT

    response = put(client_jwt, number, SHOP)

    assert response.status_code == 200, response.content
    assert response.json() == {**SHOP, **NOTHING_RECORDED, "openNow": True}
    stored = OpeningHours.objects.get(number=number)
    assert (stored.time_zone, stored.weekly, stored.closed_dates) == (
        "Europe/London",
        SHOP["weekly"],
        ["2026-12-25"],
    )
    assert client_jwt.get(url(number)).json() == {**SHOP, **NOTHING_RECORDED, "openNow": True}


@pytest.mark.parametrize(
    ("instant", "open_now"),
    [
        ((2026, 3, 27, 8, 30), False),  # Friday 08:30 GMT
        ((2026, 3, 30, 8, 30), True),  # Monday 09:30 BST, after the March change
        ((2026, 10, 23, 16, 45), False),  # Friday 17:45 BST
        ((2026, 10, 26, 16, 45), True),  # Monday 16:45 GMT, after the October change
        ((2026, 12, 25, 12, 0), False),  # a closed date, a Friday
    ],
)
def test_open_now_follows_the_local_clock(client_jwt, number, at, instant, open_now):
    put(client_jwt, number, SHOP)
    at(*instant)

    assert client_jwt.get(url(number)).json()["openNow"] is open_now


def test_do_not_disturb_closes_the_number_until_turned_off(client_jwt, number, at):
    at(2026, 1, 12, 10, 0)  # inside the hours

    assert put(client_jwt, number, {**SHOP, "doNotDisturb": True}).json()["openNow"] is False
    assert put(client_jwt, number, SHOP).json()["openNow"] is True


def test_fields_left_out_take_their_defaults_and_a_put_replaces_everything(client_jwt, number):
    put(client_jwt, number, SHOP)

    response = put(client_jwt, number, {"timeZone": "America/New_York"})

    assert response.status_code == 200
    assert response.json() == {**NONE_SET, "timeZone": "America/New_York"}


def test_closed_dates_are_kept_in_order(client_jwt, number):
    body = {"timeZone": "UTC", "closedDates": ["2027-01-01", "2026-12-25", "2026-12-26"]}

    response = put(client_jwt, number, body)

    assert response.json()["closedDates"] == ["2026-12-25", "2026-12-26", "2027-01-01"]


def test_the_limits_themselves_are_taken(client_jwt, number):
    days = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    weekly = [
        {"days": [days[i % 7]], "start": f"{i // 7:02d}:00", "end": f"{i // 7:02d}:30"}
        for i in range(50)
    ]
    dates = [(date(2027, 1, 1) + timedelta(days=n)).isoformat() for n in range(366)]
    body = {"timeZone": "UTC", "weekly": weekly, "closedDates": dates}

    response = put(client_jwt, number, body)

    assert response.status_code == 200, response.content
    assert (len(response.json()["weekly"]), len(response.json()["closedDates"])) == (50, 366)


def test_delete_removes_the_hours_and_answers_204(client_jwt, number):
    put(client_jwt, number, {**SHOP, "doNotDisturb": True})

    response = client_jwt.delete(url(number))

    assert response.status_code == 204
    assert not OpeningHours.objects.filter(number=number).exists()
    assert client_jwt.get(url(number)).json() == NONE_SET
    assert client_jwt.delete(url(number)).status_code == 204  # nothing to remove: still 204


@pytest.mark.parametrize("method", ["get", "put", "delete"])
def test_another_users_number_is_not_found(client_jwt, outsider, number, method):
    put(client_jwt, number, SHOP)

    response = getattr(outsider, method)(url(number), {**SHOP, "doNotDisturb": True}, "json")

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    assert OpeningHours.objects.get(number=number).do_not_disturb is False


def test_an_unknown_number_is_not_found(client_jwt):
    response = client_jwt.put("/api/numbers/not-a-uuid/hours", SHOP, format="json")

    assert response.status_code == 404


WINDOW = {"days": ["mon"], "start": "09:00", "end": "17:00"}


def window(**changes) -> dict:
    return {"timeZone": "UTC", "weekly": [{**WINDOW, **changes}]}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "timeZone"),
        ({"timeZone": "Mars/Olympus_Mons"}, "timeZone"),
        ({"timeZone": "europe/london"}, "timeZone"),
        ({"timeZone": "../../etc/passwd"}, "timeZone"),
        ({"timeZone": "Europe/London" + "x" * 100}, "timeZone"),
        ({"timeZone": None}, "timeZone"),
        ({"timeZone": 0}, "timeZone"),
        ({"timeZone": "Europe/London\u0000"}, "timeZone"),
        ('{"timeZone": "Europe/\\ud800"}', "timeZone"),
        (window(end="09:00"), "weekly.0.end"),  # end equal to start
        (window(start="17:00", end="09:00"), "weekly.0.end"),  # end before start
        (window(start="22:00", end="02:00"), "weekly.0.end"),  # across midnight
        (window(start="24:00", end="24:00"), "weekly.0.start"),
        (window(end="24:01"), "weekly.0.end"),
        (window(start="9:00"), "weekly.0.start"),
        (window(start="09:00:00"), "weekly.0.start"),
        (window(start=900), "weekly.0.start"),
        (window(start=""), "weekly.0.start"),
        (window(end=None), "weekly.0.end"),
        ({"timeZone": ""}, "timeZone"),
        ({"timeZone": "UTC", "closedDates": [""]}, "closedDates.0"),
        (window(days=["monday"]), "weekly.0.days"),
        (window(days=["Mon"]), "weekly.0.days"),
        (window(days=[]), "weekly.0.days"),
        (window(days="mon"), "weekly.0.days"),
        (window(days=[1]), "weekly.0.days"),
        (window(days=["mon", "mon"]), "weekly.0.days"),
        ({"timeZone": "UTC", "weekly": [WINDOW, {**WINDOW, "start": "16:59"}]}, "weekly.1"),
        ({"timeZone": "UTC", "weekly": [WINDOW, WINDOW]}, "weekly.1"),
        ({"timeZone": "UTC", "weekly": [WINDOW] * 51}, "weekly"),
        ({"timeZone": "UTC", "weekly": {"mon": WINDOW}}, "weekly"),
        ({"timeZone": "UTC", "weekly": [None]}, "weekly.0"),
        ({"timeZone": "UTC", "closedDates": ["2026-12-25", "2026-12-25"]}, "closedDates"),
        ({"timeZone": "UTC", "closedDates": ["2026-02-30"]}, "closedDates.0"),
        ({"timeZone": "UTC", "closedDates": ["20261225"]}, "closedDates.0"),
        ({"timeZone": "UTC", "closedDates": ["2026-12-25T00:00"]}, "closedDates.0"),
        ({"timeZone": "UTC", "closedDates": [20261225]}, "closedDates.0"),
        ({"timeZone": "UTC", "closedDates": "2026-12-25"}, "closedDates"),
        (
            {"timeZone": "UTC", "closedDates": [f"2027-01-{d:02d}" for d in range(1, 32)] * 12},
            "closedDates",
        ),
        ({"timeZone": "UTC", "doNotDisturb": "true"}, "doNotDisturb"),
        ({"timeZone": "UTC", "doNotDisturb": 1}, "doNotDisturb"),
        ({"timeZone": "UTC", "closedGreeting": "x" * 501}, "closedGreeting"),
        ({"timeZone": "UTC", "closedGreeting": "Closed.\u0007"}, "closedGreeting"),
        ('{"timeZone": "UTC", "closedGreeting": "\\udfff"}', "closedGreeting"),
        ('{"timeZone": "UTC", "weekly": [], "doNotDisturb": 1e999}', "doNotDisturb"),
    ],
)
def test_bad_hours_are_refused_naming_the_field_and_nothing_is_stored(
    client_jwt, number, body, field
):
    put(client_jwt, number, SHOP)

    response = put(client_jwt, number, body)

    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid_request"
    named = response.json()["fields"]
    assert any(name == field or name.startswith(f"{field}.") for name in named), named
    stored = client_jwt.get(url(number)).json()
    del stored["openNow"]
    assert stored == {**SHOP, **NOTHING_RECORDED}


def test_an_overlap_names_both_windows(client_jwt, number):
    second = {"days": ["fri", "mon"], "start": "12:00", "end": "18:00"}

    response = put(client_jwt, number, {"timeZone": "UTC", "weekly": [WINDOW, second]})

    assert response.json()["fields"] == {"weekly.1": ["Overlaps window 0 (09:00-17:00) on mon."]}


def test_windows_that_touch_are_taken(client_jwt, number):
    lunch = [
        {"days": ["mon"], "start": "09:00", "end": "12:00"},
        {"days": ["mon"], "start": "13:00", "end": "17:00"},
        {"days": ["mon"], "start": "17:00", "end": "24:00"},
    ]

    assert put(client_jwt, number, {"timeZone": "UTC", "weekly": lunch}).status_code == 200


def test_setting_hours_is_rate_limited_per_user(settings, client_jwt, number):
    settings.RATE_LIMIT_FORWARDING_PER_USER = "2/h"

    codes = [put(client_jwt, number, SHOP).status_code for _ in range(3)]

    assert codes == [200, 200, 429]
    assert put(client_jwt, number, SHOP).json()["code"] == "rate_limited"


def test_the_hours_go_with_a_deleted_number(client_jwt, number):
    put(client_jwt, number, SHOP)

    assert client_jwt.delete(f"/api/numbers/{number.pk}").status_code == 200

    assert not OpeningHours.objects.exists()


def test_the_api_key_works_too(client_key, number):
    assert put(client_key, number, SHOP).status_code == 200


def test_the_owners_export_holds_the_hours(client_jwt, user, number):
    put(client_jwt, number, SHOP)

    [exported] = list(numbers_export(user=user)["numbers"])

    assert {key: exported["hours"][key] for key in SHOP} == SHOP


def test_a_stored_zone_zoneinfo_no_longer_knows_is_taken_as_open(client_jwt, number):
    OpeningHours.objects.create(
        number=number, time_zone="Gone/Zone", weekly=[WINDOW], closed_dates=["2026-12-25"]
    )

    response = client_jwt.get(url(number))

    assert response.status_code == 200
    assert response.json()["openNow"] is True
    assert number_closed(number=number, at=timezone.now()) is None
