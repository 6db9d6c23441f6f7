from datetime import timedelta

import pytest
from django.utils import timezone

from tests.factories import CallRecordFactory, NumberFactory


@pytest.fixture
def numbers(user):
    return [NumberFactory(owner=user, alias="Office"), NumberFactory(owner=user, alias="Home")]


@pytest.fixture
def records(numbers):
    """Ten records, one a minute apart, newest first in this list; statuses cycle."""
    now = timezone.now()
    statuses = ["answered", "missed", "blocked"]
    return [
        CallRecordFactory(
            number=numbers[i % 2],
            status=statuses[i % 3],
            created_at=now - timedelta(minutes=i),
            duration=10 * i,
        )
        for i in range(10)
    ]


def ids(body):
    return [r["id"] for r in body["history"]]


@pytest.mark.django_db
def test_history_lists_records_newest_first_with_joined_fields(client_jwt, records, numbers):
    response = client_jwt.get("/api/history")

    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"history", "total", "limit", "offset", "nextCursor"}
    assert (body["total"], body["limit"], body["offset"], body["nextCursor"]) == (10, 50, 0, None)
    assert ids(body) == [str(r.pk) for r in records]
    first = body["history"][0]
    assert set(first) == {
        "ring_entry",
        "transferred_to",
        "answered_member_id",
        "answered_member_email",
        "id",
        "number_id",
        "caller_num",
        "status",
        "duration",
        "created_at",
        "number",
        "alias",
        "recording_url",
        "recording_seconds",
        "heard",
        "answered_by",
        "forwarded_to",
        "transcript",
        "transcript_confidence",
        "transcript_status",
    }
    # No message, so no transcript either.
    assert (first["transcript"], first["transcript_confidence"], first["transcript_status"]) == (
        "",
        None,
        None,
    )
    assert (first["recording_url"], first["recording_seconds"], first["heard"]) == (
        None,
        None,
        False,
    )
    assert (first["answered_by"], first["forwarded_to"]) == (None, None)
    assert first["number_id"] == str(numbers[0].pk)
    assert first["number"] == numbers[0].number
    assert first["alias"] == "Office"
    assert first["caller_num"] == "+447700900123"
    assert first["created_at"] == int(records[0].created_at.timestamp() * 1000)


@pytest.mark.django_db
@pytest.mark.parametrize("status", ["answered", "missed", "blocked"])
def test_history_filters_by_status(client_jwt, records, status):
    body = client_jwt.get("/api/history", {"status": status}).json()

    expected = [str(r.pk) for r in records if r.status == status]
    assert ids(body) == expected
    assert body["total"] == len(expected)


@pytest.mark.django_db
def test_status_all_is_everything(client_jwt, records):
    assert client_jwt.get("/api/history", {"status": "all"}).json()["total"] == 10


@pytest.mark.django_db
def test_history_filters_by_number(client_jwt, records, numbers):
    body = client_jwt.get("/api/history", {"number_id": str(numbers[1].pk)}).json()

    assert ids(body) == [str(r.pk) for r in records if r.number == numbers[1]]
    assert body["total"] == 5


@pytest.mark.django_db
def test_paging_walks_the_records_in_order(client_jwt, records):
    pages = [client_jwt.get("/api/history", {"limit": 4, "offset": o}).json() for o in (0, 4, 8)]

    assert [ids(p) for p in pages] == [
        [str(r.pk) for r in records[0:4]],
        [str(r.pk) for r in records[4:8]],
        [str(r.pk) for r in records[8:10]],
    ]
    assert all(p["total"] == 10 and p["limit"] == 4 for p in pages)


@pytest.mark.django_db
def test_an_offset_past_the_end_is_an_empty_page_with_the_total(client_jwt, records):
    body = client_jwt.get("/api/history", {"offset": 500}).json()

    assert body == {"history": [], "total": 10, "limit": 50, "offset": 500, "nextCursor": None}


@pytest.mark.django_db
def test_a_large_limit_is_clamped_and_echoed(client_jwt, records):
    body = client_jwt.get("/api/history", {"limit": 100000}).json()

    assert body["limit"] == 200
    assert len(body["history"]) == 10


@pytest.mark.django_db
def test_ties_on_created_at_are_broken_by_id(client_jwt, numbers):
    moment = timezone.now()
    tied = [CallRecordFactory(number=numbers[0], created_at=moment) for _ in range(6)]

    body = client_jwt.get("/api/history").json()

    assert ids(body) == sorted((str(r.pk) for r in tied), reverse=True)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"status": "rejected"}, "status"),
        ({"status": ""}, "status"),
        ({"limit": "0"}, "limit"),
        ({"limit": "-1"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"limit": "1.5"}, "limit"),
        ({"limit": ""}, "limit"),
        ({"offset": "-1"}, "offset"),
        ({"offset": "x"}, "offset"),
        ({"offset": "٣"}, "offset"),
        ({"number_id": "nope"}, "number_id"),
    ],
)
def test_bad_parameters_are_400_naming_the_parameter(client_jwt, params, field):
    response = client_jwt.get("/api/history", params)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert field in response.json()["fields"]


@pytest.mark.django_db
def test_an_outsider_sees_none_of_another_users_records(outsider, other_user, records):
    CallRecordFactory(number=NumberFactory(owner=other_user))

    body = outsider.get("/api/history").json()

    assert body["total"] == 1
    assert not {str(r.pk) for r in records} & set(ids(body))


@pytest.mark.django_db
def test_an_outsider_cannot_filter_by_another_users_number(outsider, records, numbers):
    response = outsider.get("/api/history", {"number_id": str(numbers[0].pk)})

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


@pytest.mark.django_db
def test_deleting_a_number_removes_its_records(client_jwt, records, numbers):
    client_jwt.delete(f"/api/numbers/{numbers[0].pk}")

    body = client_jwt.get("/api/history").json()

    assert body["total"] == 5
    assert {r["number_id"] for r in body["history"]} == {str(numbers[1].pk)}


@pytest.mark.django_db
def test_history_accepts_an_api_key_and_refuses_no_credentials(user, api_client, records):
    from tests.conftest import api_key_client

    assert api_key_client(user.api_key).get("/api/history").json()["total"] == 10
    assert api_client.get("/api/history").status_code == 401


@pytest.mark.django_db
def test_the_total_sums_every_filter_together(client_jwt, records, numbers, outsider):
    # Each combination of filters is a statement of its own (compiled once per process).
    for status in ("answered", "missed", "blocked", "all"):
        for number in numbers:
            query = {"status": status, "number_id": str(number.pk)}
            body = client_jwt.get("/api/history", query).json()
            expected = [
                str(r.pk) for r in records if r.number == number and status in ("all", r.status)
            ]
            assert (ids(body), body["total"]) == (expected, len(expected)), query
    assert outsider.get("/api/history").json()["total"] == 0
