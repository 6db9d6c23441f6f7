"""`machineDetection` on the way in (POST /api/calls, the `call` frame) and `answeredBy` on the
way out (call_status frames, GET /api/calls, webhooks), issue 56. What the detector hears is
tested on real calls in tests/telephony/test_answering_machines.py; here the agent's report
(realtime.pipeline.call_answered_as) is made as the agent makes it."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from calls.models import Call, CallEvent
from calls.states import CallState
from realtime import pipeline
from realtime.providers import Step
from realtime.services import call_submit
from tests.conftest import drain_tasks, jwt_client
from tests.webhooks.test_webhooks import Receiver

BODY = {"callId": "m1", "to": "+442079460123", "message": "Your order is ready"}


def answered(call: Call) -> Call:
    """The call moved as the agent moves it up to its answer."""
    for old, new in (("queued", "dialing"), ("dialing", "ringing"), ("ringing", "in_progress")):
        assert pipeline.call_transition(call=call, step=Step(status=new), expected_status=old)
    return call


@pytest.mark.django_db
@pytest.mark.parametrize("mode", ["detect", "leave_message"])
def test_a_call_asks_for_machine_detection_and_the_list_shows_it(client_jwt, mode):
    response = client_jwt.post("/api/calls", {**BODY, "machineDetection": mode}, format="json")

    assert response.status_code == 202
    assert Call.objects.get(call_id="m1").machine_detection == mode
    [listed] = client_jwt.get("/api/calls").json()["calls"]
    assert (listed["machineDetection"], listed["answeredBy"]) == (mode, None)


@pytest.mark.django_db
@pytest.mark.parametrize("extra", [{}, {"machineDetection": None}])
def test_without_machine_detection_a_call_is_as_before(client_jwt, extra):
    assert client_jwt.post("/api/calls", {**BODY, **extra}, format="json").status_code == 202

    call = Call.objects.get(call_id="m1")
    assert call.machine_detection is None
    drain_tasks()
    detail = client_jwt.get("/api/calls/m1").json()
    assert (detail["machineDetection"], detail["answeredBy"]) == (None, None)
    assert [e.get("event") for e in detail["timeline"]] == [None] * 5


@pytest.mark.django_db
def test_the_simulated_callee_is_a_person_and_says_so(client_jwt):
    body = {**BODY, "machineDetection": "leave_message"}
    assert client_jwt.post("/api/calls", body, format="json").status_code == 202
    drain_tasks()

    detail = client_jwt.get("/api/calls/m1").json()
    assert (detail["status"], detail["answeredBy"]) == ("completed", "human")
    assert [(e["status"], e.get("event")) for e in detail["timeline"]][-2:] == [
        ("in_progress", "detected"),
        ("completed", None),
    ]
    assert detail["timeline"][-2]["answeredBy"] == "human"


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["yes", "", "DETECT", 1, ["detect"], {"mode": "detect"}, True])
def test_any_other_value_is_refused_naming_the_field(client_jwt, value):
    response = client_jwt.post("/api/calls", {**BODY, "machineDetection": value}, format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert list(response.json()["fields"]) == ["machineDetection"]
    assert not Call.objects.exists()


@pytest.mark.django_db(transaction=True)
async def test_the_call_frame_takes_it_and_refuses_a_bad_one_as_post_does(communicator, login):
    ws, _ = await communicator(token=login.token)
    await ws.send_json_to({"type": "call", **BODY, "machineDetection": "leave_message"})
    assert (await ws.receive_json_from(timeout=5))["type"] == "call_ack"
    assert (await ws.receive_json_from(timeout=5))["status"] == "queued"

    bad = {**BODY, "callId": "m2", "machineDetection": "later"}
    await ws.send_json_to({"type": "call", **bad})
    error = await ws.receive_json_from(timeout=5)
    response = await sync_to_async(jwt_client(login.token).post)("/api/calls", bad, format="json")

    assert error == {"type": "error", "callId": "m2", **response.json()}
    assert list(error["fields"]) == ["machineDetection"]
    stored = await sync_to_async(Call.objects.get)(call_id="m1")
    assert stored.machine_detection == "leave_message"


@pytest.mark.django_db(transaction=True)
async def test_who_answered_is_pushed_once_decided_and_stays_on_every_frame(communicator, user):
    ws, _ = await communicator(user)
    call, _ = await sync_to_async(call_submit)(
        user=user, data={**BODY, "machineDetection": "detect"}
    )
    await sync_to_async(answered)(call)
    await sync_to_async(pipeline.call_answered_as)(
        call=call, answered_by="machine", heard="greeting"
    )
    await sync_to_async(pipeline.call_transition)(
        call=call, step=Step(status=CallState.COMPLETED, duration=7), expected_status="in_progress"
    )

    frames = []
    while not frames or frames[-1].get("status") != "completed":
        frame = await ws.receive_json_from(timeout=5)
        if frame["type"] == "call_status":
            frames.append(frame)
    by_status = [(f["status"], f.get("event"), f.get("answeredBy")) for f in frames]
    assert by_status == [
        ("queued", None, None),
        ("dialing", None, None),
        ("ringing", None, None),
        ("in_progress", None, None),
        ("in_progress", "detected", "machine"),
        ("completed", None, "machine"),
    ]
    assert [f["seq"] for f in frames] == [1, 2, 3, 4, 5, 6]
    assert frames[4]["detail"] == "a greeting longer than a person's answer"


@pytest.mark.django_db(transaction=True)
def test_webhooks_and_the_call_list_carry_who_answered(settings, user, client_jwt):
    settings.WEBHOOK_ALLOW_PRIVATE = True
    receiver = Receiver()
    try:
        client_jwt.put("/api/user/webhook", {"url": receiver.url}, format="json")
        call, _ = call_submit(user=user, data={**BODY, "machineDetection": "leave_message"})
        answered(call)
        pipeline.call_answered_as(call=call, answered_by="fax", heard="cng")
        pipeline.call_transition(
            call=call,
            step=Step(status=CallState.COMPLETED, duration=2, reason="fax"),
            expected_status="in_progress",
        )
        drain_tasks()
        events = receiver.events()
    finally:
        receiver.close()

    assert [(e["status"], e.get("answeredBy")) for e in events][-2:] == [
        ("in_progress", "fax"),
        ("completed", "fax"),
    ]
    assert events[-1]["reason"] == "fax"
    [listed] = client_jwt.get("/api/calls").json()["calls"]
    assert (listed["answeredBy"], listed["reason"]) == ("fax", "fax")
    event = CallEvent.objects.get(call=call, kind="detected")
    assert event.data == {"answeredBy": "fax"}
