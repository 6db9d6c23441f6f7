"""Every example phone number Relay shows people is one it takes where it shows it (issue 38,
part 4): a new user who copies the forwarding page's own example must not be refused.

The numbers are read from what people read: the console's pages as they render and its
templates, the README, docs/*.md, examples/, the OpenAPI schema, and the sentences a refused
number gets (core.phone). Each is listed in SHOWN with where it is shown, and submitted there,
as a person would: a call's `to` to POST /api/calls, a number to forward to to the
forwarding API, and so on; the console's own examples through the console's forms. A number
shown on purpose as one Relay refuses is listed as Refused, with the reason, and must be
refused. A number found and not listed fails the test that reads them, so each new example
is placed by whoever writes it.

A listing is per source and number, not per line: a number listed for one use and shown
for another in the same file is not caught, so a file's examples keep one use per number.
"""

import html
import re
from dataclasses import dataclass
from enum import Enum
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import URLPattern, reverse

from console import urls as console_urls
from core.phone import E164_FORM_PROBLEM, E164_UNASSIGNED_PROBLEM
from tests.console.conftest import sign_in
from tests.factories import NumberFactory
from virtual_numbers.models import BlockedCaller, Number

ROOT = Path(settings.BASE_DIR)

# `+` and 8 to 15 digits, which may be grouped by single spaces (+44 20 7946 0000); not a
# range written with x (+44 7700 900xxx) nor the first groups of a longer number.
E164_LIKE = re.compile(r"(?<![\w+])\+\d(?: ?\d){7,14}(?![\dxX]| [\dxX])")

# make run's inventory (README: provision_numbers): forwarding refuses these as loops, so a
# number to forward to is tried with them provisioned.
MAKE_RUN_INVENTORY = ("--start", "+442079460000", "--count", "1000")


class Shown(Enum):
    """Where a number is shown, which says where it is submitted."""

    CALLED = "a number a call rings: a call's `to`"
    FORWARDED_TO = "a phone to forward a number's calls to: forwarding `targets`"
    BLOCKED = "a caller to block: the blocklist's `caller_num`"
    CALLER = "a caller's number in a record: record_call --caller"
    HELD = "one of Relay's own numbers: provision_numbers --start"


@dataclass(frozen=True)
class Refused:
    """A number shown on purpose as one Relay refuses there, and the sentence it gets."""

    shown: Shown
    why: str
    says: str


CALLED, FORWARDED_TO, BLOCKED, CALLER, HELD = Shown
DRAMA_MOBILE_REFUSED = Refused(
    CALLED,
    "docs/websocket.md's error example: a call to Ofcom's drama mobile range",
    E164_UNASSIGNED_PROBLEM,
)
# The form sentence's example is shown wherever a number is refused for its form.
IN_EVERY_REFUSAL = (CALLED, FORWARDED_TO, BLOCKED, CALLER)

