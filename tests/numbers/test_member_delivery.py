"""A shared number's calls beyond its members' sockets (issue 57): to a member's own webhook
(a real loopback receiver, signed with the member's secret) and Matrix room (the outbox rows
the writer leaves) when they turned it on for the number, and nowhere for anyone else: the
owner's as before, a member who did not turn it on, an outsider, a member removed."""

from __future__ import annotations

import uuid

import pytest
from standardwebhooks import Webhook

from calls.models import Recording
from history import transcription
from history.services import call_record_recording_delete, record_inbound_call
from history.tasks import transcription_run
from history.transcription import Transcript, register_engine
from matrix.models import MatrixMessage, MatrixRoom, MessageStatus
from matrix.tasks import message_attempt
from telephony.services import inbound_call_open
from tests.conftest import drain_tasks
from tests.factories import NumberFactory, NumberMemberFactory, UserFactory, voicemail_on
from tests.numbers.test_members import client_of, members_url
from tests.webhooks.test_webhooks import Receiver, set_webhook

pytestmark = pytest.mark.django_db(transaction=True)

CALLER = "+447700900123"
EVERYTHING = ["incoming_call", "call_record", "call_record.transcribed", "call_status"]


@pytest.fixture
def receivers():
    made = {name: Receiver() for name in ("owner", "member", "others")}
    yield made
    for receiver in made.values():
        receiver.close()


@pytest.fixture
def transcribed(settings, monkeypatch):
    """Transcription by an engine that always hears the same words."""

    class Fixed:
        def transcribe(self, wav: bytes, *, hints: str | None = None) -> Transcript:
            return Transcript(text="call me back", confidence=1.0)

    monkeypatch.setattr(transcription, "ENGINES", dict(transcription.ENGINES))
    monkeypatch.setattr(transcription, "_made", {})
    register_engine("fixed", Fixed)
    settings.TRANSCRIBE_ENGINE = "fixed"


@pytest.fixture
def shop(settings):
    """A number, its member who turned their webhook on, one who did not, and an outsider."""
    settings.WEBHOOK_ALLOW_PRIVATE = True  # the receivers are on loopback
    number = NumberFactory(alias="Shop")
    heard = NumberMemberFactory(number=number, notify_webhook=True)
    quiet = NumberMemberFactory(number=number)
    return number, heard.user, quiet.user, UserFactory()


def webhook_of(user, receiver, events=EVERYTHING) -> str:
    answer = set_webhook(client_of(user), receiver.url, events=events)
    assert answer.status_code in (200, 201), answer.content
    return answer.json()["secret"]


def a_call(number):
    call = inbound_call_open(
        sip_call_id=f"{uuid.uuid4()}@test",
        number=number,
        caller_num=CALLER,
        ringing=True,
    )
    record = record_inbound_call(number=number, caller_num=CALLER, status="missed", duration=0)
    return call, record


def test_a_member_who_turned_their_webhook_on_gets_the_numbers_calls_signed_as_theirs(
    shop, receivers
):
    number, heard, quiet, outsider = shop
    owner_secret = webhook_of(number.owner, receivers["owner"])
    member_secret = webhook_of(heard, receivers["member"])
    webhook_of(quiet, receivers["others"])
    webhook_of(outsider, receivers["others"])

    call, record = a_call(number)
    drain_tasks()

    member_events = receivers["member"].events()
    assert [(e["type"], e.get("call") or e.get("id")) for e in member_events] == [
        ("incoming_call", str(call.pk)),
        ("call_record", str(record.id)),
    ]
    assert member_events[1]["alias"] == "Shop"
    for headers, body in receivers["member"].received:
        assert Webhook(member_secret).verify(body, headers)["type"] in EVERYTHING
    # the owner's webhook gets the call as before, once, signed with the owner's secret
    assert [e["type"] for e in receivers["owner"].events()] == ["incoming_call", "call_record"]
    for headers, body in receivers["owner"].received:
        Webhook(owner_secret).verify(body, headers)
    # a member who did not turn it on, and someone who is no member, hear nothing
    assert receivers["others"].received == []


