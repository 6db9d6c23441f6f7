"""Scripts on real SIP calls (issue 41): the telephony agent runs say, play, gather, record,
dial, pause, hangup and redirect on an answered call, hears keys by RFC 4733 (SIPp's own DTMF
captures) and by SIP INFO, and calls a real voice application on loopback. An agent killed
during a gather: tests/telephony/test_agents.py."""

from __future__ import annotations

import io
import re
import subprocess
import time
import wave

import pytest
from standardwebhooks import Webhook

from calls.models import Call
from calls.states import TERMINAL_STATES
from harness.live import AgentProcess, wait_until
from harness.sip import MESSAGE_SECONDS, SIPP_SHARE, Sipp, free_udp_port, presses
from tests.telephony.conftest import sip_env, status_of
from tests.voiceapps.conftest import Reply
from webhooks.services import webhook_set

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

PROMPT = {"text": "Press 1 to confirm, 2 to cancel."}


@pytest.fixture(scope="module")
def scripted(tmp_path_factory, django_db_setup):
    """A telephony agent alone (its trunk: whatever SIPp a test starts on `trunk_port`), whose
    hooks may go to loopback."""
    workdir = tmp_path_factory.mktemp("scripted")
    trunk = free_udp_port()
    env = sip_env(workdir, trunk, WEBHOOK_ALLOW_PRIVATE="true", VOICE_HOOK_TIMEOUT="2")
    agent = AgentProcess(workdir, env)
    agent.trunk_port, agent.workdir, agent.env = trunk, workdir, env
    yield agent
    agent.stop()


@pytest.fixture
def secret(user, app) -> str:
    return webhook_set(user=user, url=app.url("/events"), events=["incoming_call"])[1]


# What an INFO from SIPp needs of Relay's INVITE: where to send it, and whom it is from.
CAPTURE = """    <action>
      <ereg regexp="sip:[^>]*" search_in="hdr" header="Contact:" assign_to="contact"/>
      <ereg regexp="[^ ].*" search_in="hdr" header="From:" assign_to="caller"/>
    </action>"""


def info_presses(keys: str) -> str:
    """SIPp actions: each key as a SIP INFO (application/dtmf-relay) inside the dialog,
    each answered before the next."""
    return "\n".join(
        f"""  <send retrans="500">
    <![CDATA[
INFO [$contact] SIP/2.0
Via: SIP/2.0/[transport] [local_ip]:[local_port];branch=[branch]
From: <sip:callee@[local_ip]:[local_port]>;tag=[pid]SIPpTag01[call_number]
To: [$caller]
[last_Call-ID:]
CSeq: {number + 1} INFO
Max-Forwards: 70
Content-Type: application/dtmf-relay
Content-Length: [len]

Signal={key}
Duration=160

    ]]>
  </send>
  <recv response="200"/>"""
        for number, key in enumerate(keys)
    )


def far_end(scripted, tmp_path, keys: str, *, info=False, before_ms=1500) -> Sipp:
    return Sipp(
        tmp_path / "sipp",
        "answer_keys",
        port=scripted.trunk_port,
        timeout=60,
        before_ms=before_ms,
        presses=info_presses(keys) if info else presses(keys),
        capture=CAPTURE if info else "",
        hangup_timeout_ms=30000,
    )


def run(user, script, call_id="c1") -> Call:
    from realtime.services import call_submit

    data = {"callId": call_id, "to": "+442079460123", "script": script}
    call = call_submit(user=user, data=data)[0]
    wait_until(lambda: status_of(call) in TERMINAL_STATES, deadline=60, what="the call's end")
    return call


def reports(call: Call) -> list[dict]:
    return [
        {"event": e.kind, **(e.data or {}), **({"detail": e.detail} if e.detail else {})}
        for e in call.events.exclude(kind="")
    ]


def test_a_key_pressed_by_rfc4733_answers_the_gather_and_its_hook(
    scripted, tmp_path, user, app, secret
):
    thanks = app.answer("/confirm", Reply(body=[{"say": {"text": "Thank you."}}]))
    sipp = far_end(scripted, tmp_path, "1")

    call = run(user, [{"gather": {"numDigits": 1, "say": PROMPT, "actionHook": thanks}}])

    assert sipp.finish() == 0, sipp
    assert call.status == "completed"
    assert reports(call) == [
        {"event": "gathered", "verb": "gather", "result": {"digits": "1", "reason": "numDigits"}}
    ]
    (_, headers, body), *_ = [r for r in app.requests if r[0] == "/confirm"]
    assert Webhook(secret).verify(body, headers)["result"] == {
        "digits": "1",
        "reason": "numDigits",
    }


