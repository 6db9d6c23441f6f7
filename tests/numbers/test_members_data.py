"""A shared number's members in the rest of Relay (issue 57): account deletion, the account
export, and the admin's number page."""

import io
import json
import zipfile

import pytest
from django.core.management import call_command

from core.errors import ApplicationError
from tests.factories import DEFAULT_PASSWORD, NumberFactory, NumberMemberFactory, UserFactory
from virtual_numbers import services
from virtual_numbers.models import NumberMember


def invited(number, email, inviter=None):
    inviter = inviter or number.owner
    role = "owner" if inviter == number.owner else "manager"
    access = services.NumberAccess(number=number, role=role, user=inviter)
    return services.member_invite(access=access, email=email, role="member", base_url="")


@pytest.mark.django_db(transaction=True)
def test_deleting_an_account_ends_its_memberships_and_withdraws_its_invitations(client_jwt, user):
    theirs = NumberFactory()
    membership = NumberMemberFactory(number=theirs, user=user, role="manager")
    pending = invited(theirs, "pending@example.com", inviter=user)
    joined_by_them = NumberMemberFactory(number=theirs, invited_by=user)
    others_membership = NumberMemberFactory(number=theirs)
    own = NumberFactory(owner=user)
    NumberMemberFactory(number=own)

    response = client_jwt.delete("/api/user/me", {"password": DEFAULT_PASSWORD}, format="json")

    assert response.status_code == 204, response.content
    left = set(NumberMember.objects.values_list("pk", flat=True))
    assert left == {joined_by_them.pk, others_membership.pk}
    assert membership.pk not in left and pending.pk not in left
    assert NumberMember.objects.get(pk=joined_by_them.pk).invited_by is None


@pytest.mark.django_db
def test_the_export_lists_the_numbers_shared_with_the_user(client_jwt, user):
    number = NumberFactory(alias="Shop")
    NumberMemberFactory(number=number, user=user, role="manager")
    NumberMemberFactory(number=NumberFactory())  # someone else's membership

    response = client_jwt.get("/api/user/export")
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    account = json.loads(archive.read("account.json"))

    (shared,) = account["memberships"]
    assert (shared["id"], shared["number"], shared["alias"], shared["role"]) == (
        str(number.pk),
        number.number,
        "Shop",
        "manager",
    )


@pytest.mark.django_db
def test_staff_see_a_numbers_members_and_invitations(staff_client):
    number = NumberFactory()
    member = NumberMemberFactory(number=number, user=UserFactory(email="member@example.com"))
    pending = invited(number, "pending@example.com")

    page = staff_client.get(f"/admin/numbers/number/{number.pk}/change/")

    assert page.status_code == 200
    text = page.content.decode()
    assert "Members and invitations" in text
    assert member.email in text and "pending@example.com" in text
    assert pending.token_hash not in text


@pytest.mark.django_db
def test_a_manager_demoted_since_their_access_was_read_cannot_invite():
    number = NumberFactory()
    manager = NumberMemberFactory(number=number, role="manager")
    stale = services.NumberAccess(number=number, role="manager", user=manager.user)
    NumberMember.objects.filter(pk=manager.pk).update(role="member")

    with pytest.raises(ApplicationError) as refused:
        services.member_invite(access=stale, email="x@example.com", role="member", base_url="")

    assert refused.value.code == "permission_denied"
    assert NumberMember.objects.count() == 1


@pytest.mark.django_db
def test_purge_expired_deletes_invitations_past_their_days_only(clock):
    number = NumberFactory()
    old = invited(number, "old@example.com")
    member = NumberMemberFactory(number=number)
    clock.advance(days=6)
    recent = invited(number, "recent@example.com")
    clock.advance(days=1, seconds=1)

    out = io.StringIO()
    call_command("purge_expired", stdout=out)

    assert set(NumberMember.objects.values_list("pk", flat=True)) == {member.pk, recent.pk}
    assert old.pk and "1 expired invitation(s)" in out.getvalue()
