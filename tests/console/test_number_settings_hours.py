"""The opening hours page (issue 57): set, show and remove a number's hours, closed dates,
closed greeting and do-not-disturb through HoursInput and number_hours_set; each refusal by
its field and line; outsider, CSRF, signed out."""

from datetime import UTC, datetime

import pytest
from django.test import Client
from django.utils import timezone

from tests.factories import NumberFactory
from virtual_numbers.models import OpeningHours

pytestmark = pytest.mark.django_db

SET = {
    "timeZone": "Europe/London",
    "weekly": "mon-fri 09:00-17:30\r\nsat 10:00-13:00",
    "closedDates": "2026-12-25\r\n\r\n2026-12-26",
    "closedGreeting": "The shop is closed.",
}


@pytest.fixture
def number(user):
    return NumberFactory(owner=user, alias="Shop")


def page_of(number) -> str:
    return f"/numbers/{number.pk}/hours"


def hours_of(number) -> OpeningHours | None:
    return OpeningHours.objects.filter(number=number).first()


def test_the_numbers_page_links_to_the_hours(browser_client, number):
    page = browser_client.get("/numbers").content.decode()

    assert f'href="{page_of(number)}">Opening hours<span class="visually-hidden"> of ' in page


def test_a_number_has_no_hours_until_told(browser_client, number):
    page = browser_client.get(page_of(number)).content.decode()

    assert "No opening hours: the number takes calls at all times." in page
    assert "Remove the opening hours" not in page
    assert '<label for="id_weekly">Opening hours</label>' in page
    assert 'aria-describedby="id_weekly_helptext"' in page
    assert '<label for="id_doNotDisturb">Do not disturb' in page


def test_saving_stores_the_hours_as_the_api_does(browser_client, number, monkeypatch):
    monday_morning = datetime(2026, 1, 12, 10, 0, tzinfo=UTC)
    monkeypatch.setattr(timezone, "now", lambda: monday_morning)

    response = browser_client.post(page_of(number), SET, follow=True)

    assert response.redirect_chain == [(page_of(number), 302)]
    stored = hours_of(number)
    assert stored.time_zone == "Europe/London"
    assert stored.weekly == [
        {"days": ["mon", "tue", "wed", "thu", "fri"], "start": "09:00", "end": "17:30"},
        {"days": ["sat"], "start": "10:00", "end": "13:00"},
    ]
    assert stored.closed_dates == ["2026-12-25", "2026-12-26"]
    assert (stored.closed_greeting, stored.do_not_disturb) == ("The shop is closed.", False)
    page = response.content.decode()
    assert "opening hours of" in page and "are saved" in page
    assert "Open: calls ring as usual. Times are in Europe/London." in page
    assert "mon tue wed thu fri 09:00-17:30\nsat 10:00-13:00</textarea>" in page


def test_do_not_disturb_closes_the_number_and_says_so(browser_client, number):
    response = browser_client.post(page_of(number), SET | {"doNotDisturb": "on"}, follow=True)

    assert hours_of(number).do_not_disturb is True
    page = response.content.decode()
    assert "Do not disturb is on: calls go to voicemail." in page
    assert 'name="doNotDisturb" id="id_doNotDisturb" checked' in page