def test_keys_sent_by_sip_info_are_heard_too(scripted, tmp_path, user):
    sipp = far_end(scripted, tmp_path, "42#", info=True)

    call = run(user, [{"gather": {"say": PROMPT, "timeout": 10}}])

    assert sipp.finish() == 0, sipp
    assert reports(call) == [
        {"event": "gathered", "verb": "gather", "result": {"digits": "42", "reason": "finishOnKey"}}
    ]


def test_a_menu_routes_by_the_key_pressed(scripted, tmp_path, user):
    sipp = far_end(scripted, tmp_path, "2", before_ms=500)
    menu = {
        "numDigits": 1,
        "say": PROMPT,
        "branches": {
            "1": [{"say": {"text": "Confirmed."}}],
            "2": [{"gather": {"numDigits": 1, "timeout": 1}}],
        },
    }

    call = run(user, [{"gather": menu}, {"say": {"text": "Replaced by the branch."}}])

    assert sipp.finish() == 0, sipp
    assert [r["result"] for r in reports(call)] == [
        {"digits": "2", "reason": "numDigits"},
        {"digits": "", "reason": "timeout"},  # the branch's gather: no key came
    ]


def test_a_gather_with_no_key_times_out_and_the_script_goes_on(scripted, tmp_path, user):
    sipp = far_end(scripted, tmp_path, "")

    call = run(user, [{"gather": {"timeout": 1}}, {"pause": {"seconds": 1}}, {"hangup": {}}])

    assert sipp.finish() == 0, sipp
    assert reports(call) == [
        {"event": "gathered", "verb": "gather", "result": {"digits": "", "reason": "timeout"}}
    ]
    assert call.duration >= 2


def test_a_failing_hook_is_reported_and_the_call_goes_on(scripted, tmp_path, user, app, secret):
    broken = app.answer("/broken", Reply(status=503))
    sipp = far_end(scripted, tmp_path, "5", before_ms=500)

    call = run(
        user,
        [{"gather": {"numDigits": 1, "actionHook": broken}}, {"gather": {"timeout": 1}}],
    )

    assert sipp.finish() == 0, sipp
    assert [r["event"] for r in reports(call)] == ["gathered", "hook_failed", "gathered"]
    assert call.status == "completed"


def test_a_redirect_runs_what_its_url_answers(scripted, tmp_path, user, app, secret):
    twiml = '<Response><Gather numDigits="1" timeout="5"><Say>Which one?</Say></Gather></Response>'
    rest = app.answer("/rest", Reply(body=twiml, content_type="application/xml"))
    sipp = far_end(scripted, tmp_path, "7")

    call = run(user, [{"redirect": {"url": rest}}])

    assert sipp.finish() == 0, sipp
    assert reports(call) == [
        {"event": "gathered", "verb": "gather", "result": {"digits": "7", "reason": "numDigits"}}
    ]


TARGET = "+441134960200"  # the number a script dials: allowed, and none of Relay's


def dial_parties(scripted, tmp_path, *, busy="none", talk_ms=3000) -> Sipp:
    """SIPp as the trunk, for both ends of a dial (dial_parties.xml): the callee, answering
    at once, speaking and waiting for Relay's BYE, and TARGET, answering after 300 ms, speaking and
    hanging up after `talk_ms`; `busy` is refused 486."""
    return Sipp(
        tmp_path / "parties",
        "dial_parties",
        port=scripted.trunk_port,
        calls=2,
        target=re.escape(TARGET),
        busy=re.escape(busy),
        answer_ms=300,
        talk_ms=talk_ms,
    )


