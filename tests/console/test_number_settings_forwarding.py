"""The forwarding page: set, show and clear a number's forwarding through ForwardingInput and
number_forwarding_set; each refusal by its field, outsider, CSRF, signed out."""

import pytest
from django.test import Client

from tests.factories import InventoryNumberFactory, NumberFactory
from virtual_numbers.models import Number

pytestmark = pytest.mark.django_db


SET = {"targets": "+447400123456", "ringSeconds": "20", "callerId": "caller"}


@pytest.fixture
def number(user):
    return NumberFactory(owner=user, alias="Shop")


def page_of(number) -> str:
    return f"/numbers/{number.pk}/forwarding"


def forwarding_of(number) -> tuple:
    number = Number.objects.get(pk=number.pk)
    return (
        number.forward_targets,
        number.forward_ring_seconds,
        number.forward_screening,
        number.forward_caller_id,
    )


def refused(client, number, **changes):
    """Post SET with `changes`: the page again, 400 unless the test says otherwise."""
    return client.post(page_of(number), SET | changes)


def test_a_number_forwards_nowhere_until_told(browser_client, number):
    page = browser_client.get(page_of(number)).content.decode()

    assert "Forwarding is off" in page
    assert "Stop forwarding" not in page
    assert "calls are never forwarded here" in page  # the simulated provider's tests


def test_saving_stores_every_setting_blank_lines_ignored(browser_client, number):
    data = {
        "targets": "+447400123456\r\n\r\n  +44 7400 123457  \r\n",
        "ringSeconds": "45",
        "screening": "on",
        "callerId": "number",
    }

    response = browser_client.post(page_of(number), data, follow=True)

    assert response.redirect_chain == [(page_of(number), 302)]
    expected = (["+447400123456", "+447400123457"], 45, True, "number")
    assert forwarding_of(number) == expected
    page = response.content.decode()
    assert "now ring +447400123456, +447400123457" in page
    assert "for 45 seconds, screened" in page and "this virtual number" in page
    assert "+447400123456\n+447400123457</textarea>" in page


def test_the_form_shows_what_is_set(browser_client, number):
    browser_client.post(page_of(number), SET | {"ringSeconds": "30"})

    page = browser_client.get(page_of(number)).content.decode()

    assert 'value="30"' in page and ">\n+447400123456</textarea>" in page
    assert '<option value="caller" selected>' in page


def test_with_the_sip_agent_the_page_says_calls_are_forwarded(browser_client, number, settings):
    settings.TELEPHONY_PROVIDER = "sip"

    page = browser_client.get(page_of(number)).content.decode()

    assert "forwarded by this service's SIP agent" in page
    assert "never forwarded here" not in page


@pytest.mark.parametrize(
    ("changes", "field", "sentence"),
    [
        ({"targets": ""}, "targets", "Give at least one number to ring."),
        ({"targets": "\n \n"}, "targets", "Give at least one number to ring."),
        ({"targets": "+447400123456\nnonsense"}, "targets", "nonsense: Must be a phone number"),
        ({"targets": "+447400123456\n+447400123456"}, "targets", "may be named once"),
        ({"targets": "a\x00b"}, "targets", "a\ufffdb: Must be a phone number in E.164"),
        (
            {"targets": "\n".join(f"+4474001234{n}" for n in range(10, 30))},
            "targets",
            "Give at most 3 numbers to ring.",
        ),
        ({"targets": "9" * 300}, "targets", "9999\u2026: Must be a phone number in E.164"),
        ({"ringSeconds": "4"}, "ringSeconds", "greater than or equal to 5"),
        ({"ringSeconds": "61"}, "ringSeconds", "less than or equal to 60"),
        ({"ringSeconds": "9" * 5000}, "ringSeconds", "Must be an integer."),
        ({"ringSeconds": "9" * 100}, "ringSeconds", "less than or equal to 60"),
        ({"ringSeconds": "twenty"}, "ringSeconds", "Must be an integer."),
        ({"ringSeconds": ""}, "ringSeconds", "Must be an integer."),
        ({"callerId": "someone"}, "callerId", "is not a valid choice."),
        ({"callerId": "\x00"}, "callerId", "is not a valid choice."),
    ],
)
def test_a_bad_value_is_refused_next_to_its_field(browser_client, number, changes, field, sentence):
    response = refused(browser_client, number, **changes)

    assert response.status_code == 400
    page = response.content.decode()
    assert f'id="id_{field}_errors"' in page
    assert sentence in page
    assert forwarding_of(number) == ([], 20, False, "caller")


