"""Every write on the mail outbox: a mail queued, and the sweep that re-queues a lost one.

Callers (accounts: a password changed, a reset asked for, an address to verify) queue a mail
in the transaction of what it reports; the worker sends it after commit (mail.tasks).
"""

from __future__ import annotations

import re

from django.db import transaction
from django.template.loader import render_to_string

from core import outbox
from mail.models import OutboundMail
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


def mail_queue(*, to: str, template: str, context: dict) -> OutboundMail:
    """Render mail `template` for `to` and write it to the outbox with its task, in the
    caller's transaction: it is sent if and only if the caller commits, by the worker, never
    by the request. Raises TemplateDoesNotExist for a template that is missing a part."""
    subject, text, html = mail_render(template=template, context=context)
    with transaction.atomic():
        row = OutboundMail.objects.create(
            to=to, template=template, subject=subject, text_body=text, html_body=html
        )
        schedule_mail(row)
    return row


def mails_sweep() -> int:
    """Re-queue pending mail whose task was lost (a worker periodic pass)."""
    return outbox.sweep(OutboundMail.objects, schedule_mail)
