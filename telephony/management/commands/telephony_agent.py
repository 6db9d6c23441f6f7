"""`manage.py telephony_agent`: the SIP side of Relay (telephony/agent.py).

SIGTERM or SIGINT drains the agent: it takes no new call, keeps its live calls to their end
(up to SIP_DRAIN_SECONDS), then exits 0; a second signal stops it at once. `--drain` does
that to the agent of `--index` running on this host (its pid file under RELAY_VAR_DIR), and
waits until it has exited: the first step of an upgrade with no dropped call."""

import asyncio
import contextlib
import os
import signal
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from telephony.agent import TelephonyAgent
from telephony.speech import missing_tools

DRAIN_MARGIN = 30.0  # seconds past SIP_DRAIN_SECONDS that --drain waits for the exit


def pid_file(index: int) -> Path:
    return Path(settings.VAR_DIR) / f"telephony-agent-{index}.pid"


def _running_agent(path: Path) -> int | None:
    """The pid in `path` when it is a live telephony agent, else None."""
    try:
        pid = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _is_agent(pid) else None


def _is_agent(pid: int) -> bool:
    """Whether process `pid` is a telephony agent still running (one that exited has no
    command line, even before its parent reaps it)."""
    try:
        return b"telephony_agent" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


class Command(BaseCommand):
    help = (
        "Place the calls of TELEPHONY_PROVIDER=sip through SIP_TRUNK_URI, and take the calls to "
        "the numbers. SIGTERM drains it (no new call; the live ones end first); --drain does "
        "that to the running agent and waits for it to exit."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--index",
            type=int,
            default=0,
            help="which of SIP_AGENTS this is: its SIP port is SIP_BIND's plus the index",
        )
        parser.add_argument(
            "--drain",
            action="store_true",
            help="drain the agent of --index running on this host, and wait until it exits",
        )

    def handle(self, *args, index, drain, **options):
        if settings.TELEPHONY_PROVIDER != "sip":
            raise CommandError("TELEPHONY_PROVIDER is not sip: there is nothing for an agent to do")
        if not 0 <= index < settings.SIP_AGENTS:
            raise CommandError(
                f"--index must be from 0 to SIP_AGENTS - 1 ({settings.SIP_AGENTS - 1})"
            )
        if drain:
            self._drain(index)
            return
        if missing := missing_tools():
            raise CommandError(
                f"speech needs {' and '.join(missing)} (Debian: apt-get install espeak-ng sox)"
            )
        path = pid_file(index)
        if (other := _running_agent(path)) is not None and other != os.getpid():
            raise CommandError(f"telephony agent {index} runs already here (pid {other})")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{os.getpid()}\n")
        try:
            asyncio.run(self._run(index))
        except OSError as exc:
            raise CommandError(f"the SIP endpoint could not start: {exc}") from exc
        finally:
            with contextlib.suppress(OSError):
                if path.read_text().strip() == str(os.getpid()):
                    path.unlink()

    async def _run(self, index: int) -> None:
        agent = TelephonyAgent(index=index)
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, agent.drain)
        await agent.run()

    def _drain(self, index: int) -> None:
        path = pid_file(index)
        pid = _running_agent(path)
        if pid is None:
            raise CommandError(f"no telephony agent {index} is running on this host ({path})")
        os.kill(pid, signal.SIGTERM)
        wait = settings.SIP_DRAIN_SECONDS + DRAIN_MARGIN
        self.stdout.write(
            f"telephony agent {index} (pid {pid}) is draining: new calls go to the other "
            f"agents; waiting for its live calls to end (at most {wait:g} s)"
        )
        deadline = time.monotonic() + wait
        while _is_agent(pid):
            if time.monotonic() > deadline:
                raise CommandError(f"telephony agent {index} (pid {pid}) is still running")
            time.sleep(0.2)
        self.stdout.write(f"telephony agent {index} drained and stopped")
