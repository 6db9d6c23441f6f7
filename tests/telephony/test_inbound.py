"""Calls to the virtual numbers (DESIGN §5.7, inbound): SIPp calls Relay's telephony agent as
the trunk would, and the tests check SIPp's verdict, the history row, the recording (fetched
through the API) and the frames on the owner's socket."""

from __future__ import annotations

import array
import asyncio
import io
import json
import math
import time
import wave

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.hashers import make_password
from django.core.files.storage import FileSystemStorage
from django.db import transaction
from websockets.asyncio.client import connect

from calls.models import Call
from harness.live import RelayProcess, http, http_exchange, wait_until
from harness.sip import MESSAGE_SECONDS, Sipp, free_udp_port, presses, touch
from history.records import Record
from telephony.inbound.voicemail import DEFAULT_GREETING
from telephony.speech import Speech
from tests.factories import BlockedCallerFactory, InventoryNumberFactory, NumberFactory
from tests.records import records_count, refreshed
from tests.telephony.conftest import (
    CALLER,
    call_in,
    records_of,
    sip_env,
    stored_message,
    wait_for_records,
)

pytestmark = [
    pytest.mark.usefixtures("calls_settled"),
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(240),
]

BEEP_SECONDS = 0.4


@pytest.fixture(scope="module")
def relay(tmp_path_factory, django_db_setup):
    """runrelay with the SIP agent; calls ring for 2 s before voicemail answers."""
    workdir = tmp_path_factory.mktemp("inbound")
    env = sip_env(workdir, free_udp_port(), INBOUND_RING_SECONDS=2)
    process = RelayProcess(workdir, log=workdir / "relay.log", **env)
    process.workdir = workdir
    process.agent = env["SIP_BIND"]
    yield process
    process.stop()


@pytest.fixture
def number(user):
    return NumberFactory(owner=user, alias="Shop")


@pytest.fixture
def mailbox(real_hashers, number):
    """`number` with its PIN, 1234, hashed as Relay hashes it (Argon2), so that the agent,
    which runs Relay's own settings, can check it."""
    number.pin_hash = make_password("1234")
    number.save(update_fields=["pin_hash"])
    return number


def spoken_seconds(text: str, tmp_path) -> float:
    return len(Speech(tmp_path / "tts").render(text, "en")[8]) / 8000


async def frames_until(ws, kind: str, timeout: float = 30) -> list[dict]:
    frames = []
    async with asyncio.timeout(timeout):
        while True:
            frame = json.loads(await ws.recv())
            frames.append(frame)
            if frame["type"] == kind:
                return frames


def recording_of(relay, token: str, record: Record) -> tuple[float, float]:
    """The record's recording through the API: (seconds, RMS loudness)."""
    import urllib.request

    request = urllib.request.Request(f"{relay.base}/api/history/{record.pk}/recording")  # noqa: S310
    request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        assert response.headers["Content-Type"] == "audio/wav"
        body = response.read()
    with wave.open(io.BytesIO(body)) as wav:
        frames = wav.readframes(wav.getnframes())
        seconds = wav.getnframes() / wav.getframerate()
    samples = array.array("h", frames)
    return seconds, math.sqrt(sum(s * s for s in samples) / max(1, len(samples)))


async def test_an_answered_call_leaves_a_message_that_the_owner_can_play(
    relay, tmp_path, number, login
):
    greeting = spoken_seconds(DEFAULT_GREETING, tmp_path) + BEEP_SECONDS
    async with connect(f"{relay.ws_base}/ws?token={login.token}") as ws:
        caller = call_in(
            relay.agent,
            tmp_path,
            "inbound_message",
            number.number,
            greeting_ms=int((greeting + 0.3) * 1000),
            message_ms=int(MESSAGE_SECONDS * 1000) + 200,
        )
        assert await asyncio.to_thread(caller.finish, 90) == 0, caller
        frames = await frames_until(ws, "call_record")

    [record] = await sync_to_async(wait_for_records)(number, 1)
    assert (record.status, record.caller_num) == ("answered", CALLER)
    assert (record.answered_by, record.forwarded_to) == ("voicemail", None)
    expected = greeting + 0.3 + MESSAGE_SECONDS + 0.2  # from the answer to SIPp's BYE
    assert abs(record.duration - expected) <= 1.5
    assert record.recording and abs(record.recording_seconds - MESSAGE_SECONDS) <= 1
    seconds, loudness = await asyncio.to_thread(recording_of, relay, login.token, record)
    assert abs(seconds - MESSAGE_SECONDS) <= 1
    assert loudness > 100  # the pcap's speech, not silence
    incoming = [f for f in frames if f["type"] == "incoming_call"]
    assert incoming and incoming[0] | {"ts": 0} == {
        "type": "incoming_call",
        "call": str(record.pk),  # the call its record ends: the record's id is its call's
        "seq": 1,
        "number_id": str(number.pk),
        "number": number.number,
        "caller_num": CALLER,
        "ts": 0,
    }
    pushed = frames[-1]
    assert (pushed["id"], pushed["status"], pushed["duration"]) == (
        str(record.pk),
        "answered",
        record.duration,
    )
    assert pushed["recording_url"] == f"/api/history/{record.pk}/recording"
    assert (pushed["answered_by"], pushed["forwarded_to"]) == ("voicemail", None)
    status, body = await asyncio.to_thread(
        http, "GET", f"{relay.base}/api/history", None, login.token
    )
    assert status == 200
    assert body["history"][0]["recording_url"] == f"/api/history/{record.pk}/recording"


