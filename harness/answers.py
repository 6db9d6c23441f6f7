"""The labelled answers the machine detector (telephony.machine_detection) is measured on
(issue 56): what a called line plays once it has answered, made with espeak-ng and sox, each
with line noise and through mu-law as a trunk carries it.

- machines: greetings of 2 to 15 s in several voices and speeds, half of them ending with a
  beep (400-2,000 Hz, 0.2-0.6 s), the others with silence;
- humans: "Hello?" and "Yes, who is this?" (and a few like them), after a short delay, then
  silence;
- fax: a calling fax's CNG (1,100 Hz, 0.5 s on, 3 s off), and an answering fax's CED
  (2,100 Hz);
- unknown: silence, noise alone, a steady tone.

`answers(directory)` makes them (cached in `directory`: a second call reads the files);
`accuracy(directory)` classifies each and reports how many were right, the machines taken for
people, the time to a decision (p95) and the CPU it took per second of audio. The tests
(tests/telephony/test_machine_detection.py) and the lead's bench call it.
"""

from __future__ import annotations

import hashlib
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from harness.live import tool
from telephony.machine_detection import FRAME_SAMPLES, MachineDetector
from telephony.sip.rtp import LINEAR

MU_LAW = 0
SECONDS = 20.0  # every answer lasts this long (the detector decides within 4 s)


@dataclass(frozen=True)
class Answer:
    """One answer to make: its name, what answered, and how it is made (`speech`: text,
    voice, words a minute, seconds before it; `beep`: Hz and seconds after a pause;
    `tone`: a sox synth of its own; `noise`: the line's, in dBFS)."""

    name: str
    label: str
    text: str = ""
    voice: str = "en"
    speed: int = 170
    before: float = 0.3
    beep: tuple[float, float] | None = None  # (Hz, seconds)
    beep_pause: float = 0.4
    tone: tuple[str, ...] = ()
    noise_db: float = -50.0


GREETINGS = [
    "Hi, you have reached Sam. Please leave a message.",
    "Sorry, I cannot take your call right now, leave a message.",
    "The person you are calling is not available. Please leave a message after the tone.",
    "Hello, this is Maria. I am away from my phone. Leave your name and number and I will "
    "call you back.",
    "You have reached the office of Doctor Patel. Our opening hours are nine to five, Monday "
    "to Friday. Please leave a message after the tone.",
    "Hello, you have reached the voicemail of John Smith. I am not available to take your "
    "call right now. Please leave your name, your number and a short message after the "
    "tone, and I will get back to you as soon as I can. Thank you.",
    "Thanks for calling. Nobody can come to the phone.",
    "Welcome to the mailbox of extension four five two. The subscriber is not available. "
    "Please record your message at the tone. When you are finished, hang up.",
]
VOICES = ["en", "en-us", "en-gb", "en+f3", "en-us+m3", "en+f2", "en-gb+m4", "en-us+f4"]
BEEPS = [(1000.0, 0.5), (1400.0, 0.3), (800.0, 0.4), (440.0, 0.6), (1850.0, 0.2)]
HUMAN_WORDS = ["Hello?", "Yes, who is this?", "Hello.", "Yeah, hello?", "Hi, who is it?"]


