"""The browser phone in Chromium (issue 43), against a real `manage.py runrelay` with the SIP
agent: Chromium's fake microphone (a tone from a WAV file) is the owner's voice, SIPp the
caller or the callee. The page is observed, never steered from inside: each RTCPeerConnection
it makes is kept in a list, so the test can read what the page received (getStats). Each
state of the phone is scanned with axe-core (tests/browser.py)."""

from __future__ import annotations

import re
import socket
import struct
import subprocess
import time
import wave
from pathlib import Path

import pytest

from calls.models import Call, LegRole
from harness.browser import launched_chromium
from harness.live import tool, wait_until
from harness.sip import SIPP_SHARE, Sipp, free_udp_port, hang_up
from harness.speech import sox_level
from history.models import AnsweredBy, CallStatus
from telephony.sip.rtp import FRAME_SAMPLES, hold_music, pcm_from_g711, wav_from_g711
from tests.browser import (
    KEEP_PEER_CONNECTIONS,
    NEEDS_CHROMIUM,
    Inspector,
    artifacts_dir,
    opened_page,
    rtp_stat,
)
from tests.console.pages import log_in
from tests.factories import NumberFactory
from tests.telephony.conftest import agent_relay, bridge_log, call_in, wait_for_records
from tests.telephony.test_answering_machines import Recorder
from tests.telephony.test_call_recording import channel_stat, recording_of, tone_pcap

pytestmark = [pytest.mark.django_db(transaction=True), NEEDS_CHROMIUM, pytest.mark.timeout(300)]

DEADLINE_MS = 30_000
# What the page's call has received and sent so far (WebRTC stats).
RECEIVED_ENERGY = rtp_stat("inbound-rtp", "totalAudioEnergy")
SENT_PACKETS = rtp_stat("outbound-rtp", "packetsSent")
PCMA = 8
TAB_HZ, CALLER_HZ = 1000, 440  # the tab's microphone, and the caller's tone in the recording test
MUSIC = {
    hold_music(PCMA)[start : start + FRAME_SAMPLES]
    for start in range(0, len(hold_music(PCMA)), FRAME_SAMPLES)
}


def until_page(page, function: str, done, what: str) -> None:
    """Poll `function` (async: page.wait_for_function would take its promise as a truthy
    answer at once) in the page until `done(value)`."""
    wait_until(lambda: done(page.evaluate(function)), deadline=DEADLINE_MS / 1000, what=what)


@pytest.fixture(scope="module")
def relay(tmp_path_factory, django_db_setup):
    process = agent_relay(tmp_path_factory.mktemp("browser-phone"))
    yield process
    process.stop()


@pytest.fixture(scope="module")
def microphone(tmp_path_factory) -> Path:
    """The tab's voice: a tone of TAB_HZ, as Chromium's fake capture file wants it (a 48 kHz
    mono WAV, played again and again)."""
    path = tmp_path_factory.mktemp("browser-microphone") / "tone.wav"
    synth = ["synth", "10", "sine", str(TAB_HZ), "vol", "0.5"]
    subprocess.run(  # noqa: S603
        [tool("sox"), "-n", "-r", "48000", "-c", "1", "-b", "16", str(path), *synth],
        check=True,
        timeout=60,
    )
    return path


@pytest.fixture(scope="module")
def chromium(microphone):
    """Chromium whose microphone is its fake device playing `microphone`, which plays audio
    without a click first; a page gets the microphone only where its context grants it."""
    with launched_chromium(
        "--use-fake-device-for-media-stream",
        f"--use-file-for-fake-audio-capture={microphone}",
        "--autoplay-policy=no-user-gesture-required",
    ) as browser:
        yield browser


@pytest.fixture
def phone_page(chromium, relay):
    with opened_page(chromium, width=1280, height=900) as page:
        page.context.grant_permissions(["microphone"], origin=relay.base)
        page.add_init_script(KEEP_PEER_CONNECTIONS)
        yield page


@pytest.fixture
def inspector(tmp_path) -> Inspector:
    return Inspector(artifacts_dir(tmp_path, "console"))


