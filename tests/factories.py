import io
import math
import struct
import wave

import factory
import pyotp
from django.conf import settings
from django.contrib.auth.hashers import make_password
from django.core.files.base import ContentFile
from django.db import transaction
from django.utils import timezone

from accounts import twofactor
from accounts.models import LoginSession, User
from calls.services import call_counters_move
from calls.states import TERMINAL_STATES, CallState
from core.recordings import recordings_storage
from history.services import record_inbound_call

DEFAULT_PASSWORD = "correct-horse-battery-staple"

LONDON_7_NUMBERS = 10_000_000  # +44 20 7000 0000 to +44 20 7999 9999, all valid numbers


# Where the factory's numbers start: past every number the tests write themselves (inventory
# provisioned from +44 20 7946 0000, numbers such as +44 20 7946 0777 and 9999). The sequence
# is one per process and walks on through the run, so a factory number that began in that
# range met a test's own number whenever the tests before it had made just so many: an
# IntegrityError that came and went with the order xdist ran them in.
FACTORY_FIRST = 9_500_000


def inventory_e164(n: int) -> str:
    """The `n`th factory number, distinct for n below 10 million: +44 20 7950 0000 + n,
    wrapping round to +44 20 7000 0000 after 7999 9999."""
    if not 0 <= n < LONDON_7_NUMBERS:
        raise ValueError(f"no distinct factory number left for sequence {n}")
    return f"+44207{(FACTORY_FIRST + n) % LONDON_7_NUMBERS:07d}"


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User
        skip_postgeneration_save = True

    email = factory.Sequence(lambda n: f"user{n}@example.com")
    password = DEFAULT_PASSWORD

    class Params:
        # Limits no load test reaches: staff's per-user limits, far above the free plan's.
        unmetered = factory.Trait(
            calls_per_day=10**6, call_seconds_per_day=10**9, concurrent_calls=10**6
        )

    @classmethod
    def _create(cls, model_class, *args, **kwargs):
        # Through the manager, so every user has a hashed password and an API key.
        return model_class.objects.create_user(*args, **kwargs)


class LoginSessionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = LoginSession

    user = factory.SubFactory(UserFactory)


class InventoryNumberFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "numbers.InventoryNumber"

    e164 = factory.Sequence(inventory_e164)


class NumberFactory(factory.django.DjangoModelFactory):
    """A held number whose PIN is 1234."""

    class Meta:
        model = "numbers.Number"

    owner = factory.SubFactory(UserFactory)
    inventory = factory.SubFactory(InventoryNumberFactory)
    number = factory.LazyAttribute(lambda o: o.inventory.e164)
    alias = factory.Sequence(lambda n: f"line {n}")
    pin_hash = factory.LazyFunction(lambda: make_password("1234"))

    @classmethod
    def _adjust_kwargs(cls, **kwargs):
        # `forward_targets=[...]` as forwarding names them: the ring list they make (each
        # phone an entry, "browser" the owner's own member entry), as PUT .../forwarding does.
        targets = kwargs.pop("forward_targets", None)
        if targets is not None:
            kwargs["ring_entries"] = [
                {"member": str(kwargs["owner"].pk)} if target == "browser" else {"phone": target}
                for target in targets
            ]
        return kwargs


class NumberMemberFactory(factory.django.DjangoModelFactory):
    """A member of a shared number who accepted their invitation (issue 57); the API's
    invitation and acceptance are tested in tests/numbers/test_members.py."""

    class Meta:
        model = "numbers.NumberMember"

    number = factory.SubFactory(NumberFactory)
    user = factory.SubFactory(UserFactory)
    email = factory.LazyAttribute(lambda o: o.user.email)
    role = "member"
    status = "active"
    joined_at = factory.LazyFunction(timezone.now)


class CallRecordFactory:
    """A call record: an ended inbound call of the ledger, written whole as a tool writes it
    (calls.services.inbound_call_written: counted, no mail, no push), with its voicemail when
    `recording` (or `heard`, a transcript) is given. Returns its Record (history.records)."""

    def __new__(cls, *, number=None, caller_num="+447700900123", status="answered", **extra):
        from calls.models import Recording, RecordingKind
        from calls.services import inbound_call_written
        from history.records import ledger_answered_by, record_by_id

        number = number or NumberFactory()
        answered_by, forwarded_to = extra.pop("answered_by", None), extra.pop("forwarded_to", None)
        voicemail = {
            name: extra.pop(name)
            for name in ("recording", "recording_seconds", "heard", "transcript",
                         "transcript_confidence", "transcript_status")
            if name in extra
        }  # fmt: skip
        with transaction.atomic():
            call = inbound_call_written(
                number=number,
                caller_id=caller_num,
                outcome=status,
                duration=extra.pop("duration", 45 if status == "answered" else 0),
                at=extra.pop("created_at", None) or timezone.now(),
                sip_call_id=extra.pop("sip_call_id", ""),
                answered_by=ledger_answered_by(answered_by, forwarded_to),
                phone=forwarded_to or "",
            )
            assert not extra, f"CallRecordFactory does not know {sorted(extra)}"
            if voicemail:
                Recording.objects.create(
                    call=call,
                    kind=RecordingKind.VOICEMAIL,
                    name=voicemail.pop("recording", ""),
                    seconds=voicemail.pop("recording_seconds", None),
                    **voicemail,
                )
        return record_by_id(call.pk)

    @classmethod
    def create_batch(cls, size: int, **fields) -> list:
        return [cls(**fields) for _ in range(size)]


class BlockedCallerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "numbers.BlockedCaller"

    number = factory.SubFactory(NumberFactory)
    caller_num = "+447700900666"


class CallFactory(factory.django.DjangoModelFactory):
    """A queued outbound call, stored as it is (no dispatch is enqueued), from the service's
    caller id unless `caller_id` says otherwise; `ended_at` now if `status` is terminal."""

    class Meta:
        model = "calls.Call"

    owner = factory.SubFactory(UserFactory)
    call_id = factory.Sequence(lambda n: f"call-{n}")
    to = "+442079460120"
    message = "hi"
    caller_id = factory.LazyFunction(lambda: settings.SERVICE_CALLER_ID)
    status = CallState.QUEUED
    # Ended when its status is terminal, as the pipeline leaves every call that ends (the
    # quotas count a call without ended_at as up).
    ended_at = factory.LazyAttribute(
        lambda call: timezone.now() if call.status in TERMINAL_STATES else None
    )

    @classmethod
    def _create(cls, model_class, *args, **kwargs):
        # Counted like a submitted call, so `total` of the call list stays exact.
        with transaction.atomic():
            call = super()._create(model_class, *args, **kwargs)
            call_counters_move(owner_id=call.owner_id, old=None, new=call.status)
        return call


def wav_bytes(seconds: float = 1.0) -> bytes:
    """A voicemail message as the agent stores it: 8 kHz, 16-bit, mono PCM."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\x10\x00" * int(8000 * seconds))
    return buffer.getvalue()


def music_wav(seconds: float = 2.0, *, rate: int = 22050, channels: int = 2) -> bytes:
    """Music for hold as an owner uploads it: a 440 Hz tone as a WAV file of `rate` and
    `channels`, 16-bit, not the form Relay keeps."""
    frames = int(rate * seconds)
    samples = [round(8000 * math.sin(2 * math.pi * 440 * n / rate)) for n in range(frames)]
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(channels)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(b"".join(struct.pack("<h", s) * channels for s in samples))
    return buffer.getvalue()


def voicemail_on(
    number, *, seconds: float = 1.0, caller="+447700900123", data: bytes | None = None, **extra
):
    """A call to `number` answered by voicemail, its message `data` (a stored WAV `seconds`
    long; by default a steady hum, wav_bytes), recorded by record_inbound_call."""
    name = recordings_storage().save("message.wav", ContentFile(data or wav_bytes(seconds)))
    return record_inbound_call(
        number=number,
        caller_num=caller,
        status="answered",
        duration=9,
        recording=name,
        recording_seconds=seconds,
        answered_by="voicemail",
        **extra,
    )


def stereo_wav(seconds: float = 1.0) -> bytes:
    """A bridged call's recording as the recorder writes it: 8 kHz, 16-bit, two channels (the
    caller a steady hum on the left, the other party quieter on the right)."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(2)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\x10\x00\x04\x00" * int(8000 * seconds))
    return buffer.getvalue()


def call_recorded_on(
    number,
    *,
    seconds: float = 1.0,
    caller="+447700900123",
    incomplete: bool = False,
    transcript: str = "",
    transcript_confidence: float | None = None,
):
    """A forwarded call to `number` whose bridge was recorded, through history.recordings as
    the agent records it: its record (CallRecordFactory), the recording opened, its WAV
    (stereo_wav, `seconds` long) written where call_recording_open says, and closed
    (call_recording_done, `incomplete` when cut); with a `transcript`, stored as the worker
    stores one ("caller: ..." and "callee: ..." lines). Returns the Recording."""
    from calls.models import Recording
    from history.recordings import call_recording_done, call_recording_open

    record = CallRecordFactory(
        number=number, caller_num=caller, answered_by="forward", forwarded_to="+441134960200"
    )
    row, path = call_recording_open(call_id=record.pk)
    with open(path, "wb") as file:
        file.write(stereo_wav(seconds))
    call_recording_done(recording=row, seconds=seconds, incomplete=incomplete)
    if transcript:
        Recording.objects.filter(pk=row.pk).update(
            transcript=transcript,
            transcript_confidence=transcript_confidence,
            transcript_status="done",
        )
    return Recording.objects.get(pk=row.pk)


def totp_now(secret: str, *, steps: int = 0) -> str:
    """The TOTP code of `secret` at the server's now, `steps` steps of 30 s later."""
    return pyotp.TOTP(secret).at(timezone.now(), counter_offset=steps)


def two_factor_on(
    user: User, *, password: str = DEFAULT_PASSWORD, keep: LoginSession | None = None
) -> tuple[str, list[str]]:
    """`user` with a second factor on, through accounts.twofactor as the user turns it on
    (with the password, then a code): its secret and its recovery codes. Turning it on ends
    every session of the user but `keep`, the one that turned it on."""
    secret = twofactor.two_factor_start(user=user, password=password).secret
    return secret, twofactor.two_factor_confirm(user=user, code=totp_now(secret), keep=keep)
