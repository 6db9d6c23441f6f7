"""Inbound calls whatever happens to the agent: killed while a call rings, or over TCP."""

from __future__ import annotations

import pytest

from calls.models import Call, Leg
from harness.live import AgentProcess, wait_until
from harness.ports import free_port, tcp_listening, udp_port_taken
from harness.sip import Sipp, free_udp_port
from history.records import Record
from tests.factories import BlockedCallerFactory, NumberFactory
from tests.records import records_count
from tests.telephony.conftest import CALLER, call_in, sip_env, wait_for_records

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


def killed_and_recorded_by_the_next(first: AgentProcess, tmp_path, env, number) -> Record:
    """Kill the agent holding a call to `number`, start another: the call's one record,
    written by the other's recovery."""
    first.kill()
    assert not records_count() > 0  # it died holding the call

    second = AgentProcess(tmp_path, env, name="second")
    try:
        [record] = wait_for_records(number, 1)
    finally:
        second.stop()
    return record


def test_a_call_ringing_on_a_killed_agent_is_recorded_once_by_the_next(user, tmp_path):
    number = NumberFactory(owner=user)
    env = sip_env(
        tmp_path,
        free_udp_port(),
        INBOUND_RING_SECONDS=60,
        CALL_RECOVERY_GRACE=2,
        CALL_RECOVERY_INTERVAL=0.5,
    )
    first = AgentProcess(tmp_path, env, name="first")
    caller = call_in(
        env["SIP_BIND"],
        tmp_path,
        "inbound_ring",
        number.number,
        ring_ms=30000,
    )
    try:
        ledger = wait_until(
            lambda: Call.objects.filter(direction="inbound", number=number).first(),
            deadline=30,
            what="the agent to take the call",
        )
        record = killed_and_recorded_by_the_next(first, tmp_path, env, number)
    finally:
        first.stop()
        caller.stop()

    assert (record.status, record.duration, record.caller_num) == ("missed", 0, CALLER)
    assert record.sip_call_id == ledger.sip_call_id
    ledger.refresh_from_db()
    assert (ledger.status, ledger.outcome) == ("no_answer", "missed")
    assert records_count() == 1


def test_a_call_over_tcp_is_taken_like_one_over_udp(user, tmp_path):
    number = NumberFactory(owner=user)
    env = sip_env(tmp_path, free_port(), SIP_TRANSPORT="tcp", SIP_BIND=f"127.0.0.1:{free_port()}")
    agent = AgentProcess(tmp_path, env)
    try:
        port = int(env["SIP_BIND"].rsplit(":", 1)[1])
        wait_until(lambda: tcp_listening(port), deadline=30, what="the agent on TCP")
        caller = Sipp(
            tmp_path / "sipp",
            "inbound_cancel",
            port=free_port(),
            remote=env["SIP_BIND"],
            service=number.number,
            caller=CALLER,
            tcp=True,
            resend="",
        )
        assert caller.finish(30) == 0, caller
        [record] = wait_for_records(number, 1)
    finally:
        agent.stop()

    assert (record.status, record.caller_num) == ("missed", CALLER)


@pytest.mark.parametrize(
    ("sources", "answer"), [("", 403), ("127.0.0.0/8", 603), ("10.0.0.1,any", 603)]
)
def test_only_the_trunk_and_the_listed_sources_may_call_in(user, tmp_path, sources, answer):
    number = NumberFactory(owner=user)
    BlockedCallerFactory(number=number, caller_num=CALLER)
    # The trunk is 127.0.0.2; SIPp calls from 127.0.0.1.
    env = sip_env(tmp_path, free_udp_port(), SIP_INBOUND_SOURCES=sources)
    env["SIP_TRUNK_URI"] = env["SIP_TRUNK_URI"].replace("127.0.0.1", "127.0.0.2")
    agent = AgentProcess(tmp_path, env)
    try:
        port = int(env["SIP_BIND"].rsplit(":", 1)[1])
        wait_until(lambda: udp_port_taken(port), deadline=30, what="the agent")
        caller = call_in(
            env["SIP_BIND"],
            tmp_path,
            "inbound_refused",
            number.number,
            status=answer,
        )
        assert caller.finish(30) == 0, caller
        if answer == 603:
            wait_until(
                lambda: records_count(number=number, status="blocked") > 0,
                deadline=30,
                what="the blocked call's record",
            )
    finally:
        agent.stop()

    assert records_count(number=number) == (answer == 603)
    assert Call.objects.filter(direction="inbound", number=number).count() == (answer == 603)


