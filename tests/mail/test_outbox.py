"""The mail outbox against a real SMTP server (aiosmtpd: STARTTLS or TLS from the first byte,
a login, a certificate of the test's own CA): a mail is sent by the worker, never the
request, with both parts; a transient failure is retried with backoff, a permanent one or the
last try gives up with a log line; and no link of a mail reaches a log."""

import logging
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from mail.models import MailStatus, OutboundMail
from mail.services import mail_queue, mails_sweep
from mail.tasks import mail_attempt
from tests.smtp import Mailbox, SmtpServer, transport_settings

pytestmark = pytest.mark.django_db

SECRET_LINK = "https://relay.example.com/console/password-reset/s3cr3t-t0ken-value"


def queue_reset(to="ann@example.com") -> OutboundMail:
    return mail_queue(
        to=to,
        template="password_reset",
        context={"email": to, "reset_url": SECRET_LINK, "valid_minutes": 30},
    )


def test_a_queued_mail_arrives_over_starttls_with_a_login_and_both_parts(mailbox, settings):
    settings.EMAIL_FROM = settings.DEFAULT_FROM_EMAIL = "Relay <no-reply@relay.example.com>"
    queue_reset()
    assert mailbox.messages == []  # queued, not sent by the caller

    message = mailbox.only("ann@example.com")

    assert message.mail_from == "no-reply@relay.example.com"
    headers = message.message
    assert headers["Subject"] == "Reset your Relay password"
    assert headers["From"] == "Relay <no-reply@relay.example.com>"
    assert headers["To"] == "ann@example.com"
    assert headers["Auto-Submitted"] == "auto-generated"
    assert headers["Message-ID"].endswith("@relay.example.com>")
    assert headers.get_content_type() == "multipart/alternative"
    assert SECRET_LINK in message.text
    assert message.links() == [SECRET_LINK]
    assert f'href="{SECRET_LINK}"' in message.html
    assert "<html" in message.html and "<html" not in message.text


def test_a_sent_mail_keeps_no_parts_and_is_not_sent_twice(mailbox):
    row = queue_reset()
    mailbox.delivered()
    row.refresh_from_db()
    assert (row.status, row.attempts, row.text_body, row.html_body) == (MailStatus.SENT, 1, "", "")
    assert row.sent_at is not None
    assert mail_attempt(mail_id=row.pk) is None  # no longer pending
    assert len(mailbox.delivered()) == 1


@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")  # TLS from byte one
def test_mail_over_tls_from_the_first_byte(settings, smtp_ca):
    server = SmtpServer(smtp_ca, implicit_tls=True)
    server.start()
    try:
        transport_settings(settings, server)
        assert settings.EMAIL_USE_SSL and not settings.EMAIL_USE_TLS
        queue_reset()
        assert Mailbox(server).only("ann@example.com").links() == [SECRET_LINK]
    finally:
        server.stop()


def test_a_server_certificate_the_ca_file_does_not_vouch_for_is_refused(mailbox, settings):
    settings.EMAIL_CA_FILE = ""  # the system's CAs know nothing of the test's own
    row = queue_reset()
    assert mailbox.delivered() == []
    row.refresh_from_db()
    assert row.status == MailStatus.PENDING and row.attempts == 1
    assert "certificate verify failed" in row.last_error.lower()


def test_nothing_is_sent_when_the_transaction_rolls_back(mailbox):
    with pytest.raises(RuntimeError), transaction.atomic():
        queue_reset()
        raise RuntimeError("the change the mail was about failed")
    assert OutboundMail.objects.count() == 0
    assert mailbox.delivered() == []


