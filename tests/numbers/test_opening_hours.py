"""open_at (virtual_numbers.hours): whether a number takes calls at an instant, read in its
time zone with zoneinfo. Pure, on a fake clock: every instant is given, in UTC, so the local
time each stands for is worked out by hand in the test's comments, across both of the year's
daylight-saving changes in Europe/London (the last Sundays of March and October) and one
of America/New_York's."""

from datetime import UTC, date, datetime, timedelta

import pytest

from virtual_numbers.hours import Hours, Window, open_at, overlaps, time_problem

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri")
SHOP = Hours(time_zone="Europe/London", weekly=(Window(WEEKDAYS, "09:00", "17:30"),))


def utc(*parts) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def test_no_hours_means_always_open():
    assert open_at(None, utc(2026, 12, 25, 3, 0)) is True


def test_hours_without_windows_are_open_all_day_but_on_closed_dates():
    hours = Hours(time_zone="Europe/London", closed_dates=frozenset({date(2026, 12, 25)}))

    assert open_at(hours, utc(2026, 12, 24, 23, 59)) is True
    assert open_at(hours, utc(2026, 12, 25, 0, 0)) is False
    assert open_at(hours, utc(2026, 12, 25, 23, 59)) is False
    assert open_at(hours, utc(2026, 12, 26, 0, 0)) is True


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        (utc(2026, 1, 12, 8, 59), False),  # Monday 08:59 GMT
        (utc(2026, 1, 12, 9, 0), True),  # opens on the minute
        (utc(2026, 1, 12, 17, 29, 59), True),
        (utc(2026, 1, 12, 17, 30), False),  # the end is not in the window
        (utc(2026, 1, 16, 12, 0), True),  # Friday
        (utc(2026, 1, 17, 12, 0), False),  # Saturday
        (utc(2026, 1, 18, 12, 0), False),  # Sunday
    ],
)
def test_a_weekly_window_opens_at_its_start_and_closes_at_its_end(when, expected):
    assert open_at(SHOP, when) is expected


def test_the_window_is_local_time_on_both_sides_of_the_march_change():
    # Europe/London goes from GMT to BST at 01:00 UTC on Sunday 29 March 2026.
    before = utc(2026, 3, 27, 8, 30)  # Friday 08:30 GMT: not yet open
    after = utc(2026, 3, 30, 8, 30)  # Monday 09:30 BST: open
    assert open_at(SHOP, before) is False
    assert open_at(SHOP, after) is True
    # It closes at 17:30 local: 17:29 GMT before, 16:29 UTC (17:29 BST) after.
    assert open_at(SHOP, utc(2026, 3, 27, 17, 29)) is True
    assert open_at(SHOP, utc(2026, 3, 30, 16, 29)) is True
    assert open_at(SHOP, utc(2026, 3, 30, 16, 30)) is False


def test_the_window_is_local_time_on_both_sides_of_the_october_change():
    # Europe/London goes from BST back to GMT at 01:00 UTC on Sunday 25 October 2026.
    assert open_at(SHOP, utc(2026, 10, 23, 8, 0)) is True  # Friday 09:00 BST
    assert open_at(SHOP, utc(2026, 10, 26, 8, 0)) is False  # Monday 08:00 GMT
    assert open_at(SHOP, utc(2026, 10, 26, 9, 0)) is True  # Monday 09:00 GMT
    assert open_at(SHOP, utc(2026, 10, 23, 16, 30)) is False  # Friday 17:30 BST
    assert open_at(SHOP, utc(2026, 10, 26, 17, 29)) is True  # Monday 17:29 GMT


def test_a_window_in_the_hour_march_skips_is_never_open_that_night():
    night = Hours(time_zone="Europe/London", weekly=(Window(("sun",), "01:00", "02:00"),))
    # On 29 March 2026 London's clocks go from 00:59:59 GMT to 02:00 BST: 01:xx never happens.
    minute = utc(2026, 3, 29, 0, 0)
    while minute < utc(2026, 3, 29, 3, 0):
        assert open_at(night, minute) is False, minute
        minute += timedelta(minutes=1)
    assert open_at(night, utc(2026, 4, 5, 0, 30)) is True  # a week later: 01:30 BST


