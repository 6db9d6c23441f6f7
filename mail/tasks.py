"""The mail outbox's side of the worker: one attempt sends one due mail through EMAIL_URL's
transport and records the outcome. A transient failure (the server unreachable, a 4xx
answer, a login it refused) is retried with backoff, MAIL_MAX_ATTEMPTS times in all; a
permanent one (a 5xx answer: no such mailbox) ends the mail at once. Either end is logged,
with the mail's id and kind only: never its address, its links or a token."""

from __future__ import annotations

import logging
import smtplib
from datetime import timedelta
from email.utils import make_msgid, parseaddr

from django.conf import settings
from django.core.mail import EmailMultiAlternatives, get_connection
from django.db import transaction
from django.utils import timezone
from django_tasks import task

from core import outbox
from core.recordings import recordings_storage
from mail.models import MailStatus, OutboundMail

logger = logging.getLogger(__name__)


@task()
def send_mail(mail_id: int) -> None:
    mail_attempt(mail_id=mail_id)


def schedule_mail(row: OutboundMail) -> None:
    """Enqueue `row`'s attempt at its next_attempt_at, in the caller's transaction."""
    outbox.schedule(send_mail, row, mail_id=row.pk)


def _lease() -> timedelta:
    # Longer than one attempt can take: connect, greeting, STARTTLS, login and data, each
    # bounded by EMAIL_TIMEOUT.
    return timedelta(seconds=max(60.0, 8 * settings.EMAIL_TIMEOUT))


def _message(row: OutboundMail) -> EmailMultiAlternatives:
    domain = parseaddr(settings.EMAIL_FROM)[1].rpartition("@")[2] or "localhost"
    message = EmailMultiAlternatives(
        subject=row.subject,
        body=row.text_body,
        from_email=settings.EMAIL_FROM,
        to=[row.to],
        headers={
            # Django would ask the resolver for this host's name (socket.getfqdn), which can
            # take seconds; the sender's domain names the message instead.
            "Message-ID": make_msgid(domain=domain),
            "Auto-Submitted": "auto-generated",  # RFC 3834: no vacation replies to us
        },
    )
    message.attach_alternative(row.html_body, "text/html")
    if row.attachment:
        data = _attachment(row.attachment)
        if data is not None:
            message.attach(row.attachment_name or "attachment.wav", data, "audio/wav")
    return message


def _attachment(name: str) -> bytes | None:
    """The file `name` of the recordings storage, or None when it is gone (deleted since)."""
    try:
        with recordings_storage().open(name, "rb") as file:
            return file.read()
    except FileNotFoundError:
        return None


def _failure(exc: Exception) -> tuple[bool, str]:
    """(transient?, what to record) for an exception of one attempt."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        codes = [code for code, _ in exc.recipients.values()]
        transient = all(400 <= code < 500 for code in codes)
        return transient, f"recipient refused ({', '.join(map(str, codes))})"
    if isinstance(exc, smtplib.SMTPAuthenticationError):
        return True, f"the SMTP server refused our login ({exc.smtp_code})"
    if isinstance(exc, smtplib.SMTPResponseException):
        detail = exc.smtp_error
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        return not 500 <= exc.smtp_code < 600, f"SMTP {exc.smtp_code} {detail}"[:300]
    return True, f"{type(exc).__name__}: {exc}"[:300]


def mail_attempt(*, mail_id: int) -> OutboundMail | None:
    """Send one due mail unless another worker holds it; record the outcome and schedule
    the retry. Returns the row when it was tried."""
    if not outbox.claim(OutboundMail.objects, mail_id, lease=_lease()):
        return None
    row = OutboundMail.objects.get(pk=mail_id)
    error, transient = "", False
    try:
        with get_connection(fail_silently=False) as connection:
            connection.send_messages([_message(row)])
    except Exception as exc:  # every failure is recorded; none may kill the worker
        transient, error = _failure(exc)
    _record_outcome(row, error=error, transient=transient)
    return row


def _record_outcome(row: OutboundMail, *, error: str, transient: bool) -> None:
    now = timezone.now()
    row.attempts += 1
    row.lease_until, row.last_error = None, error
    ended = not error or not transient or row.attempts >= settings.MAIL_MAX_ATTEMPTS
    with transaction.atomic():
        if not error:
            row.status, row.sent_at = MailStatus.SENT, now
        elif ended:
            row.status = MailStatus.FAILED
        else:
            row.next_attempt_at = now + outbox.backoff(row.attempts)
        if ended:
            row.text_body = row.html_body = ""  # may carry a secret link; no longer needed
        row.save(
            update_fields=[
                "attempts",
                "lease_until",
                "last_error",
                "status",
                "sent_at",
                "next_attempt_at",
                "text_body",
                "html_body",
            ]
        )
        if not ended:
            schedule_mail(row)
    if not error:
        logger.info("mail %s (%s) sent", row.pk, row.template)
    elif ended:
        logger.warning(
            "mail %s (%s) given up after %d attempt(s): %s",
            row.pk,
            row.template,
            row.attempts,
            error,
        )
    else:
        logger.info("mail %s (%s) failed, retrying: %s", row.pk, row.template, error)
