import pytest

from tests.factories import BlockedCallerFactory, NumberFactory
from virtual_numbers.models import BlockedCaller


@pytest.fixture
def number(user):
    return NumberFactory(owner=user)


def url(number):
    return f"/api/numbers/{number.pk}/blocked"


@pytest.mark.django_db
def test_blocking_a_caller_lists_it_and_is_idempotent(client_jwt, number):
    first = client_jwt.post(url(number), {"caller_num": "+447700900666"}, format="json")
    again = client_jwt.post(url(number), {"caller_num": "+447700900666"}, format="json")
    listed = client_jwt.get(url(number))

    assert first.status_code == 201
    assert set(first.json()) == {"caller_num", "created_at"}
    assert again.status_code == 200
    assert [e["caller_num"] for e in listed.json()["blocked"]] == ["+447700900666"]


@pytest.mark.django_db
def test_a_blocked_callers_calls_are_recorded_as_blocked_in_history(client_jwt, number):
    from history.services import record_inbound_call

    client_jwt.post(url(number), {"caller_num": "+447700900666"}, format="json")
    record_inbound_call(number=number, caller_num="+447700900666", status="answered", duration=30)

    record = client_jwt.get("/api/history").json()["history"][0]
    assert (record["status"], record["duration"]) == ("blocked", 0)


@pytest.mark.django_db
def test_unblocking_removes_the_entry(client_jwt, number):
    client_jwt.post(url(number), {"caller_num": "+447700900666"}, format="json")

    response = client_jwt.delete(url(number), {"caller_num": "+447700900666"}, format="json")
    missing = client_jwt.delete(url(number), {"caller_num": "+447700900666"}, format="json")

    assert response.json() == {"success": True}
    assert missing.status_code == 404
    assert client_jwt.get(url(number)).json() == {"blocked": []}


@pytest.mark.django_db
@pytest.mark.parametrize("caller", ["07700900666", "+44", "abc", "", 447700900666])
def test_a_caller_that_is_not_e164_is_refused(client_jwt, number, caller):
    response = client_jwt.post(url(number), {"caller_num": caller}, format="json")

    assert response.status_code == 400
    assert "caller_num" in response.json()["fields"]
    assert not BlockedCaller.objects.exists()


@pytest.mark.django_db
def test_an_outsider_gets_404_on_the_blocklist_and_changes_nothing(outsider, number):
    BlockedCallerFactory(number=number, caller_num="+447700900666")

    for response in (
        outsider.get(url(number)),
        outsider.post(url(number), {"caller_num": "+447700900777"}, format="json"),
        outsider.delete(url(number), {"caller_num": "+447700900666"}, format="json"),
    ):
        assert response.status_code == 404
    assert list(BlockedCaller.objects.values_list("caller_num", flat=True)) == ["+447700900666"]
