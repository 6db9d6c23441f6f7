"""Every write on the mail outbox: a mail queued, and the sweep that re-queues a lost one.

Callers (accounts: a password changed, a reset asked for, an address to verify) queue a mail
in the transaction of what it reports; the worker sends it after commit (mail.tasks).
"""

from __future__ import annotations

import re

from django.db import transaction
from django.template.loader import render_to_string

from core import outbox
from core.fields import to_ms
from mail.models import MailStatus, OutboundMail
from mail.tasks import schedule_mail

SUBJECT_MAX = 200


def mail_render(*, template: str, context: dict) -> tuple[str, str, str]:
    """(subject, plain text, HTML) of mail `template`, from its three templates in
    mail/templates/mail/: `<template>.subject.txt`, `<template>.txt` and `<template>.html`.
    The subject is one line; the HTML part extends mail/base.html."""
    context = {"site_name": "Relay", **context}
    subject = render_to_string(f"mail/{template}.subject.txt", context)
    subject = re.sub(r"\s+", " ", subject).strip()[:SUBJECT_MAX]
    text = render_to_string(f"mail/{template}.txt", context)
    html = render_to_string(f"mail/{template}.html", context)
    return subject, text, html


def mail_queue(
    *,
    to: str,
    template: str,
    context: dict,
    topic: str = "",
    attachment: str = "",
    attachment_name: str = "",
) -> OutboundMail:
    """Render mail `template` for `to` and write it to the outbox with its task, in the
    caller's transaction: it is sent if and only if the caller commits, by the worker, never
    by the request. `topic` lets the caller find it again (mail_topic_since, mail_withdraw);
    `attachment` names a file of the recordings storage attached at sending as
    `attachment_name`. Raises TemplateDoesNotExist for a template that is missing a part."""
    subject, text, html = mail_render(template=template, context=context)
    with transaction.atomic():
        row = OutboundMail.objects.create(
            to=to,
            template=template,
            subject=subject,
            text_body=text,
            html_body=html,
            topic=topic[:120],
            attachment=attachment,
            attachment_name=attachment_name[:100],
        )
        schedule_mail(row)
    return row


def mail_topic_since(*, topic: str, since) -> bool:
    """Whether a mail about `topic` was queued at or after `since` (sent or not)."""
    return OutboundMail.objects.filter(topic=topic, created_at__gte=since).exists()


def mail_withdraw(*, topic: str) -> int:
    """Delete the mail about `topic` not sent yet (what it reports was deleted: a voicemail
    and its transcript), in the caller's transaction; return how many. Mail already sent is
    gone from Relay's hands, and its row is blank."""
    deleted, _ = OutboundMail.objects.filter(topic=topic, status=MailStatus.PENDING).delete()
    return deleted


def mail_export(*, user) -> dict:
    """The mail's part of a user's export (core.userdata): what was mailed to their
    addresses, when and how it went; never the parts (blanked once sent)."""
    return {
        "mail": [
            {
                "kind": row.template,
                "to": row.to,
                "subject": row.subject,
                "status": row.status,
                "createdAt": to_ms(row.created_at),
                "sentAt": to_ms(row.sent_at),
            }
            for row in _mail_of(user).order_by("-created_at", "-id")
        ]
    }


def mail_erase(*, user) -> None:
    """Delete every mail to the user's addresses, sent or not (the deletion of their
    account, in its transaction): nothing of an address may outlive its account here."""
    _mail_of(user).delete()


def _mail_of(user):
    addresses = [address for address in (user.email, user.email_pending) if address]
    return OutboundMail.objects.filter(to__in=addresses)


def mails_sweep() -> int:
    """Re-queue pending mail whose task was lost (a worker periodic pass)."""
    return outbox.sweep(OutboundMail.objects, schedule_mail)
