"""The Matrix bot against a real Synapse on loopback (issue 18), asserted through the test
users' own client-server API: consent first, one notice per call, calls placed from the chat,
exactly once whatever fails, and silence once the user opts out, clears or leaves.

The bot's two halves run in this process, as the worker and `manage.py matrix_bot` would:
`sync_once` reads its rooms, `drain_tasks` sends what is due.
"""

from __future__ import annotations

import html
import logging
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import DialRefusal
from calls.models import Call
from harness.live import wait_until
from harness.speech import spoken_message
from harness.synapse import MatrixUser
from history.services import call_record_recording_delete, record_inbound_call
from history.tasks import transcription_run
from matrix import services, tasks
from matrix.client import MatrixClient
from matrix.management.commands.matrix_bot import token_check
from matrix.models import MatrixBotState, MatrixMessage, MatrixRoom, MessageStatus
from matrix.sync import command_run, sync_once
from realtime.services import call_submit
from tests.conftest import drain_tasks
from tests.dialing import REFUSED
from tests.factories import NumberFactory, voicemail_on
from tests.history.speech import require_speech
from tests.records import refreshed, voicemail_id

pytestmark = pytest.mark.django_db(transaction=True)

CALLER = "+447700900123"
SENDS = 10  # notices sent back to back under a rate limit of one a second
TARGET = "+442079460123"


@pytest.fixture(scope="session")
def bot_account(synapse) -> MatrixUser:
    return synapse.register("relay-bot")


@pytest.fixture
def bot(settings, synapse, bot_account) -> MatrixClient:
    """Matrix on, pointed at the session's Synapse as the bot, after the bot's first sync
    (which takes memberships as they are and runs no command from before it)."""
    settings.MATRIX_HOMESERVER_URL = synapse.url
    settings.MATRIX_BOT_ACCESS_TOKEN = bot_account.access_token
    settings.MATRIX_BOT_USER_ID = bot_account.user_id
    settings.MATRIX_ENABLED = True
    client = MatrixClient()
    sync_once(client=client, timeout_ms=0)
    return client


def settle(bot: MatrixClient) -> None:
    """What the bot and the worker would do next: read the rooms once, then run what is due."""
    sync_once(client=bot, timeout_ms=0)
    drain_tasks()


def bot_messages(member: MatrixUser, room_id: str, bot_id: str) -> list[dict]:
    return [
        event
        for event in member.messages(room_id)
        if event["type"] == "m.room.message" and event["sender"] == bot_id
    ]


def in_thread(events: list[dict], root: str) -> list[str]:
    return [
        event["content"]["body"]
        for event in events
        if event["content"].get("m.relates_to", {}).get("rel_type") == "m.thread"
        and event["content"]["m.relates_to"]["event_id"] == root
    ]


def invited(client_jwt, member: MatrixUser) -> tuple[str, list[dict]]:
    """Set the user's Matrix id to `member`'s and let the worker open the room: the invite."""
    response = client_jwt.put("/api/user/matrix", {"matrixId": member.user_id}, format="json")
    assert response.status_code == 200, response.content
    assert response.json() == {
        "success": True,
        "matrixId": member.user_id,
        "matrixStatus": "invited",
    }
    drain_tasks()
    return member.wait_for_invite()


@pytest.fixture
def joined(client_jwt, matrix_user_factory, bot):
    """A user whose Matrix id has joined the bot's direct room: (member, room id)."""
    member = matrix_user_factory("alice")
    room_id, _ = invited(client_jwt, member)
    member.join(room_id)
    sync_once(client=bot, timeout_ms=0)
    assert client_jwt.get("/api/user/me").json()["matrixStatus"] == "joined"
    return member, room_id


