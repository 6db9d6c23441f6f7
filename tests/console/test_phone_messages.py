"""The console's forms say which of the two things is wrong with a refused phone number
(issue 38, part 4): not in E.164 form at all, or in E.164 form but in no range in use. The
forwarding page's old example, Ofcom's drama mobile +447700900456, is the case a new user met."""

import html

import pytest

from calls.models import Call
from core.phone import E164_FORM_PROBLEM, E164_UNASSIGNED_PROBLEM
from tests.factories import NumberFactory
from virtual_numbers.models import BlockedCaller, Number

pytestmark = pytest.mark.django_db


@pytest.fixture
def number(user):
    return NumberFactory(owner=user)


def errors_of(response, field: str) -> str:
    """The text of `field`'s error list on the page answered."""
    page = response.content.decode()
    start = page.index(f'id="id_{field}_errors"')
    return html.unescape(page[start : page.index("</ul>", start)])


def test_a_drama_mobile_to_forward_to_is_named_as_in_no_range(browser_client, number):
    response = browser_client.post(
        f"/numbers/{number.pk}/forwarding",
        {"targets": "+441134960456\n+447700900456", "ringSeconds": "20", "callerId": "caller"},
    )

    assert response.status_code == 400
    assert f"+447700900456: {E164_UNASSIGNED_PROBLEM}" in errors_of(response, "targets")
    assert "+441134960456" not in errors_of(response, "targets")
    assert Number.objects.get(pk=number.pk).forward_targets == []


def test_a_forwarding_line_that_is_no_number_is_told_the_form(browser_client, number):
    response = browser_client.post(
        f"/numbers/{number.pk}/forwarding",
        {"targets": "my mobile", "ringSeconds": "20", "callerId": "caller"},
    )

    assert f"my mobile: {E164_FORM_PROBLEM}" in errors_of(response, "targets")


@pytest.mark.parametrize(
    ("to", "sentence"),
    [("+447700900456", E164_UNASSIGNED_PROBLEM), ("020 7946 0123", E164_FORM_PROBLEM)],
)
def test_a_call_to_a_refused_number_says_why_next_to_to(browser_client, to, sentence):
    response = browser_client.post(
        "/calls", {"callId": "form-1", "to": to, "message": "Hello", "language": "en"}
    )

    assert response.status_code == 400
    assert sentence in errors_of(response, "to")
    assert not Call.objects.exists()


@pytest.mark.parametrize(
    ("caller", "sentence"),
    [("+999123456789", E164_UNASSIGNED_PROBLEM), ("+44 7700 900abc", E164_FORM_PROBLEM)],
)
def test_a_refused_caller_to_block_says_why(browser_client, number, caller, sentence):
    response = browser_client.post(f"/numbers/{number.pk}/blocked", {"caller_num": caller})

    assert response.status_code == 400
    assert sentence in errors_of(response, "caller_num")
    assert not BlockedCaller.objects.exists()
