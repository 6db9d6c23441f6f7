"""A Python client generated with openapi-python-client from the live server's /api/schema
runs the whole flow against that server (issue 17): register, CAPTCHA, number, block and
unblock, history, a call and its cancel, and the documented errors on the way. One server and
one generated client serve every test of the module (each start costs seconds); each test
registers a user of its own.

The client raises on any status the schema does not document (raise_on_unexpected_status),
and parses every documented body into the schema's models, whose `code` enums refuse a code
the schema does not list: so the test fails wherever the schema and the server disagree.
"""

import importlib
import subprocess
import sys
import uuid

import pytest

from harness.live import RelayProcess
from history.services import record_inbound_call
from virtual_numbers.models import Number
from virtual_numbers.services import inventory_provision

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

PACKAGE = "relay_generated_client"
CONFIG = f"""\
package_name_override: {PACKAGE}
project_name_override: relay-generated-client
post_hooks: []
content_type_overrides:
  audio/wav: application/octet-stream
  application/zip: application/octet-stream
"""


@pytest.fixture(scope="module")
def relay(tmp_path_factory, django_db_setup):
    # Steps a minute apart: a call is still before its end when a test cancels it.
    process = RelayProcess(tmp_path_factory.mktemp("server"), SIMULATED_STEP_SECONDS="60")
    yield process
    process.stop()


@pytest.fixture(scope="module")
def generated(relay, tmp_path_factory):
    """The client package generated from the live schema, imported from a folder of its own."""
    folder = tmp_path_factory.mktemp("client")
    config = folder / "client.yml"
    config.write_text(CONFIG)
    out = folder / "client"
    result = subprocess.run(  # noqa: S603 - the generator from our own venv
        [
            sys.executable,
            "-m",
            "openapi_python_client",
            "generate",
            "--url",
            f"{relay.base}/api/schema",
            "--meta",
            "none",
            "--output-path",
            str(out / PACKAGE),
            "--config",
            str(config),
            "--fail-on-warning",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(out))
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(f"{PACKAGE}.")]:
            del sys.modules[name]


def api(name: str):
    """One generated operation module, e.g. api("numbers.numbers_create")."""
    return importlib.import_module(f"{PACKAGE}.api.{name}")


def model(name: str):
    return getattr(importlib.import_module(f"{PACKAGE}.models"), name)


@pytest.fixture
def anonymous(relay, generated):
    return generated.Client(base_url=relay.base, raise_on_unexpected_status=True)


def register(anonymous, email: str):
    return api("auth.auth_register").sync_detailed(
        client=anonymous,
        body=model("RegisterInputRequest")(
            email=email, password="a-long-passphrase-for-the-client"
        ),
    )


@pytest.fixture
def client(relay, generated, anonymous):
    """A registered user's client, authenticated with the JWT registration returned."""
    registered = register(anonymous, f"client-{uuid.uuid4().hex[:8]}@example.com")
    assert registered.status_code == 201
    return generated.AuthenticatedClient(
        base_url=relay.base, token=registered.parsed.token, raise_on_unexpected_status=True
    )


def captcha_answer(anonymous, right: bool):
    challenge = api("captcha.captcha_issue").sync(client=anonymous)
    return api("captcha.captcha_verify").sync_detailed(
        client=anonymous,
        body=model("VerifyInputRequest")(
            a=challenge.a,
            b=challenge.b,
            answer=challenge.a + challenge.b + (0 if right else 1),
            challenge_id=challenge.challenge_id,
        ),
    )


def create_number(client, token: str):
    return api("numbers.numbers_create").sync_detailed(
        client=client,
        body=model("NumberCreateInputRequest")(alias="Office", pin="4821", captcha_token=token),
    )


@pytest.fixture
def number(client, anonymous):
    inventory_provision(start="+442079460000", count=20)
    created = create_number(client, str(captcha_answer(anonymous, right=True).parsed.token))
    assert created.status_code == 201
    return created.parsed


def test_registration_gives_a_jwt_and_an_api_key_and_an_email_once(relay, generated, anonymous):
    registered = register(anonymous, "client@example.com")
    assert registered.status_code == 201
    assert registered.parsed.user.api_key.startswith("vr_")
    by_key = generated.AuthenticatedClient(
        base_url=relay.base,
        token=registered.parsed.user.api_key,
        prefix="",
        auth_header_name="X-API-Key",
        raise_on_unexpected_status=True,
    )
    assert api("user.user_me").sync(client=by_key).email == "client@example.com"
    again = register(anonymous, "client@example.com")
    assert again.status_code == 409 and again.parsed.code.value == "email_taken"