def test_a_transient_refusal_is_retried_with_backoff_then_sent(mailbox, caplog):
    mailbox.answer_next("451 4.3.0 Try again later")
    row = queue_reset()
    before = timezone.now()
    assert mailbox.delivered() == []  # the retry is not due yet

    row.refresh_from_db()
    assert (row.status, row.attempts) == (MailStatus.PENDING, 1)
    assert "451" in row.last_error
    # outbox.backoff: 30 s, within +-20%
    assert timedelta(seconds=23) <= row.next_attempt_at - before <= timedelta(seconds=37)

    OutboundMail.objects.filter(pk=row.pk).update(next_attempt_at=timezone.now())
    with caplog.at_level(logging.INFO, logger="mail.tasks"):
        mail_attempt(mail_id=row.pk)  # its task, come due
    assert mailbox.only("ann@example.com").links() == [SECRET_LINK]
    row.refresh_from_db()
    assert (row.status, row.attempts) == (MailStatus.SENT, 2)
    assert SECRET_LINK not in caplog.text and "s3cr3t" not in caplog.text


def test_a_permanent_refusal_gives_up_at_once_with_a_log_line(mailbox, caplog):
    mailbox.answer_next("550 5.1.1 No such mailbox")
    row = queue_reset()
    with caplog.at_level(logging.INFO, logger="mail.tasks"):
        assert mailbox.delivered() == []
    row.refresh_from_db()
    assert (row.status, row.attempts, row.text_body) == (MailStatus.FAILED, 1, "")
    assert f"mail {row.pk} (password_reset) given up after 1 attempt(s): SMTP 550" in caplog.text
    assert "s3cr3t" not in caplog.text


def test_the_last_try_gives_up_with_a_log_line(mailbox, settings, caplog):
    settings.MAIL_MAX_ATTEMPTS = 3
    mailbox.answer_next(*["421 4.7.0 Too busy"] * 3)
    row = queue_reset()
    with caplog.at_level(logging.INFO, logger="mail.tasks"):
        for _ in range(3):
            OutboundMail.objects.filter(pk=row.pk).update(next_attempt_at=timezone.now())
            mail_attempt(mail_id=row.pk)
    row.refresh_from_db()
    assert (row.status, row.attempts) == (MailStatus.FAILED, 3)
    assert "given up after 3 attempt(s): SMTP 421" in caplog.text
    assert mailbox.delivered() == []


def test_an_unreachable_server_is_a_transient_failure(mailbox, settings):
    from harness.ports import free_port

    settings.EMAIL_PORT = free_port()  # nothing listens there
    row = queue_reset()
    mailbox.delivered()
    row.refresh_from_db()
    assert (row.status, row.attempts) == (MailStatus.PENDING, 1)
    assert "ConnectionRefusedError" in row.last_error


def test_a_wrong_smtp_login_is_retried_not_lost(mailbox, settings):
    settings.EMAIL_HOST_PASSWORD = "not-the-password"
    row = queue_reset()
    mailbox.delivered()
    row.refresh_from_db()
    assert (row.status, row.attempts) == (MailStatus.PENDING, 1)
    assert "refused our login (535)" in row.last_error


def test_the_sweep_queues_a_mail_whose_task_was_lost(mailbox):
    row = queue_reset()
    from django_tasks_db.models import DBTaskResult

    DBTaskResult.objects.all().delete()  # the task is lost; the row is still pending
    assert mailbox.delivered() == []
    OutboundMail.objects.filter(pk=row.pk).update(
        next_attempt_at=timezone.now() - timedelta(minutes=2)
    )
    assert mails_sweep() == 1
    assert mailbox.only("ann@example.com").links() == [SECRET_LINK]


def test_the_console_transport_prints_the_mail_with_its_link(settings, capsys):
    settings.EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
    row = queue_reset()
    from tests.conftest import drain_tasks

    drain_tasks()
    printed = capsys.readouterr().out
    assert "Subject: Reset your Relay password" in printed
    assert SECRET_LINK in printed
    row.refresh_from_db()
    assert row.status == MailStatus.SENT


def test_the_file_transport_writes_each_mail_to_the_folder(settings, tmp_path):
    settings.EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
    settings.EMAIL_FILE_PATH = str(tmp_path)
    queue_reset()
    from tests.conftest import drain_tasks

    drain_tasks()
    (written,) = tmp_path.iterdir()
    assert SECRET_LINK in written.read_text()
