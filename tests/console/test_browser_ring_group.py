"""A ring group in Chromium (issue 57), against a real `manage.py runrelay` with the SIP agent:
SIPp is the caller and two phones (each its own SIPp, a sip: entry of the list), Chromium the
console of a member of the number. With `all`, the member's tab answers, and both phones get
CANCEL with RFC 3326's Reason; the record names the member."""

from __future__ import annotations

import re

import pytest

from harness.browser import launched_chromium
from harness.sip import Sipp, free_udp_port
from history.models import AnsweredBy, CallStatus
from tests.browser import KEEP_PEER_CONNECTIONS, NEEDS_CHROMIUM, opened_page
from tests.console.pages import log_in
from tests.factories import NumberFactory, NumberMemberFactory
from tests.telephony.conftest import agent_relay, call_in, wait_for_records
from virtual_numbers.selectors import number_shared_access
from virtual_numbers.services import member_remove

pytestmark = [pytest.mark.django_db(transaction=True), NEEDS_CHROMIUM, pytest.mark.timeout(300)]

DEADLINE_MS = 30_000
REASON = 'Reason: SIP;cause=200;text="Call completed elsewhere"'


@pytest.fixture(scope="module")
def relay(tmp_path_factory, django_db_setup):
    # The phones are on loopback: a ring list may name them only where private addresses are
    # allowed.
    process = agent_relay(tmp_path_factory.mktemp("ring-group"), WEBHOOK_ALLOW_PRIVATE="true")
    yield process
    process.stop()


@pytest.fixture(scope="module")
def chromium():
    with launched_chromium(
        "--use-fake-device-for-media-stream", "--autoplay-policy=no-user-gesture-required"
    ) as browser:
        yield browser


def ringing_phone(tmp_path, name: str) -> tuple[Sipp, str]:
    """A SIPp phone that rings until it is CANCELed, and its sip: URI."""
    port = free_udp_port()
    sipp = Sipp(
        tmp_path / name,
        "forward_target",
        port=port,
        answering="nobody-answers",
        codec="0",
        codec_name="PCMU",
        answer_ms=0,
        actions="",
    )
    return sipp, f"sip:{name}@127.0.0.1:{port}"


def test_a_members_tab_answers_and_both_phones_get_cancel_with_the_reason(
    real_hashers, relay, chromium, user, tmp_path
):
    number = NumberFactory(owner=user, alias="Shop", greeting="Hi.")
    member = NumberMemberFactory(number=number)
    desk, desk_uri = ringing_phone(tmp_path, "desk")
    till, till_uri = ringing_phone(tmp_path, "till")
    number.ring_entries = [
        {"sip": desk_uri},
        {"member": str(member.user_id)},
        {"sip": till_uri},
    ]
    number.forward_ring_seconds = 20
    number.save(update_fields=["ring_entries", "forward_ring_seconds"])

    with opened_page(chromium, width=1280, height=900) as page:
        page.context.grant_permissions(["microphone"], origin=relay.base)
        page.add_init_script(KEEP_PEER_CONNECTIONS)
        log_in(page, relay.base, member.user)
        page.get_by_role("switch", name=re.compile("Phone")).click()
        page.wait_for_selector("#phone[data-phone=on]", state="attached", timeout=DEADLINE_MS)

        caller = call_in(relay.agent, tmp_path, "inbound_wait_bye", number.number)
        answer = page.get_by_role("button", name="Answer")
        answer.wait_for(timeout=DEADLINE_MS)
        assert "Call from +447700900123 to Shop" in page.inner_text(".phone-caller")
        answer.click()
        hang_up = page.get_by_role("button", name="Hang up")
        hang_up.wait_for(timeout=DEADLINE_MS)
        assert desk.finish() == 0, desk  # cancelled once the tab was bridged
        assert till.finish() == 0, till
        hang_up.click()
        assert caller.finish() == 0, caller

    for phone in (desk, till):
        [cancel] = phone.received("CANCEL")
        assert REASON in cancel, cancel
    [record] = wait_for_records(number, 1)
    assert (record.status, record.answered_by, record.forwarded_to, record.ring_entry) == (
        CallStatus.ANSWERED,
        AnsweredBy.FORWARD,
        "browser",
        1,
    )
    assert (record.answered_member_id, record.answered_member_email) == (
        member.user_id,
        member.user.email,
    )


def test_a_member_removed_while_their_tab_rings_sees_it_stop(
    real_hashers, relay, chromium, user, tmp_path
):
    number = NumberFactory(owner=user, alias="Shop", greeting="Hi.")
    member = NumberMemberFactory(number=number)
    number.ring_entries = [{"member": str(member.user_id), "ringSeconds": 30}]
    number.save(update_fields=["ring_entries"])

    with opened_page(chromium, width=1280, height=900) as page:
        page.context.grant_permissions(["microphone"], origin=relay.base)
        log_in(page, relay.base, member.user)
        page.get_by_role("switch", name=re.compile("Phone")).click()
        page.wait_for_selector("#phone[data-phone=on]", state="attached", timeout=DEADLINE_MS)

        caller = call_in(
            relay.agent, tmp_path, "inbound_message", number.number, greeting_ms=0, message_ms=500
        )
        answer = page.get_by_role("button", name="Answer")
        answer.wait_for(timeout=DEADLINE_MS)
        access = number_shared_access(user=user, number_id=number.pk)
        member_remove(access=access, member=member)

        answer.wait_for(state="detached", timeout=DEADLINE_MS)
        assert "no longer a member" in page.inner_text(".phone-line")
        # Nobody else to ring: voicemail answers long before the entry's 30 s.
        assert caller.finish(timeout=20) == 0, caller

    [record] = wait_for_records(number, 1)
    assert (record.answered_by, record.answered_member_id) == (AnsweredBy.VOICEMAIL, None)