def test_a_window_in_the_hour_october_repeats_is_open_both_times():
    night = Hours(time_zone="Europe/London", weekly=(Window(("sun",), "01:00", "02:00"),))
    # On 25 October 2026 01:00-02:00 local happens twice: 00:00-01:00 UTC (BST), then
    # 01:00-02:00 UTC (GMT); 02:00 GMT is 02:00 UTC, closed.
    assert open_at(night, utc(2026, 10, 24, 23, 59)) is False  # 00:59 BST
    assert open_at(night, utc(2026, 10, 25, 0, 30)) is True  # 01:30 BST
    assert open_at(night, utc(2026, 10, 25, 1, 30)) is True  # 01:30 GMT
    assert open_at(night, utc(2026, 10, 25, 2, 0)) is False  # 02:00 GMT


def test_another_zone_changes_on_its_own_date():
    # America/New_York goes to EDT on 8 March 2026, three weeks before London.
    office = Hours(time_zone="America/New_York", weekly=(Window(WEEKDAYS, "09:00", "17:00"),))
    assert open_at(office, utc(2026, 3, 6, 13, 30)) is False  # Friday 08:30 EST
    assert open_at(office, utc(2026, 3, 9, 13, 30)) is True  # Monday 09:30 EDT


def test_closed_dates_are_local_dates():
    hours = Hours(
        time_zone="Pacific/Auckland",
        weekly=(Window(("fri",), "00:00", "24:00"),),
        closed_dates=frozenset({date(2026, 12, 25)}),
    )
    # Friday 25 December 2026 in Auckland (NZDT, UTC+13) is 11:00 UTC on the 24th.
    assert open_at(hours, utc(2026, 12, 24, 11, 0)) is False
    assert open_at(hours, utc(2026, 12, 24, 10, 59)) is False  # Thursday there
    # The next Friday is open all day, up to its last minute (24:00 is the end of the day).
    assert open_at(hours, utc(2026, 12, 31, 11, 0)) is True
    assert open_at(hours, utc(2027, 1, 1, 10, 59)) is True
    assert open_at(hours, utc(2027, 1, 1, 11, 0)) is False  # Saturday there


def test_a_night_is_two_windows_either_side_of_midnight():
    night = Hours(
        time_zone="UTC",
        weekly=(Window(("fri",), "22:00", "24:00"), Window(("sat",), "00:00", "02:00")),
    )
    assert open_at(night, utc(2026, 1, 16, 21, 59)) is False
    assert open_at(night, utc(2026, 1, 16, 23, 59)) is True
    assert open_at(night, utc(2026, 1, 17, 0, 0)) is True
    assert open_at(night, utc(2026, 1, 17, 1, 59)) is True
    assert open_at(night, utc(2026, 1, 17, 2, 0)) is False


def test_do_not_disturb_closes_the_number_whatever_the_hours():
    always = Hours(time_zone="UTC", do_not_disturb=True)
    assert open_at(always, utc(2026, 1, 12, 12, 0)) is False
    dnd_shop = Hours(time_zone="Europe/London", weekly=SHOP.weekly, do_not_disturb=True)
    assert open_at(dnd_shop, utc(2026, 1, 12, 12, 0)) is False


def test_an_instant_without_a_zone_is_refused():
    with pytest.raises(ValueError, match="aware"):
        open_at(SHOP, datetime(2026, 1, 12, 12, 0))  # noqa: DTZ001 - the point of the test


@pytest.mark.parametrize(
    ("value", "end", "ok"),
    [
        ("00:00", False, True),
        ("23:59", False, True),
        ("24:00", False, False),
        ("24:00", True, True),
        ("24:01", True, False),
        ("9:00", False, False),
        ("09:60", False, False),
        ("09.00", False, False),
        ("0900", False, False),
        ("09:00:00", False, False),
        ("\u0660\u0669:00", False, False),  # Arabic-Indic digits
        ("", False, False),
    ],
)
def test_times_are_hh_mm(value, end, ok):
    assert (time_problem(value, end=end) is None) is ok


def test_windows_overlap_only_on_a_day_they_share():
    windows = [
        Window(("mon", "tue"), "09:00", "12:00"),
        Window(("wed",), "10:00", "11:00"),  # another day
        Window(("tue",), "12:00", "14:00"),  # touches, does not overlap
        Window(("fri", "tue"), "11:59", "12:30"),
    ]
    assert overlaps(windows) == {3: "Overlaps window 0 (09:00-12:00) on tue."}
