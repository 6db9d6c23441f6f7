"""The SIP provider as the pipeline's worker sees it. The telephony agent does the work: it
claims queued calls itself and reports each change through the pipeline's transitions, so
the worker is asked about a SIP call only by recovery, when the call's agent has stopped
pushing its deadline forward."""

from calls.states import CallState
from realtime.providers import Step


class SipProvider:
    def place(self, call) -> Step | None:
        """Nothing: a telephony agent claims the call (and marks it dialed) itself."""
        return None

    def advance(self, call) -> Step | None:
        """Recovery's question about a call that was marked dialed and whose agent went
        silent. It is never dialed again: a real call cannot be undone."""
        return Step(status=CallState.FAILED, reason="agent_lost")

    def hang_up(self, call) -> None:
        """Nothing to do here: the agent holding the call sees its row end and sends CANCEL
        (while it rings) or BYE (once answered)."""