# --- consent --------------------------------------------------------------------------------
def test_setting_a_matrix_id_invites_it_to_a_direct_room_and_nothing_is_sent_before_the_join(
    user, client_jwt, matrix_user_factory, bot, bot_account
):
    member = matrix_user_factory("alice")
    room_id, invite_state = invited(client_jwt, member)

    own = [e for e in invite_state if e["type"] == "m.room.member"]
    assert any(e["state_key"] == member.user_id and e["content"]["is_direct"] for e in own)
    assert bot_account.account_data("m.direct")[member.user_id] == [room_id]
    assert MatrixRoom.objects.get(user=user, ended_at=None).room_id == room_id
    # Before the join: a call on the user's number and an ended call queue nothing.
    record_inbound_call(
        number=NumberFactory(owner=user), caller_num=CALLER, status="missed", duration=0
    )
    call_submit(user=user, data={"callId": "c-1", "to": TARGET, "message": "Hi"})
    settle(bot)
    assert Call.objects.get(call_id="c-1").status == "completed"
    assert list(MatrixMessage.objects.values_list("kind", flat=True)) == ["invite"]

    member.join(room_id)
    sync_once(client=bot, timeout_ms=0)
    assert client_jwt.get("/api/user/me").json()["matrixStatus"] == "joined"
    assert client_jwt.get("/api/dashboard").json()["matrixStatus"] == "joined"
    # History is shared with members: had anything been sent before, it would show now.
    assert bot_messages(member, room_id, bot_account.user_id) == []


