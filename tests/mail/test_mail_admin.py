"""Staff read the mail outbox in admin (what was sent to whom and how it went) and change
nothing: no mail is added or edited there (ReadOnlyAdmin), and a mail's parts are not shown."""

from __future__ import annotations

import pytest

from mail.models import MailStatus, OutboundMail

pytestmark = pytest.mark.django_db


@pytest.fixture
def mail() -> OutboundMail:
    return OutboundMail.objects.create(
        to="alice@example.com",
        template="password_reset",
        subject="Reset your password",
        text_body="https://relay.example.com/password-reset/secret-token",
        html_body="<p>secret-token</p>",
        status=MailStatus.FAILED,
        attempts=7,
        last_error="smtp refused: 550",
    )


def test_staff_see_the_mail_and_how_it_went_not_its_parts(staff_client, mail):
    listed = staff_client.get("/admin/mail/outboundmail/")
    shown = staff_client.get(f"/admin/mail/outboundmail/{mail.pk}/change/")

    assert listed.status_code == 200 and "alice@example.com" in listed.content.decode()
    assert shown.status_code == 200
    text = shown.content.decode()
    assert "smtp refused: 550" in text
    assert "secret-token" not in text


def test_staff_can_neither_add_nor_change_a_mail(staff_client, mail):
    added = staff_client.post(
        "/admin/mail/outboundmail/add/", {"to": "bob@example.com", "template": "x"}
    )
    changed = staff_client.post(
        f"/admin/mail/outboundmail/{mail.pk}/change/", {"to": "bob@example.com"}
    )

    assert added.status_code == 403
    assert changed.status_code == 403
    mail.refresh_from_db()
    assert mail.to == "alice@example.com"
    assert OutboundMail.objects.count() == 1