def test_a_captcha_token_buys_one_number_and_a_wrong_answer_none(client, anonymous):
    inventory_provision(start="+442079460000", count=20)
    wrong = captcha_answer(anonymous, right=False)
    assert wrong.status_code == 400 and wrong.parsed.code.value == "captcha_wrong_answer"
    token = str(captcha_answer(anonymous, right=True).parsed.token)
    created = create_number(client, token)
    assert created.status_code == 201
    assert created.parsed.number.startswith("+4420794600")
    spent = create_number(client, token)
    assert spent.status_code == 400 and spent.parsed.code.value == "captcha_invalid"


def test_a_caller_is_blocked_listed_and_unblocked_with_a_delete_that_carries_its_body(
    client, number
):
    caller = model("BlockedCallerInputRequest")(caller_num="+447700900123")
    blocked = api("numbers.numbers_blocked_add").sync_detailed(
        number.id, client=client, body=caller
    )
    assert blocked.status_code == 201 and blocked.parsed.caller_num == "+447700900123"
    listing = api("numbers.numbers_blocked_list")
    assert [b.caller_num for b in listing.sync(number.id, client=client).blocked] == [
        "+447700900123"
    ]
    remove = api("numbers.numbers_blocked_remove")
    removed = remove.sync_detailed(number.id, client=client, body=caller)
    assert removed.status_code == 200 and removed.parsed.success is True
    assert listing.sync(number.id, client=client).blocked == []
    gone = remove.sync_detailed(number.id, client=client, body=caller)
    assert gone.status_code == 404 and gone.parsed.code.value == "not_found"
    unknown = listing.sync_detailed(uuid.uuid4(), client=client)
    assert unknown.status_code == 404


def test_history_lists_a_recorded_call_whose_missing_recording_is_a_404(client, number):
    record_inbound_call(
        number=Number.objects.get(pk=number.id),
        caller_num="+447700900456",
        status="answered",
        duration=45,
    )
    history = api("history.history_list").sync(client=client)
    assert history.total == 1
    assert [(r.caller_num, r.status.value, r.duration) for r in history.history] == [
        ("+447700900456", "answered", 45)
    ]
    assert history.history[0].number_id == number.id
    assert history.history[0].recording_url is None
    # That call left no voicemail message: its recording is the documented 404.
    recording = api("history.history_recording_get").sync_detailed(
        history.history[0].id, client=client
    )
    assert recording.status_code == 404


def test_a_call_is_submitted_and_canceled_once_and_a_second_cancel_is_a_409(client, number):
    submitted = api("calls.calls_submit").sync_detailed(
        client=client,
        body=model("CallSubmitInputRequest")(
            call_id="client-call-1",
            to="+442079460123",
            message="Your table is ready",
            from_=number.number,
        ),
    )
    assert submitted.status_code == 202
    assert (submitted.parsed.call_id, submitted.parsed.status.value) == ("client-call-1", "queued")
    cancel = api("calls.calls_cancel")
    canceled = cancel.sync_detailed("client-call-1", client=client)
    assert canceled.status_code == 200 and canceled.parsed.status.value == "canceled"
    refused = cancel.sync_detailed("client-call-1", client=client)
    assert refused.status_code == 409 and refused.parsed.code.value == "call_not_cancelable"
    call = api("calls.calls_get").sync("client-call-1", client=client)
    assert call.timeline[-1].status.value == "canceled"
    calls = api("calls.calls_list").sync(client=client)
    assert [c.call_id for c in calls.calls] == ["client-call-1"]


def test_a_bad_token_and_a_body_over_the_limit_get_their_documented_errors(
    relay, generated, anonymous
):
    stranger = generated.AuthenticatedClient(
        base_url=relay.base, token="not-a-jwt", raise_on_unexpected_status=True
    )
    refused = api("numbers.numbers_list").sync_detailed(client=stranger)
    assert refused.status_code == 401 and refused.parsed.code.value == "authentication_failed"
    # A body over API_MAX_BODY_BYTES: the documented 413.
    too_large = api("auth.auth_register").sync_detailed(
        client=anonymous,
        body=model("RegisterInputRequest")(email="big@example.com", password="p" * 70_000),
    )
    assert too_large.status_code == 413
    assert too_large.parsed.code.value == "payload_too_large"
