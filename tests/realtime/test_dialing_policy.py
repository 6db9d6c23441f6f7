"""The dialing policy (issue 27), on the socket's `call` and POST /api/calls: every refused
country and number type, the settings that widen it, staff's countries for one user, and
the refusals kept for fraud review. Matrix `!call`: tests/matrix/test_matrix_bot.py;
`manage.py place_call`: test_place_call below, against a running Relay."""

import json
import subprocess
import sys

import pytest
from asgiref.sync import sync_to_async

from accounts.models import DialRefusal
from calls.models import Call
from harness.live import ROOT, RelayProcess, relay_env
from tests.dialing import ALLOWED_AT_HOME, REFUSED
from tests.factories import UserFactory
from tests.ledger import aack


@pytest.fixture
def user(db):
    """Unmetered: these tests place more calls at once than the free plan allows."""
    return UserFactory(unmetered=True)


def configure(settings, overrides: dict) -> None:
    for name, value in overrides.items():
        setattr(settings, name, value)


def submit(client, to: str, call_id: str = "c1"):
    return client.post(
        "/api/calls", {"callId": call_id, "to": to, "message": "Hello"}, format="json"
    )


# --- POST /api/calls --------------------------------------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize(("number", "reason", "overrides", "says"), REFUSED)
def test_rest_refuses_the_destination_saying_why_and_stores_no_call(
    settings, user, client_jwt, number, reason, overrides, says
):
    configure(settings, overrides)

    response = submit(client_jwt, number)

    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "destination_not_allowed"
    assert body["error"].startswith(f"{number} {says}") or says in body["error"], body
    assert "fields" not in body
    assert not Call.objects.exists()
    refusal = DialRefusal.objects.get(user=user)
    assert (refusal.kind, refusal.reason) == ("destination", reason)


@pytest.mark.django_db
@pytest.mark.parametrize("number", ALLOWED_AT_HOME)
def test_home_fixed_mobile_freephone_and_voip_numbers_are_dialled(client_jwt, number):
    response = submit(client_jwt, number)

    assert response.status_code == 202, response.content
    assert Call.objects.get().to == number
    assert not DialRefusal.objects.exists()


@pytest.mark.django_db
def test_the_allowed_countries_setting_decides_which_countries_are_dialled(settings, client_jwt):
    settings.DIAL_ALLOWED_COUNTRIES = ["FR", "US"]

    assert submit(client_jwt, "+33123456789", "fr").status_code == 202
    assert submit(client_jwt, "+12015550123", "us").status_code == 202
    home = submit(client_jwt, "+442079460120", "gb")
    assert home.status_code == 400
    assert home.json()["error"] == (
        "+442079460120 is a number in GB; this service dials only numbers in FR, US."
    )
    assert sorted(Call.objects.values_list("call_id", flat=True)) == ["fr", "us"]


@pytest.mark.django_db
def test_a_star_dials_every_country_and_numbers_of_none(settings, client_jwt):
    settings.DIAL_ALLOWED_COUNTRIES = ["*"]

    for i, number in enumerate(["+33123456789", "+12015550123", "+80012345678"]):
        assert submit(client_jwt, number, f"c{i}").status_code == 202, number
    assert Call.objects.count() == 3


@pytest.mark.django_db
def test_premium_and_similar_numbers_are_dialled_only_when_allowed(settings, client_jwt):
    settings.DIAL_ALLOW_PREMIUM = True
    numbers = ["+449012345678", "+445512345678", "+447012345678", "+447640123456"]

    for i, number in enumerate(numbers):
        assert submit(client_jwt, number, f"c{i}").status_code == 202, number
    # Premium numbers abroad still need their country.
    assert submit(client_jwt, "+33891123456", "fr").json()["code"] == "destination_not_allowed"


@pytest.mark.django_db
def test_staff_widen_the_countries_of_one_user_only(user, client_jwt, outsider):
    user.dial_countries = "FR,US"
    user.save(update_fields=["dial_countries"])

    assert submit(client_jwt, "+33123456789").status_code == 202
    assert submit(client_jwt, "+12015550123", "c2").status_code == 202
    assert submit(client_jwt, "+4930123456", "c3").status_code == 400
    refused = submit(outsider, "+33123456789")
    assert refused.status_code == 400
    assert refused.json()["code"] == "destination_not_allowed"