@pytest.mark.parametrize(
    ("changes", "field", "sentence"),
    [
        ({"timeZone": "Mars/Base"}, "timeZone", "Must be an IANA time zone"),
        ({"timeZone": ""}, "timeZone", "Must be an IANA time zone"),
        ({"weekly": "mon 17:00-09:00"}, "weekly", "Line 1 (mon 17:00-09:00): Must be after start."),
        ({"weekly": "mon 09:00-17:00\nmonday 10:00-11:00"}, "weekly", "Line 2 (monday"),
        ({"weekly": "mon 9-5"}, "weekly", "Line 1 (mon 9-5): Must be a time"),
        ({"weekly": "mon tue"}, "weekly", "Line 1 (mon tue): Must be a time"),
        (
            {"weekly": "mon-fri 09:00-17:00\nfri 16:00-18:00"},
            "weekly",
            "Line 2 (fri 16:00-18:00): Overlaps window 0 (09:00-17:00) on fri.",
        ),
        ({"weekly": "\n".join(["mon 09:00-10:00"] * 60)}, "weekly", "at most 50 windows"),
        ({"closedDates": "25/12/2026"}, "closedDates", "Line 1 (25/12/2026): Must be a date"),
        ({"closedDates": "2026-12-25\n2026-12-25"}, "closedDates", "at most once"),
        ({"closedGreeting": "x" * 501}, "closedGreeting", "at most 500 characters"),
        ({"closedGreeting": "a\x00b"}, "closedGreeting", "control characters"),
        ({"weekly": "mon\x00 09:00-10:00"}, "weekly", "Line 1 (mon\ufffd 09:00-10:00)"),
    ],
)
def test_a_bad_value_is_refused_next_to_its_field(browser_client, number, changes, field, sentence):
    response = browser_client.post(page_of(number), SET | changes)

    assert response.status_code == 400
    page = response.content.decode()
    assert f'id="id_{field}_errors"' in page, page
    assert sentence in page
    assert hours_of(number) is None


def test_removing_the_hours_opens_the_number_at_all_times(browser_client, number):
    browser_client.post(page_of(number), SET | {"doNotDisturb": "on"})
    assert "Remove the opening hours" in browser_client.get(page_of(number)).content.decode()

    response = browser_client.post(f"{page_of(number)}/clear", follow=True)

    assert response.redirect_chain == [(page_of(number), 302)]
    assert "takes calls at all times again" in response.content.decode()
    assert hours_of(number) is None


def test_asking_for_the_clear_address_changes_nothing(browser_client, number):
    browser_client.post(page_of(number), SET)

    response = browser_client.get(f"{page_of(number)}/clear")

    assert response.status_code == 302 and response.url == page_of(number)
    assert hours_of(number) is not None


@pytest.mark.parametrize("path", ["hours", "hours/clear"])
@pytest.mark.parametrize("method", ["get", "post"])
def test_another_users_number_is_the_not_found_page(browser_client, other_user, path, method):
    theirs = NumberFactory(owner=other_user)
    OpeningHours.objects.create(number=theirs, time_zone="UTC", do_not_disturb=True)

    response = getattr(browser_client, method)(f"/numbers/{theirs.pk}/{path}", SET)

    assert response.status_code == 404 and "Not found" in response.content.decode()
    assert hours_of(theirs).do_not_disturb is True


@pytest.mark.parametrize("path", ["hours", "hours/clear"])
def test_the_hours_forms_enforce_csrf(csrf_client, number, path):
    OpeningHours.objects.create(number=number, time_zone="UTC", do_not_disturb=True)

    response = csrf_client.post(f"/numbers/{number.pk}/{path}", SET)

    assert response.status_code == 403
    assert hours_of(number).do_not_disturb is True


@pytest.mark.parametrize("path", ["hours", "hours/clear"])
def test_a_signed_out_browser_is_sent_to_log_in(number, path):
    response = Client().get(f"/numbers/{number.pk}/{path}")

    assert response.status_code == 302
    assert response.url == f"/login?next=/numbers/{number.pk}/{path}"


def test_saving_too_often_is_refused_with_retry_after(browser_client, number, settings):
    settings.RATE_LIMIT_FORWARDING_PER_USER = "1/h"
    assert browser_client.post(page_of(number), SET).status_code == 302

    response = browser_client.post(page_of(number), SET | {"doNotDisturb": "on"})

    assert response.status_code == 429
    assert int(response["Retry-After"]) >= 1
    assert 'role="alert"' in response.content.decode()
    assert hours_of(number).do_not_disturb is False
