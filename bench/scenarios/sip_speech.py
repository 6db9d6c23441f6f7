"""sip_speech_gather (issue 56): speech gathers at once on one agent, the time from the end of
the caller's words to the gather's action hook.

Each call's script is one `gather` of speech (`input: ["speech"]`, speechTimeout
SPEECH_TIMEOUT) with an actionHook on a plain HTTP server on loopback in this process, which
answers `[]` (the call ends) and keeps the wall clock of each request's arrival by its
`callId`. The far end is SIPp: it answers every call, waits a random 0 to SPREAD_MS (so the
callers do not all stop talking in the same 100 ms, as they would not on a real line), then
plays a 3 s sentence (espeak-ng, A-law, as a phone sends it, cut where Relay's voice
detector hears its first and last voice) followed by silence, and, when its last packet has
gone, writes the call's SIP Call-ID and the wall clock to a
file. The delay is the hook's arrival less that moment, matched through the Call-ID the
agent stored with the call: it holds the speechTimeout of silence that ends the utterance,
the detector's poll, the transcription in the agent's child process and the hook's request.
A warm-up call first, so that the model's load is not in the figures."""

from __future__ import annotations

import math
import time
from pathlib import Path

from bench import fixtures, sip
from bench.report import Row
from bench.scenarios.common import Bench, VoiceApp, relay_urls
from bench.stats import percentile
from bench.wsload import ClientGroup
from calls.models import Call
from harness.sip import Sipp, pcap_from_alaw
from harness.speech import spoken_alaw, voiced
from telephony.sip.rtp import pcm_from_g711
from telephony.vad import FRAME_SECONDS, VoiceDetector

SENTENCE = "I would like to change my delivery to Friday morning, please"  # 3 s, voiced
SPEECH_TIMEOUT = 1  # seconds of silence that end the utterance: "auto", the least there is
SILENCE_S = 3.0  # after the sentence, as a line carries on
SPREAD_MS = 8000
TARGET_MS = 1500.0


def _speaking(workdir: Path, spread_ms: int) -> tuple[str, Path, float]:
    """SIPp's actions after the answer (a random wait, the sentence with silence after it,
    then the moment its last voice left, as the agent's own voice detector hears that audio,
    written to a file), that file, and the sentence's seconds."""
    alaw = voiced(spoken_alaw(SENTENCE))
    played = alaw + b"\xd5" * int(SILENCE_S * 8000)
    pcap = pcap_from_alaw(played, workdir / "sentence.pcap")
    detector = VoiceDetector(silence=SPEECH_TIMEOUT)
    detector.feed(pcm_from_g711(played, 8))
    voice_ms = (detector.last_voice + 1) * FRAME_SECONDS * 1000
    spoken = workdir / "spoken.log"
    actions = (
        f'  <pause distribution="uniform" min="0" max="{spread_ms}"/>\n'
        f'  <nop><action><exec play_pcap_audio="{pcap}"/></action></nop>\n'
        f'  <pause milliseconds="{round(voice_ms)}"/>\n'
        f'  <nop><action><exec command="echo [call_id] $(date +%s.%N) >> {spoken}"/>'
        "</action></nop>\n"
    )
    return actions, spoken, len(alaw) / 8000


def _script(hook: str) -> list[dict]:
    gather = {"input": ["speech"], "speechTimeout": SPEECH_TIMEOUT, "timeout": 15,
              "actionHook": hook}  # fmt: skip
    return [{"gather": gather}]