def switch_on(page) -> None:
    page.get_by_role("switch", name=re.compile("Phone")).click()
    page.wait_for_selector("#phone[data-phone=on]", state="attached", timeout=DEADLINE_MS)


def test_a_call_rings_the_tab_which_answers_talks_both_ways_and_hangs_up(
    real_hashers, relay, phone_page, inspector, user, tmp_path
):
    page = phone_page
    number = NumberFactory(owner=user, alias="Shop", forward_targets=["browser"])
    log_in(page, relay.base, user)
    switch = page.get_by_role("switch", name=re.compile("Phone"))
    assert switch.get_attribute("aria-checked") == "false"
    switch_on(page)
    assert switch.get_attribute("aria-checked") == "true"
    assert "allow it" in page.inner_text("#phone-help")  # the permission prompt, explained
    inspector.look(page, "phone-on")

    caller = call_in(relay.agent, tmp_path, "inbound_wait_bye", number.number)
    answer = page.get_by_role("button", name="Answer")
    answer.wait_for(timeout=DEADLINE_MS)
    assert "Call from +447700900123 to Shop" in page.inner_text(".phone-caller")
    assert page.get_by_role("button", name="Decline").is_visible()
    inspector.look(page, "phone-ringing")

    answer.click()
    hang_up = page.get_by_role("button", name="Hang up")
    hang_up.wait_for(timeout=DEADLINE_MS)
    assert "On a call with +447700900123" in page.inner_text(".phone-line")
    # The caller's recording reaches the page's ears.
    until_page(page, RECEIVED_ENERGY, lambda energy: energy > 0, "the caller's audio in the page")
    inspector.look(page, "phone-talking")
    # Bridged (the page hears the caller), the page's microphone says 40 more frames (0.8 s)
    # before it hangs up: what the bridge relays to the caller cannot depend on how long the
    # checks above took.
    bridged = page.evaluate(SENT_PACKETS)
    until_page(page, SENT_PACKETS, lambda sent: sent >= bridged + 40, "40 frames of the page's")

    hang_up.click()
    assert "You hung up." in page.inner_text(".phone-line")
    assert caller.finish() == 0, caller  # Relay's BYE reached the caller
    [record] = wait_for_records(number, 1)
    assert (record.status, record.answered_by, record.forwarded_to) == (
        CallStatus.ANSWERED,
        AnsweredBy.FORWARD,
        "browser",
    )
    # The page's microphone reached the caller: the bridge relayed it all the while.
    match = wait_until(
        lambda: bridge_log(relay.log_path.read_text(), record.sip_call_id),
        deadline=10,
        what="the bridge's log line",
    )
    assert int(match[5]) >= 25, match[0]  # packets relayed to the caller
    assert inspector.violations == []


def test_a_call_from_the_browser_with_a_key_of_its_keypad(
    real_hashers, relay, phone_page, inspector, user, tmp_path
):
    page = phone_page
    NumberFactory(owner=user, alias="Shop")
    audio = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    audio.bind(("127.0.0.1", free_udp_port()))
    audio.setblocking(False)
    callee = Sipp(
        tmp_path / "callee",
        "answer_media_at",
        port=relay.trunk_port,
        audio_port=audio.getsockname()[1],
    )
    try:
        log_in(page, relay.base, user, then="/calls")
        page.wait_for_selector("#phone[data-phone]", state="attached", timeout=DEADLINE_MS)
        inspector.look(page, "calls-browser-form")
        page.fill("#browser-call-to", "+44207946012")
        page.get_by_role("group", name="Dial pad").get_by_role("button", name="3").click()
        assert page.input_value("#browser-call-to") == "+442079460123"
        page.get_by_role("button", name="Call from the browser").click()
        page.get_by_role("button", name="Hang up").wait_for(timeout=DEADLINE_MS)
        row = page.locator(".call", has_text="+442079460123").first
        page.wait_for_function(
            "() => document.querySelector('.call .call-status').dataset.status === 'in_progress'",
            timeout=DEADLINE_MS,
        )
        assert row.is_visible()
        page.get_by_role("group", name="Keypad").get_by_role("button", name="7").click()

        events = set()

        def heard_seven() -> bool:
            while True:
                try:
                    packet = audio.recv(2048)
                except BlockingIOError:
                    return 7 in events
                if packet[1] & 0x7F == 101:
                    events.add(packet[12])

        wait_until(heard_seven, deadline=15, what="key 7 at the callee")
        assert events == {7}
        page.get_by_role("button", name="Hang up").click()
        assert callee.finish() == 0, callee
        # Ended, either way: the cancel (rtc_hangup) or the tab's closed connection (a BYE),
        # whichever reaches the agent first (docs/websocket.md).
        page.wait_for_function(
            "() => ['canceled', 'completed'].includes("
            "document.querySelector('.call .call-status').dataset.status)",
            timeout=DEADLINE_MS,
        )
    finally:
        audio.close()
    assert inspector.violations == []