@pytest.mark.django_db
def test_a_repeated_call_id_is_acked_even_after_the_policy_narrowed(settings, client_jwt):
    """Idempotency first: the call placed before the change is answered, not refused."""
    settings.DIAL_ALLOWED_COUNTRIES = ["FR"]
    assert submit(client_jwt, "+33123456789").status_code == 202
    settings.DIAL_ALLOWED_COUNTRIES = ["GB"]

    again = submit(client_jwt, "+33123456789")

    assert again.status_code == 202
    assert Call.objects.count() == 1
    assert not DialRefusal.objects.exists()


@pytest.mark.django_db
def test_a_refused_number_is_not_written_to_the_log(user, client_jwt, caplog):
    response = submit(client_jwt, "+449012345678")

    assert response.status_code == 400
    assert caplog.records  # the access log line
    assert "+449012345678" not in caplog.text


# --- the socket's call frame ------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("number", "reason", "overrides", "says"), REFUSED)
async def test_the_socket_answers_an_error_frame_and_places_nothing(
    settings, user, communicator, number, reason, overrides, says
):
    configure(settings, overrides)
    ws, connected = await communicator(user)
    assert connected

    await ws.send_json_to({"type": "call", "callId": "c1", "to": number, "message": "Hi"})
    frame = await ws.receive_json_from(timeout=5)

    assert frame["type"] == "error"
    assert frame["callId"] == "c1"
    assert frame["code"] == "destination_not_allowed"
    assert says in frame["error"]
    assert "retryAfter" not in frame
    # The socket stays open and usable: the next call goes through.
    await ws.send_json_to({"type": "call", "callId": "c2", "to": "+442079460120", "message": "x"})
    ack = await ws.receive_json_from(timeout=5)
    assert ack == await aack("c2", "queued")
    calls = await sync_to_async(list)(Call.objects.values_list("call_id", flat=True))
    assert calls == ["c2"]
    refusal = await sync_to_async(DialRefusal.objects.get)(user=user)
    assert refusal.reason == reason


# --- manage.py place_call ---------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(180)
def test_place_call_prints_the_refusal_and_fails_and_places_an_allowed_number(user, tmp_path):
    """`manage.py place_call` against a running Relay, as an operator runs it: the refusal is
    printed and the command fails; an allowed number is placed and ends. Two refusals of
    different reasons (each costs the command's start-up): the socket's test above has every
    one, and the command only passes the server's error frame on."""
    relay = RelayProcess(tmp_path)
    env = relay_env(tmp_path)
    # The running Relay has the default policy: refusals that need no overrides.
    chosen = [param for param in REFUSED if not param.values[2]]
    chosen = [chosen[0], next(p for p in chosen if p.values[1] != chosen[0].values[1])]
    try:
        for param in chosen:
            number, reason, overrides, says = param.values
            done = subprocess.run(  # noqa: S603
                [sys.executable, "manage.py", "place_call", "--email", user.email, "--to", number,
                 "--message", "Hi", "--url", f"{relay.ws_base}/ws", "--timeout", "30"],
                cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
            assert done.returncode == 1, (number, done.stdout, done.stderr)
            error = json.loads(done.stdout.strip().splitlines()[-1])
            assert error["code"] == "destination_not_allowed", number
            assert says in done.stderr, (number, done.stderr)
        placed = subprocess.run(  # noqa: S603
            [sys.executable, "manage.py", "place_call", "--email", user.email,
             "--to", "+442079460120", "--message", "Hi", "--url", f"{relay.ws_base}/ws"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert placed.returncode == 0, (placed.stdout, placed.stderr)
    finally:
        relay.stop()
    refused = sorted(DialRefusal.objects.filter(user=user).values_list("reason", flat=True))
    assert refused == sorted(param.values[1] for param in chosen)
    assert list(Call.objects.values_list("to", flat=True)) == ["+442079460120"]
