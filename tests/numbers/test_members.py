"""Members and invitations of a shared number (issue 57): inviting by mail, accepting, roles,
leaving, the 20 a number may have, and what an outsider gets (404)."""

import pytest

from accounts.services import session_open
from mail.models import OutboundMail
from tests.conftest import jwt_client
from tests.factories import NumberFactory, UserFactory
from virtual_numbers.models import MEMBERS_MAX_PER_NUMBER, NumberMember

LINK_PREFIX = "http://testserver/invitations/"
ROW_KEYS = {"id", "email", "role", "status", "invitedAt", "expiresAt", "joinedAt"}


@pytest.fixture
def number(user):
    return NumberFactory(owner=user, alias="Shop")


def client_of(user):
    return jwt_client(session_open(user=user).token)


def members_url(number, member_id=None) -> str:
    base = f"/api/numbers/{number.pk}/members"
    return f"{base}/{member_id}" if member_id else base


def invite(client, number, email, role="member"):
    return client.post(members_url(number), {"email": email, "role": role}, format="json")


def token_mailed_to(address: str) -> str:
    """The token of the one invitation mailed to `address`."""
    mail = OutboundMail.objects.get(to=address, template="number_invitation")
    links = [word for word in mail.text_body.split() if word.startswith(LINK_PREFIX)]
    assert len(links) == 1, mail.text_body
    assert f'href="{links[0]}"' in mail.html_body
    return links[0].removeprefix(LINK_PREFIX)


def accept(client, token):
    return client.post(f"/api/invitations/{token}/accept")


def joined(owner_client, number, role="member", email=None):
    """A new user who was invited by `owner_client` and accepted: (user, their client, the
    member's id)."""
    member = UserFactory(email=email) if email else UserFactory()
    invited = invite(owner_client, number, member.email, role)
    assert invited.status_code == 201, invited.content
    client = client_of(member)
    assert accept(client, token_mailed_to(member.email)).status_code == 200
    return member, client, invited.json()["id"]


@pytest.mark.django_db
def test_the_owner_invites_by_mail_and_the_invitee_accepts(client_jwt, user, number):
    invited = invite(client_jwt, number, "Sam@Example.com")

    assert invited.status_code == 201
    body = invited.json()
    assert set(body) == ROW_KEYS
    assert (body["email"], body["role"], body["status"]) == ("sam@example.com", "member", "invited")
    assert body["expiresAt"] - body["invitedAt"] == 7 * 24 * 3600 * 1000
    mail = OutboundMail.objects.get(to="sam@example.com")
    assert user.email in mail.subject and number.number in mail.subject
    assert "Shop" in mail.text_body

    sam = UserFactory(email="sam@example.com")
    sam_client = client_of(sam)
    assert sam_client.get("/api/numbers/shared").json() == {"numbers": []}
    accepted = accept(sam_client, token_mailed_to("sam@example.com"))

    assert accepted.status_code == 200
    shared = accepted.json()
    assert shared["id"] == str(number.pk) and shared["memberId"] == body["id"]
    assert (shared["number"], shared["alias"], shared["role"]) == (number.number, "Shop", "member")
    assert sam_client.get("/api/numbers/shared").json() == {"numbers": [shared]}
    assert sam_client.get("/api/numbers").json() == {"numbers": []}  # still only their own
    row = client_jwt.get(members_url(number, body["id"])).json()
    assert (row["status"], row["expiresAt"]) == ("active", None) and row["joinedAt"]


@pytest.mark.django_db
def test_the_token_is_stored_only_as_its_hash(client_jwt, number):
    invite(client_jwt, number, "sam@example.com")
    token = token_mailed_to("sam@example.com")
    row = NumberMember.objects.get()

    secret = token.partition(".")[2]
    assert len(secret) >= 40
    assert secret not in row.token_hash and len(row.token_hash) == 64


@pytest.mark.django_db
def test_a_link_works_once(client_jwt, number):
    sam = UserFactory(email="sam@example.com")
    invite(client_jwt, number, sam.email)
    token = token_mailed_to(sam.email)
    sam_client = client_of(sam)

    assert accept(sam_client, token).status_code == 200
    again = accept(sam_client, token)

    assert again.status_code == 400
    assert again.json()["code"] == "invitation_invalid"