def test_a_denied_microphone_is_said_in_a_plain_sentence_and_the_ring_ends(
    real_hashers, relay, chromium, inspector, user, tmp_path
):
    number = NumberFactory(owner=user, alias="Shop", forward_targets=["browser"])
    with opened_page(chromium, width=1280, height=900) as page:  # no microphone granted
        log_in(page, relay.base, user)
        switch_on(page)
        started = time.monotonic()
        caller = call_in(
            relay.agent, tmp_path, "inbound_message", number.number, greeting_ms=0, message_ms=500
        )
        page.get_by_role("button", name="Answer").click(timeout=DEADLINE_MS)
        alert = page.get_by_role("alert")
        alert.filter(has_text="did not allow the microphone").wait_for(timeout=DEADLINE_MS)
        inspector.look(page, "phone-denied")
        # The tab left the ring (rtc_hangup): nobody else rings, so voicemail answers.
        assert caller.finish() == 0, caller
    assert time.monotonic() - started < 25
    [record] = wait_for_records(number, 1)
    assert record.answered_by == AnsweredBy.VOICEMAIL
    assert inspector.violations == []


def test_two_tabs_ring_one_answers_the_other_stops_and_the_caller_hangs_up_mid_talk(
    real_hashers, relay, chromium, inspector, user, tmp_path
):
    number = NumberFactory(owner=user, alias="Shop", forward_targets=["browser"])
    with (
        opened_page(chromium, width=1280, height=900) as first,
        opened_page(chromium, width=1280, height=900) as second,
    ):
        for page in (first, second):
            page.context.grant_permissions(["microphone"], origin=relay.base)
            log_in(page, relay.base, user)
            switch_on(page)
        caller = call_in(
            relay.agent, tmp_path, "inbound_message", number.number, greeting_ms=0, message_ms=3000
        )
        for page in (first, second):
            page.get_by_role("button", name="Answer").wait_for(timeout=DEADLINE_MS)

        first.get_by_role("button", name="Answer").click()
        first.get_by_role("button", name="Hang up").wait_for(timeout=DEADLINE_MS)
        second.get_by_text("The call was answered elsewhere.").wait_for(timeout=DEADLINE_MS)
        assert not second.get_by_role("button", name="Answer").is_visible()
        inspector.look(second, "phone-answered-elsewhere")

        # The caller hangs up while they talk: the first tab says the call ended.
        first.get_by_text(re.compile("^The call ended")).wait_for(timeout=DEADLINE_MS)
        assert not first.get_by_role("button", name="Hang up").is_visible()
        assert caller.finish() == 0, caller
    [record] = wait_for_records(number, 1)
    assert (record.answered_by, record.forwarded_to) == (AnsweredBy.FORWARD, "browser")
    assert inspector.violations == []