def test_a_members_voicemail_and_its_transcript_reach_their_webhook(shop, receivers, transcribed):
    number, heard, _quiet, _outsider = shop
    webhook_of(heard, receivers["member"], events=["call_record"])  # the transcript implied

    record = voicemail_on(number)
    drain_tasks()

    kinds = [(e["type"], e["id"]) for e in receivers["member"].events()]
    assert kinds == [("call_record", str(record.pk)), ("call_record.transcribed", str(record.pk))]
    assert receivers["member"].events()[1]["transcript"] == "call me back"


def test_a_members_webhook_takes_only_the_events_it_names(shop, receivers):
    number, heard, _quiet, _outsider = shop
    webhook_of(heard, receivers["member"], events=["call_status"])

    a_call(number)
    drain_tasks()

    assert receivers["member"].received == []


def test_a_member_who_turns_their_webhook_off_or_is_removed_hears_nothing_more(shop, receivers):
    number, heard, quiet, _outsider = shop
    webhook_of(heard, receivers["member"])
    webhook_of(quiet, receivers["others"])
    client_of(quiet).put(f"/api/numbers/shared/{number.pk}", {"webhook": True}, format="json")
    quiet_id = str(number.members.get(user=quiet).pk)
    # the quiet member turned it on, then the owner removed them; the other turns it off
    removed = client_of(number.owner).delete(members_url(number, quiet_id))
    assert removed.status_code == 200
    switched = client_of(heard).put(
        f"/api/numbers/shared/{number.pk}", {"webhook": False}, format="json"
    )
    assert switched.json()["webhook"] is False

    a_call(number)
    drain_tasks()

    assert receivers["member"].received == []
    assert receivers["others"].received == []


# --- Matrix, through the outbox rows its writer leaves -----------------------------------
@pytest.fixture
def rooms(settings, shop):
    """Matrix on, and a joined room for the owner and both members."""
    settings.MATRIX_ENABLED = True
    number, heard, quiet, outsider = shop
    return {
        user: MatrixRoom.objects.create(
            user=user,
            matrix_id=f"@u{index}:localhost",
            room_id=f"!r{index}:localhost",
            status="joined",
        )
        for index, user in enumerate((number.owner, heard, quiet, outsider))
    }


def test_a_member_who_turned_matrix_on_gets_a_notice_in_their_own_room(shop, rooms):
    number, heard, quiet, outsider = shop
    heard.matrix_inbound = False  # their account's switch is for their own numbers
    heard.save(update_fields=["matrix_inbound"])
    client_of(heard).put(f"/api/numbers/shared/{number.pk}", {"matrix": True}, format="json")

    _call, record = a_call(number)

    notices = {row.room.user_id: row for row in MatrixMessage.objects.select_related("room")}
    assert set(notices) == {number.owner.pk, heard.pk}
    assert notices[number.owner.pk].key == f"inbound:{record.id}"  # the owner's as before
    assert notices[heard.pk].room == rooms[heard]
    assert notices[heard.pk].body == notices[number.owner.pk].body
    assert "Shop" in notices[heard.pk].body


def test_a_members_transcript_notice_follows_and_goes_with_a_deleted_message(
    shop, rooms, transcribed
):
    number, heard, _quiet, _outsider = shop
    client_of(heard).put(f"/api/numbers/shared/{number.pk}", {"matrix": True}, format="json")
    record = voicemail_on(number)

    transcription_run(recording_id=Recording.objects.get(call_id=record.pk).pk)
    mine = MatrixMessage.objects.filter(room=rooms[heard]).order_by("id")
    assert [row.kind for row in mine] == ["inbound", "inbound"]
    transcript = mine[1]
    assert "call me back" in transcript.body
    # the notice before it left; the message deleted: the member's copy of the transcript is
    # dropped by the worker, never sent, and keeps no copy of the words
    MatrixMessage.objects.filter(pk=mine[0].pk).update(status=MessageStatus.SENT)
    call_record_recording_delete(record=record)

    message_attempt(message_id=transcript.pk)

    transcript.refresh_from_db()
    assert transcript.status == MessageStatus.DROPPED
    assert transcript.body == ""


def test_no_notice_for_a_member_who_did_not_turn_matrix_on_nor_for_one_removed(shop, rooms):
    number, heard, quiet, _outsider = shop
    client_of(heard).put(f"/api/numbers/shared/{number.pk}", {"matrix": True}, format="json")
    number.members.filter(user=heard).delete()

    a_call(number)

    assert {row.room.user_id for row in MatrixMessage.objects.select_related("room")} == {
        number.owner.pk
    }
