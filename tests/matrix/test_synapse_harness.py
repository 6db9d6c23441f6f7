"""The Synapse harness itself (harness/synapse.py): users, a direct chat, rate limits and a
restart against the real homeserver."""

import uuid

import pytest

from harness.live import wait_until
from harness.synapse import CLIENT, MatrixError, quote_id


def _is_direct_invite(events: list[dict], user_id: str) -> bool:
    return any(
        e["type"] == "m.room.member"
        and e.get("state_key") == user_id
        and e["content"].get("membership") == "invite"
        and e["content"].get("is_direct") is True
        for e in events
    )


def _texts(events: list[dict]) -> list[str]:
    return [e["content"].get("body") for e in events if e["type"] == "m.room.message"]


def test_a_direct_chat_between_two_users(matrix_user_factory):
    alice, bob = matrix_user_factory("alice"), matrix_user_factory("bob")
    room_id = alice.create_room(invite=[bob.user_id], is_direct=True, preset="trusted_private_chat")

    invited, invite_state = bob.wait_for_invite(room_id=room_id)
    assert invited == room_id
    assert _is_direct_invite(invite_state, bob.user_id)
    bob.join(room_id)
    assert room_id not in bob.invited_rooms()
    event_id = bob.send_text(room_id, "hello from bob")

    events = alice.wait_for_events(room_id, lambda evs: "hello from bob" in _texts(evs))
    message = next(e for e in events if e["event_id"] == event_id)
    assert message["sender"] == bob.user_id
    assert message["content"] == {"msgtype": "m.text", "body": "hello from bob"}


def test_an_invite_by_member_state_keeps_is_direct(matrix_user_factory):
    # PUT /state/m.room.member/{user} with membership "invite" is an invite like /invite, and
    # unlike /invite it carries is_direct to the invitee's invite state.
    alice, bob = matrix_user_factory("alice"), matrix_user_factory("bob")
    room_id = alice.create_room(preset="trusted_private_chat")
    path = f"{CLIENT}/rooms/{quote_id(room_id)}/state/m.room.member/{quote_id(bob.user_id)}"
    response = alice.request("PUT", path, {"membership": "invite", "is_direct": True})
    assert response.status_code == 200, response.text

    _, invite_state = bob.wait_for_invite(room_id=room_id)
    assert _is_direct_invite(invite_state, bob.user_id)


def test_an_overridden_rate_limit_answers_429(synapse, synapse_admin, matrix_user_factory):
    bob = matrix_user_factory("bob")
    room_id = bob.create_room(preset="private_chat")
    synapse.override_ratelimit(synapse_admin, bob.user_id, messages_per_second=1, burst_count=1)

    def send():
        txn_id = uuid.uuid4().hex
        return bob.request(
            "PUT",
            f"{CLIENT}/rooms/{quote_id(room_id)}/send/m.room.message/{txn_id}",
            {"msgtype": "m.text", "body": txn_id},
        )

    try:
        # The bucket already holds bob's own room's events (createRoom, joins count too), so
        # the first sends under the override may be refused: send until one goes through
        # (each 429 comes after Synapse's half-second pause), then the next, at once, is not.
        wait_until(
            lambda: send().status_code == 200,
            deadline=10,
            what="a send under the override",
        )
        response = send()
        assert response.status_code == 429, response.text
        body = response.json()
        assert body["errcode"] == "M_LIMIT_EXCEEDED"
        assert 0 < body["retry_after_ms"] <= 1000
        assert response.headers["Retry-After"] == "1"
    finally:
        synapse.clear_ratelimit(synapse_admin, bob.user_id)
    assert bob.send_text(room_id, "unlimited again")
    assert bob.send_text(room_id, "and again")


def test_override_ratelimit_takes_whole_numbers_only(synapse, synapse_admin, matrix_user_factory):
    bob = matrix_user_factory("bob")
    with pytest.raises(MatrixError) as raised:
        synapse.override_ratelimit(synapse_admin, bob.user_id, 0.01, 1)
    assert raised.value.status == 400
    assert raised.value.body["errcode"] == "M_INVALID_PARAM"


def test_a_restart_keeps_the_data(synapse, matrix_user_factory):
    alice = matrix_user_factory("alice")
    room_id = alice.create_room(preset="private_chat")
    alice.send_text(room_id, "before the restart")
    url = synapse.url

    synapse.restart()

    assert synapse.url == url
    assert alice.sync()["rooms"]["join"][room_id]
    assert "before the restart" in _texts(alice.messages(room_id))
    alice.send_text(room_id, "after the restart")