def test_hold_has_the_caller_hear_the_music_and_not_the_tab_until_resume(
    real_hashers, relay, phone_page, inspector, user, tmp_path
):
    # The caller (SIPp, PCMA) sends no audio; its SDP names a socket of the test's, which
    # hears what Relay sends it: the tab's microphone relayed, or the music on hold (each
    # payload a 20 ms frame of rtp.hold_music). It stays 25 s, then hangs up.
    page = phone_page
    number = NumberFactory(owner=user, alias="Shop", forward_targets=["browser"])
    recorder = Recorder()
    try:
        log_in(page, relay.base, user)
        switch_on(page)
        caller = call_in(
            relay.agent,
            tmp_path,
            "reinvite_caller",
            number.number,
            sdp_port=recorder.port,
            actions='  <pause milliseconds="25000"/>\n',
        )
        page.get_by_role("button", name="Answer").click(timeout=DEADLINE_MS)
        hold = page.get_by_role("button", name="Hold")
        hold.wait_for(timeout=DEADLINE_MS)
        assert hold.get_attribute("aria-pressed") == "false"
        wait_until(lambda: len(recorder.packets) >= 25, deadline=15, what="the tab's audio")

        hold.click()
        page.get_by_text(re.compile("^On hold: ")).wait_for(timeout=DEADLINE_MS)
        assert hold.get_attribute("aria-pressed") == "true"  # its name stays "Hold"
        inspector.look(page, "phone-held")
        wait_until(lambda: held_by(recorder).count("m") >= 100, deadline=15, what="2 s of music")

        hold.click()
        page.get_by_text(re.compile("^On a call with ")).wait_for(timeout=DEADLINE_MS)
        assert hold.get_attribute("aria-pressed") == "false"
        wait_until(
            lambda: re.search(r"m+o{50,}$", held_by(recorder)),
            deadline=15,
            what="the tab's audio again",
        )
        page.get_by_text(re.compile("^The call ended")).wait_for(timeout=40_000)
        assert caller.finish() == 0, caller
    finally:
        recorder.close()

    # The caller heard the tab, then the music alone (nothing of the tab's while it held),
    # then the tab again.
    heard = held_by(recorder)
    assert re.fullmatch(r"o+m+o+", heard), heard
    music = [packet for packet, kind in zip(recorder.packets, heard, strict=True) if kind == "m"]
    assert music_level(music, tmp_path / "music.wav").rms > 0.03
    assert inspector.violations == []


def test_mute_silences_the_tab_for_the_caller_alone_and_keeps_its_name(
    real_hashers, relay, phone_page, inspector, user, tmp_path
):
    # As in the hold test, the caller's SDP names a socket of the test's, which hears what
    # Relay sends it: the tab's microphone (Chromium's fake device, beeping) relayed.
    page = phone_page
    number = NumberFactory(owner=user, alias="Shop", forward_targets=["browser"])
    recorder = Recorder()
    try:
        log_in(page, relay.base, user)
        switch_on(page)
        caller = call_in(
            relay.agent,
            tmp_path,
            "reinvite_caller",
            number.number,
            sdp_port=recorder.port,
            actions='  <pause milliseconds="16000"/>\n',
        )
        page.get_by_role("button", name="Answer").click(timeout=DEADLINE_MS)
        mute = page.get_by_role("button", name="Mute", exact=True)
        mute.wait_for(timeout=DEADLINE_MS)
        assert mute.get_attribute("aria-pressed") == "false"
        wait_until(lambda: loud(recorder.packets) >= 3, deadline=15, what="the tab's beeps")

        mute.click()
        muted = time.time()
        page.get_by_text(re.compile("^Muted: ")).wait_for(timeout=DEADLINE_MS)
        # A toggle that keeps its name, as Hold does: pressed while muted.
        assert mute.get_attribute("aria-pressed") == "true"
        assert page.get_by_role("button", name="Mute", exact=True).is_visible()
        assert page.get_by_role("button", name="Hold").get_attribute("aria-pressed") == "false"
        inspector.look(page, "phone-muted")
        page.wait_for_timeout(4000)  # what the caller hears meanwhile is checked below

        mute.click()
        unmuted = time.time()
        page.get_by_text(re.compile("^On a call with ")).wait_for(timeout=DEADLINE_MS)
        assert mute.get_attribute("aria-pressed") == "false"
        wait_until(
            lambda: loud([p for p in recorder.packets if p[0] > unmuted]) >= 3,
            deadline=15,
            what="the tab's beeps again",
        )
        page.get_by_text(re.compile("^The call ended")).wait_for(timeout=40_000)
        assert caller.finish() == 0, caller
    finally:
        recorder.close()

    # While muted the caller was still sent audio (the call went on: not held, no music),
    # all of it silence once the mute took hold (within 2 s of the click: the beeps already
    # in Chromium's capture and encoder, on a loaded machine, may still go out after the
    # click); the tab's beeps came before and after.
    quiet_from = min(t for t, _, payload in recorder.packets if t > muted and peak(payload) <= 500)
    assert quiet_from < muted + 2, quiet_from - muted
    during = [p for p in recorder.packets if quiet_from <= p[0] < unmuted]
    assert len(during) >= 100, len(during)  # 2 s and more of packets, every 20 ms
    assert loud(during) == 0, [peak(payload) for _, _, payload in during if peak(payload)]
    assert "m" not in held_by(recorder)
    [record] = wait_for_records(number, 1)  # the relay's last writes, before the flush
    assert (record.answered_by, record.forwarded_to) == (AnsweredBy.FORWARD, "browser")
    assert inspector.violations == []