@pytest.mark.django_db
def test_an_expired_link_joins_nothing(client_jwt, number, clock):
    sam = UserFactory(email="sam@example.com")
    invite(client_jwt, number, sam.email)
    token = token_mailed_to(sam.email)
    clock.advance(days=7, seconds=1)

    response = accept(client_of(sam), token)

    assert response.status_code == 400 and response.json()["code"] == "invitation_invalid"
    assert not NumberMember.objects.filter(user=sam).exists()
    # and it no longer counts: the address may be invited again
    assert invite(client_jwt, number, sam.email).status_code == 201


@pytest.mark.django_db
def test_a_withdrawn_link_joins_nothing(client_jwt, number):
    sam = UserFactory(email="sam@example.com")
    member_id = invite(client_jwt, number, sam.email).json()["id"]
    token = token_mailed_to(sam.email)

    assert client_jwt.delete(members_url(number, member_id)).json() == {"success": True}
    response = accept(client_of(sam), token)

    assert response.status_code == 400 and response.json()["code"] == "invitation_invalid"
    assert not NumberMember.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "token",
    ["", "x", "not-a-token", "0" * 32 + ".", "0" * 32 + ".secret", "a" * 199, "é.é", "\x00"],
)
def test_a_made_up_token_is_refused(client_jwt, token):
    response = client_jwt.post(f"/api/invitations/{token}/accept")

    assert response.status_code in (400, 404)
    assert response.json()["code"] in ("invitation_invalid", "not_found")


@pytest.mark.django_db
def test_anothers_token_with_this_rows_id_is_refused(client_jwt, number):
    invite(client_jwt, number, "sam@example.com")
    token = token_mailed_to("sam@example.com")
    row_hex, _, secret = token.partition(".")
    sam = client_of(UserFactory(email="sam@example.com"))

    forged = accept(sam, f"{row_hex}.{secret[:-1]}{'A' if secret[-1] != 'A' else 'B'}")

    assert forged.status_code == 400 and forged.json()["code"] == "invitation_invalid"


@pytest.mark.django_db
def test_an_account_of_another_address_cannot_accept(client_jwt, number):
    invite(client_jwt, number, "sam@example.com")
    token = token_mailed_to("sam@example.com")

    refused = accept(client_of(UserFactory(email="eve@example.com")), token)

    assert refused.status_code == 403
    assert refused.json()["code"] == "invitation_email_mismatch"
    assert NumberMember.objects.get().status == "invited"
    # the right account still can
    assert accept(client_of(UserFactory(email="sam@example.com")), token).status_code == 200


