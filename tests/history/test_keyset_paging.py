"""`before=<nextCursor>`: keyset paging of the history (and of the calls, which share it)."""

import base64
import struct
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from core.pagination import Cursor
from history.services import record_inbound_call
from tests.factories import CallFactory, NumberFactory
from tests.records import record_get, records_where

pytestmark = pytest.mark.django_db

STATUSES = ["answered", "missed", "blocked"]


@pytest.fixture
def numbers(user):
    return [NumberFactory(owner=user), NumberFactory(owner=user)]


@pytest.fixture
def recorded(numbers):
    """27 records in 9 instants of 3 (ties on created_at), on two numbers, statuses mixed."""
    start = timezone.now() - timedelta(hours=1)
    for i in range(27):
        record_inbound_call(
            number=numbers[i % 2],
            caller_num="+447700900123",
            status=STATUSES[i % 3],
            duration=0,
            at=start - timedelta(minutes=i // 3),
        )
    return numbers


def newest_first(rows) -> list[str]:
    return [str(r.pk) for r in sorted(rows, key=lambda r: (r.created_at, r.pk), reverse=True)]


def walk(client, path: str, key: str, params: dict, *, between=None) -> tuple[list, list]:
    """Every page from the first to the one whose nextCursor is null; `between(n)` runs
    after page n. Returns the ids in order and the pages' bodies."""
    bodies = [client.get(path, {**params}).json()]
    while bodies[-1]["nextCursor"] is not None:
        if between:
            between(len(bodies))
        bodies.append(client.get(path, {**params, "before": bodies[-1]["nextCursor"]}).json())
    ids = [row["id" if key == "history" else "callId"] for b in bodies for row in b[key]]
    return ids, bodies


@pytest.mark.parametrize("limit", [1, 4, 5, 27])
def test_the_cursor_pages_through_every_record_once_newest_first(client_jwt, recorded, limit):
    ids, bodies = walk(client_jwt, "/api/history", "history", {"limit": limit})

    assert ids == newest_first(records_where())
    assert all(b["total"] == 27 and b["offset"] == 0 for b in bodies)
    assert all(len(b["history"]) == limit for b in bodies[:-1])
    assert len(bodies) == -(-27 // limit)


def test_records_arriving_between_pages_neither_repeat_skip_nor_show_up_later(client_jwt, recorded):
    before = newest_first(records_where())
    moment = timezone.now()

    def new_calls(page: int):
        for n in range(3):  # newer than everything listed, two of them tied
            record_inbound_call(
                number=recorded[n % 2],
                caller_num="+447700900124",
                status="missed",
                duration=0,
                at=moment + timedelta(seconds=page + (n > 0)),
            )

    ids, bodies = walk(client_jwt, "/api/history", "history", {"limit": 4}, between=new_calls)

    assert ids == before
    assert [b["total"] for b in bodies] == [27 + 3 * n for n in range(len(bodies))]


@pytest.mark.parametrize(
    "filters",
    [{"status": "missed"}, {"number": 1}, {"status": "blocked", "number": 0}],
)
def test_the_cursor_keeps_to_the_filters(client_jwt, recorded, filters):
    where, params = {}, {"limit": 2}
    if "status" in filters:
        where["status"] = params["status"] = filters["status"]
    if "number" in filters:
        number = recorded[filters["number"]]
        where["number"], params["number_id"] = number, str(number.pk)
    rows = records_where(**where)

    ids, bodies = walk(client_jwt, "/api/history", "history", params)

    assert ids == newest_first(rows)
    assert {b["total"] for b in bodies} == {len(rows)}


def test_every_page_says_where_the_next_one_starts_and_the_last_says_null(client_jwt, recorded):
    ordered = sorted(records_where(), key=lambda r: (r.created_at, r.pk), reverse=True)

    first = client_jwt.get("/api/history", {"limit": 10}).json()
    by_offset = client_jwt.get("/api/history", {"limit": 10, "offset": 10}).json()
    last = client_jwt.get("/api/history", {"limit": 10, "offset": 20}).json()

    assert first["nextCursor"] == Cursor.after(ordered[9]).encode()
    assert by_offset["nextCursor"] == Cursor.after(ordered[19]).encode()
    assert last["nextCursor"] is None and len(last["history"]) == 7
    assert client_jwt.get("/api/history", {"limit": 27}).json()["nextCursor"] is None


def test_an_offset_with_a_cursor_skips_rows_from_the_cursor_on(client_jwt, recorded):
    ordered = newest_first(records_where())
    cursor = client_jwt.get("/api/history", {"limit": 5}).json()["nextCursor"]

    body = client_jwt.get("/api/history", {"limit": 5, "offset": 3, "before": cursor}).json()

    assert [r["id"] for r in body["history"]] == ordered[8:13]
    assert (body["offset"], body["total"]) == (3, 27)
    assert body["nextCursor"] == Cursor.after(record_get(pk=ordered[12])).encode()


def raw_cursor(micros: int, ident: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(struct.pack(">q", micros) + ident.bytes).decode()


def test_a_cursor_is_32_url_safe_characters_and_round_trips():
    cursor = Cursor(created_at=timezone.now(), id=uuid.uuid4())

    text = cursor.encode()

    assert len(text) == 32 and "=" not in text
    assert Cursor.decode(text) == cursor


def test_cursors_past_any_time_a_row_can_hold_are_the_first_and_last_positions(
    client_jwt, recorded
):
    top = raw_cursor(2**63 - 1, uuid.UUID(int=0))
    bottom = raw_cursor(-(2**63), uuid.UUID(int=2**128 - 1))

    everything = client_jwt.get("/api/history", {"before": top, "limit": 200}).json()
    nothing = client_jwt.get("/api/history", {"before": bottom}).json()

    assert len(everything["history"]) == 27
    assert (nothing["history"], nothing["total"], nothing["nextCursor"]) == ([], 27, None)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "abc",
        "A" * 31,
        "A" * 33,
        "A" * 31 + "=",
        "A" * 31 + "+",
        "A" * 31 + "/",
        "A" * 31 + "\x00",
        " " + "A" * 31,
        "A" * 10_000,
        "١" * 32,
    ],
)
def test_a_malformed_cursor_is_400_naming_before(client_jwt, recorded, value):
    response = client_jwt.get("/api/history", {"before": value})

    assert response.status_code == 400
    assert response.json() == {
        "error": "before: Must be the nextCursor of an earlier page.",
        "code": "invalid_request",
        "fields": {"before": ["Must be the nextCursor of an earlier page."]},
    }


@pytest.mark.parametrize("raw", ["%ED%A0%80" * 11, "%FF" * 32, "%00" * 32, "A" * 32 + "%0A"])
def test_a_cursor_of_bytes_that_are_no_text_is_400(client_jwt, raw):
    response = client_jwt.get(f"/api/history?before={raw}")

    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"before"}


def test_the_call_list_pages_by_cursor_too(client_jwt, user):
    moment = timezone.now()
    for i in range(7):  # ties in threes
        CallFactory(owner=user, call_id=f"c{i}", created_at=moment - timedelta(i // 3))
    expected = [c.call_id for c in sorted(user.calls.all(), key=lambda c: (c.created_at, c.pk))][
        ::-1
    ]

    ids, bodies = walk(
        client_jwt,
        "/api/calls",
        "calls",
        {"limit": 2},
        between=lambda n: CallFactory(owner=user, call_id=f"new{n}"),
    )

    assert ids == expected
    assert [b["total"] for b in bodies] == [7, 8, 9, 10]
    assert client_jwt.get("/api/calls", {"before": "nope"}).status_code == 400
