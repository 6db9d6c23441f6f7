"""`manage.py matrix_bot`: the Matrix bot's reading side (matrix/sync.py), /sync long-polling.

One runs per deployment (runrelay starts it when Matrix is on). A second one started by
mistake waits: the reader holds a lease in the bot's state row, renewed every batch, and
takes it over only when it has lapsed. SIGTERM and Ctrl-C stop it at once, letting go of the
lease; a batch cut short is read again by the next start (handling it twice changes nothing).
"""

import logging
import os
import signal
import socket
import threading
from datetime import timedelta

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import InterfaceError, OperationalError, close_old_connections
from django.db.models import Q
from django.utils import timezone

from matrix import tasks
from matrix.client import MatrixClient, MatrixError
from matrix.models import MatrixBotState
from matrix.sync import sync_once

logger = logging.getLogger("matrix.bot")

LONGEST_WAIT = 60.0  # seconds between tries while the homeserver is down


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def token_check(client: MatrixClient) -> bool:
    """whoami: whether the homeserver takes the bot's token as MATRIX_BOT_USER_ID. A wrong
    one is one clear log line (and holds the outbox)."""
    try:
        user_id = client.whoami()
    except MatrixError as exc:
        if exc.status in (401, 403):
            tasks.token_refused(exc)
        else:
            logger.warning("Matrix: homeserver %s not reachable yet: %s", client.homeserver, exc)
        return False
    if user_id != settings.MATRIX_BOT_USER_ID:
        logger.error(
            "Matrix: MATRIX_BOT_ACCESS_TOKEN belongs to %s, not MATRIX_BOT_USER_ID %s",
            user_id,
            settings.MATRIX_BOT_USER_ID,
        )
        return False
    logger.info("Matrix: the bot is %s on %s", user_id, client.homeserver)
    return True


class Command(BaseCommand):
    help = "Run the Matrix bot's /sync loop: memberships and chat commands (Ctrl-C stops it)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--once", action="store_true", help="one /sync (no long-poll), then exit"
        )

    def handle(self, *args, once: bool, **options):
        if not settings.MATRIX_ENABLED:
            raise CommandError(
                "Matrix is off: set MATRIX_HOMESERVER_URL, MATRIX_BOT_ACCESS_TOKEN and "
                "MATRIX_BOT_USER_ID (docs/matrix.md)"
            )
        # SIGTERM (runrelay's stop, systemd's) ends the loop like Ctrl-C, through the finally
        # below that lets go of the lease: a new bot then reads at once.
        signal.signal(signal.SIGTERM, _interrupt)
        client = MatrixClient()
        token_check(client)
        holder = f"{socket.gethostname()}:{os.getpid()}"[:64]
        try:
            if once:
                try:
                    sync_once(client=client, timeout_ms=0)
                except MatrixError as exc:
                    raise CommandError(f"Matrix: /sync failed: {exc}") from None
                return
            self._loop(client, holder)
        except KeyboardInterrupt:
            pass
        finally:
            MatrixBotState.objects.filter(pk=1, sync_holder=holder).update(
                sync_holder="", sync_lease_until=None
            )

    def _loop(self, client: MatrixClient, holder: str) -> None:
        pause = threading.Event()  # never set: a wait that a signal's exception cuts short
        wait = 1.0
        timeout = settings.MATRIX_SYNC_TIMEOUT
        lease = timedelta(seconds=timeout * 2 + 30)
        while True:
            try:
                if not self._lease(holder, lease):
                    pause.wait(5.0)
                    continue
                if not tasks.token_recheck(client):
                    pause.wait(tasks.TOKEN_RECHECK.total_seconds())
                    continue
                sync_once(client=client, timeout_ms=int(timeout * 1000))
                wait = 1.0
            except MatrixError as exc:
                logger.warning("Matrix: /sync failed (%s); again in %.0f s", exc, wait)
                pause.wait(wait)
                wait = min(wait * 2, LONGEST_WAIT)
            except (OperationalError, InterfaceError) as exc:
                logger.warning("database unavailable (%s); again in %.0f s", exc, wait)
                close_old_connections()
                pause.wait(wait)
                wait = min(wait * 2, LONGEST_WAIT)

    def _lease(self, holder: str, lease: timedelta) -> bool:
        """Hold (or renew) the reader's lease; False while another live reader holds it."""
        now = timezone.now()
        tasks.bot_state()
        return bool(
            MatrixBotState.objects.filter(
                Q(sync_holder=holder)
                | Q(sync_lease_until__isnull=True)
                | Q(sync_lease_until__lt=now),
                pk=1,
            ).update(sync_holder=holder, sync_lease_until=now + lease)
        )
