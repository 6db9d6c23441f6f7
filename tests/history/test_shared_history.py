"""A shared number's history (issue 57): its members read it, download and delete its
voicemail; nobody else does, a removed member included, through the API and the console."""

import pytest
from django.test import Client

from accounts.services import session_open
from calls.models import Recording
from tests.conftest import jwt_client
from tests.console.conftest import sign_in
from tests.factories import (
    CallRecordFactory,
    NumberFactory,
    NumberMemberFactory,
    UserFactory,
    voicemail_on,
)
from virtual_numbers.models import NumberMember


@pytest.fixture
def shared(user):
    """`user`'s number with a member, a voicemail and a missed call on it."""
    number = NumberFactory(owner=user)
    membership = NumberMemberFactory(number=number)
    voicemail = voicemail_on(number)
    missed = CallRecordFactory(number=number, status="missed")
    return number, membership, voicemail, missed


def api(user):
    return jwt_client(session_open(user=user).token)


def browser(user) -> Client:
    client = Client()
    sign_in(client, user)
    return client


def api_reads(client, number, record) -> list:
    """(what, status) of each history endpoint of `number` and its voicemail `record`."""
    return [
        ("list", client.get("/api/history", {"number_id": str(number.pk)}).status_code),
        ("download", client.get(f"/api/history/{record.pk}/recording").status_code),
    ]


def console_reads(client, record) -> list:
    return [
        ("record", client.get(f"/history/{record.pk}").status_code),
        ("download", client.get(f"/history/{record.pk}/recording").status_code),
        ("heard", client.post(f"/history/{record.pk}/heard").status_code),
        ("delete page", client.get(f"/history/{record.pk}/delete").status_code),
    ]


@pytest.mark.django_db
def test_a_member_reads_the_shared_numbers_history(shared):
    number, membership, voicemail, missed = shared
    member = api(membership.user)

    page = member.get("/api/history", {"number_id": str(number.pk)}).json()
    missed_only = member.get("/api/history", {"number_id": str(number.pk), "status": "missed"})

    assert [r["id"] for r in page["history"]] == [str(missed.pk), str(voicemail.pk)]
    assert page["total"] == 2
    assert page["history"][1]["recording_url"] == f"/api/history/{voicemail.pk}/recording"
    assert missed_only.json()["total"] == 1
    download = member.get(f"/api/history/{voicemail.pk}/recording")
    assert download.status_code == 200 and download["Content-Type"] == "audio/wav"


@pytest.mark.django_db
def test_a_members_plain_history_lists_only_their_own_numbers(shared):
    _number, membership, _voicemail, _missed = shared
    own = NumberFactory(owner=membership.user)
    mine = CallRecordFactory(number=own)

    page = api(membership.user).get("/api/history").json()

    assert ([r["id"] for r in page["history"]], page["total"]) == ([str(mine.pk)], 1)


@pytest.mark.django_db
def test_a_member_deletes_the_shared_voicemail(shared, client_jwt):
    _number, membership, voicemail, _missed = shared

    response = api(membership.user).delete(f"/api/history/{voicemail.pk}/recording")

    assert response.json() == {"success": True}
    owner_sees = client_jwt.get(f"/api/history/{voicemail.pk}/recording")
    assert owner_sees.status_code == 404
    assert Recording.objects.get(call_id=voicemail.pk).name == ""


@pytest.mark.django_db
def test_the_console_shows_a_member_the_shared_record(shared):
    _number, membership, voicemail, _missed = shared
    member = browser(membership.user)

    assert console_reads(member, voicemail) == [
        ("record", 200),
        ("download", 200),
        ("heard", 302),
        ("delete page", 200),
    ]
    assert Recording.objects.get(call_id=voicemail.pk).heard


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["outsider", "removed member", "invited, not joined"])
def test_nothing_of_the_number_reaches_anyone_else(shared, who):
    number, membership, voicemail, _missed = shared
    if who == "outsider":
        person = UserFactory()
    elif who == "removed member":
        person = membership.user
        NumberMember.objects.filter(pk=membership.pk).delete()
    else:
        person = UserFactory()
        NumberMember.objects.create(
            number=number,
            email=person.email,
            role="manager",
            status="invited",
            token_hash="0" * 64,
            expires_at=membership.joined_at.replace(year=2100),
        )
    client = api(person)

    assert api_reads(client, number, voicemail) == [("list", 404), ("download", 404)]
    assert client.delete(f"/api/history/{voicemail.pk}/recording").status_code == 404
    assert client.get("/api/history").json()["total"] == 0
    assert client.get("/api/numbers/shared").json() == {"numbers": []}
    assert console_reads(browser(person), voicemail) == [
        ("record", 404),
        ("download", 404),
        ("heard", 404),
        ("delete page", 404),
    ]
    kept = Recording.objects.get(call_id=voicemail.pk)
    assert kept.name and not kept.heard
