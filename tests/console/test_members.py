"""The console's members page (issue 57): the owner and managers see whom a number is shared
with, invite by mail and remove; a member leaves from the numbers page; anyone else gets
the 404 page."""

import pytest

from mail.models import OutboundMail
from tests.console.conftest import sign_in
from tests.factories import NumberFactory, NumberMemberFactory, UserFactory
from virtual_numbers.models import NumberMember


@pytest.fixture
def number(user):
    return NumberFactory(owner=user, alias="Shop")


def browser_of(user, client):
    sign_in(client, user)
    return client


@pytest.mark.django_db
def test_the_owner_invites_from_the_members_page(browser_client, number):
    listing = browser_client.get("/numbers")
    page = browser_client.get(f"/numbers/{number.pk}/members")
    sent = browser_client.post(
        f"/numbers/{number.pk}/members", {"email": "Sam@Example.com", "role": "manager"}
    )

    assert f'href="/numbers/{number.pk}/members"' in listing.text
    assert page.status_code == 200 and "shared with no one" in page.text
    assert sent.status_code == 302
    row = NumberMember.objects.get()
    assert (row.email, row.role, row.status) == ("sam@example.com", "manager", "invited")
    assert OutboundMail.objects.filter(to="sam@example.com", template="number_invitation").exists()
    again = browser_client.get(f"/numbers/{number.pk}/members")
    assert "Withdraw the invitation of sam@example.com" in again.text


@pytest.mark.django_db
def test_a_refused_invitation_is_shown_on_its_field(browser_client, user, number):
    refused = browser_client.post(
        f"/numbers/{number.pk}/members", {"email": user.email, "role": "member"}
    )
    unknown_role = browser_client.post(
        f"/numbers/{number.pk}/members", {"email": "sam@example.com", "role": "owner"}
    )

    assert refused.status_code == 400 and "owner" in refused.text
    assert unknown_role.status_code == 400
    assert not NumberMember.objects.exists()


@pytest.mark.django_db
def test_the_owner_removes_a_member(browser_client, number):
    member = NumberMemberFactory(number=number)

    removed = browser_client.post(f"/numbers/{number.pk}/members/{member.pk}/remove")

    assert removed.status_code == 302 and removed["Location"] == f"/numbers/{number.pk}/members"
    assert not NumberMember.objects.exists()


@pytest.mark.django_db
def test_a_member_leaves_from_the_numbers_page(client, number):
    membership = NumberMemberFactory(number=number)
    member = browser_of(membership.user, client)

    listing = member.get("/numbers")
    left = member.post(f"/numbers/{number.pk}/members/{membership.pk}/remove")

    assert "Shared with you" in listing.text and f"Leave {number.number}" in listing.text
    assert f'href="/numbers/{number.pk}/members"' not in listing.text  # a member, not manager
    assert left.status_code == 302 and left["Location"] == "/numbers"
    assert not NumberMember.objects.exists()


@pytest.mark.django_db
def test_a_manager_manages_and_a_member_or_outsider_gets_the_404_page(client, number):
    manager = NumberMemberFactory(number=number, role="manager")
    member = NumberMemberFactory(number=number)

    manager_page = browser_of(manager.user, client).get(f"/numbers/{number.pk}/members")
    assert manager_page.status_code == 200 and member.email in manager_page.text

    for person in (member.user, UserFactory()):
        other = browser_of(person, type(client)())
        assert other.get(f"/numbers/{number.pk}/members").status_code == 404
        removal = other.post(f"/numbers/{number.pk}/members/{manager.pk}/remove")
        assert removal.status_code == 404
    assert NumberMember.objects.count() == 2