TARGET = "+441134960200"


def test_a_bridge_on_a_killed_agent_is_recorded_forwarded_once_and_never_dialled_again(
    user, tmp_path
):
    number = NumberFactory(owner=user, greeting="Hi.", forward_targets=[TARGET])
    trunk_port = free_udp_port()
    env = sip_env(tmp_path, trunk_port, CALL_RECOVERY_GRACE=2, CALL_RECOVERY_INTERVAL=0.5)
    target = Sipp(
        tmp_path / "target",
        "forward_target",
        port=trunk_port,
        answering=r"\+441134960200",
        codec=0,
        codec_name="PCMU",
        answer_ms=0,
        actions="",
    )
    first = AgentProcess(tmp_path, env, name="first")
    caller = call_in(
        env["SIP_BIND"],
        tmp_path,
        "inbound_message",
        number.number,
        greeting_ms=0,
        message_ms=60000,
    )
    try:
        ledger = wait_until(
            lambda: Call.objects.filter(
                direction="inbound", number=number, answered_by="person"
            ).first(),
            deadline=30,
            what="the agent to bridge the call",
        )
        record = killed_and_recorded_by_the_next(first, tmp_path, env, number)
    finally:
        first.stop()
        caller.stop()
        target.stop()

    assert (record.status, record.answered_by, record.forwarded_to) == (
        "answered",
        "forward",
        TARGET,
    )
    assert record.sip_call_id == ledger.sip_call_id
    assert len(target.invites()) == 1  # the next agent dialled nobody
    assert records_count() == 1


def test_a_call_whose_legs_would_not_fit_the_agent_goes_to_voicemail(user, tmp_path):
    # Room for two calls: the caller's and one leg, where the number forwards to two targets.
    number = NumberFactory(owner=user, greeting="Hi.", forward_targets=[TARGET, "+441134960201"])
    env = sip_env(tmp_path, free_udp_port(), SIP_MAX_CONCURRENT_CALLS=2, INBOUND_RING_SECONDS=1)
    agent = AgentProcess(tmp_path, env)
    try:
        caller = call_in(
            env["SIP_BIND"],
            tmp_path,
            "inbound_message",
            number.number,
            greeting_ms=1500,
            message_ms=3000,
        )
        assert caller.finish() == 0, caller
        [record] = wait_for_records(number, 1)
    finally:
        agent.stop()

    assert (record.status, record.answered_by) == ("answered", "voicemail")
    assert not Leg.objects.exists()  # no target was dialled


def test_a_call_an_application_answered_on_a_killed_agent_is_recorded_as_the_apps(user, tmp_path):
    # The number's application answers and pauses; its agent dies mid-call. The next agent's
    # recovery records the call once, answered by the application (not by voicemail).
    from voiceapps.services import voice_app_set
    from voiceapps.verbs import script_check

    number = NumberFactory(owner=user)
    voice_app_set(number=number, script=script_check([{"pause": {"seconds": 60}}]))
    env = sip_env(tmp_path, free_udp_port(), CALL_RECOVERY_GRACE=2, CALL_RECOVERY_INTERVAL=0.5)
    first = AgentProcess(tmp_path, env, name="first")
    caller = call_in(env["SIP_BIND"], tmp_path, "inbound_wait_bye", number.number)
    try:
        wait_until(
            lambda: Call.objects.filter(
                direction="inbound", number=number, answered_at__isnull=False
            ).exists(),
            deadline=30,
            what="the application to answer",
        )
        record = killed_and_recorded_by_the_next(first, tmp_path, env, number)
    finally:
        first.stop()
        caller.stop()

    assert (record.status, record.answered_by) == ("answered", "app")
    assert records_count() == 1