def test_a_matrix_id_that_does_not_exist_is_refused_and_no_room_is_made(
    user, client_jwt, bot, bot_account
):
    rooms_before = bot_account.request("GET", "/_matrix/client/v3/joined_rooms").json()

    response = client_jwt.put(
        "/api/user/matrix", {"matrixId": "@nobody-here:localhost"}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert "matrixId" in response.json()["fields"]
    drain_tasks()
    user.refresh_from_db()
    assert (user.matrix_id, user.matrix_status) == (None, "none")
    assert not MatrixRoom.objects.exists()
    assert bot_account.request("GET", "/_matrix/client/v3/joined_rooms").json() == rooms_before


# --- what is sent ---------------------------------------------------------------------------
def test_a_missed_call_and_a_completed_call_each_arrive_once_in_the_direct_room(
    user, joined, bot, bot_account
):
    member, room_id = joined
    number = NumberFactory(owner=user, alias="Office")
    record_inbound_call(number=number, caller_num=CALLER, status="missed", duration=0)
    call_submit(user=user, data={"callId": "c-1", "to": TARGET, "message": "Hi"})
    settle(bot)

    notices = bot_messages(member, room_id, bot_account.user_id)
    call = Call.objects.get(call_id="c-1")
    assert [e["content"]["body"] for e in notices] == [
        f"Call from {CALLER} to {number.number} (Office): missed.",
        f"Your call to {TARGET} completed, {call.duration} s.",
    ]
    assert all(e["content"]["msgtype"] == "m.notice" for e in notices)
    assert "<i>Office</i>" in notices[0]["content"]["formatted_body"]
    assert notices[0]["content"]["format"] == "org.matrix.custom.html"
    # One direct room: the one the bot's m.direct lists for the user.
    assert bot_account.account_data("m.direct")[member.user_id] == [room_id]
    settle(bot)  # nothing more, however often the worker runs
    assert len(bot_messages(member, room_id, bot_account.user_id)) == 2


def test_an_alias_is_escaped_in_the_html(user, joined, bot, bot_account):
    member, room_id = joined
    number = NumberFactory(owner=user, alias="<b>boss</b>")
    record_inbound_call(number=number, caller_num=CALLER, status="blocked", duration=0)
    drain_tasks()

    (notice,) = bot_messages(member, room_id, bot_account.user_id)
    assert "&lt;b&gt;boss&lt;/b&gt;" in notice["content"]["formatted_body"]
    assert notice["content"]["body"].endswith("(<b>boss</b>): blocked.")


def test_a_voicemails_transcript_follows_its_call_as_a_notice_marked_a_draft(
    user, joined, bot, bot_account, settings
):
    settings.TRANSCRIBE_ENGINE = "whisper"
    member, room_id = joined
    number = NumberFactory(owner=user, alias="Office")
    require_speech()
    audio, seconds = spoken_message()
    record = voicemail_on(number, caller=CALLER, data=audio, seconds=seconds)
    settle(bot)

    record = refreshed(record)
    assert record.transcript_status == "done" and record.transcript
    call, words = bot_messages(member, room_id, bot_account.user_id)
    assert call["content"]["body"].startswith(f"Call from {CALLER} to {number.number} (Office)")
    confidence = round(record.transcript_confidence * 100)
    assert words["content"]["body"] == (
        f"Voicemail from {CALLER} to Office ({number.number}) (automatic transcript, may be "
        f"inaccurate, confidence {confidence}%): \u201c{record.transcript}\u201d"
    )
    # Whisper's text may hold an apostrophe ("it's"), escaped in the HTML.
    quoted = f"<blockquote>{html.escape(record.transcript)}</blockquote>"
    assert quoted in words["content"]["formatted_body"]
    # Both name the call: its end (event 3), then its transcript (event 4).
    assert [e["content"]["org.relay.call"] for e in (call, words)] == [
        {"call": str(record.pk), "seq": 3},
        {"call": str(record.pk), "seq": 4},
    ]
    # Once sent, Relay keeps no copy of the words.
    sent = MatrixMessage.objects.get(key=f"transcript:{record.pk}")
    assert (sent.status, sent.body, sent.formatted_body) == (MessageStatus.SENT, "", "")


def test_a_transcript_whose_message_was_deleted_before_it_left_is_dropped(
    user, joined, bot, bot_account, settings
):
    settings.TRANSCRIBE_ENGINE = "whisper"
    member, room_id = joined
    number = NumberFactory(owner=user, alias="Office")
    require_speech()
    audio, seconds = spoken_message()
    record = voicemail_on(number, caller=CALLER, data=audio, seconds=seconds)
    transcription_run(recording_id=voicemail_id(record))  # the notice is queued, not yet sent
    call_record_recording_delete(record=record)
    settle(bot)

    notices = bot_messages(member, room_id, bot_account.user_id)
    assert [n["content"]["body"].startswith("Call from") for n in notices] == [True]
    dropped = MatrixMessage.objects.get(key=f"transcript:{record.pk}")
    assert (dropped.status, dropped.body) == (MessageStatus.DROPPED, "")


# --- calls from the chat --------------------------------------------------------------------
def test_call_from_the_chat_places_the_call_and_answers_in_its_thread(
    user, joined, bot, bot_account
):
    member, room_id = joined
    command = member.send_text(room_id, f"!call  {TARGET}\nHello, the parcel is at the door ")
    settle(bot)

    call = Call.objects.get(owner=user)
    assert (call.call_id, call.to, call.message) == (
        command,
        TARGET,
        "Hello, the parcel is at the door",
    )
    assert call.status == "completed"
    events = bot_messages(member, room_id, bot_account.user_id)
    assert in_thread(events, command) == [
        f"Calling {TARGET}: queued (call id {command}).",
        f"Your call to {TARGET} completed, {call.duration} s.",
    ]
    assert len(events) == 2  # the final state goes to the thread, not also as a notice
    assert [e["content"]["org.relay.call"] for e in events] == [
        {"call": str(call.pk)},
        {"call": str(call.pk), "seq": call.last_seq},
    ]

    # The same event again (a bot that died before storing next_batch reads it again), and
    # the event handed over a second time: one call, no second answer.
    state = MatrixBotState.objects.get()
    MatrixBotState.objects.update(next_batch="")
    sync_once(client=bot, timeout_ms=0)  # a fresh bot: memberships only
    MatrixBotState.objects.update(next_batch=state.next_batch)
    settle(bot)
    room = MatrixRoom.objects.get(user=user, ended_at=None)
    command_run(room=room, event_id=command, body=f"!call {TARGET} Hello")
    drain_tasks()
    assert Call.objects.filter(owner=user).count() == 1
    assert len(bot_messages(member, room_id, bot_account.user_id)) == 2


def test_call_from_the_chat_may_ask_for_machine_detection_and_a_bad_mode_is_refused(
    user, joined, bot, bot_account
):
    member, room_id = joined
    placed = member.send_text(room_id, f"!call --machine-detection=leave_message {TARGET} Hi")
    bad = member.send_text(room_id, f"!call --machine-detection=maybe {TARGET} Hi")
    settle(bot)

    call = Call.objects.get(owner=user)
    assert (call.call_id, call.to, call.message, call.machine_detection) == (
        placed,
        TARGET,
        "Hi",
        "leave_message",
    )
    (refusal,) = in_thread(bot_messages(member, room_id, bot_account.user_id), bad)
    assert refusal.startswith("Not placed: machineDetection:"), refusal


def test_a_restart_of_the_bot_neither_replays_nor_skips_commands(user, joined, bot, bot_account):
    member, room_id = joined
    first = member.send_text(room_id, f"!call {TARGET} First")
    sync_once(client=bot, timeout_ms=0)
    # The bot stops here; a command arrives while it is down; a new bot starts.
    second = member.send_text(room_id, "!call +442079460124 Second")
    restarted = MatrixClient()
    sync_once(client=restarted, timeout_ms=0)
    drain_tasks()

    assert sorted(Call.objects.values_list("call_id", flat=True)) == sorted([first, second])
    events = bot_messages(member, room_id, bot_account.user_id)
    assert len(in_thread(events, first)) == 2 and len(in_thread(events, second)) == 2


def test_a_bad_or_rate_limited_call_from_the_chat_is_answered_and_not_placed(
    settings, user, joined, bot, bot_account
):
    member, room_id = joined
    settings.RATE_LIMIT_CALLS_PER_USER = "1/m"
    bad = member.send_text(room_id, "!call 12345 Hello")
    placed = member.send_text(room_id, f"!call {TARGET} Hello")
    limited = member.send_text(room_id, f"!call {TARGET} Again")
    settle(bot)

    assert list(Call.objects.values_list("call_id", flat=True)) == [placed]
    events = bot_messages(member, room_id, bot_account.user_id)
    (bad_answer,) = in_thread(events, bad)
    assert bad_answer.startswith("Not placed: to:")
    (limited_answer,) = in_thread(events, limited)
    assert limited_answer.startswith("Not placed:") and "try again" in limited_answer.lower()


def test_every_refused_destination_from_the_chat_is_answered_and_not_placed(
    user, joined, bot, bot_account
):
    """The dialing policy on `!call`: each refused number gets its reason in its thread. Staff
    let this user call France, so a French shared-cost number is refused for its type."""
    user.dial_countries = "FR"
    user.save(update_fields=["dial_countries"])
    member, room_id = joined
    refused = [  # all but France itself, and those refused only where all countries are allowed
        (number, reason, overrides, says)
        for number, reason, overrides, says in (param.values for param in REFUSED)
        if number != "+33123456789" and (not overrides or number.startswith("+33"))
    ]
    commands = {
        member.send_text(room_id, f"!call {number} Hello"): (number, reason, says)
        for number, reason, _, says in refused
    }
    placed = member.send_text(room_id, "!call +33123456789 Bonjour")
    settle(bot)

    assert list(Call.objects.values_list("call_id", flat=True)) == [placed]
    events = bot_messages(member, room_id, bot_account.user_id)
    for command, (number, _, says) in commands.items():
        (answer,) = in_thread(events, command)
        assert answer.startswith(f"Not placed: {number}") and says in answer, answer
    assert sorted(DialRefusal.objects.values_list("reason", flat=True)) == sorted(
        reason for _, reason, _ in commands.values()
    )


def test_help_and_calls_are_answered_in_their_threads(user, joined, bot, bot_account):
    member, room_id = joined
    call_submit(user=user, data={"callId": "c-1", "to": TARGET, "message": "Hi"})
    drain_tasks()
    asked_help = member.send_text(room_id, "!help")
    asked_calls = member.send_text(room_id, "!calls")
    member.send_text(room_id, "just chatting")
    settle(bot)

    events = bot_messages(member, room_id, bot_account.user_id)
    (help_answer,) = in_thread(events, asked_help)
    assert "!call <number> <message>" in help_answer
    (calls_answer,) = in_thread(events, asked_calls)
    assert f"{TARGET}: completed" in calls_answer
    assert len(events) == 3  # the outbound notice of c-1, and the two answers


def test_a_notice_about_a_call_names_it_as_frames_do(user, joined, bot, bot_account):
    member, room_id = joined
    call, _ = call_submit(user=user, data={"callId": "c-1", "to": TARGET, "message": "Hi"})
    drain_tasks()
    settle(bot)
    call.refresh_from_db()

    (notice,) = bot_messages(member, room_id, bot_account.user_id)

    assert call.status == "completed"
    assert notice["content"]["org.relay.call"] == {"call": str(call.pk), "seq": call.last_seq}


def test_commands_from_anyone_else_or_from_another_room_do_nothing(
    user, joined, bot, bot_account, matrix_user_factory
):
    member, room_id = joined
    stranger = matrix_user_factory("mallory")
    bot_account.request(
        "POST",
        f"/_matrix/client/v3/rooms/{room_id}/invite",
        {"user_id": stranger.user_id},
    )
    stranger.join(room_id)
    stranger.send_text(room_id, f"!call {TARGET} From a stranger")
    # A room of the bot's that is not the user's room in use, where the user also is.
    other = bot_account.create_room(preset="private_chat", invite=[member.user_id])
    member.join(other)
    member.send_text(other, f"!call {TARGET} From elsewhere")
    settle(bot)

    assert not Call.objects.exists()
    assert bot_messages(member, room_id, bot_account.user_id) == []
    assert bot_messages(member, other, bot_account.user_id) == []


# --- exactly once, whatever fails -----------------------------------------------------------
def test_a_send_repeated_after_a_crash_before_it_was_marked_posts_once(
    user, joined, bot, bot_account
):
    member, room_id = joined
    record_inbound_call(
        number=NumberFactory(owner=user), caller_num=CALLER, status="missed", duration=0
    )
    row = MatrixMessage.objects.get(kind="inbound")
    # The worker sent it, then died before marking it sent: the next worker sends it again.
    content = {"msgtype": "m.notice", "body": row.body}
    first = bot.send_notice(room_id, row.txn_id, content)
    tasks.message_attempt(message_id=row.pk)
    tasks.message_attempt(message_id=row.pk)  # and a duplicate task does nothing
    drain_tasks()

    row.refresh_from_db()
    assert (row.status, row.event_id) == (MessageStatus.SENT, first)
    assert len(bot_messages(member, room_id, bot_account.user_id)) == 1


def test_with_synapse_down_calls_go_on_and_the_notice_waits_then_arrives_once(
    user, joined, bot, bot_account, synapse
):
    member, room_id = joined
    synapse.stop()
    try:
        started = timezone.now()
        call, created = call_submit(
            user=user, data={"callId": "c-1", "to": TARGET, "message": "Hi"}
        )
        assert created and call.status == "queued"
        drain_tasks()
        call.refresh_from_db()
        assert call.status == "completed"  # the call pipeline never waited on Matrix
        row = MatrixMessage.objects.get(kind="outbound")
        assert row.status == MessageStatus.PENDING and row.attempts == 1
        assert "unreachable" in row.last_error
        # Backoff from 30 s, with jitter.
        assert started + timedelta(seconds=23) < row.next_attempt_at
        assert row.next_attempt_at < timezone.now() + timedelta(seconds=37)
    finally:
        synapse.start()
    MatrixMessage.objects.filter(pk=row.pk).update(next_attempt_at=timezone.now())
    tasks.message_attempt(message_id=row.pk)
    drain_tasks()

    notices = bot_messages(member, room_id, bot_account.user_id)
    expected = f"Your call to {TARGET} completed, {call.duration} s."
    assert [e["content"]["body"] for e in notices] == [expected]


def test_a_429_defers_by_the_servers_retry_after(
    user, joined, bot, bot_account, synapse, synapse_admin
):
    member, room_id = joined
    number = NumberFactory(owner=user)
    for _ in range(SENDS):
        record_inbound_call(number=number, caller_num=CALLER, status="missed", duration=0)
    synapse.override_ratelimit(synapse_admin, bot_account.user_id, 1, 1)
    try:
        # One a second, in bursts of one: sent back to back, one of them meets the limit.
        for row in MatrixMessage.objects.filter(kind="inbound").order_by("id"):
            before = timezone.now()
            tasks.message_attempt(message_id=row.pk)
            after = timezone.now()
            row.refresh_from_db()
            if "429" in row.last_error:
                break
        else:
            pytest.fail(f"{SENDS} sends back to back never met the limit of 1 a second")
        asked = int(re.search(r"retry after (\d+) ms", row.last_error).group(1))
        wait = timedelta(milliseconds=asked)
        assert before + wait <= row.next_attempt_at <= after + wait + timedelta(seconds=0.01)
        assert row.status == MessageStatus.PENDING
    finally:
        synapse.clear_ratelimit(synapse_admin, bot_account.user_id)

    def all_sent():
        drain_tasks()
        return not MatrixMessage.objects.filter(status=MessageStatus.PENDING).exists()

    wait_until(all_sent, deadline=30, what="the held notices sent after their wait")
    assert len(bot_messages(member, room_id, bot_account.user_id)) == SENDS


def test_a_refused_bot_token_holds_the_outbox_with_one_log_line(
    settings, user, joined, bot, bot_account, caplog
):
    member, room_id = joined
    number = NumberFactory(owner=user)
    settings.MATRIX_BOT_ACCESS_TOKEN = "not-the-bots-token"
    with caplog.at_level(logging.ERROR, logger="matrix"):
        assert token_check(MatrixClient()) is False
        for _ in range(3):
            record_inbound_call(number=number, caller_num=CALLER, status="missed", duration=0)
        drain_tasks()
        MatrixMessage.objects.update(next_attempt_at=timezone.now())
        for row in MatrixMessage.objects.filter(kind="inbound"):
            tasks.message_attempt(message_id=row.pk)
    refusals = [r for r in caplog.records if "refused MATRIX_BOT_ACCESS_TOKEN" in r.getMessage()]
    assert len(refusals) == 1
    assert "not-the-bots-token" not in caplog.text
    assert MatrixMessage.objects.filter(kind="inbound", status=MessageStatus.PENDING).count() == 3

    settings.MATRIX_BOT_ACCESS_TOKEN = bot_account.access_token
    MatrixBotState.objects.update(token_refused_at=timezone.now() - timedelta(minutes=2))
    MatrixMessage.objects.update(next_attempt_at=timezone.now() - timedelta(minutes=2))
    assert services.messages_sweep() == 3
    drain_tasks()
    assert len(bot_messages(member, room_id, bot_account.user_id)) == 3


def test_a_403_on_send_forgets_the_room_and_starts_over_from_the_invite(
    user, joined, bot, bot_account, client_jwt
):
    member, old_room = joined
    bot_account.leave(old_room)  # the bot is out of the room: sends there are refused
    record_inbound_call(
        number=NumberFactory(owner=user), caller_num=CALLER, status="missed", duration=0
    )
    drain_tasks()

    row = MatrixMessage.objects.get(kind="inbound")
    assert row.status == MessageStatus.DROPPED and "403" in row.last_error
    new_room, _ = member.wait_for_invite()
    assert new_room != old_room
    assert client_jwt.get("/api/user/me").json()["matrixStatus"] == "invited"
    assert MatrixRoom.objects.get(user=user, ended_at=None).room_id == new_room


# --- silence --------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["opt_out", "cleared", "left"])
def test_after_an_opt_out_a_cleared_id_or_leaving_nothing_more_arrives(
    how, user, joined, bot, bot_account, client_jwt
):
    member, room_id = joined
    if how == "opt_out":
        switches = {"matrixInbound": False, "matrixOutbound": False}
        assert client_jwt.put("/api/user/notifications", switches, format="json").status_code == 200
        expected_status = "joined"
    elif how == "cleared":
        cleared = client_jwt.put("/api/user/matrix", {"matrixId": None}, format="json")
        assert cleared.status_code == 200
        expected_status = "none"
    else:
        member.leave(room_id)
        sync_once(client=bot, timeout_ms=0)
        expected_status = "left"
    assert client_jwt.get("/api/user/me").json()["matrixStatus"] == expected_status

    record_inbound_call(
        number=NumberFactory(owner=user), caller_num=CALLER, status="missed", duration=0
    )
    call_submit(user=user, data={"callId": "c-1", "to": TARGET, "message": "Hi"})
    settle(bot)

    assert not MatrixMessage.objects.exclude(kind="invite").exists()
    if how == "opt_out":
        assert bot_messages(member, room_id, bot_account.user_id) == []
    if how == "cleared":  # the bot left the room it no longer uses
        members = bot_account.request("GET", f"/_matrix/client/v3/rooms/{room_id}/joined_members")
        assert members.status_code == 403