@pytest.mark.django_db
def test_accepting_needs_credentials(api_client, client_jwt, number):
    invite(client_jwt, number, "sam@example.com")

    response = api_client.post(f"/api/invitations/{token_mailed_to('sam@example.com')}/accept")

    assert response.status_code == 401
    assert NumberMember.objects.get().status == "invited"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"email": "not-an-address", "role": "member"}, "email"),
        ({"email": "", "role": "member"}, "email"),
        ({"email": 5, "role": "member"}, "email"),
        ({"email": "sam@example.com", "role": "owner"}, "role"),
        ({"email": "sam@example.com", "role": ""}, "role"),
        ({"email": "sam@example.com"}, "role"),
        ({"role": "member"}, "email"),
    ],
)
def test_bad_input_is_a_400_and_stores_and_mails_nothing(client_jwt, number, body, field):
    response = client_jwt.post(members_url(number), body, format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert field in response.json()["fields"]
    assert not NumberMember.objects.exists() and not OutboundMail.objects.exists()


@pytest.mark.django_db
def test_inviting_the_owner_is_refused(client_jwt, user, number):
    response = invite(client_jwt, number, user.email.upper())

    assert response.status_code == 400 and response.json()["code"] == "member_is_owner"
    assert not NumberMember.objects.exists() and not OutboundMail.objects.exists()


@pytest.mark.django_db
def test_inviting_an_address_invited_or_member_already_is_refused(client_jwt, number):
    invite(client_jwt, number, "sam@example.com")
    member, _client, _id = joined(client_jwt, number)

    for address in ("SAM@example.com", member.email):
        response = invite(client_jwt, number, address)
        assert response.status_code == 400 and response.json()["code"] == "member_exists"
    assert NumberMember.objects.count() == 2
    assert OutboundMail.objects.filter(template="number_invitation").count() == 2


@pytest.mark.django_db
def test_a_number_takes_at_most_20_members_and_invitations(client_jwt, number, settings):
    settings.RATE_LIMIT_INVITATIONS_PER_USER = "100/h"
    joined(client_jwt, number)
    for n in range(MEMBERS_MAX_PER_NUMBER - 1):
        assert invite(client_jwt, number, f"guest{n}@example.com").status_code == 201

    response = invite(client_jwt, number, "one-too-many@example.com")

    assert response.status_code == 400 and response.json()["code"] == "members_full"
    assert NumberMember.objects.count() == MEMBERS_MAX_PER_NUMBER
    assert not OutboundMail.objects.filter(to="one-too-many@example.com").exists()


@pytest.mark.django_db
def test_invitations_are_rate_limited_per_user(client_jwt, number, settings):
    settings.RATE_LIMIT_INVITATIONS_PER_USER = "2/h"
    invite(client_jwt, number, "a@example.com")
    invite(client_jwt, number, "b@example.com")

    response = invite(client_jwt, number, "c@example.com")

    assert response.status_code == 429 and response.json()["code"] == "rate_limited"
    assert response.has_header("Retry-After")
    assert not OutboundMail.objects.filter(to="c@example.com").exists()


@pytest.mark.django_db
def test_roles_decide_who_manages_the_members(client_jwt, number):
    manager, manager_client, manager_id = joined(client_jwt, number, role="manager")
    member, member_client, member_id = joined(client_jwt, number)

    # a manager lists, invites, changes roles and removes
    assert len(manager_client.get(members_url(number)).json()["members"]) == 2
    assert invite(manager_client, number, "new@example.com").status_code == 201
    promoted = manager_client.put(
        members_url(number, member_id), {"role": "manager"}, format="json"
    )
    assert promoted.status_code == 200 and promoted.json()["role"] == "manager"
    demoted = client_jwt.put(members_url(number, member_id), {"role": "member"}, format="json")
    assert demoted.json()["role"] == "member"

    # a member reads their own row and nothing else, and changes nothing
    assert member_client.get(members_url(number, member_id)).json()["id"] == member_id
    assert member_client.get(members_url(number, manager_id)).status_code == 404
    for response in (
        member_client.get(members_url(number)),
        invite(member_client, number, "other@example.com"),
        member_client.put(members_url(number, member_id), {"role": "manager"}, format="json"),
    ):
        assert response.status_code == 403 and response.json()["code"] == "permission_denied"
    assert NumberMember.objects.get(pk=member_id).role == "member"


@pytest.mark.django_db
def test_an_unknown_role_on_change_is_a_400(client_jwt, number):
    _member, _client, member_id = joined(client_jwt, number)

    response = client_jwt.put(members_url(number, member_id), {"role": "owner"}, format="json")

    assert response.status_code == 400 and "role" in response.json()["fields"]


@pytest.mark.django_db
def test_a_member_may_leave_and_then_sees_nothing_of_the_number(client_jwt, number):
    member, member_client, member_id = joined(client_jwt, number)
    _other, _other_client, other_id = joined(client_jwt, number)

    assert member_client.delete(members_url(number, other_id)).status_code == 404
    assert member_client.delete(members_url(number, member_id)).json() == {"success": True}

    assert member_client.get("/api/numbers/shared").json() == {"numbers": []}
    assert member_client.get(members_url(number, member_id)).status_code == 404
    assert NumberMember.objects.filter(pk=other_id).exists()


@pytest.mark.django_db
def test_a_manager_removes_a_member(client_jwt, number):
    _manager, manager_client, _id = joined(client_jwt, number, role="manager")
    member, member_client, member_id = joined(client_jwt, number)

    assert manager_client.delete(members_url(number, member_id)).json() == {"success": True}

    assert member_client.get("/api/numbers/shared").json() == {"numbers": []}
    assert manager_client.delete(members_url(number, member_id)).status_code == 404


@pytest.mark.django_db
def test_another_users_number_or_member_is_not_found(client_jwt, outsider, number):
    _member, _client, member_id = joined(client_jwt, number)
    outsiders_number = NumberFactory()

    for response in (
        outsider.get(members_url(number)),
        invite(outsider, number, "x@example.com"),
        outsider.get(members_url(number, member_id)),
        outsider.put(members_url(number, member_id), {"role": "manager"}, format="json"),
        outsider.delete(members_url(number, member_id)),
        # a member id of another number, under one's own
        client_jwt.get(members_url(NumberFactory(owner=number.owner), member_id)),
        client_jwt.get(members_url(outsiders_number)),
        client_jwt.get(members_url(number, "not-a-uuid")),
        client_jwt.get("/api/numbers/not-a-uuid/members"),
    ):
        assert response.status_code == 404, response.content
        assert response.json()["code"] == "not_found"
    assert not OutboundMail.objects.filter(to="x@example.com").exists()


@pytest.mark.django_db
def test_a_manager_reaches_none_of_the_owners_own_settings(client_jwt, number):
    # (the greeting and hours are a manager's to change: tests/numbers/test_managed_settings.py)
    _member, member_client, _id = joined(client_jwt, number, role="manager")

    for path in ("blocked", "forwarding"):
        assert member_client.get(f"/api/numbers/{number.pk}/{path}").status_code == 404
    assert member_client.delete(f"/api/numbers/{number.pk}").status_code == 404
    assert (
        member_client.put(
            f"/api/numbers/{number.pk}/pin",
            {"currentPin": "1234", "newPin": "5678"},
            format="json",
        ).status_code
        == 404
    )


@pytest.mark.django_db
def test_the_shared_list_shows_no_pin_nor_settings(client_jwt, number):
    _member, member_client, _id = joined(client_jwt, number)

    (shared,) = member_client.get("/api/numbers/shared").json()["numbers"]

    # the number's own, and the member's own switches for it (their notifications)
    assert set(shared) == {"id", "number", "alias", "role", "memberId", "joinedAt"} | {
        "webhook",
        "matrix",
        "missedCallEmail",
        "voicemailEmail",
    }


@pytest.mark.django_db
def test_a_number_given_back_takes_its_members_and_invitations(client_jwt, number):
    _member, member_client, _id = joined(client_jwt, number)
    invite(client_jwt, number, "pending@example.com")
    token = token_mailed_to("pending@example.com")

    assert client_jwt.delete(f"/api/numbers/{number.pk}").status_code == 200

    assert not NumberMember.objects.exists()
    assert member_client.get("/api/numbers/shared").json() == {"numbers": []}
    late = accept(client_of(UserFactory(email="pending@example.com")), token)
    assert late.json()["code"] == "invitation_invalid"


@pytest.mark.django_db
def test_the_owner_cannot_join_their_own_number_by_a_changed_address(client_jwt, user, number):
    invite(client_jwt, number, "later@example.com")
    token = token_mailed_to("later@example.com")
    type(user).objects.filter(pk=user.pk).update(email="later@example.com")

    response = accept(client_jwt, token)

    assert response.status_code == 400 and response.json()["code"] == "member_is_owner"


@pytest.mark.django_db
def test_the_token_never_reaches_the_log(client_jwt, number, caplog):
    sam = UserFactory(email="sam@example.com")
    with caplog.at_level("DEBUG"):
        invite(client_jwt, number, sam.email)
        token = token_mailed_to(sam.email)
        accept(client_of(sam), token)
        accept(client_of(sam), token)  # refused, logged as a 400

    secret = token.partition(".")[2]
    assert secret not in caplog.text