# source -> {number: where it is shown}. Console sources are pages by their route's name
# (the user's own number left out), submitted through the console's forms; the rest through the
# API and the operators' commands.
SHOWN: dict[str, dict[str, tuple]] = {
    "console forwarding": {"+441134960456": (FORWARDED_TO,)},
    "console ringing": {"+441134960456": (FORWARDED_TO,)},  # a phone entry of a ring list
    "console blocklist": {"+447700900123": (BLOCKED,)},
    "console calls": {"+442079460123": (CALLED,)},
    "console/templates/console/calls.html": {"+442079460123": (CALLED,)},  # from the browser
    "core.phone refusals": {"+441134960123": IN_EVERY_REFUSAL},
    "README.md": {
        "+441632960000": (CALLER,),  # SERVICE_CALLER_ID's default: what callees see
        "+442079460000": (HELD,),
        "+442079460001": (HELD,),
        "+442079460002": (HELD,),
        "+442079460003": (HELD,),
        "+447700900123": (CALLER,),
        "+442079460123": (CALLED,),
    },
    "docs/benchmarks.md": {
        "+441134960991": (FORWARDED_TO,),  # sip_ring_group's first phone
        "+441134960990": (FORWARDED_TO,),  # sip_recorded's phone (bench.fixtures.FORWARD_TARGET)
        "+441134960994": (FORWARDED_TO,),  # sip_transfer's target (fixtures.TRANSFER_TARGET)
    },
    "docs/decisions.md": {"+442079460001": (HELD,), "+442079460000": (HELD,)},
    "docs/errors.md": {"+441134960123": IN_EVERY_REFUSAL},
    "docs/matrix.md": {
        "+447700900123": (CALLER,),
        "+442079460001": (HELD,),
        "+441134960200": (FORWARDED_TO,),
        "+442079460123": (CALLED,),
        "+442079460124": (CALLED,),
    },
    "docs/quickstart.md": {
        "+442079460417": (HELD,),
        "+442079460123": (CALLED,),
        "+442079460871": (HELD,),
    },
    "docs/telephony.md": {
        "+442079460001": (HELD,),
        "+447700900123": (CALLER,),
        "+441134960200": (FORWARDED_TO,),
        "+441134960300": (FORWARDED_TO,),  # a blind transfer's target (issue 58)
        "+442079460000": (CALLER,),  # as SERVICE_CALLER_ID
    },
    "docs/voice-apps.md": {
        "+442079460123": (CALLED,),
        "+441632960000": (CALLER,),  # SERVICE_CALLER_ID's default, as a hook's `from`
        "+442079460001": (HELD,),  # the demo user's, whose menu SIPp calls
        "+447700900123": (CALLER,),
    },
    "examples/reminder.py": {"+442079460123": (CALLED,)},
    "docs/websocket.md": {
        "+442079460123": (CALLED,),
        "+442079460042": (HELD,),
        "+442079460001": (HELD,),
        "+447700900123": (CALLER,),
        "+447700900456": (DRAMA_MOBILE_REFUSED,),
        "+441134960300": (FORWARDED_TO,),  # a call_transfer's target (issue 58)
    },
    "examples/quickstart.py": {"+442079460123": (CALLED,)},
    "examples/quickstart-socket.mjs": {"+442079460123": (CALLED,)},
    "OpenAPI schema": {
        "+442079460123": (CALLED,),
        "+442079460042": (HELD,),
        "+447700900123": (BLOCKED, CALLER),
        "+441134960456": (FORWARDED_TO,),
    },
}


# --- reading what people read -------------------------------------------------------------


def numbers_in(text: str) -> set[str]:
    """The E.164-looking numbers of `text`, without their spaces."""
    return {match.replace(" ", "") for match in E164_LIKE.findall(html.unescape(text))}


def file_sources() -> dict[str, set[str]]:
    """The numbers of the README, docs/*.md, examples/ and the templates, by path."""
    paths = [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
        # The examples' files (running one that imports another leaves a __pycache__ beside).
        *sorted(path for path in (ROOT / "examples").iterdir() if path.is_file()),
        *sorted((ROOT / "console" / "templates").rglob("*.html")),
        *sorted((ROOT / "templates").rglob("*.html")),
    ]
    return {str(path.relative_to(ROOT)): numbers_in(path.read_text()) for path in paths}


