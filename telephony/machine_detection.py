"""What answered an outbound call: a person, an answering machine, a fax, or no telling
(issue 56). Pure signal processing of the answered leg's audio, without Django, fed as it
arrives: 8 kHz 16-bit PCM (little-endian), decoded from G.711, in frames of 20 ms (other
lengths are cut into 20 ms frames here).

    detector = MachineDetector()
    for frame in frames:
        decision = detector.feed(frame)   # a Decision, once, within DECIDE_SECONDS
        ...
        if detector.speak_at is not None: # after `machine`: when the message may start
            ...

What it measures, per 20 ms frame:
- its energy (mean square), against a floor: the 10th percentile of the energies heard so far
  (a line's steady noise sets it; a voice never does, since a voice stops between words), so
  a frame is speech when it is VOICE_RATIO above the floor and above MIN_ENERGY;
- whether it is a single steady tone, and at what frequency: the frequency a sinusoid would
  have for the frame's ratio of first-difference energy to energy (for x = sin(wn),
  sum (x[n]-x[n-1])^2 / sum x^2 = 2 - 2 cos w), then a Goertzel filter at that frequency: the
  share of the frame's energy in it (TONALITY) tells a tone from speech or noise. One
  Goertzel a frame rather than a bank of them over 400-2,000 Hz: about 1 ms of CPU per second
  of audio in CPython (docs/telephony.md has the measure).

What it decides, from the time of the answer (the first frame):
- `fax`: a fax's CNG (1,100 Hz, 0.5 s on) heard before any speech, or its answer tone CED
  (2,100 Hz) for half a second;
- `machine`: a beep (a steady tone of 400-2,000 Hz for at least BEEP_MIN_FRAMES frames, that
  ended within BEEP_MAX_SECONDS), or a greeting that goes on past MACHINE_SPEECH_SECONDS;
- `human`: a short answer ("Hello?", "Yes, who is this?": at most MACHINE_SPEECH_SECONDS)
  followed by HUMAN_SILENCE_SECONDS of silence;
- `unknown`: nothing of these by DECIDE_SECONDS (silence, noise, a tone that never ends, an
  answer that began too late to be judged). It never waits longer.

After `machine`, the detector goes on listening for when a message left on it is heard whole
(`speak_at`, seconds from the answer): at the end of the beep; else once the greeting has
been followed by SILENCE_AFTER_GREETING seconds of silence; else, whatever is heard, at
SPEAK_CAP_SECONDS after the answer. `speak_reason` says which (beep, silence, cap).
"""

from __future__ import annotations

import math
import operator
import struct
from dataclasses import dataclass

RATE = 8000
FRAME_SAMPLES = 160  # 20 ms
FRAME_SECONDS = FRAME_SAMPLES / RATE

DECIDE_SECONDS = 4.0  # a decision, whatever is heard, by then
MIN_ENERGY = 180.0**2  # mean square of a frame that may be speech: about -45 dBFS
VOICE_RATIO = 10.0  # a speech frame's energy over the floor's (10 dB)
FLOOR_PERCENTILE = 0.1
TONALITY = 0.7  # share of a frame's energy at its one frequency, for a tone
TONE_STEADY_HZ = 30.0  # a tone's frequency from frame to frame, at most this apart
BEEP_LOW_HZ, BEEP_HIGH_HZ = 400.0, 2000.0
# A beep is 150 ms or more; a tone that straddles frame edges fills one frame fewer whole.
BEEP_MIN_FRAMES = 6
BEEP_MAX_SECONDS = 2.5  # longer is a steady tone (a line's), not a beep
CNG_HZ, CNG_TOLERANCE_HZ = 1100.0, 40.0
CNG_MIN_SECONDS, CNG_MAX_SECONDS = 0.35, 0.8  # CNG is 0.5 s on, 3 s off (ITU-T T.30)
CED_HZ, CED_TOLERANCE_HZ, CED_MIN_SECONDS = 2100.0, 50.0, 0.5
MODULATION = 4.0  # a voice's loud frames over its quiet ones (6 dB), 80th over 20th percentile
MACHINE_SPEECH_SECONDS = 1.6  # a person's "Hello?" or "Yes, who is this?" is shorter
HUMAN_SILENCE_SECONDS = 0.8  # after a short answer, a person waits for the caller
WORD_GAP_SECONDS = HUMAN_SILENCE_SECONDS  # pauses shorter than this are within the greeting
SILENCE_AFTER_GREETING = 1.0  # after `machine` without a beep: the greeting is over
SPEAK_CAP_SECONDS = 30.0  # after `machine`: the message starts by then, whatever is heard

