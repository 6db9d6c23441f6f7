"""A user with something of everything Relay keeps of a user, for the export and deletion
tests: a number with forwarding and a blocklist, a voicemail message, a call with a
recording, a webhook, a Matrix id and a refused call."""

from dataclasses import dataclass

from django.core.files.base import ContentFile

from accounts import apikeys
from accounts.models import DialRefusal, User
from calls.models import Call, Recording
from core.recordings import recordings_storage
from history.records import Record
from history.services import record_inbound_call
from tests.factories import BlockedCallerFactory, CallFactory, NumberFactory, wav_bytes
from virtual_numbers.models import Number
from webhooks.models import WebhookEndpoint

WEBHOOK_SECRET = "whsec_c2VjcmV0LW9mLXRoZS13ZWJob29rLW5ldmVyLWV4cG9ydGVk"


@dataclass
class Holdings:
    user: User
    number: Number
    voicemail: Record
    audio: bytes
    call: Call
    webhook: WebhookEndpoint
    recording: Recording


def holdings_of(user: User, *, seconds: float = 1.0, call_id: str = "call-kept") -> Holdings:
    """Give `user` one of everything (see the module), and return it."""
    User.objects.filter(pk=user.pk).update(matrix_id="@owner:matrix.example.com")
    number = NumberFactory(owner=user, alias="Office", greeting="Leave a message")
    Number.objects.filter(pk=number.pk).update(
        ring_entries=[{"phone": "+447700900001"}], forward_ring_seconds=25, forward_screening=True
    )
    BlockedCallerFactory(number=number, caller_num="+447700900666")
    audio = wav_bytes(seconds)
    name = recordings_storage().save(f"msg-{user.pk}.wav", ContentFile(audio))
    voicemail = record_inbound_call(
        number=number,
        caller_num="+447700900123",
        status="answered",
        duration=9,
        sip_call_id=f"{user.pk}@test",
        recording=name,
        recording_seconds=seconds,
    )
    call = CallFactory(owner=user, call_id=call_id, message="Hello from the test")
    recorded = recordings_storage().save(f"rec-{user.pk}.wav", ContentFile(audio))
    recording = Recording.objects.create(call=call, name=recorded, seconds=seconds)
    webhook = WebhookEndpoint.objects.create(
        user=user,
        url="https://hooks.example.com/relay",
        events=["call_status"],
        secret_encrypted=apikeys.encrypt(WEBHOOK_SECRET),
        secret_id="msg_secret_id_1",
    )
    DialRefusal.objects.create(user=user, kind="destination", reason="premium_rate")
    user.refresh_from_db()
    return Holdings(user, number, voicemail, audio, call, webhook, recording)