def strings_of(value):
    """Every string in a JSON document."""
    if isinstance(value, dict):
        for item in value.values():
            yield from strings_of(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_of(item)
    elif isinstance(value, str):
        yield value


def schema_numbers(client: Client) -> set[str]:
    """The numbers of the OpenAPI schema's examples and texts, each string read alone."""
    response = client.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return set().union(*(numbers_in(text) for text in strings_of(response.json())))


def console_pages(user) -> dict[str, set[str]]:
    """The numbers of every console page a GET shows, by route name: signed out, and signed in as
    `user` holding one number (left out: it is the user's, not an example)."""
    number = NumberFactory(owner=user)
    signed_in, signed_out = Client(), Client()
    sign_in(signed_in, user)
    found: dict[str, set[str]] = {}
    for pattern in console_urls.urlpatterns:
        assert isinstance(pattern, URLPattern)
        params = set(pattern.pattern.converters)
        if not params <= {"number_id"}:
            continue  # a recording, a call or a session: actions and media, no examples
        url = reverse(f"console:{pattern.name}", kwargs={"number_id": number.pk} if params else {})
        for client in (signed_out, signed_in):
            response = client.get(url)
            if response.status_code == 200 and response.get("Content-Type", "").startswith(
                "text/html"
            ):
                shown = numbers_in(response.content.decode()) - {number.number}
                found.setdefault(f"console {pattern.name}", set()).update(shown)
    return found


def test_every_number_shown_is_listed_with_where_it_is_shown(user, client):
    found = {
        **file_sources(),
        **console_pages(user),
        "OpenAPI schema": schema_numbers(client),
        "core.phone refusals": numbers_in(E164_FORM_PROBLEM + E164_UNASSIGNED_PROBLEM),
    }

    unlisted = {
        source: sorted(numbers - set(SHOWN.get(source, {})))
        for source, numbers in found.items()
        if numbers - set(SHOWN.get(source, {}))
    }
    gone = {
        source: sorted(set(listed) - found.get(source, set()))
        for source, listed in SHOWN.items()
        if set(listed) - found.get(source, set())
    }
    assert not unlisted, f"list these in SHOWN, with where they are shown: {unlisted}"
    assert not gone, f"SHOWN lists numbers no longer shown: {gone}"


# --- submitting each where it is shown ----------------------------------------------------


def cases():
    """One case per number, use and way in (console or API), whichever sources show it."""
    by_case: dict[tuple, list[str]] = {}
    for source, numbers in SHOWN.items():
        for number, uses in numbers.items():
            for use in uses:
                by_case.setdefault((number, use, source.startswith("console ")), []).append(source)
    return [
        pytest.param(
            number,
            use,
            console,
            sources,
            id=f"{number}-{(use.shown if isinstance(use, Refused) else use).name.lower()}"
            f"-{'console' if console else 'api'}",
        )
        for (number, use, console), sources in by_case.items()
    ]


def test_forwarding_is_tried_against_the_inventory_make_run_provisions():
    assert " ".join(MAKE_RUN_INVENTORY) in (ROOT / "Makefile").read_text()


@pytest.fixture
def number(user):
    """The user's number, with make run's inventory around it (forwarding refuses it)."""
    held = NumberFactory(owner=user)
    call_command("provision_numbers", *MAKE_RUN_INVENTORY)
    return held


def submit(shown: Shown, e164: str, *, console: bool, user, number, client_jwt):
    """Submit `e164` where `shown` says, as a person would; None when taken, else the
    refusal's text."""
    try:
        if shown is HELD:  # taken: added, or there already (make run's inventory)
            out = call_command_output("provision_numbers", "--start", e164, "--count", "1")
            return None if "0 were not valid numbers" in out else out
        if shown is CALLER:
            call_command_output(
                "record_call", "--number", number.number, "--caller", e164, "--status", "missed"
            )
            return None
    except CommandError as refused:
        return str(refused)
    if console:
        browser = Client()
        sign_in(browser, user)
        path, data = {
            CALLED: ("/calls", {"callId": "c1", "to": e164, "message": "Hi", "language": "en"}),
            FORWARDED_TO: (
                f"/numbers/{number.pk}/forwarding",
                {"targets": e164, "ringSeconds": "20", "callerId": "caller"},
            ),
            BLOCKED: (f"/numbers/{number.pk}/blocked", {"caller_num": e164}),
        }[shown]
        response = browser.post(path, data)
        return None if response.status_code == 302 else errors_on(response.content.decode())
    method, path, body, taken = {
        CALLED: ("post", "/api/calls", {"callId": "c1", "to": e164, "message": "Hi"}, 202),
        FORWARDED_TO: ("put", f"/api/numbers/{number.pk}/forwarding", {"targets": [e164]}, 200),
        BLOCKED: ("post", f"/api/numbers/{number.pk}/blocked", {"caller_num": e164}, 201),
    }[shown]
    response = getattr(client_jwt, method)(path, body, format="json")
    return None if response.status_code == taken else response.content.decode()


def errors_on(page: str) -> str:
    """The error lists of a console page, as text."""
    lists = re.findall(r'<ul class="errors"[^>]*>(.*?)</ul>', page, flags=re.DOTALL)
    return html.unescape(re.sub(r"<[^>]+>", " ", " ".join(lists))).strip() or page


def call_command_output(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
@pytest.mark.parametrize(("e164", "use", "console", "sources"), cases())
def test_each_example_is_taken_where_it_is_shown(
    e164, use, console, sources, user, number, client_jwt
):
    shown = use.shown if isinstance(use, Refused) else use

    refusal = submit(shown, e164, console=console, user=user, number=number, client_jwt=client_jwt)

    if isinstance(use, Refused):
        assert refusal is not None and use.says in refusal, f"shown as refused: {use.why}"
    else:
        where = f"shown by {', '.join(sources)} as {shown.value}"
        assert refusal is None, f"{e164}, {where}, is refused: {refusal}"
        if shown is BLOCKED:
            assert BlockedCaller.objects.filter(caller_num=e164).exists()
        if shown is FORWARDED_TO:
            assert Number.objects.get(pk=number.pk).forward_targets == [e164]
