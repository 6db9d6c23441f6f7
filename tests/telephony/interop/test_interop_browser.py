"""The browser phone against a real phone through the carrier edge (issue 43): baresip calls a
number that forwards to the browser, through Kamailio; the console's tab in Chromium rings and
answers, its microphone an espeak-ng WAV (Chromium's fake capture file). Each side's hearing
is checked: baresip's recording of the tab's words with sox, and the tab's own recording of
the caller (MediaRecorder, read back by the test and decoded with PyAV)."""

from __future__ import annotations

import base64
import io
import math
import re
import struct
import subprocess

import av
import pytest

from harness.browser import launched_chromium
from harness.live import tool
from harness.speech import sox_level, speech_wav
from history.models import AnsweredBy, CallStatus
from tests.browser import KEEP_PEER_CONNECTIONS, NEEDS_CHROMIUM, opened_page
from tests.console.pages import log_in
from tests.factories import NumberFactory
from tests.telephony.conftest import wait_for_records
from tests.telephony.interop.conftest import CALLER

pytestmark = [
    pytest.mark.django_db(transaction=True),
    NEEDS_CHROMIUM,
    pytest.mark.timeout(180),
]

CALLER_WORDS = "Hello, it is me. I am calling about the delivery of the parcel tomorrow."
OWNER_WORDS = "Hi, this is the shop, answering in the browser. The parcel comes in the morning."
DEADLINE_MS = 30_000
# The page records what it hears on its call: the remote track, as MediaRecorder gives it.
START_RECORDING = """() => {
  const pc = window.__peers[window.__peers.length - 1];
  const track = pc.getReceivers()[0].track;
  window.__chunks = [];
  window.__recorder = new MediaRecorder(new MediaStream([track]));
  window.__recorder.ondataavailable = (e) => window.__chunks.push(e.data);
  window.__recorder.start(250);
}"""
STOP_RECORDING = """async () => {
  const stopped = new Promise((resolve) => (window.__recorder.onstop = resolve));
  window.__recorder.stop();
  await stopped;
  const bytes = new Uint8Array(await new Blob(window.__chunks).arrayBuffer());
  let text = "";
  for (let i = 0; i < bytes.length; i += 8192) {
    text += String.fromCharCode.apply(null, bytes.subarray(i, i + 8192));
  }
  return btoa(text);
}"""


@pytest.fixture(scope="module")
def microphone(tmp_path_factory):
    """The tab's words, as Chromium's fake capture file wants them (48 kHz mono WAV); it
    plays them again and again."""
    workdir = tmp_path_factory.mktemp("browser-microphone")
    spoken = speech_wav(workdir / "owner-8k.wav", OWNER_WORDS, after=0.5)
    path = workdir / "owner.wav"
    subprocess.run([tool("sox"), str(spoken), "-r", "48000", str(path)], check=True, timeout=60)  # noqa: S603
    return path


@pytest.fixture(scope="module")
def chromium(microphone):
    with launched_chromium(
        "--use-fake-device-for-media-stream",
        f"--use-file-for-fake-audio-capture={microphone}",
        "--autoplay-policy=no-user-gesture-required",
    ) as browser:
        yield browser


def decoded(recording: bytes) -> tuple[float, float, float]:
    """(seconds, RMS, peak) of a MediaRecorder recording (WebM with Opus), 0 to 1."""
    seconds, total, count, peak = 0.0, 0.0, 0, 0.0
    with av.open(io.BytesIO(recording)) as container:
        resampler = av.AudioResampler(format="s16", layout="mono", rate=48000)
        for frame in container.decode(audio=0):
            for mono in resampler.resample(frame):
                raw = bytes(mono.planes[0])[: 2 * mono.samples]
                samples = struct.unpack(f"<{mono.samples}h", raw)
                seconds += mono.samples / 48000
                total += sum(s * s for s in samples)
                count += len(samples)
                peak = max(peak, max((abs(s) for s in samples), default=0))
    return seconds, math.sqrt(total / max(count, 1)) / 32768, peak / 32768


@pytest.mark.parametrize("transport", ["udp"], indirect=True)
def test_a_caller_through_the_edge_and_the_tab_that_answers_hear_each_other(
    real_hashers, relay, kamailio, phones, chromium, user, tmp_path, transport
):
    number = NumberFactory(owner=user, alias="Shop", forward_targets=["browser"])
    caller_source = speech_wav(tmp_path / "caller.wav", CALLER_WORDS, before=0.5, after=1.0)
    call_seconds = sox_level(caller_source).seconds
    caller = phones("caller", number=CALLER, source=caller_source)
    with opened_page(chromium, width=1280, height=900) as page:
        page.context.grant_permissions(["microphone"], origin=relay.base)
        page.add_init_script(KEEP_PEER_CONNECTIONS)
        log_in(page, relay.base, user)
        page.get_by_role("switch", name=re.compile("Phone")).click()
        page.wait_for_selector("#phone[data-phone=on]", state="attached", timeout=DEADLINE_MS)

        caller.dial(number.number, kamailio)
        page.get_by_role("button", name="Answer").click(timeout=DEADLINE_MS)
        page.get_by_role("button", name="Hang up").wait_for(timeout=DEADLINE_MS)
        page.evaluate(START_RECORDING)
        # baresip says its words once the call is bridged, and hangs up when they end.
        caller.wait_event("CALL_ESTABLISHED", deadline=20)
        caller.wait_event("CALL_CLOSED", deadline=call_seconds + 20)
        page.get_by_text("The call ended").wait_for(timeout=DEADLINE_MS)
        recording = base64.b64decode(page.evaluate(STOP_RECORDING))

    [record] = wait_for_records(number, 1)
    assert (record.status, record.answered_by, record.forwarded_to) == (
        CallStatus.ANSWERED,
        AnsweredBy.FORWARD,
        "browser",
    )
    # The tab heard the caller's words, for as long as the caller talked.
    seconds, rms, peak = decoded(recording)
    assert seconds >= call_seconds - 1.5, (seconds, call_seconds)
    assert rms > 0.01 and peak > 0.1, (rms, peak)
    # The caller heard the tab's words, all the while.
    heard_by_caller = sox_level(caller.heard())
    assert abs(heard_by_caller.seconds - call_seconds) <= 1.5, (heard_by_caller, call_seconds)
    assert heard_by_caller.rms > 0.02 and heard_by_caller.maximum > 0.2, heard_by_caller
    # The call came through the carrier edge, and so did the caller's BYE.
    lines = kamailio.lines(record.sip_call_id)
    assert any(line.startswith("interop: request INVITE ") for line in lines), kamailio.trace
    assert kamailio.routed(record.sip_call_id, "BYE"), kamailio.trace
