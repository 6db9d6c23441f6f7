"""A call's `script` (issue 41): checked whole before the ack, by POST /api/calls and the
socket's `call` frame alike, every refusal naming its path; stored normalised."""

import pytest

from accounts.models import DialRefusal
from calls.models import Call
from tests.factories import InventoryNumberFactory
from tests.ledger import aack
from voiceapps.verbs import SCRIPT_MAX_VERBS

pytestmark = pytest.mark.django_db(transaction=True)

REMINDER = [
    {"say": {"text": "Your appointment is tomorrow at nine."}},
    {
        "gather": {
            "numDigits": 1,
            "say": {"text": "Press 1 to confirm, 2 to cancel."},
            "branches": {"1": [{"say": {"text": "Confirmed."}}], "default": [{"hangup": {}}]},
        }
    },
]


def submit(client, **fields):
    body = {"callId": "c1", "to": "+442079460120", **fields}
    return client.post("/api/calls", body, format="json")


def refused_fields(response) -> dict:
    assert response.status_code == 400, response.content
    assert not Call.objects.exists()
    return response.json()["fields"]


def test_a_script_is_stored_with_every_default_filled_in(client_jwt):
    response = submit(client_jwt, script=REMINDER)

    assert response.status_code == 202
    call = Call.objects.get()
    assert call.message == ""
    assert call.script == [
        {"say": {"text": "Your appointment is tomorrow at nine.", "loop": 1}},
        {
            "gather": {
                "numDigits": 1,
                "finishOnKey": "#",
                "timeout": 5,
                "say": {"text": "Press 1 to confirm, 2 to cancel.", "loop": 1},
                "input": ["dtmf"],
                "branches": {
                    "1": [{"say": {"text": "Confirmed.", "loop": 1}}],
                    "default": [{"hangup": {}}],
                },
            }
        },
    ]
    detail = client_jwt.get("/api/calls/c1").json()
    assert detail["script"] == call.script and detail["message"] == ""


def test_a_message_call_has_no_script(client_jwt):
    assert submit(client_jwt, message="Hello").status_code == 202
    assert client_jwt.get("/api/calls/c1").json()["script"] is None


@pytest.mark.parametrize(
    "fields",
    [{}, {"message": "Hello", "script": [{"hangup": {}}]}],
    ids=["neither", "both"],
)
def test_exactly_one_of_message_and_script(client_jwt, fields):
    assert "message" in refused_fields(submit(client_jwt, **fields))


@pytest.mark.parametrize(
    ("script", "path"),
    [
        (None, "script"),
        ([], "script"),
        ("say hello", "script"),
        ([{"whisper": {"text": "hi"}}], "script.0"),
        ([{"say": {"text": "hi"}, "hangup": {}}], "script.0"),
        (["hangup"], "script.0"),
        ([{"say": {"text": ""}}], "script.0.say.text"),
        ([{"say": {"text": "x" * 1001}}], "script.0.say.text"),
        ([{"say": {"text": "hi\u0000"}}], "script.0.say.text"),
        ([{"say": {"text": "hi", "colour": "blue"}}], "script.0.say.colour"),
        ([{"say": {"text": "hi", "language": "xx"}}], "script.0.say.language"),
        ([{"say": {"text": "hi", "loop": 10**40}}], "script.0.say.loop"),
        (
            [{"pause": {}}, {"hangup": {}}, {"gather": {"numDigits": 0}}],
            "script.2.gather.numDigits",
        ),
        ([{"gather": {"finishOnKey": "x"}}], "script.0.gather.finishOnKey"),
        ([{"gather": {"say": {"text": 5}}}], "script.0.gather.say.text"),
        ([{"gather": {"branches": {"x": [{"hangup": {}}]}}}], "script.0.gather.branches.x"),
        (
            [{"gather": {"branches": {"1": [{"pause": {"seconds": 99}}]}}}],
            "script.0.gather.branches.1.0.pause.seconds",
        ),
        ([{"dial": {"targets": []}}], "script.0.dial.targets"),
        ([{"dial": {"targets": ["12345"]}}], "script.0.dial.targets.0"),
        ([{"dial": {"targets": ["+442079460120"], "callerId": "me"}}], "script.0.dial.callerId"),
        ([{"dial": {"targets": ["+442079460120"], "record": "yes"}}], "script.0.dial.record"),
        ([{"record": {"maxSeconds": 601}}], "script.0.record.maxSeconds"),
        ([{"redirect": {}}], "script.0.redirect.url"),
        ([{"redirect": {"url": "ftp://example.com/app"}}], "script.0.redirect.url"),
        ([{"redirect": {"url": "http://example.com/app"}}], "script.0.redirect.url"),
        ([{"redirect": {"url": "https://127.0.0.1/app"}}], "script.0.redirect.url"),
        ([{"gather": {"actionHook": "https://10.0.0.7/digits"}}], "script.0.gather.actionHook"),
        ([{"hangup": {}}] * (SCRIPT_MAX_VERBS + 1), "script"),
    ],
)
def test_an_invalid_script_is_a_400_naming_the_path(client_jwt, script, path):
    fields = refused_fields(submit(client_jwt, script=script))

    assert path in fields, fields