async def test_a_caller_who_hangs_up_while_it_rings_is_missed(relay, tmp_path, number, login):
    async with connect(f"{relay.ws_base}/ws?token={login.token}") as ws:
        caller = call_in(relay.agent, tmp_path, "inbound_cancel", number.number, resend="")
        assert await asyncio.to_thread(caller.finish, 30) == 0, caller
        frames = await frames_until(ws, "call_record")

    [record] = await sync_to_async(wait_for_records)(number, 1)
    assert (record.status, record.duration, record.recording) == ("missed", 0, "")
    assert [f["type"] for f in frames] == ["incoming_call", "call_record"]
    assert frames[-1]["status"] == "missed"


def test_an_invite_sent_again_with_the_same_call_id_makes_one_record(relay, tmp_path, number):
    resend = (SCENARIO_INVITE_AGAIN).strip("\n")
    caller = call_in(relay.agent, tmp_path, "inbound_cancel", number.number, resend=resend)

    assert caller.finish(30) == 0, caller
    [record] = wait_for_records(number, 1)
    assert record.status == "missed"
    wait_until(lambda: caller.proc.poll() is not None, deadline=5, what="SIPp to exit")
    assert len(records_of(number)) == 1


def test_a_blocked_caller_is_declined_and_recorded_as_blocked(relay, tmp_path, number):
    BlockedCallerFactory(number=number, caller_num=CALLER)

    caller = call_in(relay.agent, tmp_path, "inbound_refused", number.number, status=603)

    assert caller.finish(30) == 0, caller
    [record] = wait_for_records(number, 1)
    assert (record.status, record.duration, record.caller_num) == ("blocked", 0, CALLER)


@pytest.mark.parametrize("held", [False, True], ids=["not provisioned", "held by nobody"])
def test_a_number_nobody_holds_is_not_found_and_nothing_is_recorded(relay, tmp_path, number, held):
    dialled = InventoryNumberFactory().e164 if held else "+442079469999"

    caller = call_in(relay.agent, tmp_path, "inbound_refused", dialled, status=404)

    assert caller.finish(30) == 0, caller
    assert not records_count() > 0


@pytest.mark.parametrize(
    "form",
    [lambda e164: e164[1:], lambda e164: "00" + e164[1:], lambda e164: "0" + e164[3:]],
    ids=["without +", "with 00", "national"],
)
def test_the_dialled_number_may_come_as_the_trunk_writes_it(relay, tmp_path, number, form):
    caller = call_in(relay.agent, tmp_path, "inbound_cancel", form(number.number), resend="")

    assert caller.finish(30) == 0, caller
    assert wait_for_records(number, 1)[0].status == "missed"


@pytest.mark.parametrize("presented", ["anonymous", "Restricted", "not-a-number"])
def test_a_withheld_caller_id_is_recorded_as_anonymous(relay, tmp_path, number, presented):
    caller = call_in(
        relay.agent, tmp_path, "inbound_cancel", number.number, caller=presented, resend=""
    )

    assert caller.finish(30) == 0, caller
    assert wait_for_records(number, 1)[0].caller_num == "anonymous"


def keys_in(relay, tmp_path, number, keys: str):
    """A caller who presses `keys` a second after the answer and waits up to 60 s for the
    hang-up (the mailbox's menu, after the messages, waits for a key twice before its
    goodbye)."""
    return call_in(
        relay.agent,
        tmp_path,
        "inbound_keys",
        number.number,
        before_ms=1000,
        presses=presses(keys),
        hangup_timeout_ms=60000,
    )


def test_the_pin_opens_the_mailbox_and_plays_the_new_message(relay, tmp_path, mailbox):
    number = mailbox
    message, seconds = stored_message(relay, number, tmp_path, "Call me back about the parcel.")
    started = time.monotonic()

    caller = keys_in(relay, tmp_path, number, "*1234#")

    assert caller.finish(90) == 0, caller
    assert time.monotonic() - started >= seconds
    message = refreshed(message)
    assert message.heard is True
    # The owner's own call is a call too: answered, with no message of its own.
    records = wait_for_records(number, 2)
    mailbox_call = next(r for r in records if r.pk != message.pk)
    assert (mailbox_call.status, mailbox_call.recording) == ("answered", "")
    # Neither the PIN nor the keys reach the agent's log.
    agent_lines = [
        line
        for line in (relay.workdir / "relay.log").read_text().splitlines()
        if " telephony." in line
    ]
    assert not [line for line in agent_lines if "1234" in line or "DTMF" in line.upper()]


