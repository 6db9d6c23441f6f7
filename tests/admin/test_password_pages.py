"""A password set in the admin ends the sessions the old one opened, as a change through the
API does: staff's own ("Change password", their admin sign-in stays) and a user's set by staff
(every session of that user ends, its sockets with them)."""

import pytest

from accounts import services
from accounts.models import LoginSession, User
from tests.conftest import admin_signed_in, jwt_client
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

STAFF_PASSWORD = "staff-password-long-enough"
NEW_PASSWORD = "a-brand-new-passphrase-9"


@pytest.fixture
def staff(client):
    staff = User.objects.create_superuser("staff@example.com", STAFF_PASSWORD)
    admin_signed_in(client, staff)
    return staff


def test_changing_ones_own_password_ends_every_other_session(client, staff):
    elsewhere = services.session_open(user=staff)
    assert jwt_client(elsewhere.token).get("/api/user/me").status_code == 200

    response = client.post(
        "/admin/password_change/",
        {
            "old_password": STAFF_PASSWORD,
            "new_password1": NEW_PASSWORD,
            "new_password2": NEW_PASSWORD,
        },
    )

    assert response.status_code == 302 and response["Location"].endswith("/done/")
    assert jwt_client(elsewhere.token).get("/api/user/me").status_code == 401
    assert client.get("/admin/").status_code == 200  # the admin's own sign-in stays
    assert LoginSession.objects.filter(user=staff, active=True).count() == 1


def test_a_wrong_old_password_ends_nothing(client, staff):
    elsewhere = services.session_open(user=staff)

    response = client.post(
        "/admin/password_change/",
        {"old_password": "not-it", "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
    )

    assert response.status_code == 200
    assert jwt_client(elsewhere.token).get("/api/user/me").status_code == 200


def test_a_password_staff_set_for_a_user_ends_every_session_of_theirs(client, staff):
    customer = UserFactory()
    sessions = [services.session_open(user=customer) for _ in range(2)]

    response = client.post(
        f"/admin/accounts/user/{customer.pk}/password/",
        {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD, "usable_password": "true"},
    )

    assert response.status_code == 302
    customer.refresh_from_db()
    assert customer.check_password(NEW_PASSWORD)
    for session in sessions:
        assert jwt_client(session.token).get("/api/user/me").status_code == 401
    assert client.get("/admin/").status_code == 200  # staff's own sign-in is untouched