def test_branches_count_towards_the_verbs_a_script_may_hold(client_jwt):
    branch = [{"pause": {}}] * 25
    script = [{"gather": {"branches": {"1": branch, "2": branch}}}]  # 51 verbs

    assert "script" in refused_fields(submit(client_jwt, script=script))
    script = [{"gather": {"branches": {"1": branch, "2": branch[1:]}}}]  # 50
    assert submit(client_jwt, script=script).status_code == 202


def test_hooks_on_loopback_are_taken_where_the_setting_allows_them(client_jwt, settings):
    settings.WEBHOOK_ALLOW_PRIVATE = True
    script = [{"gather": {"actionHook": "http://127.0.0.1:8000/digits"}}]

    assert submit(client_jwt, script=script).status_code == 202


async def test_the_socket_answers_an_invalid_script_with_an_error_frame_naming_it(
    communicator, user
):
    socket, connected = await communicator(user)
    assert connected
    script = [{"say": {"text": "hi"}}, {"gather": {"timeout": "soon"}}]

    await socket.send_json_to(
        {"type": "call", "callId": "c1", "to": "+442079460120", "script": script}
    )
    frame = await socket.receive_json_from(timeout=5)

    assert frame["type"] == "error" and frame["callId"] == "c1"
    assert "script.1.gather.timeout" in frame["fields"]
    assert not await Call.objects.aexists()


async def test_the_socket_acks_a_script(communicator, user):
    socket, connected = await communicator(user)
    assert connected

    await socket.send_json_to(
        {"type": "call", "callId": "c1", "to": "+442079460120", "script": REMINDER}
    )
    frame = await socket.receive_json_from(timeout=5)

    assert frame == await aack("c1", "queued")
    assert (await Call.objects.aget()).script[1]["gather"]["numDigits"] == 1


REFUSED = "+8613800138000"  # outside DIAL_ALLOWED_COUNTRIES


@pytest.mark.parametrize(
    "script",
    [
        [{"dial": {"targets": ["+441134960200", REFUSED]}}],
        [{"gather": {"branches": {"1": [{"dial": {"targets": [REFUSED]}}]}}}],
    ],
    ids=["dial", "dial-in-a-branch"],
)
@pytest.mark.parametrize("provider", ["simulated", "sip"])
def test_a_dial_target_the_policy_refuses_refuses_the_call_before_it_is_made(
    client_jwt, user, settings, script, provider
):
    settings.TELEPHONY_PROVIDER = provider

    response = submit(client_jwt, script=script)

    assert response.status_code == 400, response.content
    assert response.json()["code"] == "destination_not_allowed"
    assert not Call.objects.exists()
    assert DialRefusal.objects.get(user=user).kind == DialRefusal.Kind.DESTINATION


def test_a_dial_target_of_relays_own_numbers_is_refused_as_a_loop(client_jwt):
    own = InventoryNumberFactory().e164

    response = submit(client_jwt, script=[{"dial": {"targets": [own]}}])

    assert response.status_code == 400, response.content
    assert response.json()["code"] == "destination_not_allowed"
    assert response.json()["fields"] == {"script": [f"{own} is a number of this service."]}
    assert not Call.objects.exists()


def test_the_sip_agent_takes_scripts_of_the_verbs_it_runs(client_jwt, settings):
    settings.TELEPHONY_PROVIDER = "sip"
    play = {"play": {"url": "https://example.com/hold.wav"}}
    dial = {"dial": {"targets": ["+441134960200"], "callerId": "caller"}}
    script = [*REMINDER, play, {"gather": {"play": play["play"]}}, {"record": {}}, dial]

    assert submit(client_jwt, script=script).status_code == 202
