"""`manage.py telephony_agent`: the SIP side of Relay (telephony/agent.py)."""

import asyncio
import signal

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from telephony.agent import TelephonyAgent
from telephony.speech import missing_tools


class Command(BaseCommand):
    help = "Place the calls of TELEPHONY_PROVIDER=sip through SIP_TRUNK_URI (SIGTERM stops it)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--index",
            type=int,
            default=0,
            help="which of SIP_AGENTS this is: its SIP port is SIP_BIND's plus the index",
        )

    def handle(self, *args, index, **options):
        if settings.TELEPHONY_PROVIDER != "sip":
            raise CommandError("TELEPHONY_PROVIDER is not sip: there is nothing for an agent to do")
        if missing := missing_tools():
            raise CommandError(
                f"speech needs {' and '.join(missing)} (Debian: apt-get install espeak-ng sox)"
            )
        if not 0 <= index < settings.SIP_AGENTS:
            raise CommandError(
                f"--index must be from 0 to SIP_AGENTS - 1 ({settings.SIP_AGENTS - 1})"
            )
        try:
            asyncio.run(self._run(index))
        except OSError as exc:
            raise CommandError(f"the SIP endpoint could not start: {exc}") from exc

    async def _run(self, index: int) -> None:
        agent = TelephonyAgent(index=index)
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, agent.stopping.set)
        await agent.run()