HUMAN, MACHINE, FAX, UNKNOWN = "human", "machine", "fax", "unknown"


@dataclass(frozen=True)
class Decision:
    """What answered (`answered_by`: human, machine, fax, unknown), when (seconds from the
    answer) and from what (`reason`: beep, greeting, short_answer, cng, ced, timeout)."""

    answered_by: str
    at: float
    reason: str


def _frames(seconds: float) -> int:
    return round(seconds / FRAME_SECONDS)


class MachineDetector:
    """One answered call's detector: feed() its received audio, frame by frame."""

    def __init__(self) -> None:
        self.frames = 0  # frames heard since the answer
        self.decision: Decision | None = None
        self.speak_at: float | None = None
        self.speak_reason = ""
        self._pending: list[int] = []  # samples short of a frame
        self._energies: list[float] = []  # each frame's, until the decision
        self._tonal: list[bool] = []
        self._floor = MIN_ENERGY / VOICE_RATIO
        # The tone under way: its first frame, frames, frequency; the last tone that ended.
        self._tone_start = -1
        self._tone_frames = 0
        self._tone_hz = 0.0
        # The frame after the one in which the last beep heard ended: a message starts once
        # it has been heard, so that no part of the beep is still to come.
        self._beep_end: int | None = None
        self._cng_ended = False
        self._ced = False
        self._speech_before_tone = False
        self._first_speech: int | None = None
        self._last_speech: int | None = None

    # --- the frames -------------------------------------------------------------------------
    def feed(self, frame: bytes) -> Decision | None:
        """Hear `frame` (16-bit little-endian PCM at 8 kHz, any whole number of samples): the
        Decision when this frame decides it (once), else None."""
        count = len(frame) // 2
        samples = self._pending + list(struct.unpack(f"<{count}h", frame[: count * 2]))
        decided = None
        start = 0
        while len(samples) - start >= FRAME_SAMPLES:
            outcome = self._frame(samples[start : start + FRAME_SAMPLES])
            decided = decided or outcome
            start += FRAME_SAMPLES
        self._pending = samples[start:]
        return decided

    def _frame(self, x: list[int]) -> Decision | None:
        index = self.frames
        self.frames += 1
        energy, hz, tonal = _measure(x)
        self._tone(index, tonal, hz)
        if self.decision is None:
            self._energies.append(energy)
            self._tonal.append(tonal)
            decision = self._decide()
            if decision is not None:
                self.decision = decision
                self._after_decision()
            return decision
        self._listen(index, energy, tonal)
        return None

    def _tone(self, index: int, tonal: bool, hz: float) -> None:
        """Follow the tone under way; a tone that ends is judged: a beep, a fax's CNG."""
        if tonal and self._tone_frames and abs(hz - self._tone_hz) <= TONE_STEADY_HZ:
            self._tone_frames += 1
            self._tone_hz += (hz - self._tone_hz) / self._tone_frames
        else:
            if self._tone_frames:
                self._tone_ended(index)
            self._tone_start, self._tone_frames, self._tone_hz = (
                (index, 1, hz) if tonal else (-1, 0, 0.0)
            )
            if tonal:
                self._speech_before_tone = self._first_speech is not None
        seconds = self._tone_frames * FRAME_SECONDS
        if abs(self._tone_hz - CED_HZ) <= CED_TOLERANCE_HZ and seconds >= CED_MIN_SECONDS:
            self._ced = True

    def _tone_ended(self, index: int) -> None:
        seconds = self._tone_frames * FRAME_SECONDS
        hz = self._tone_hz
        if (
            abs(hz - CNG_HZ) <= CNG_TOLERANCE_HZ
            and CNG_MIN_SECONDS <= seconds <= CNG_MAX_SECONDS
            and not self._speech_before_tone
        ):
            self._cng_ended = True
        elif (
            BEEP_LOW_HZ <= hz <= BEEP_HIGH_HZ
            and self._tone_frames >= BEEP_MIN_FRAMES
            and seconds <= BEEP_MAX_SECONDS
        ):
            self._beep_end = index + 1

    # --- the decision -----------------------------------------------------------------------
    def _decide(self) -> Decision | None:
        now = self.frames * FRAME_SECONDS
        if self._ced or self._cng_ended:
            return Decision(FAX, now, "ced" if self._ced else "cng")
        if self._beep_end is not None:
            return Decision(MACHINE, now, "beep")
        speech = self._speech_frames()
        if speech and self._modulated(speech):
            first, last = speech[0], speech[-1]
            self._first_speech, self._last_speech = first, last
            span = (last - first + 1) * FRAME_SECONDS
            if span > MACHINE_SPEECH_SECONDS:
                return Decision(MACHINE, now, "greeting")
            silent = (self.frames - 1 - last) * FRAME_SECONDS
            # A tone under way may be the beep after a short greeting: it is heard out first.
            if silent >= HUMAN_SILENCE_SECONDS and not self._tone_frames:
                return Decision(HUMAN, now, "short_answer")
        if now >= DECIDE_SECONDS:
            return Decision(UNKNOWN, now, "timeout")
        return None

    def _speech_frames(self) -> list[int]:
        """The frames of the first utterance so far (speech frames, with pauses shorter than
        WORD_GAP_SECONDS), judged against the floor of all that was heard."""
        energies = self._energies
        ranked = sorted(energies)
        self._floor = ranked[int(len(ranked) * FLOOR_PERCENTILE)]
        threshold = max(MIN_ENERGY, self._floor * VOICE_RATIO)
        gap = _frames(WORD_GAP_SECONDS)
        # A frame beside a tone holds part of it (a tone starts and ends anywhere in a frame):
        # loud, yet not speech. So the newest frame is judged once the next one is heard.
        tonal = self._tonal
        near_tone = [
            a or b or c for a, b, c in zip([False, *tonal], tonal, tonal[1:], strict=False)
        ]
        speech: list[int] = []
        for index, energy in enumerate(energies[:-1]):
            if energy > threshold and not near_tone[index]:
                if speech and index - speech[-1] > gap:
                    break  # a second utterance: the first one decided already
                speech.append(index)
        return speech

    def _modulated(self, speech: list[int]) -> bool:
        """Whether the utterance rises and falls as a voice does (syllables, words): a steady
        sound (a dial tone's two frequencies, a hum) that rose above the floor is none."""
        levels = sorted(self._energies[speech[0] : speech[-1] + 1])
        low, high = levels[int(len(levels) * 0.2)], levels[int(len(levels) * 0.8)]
        return high >= MODULATION * max(low, 1.0)

    # --- after `machine`: when to speak -----------------------------------------------------
    def _after_decision(self) -> None:
        self._energies = self._tonal = []  # no longer needed

    def _listen(self, index: int, energy: float, tonal: bool) -> None:
        if self.decision.answered_by != MACHINE or self.speak_at is not None:
            return
        if self._beep_end is not None:
            if index >= self._beep_end:
                self._speak(self._beep_end, "beep")
            return
        if energy > max(MIN_ENERGY, self._floor * VOICE_RATIO) and not tonal:
            self._last_speech = index
        silent_since = self._last_speech if self._last_speech is not None else -1
        if self._tone_frames == 0 and (index - silent_since) * FRAME_SECONDS >= (
            SILENCE_AFTER_GREETING
        ):
            self._speak(index + 1, "silence")
        elif (index + 1) * FRAME_SECONDS >= SPEAK_CAP_SECONDS:
            self._speak(index + 1, "cap")

    def _speak(self, frame: int, reason: str) -> None:
        self.speak_at, self.speak_reason = frame * FRAME_SECONDS, reason


def _measure(x: list[int]) -> tuple[float, float, bool]:
    """A frame's energy (mean square), the frequency a single tone in it would have, and
    whether it is one (Goertzel at that frequency holds TONALITY of its energy)."""
    n = len(x)
    energy_sum = sum(map(operator.mul, x, x))
    if energy_sum <= MIN_ENERGY * n:
        return energy_sum / n, 0.0, False
    diffs = list(map(operator.sub, x[1:], x[:-1]))
    difference = sum(map(operator.mul, diffs, diffs))
    cosine = 1.0 - difference / (2.0 * energy_sum)
    if not -1.0 < cosine < 1.0:
        return energy_sum / n, 0.0, False
    w = math.acos(cosine)
    hz = w * RATE / (2 * math.pi)
    if not BEEP_LOW_HZ - 100 <= hz <= CED_HZ + 100:
        return energy_sum / n, hz, False
    coefficient = 2.0 * cosine
    s1 = s2 = 0.0
    for sample in x:
        s1, s2 = sample + coefficient * s1 - s2, s1
    power = s1 * s1 + s2 * s2 - coefficient * s1 * s2
    return energy_sum / n, hz, 2.0 * power / (n * energy_sum) >= TONALITY
