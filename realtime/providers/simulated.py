"""A provider that places no real call: a deterministic script a client can steer.

The last digit of the target number decides the ending:
  0-6 -> completed     7 -> busy     8 -> no_answer     9 -> failed ("unreachable")
Every call goes queued -> dialing -> ringing first; completed calls pass through in_progress.
A call whose plan has fewer answered seconds left than it would talk is hung up there
(`completed`, reason `quota`).
The duration of a completed call is the time it takes to say the message at 150 words a
minute (at least 1 second). SIMULATED_STEP_SECONDS is the pause between steps and
SIMULATED_TALK_SCALE the fraction of the spoken duration that in_progress really lasts;
both are 0 in tests.
"""

import math
import uuid

from django.conf import settings

from realtime.models import CallState
from realtime.providers import QUOTA_REASON, Step, quota_cut

WORDS_PER_MINUTE = 150
ENDINGS = {"7": CallState.BUSY, "8": CallState.NO_ANSWER, "9": CallState.FAILED}


def spoken_seconds(message: str) -> int:
    words = len(message.split()) or 1
    return max(1, math.ceil(words * 60 / WORDS_PER_MINUTE))


class SimulatedProvider:
    def place(self, call) -> Step:
        return Step(
            status=CallState.DIALING,
            wait=settings.SIMULATED_STEP_SECONDS,
            provider_call_id=f"sim-{uuid.uuid4().hex[:16]}",
        )

    def advance(self, call) -> Step | None:
        step = settings.SIMULATED_STEP_SECONDS
        ending = ENDINGS.get(call.to[-1])
        if call.status == CallState.DIALING:
            return Step(status=CallState.RINGING, wait=step)
        if call.status == CallState.RINGING:
            if ending == CallState.FAILED:
                return Step(status=CallState.FAILED, reason="unreachable")
            if ending is not None:
                return Step(status=ending, duration=0)
            duration = spoken_seconds(call.message)
            return Step(
                status=CallState.IN_PROGRESS,
                wait=duration * settings.SIMULATED_TALK_SCALE,
                duration=duration,
                talk=duration,
            )
        if call.status == CallState.IN_PROGRESS:
            if quota_cut(call, call.duration):
                return Step(
                    status=CallState.COMPLETED,
                    duration=call.talk_limit,
                    reason=QUOTA_REASON,
                )
            return Step(status=CallState.COMPLETED, duration=call.duration)
        return None

    def hang_up(self, call) -> None:
        """Nothing was placed, so there is nothing to hang up."""