def test_dial_bridges_the_callee_to_the_target_and_the_script_goes_on_after(
    scripted, tmp_path, user, app, secret
):
    after = app.answer("/dialed", Reply(body=[{"say": {"text": "They hung up. Goodbye."}}]))
    sipp = dial_parties(scripted, tmp_path)
    script = [
        {"say": {"text": "Connecting you."}},
        {"dial": {"targets": [TARGET], "timeout": 10, "actionHook": after}},
    ]

    call = run(user, script)

    assert sipp.finish() == 0, sipp
    assert call.status == "completed"
    [dialed] = reports(call)
    assert dialed["event"] == "dialed"
    result = dialed["result"]
    assert (result["dialStatus"], result["answeredBy"]) == ("completed", TARGET)
    assert 2 <= result["duration"] <= 4  # the target hung up 3 s after its answer
    callee_invite, target_invite = sipp.received("INVITE")[:2]
    assert f"INVITE sip:{TARGET}@" in target_invite
    assert f"From: <sip:{call.caller_id}@" in target_invite  # the call's own caller ID
    # The leg's row: written before its INVITE, one of the call's, ended with its seconds.
    from calls.models import Leg

    (leg,) = Leg.objects.filter(call=call)
    assert (leg.target, leg.dial, leg.owner_id, leg.role) == (TARGET, 1, user.pk, "dial_target")
    assert leg.ended_at is not None and leg.answered_at is not None
    assert leg.sip_call_id in target_invite
    # Both ends spoke, and each heard the other through the bridge.
    log = (scripted.workdir / "agent.log").read_text()
    found = re.search(
        rf"call {call.pk}, dial 1: bridged \d+ s .*relayed (\d+) packets to the target, "
        r"(\d+) to the caller",
        log,
    )
    assert found, log[-3000:]
    # At least a second of speech each way (the bridge lasts about 3 s; how much of it each
    # end's speech fills depends on when the bridge began on a loaded machine).
    assert int(found.group(1)) >= 50 and int(found.group(2)) >= 50, found.group(0)
    # Its hook got the result, and its answer was said after the bridge.
    (_, headers, body), *_ = [r for r in app.requests if r[0] == "/dialed"]
    assert Webhook(secret).verify(body, headers)["result"] == result


def test_a_busy_target_is_reported_busy_and_the_script_goes_on(scripted, tmp_path, user):
    sipp = dial_parties(scripted, tmp_path, busy=TARGET)

    call = run(user, [{"dial": {"targets": [TARGET]}}, {"say": {"text": "Nobody is free."}}])

    assert sipp.finish() == 0, sipp
    assert call.status == "completed"
    assert reports(call) == [
        {
            "event": "dialed",
            "verb": "dial",
            "result": {"dialStatus": "busy", "answeredBy": None, "duration": 0},
        }
    ]
    from calls.models import Leg

    (leg,) = Leg.objects.filter(call=call)
    assert (leg.answered_at, leg.duration) == (None, 0) and leg.ended_at is not None


def test_a_target_a_hook_names_that_the_policy_refuses_is_never_dialled(
    scripted, tmp_path, user, app, secret
):
    # A hook's answer was never checked at submit: the agent checks its targets itself.
    dial = app.answer("/dial", Reply(body=[{"dial": {"targets": ["+8613800138000"]}}]))
    sipp = far_end(scripted, tmp_path, "3", before_ms=500)

    call = run(user, [{"gather": {"numDigits": 1, "actionHook": dial}}, {"pause": {}}])

    assert sipp.finish() == 0, sipp
    events = reports(call)
    assert [r["event"] for r in events] == ["gathered", "dialed"]
    assert events[1]["result"] == {"dialStatus": "failed", "answeredBy": None, "duration": 0}
    assert sipp.invites() == [call.sip_call_id]  # nobody else was dialled


def wav(tmp_path, seconds: float) -> bytes:
    """A WAV file of a 440 Hz tone, 16 kHz 16-bit (sox converts it for the call)."""
    path = tmp_path / "tone.wav"
    subprocess.run(  # noqa: S603 - sox, with arguments of our own
        ["sox", "-n", "-r", "16000", "-b", "16", "-c", "1", str(path)]
        + ["synth", str(seconds), "sine", "440"],
        check=True,
    )
    return path.read_bytes()


def sent_packets(scripted, call: Call) -> int:
    text = (scripted.workdir / "agent.log").read_text()
    found = re.search(rf"call {call.pk} ended: .*audio sent (\d+) packets", text)
    assert found, f"no media line for call {call.pk}"
    return int(found.group(1))


def test_play_fetches_the_wav_and_plays_it(scripted, tmp_path, user, app):
    tone = app.answer("/tone.wav", Reply(body=wav(tmp_path, 2), content_type="audio/wav"))
    sipp = far_end(scripted, tmp_path, "", before_ms=0)

    call = run(user, [{"play": {"url": tone, "loop": 2}}, {"hangup": {}}])

    assert sipp.finish() == 0, sipp
    assert reports(call) == []
    assert 190 <= sent_packets(scripted, call) <= 215  # 2 s twice, in 20 ms packets
    assert len([r for r in app.requests if r[0] == "/tone.wav"]) == 1  # fetched once