def peak(payload: bytes) -> int:
    """The loudest sample of a PCMA payload (of 32767)."""
    pcm = pcm_from_g711(payload, PCMA)
    return max(abs(sample) for sample in struct.unpack(f"<{len(pcm) // 2}h", pcm))


def loud(packets) -> int:
    """How many of `packets` (time, source, payload) carry sound above -36 dBFS."""
    return sum(peak(payload) > 500 for _, _, payload in packets)


def held_by(recorder) -> str:
    """What `recorder` heard, a letter a packet: m (the music on hold), o (anything else:
    here, the tab's microphone)."""
    return "".join("m" if payload in MUSIC else "o" for _, _, payload in recorder.packets)


def music_level(packets, path):
    path.write_bytes(wav_from_g711(b"".join(payload for _, _, payload in packets), PCMA))
    return sox_level(path)


def test_transfer_hands_the_caller_on_to_a_phone_and_the_tab_is_done(
    real_hashers, relay, phone_page, inspector, user, tmp_path
):
    # Issue 58: the tab that took a ring types a number and presses Transfer; the agent dials
    # it (SIPp on the trunk answers and plays its capture), bridges the caller to it and ends
    # the tab's side.
    page = phone_page
    target = "+441134960300"
    number = NumberFactory(owner=user, alias="Shop", forward_targets=["browser"])
    log_in(page, relay.base, user)
    switch_on(page)
    phone = Sipp(
        tmp_path / "target",
        "forward_target",
        port=relay.trunk_port,
        answering=re.escape(target),
        codec=PCMA,
        codec_name="PCMA",
        answer_ms=500,
        actions=f'  <nop><action><exec play_pcap_audio="{SIPP_SHARE}/g711a.pcap"/></action></nop>',
    )
    caller = call_in(
        relay.agent, tmp_path, "inbound_message", number.number, greeting_ms=0, message_ms=9000
    )
    page.get_by_role("button", name="Answer").click(timeout=DEADLINE_MS)
    page.get_by_role("button", name="Hang up").wait_for(timeout=DEADLINE_MS)
    transfer_to = page.get_by_label("Transfer to")
    assert transfer_to.is_visible()
    inspector.look(page, "phone-transfer")

    transfer_to.fill("+33123456789")  # a destination the dialing policy refuses: it stays
    page.get_by_role("button", name="Transfer").click()
    page.locator(".phone-alert").get_by_text(re.compile(".")).wait_for(timeout=DEADLINE_MS)
    assert page.get_by_role("button", name="Hang up").is_visible()

    transfer_to.fill(target)
    page.get_by_role("button", name="Transfer").click()
    page.get_by_text(f"The call was transferred to {target}.").wait_for(timeout=DEADLINE_MS)
    assert caller.finish() == 0, caller
    assert phone.finish() == 0, phone  # answered, then Relay's BYE after the caller's

    [record] = wait_for_records(number, 1)
    assert (record.status, record.forwarded_to, record.transferred_to) == (
        CallStatus.ANSWERED,
        "browser",
        target,
    )
    match = wait_until(
        lambda: re.search(
            rf"inbound call {re.escape(record.sip_call_id)}, transferred: bridged \d+ s .*"
            r"relayed \d+ packets to the target, (\d+) to the caller",
            relay.log_path.read_text(),
        ),
        deadline=10,
        what="the transfer's bridge log line",
    )
    assert int(match[1]) >= 100, match[0]  # the caller heard the target
    assert inspector.violations == []


