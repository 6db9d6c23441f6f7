"""voicemail_mail: how soon a voicemail's mail leaves once the message is stored (issue 44).

A worker (`manage.py relay_worker`, as production runs it) sends through an SMTP server in
this process (aiosmtpd on loopback, no TLS); messages spoken by espeak-ng over G.711 are
stored and recorded here (history.services.record_inbound_call, as the agent does), one
after the other, and each is timed from its record's commit to the SMTP server's receipt of
its mail. Twice: with transcription off (the mail is queued with the record; target 2 s),
then with Whisper (the mail waits for the transcript, whose time the worker logs and
the row reports). The first message of each worker warms it (its connections, and the
model's load) and is not counted.
"""

from __future__ import annotations

import re
import statistics
import sys
import threading
import time
from pathlib import Path

from bench import fixtures
from bench.report import Row
from bench.scenarios.common import Bench
from harness.live import ChildProcess, wait_until
from harness.ports import free_port

TARGET_SECONDS = 2.0
TRANSCRIBED = re.compile(r"record (\S+) transcribed \(done\) in ([\d.]+) s")


class _Inbox:
    """An SMTP server on loopback that notes when each message arrived, by subject."""

    def __init__(self) -> None:
        from aiosmtpd.controller import Controller

        self.arrived: dict[str, float] = {}
        self.lock = threading.Lock()
        self.port = free_port()
        self.controller = Controller(self, hostname="127.0.0.1", port=self.port)

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's name
        import email

        subject = email.message_from_bytes(envelope.content)["Subject"] or ""
        with self.lock:
            self.arrived.setdefault(subject, time.monotonic())
        return "250 2.0.0 Queued"

    def when(self, caller: str) -> float | None:
        with self.lock:
            for subject, at in self.arrived.items():
                if caller in subject:
                    return at
        return None


def voicemail_mail(b: Bench) -> None:
    from harness.speech import spoken_message

    inbox = _Inbox()
    inbox.controller.start()
    try:
        number = fixtures.mailed_number()
        audio, seconds = spoken_message()
        for engine in ("off", "whisper"):
            _measure(b, inbox, number, audio, seconds, engine)
    finally:
        inbox.controller.stop()


def _measure(b: Bench, inbox: _Inbox, number, audio: bytes, seconds: float, engine: str) -> None:
    from django.test import override_settings

    # The record says whether its message waits for a transcript: this process writes it,
    # so it takes the worker's engine too.
    with override_settings(TRANSCRIBE_ENGINE=engine):
        _timed(b, inbox, number, audio, seconds, engine)


def _timed(b: Bench, inbox: _Inbox, number, audio: bytes, seconds: float, engine: str) -> None:
    log = Path(b.env["RELAY_VAR_DIR"]) / f"worker-voicemail-{engine}.log"
    env = {**b.env, "EMAIL_URL": f"smtp://127.0.0.1:{inbox.port}?starttls=false",
           "EMAIL_FROM": "Relay <relay@bench.test>", "TRANSCRIBE_ENGINE": engine,
           "LOG_LEVEL": "INFO"}  # fmt: skip
    argv = [sys.executable, "manage.py", "relay_worker", "--no-reload", "--no-startup-delay",
            "--queue-name", "default", "--interval", "0.2"]  # fmt: skip
    _drop_queued_transcriptions()
    worker = ChildProcess(argv, env, log=log)
    latencies: list[float] = []
    try:
        count = b.profile.voicemail_mails
        for index in range(count + 1):  # the first warms the worker up
            caller = f"+4477009{engine == 'off':d}{index:04d}"
            stored = _store(number, caller, audio, seconds)
            arrived = wait_until(lambda caller=caller: inbox.when(caller), deadline=120,
                                 what=f"the mail of a voicemail from {caller}")  # fmt: skip
            if index:
                latencies.append(arrived - stored)
    finally:
        worker.stop()
    transcribing = [float(t) for _, t in TRANSCRIBED.findall(log.read_text())[1:]]
    p50, worst = statistics.median(latencies), max(latencies)
    if engine == "off":
        b.add(Row("voicemail_mail", "mail sent after the message is stored, no transcription "
                  "(p50)", p50, "s", target=f"<= {TARGET_SECONDS:g} s",
                  met=worst <= TARGET_SECONDS,
                  note=f"{len(latencies)} messages one after the other, slowest "
                  f"{worst:.2f} s; the worker polls its queue every 0.2 s"))  # fmt: skip
        return
    spent = statistics.median(transcribing) if transcribing else float("nan")
    b.add(Row("voicemail_mail", "mail sent after the message is stored, transcribed first "
              "(p50)", p50, "s",
              note=f"{len(latencies)} messages of {seconds:.1f} s, slowest {worst:.2f} s; "
              f"transcription took {spent:.2f} s of it (p50, the worker's log): "
              f"{spent / seconds:.2f}x the message's length; the transcribe queue is "
              "polled every second"))  # fmt: skip


def _drop_queued_transcriptions() -> None:
    """The transcriptions the scenarios before this one left queued (their calls' messages,
    in a full run hundreds): a worker with an engine would work through them, 1.7 s each,
    before this scenario's first message, and its mail would wait minutes behind them."""
    from django_tasks.base import TaskResultStatus
    from django_tasks_db.models import DBTaskResult

    from history.tasks import QUEUE

    DBTaskResult.objects.filter(status=TaskResultStatus.READY, queue_name=QUEUE).delete()


def _store(number, caller: str, audio: bytes, seconds: float) -> float:
    """Store a message and record its call, as the agent does; the monotonic time of the
    record's commit."""
    from django.core.files.base import ContentFile

    from core.recordings import recordings_storage
    from history.services import record_inbound_call

    name = recordings_storage().save("bench-message.wav", ContentFile(audio))
    record_inbound_call(number=number, caller_num=caller, status="answered",
                        duration=int(seconds) + 3, recording=name, recording_seconds=seconds,
                        answered_by="voicemail")  # fmt: skip
    return time.monotonic()