def catalogue() -> list[Answer]:
    """The set: 16 machines, 12 people, 3 faxes, 4 unknowns (35)."""
    answers = []
    for index, text in enumerate(GREETINGS * 2):
        turn = index + index // len(GREETINGS)  # the second round differs from the first
        answers.append(
            Answer(
                name=f"machine-{index:02d}",
                label="machine",
                text=text,
                voice=VOICES[(3 * index) % len(VOICES)],
                speed=[160, 175, 190, 150][turn % 4],
                before=[0.1, 0.4, 1.2, 0.2][turn % 4],
                beep=BEEPS[index % len(BEEPS)] if turn % 2 == 0 else None,
                beep_pause=[0.3, 0.6, 0.9][index % 3],
                noise_db=[-55.0, -45.0, -38.0][index % 3],
            )
        )
    for index in range(12):
        answers.append(
            Answer(
                name=f"human-{index:02d}",
                label="human",
                text=HUMAN_WORDS[index % len(HUMAN_WORDS)],
                voice=VOICES[(index + 3) % len(VOICES)],
                speed=[165, 180, 195][index % 3],
                before=[0.2, 0.5, 0.9, 0.35][index % 4],
                noise_db=[-55.0, -45.0, -38.0][index % 3],
            )
        )
    cng = ("synth", "0.5", "sine", "1100", "pad", "0", "3")  # one cycle, repeated
    dial_tone = ("synth", "19", "sine", "350", "sine", "mix", "440")
    answers += [
        Answer(name="fax-cng", label="fax", tone=cng, before=0.2),
        Answer(name="fax-cng-noisy", label="fax", tone=cng, before=0.6, noise_db=-40.0),
        Answer(name="fax-ced", label="fax", tone=("synth", "3.3", "sine", "2100"), before=0.3),
        Answer(name="silence", label="unknown", noise_db=-90.0),
        Answer(name="line-noise", label="unknown", noise_db=-30.0),
        Answer(name="steady-tone", label="unknown", tone=("synth", "19", "sine", "1000")),
        Answer(name="dial-tone", label="unknown", tone=dial_tone),
    ]  # fmt: skip
    return answers


def _sox(*arguments: str) -> None:
    subprocess.run([tool("sox"), "-R", *arguments], check=True, timeout=60, capture_output=True)  # noqa: S603


def _make(answer: Answer, path: Path) -> float | None:
    """`answer` as SECONDS of mu-law at 8 kHz (raw), at `path`; where its beep ends (seconds),
    if it has one."""
    work = path.with_suffix(".parts")
    work.mkdir(exist_ok=True)
    pcm = ["-r", "8000", "-c", "1", "-b", "16", "-e", "signed-integer"]
    parts = []
    lead = work / "lead.wav"
    _sox("-n", *pcm, str(lead), "trim", "0", str(answer.before))
    parts.append(lead)
    if answer.text:
        raw, voice = work / "espeak.wav", work / "voice.wav"
        subprocess.run(  # noqa: S603
            [tool("espeak-ng"), "-v", answer.voice, "-s", str(answer.speed), "-w", str(raw),
             answer.text],
            check=True, timeout=60, capture_output=True,
        )  # fmt: skip
        _sox(str(raw), *pcm, str(voice), "silence", "1", "0.02", "0.5%", "reverse", "silence",
             "1", "0.02", "0.5%", "reverse", "norm", "-6")  # fmt: skip
        parts.append(voice)
    if answer.beep:
        pause, beep = work / "pause.wav", work / "beep.wav"
        _sox("-n", *pcm, str(pause), "trim", "0", str(answer.beep_pause))
        hz, seconds = answer.beep
        _sox("-n", *pcm, str(beep), "synth", str(seconds), "sine", str(hz), "vol", "0.4")
        parts += [pause, beep]
    if answer.tone:
        tone = work / "tone.wav"
        _sox("-n", *pcm, str(tone), *answer.tone, "vol", "0.4", "repeat", "5")
        parts.append(tone)
    body, noise = work / "body.wav", work / "noise.wav"
    _sox(*map(str, parts), *pcm, str(body), "pad", "0", str(SECONDS), "trim", "0", str(SECONDS))
    _sox("-n", *pcm, str(noise), "synth", str(SECONDS), "whitenoise", "vol",
         f"{10 ** (answer.noise_db / 20):.6f}")  # fmt: skip
    _sox("-m", str(body), str(noise), "-r", "8000", "-c", "1", "-e", "u-law", "-t", "raw",
         str(path))  # fmt: skip
    beep_end = None
    if answer.beep:
        beep_end = sum(_seconds(part) for part in parts)
    for part in work.iterdir():
        part.unlink()
    work.rmdir()
    return beep_end


def _seconds(path: Path) -> float:
    return float(
        subprocess.run(  # noqa: S603
            [tool("soxi"), "-D", str(path)], check=True, timeout=30, capture_output=True, text=True
        ).stdout
    )


