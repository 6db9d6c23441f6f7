"""The missed-call and voicemail mail of a shared number (issue 57), read at a real SMTP
server: each member who turned it on for that number gets their own, beside the owner's
(whose account switches work as before); a member's account switches are for their own
numbers; nobody else, and no member removed, gets any."""

from __future__ import annotations

import pytest

from history.services import call_record_recording_delete, record_inbound_call
from mail.models import OutboundMail
from tests.factories import NumberFactory, NumberMemberFactory, UserFactory, voicemail_on
from tests.numbers.test_members import client_of

pytestmark = pytest.mark.django_db

CALLER = "+447700900123"


@pytest.fixture(autouse=True)
def _public_url(settings):
    settings.PUBLIC_URL = "https://relay.example.com"


@pytest.fixture
def owner():
    return UserFactory(
        email="owner@example.com", email_verified=True, voicemail_email=True, missed_call_email=True
    )


@pytest.fixture
def number(owner):
    return NumberFactory(owner=owner, alias="Shop")


def member_of(number, email: str, **switches):
    """A member of `number` whose address is verified, with these account switches; their
    switches for the number are set through the API, as they would set them."""
    user = UserFactory(email=email, email_verified=True, **switches)
    NumberMemberFactory(number=number, user=user)
    return user


def switch(user, number, **values) -> None:
    answer = client_of(user).put(f"/api/numbers/shared/{number.pk}", values, format="json")
    assert answer.status_code == 200, answer.content


def missed(number):
    return record_inbound_call(number=number, caller_num=CALLER, status="missed", duration=0)


def recipients(mailbox) -> list[str]:
    return sorted(to for message in mailbox.delivered() for to in message.rcpt_tos)


def test_a_missed_call_is_mailed_to_the_owner_and_each_member_who_turned_it_on(mailbox, number):
    sam = member_of(number, "sam@example.com")
    switch(sam, number, missedCallEmail=True)
    # their account's switch is for their own numbers: not this one
    member_of(number, "kim@example.com", missed_call_email=True, voicemail_email=True)
    UserFactory(email="out@example.com", email_verified=True, missed_call_email=True)

    record = missed(number)

    assert recipients(mailbox) == ["owner@example.com", "sam@example.com"]
    received = mailbox.only("sam@example.com")
    assert CALLER in received.text and number.number in received.text
    assert received.links()[-1] == f"https://relay.example.com/history/{record.pk}"


def test_each_recipient_has_their_own_ten_minutes_of_quiet(mailbox, number):
    sam = member_of(number, "sam@example.com")
    missed(number)  # the owner's mail; Sam had not turned his on yet
    switch(sam, number, missedCallEmail=True)

    missed(number)  # Sam's first: the owner's quiet does not silence it
    missed(number)  # nobody's: both within their ten minutes

    assert recipients(mailbox) == ["owner@example.com", "sam@example.com"]


def test_the_owners_switches_off_leave_the_members_mail(mailbox, owner, number):
    owner.missed_call_email = owner.voicemail_email = False
    owner.save(update_fields=["missed_call_email", "voicemail_email"])
    sam = member_of(number, "sam@example.com")
    switch(sam, number, missedCallEmail=True, voicemailEmail=True)

    missed(number)
    voicemail_on(number, caller="+447700900999")

    delivered = mailbox.delivered()
    assert sorted(m.message["Subject"].split()[0] for m in delivered) == ["Missed", "Voicemail"]
    assert {to for m in delivered for to in m.rcpt_tos} == {"sam@example.com"}


def test_a_voicemail_is_mailed_with_its_audio_as_the_member_chose(mailbox, number):
    sam = member_of(number, "sam@example.com", attach_audio=False)
    switch(sam, number, voicemailEmail=True)

    record = voicemail_on(number, seconds=1.0)

    received = mailbox.only("sam@example.com")
    assert received.message["Subject"] == f"Voicemail from {CALLER} to Shop (1 s)"
    assert list(received.message.iter_attachments()) == []  # Sam's choice, not the owner's
    assert f"https://relay.example.com/history/{record.pk}" in received.links()
    owners = mailbox.only("owner@example.com")
    assert len(list(owners.message.iter_attachments())) == 1


def test_a_message_deleted_before_its_mail_left_takes_every_copy_with_it(mailbox, number):
    sam = member_of(number, "sam@example.com")
    switch(sam, number, voicemailEmail=True)
    record = voicemail_on(number)
    assert OutboundMail.objects.filter(template="voicemail").count() == 2

    call_record_recording_delete(record=record)

    assert mailbox.delivered() == []


def test_a_member_removed_or_unverified_gets_no_mail(mailbox, settings, number):
    settings.REQUIRE_EMAIL_VERIFICATION = True
    gone = member_of(number, "gone@example.com")
    switch(gone, number, missedCallEmail=True, voicemailEmail=True)
    unverified = member_of(number, "new@example.com")
    switch(unverified, number, missedCallEmail=True)
    unverified.email_verified = False
    unverified.save(update_fields=["email_verified"])
    left = client_of(gone).delete(
        f"/api/numbers/{number.pk}/members/{number.members.get(user=gone).pk}"
    )
    assert left.status_code == 200

    missed(number)
    voicemail_on(number, caller="+447700900999")

    assert recipients(mailbox) == ["owner@example.com", "owner@example.com"]
