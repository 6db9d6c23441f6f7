"""The console's invitation page (issue 57): a mailed link to share a number, accepted by a
signed-in person, or after logging in or signing up through links that come back to it."""

import pytest
from django.test import Client

from mail.models import OutboundMail
from tests.console.conftest import sign_in
from tests.factories import DEFAULT_PASSWORD, NumberFactory, UserFactory
from virtual_numbers import services
from virtual_numbers.models import NumberMember

PASSWORD = "a-long-and-unusual-passphrase"


@pytest.fixture
def link(user) -> str:
    """The path of an invitation of sam@example.com to `user`'s number "Shop"."""
    number = NumberFactory(owner=user, alias="Shop")
    access = services.NumberAccess(number=number, role="owner", user=user)
    services.member_invite(access=access, email="sam@example.com", role="member", base_url="")
    mail = OutboundMail.objects.get(template="number_invitation")
    return next(word for word in mail.text_body.split() if word.startswith("/invitations/"))


@pytest.mark.django_db
def test_a_signed_in_invitee_sees_the_number_and_the_inviter_and_accepts(user, link):
    sam = UserFactory(email="sam@example.com")
    browser = Client()
    sign_in(browser, sam)

    page = browser.get(link)
    accepted = browser.post(link, follow=True)

    assert page.status_code == 200
    assert page["Referrer-Policy"] == "same-origin" and "no-store" in page["Cache-Control"]
    assert "Shop" in page.text and user.email in page.text
    assert "Accept the invitation" in page.text
    assert accepted.redirect_chain[-1][0] == "/numbers"
    assert "Shared with you" in accepted.text and "Shop" in accepted.text
    assert NumberMember.objects.get().user == sam


@pytest.mark.django_db
def test_someone_signed_out_logs_in_and_comes_back(link):
    UserFactory(email="sam@example.com")
    browser = Client()

    page = browser.get(link)
    assert page.status_code == 200 and "Accept the invitation" not in page.text
    assert f'href="/login?next={link}"' in page.text
    assert f'href="/register?next={link}"' in page.text
    logged_in = browser.post(
        f"/login?next={link}", {"email": "sam@example.com", "password": DEFAULT_PASSWORD}
    )

    assert logged_in.status_code == 302 and logged_in["Location"] == link
    assert browser.post(link).status_code == 302
    assert NumberMember.objects.get().status == "active"


@pytest.mark.django_db
def test_someone_new_signs_up_and_comes_back(link):
    browser = Client()

    form = browser.get(f"/register?next={link}")
    signed_up = browser.post(
        "/register", {"email": "sam@example.com", "password": PASSWORD, "next": link}
    )

    assert f'name="next" value="{link}"' in form.text
    assert signed_up.status_code == 302 and signed_up["Location"] == link
    assert browser.post(link).status_code == 302
    assert NumberMember.objects.get().user.email == "sam@example.com"


@pytest.mark.django_db
def test_sign_up_never_goes_back_to_another_site(client):
    signed_up = client.post(
        "/register",
        {"email": "new@example.com", "password": PASSWORD, "next": "https://evil.example/"},
    )

    assert signed_up["Location"] == "/numbers"


@pytest.mark.django_db
def test_another_account_is_refused_and_joins_nothing(link):
    browser = Client()
    sign_in(browser, UserFactory(email="eve@example.com"))

    refused = browser.post(link)

    assert refused.status_code == 403
    assert "sent to another address" in refused.text
    assert NumberMember.objects.get().status == "invited"


@pytest.mark.django_db
@pytest.mark.parametrize("how", ["used", "withdrawn", "expired", "made up"])
def test_a_link_that_no_longer_works_says_so(link, how, clock):
    sam = UserFactory(email="sam@example.com")
    browser = Client()
    sign_in(browser, sam)
    if how == "used":
        browser.post(link)
    elif how == "withdrawn":
        NumberMember.objects.all().delete()
    elif how == "expired":
        clock.advance(days=7, seconds=1)
    else:
        link = link[:-4] + "AAAA"

    page = browser.get(link)
    posted = browser.post(link)

    assert page.status_code == 400 and "This invitation does not work" in page.text
    assert posted.status_code == 400
    assert NumberMember.objects.filter(status="active").count() == (1 if how == "used" else 0)