@dataclass(frozen=True)
class Made:
    answer: Answer
    ulaw: bytes  # SECONDS of mu-law at 8 kHz
    beep_end: float | None  # seconds from the start, for an answer with a beep


def answers(directory: Path) -> list[Made]:
    """Each answer of the catalogue with its audio, made once into `directory` (a file per
    answer, named for what makes it, and where its beep ends beside it)."""
    directory.mkdir(parents=True, exist_ok=True)
    made = []
    for answer in catalogue():
        digest = hashlib.sha256(repr(answer).encode()).hexdigest()[:12]
        path = directory / f"{answer.name}-{digest}.ulaw"
        beep = path.with_suffix(".beep")
        if not path.exists():
            beep_end = _make(answer, path.with_suffix(".tmp"))
            beep.write_text("" if beep_end is None else repr(beep_end))
            path.with_suffix(".tmp").rename(path)
        text = beep.read_text()
        made.append(Made(answer, path.read_bytes(), float(text) if text else None))
    return made


def pcm_frames(ulaw: bytes) -> list[bytes]:
    """mu-law audio as the agent hands it to the detector: 20 ms frames of 16-bit PCM."""
    table = LINEAR[MU_LAW]
    return [
        b"".join(map(table.__getitem__, ulaw[start : start + FRAME_SAMPLES]))
        for start in range(0, len(ulaw), FRAME_SAMPLES)
    ]


@dataclass
class Classified:
    answer: Answer
    beep_end: float | None
    answered_by: str
    at: float  # seconds from the answer to the decision
    reason: str
    speak_at: float | None  # after `machine`: when a message would start
    speak_reason: str


@dataclass
class Accuracy:
    results: list[Classified]
    right: int
    machines: int
    machines_as_human: int
    decision_p95: float  # seconds
    cpu_per_audio_second: float  # seconds of CPU per second of audio heard

    @property
    def share_right(self) -> float:
        return self.right / len(self.results)

    @property
    def wrong_human_share(self) -> float:
        return self.machines_as_human / self.machines if self.machines else 0.0

    @property
    def decided_p95(self) -> float:
        """The time to a decision, p95, over the answers that can be told apart (silence,
        noise and tones are `unknown` at 4 s by design, and would set the p95 alone)."""
        times = sorted(r.at for r in self.results if r.answer.label != "unknown")
        return times[min(len(times) - 1, int(0.95 * len(times)))] if times else 0.0

    def wrong(self) -> list[Classified]:
        return [r for r in self.results if r.answered_by != r.answer.label]


def classify(ulaw: bytes) -> tuple[MachineDetector, float, float]:
    """Feed `ulaw` to a detector as calls do, until it knows when a message would start (or
    the audio ends): the detector, the CPU seconds it took and the audio seconds fed."""
    detector = MachineDetector()
    frames = pcm_frames(ulaw)
    fed = 0
    started = time.process_time()
    for frame in frames:
        detector.feed(frame)
        fed += 1
        decision = detector.decision
        if decision is not None and (decision.answered_by != "machine" or detector.speak_at):
            break
    return detector, time.process_time() - started, fed * FRAME_SAMPLES / 8000


def accuracy(directory: Path) -> Accuracy:
    """The catalogue classified (made into `directory` first, if not there yet)."""
    results, cpu, audio = [], 0.0, 0.0
    for made in answers(directory):
        detector, spent, heard = classify(made.ulaw)
        cpu, audio = cpu + spent, audio + heard
        decision = detector.decision
        results.append(
            Classified(
                made.answer,
                made.beep_end,
                decision.answered_by,
                decision.at,
                decision.reason,
                detector.speak_at,
                detector.speak_reason,
            )
        )
    times = sorted(r.at for r in results)
    machines = [r for r in results if r.answer.label == "machine"]
    return Accuracy(
        results=results,
        right=sum(r.answered_by == r.answer.label for r in results),
        machines=len(machines),
        machines_as_human=sum(r.answered_by == "human" for r in machines),
        decision_p95=times[min(len(times) - 1, int(0.95 * len(times)))],
        cpu_per_audio_second=cpu / audio if audio else 0.0,
    )
