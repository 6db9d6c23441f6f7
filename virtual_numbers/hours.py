"""A number's opening hours, and the one function that says whether it is open: `open_at`, read
by the API's `openNow` and by the inbound desk (telephony.inbound.routing), which sends a
closed number's calls straight to voicemail.

Pure: no database, no clock. The hours are wall-clock times in the number's IANA time zone,
read with `zoneinfo`, so a window of 09:00-17:30 is 09:00-17:30 local time on both sides of a
daylight-saving change. A window never crosses midnight (end after start, "24:00" the end of
the day); a night is two windows, one each side of it.
"""

from __future__ import annotations

import functools
import zoneinfo
from dataclasses import dataclass, field
from datetime import date, datetime

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")  # datetime.weekday()'s order
WINDOWS_MAX = 50
CLOSED_DATES_MAX = 366
TIME_ZONE_MAX_LENGTH = 64
END_OF_DAY = "24:00"


@functools.cache
def time_zones() -> frozenset[str]:
    """The IANA keys zoneinfo knows here (the system's database, else the tzdata package)."""
    return frozenset(zoneinfo.available_timezones())


def minutes(hhmm: str) -> int:
    """ "09:30" as minutes since midnight; "24:00" is 1440, the end of the day."""
    hours, _, mins = hhmm.partition(":")
    return int(hours) * 60 + int(mins)


@dataclass(frozen=True)
class Window:
    """Open on `days` (names of DAYS) from `start` to `end`, "HH:MM", start before end."""

    days: tuple[str, ...]
    start: str
    end: str

    def covers(self, day: str, minute: int) -> bool:
        return day in self.days and minutes(self.start) <= minute < minutes(self.end)


@dataclass(frozen=True)
class Hours:
    """When a number takes calls. No weekly windows: open every day, all day (but on its
    closed dates, and while do-not-disturb is on). A number with no Hours at all is always
    open."""

    time_zone: str
    weekly: tuple[Window, ...] = ()
    closed_dates: frozenset[date] = field(default_factory=frozenset)
    do_not_disturb: bool = False
    closed_greeting: str = ""  # spoken while closed; empty: the usual greeting
    closed_greeting_recording: str = ""  # recorded, played in place of the spoken one


def open_at(hours: Hours | None, when: datetime) -> bool:
    """Whether a number with `hours` takes calls at the instant `when` (timezone-aware): no
    hours, open; do-not-disturb, closed; else the local date (in `hours.time_zone`) is not
    one of the closed dates, and a weekly window (if there are any) covers the local time.
    ValueError for a naive `when`: an instant must say where it is."""
    if hours is None:
        return True
    if when.tzinfo is None or when.utcoffset() is None:
        raise ValueError("open_at needs a timezone-aware datetime")
    if hours.do_not_disturb:
        return False
    local = when.astimezone(zoneinfo.ZoneInfo(hours.time_zone))
    if local.date() in hours.closed_dates:
        return False
    if not hours.weekly:
        return True
    day, minute = DAYS[local.weekday()], local.hour * 60 + local.minute
    return any(window.covers(day, minute) for window in hours.weekly)


# --- checking what a client sends ------------------------------------------------------------
def time_problem(value: str, *, end: bool) -> str | None:
    """Why `value` is no "HH:MM" of a day (00:00 to 23:59; an end may also be 24:00)."""
    if len(value) == 5 and value[2] == ":" and value[:2].isdecimal() and value[3:].isdecimal():
        if value.isascii() and int(value[:2]) < 24 and int(value[3:]) < 60:
            return None
        if end and value == END_OF_DAY:
            return None
    if end:
        return 'Must be a time "HH:MM" from 00:01 to 24:00 (24:00: the end of the day).'
    return 'Must be a time "HH:MM" from 00:00 to 23:59.'


def overlaps(windows: list[Window]) -> dict[int, str]:
    """The windows that overlap an earlier one on a day they share: {index: why}. Windows
    that only touch (12:00-14:00 and 14:00-17:00) do not overlap."""
    problems: dict[int, str] = {}
    for index, window in enumerate(windows):
        for earlier in range(index):
            other = windows[earlier]
            shared = [day for day in window.days if day in other.days]
            if not shared:
                continue
            if minutes(window.start) < minutes(other.end) and minutes(other.start) < minutes(
                window.end
            ):
                problems[index] = (
                    f"Overlaps window {earlier} ({other.start}-{other.end}) on {shared[0]}."
                )
                break
    return problems
