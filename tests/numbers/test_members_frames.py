"""A shared number's calls on its members' sockets (issue 57): `incoming_call`, `call_record`
and the voicemail's transcript reach every socket of each active member, and no one else;
a member's webhook hears nothing of it until they turn it on (tests/numbers/
test_member_delivery.py)."""

import pytest
from asgiref.sync import sync_to_async

from history import transcription
from history.services import record_inbound_call
from history.transcription import Transcript, register_engine
from telephony.services import inbound_call_open
from tests.conftest import drain_tasks
from tests.factories import NumberFactory, NumberMemberFactory, UserFactory, voicemail_on
from virtual_numbers.models import NumberMember
from webhooks.models import WebhookDelivery
from webhooks.services import webhook_set

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def shared(db):
    number = NumberFactory(alias="Shop")
    return number, NumberMemberFactory(number=number).user


async def test_members_sockets_get_the_numbers_incoming_call_and_call_record(communicator, shared):
    number, member = shared
    owner_ws, _ = await communicator(number.owner)
    member_ws, _ = await communicator(member)
    outsider_ws, _ = await communicator(await sync_to_async(UserFactory)())

    call = await sync_to_async(inbound_call_open)(
        sip_call_id="shared-1@test", number=number, caller_num="+447700900123", ringing=True
    )
    record = await sync_to_async(record_inbound_call)(
        number=number, caller_num="+447700900123", status="missed", duration=0
    )

    for socket in (owner_ws, member_ws):
        ringing = await socket.receive_json_from(timeout=5)
        ended = await socket.receive_json_from(timeout=5)
        assert (ringing["type"], ringing["call"]) == ("incoming_call", str(call.pk))
        assert (ended["type"], ended["id"], ended["alias"]) == (
            "call_record",
            str(record.id),
            "Shop",
        )
    assert await outsider_ws.receive_nothing(timeout=0.3)


async def test_a_removed_member_hears_nothing_more(communicator, shared):
    number, member = shared
    member_ws, _ = await communicator(member)
    await sync_to_async(NumberMember.objects.filter(user=member).delete)()

    await sync_to_async(record_inbound_call)(
        number=number, caller_num="+447700900123", status="missed", duration=0
    )

    assert await member_ws.receive_nothing(timeout=0.3)


def test_a_members_webhook_gets_nothing_of_the_shared_number_unless_turned_on(shared, settings):
    settings.WEBHOOK_ALLOW_PRIVATE = True
    number, member = shared
    for user in (number.owner, member):
        webhook_set(user=user, url="http://127.0.0.1:9/hook", events=["call_record"])

    record_inbound_call(number=number, caller_num="+447700900123", status="missed", duration=0)

    assert WebhookDelivery.objects.filter(user=number.owner).count() == 1
    assert not WebhookDelivery.objects.filter(user=member).exists()


async def test_members_sockets_get_the_voicemails_transcript(
    communicator, shared, settings, monkeypatch
):
    class Fixed:
        def transcribe(self, wav: bytes, *, hints: str | None = None) -> Transcript:
            return Transcript(text="call me back", confidence=1.0)

    monkeypatch.setattr(transcription, "ENGINES", dict(transcription.ENGINES))
    monkeypatch.setattr(transcription, "_made", {})
    register_engine("fixed", Fixed)
    settings.TRANSCRIBE_ENGINE = "fixed"
    number, member = shared
    member_ws, _ = await communicator(member)

    record = await sync_to_async(voicemail_on)(number)
    first = await member_ws.receive_json_from(timeout=5)
    await sync_to_async(drain_tasks)()
    second = await member_ws.receive_json_from(timeout=30)

    assert (first["type"], first["id"]) == ("call_record", str(record.pk))
    assert (second["type"], second["transcript"]) == ("call_record.transcribed", "call me back")
