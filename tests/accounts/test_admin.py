from django.core.management import call_command

from accounts import services
from accounts.models import LoginSession, User
from tests.conftest import api_key_client, jwt_client
from tests.factories import UserFactory


def test_the_user_list_searches_by_email_and_filters_by_plan(staff_client):
    UserFactory(email="findme@example.com")
    UserFactory(email="other@example.com")

    found = staff_client.get("/admin/accounts/user/", {"q": "findme"})
    filtered = staff_client.get("/admin/accounts/user/", {"plan__exact": "free"})

    assert found.status_code == 200
    assert b"findme@example.com" in found.content
    assert b"other@example.com" not in found.content
    assert filtered.status_code == 200


def test_the_user_page_never_shows_the_api_key(staff_client):
    user = UserFactory()

    page = staff_client.get(f"/admin/accounts/user/{user.pk}/change/")

    assert page.status_code == 200
    assert user.api_key.encode() not in page.content
    assert user.api_key_ciphertext.encode() not in page.content
    assert user.api_key_digest.encode() not in page.content


def test_staff_can_add_a_user_who_gets_an_api_key(staff_client):
    response = staff_client.post(
        "/admin/accounts/user/add/",
        {
            "email": "New@Example.com",
            "password1": "a-long-pass-phrase",
            "password2": "a-long-pass-phrase",
        },
    )

    assert response.status_code == 302
    user = User.objects.get(email="new@example.com")
    assert user.api_key.startswith("vr_")
    assert user.check_password("a-long-pass-phrase")


def test_the_end_sessions_action_revokes_tokens(staff_client):
    user = UserFactory()
    auth = services.session_open(user=user)

    response = staff_client.post(
        "/admin/accounts/loginsession/",
        {"action": "end_sessions", "_selected_action": [str(auth.session.pk)]},
    )

    assert response.status_code == 302
    assert not LoginSession.objects.get(pk=auth.session.pk).active
    assert jwt_client(auth.token).get("/api/user/me").status_code == 401


def test_the_user_actions_end_sessions_and_regenerate_keys(staff_client):
    user = UserFactory()
    auth = services.session_open(user=user)
    old_key = user.api_key

    staff_client.post(
        "/admin/accounts/user/", {"action": "end_all_sessions", "_selected_action": [str(user.pk)]}
    )
    staff_client.post(
        "/admin/accounts/user/",
        {"action": "regenerate_api_keys", "_selected_action": [str(user.pk)]},
    )

    assert jwt_client(auth.token).get("/api/user/me").status_code == 401
    assert api_key_client(old_key).get("/api/user/me").status_code == 401
    user.refresh_from_db()
    assert user.api_key != old_key


def test_a_non_staff_user_is_refused(client, db):
    user = UserFactory()
    client.force_login(user)

    response = client.get("/admin/accounts/user/")

    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_createsuperuser_works_with_email_login(db, monkeypatch):
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "a-long-admin-passphrase")

    call_command("createsuperuser", "--noinput", "--email", "Boss@Example.com", verbosity=0)

    boss = User.objects.get(email="boss@example.com")
    assert boss.is_superuser and boss.is_staff
    assert boss.check_password("a-long-admin-passphrase")
    assert boss.api_key.startswith("vr_")
