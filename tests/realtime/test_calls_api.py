import pytest

from calls.models import Call
from tests.conftest import drain_tasks
from tests.ledger import ack

pytestmark = pytest.mark.django_db


def submit(client, call_id="c1", to="+442079460120", message="Hello there", **extra):
    return client.post(
        "/api/calls", {"callId": call_id, "to": to, "message": message, **extra}, format="json"
    )


def test_submitting_a_call_answers_202_with_the_ack(client_jwt):
    response = submit(client_jwt)

    assert response.status_code == 202
    assert response.json() == ack("c1", "queued")
    assert Call.objects.filter(call_id="c1").exists()


def test_resubmitting_a_call_id_acks_its_current_status_and_creates_nothing(client_jwt):
    submit(client_jwt)
    drain_tasks()

    response = submit(client_jwt, to="+442079460127")

    assert response.status_code == 202
    assert response.json()["status"] == "completed"
    assert Call.objects.count() == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"callId": "c1", "to": "12345", "message": "hi"}, "to"),
        ({"callId": "c1", "to": "+442079460120", "message": ""}, "message"),
        ({"callId": "c1", "to": "+442079460120", "message": "x" * 1001}, "message"),
        ({"to": "+442079460120", "message": "hi"}, "callId"),
        ({"callId": "c1", "to": "+442079460120", "message": "hi", "from": "+442079460555"}, "from"),
        ({"callId": "c1", "to": "+442079460120", "message": "hi", "language": "xx"}, "language"),
        ({"callId": "c1", "to": "+442079460120", "message": "hi", "language": 7}, "language"),
    ],
)
def test_bad_submissions_are_400_naming_the_field(client_jwt, body, field):
    response = client_jwt.post("/api/calls", body, format="json")

    assert response.status_code == 400
    assert field in response.json()["fields"]
    assert not Call.objects.exists()


@pytest.mark.parametrize(("language", "stored"), [("cmn", "cmn"), ("de", "de"), (None, "en")])
def test_a_call_is_spoken_in_the_language_asked_for_or_the_default(client_jwt, language, stored):
    extra = {"language": language} if language else {}

    assert submit(client_jwt, **extra).status_code == 202
    assert Call.objects.get(call_id="c1").language == stored


def test_a_non_object_body_is_400(client_jwt):
    response = client_jwt.post("/api/calls", [], format="json")
    assert response.status_code == 400


def test_the_call_list_is_newest_first_paged_and_filtered(client_jwt):
    for i, to in enumerate(["+442079460120", "+442079460127", "+442079460128"]):
        submit(client_jwt, call_id=f"c{i}", to=to)
    drain_tasks()

    everything = client_jwt.get("/api/calls").json()
    busy = client_jwt.get("/api/calls", {"status": "busy"}).json()
    page = client_jwt.get("/api/calls", {"limit": 1, "offset": 1}).json()

    assert [c["callId"] for c in everything["calls"]] == ["c2", "c1", "c0"]
    assert everything["total"] == 3
    assert [c["callId"] for c in busy["calls"]] == ["c1"]
    assert (page["total"], page["limit"], page["offset"], [c["callId"] for c in page["calls"]]) == (
        3,
        1,
        1,
        ["c1"],
    )
    assert set(everything["calls"][0]) == {
        "callId",
        "call",
        "to",
        "from",
        "message",
        "status",
        "duration",
        "reason",
        "createdAt",
        "updatedAt",
        "endedAt",
        "machineDetection",
        "answeredBy",
    }


@pytest.mark.parametrize("params", [{"status": "nope"}, {"limit": "0"}, {"offset": "-3"}])
def test_bad_list_parameters_are_400(client_jwt, params):
    assert client_jwt.get("/api/calls", params).status_code == 400


def test_a_call_shows_its_timeline(client_jwt):
    submit(client_jwt, call_id="id/with spaces")
    drain_tasks()

    response = client_jwt.get("/api/calls/id%2Fwith%20spaces")

    assert response.status_code == 200
    body = response.json()
    assert body["callId"] == "id/with spaces"
    assert body["status"] == "completed"
    assert [e["status"] for e in body["timeline"]] == [
        "queued",
        "dialing",
        "ringing",
        "in_progress",
        "completed",
    ]


def test_a_queued_call_can_be_canceled_once(client_jwt):
    submit(client_jwt)

    canceled = client_jwt.post("/api/calls/c1/cancel")
    again = client_jwt.post("/api/calls/c1/cancel")

    assert canceled.status_code == 200
    assert canceled.json()["status"] == "canceled"
    assert again.status_code == 409
    assert again.json()["code"] == "call_not_cancelable"


def test_an_outsider_gets_404_for_another_users_call_and_cancels_nothing(client_jwt, outsider):
    submit(client_jwt)

    assert outsider.get("/api/calls/c1").status_code == 404
    assert outsider.post("/api/calls/c1/cancel").status_code == 404
    assert outsider.get("/api/calls").json()["total"] == 0
    assert Call.objects.get(call_id="c1").status == "queued"


def test_calls_work_with_an_api_key(client_key):
    assert submit(client_key).status_code == 202
    assert client_key.get("/api/calls/c1").status_code == 200


def test_calls_need_authentication(api_client):
    assert api_client.get("/api/calls").status_code == 401
    assert submit(api_client).status_code == 401