@pytest.mark.parametrize(
    ("reply", "failure"),
    [
        (Reply(status=404), "answered 404"),
        (Reply(body=b"RIFF" + b"\0" * 100, content_type="audio/wav"), "sox failed"),
        (Reply(body=b"\0" * (5 * 1024 * 1024 + 1), content_type="audio/wav"), "larger than 5 MB"),
    ],
    ids=["missing", "not-a-wav", "too-large"],
)
def test_a_wav_that_cannot_be_played_is_reported_and_the_script_goes_on(
    scripted, tmp_path, user, app, reply, failure
):
    broken = app.answer(f"/broken-{time.monotonic_ns()}.wav", reply)
    sipp = far_end(scripted, tmp_path, "4", before_ms=500)

    call = run(user, [{"play": {"url": broken}}, {"gather": {"numDigits": 1}}])

    assert sipp.finish() == 0, sipp
    failed, gathered = reports(call)
    assert failed["event"] == "play_failed" and failure in failed["detail"]
    assert gathered["result"] == {"digits": "4", "reason": "numDigits"}


def speaks_then_presses(keys: str) -> str:
    """SIPp actions: SIPp's g711a.pcap sent as speech, then `keys` pressed."""
    return (
        f'  <nop><action><exec play_pcap_audio="{SIPP_SHARE}/g711a.pcap"/></action></nop>\n'
        f'  <pause milliseconds="{int(MESSAGE_SECONDS * 1000) + 300}"/>\n' + presses(keys)
    )


def test_record_keeps_what_the_callee_said_for_its_owner_alone(
    scripted, tmp_path, user, app, secret, client_jwt, outsider, settings
):
    # The API reads the storage the agent wrote to (what every host shares).
    recordings = {
        **settings.STORAGES["recordings"],
        "OPTIONS": {"location": str(scripted.workdir / "recordings")},
    }
    settings.STORAGES = {**settings.STORAGES, "recordings": recordings}
    saved = app.answer("/saved", Reply(body=[{"say": {"text": "Thank you."}}]))
    sipp = Sipp(
        tmp_path / "sipp",
        "answer_keys",
        port=scripted.trunk_port,
        timeout=60,
        before_ms=1000,
        presses=speaks_then_presses("#"),
        capture="",
        hangup_timeout_ms=30000,
    )

    call = run(user, [{"record": {"maxSeconds": 30, "actionHook": saved}}])

    assert sipp.finish() == 0, sipp
    (recorded,) = reports(call)
    assert recorded["event"] == "recorded"
    recording_id, seconds = recorded["result"]["recordingId"], recorded["result"]["duration"]
    assert abs(seconds - MESSAGE_SECONDS) <= 1.0
    assert app.bodies("/saved")[0]["result"] == recorded["result"]
    path = f"/api/calls/{call.call_id}/recordings/{recording_id}"
    response = client_jwt.get(path)
    assert response.status_code == 200 and response["Content-Type"] == "audio/wav"
    with wave.open(io.BytesIO(b"".join(response.streaming_content))) as audio:
        assert abs(audio.getnframes() / audio.getframerate() - seconds) <= 0.05
    assert outsider.get(path).status_code == 404
    assert client_jwt.get(f"/api/calls/{call.call_id}/recordings/not-an-id").status_code == 404
    # Listed with its call, its transcript's status beside it: `off`, the suite's engine
    # (tests/settings.py; tests/realtime/test_recording_transcripts.py transcribes one).
    (listed,) = client_jwt.get(f"/api/calls/{call.call_id}").json()["recordings"]
    assert (listed["id"], listed["transcriptStatus"]) == (recording_id, "off")


def test_a_dial_with_record_on_an_outbound_call_is_recorded_in_stereo(scripted, tmp_path, user):
    """Issue 58: the callee and the target hear the announcement, then the bridge is recorded
    (the callee on the left, the target on the right), a recording of the outbound call."""
    from calls.models import Recording

    sipp = dial_parties(scripted, tmp_path, talk_ms=4500)

    call = run(user, [{"dial": {"targets": [TARGET], "timeout": 10, "record": True}}])

    assert sipp.finish() == 0, sipp
    [dialed] = reports(call)
    assert dialed["result"]["dialStatus"] == "completed"
    recording = wait_until(
        lambda: Recording.objects.filter(call=call, kind="call", seconds__isnull=False).first(),
        deadline=10,
        what="the dial's recording",
    )
    assert recording.incomplete is False
    assert 1.0 <= recording.seconds <= 4.5, recording.seconds
    [path] = list(scripted.workdir.rglob(recording.name))
    with wave.open(str(path)) as wav:
        assert (wav.getnchannels(), wav.getframerate()) == (2, 8000)
        assert abs(wav.getnframes() / 8000 - recording.seconds) <= 0.005
    log = (scripted.workdir / "agent.log").read_text()
    assert f"call {call.pk}, dial 1: the recording announced to both parties" in log
