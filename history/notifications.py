"""Mail about calls to a user's numbers (the owner's switches: PUT /api/user/notifications):
a voicemail left, with its WAV attached or a link, and a missed call, at most one per caller
and number in MISSED_CALL_QUIET.

Each mail is queued in the transaction of what it reports (mail.services.mail_queue): a
voicemail's when its transcript is settled (history.tasks), or with its record when there
is none to wait for; a missed call's with its record. Nothing is mailed about a blocked
caller, nor to an address that must be verified first and is not.
"""

from __future__ import annotations

import re
from datetime import UTC, timedelta

from django.conf import settings
from django.utils import timezone

from accounts.models import User
from core.recordings import recordings_storage
from history.models import ANONYMOUS_CALLER, AnsweredBy, CallStatus, TranscriptStatus
from history.records import Record
from mail.links import public_url
from mail.services import mail_queue, mail_topic_since, mail_withdraw

MISSED_CALL_QUIET = timedelta(minutes=10)
MB = 1024 * 1024


def voicemail_topic(record: Record) -> str:
    return f"voicemail:{record.pk}"


def _missed_topic(record: Record) -> str:
    return f"missed:{record.number_id}:{record.caller_num}"


def _reachable(owner: User) -> bool:
    """Whether mail may go to the owner's address at all."""
    return bool(owner.email) and (owner.email_verified or not settings.REQUIRE_EMAIL_VERIFICATION)


def _missed(record: Record) -> bool:
    """A call the owner missed: nobody answered, or voicemail answered and nothing was left."""
    return record.status == CallStatus.MISSED or (
        record.status == CallStatus.ANSWERED
        and record.answered_by == AnsweredBy.VOICEMAIL
        and not record.recording
    )


def call_mail_queue(*, record: Record, owner: User) -> None:
    """The mail a newly written record calls for, in its transaction (record_inbound_call,
    which holds the number's row locked, so two calls at once cannot both pass the missed
    call's throttle). A voicemail whose transcript is pending is mailed by the task that
    settles it instead."""
    if record.status == CallStatus.BLOCKED or not _reachable(owner):
        return
    if record.recording:
        if owner.voicemail_email and record.transcript_status != TranscriptStatus.PENDING:
            _voicemail_mail(record, owner)
        return
    if not (owner.missed_call_email and _missed(record)):
        return
    topic = _missed_topic(record)
    if mail_topic_since(topic=topic, since=timezone.now() - MISSED_CALL_QUIET):
        return
    mail_queue(
        to=owner.email,
        template="missed_call",
        context={**_about(record), "quiet_minutes": int(MISSED_CALL_QUIET.total_seconds() // 60)},
        topic=topic,
    )


def voicemail_mail_queue(*, record: Record) -> None:
    """The voicemail's mail once its transcript is settled (done or failed), in the
    transaction that settles it: when the owner wants it, and the message is still there."""
    owner = User.objects.filter(pk=record.owner_id).first()
    if owner is None or not record.recording or not _reachable(owner):
        return
    if owner.voicemail_email and record.status != CallStatus.BLOCKED:
        _voicemail_mail(record, owner)


def voicemail_mail_withdraw(*, record: Record) -> None:
    """The message was deleted: its mail, with its transcript, goes too unless it has left."""
    mail_withdraw(topic=voicemail_topic(record))


def _voicemail_mail(record: Record, owner: User) -> None:
    limit = settings.VOICEMAIL_EMAIL_MAX_MB * MB
    size = _size(record.recording)
    attached = owner.attach_audio and size is not None and size <= limit
    name = _attachment_name(record)
    confidence = record.transcript_confidence
    mail_queue(
        to=owner.email,
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
            "too_large": owner.attach_audio and size is not None and size > limit,
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
