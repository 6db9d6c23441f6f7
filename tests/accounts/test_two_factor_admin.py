"""Staff reset a user's second factor in the admin: the password alone logs in again, the
user is mailed, and the admin's history and the log say who did it, without any secret."""

import logging

import pytest
from django.contrib.admin.models import LogEntry

from accounts.models import RecoveryCode, TotpDevice, User
from tests.accounts.test_two_factor import login
from tests.factories import UserFactory, two_factor_on

pytestmark = pytest.mark.django_db


@pytest.fixture
def enrolled_user():
    user = UserFactory()
    secret, codes = two_factor_on(user)
    return user, secret, codes


def test_the_user_page_says_whether_the_factor_is_on_and_shows_no_secret(
    staff_client, enrolled_user
):
    user, secret, codes = enrolled_user
    device = TotpDevice.objects.get(user=user)

    page = staff_client.get(f"/admin/accounts/user/{user.pk}/change/").content.decode()

    assert "on since" in page and "10 recovery code(s) left" in page
    for value in [secret, device.secret_ciphertext, *codes]:
        assert value not in page
    for digest in RecoveryCode.objects.values_list("digest", flat=True):
        assert digest not in page


def test_staff_reset_the_factor_and_the_password_alone_logs_in(
    staff_client, api_client, enrolled_user, mailbox, caplog
):
    user, secret, codes = enrolled_user
    other = UserFactory()
    mailbox.delivered()  # the mail that the factor went on
    caplog.set_level(logging.INFO)

    response = staff_client.post(
        "/admin/accounts/user/",
        {"action": "reset_second_factors", "_selected_action": [str(user.pk), str(other.pk)]},
    )

    assert response.status_code == 302
    assert not TotpDevice.objects.filter(user=user).exists()
    assert login(api_client, user).status_code == 200
    staff = User.objects.get(email="admin@example.com")
    entry = LogEntry.objects.get(object_id=str(user.pk))
    assert (entry.user_id, entry.change_message) == (staff.pk, "Reset the second factor.")
    assert not LogEntry.objects.filter(object_id=str(other.pk)).exists()  # had none
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert f"second factor of user {user.pk} reset by staff {staff.pk}" in logged
    for value in [secret, *codes]:
        assert value not in logged
    mail = mailbox.delivered()[-1]
    assert mail.rcpt_tos == [user.email]
    assert mail.message["Subject"] == "Two-step login is off for your Relay account"
    assert "by the staff of this server" in mail.text
