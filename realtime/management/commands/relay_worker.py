"""`manage.py relay_worker`: django-tasks-db's db_worker plus the recovery loop.

Recovery runs at start (so a worker restarted after a crash picks up what its predecessor
dropped) and every CALL_RECOVERY_INTERVAL seconds in a background thread: every pass named
in WORKER_PERIODIC_PASSES (the calls' recovery, the webhook outbox's sweep), each a function
that returns how much it re-queued. The site's settings name them, so apps above this one
add theirs without an import running upward.
"""

import logging
import os
import threading
import time

from django.conf import settings
from django.core.management.base import CommandError
from django.db import InterfaceError, OperationalError, close_old_connections
from django.utils.autoreload import DJANGO_AUTORELOAD_ENV, run_with_reloader
from django.utils.module_loading import import_string
from django_tasks_db.management.commands import db_worker
from django_tasks_db.management.commands.db_worker import Command as DbWorkerCommand

from history.tasks import QUEUE as TRANSCRIPTION_QUEUE
from history.tasks import transcribe_in_processes

logger = logging.getLogger(__name__)


class RecoveryLoop(threading.Thread):
    def __init__(self, interval: float):
        super().__init__(name="call-recovery", daemon=True)
        self.interval = interval
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            for name in settings.WORKER_PERIODIC_PASSES:
                try:
                    close_old_connections()
                    touched = import_string(name)()
                    if touched:
                        logger.warning("%s re-queued %d item(s)", name.rsplit(".", 1)[1], touched)
                except Exception:  # keep the loop alive through a database restart
                    logger.exception("recovery pass %s failed", name)
                finally:
                    close_old_connections()
            self.stopped.wait(self.interval)


class ResilientWorker(db_worker.Worker):
    """db_worker's loop exits on any database error; a database restart must not end the
    worker (and with it runrelay). Connection errors are waited out with backoff."""

    MAX_BACKOFF = 10.0

    def run(self) -> None:
        backoff = 0.5
        while self.running:
            try:
                return super().run()
            except (OperationalError, InterfaceError) as exc:
                logger.warning("database unavailable (%s); retrying in %.1fs", exc, backoff)
                close_old_connections()
                time.sleep(backoff)
                backoff = min(backoff * 2, self.MAX_BACKOFF)
        return None


TRANSCRIBE_POLL_INTERVAL = 1.0  # seconds: a transcript may wait a second to start


class TranscribeThreads:
    """TRANSCRIBE_CONCURRENCY workers of the `transcribe` queue, each in a thread of its own
    beside the main worker: a transcription (tens of seconds of CPU) never holds up the
    tasks that dispatch calls. None when transcription is off."""

    def __init__(self, *, backend_name: str, worker_id: str) -> None:
        self.workers = []
        if settings.TRANSCRIBE_ENGINE == "off":
            return
        for index in range(settings.TRANSCRIBE_CONCURRENCY):
            worker = ResilientWorker(
                queue_names=[TRANSCRIPTION_QUEUE],
                interval=TRANSCRIBE_POLL_INTERVAL,
                batch=False,
                backend_name=backend_name,
                startup_delay=False,
                max_tasks=None,
                worker_id=f"{worker_id}-transcribe-{index}"[:64],
                excluded_queue_names=[],
            )
            self.workers.append(worker)

    def start(self) -> None:
        if not self.workers:
            return
        # Each thread's transcription runs in a child process of its own (history.tasks).
        transcribe_in_processes(len(self.workers))
        for index, worker in enumerate(self.workers):
            name = f"transcribe-{index}"
            threading.Thread(target=worker.run, name=name, daemon=True).start()

    def stop(self) -> None:
        # A transcription cut short is held under a lease; the sweep queues it again.
        for worker in self.workers:
            worker.running = False


class Command(DbWorkerCommand):
    """db_worker's options and logging, with ResilientWorker and the recovery loop.

    db_worker builds its worker from a module global; rather than patch that global, this
    command builds the worker itself from the same options.
    """

    help = "Run the task worker with the call recovery loop."

    def handle(
        self,
        *,
        verbosity: int,
        queue_name: str,
        interval: float,
        batch: bool,
        backend_name: str,
        startup_delay: bool,
        reload: bool,
        max_tasks: int | None,
        worker_id: str,
        exclude_queues: str,
        **options,
    ) -> None:
        self.configure_logging(verbosity)
        queue_names = queue_name.split(",")
        excluded = exclude_queues.split(",") if exclude_queues else []
        if excluded and "*" not in queue_names:
            raise CommandError("--exclude-queues can only be used with --queue-name=*")
        worker = ResilientWorker(
            queue_names=queue_names,
            interval=interval,
            batch=batch,
            backend_name=backend_name,
            startup_delay=startup_delay,
            max_tasks=max_tasks,
            worker_id=worker_id,
            excluded_queue_names=excluded,
        )
        loop = RecoveryLoop(settings.CALL_RECOVERY_INTERVAL)
        loop.start()
        transcribers = TranscribeThreads(backend_name=backend_name, worker_id=worker_id)
        if TRANSCRIPTION_QUEUE not in queue_names and "*" not in queue_names:
            transcribers.start()
        try:
            if reload and not batch:
                if os.environ.get(DJANGO_AUTORELOAD_ENV) == "true":
                    worker.configure_signals()  # only the reloader's child handles signals
                run_with_reloader(worker.run)
            else:
                worker.configure_signals()
                worker.run()
        finally:
            loop.stopped.set()
            transcribers.stop()