def sip_speech_gather(b: Bench) -> None:
    p = b.profile
    calls = p.speech_gathers
    fixtures.calls_reset()
    sip.check_no_worker()
    from django.test import override_settings

    from webhooks.services import webhook_delete, webhook_set

    workdir = Path(b.env["RELAY_VAR_DIR"]) / "sip_speech_gather"
    workdir.mkdir(parents=True, exist_ok=True)
    prefix = f"speech-{int(time.time())}-"
    user = fixtures.user(fixtures.WS_EMAIL.format(0))  # hooks are signed with its secret
    hook = VoiceApp([], "/heard")
    with override_settings(WEBHOOK_ALLOW_PRIVATE=True):
        webhook_set(user=user, url=hook.url, events=["incoming_call"])
    actions, spoken, sentence_s = _speaking(workdir, SPREAD_MS if calls > 1 else 0)
    port = sip.free_udp_port()
    far_end = Sipp(workdir / "sipp", "answer_keys", port=port, calls=1 + calls,
                   timeout=300, before_ms=0, presses=actions, capture="",
                   hangup_timeout_ms=60000)  # fmt: skip
    agents = None
    body = {"script": _script(hook.url)}
    try:
        agents = sip.Agents(b.env, workdir, trunk=f"sip:127.0.0.1:{port}", count=1,
                            capacity=calls + 1, WEBHOOK_ALLOW_PRIVATE="true",
                            TRANSCRIBE_ENGINE="whisper")  # fmt: skip
        with ClientGroup(relay_urls(b, 1), 1, {"mode": "submit"}, deadline=600) as group:
            group.ready(timeout=60)
            warm = group.run({"calls": [{"callId": f"{prefix}warm", **body}]}, timeout=60)
            if warm.errors():
                raise RuntimeError(f"the warm-up call was refused: {warm.errors()}")
            sip.watch(f"{prefix}warm", 1, agents, deadline=120)
            own0, _ = agents.cpu()
            load = group.run({"calls": [{"callId": f"{prefix}load-{i}", **body}
                                        for i in range(calls)]}, timeout=120)  # fmt: skip
            if load.errors():
                raise RuntimeError(f"calls were refused: {load.errors()}")
            sip.watch(f"{prefix}load-", calls, agents, deadline=240)
            own1, _ = agents.cpu()
            rss = agents.rss()
    finally:
        if agents is not None:
            agents.stop()
        far_end.stop()
        hook.stop()
        webhook_delete(user=user)
    ended = {}
    if spoken.exists():
        for line in spoken.read_text().splitlines():
            call_id, _, at = line.partition(" ")
            ended[call_id] = float(at)
    delays, heard = [], 0
    rows = Call.objects.filter(call_id__startswith=f"{prefix}load-").values_list(
        "call_id", "sip_call_id"
    )
    arrivals = {body.get("callId"): (at, body.get("result") or {}) for at, body, _ in hook.requests}
    for call_id, sip_call_id in rows:
        arrival = arrivals.get(call_id)
        if arrival is None or sip_call_id not in ended:
            continue
        delays.append((arrival[0] - ended[sip_call_id]) * 1000)
        heard += bool(arrival[1].get("speech"))
    waits = [delay - SPEECH_TIMEOUT * 1000 for delay in delays]
    p95 = percentile(waits, 95)
    b.keep_logs = b.keep_logs or len(delays) < calls
    b.add(Row("sip_speech_gather", f"{calls} speech gathers at once on one agent: the end of "
              f"a {sentence_s:.1f} s sentence to its action hook, less the speechTimeout, p95",
              p95, "ms",
              target=f"<= {TARGET_MS:.0f} ms", met=len(delays) == calls and p95 <= TARGET_MS,
              note=f"p50 {percentile(waits, 50):.0f} ms, max {max(waits, default=math.nan):.0f} "
              f"ms; with the speechTimeout ({SPEECH_TIMEOUT} s): p50 "
              f"{percentile(delays, 50):.0f} ms, p95 {percentile(delays, 95):.0f} ms; "
              f"{len(delays)} of {calls} timed, {heard} with words heard; "
              f"the callers' ends spread over {SPREAD_MS / 1000:.0f} "
              f"s; agent CPU {own1 - own0:.1f} s, its processes {rss / 2**20:.0f} MB at the "
              "end (the transcribing child not counted)"))  # fmt: skip
