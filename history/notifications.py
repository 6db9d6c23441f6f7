"""Mail about calls to a user's numbers (the owner's switches: PUT /api/user/notifications;
a member's of a shared number: PUT /api/numbers/shared/:id):
a voicemail left, with its WAV attached or a link, and a missed call, at most one per caller
and number in MISSED_CALL_QUIET.

Each mail is queued in the transaction of what it reports (mail.services.mail_queue): a
voicemail's when its transcript is settled (history.tasks), or with its record when there
is none to wait for; a missed call's with its record. Nothing is mailed about a blocked
caller, nor to an address that must be verified first and is not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, timedelta

from django.conf import settings
from django.utils import timezone

from accounts.models import User
from core.recordings import recordings_storage
from history.models import ANONYMOUS_CALLER, AnsweredBy, CallStatus, TranscriptStatus
from history.records import Record
from mail.links import public_url
from mail.services import mail_queue, mail_topic_since, mail_withdraw
from virtual_numbers.selectors import number_members_mailed

MISSED_CALL_QUIET = timedelta(minutes=10)
MB = 1024 * 1024


def voicemail_topic(record: Record) -> str:
    return f"voicemail:{record.pk}"


def _missed_topic(record: Record) -> str:
    return f"missed:{record.number_id}:{record.caller_num}"


def _reachable(user: User) -> bool:
    """Whether mail may go to the user's address at all."""
    return bool(user.email) and (user.email_verified or not settings.REQUIRE_EMAIL_VERIFICATION)


def _missed(record: Record) -> bool:
    """A call the owner missed: nobody answered, or voicemail answered and nothing was left."""
    return record.status == CallStatus.MISSED or (
        record.status == CallStatus.ANSWERED
        and record.answered_by == AnsweredBy.VOICEMAIL
        and not record.recording
    )


@dataclass(frozen=True)
class Recipient:
    """Someone told of a number's calls by mail, with their switches for that number: its
    owner with their account's (PUT /api/user/notifications), or a member with theirs for
    the number (PUT /api/numbers/shared/:id, issue 57)."""

    user: User
    voicemail: bool
    missed_call: bool
    member: bool

    def missed_topic(self, record: Record) -> str:
        """The throttle of their missed-call mail: a member's is their own, so that the
        owner's mail (or another member's) does not silence theirs."""
        topic = _missed_topic(record)
        return f"{topic}:{self.user.pk}" if self.member else topic


def recipients_of(record: Record, *, owner: User | None) -> list[Recipient]:
    """Who may be mailed about the record's number: the owner, then its active members who
    turned a mail on for it, each only while mail may reach their address. Read in the
    transaction that reports the call: a member removed a moment before is not among them."""
    mailed = []
    if owner is not None:
        mailed.append(Recipient(owner, owner.voicemail_email, owner.missed_call_email, False))
    mailed += [
        Recipient(row.user, row.voicemail_email, row.missed_call_email, True)
        for row in number_members_mailed(number_id=record.number_id)
    ]
    return [recipient for recipient in mailed if _reachable(recipient.user)]


def call_mail_queue(*, record: Record, owner: User) -> None:
    """The mail a newly written record calls for, in its transaction (record_inbound_call,
    which holds the number's row locked, so two calls at once cannot both pass the missed
    call's throttle), to the owner and to each member who wants it (recipients_of). A
    voicemail whose transcript is pending is mailed by the task that settles it instead."""
    if record.status == CallStatus.BLOCKED:
        return
    for recipient in recipients_of(record, owner=owner):
        if record.recording:
            if recipient.voicemail and record.transcript_status != TranscriptStatus.PENDING:
                _voicemail_mail(record, recipient.user)
            continue
        if recipient.missed_call and _missed(record):
            _missed_call_mail(record, recipient)


def _missed_call_mail(record: Record, recipient: Recipient) -> None:
    topic = recipient.missed_topic(record)
    if mail_topic_since(topic=topic, since=timezone.now() - MISSED_CALL_QUIET):
        return
    mail_queue(
        to=recipient.user.email,
        template="missed_call",
        context={**_about(record), "quiet_minutes": int(MISSED_CALL_QUIET.total_seconds() // 60)},
        topic=topic,
    )


def voicemail_mail_queue(*, record: Record) -> None:
    """The voicemail's mail once its transcript is settled (done or failed), in the
    transaction that settles it: to the owner and each member who wants it, while the
    message is still there. One topic for all of them, so that deleting the message
    withdraws every copy not sent yet (voicemail_mail_withdraw)."""
    if not record.recording or record.status == CallStatus.BLOCKED:
        return
    owner = User.objects.filter(pk=record.owner_id).first()
    for recipient in recipients_of(record, owner=owner):
        if recipient.voicemail:
            _voicemail_mail(record, recipient.user)


def voicemail_mail_withdraw(*, record: Record) -> None:
    """The message was deleted: its mail, with its transcript, goes too unless it has left."""
    mail_withdraw(topic=voicemail_topic(record))


def _voicemail_mail(record: Record, to: User) -> None:
    limit = settings.VOICEMAIL_EMAIL_MAX_MB * MB
    size = _size(record.recording)
    attached = to.attach_audio and size is not None and size <= limit
    name = _attachment_name(record)
    confidence = record.transcript_confidence
    mail_queue(
        to=to.email,
        template="voicemail",
        context={
            **_about(record),
            "seconds": _seconds(record.recording_seconds),
            "transcript": record.transcript
            if record.transcript_status == TranscriptStatus.DONE
            else "",
            "confidence": None if confidence is None else round(confidence * 100),
            "transcript_failed": record.transcript_status == TranscriptStatus.FAILED,
            "transcript_empty": record.transcript_status == TranscriptStatus.DONE
            and not record.transcript,
            "attached": attached,
            "attachment_name": name,
            "too_large": to.attach_audio and size is not None and size > limit,
            "size_mb": f"{(size or 0) / MB:.1f}",
            "max_mb": f"{settings.VOICEMAIL_EMAIL_MAX_MB:g}",
        },
        topic=voicemail_topic(record),
        attachment=record.recording if attached else "",
        attachment_name=name if attached else "",
    )


def _about(record: Record) -> dict:
    number = record.number
    return {
        "caller": "an anonymous caller"
        if record.caller_num == ANONYMOUS_CALLER
        else record.caller_num,
        "number": number.number,
        "alias": number.alias,
        "at": record.created_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M"),
        "history_url": public_url(f"/history/{record.pk}"),
    }


def _seconds(seconds: float | None) -> str:
    return f"{seconds or 0:.0f}"


def _size(name: str) -> int | None:
    try:
        return recordings_storage().size(name)
    except OSError:  # gone already (deleted, purged): nothing to attach
        return None


def _attachment_name(record: Record) -> str:
    caller = re.sub(r"[^0-9A-Za-z+]", "", record.caller_num) or "caller"
    return f"voicemail-{caller}-{record.created_at:%Y%m%d-%H%M%S}.wav"