def test_keys_pressed_the_moment_the_call_is_answered_open_the_mailbox(relay, tmp_path, mailbox):
    """A phone that sends `*1234#` as soon as it hears the answer (a contact saved with its
    keys) opens the mailbox: keys are heard from the 200 OK on, even while the agent is still
    writing the answer down, and the PIN typed ahead of its prompt is the PIN. The test holds
    the call's row until SIPp has sent every key, so that the agent's write waits for them."""
    number = mailbox
    message, _ = stored_message(relay, number, tmp_path, "Call me back about the parcel.")
    sent = tmp_path / "keys-sent"

    caller = call_in(
        relay.agent,
        tmp_path,
        "inbound_keys",
        number.number,
        before_ms=0,
        presses=presses("*1234#") + touch(sent, after_ms=1000),
        hangup_timeout_ms=60000,
    )
    ledger = wait_until(
        lambda: Call.objects.filter(
            direction="inbound", number=number, answered_at__isnull=True
        ).first(),
        deadline=20,
        what="the call's ledger row",
    )
    with transaction.atomic():  # PostgreSQL: the row's lock; SQLite: the database's
        Call.objects.filter(pk=ledger.pk).update(answered_at=None)
        wait_until(sent.exists, deadline=30, what="SIPp to send every key")
        ledger.refresh_from_db()
        assert ledger.answered_at is None  # the agent's write did wait for the keys

    assert caller.finish(90) == 0, caller
    message = refreshed(message)
    assert message.heard is True
    ledger.refresh_from_db()
    assert ledger.answered_at is not None


def test_five_wrong_pins_by_phone_lock_the_mailbox_and_the_rest_pin_change(
    relay, tmp_path, mailbox, login
):
    number = mailbox
    message, _ = stored_message(relay, number, tmp_path, "Hello.")
    for wrong in ("*0000#0000#0000#", "*1111#1111#"):
        caller = keys_in(relay, tmp_path, number, wrong)
        assert caller.finish(60) == 0, caller

    status, body, headers = http_exchange(
        "PUT",
        f"{relay.base}/api/numbers/{number.pk}/pin",
        {"currentPin": "1234", "newPin": "5678"},
        login.token,
    )
    assert (status, body["code"]) == (429, "pin_locked")
    assert int(headers["Retry-After"]) > 0
    # Locked by phone too, even with the right PIN: the mailbox says so and hangs up.
    caller = keys_in(relay, tmp_path, number, "*1234#")
    assert caller.finish(60) == 0, caller
    message = refreshed(message)
    assert message.heard is False


def test_fifty_calls_ten_at_a_time_leave_fifty_messages(relay, tmp_path, number):
    number.greeting = "Hi."
    number.save(update_fields=["greeting"])
    greeting = spoken_seconds("Hi.", tmp_path) + BEEP_SECONDS

    callers = Sipp(
        tmp_path / "sipp-load",
        "inbound_message",
        port=free_udp_port(),
        remote=relay.agent,
        service=number.number,
        caller=CALLER,
        calls=50,
        limit=10,
        timeout=180,
        greeting_ms=int((greeting + 0.3) * 1000),
        message_ms=int(MESSAGE_SECONDS * 1000) + 200,
    )

    assert callers.finish(180) == 0, callers
    records = wait_for_records(number, 50, deadline=60)
    assert len(records) == 50
    assert {r.status for r in records} == {"answered"}
    assert len({r.sip_call_id for r in records}) == 50
    assert all(r.recording for r in records)
    assert len({r.recording for r in records}) == 50
    stored = FileSystemStorage(location=relay.workdir / "recordings")
    assert all(stored.exists(r.recording) for r in records)


SCENARIO_INVITE_AGAIN = """
  <send>
    <![CDATA[
INVITE sip:[service]@[remote_ip]:[remote_port] SIP/2.0
Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=z9hG4bK-[pid]-[call_number]-again
From: <sip:[caller]@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
To: <sip:[service]@[remote_ip]:[remote_port]>
Call-ID: [call_id]
CSeq: 2 INVITE
Contact: <sip:sipp@[local_ip]:[local_port]>
Max-Forwards: 70
Content-Type: application/sdp
Content-Length: [len]

v=0
o=sipp 1 1 IN IP[local_ip_type] [local_ip]
s=-
c=IN IP[media_ip_type] [media_ip]
t=0 0
m=audio [media_port] RTP/AVP 8 101
a=rtpmap:8 PCMA/8000
a=rtpmap:101 telephone-event/8000

    ]]>
  </send>
  <recv response="482"/>
  <send>
    <![CDATA[
ACK sip:[service]@[remote_ip]:[remote_port] SIP/2.0
Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=z9hG4bK-[pid]-[call_number]-again
From: <sip:[caller]@[local_ip]:[local_port]>;tag=[pid]SIPpTag00[call_number]
[last_To:]
Call-ID: [call_id]
CSeq: 2 ACK
Max-Forwards: 70
Content-Length: 0

    ]]>
  </send>
"""