def test_transfer_hands_the_callee_of_a_call_from_the_browser_on(
    real_hashers, relay, phone_page, user, tmp_path
):
    # Issue 58: a call placed from the browser phone (SIPp on the trunk answers as the callee)
    # is handed on with the same Transfer field; the target answers, the tab's side ends, and
    # the callee talks with the target until it hangs up.
    page = phone_page
    callee, target = "+442079460123", "+441134960300"
    NumberFactory(owner=user, alias="Shop")
    trunk = Sipp(
        tmp_path / "trunk",
        "transfer_phones",
        port=relay.trunk_port,
        calls=2,
        phone=re.escape(callee),
        target=re.escape(target),
        relayer=re.escape(target),
        answer_ms=300,
        phone_actions="",
        target_actions=hang_up(after_ms=2000),
    )
    log_in(page, relay.base, user, then="/calls")
    page.wait_for_selector("#phone[data-phone]", state="attached", timeout=DEADLINE_MS)
    page.fill("#browser-call-to", callee)
    page.get_by_role("button", name="Call from the browser").click()
    transfer_to = page.get_by_label("Transfer to")
    transfer_to.wait_for(timeout=DEADLINE_MS)  # shown once the tab's connection is up
    assert not page.get_by_role("button", name="Consult").is_visible()  # a ring's alone
    page.wait_for_function(  # the callee answered: there is someone to hand on
        "() => document.querySelector('.call .call-status').dataset.status === 'in_progress'",
        timeout=DEADLINE_MS,
    )
    transfer_to.fill(target)
    page.get_by_role("button", name="Transfer").click()
    # The line says so as the tab's side ends (the panel itself goes, the phone being off).
    page.get_by_text(f"The call was transferred to {target}.").wait_for(
        state="attached", timeout=DEADLINE_MS
    )
    assert trunk.finish() == 0, trunk  # the target hung up, then Relay hung the callee up

    call = Call.objects.get(owner=user)
    wait_until(
        lambda: Call.objects.get(pk=call.pk).status == "completed",
        deadline=DEADLINE_MS / 1000,
        what="the call's end",
    )
    legs = [(leg.role, leg.target, leg.answered_at is not None) for leg in call.legs.all()]
    assert legs == [(LegRole.TRANSFER_TARGET, target, True)]


