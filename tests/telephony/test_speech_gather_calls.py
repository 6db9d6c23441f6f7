"""A speech gather on a real call (issue 56): SIPp calls a number whose voice application
gathers speech, and speaks an answer (espeak-ng's words through A-law, as a caller's phone
sends them) or says nothing; a real voice application on loopback gets the hook. The
transcription engine is Relay's default, Whisper, in the agent's own child process."""

from __future__ import annotations

import pytest
from standardwebhooks import Webhook

from harness.live import RelayProcess, wait_until
from harness.sip import free_udp_port, pcap_from_alaw, presses
from harness.speech import spoken_alaw
from tests.factories import NumberFactory
from tests.telephony.conftest import call_in, sip_env, wait_for_records
from voiceapps.services import voice_app_set
from voiceapps.verbs import script_check
from webhooks.services import webhook_set

pytestmark = [
    pytest.mark.usefixtures("calls_settled"),
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(240),
]

# What the caller answers: a sentence, as people answer "How can I help?". Whisper tiny.en
# hears espeak-ng's voice through A-law best with context: alone, "opening hours" came out
# as "opening out" (pocketsphinx, the fallback, heard that pair right).
ANSWER = "Good morning, I am calling about my delivery"
HEARD = ("morning", "calling", "delivery")


@pytest.fixture(scope="module")
def relay(tmp_path_factory, django_db_setup):
    workdir = tmp_path_factory.mktemp("speech-gather")
    env = sip_env(
        workdir,
        free_udp_port(),
        WEBHOOK_ALLOW_PRIVATE="true",
        VOICE_HOOK_TIMEOUT="5",
        TRANSCRIBE_ENGINE="whisper",  # Relay's default; the suite's is off (tests/settings.py)
    )
    process = RelayProcess(workdir, log=workdir / "relay.log", **env)
    process.agent, process.log_path = env["SIP_BIND"], workdir / "relay.log"
    yield process
    process.stop()


@pytest.fixture
def secret(user, app) -> str:
    return webhook_set(user=user, url=app.url("/events"), events=["incoming_call"])[1]


@pytest.fixture
def number(user, secret):
    return NumberFactory(owner=user, alias="Shop")


def gather_speech(number, app, **fields) -> None:
    gather = {
        "input": ["speech", "dtmf"],
        "speechTimeout": 1,
        "say": {"text": "What would you like?"},
        "actionHook": app.url("/heard"),
        **fields,
    }
    voice_app_set(number=number, script=script_check([{"gather": gather}]))


def heard(app, secret) -> dict:
    """The hook's signed body, once it came."""
    wait_until(lambda: app.bodies("/heard"), deadline=60, what="the speech gather's hook")
    ((_, headers, body),) = [r for r in app.requests if r[0] == "/heard"]
    return Webhook(secret).verify(body, headers)


def test_the_hook_gets_the_words_a_caller_speaks(relay, tmp_path, number, app, secret):
    gather_speech(number, app, timeout=10)
    pcap = pcap_from_alaw(spoken_alaw(ANSWER), tmp_path / "answer.pcap")
    speak = f'  <nop><action><exec play_pcap_audio="{pcap}"/></action></nop>'

    # The caller answers after the prompt (about 1.5 s), then waits for Relay to hang up:
    # the script ends after the hook's empty answer.
    caller = call_in(
        relay.agent,
        tmp_path,
        "inbound_keys",
        number.number,
        before_ms=2500,
        presses=speak,
        hangup_timeout_ms=60000,
    )

    assert caller.finish(90) == 0, caller
    payload = heard(app, secret)
    assert payload["verb"] == "gather"
    result = payload["result"]
    assert (result["digits"], result["reason"]) == ("", "speech")
    assert all(word in result["speech"].lower() for word in HEARD), result
    assert 0 < result["confidence"] <= 1
    # The same, under Twilio's names, for an app that came from Twilio.
    assert (payload["SpeechResult"], payload["Confidence"]) == (
        result["speech"],
        result["confidence"],
    )
    (record,) = wait_for_records(number, 1)
    assert record.answered_by == "app"
    assert "delivery" not in relay.log_path.read_text().lower()  # the words reach no log


def test_a_caller_who_says_nothing_ends_the_gather_at_its_timeout(
    relay, tmp_path, number, app, secret
):
    gather_speech(number, app, timeout=2)

    caller = call_in(
        relay.agent,
        tmp_path,
        "inbound_keys",
        number.number,
        before_ms=0,
        presses=presses(""),
        hangup_timeout_ms=60000,
    )

    assert caller.finish(90) == 0, caller
    result = heard(app, secret)["result"]
    assert result == {"digits": "", "reason": "timeout", "speech": "", "confidence": 0.0}