def test_bytes_that_are_no_utf8_are_a_bad_target_never_a_500(browser_client, number):
    # A lone surrogate cannot be sent as UTF-8: what arrives is bytes Django decodes replaced.
    body = "targets=%2B4474001%ED%A0%80&ringSeconds=20&callerId=caller"
    response = browser_client.post(
        page_of(number), body, content_type="application/x-www-form-urlencoded"
    )

    assert response.status_code == 400
    assert "+4474001\ufffd\ufffd\ufffd: Must be a phone number" in response.content.decode()
    assert forwarding_of(number)[0] == []


def test_a_loop_is_refused_naming_the_target(browser_client, number):
    InventoryNumberFactory(e164="+442079460999")

    response = refused(browser_client, number, targets="+447400123456\n+442079460999")

    assert response.status_code == 400
    assert "+442079460999 is a number of this service." in response.content.decode()
    assert 'id="id_targets_errors"' in response.content.decode()
    assert forwarding_of(number)[0] == []


def test_a_refused_destination_is_named_by_the_targets(browser_client, number):
    response = refused(browser_client, number, targets="+33123456789")

    assert response.status_code == 400
    page = response.content.decode()
    assert 'id="id_targets_errors"' in page and "+33123456789 is a number in FR" in page
    assert forwarding_of(number)[0] == []


def test_saving_too_often_is_refused_with_retry_after(browser_client, number, settings):
    settings.RATE_LIMIT_FORWARDING_PER_USER = "1/h"
    assert browser_client.post(page_of(number), SET).status_code == 302

    response = refused(browser_client, number, targets="+447400123457")

    assert response.status_code == 429
    assert int(response["Retry-After"]) >= 1
    assert 'role="alert"' in response.content.decode()
    assert forwarding_of(number)[0] == ["+447400123456"]


def test_stopping_forwarding_puts_the_defaults_back(browser_client, number):
    browser_client.post(page_of(number), SET | {"ringSeconds": "45", "screening": "on"})
    assert "Stop forwarding" in browser_client.get(page_of(number)).content.decode()

    response = browser_client.post(f"{page_of(number)}/clear", follow=True)

    assert response.redirect_chain == [(page_of(number), 302)]
    assert "go to voicemail again" in response.content.decode()
    assert forwarding_of(number) == ([], 20, False, "caller")


def test_asking_for_the_clear_address_changes_nothing(browser_client, number):
    browser_client.post(page_of(number), SET)

    response = browser_client.get(f"{page_of(number)}/clear")

    assert response.status_code == 302 and response.url == page_of(number)
    assert forwarding_of(number)[0] == ["+447400123456"]


@pytest.mark.parametrize("path", ["forwarding", "forwarding/clear"])
@pytest.mark.parametrize("method", ["get", "post"])
def test_another_users_number_is_the_not_found_page(browser_client, other_user, path, method):
    theirs = NumberFactory(owner=other_user, forward_targets=["+447400123456"])

    response = getattr(browser_client, method)(f"/numbers/{theirs.pk}/{path}", SET)

    assert response.status_code == 404 and "Not found" in response.content.decode()
    assert forwarding_of(theirs)[0] == ["+447400123456"]


@pytest.mark.parametrize("path", ["forwarding", "forwarding/clear"])
def test_the_forwarding_forms_enforce_csrf(csrf_client, number, path):
    Number.objects.filter(pk=number.pk).update(ring_entries=[{"phone": "+447400123457"}])

    response = csrf_client.post(f"/numbers/{number.pk}/{path}", SET)

    assert response.status_code == 403
    assert forwarding_of(number)[0] == ["+447400123457"]


@pytest.mark.parametrize("path", ["forwarding", "forwarding/clear"])
def test_a_signed_out_browser_is_sent_to_log_in(number, path):
    response = Client().get(f"/numbers/{number.pk}/{path}")

    assert response.status_code == 302
    assert response.url == f"/login?next=/numbers/{number.pk}/{path}"