def test_a_recorded_call_the_tab_takes_has_the_caller_left_and_the_tab_right(
    real_hashers, relay, phone_page, user, tmp_path
):
    # Issue 58: a number that records its calls rings the tab, which answers a caller (SIPp)
    # playing a tone. The tab hears the announcement too, then the bridge is recorded as a
    # phone's: the caller's tone on the left channel, the tab's microphone on the right.
    page = phone_page
    number = NumberFactory(
        owner=user,
        alias="Shop",
        forward_targets=["browser"],
        recording_enabled=True,
        recording_announce="Calls to the shop are recorded.",
    )
    log_in(page, relay.base, user)
    switch_on(page)
    caller = call_in(
        relay.agent,
        tmp_path,
        "inbound_message",
        number.number,
        greeting_ms=0,
        message_ms=8000,
        pcap=tone_pcap(tmp_path / "caller.pcap", CALLER_HZ),
    )
    page.get_by_role("button", name="Answer").click(timeout=DEADLINE_MS)

    def heard_before_the_bridge() -> str | None:
        """ "heard" once the tab has heard sound while the announcement was still playing
        (the agent logs its end as the bridge starts), "late" if only after it."""
        announced = "the recording announced" in relay.log_path.read_text()
        if page.evaluate(RECEIVED_ENERGY) > 0:
            return "late" if announced else "heard"
        return "late" if announced else None

    assert wait_until(heard_before_the_bridge, deadline=20, what="the announcement") == "heard"
    page.get_by_text(re.compile("^The call ended")).wait_for(timeout=DEADLINE_MS)
    assert caller.finish() == 0, caller

    [record] = wait_for_records(number, 1)
    assert (record.status, record.answered_by, record.forwarded_to) == (
        CallStatus.ANSWERED,
        AnsweredBy.FORWARD,
        "browser",
    )
    recording = recording_of(record)
    assert (recording.incomplete, recording.transcript_status) == (False, "off")
    wav_path = relay.workdir / "recordings" / recording.name
    with wave.open(str(wav_path)) as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (2, 2, 8000)
        wav_seconds = wav.getnframes() / 8000
    match = wait_until(
        lambda: bridge_log(relay.log_path.read_text(), record.sip_call_id),
        deadline=10,
        what="the bridge's log line",
    )
    assert f"inbound call {record.sip_call_id}: the recording announced" in match.string
    bridged = int(match[1])
    assert abs(wav_seconds - recording.seconds) < 0.01
    assert abs(wav_seconds - bridged) <= 0.6 and wav_seconds >= 2.0, (wav_seconds, bridged)
    # Each party on its own channel: the caller's tone left, the tab's right (the tab's
    # tone lower than it was played: Chromium's processing of its microphone, some 20 dB).
    left, right = channel_stat(wav_path, 1), channel_stat(wav_path, 2)
    assert left["rms"] > 0.1 and abs(left["hz"] - CALLER_HZ) < 60, left
    assert right["rms"] > 0.02 and abs(right["hz"] - TAB_HZ) < 100, right


def consult_target(tmp_path, relay, target: str, *, calls: int = 1) -> Sipp:
    """SIPp on the trunk as the phone a tab consults: `target` answers after 0.5 s, plays its
    capture (PCMA) and waits for Relay's BYE; any other number rings until cancelled."""
    return Sipp(
        tmp_path / "target",
        "forward_target",
        port=relay.trunk_port,
        calls=calls,
        answering=re.escape(target),
        codec=PCMA,
        codec_name="PCMA",
        answer_ms=500,
        actions=f'  <nop><action><exec play_pcap_audio="{SIPP_SHARE}/g711a.pcap"/></action></nop>',
    )


def test_consult_talks_to_the_target_while_the_caller_holds_and_complete_hands_the_caller_on(
    real_hashers, relay, phone_page, inspector, user, tmp_path
):
    # Issue 58, an attended transfer: Consult has the agent call the number in the Transfer
    # field (SIPp answers and plays its capture) with the caller on hold; the tab hears the
    # target; Complete bridges caller and target and ends the tab's side.
    page = phone_page
    target = "+441134960300"
    number = NumberFactory(owner=user, alias="Shop", forward_targets=["browser"])
    log_in(page, relay.base, user)
    switch_on(page)
    phone = consult_target(tmp_path, relay, target)
    caller = call_in(
        relay.agent, tmp_path, "inbound_message", number.number, greeting_ms=0, message_ms=9000
    )
    page.get_by_role("button", name="Answer").click(timeout=DEADLINE_MS)
    page.get_by_role("button", name="Hang up").wait_for(timeout=DEADLINE_MS)
    page.get_by_label("Transfer to").fill(target)
    page.get_by_role("button", name="Consult").click()

    complete = page.get_by_role("button", name="Complete")
    page.get_by_text(re.compile(rf"^On a call with {re.escape(target)}; ")).wait_for(
        timeout=DEADLINE_MS
    )
    assert complete.is_enabled()
    assert not page.get_by_label("Transfer to").is_visible()
    inspector.look(page, "phone-consulting")
    # The target's capture reaches the page (the caller, on hold, is not relayed to it).
    heard = page.evaluate(RECEIVED_ENERGY)
    until_page(page, RECEIVED_ENERGY, lambda energy: energy > heard, "the target in the page")

    complete.click()
    page.get_by_text(f"The call was transferred to {target}.").wait_for(timeout=DEADLINE_MS)
    assert caller.finish() == 0, caller
    assert phone.finish() == 0, phone  # answered, then Relay's BYE after the caller's

    [record] = wait_for_records(number, 1)
    assert (record.status, record.forwarded_to, record.transferred_to) == (
        CallStatus.ANSWERED,
        "browser",
        target,
    )
    match = wait_until(
        lambda: re.search(
            rf"inbound call {re.escape(record.sip_call_id)}, consulting: bridged \d+ s .*"
            r"relayed \d+ packets to the target, (\d+) to the caller",
            relay.log_path.read_text(),
        ),
        deadline=10,
        what="the transfer's bridge log line",
    )
    assert int(match[1]) >= 50, match[0]  # the caller heard the target once handed on
    assert inspector.violations == []


def test_cancel_of_a_consultation_ringing_or_answered_brings_the_tab_back_to_the_caller(
    real_hashers, relay, phone_page, user, tmp_path
):
    # As in the hold test, the caller's SDP names a socket of the test's: it hears the tab,
    # the music on hold while the tab consults (a number SIPp lets ring, then one it
    # answers), and the tab again after each Cancel. Then the caller hangs up during a third
    # consultation: the target is CANCELed and the tab told the call ended.
    page = phone_page
    target, unanswered = "+441134960300", "+441134960301"
    number = NumberFactory(owner=user, alias="Shop", forward_targets=["browser"])
    phone = consult_target(tmp_path, relay, target, calls=3)
    recorder = Recorder()
    try:
        log_in(page, relay.base, user)
        switch_on(page)
        caller = call_in(
            relay.agent,
            tmp_path,
            "reinvite_caller",
            number.number,
            sdp_port=recorder.port,
            actions='  <pause milliseconds="14000"/>\n',
        )
        page.get_by_role("button", name="Answer").click(timeout=DEADLINE_MS)
        page.get_by_role("button", name="Hang up").wait_for(timeout=DEADLINE_MS)
        wait_until(lambda: len(recorder.packets) >= 25, deadline=15, what="the tab's audio")

        transfer_to = page.get_by_label("Transfer to")
        transfer_to.fill(unanswered)
        page.get_by_role("button", name="Consult").click()
        page.get_by_text(re.compile(rf"^Calling {re.escape(unanswered)} for you")).wait_for(
            timeout=DEADLINE_MS
        )
        assert not page.get_by_role("button", name="Complete").is_enabled()  # not answered
        wait_until(lambda: held_by(recorder).endswith("m" * 25), deadline=15, what="music")
        page.get_by_role("button", name="Cancel").click()
        page.get_by_text(re.compile("^You cancelled the consultation: back on")).wait_for(
            timeout=DEADLINE_MS
        )
        wait_until(lambda: re.search(r"m+o{25,}$", held_by(recorder)), deadline=15, what="tab")

        transfer_to.fill(target)
        page.get_by_role("button", name="Consult").click()
        page.get_by_text(re.compile(rf"^On a call with {re.escape(target)}; ")).wait_for(
            timeout=DEADLINE_MS
        )
        page.get_by_role("button", name="Cancel").click()
        page.get_by_text(re.compile("^You cancelled the consultation: back on")).wait_for(
            timeout=DEADLINE_MS
        )
        assert page.get_by_role("button", name="Hang up").is_visible()
        wait_until(lambda: re.search(r"m+o{25,}$", held_by(recorder)), deadline=15, what="tab")

        transfer_to.fill(unanswered)
        page.get_by_role("button", name="Consult").click()
        page.get_by_text(re.compile(rf"^Calling {re.escape(unanswered)} for you")).wait_for(
            timeout=DEADLINE_MS
        )
        page.get_by_text(re.compile("^The call ended")).wait_for(timeout=40_000)
        assert caller.finish() == 0, caller  # it hung up as the third one rang
        assert phone.finish() == 0, phone  # CANCELed, BYE'd, CANCELed
    finally:
        recorder.close()
    assert re.fullmatch(r"o+m+o+m+o+m+", held_by(recorder)), held_by(recorder)
    [record] = wait_for_records(number, 1)
    assert (record.forwarded_to, record.transferred_to) == ("browser", None)
