"""Telephony providers, chosen by the TELEPHONY_PROVIDER setting.

A provider turns a call into steps. The pipeline persists every step before it is pushed,
so a provider never writes to the database itself.
"""

import math
from dataclasses import dataclass, field
from functools import cache
from typing import Protocol

from django.conf import settings
from django.utils.module_loading import import_string

# By dotted path: a provider may live in a higher app (SIP is telephony's), which realtime
# never imports.
PROVIDERS = {
    "simulated": "realtime.providers.simulated.SimulatedProvider",
    "sip": "telephony.provider.SipProvider",
}


@dataclass(frozen=True)
class Step:
    status: str
    wait: float = 0.0  # seconds until advance() should be asked for the next step
    duration: int | None = None
    reason: str = ""
    sip_call_id: str = ""
    extra: dict = field(default_factory=dict)
    # For in_progress: the seconds the provider expects the call to talk (None: up to
    # SIP_MAX_CALL_SECONDS). The pipeline grants the call that much of the day's answered
    # seconds, or what is left of them (Call.talk_limit); the provider hangs up there.
    talk: float | None = None


class TelephonyProvider(Protocol):
    """What the pipeline asks of a provider (SIP trunk, HTTP API or the simulation).

    - `place(call)` once, when the call leaves the queue: start dialing, and say what state
      the call is in now and when to ask again.
    - `advance(call)` each time the previous step's `wait` has passed: the next state, or None
      when the provider has nothing to report yet (or the call has ended).
    - `hang_up(call)` when the user cancels a call that has been placed: CANCEL while it
      rings, BYE once answered.
    A provider that learns of progress on its own (a SIP agent's events, an HTTP provider's
    webhooks) reports it with `realtime.tasks.call_step_apply` and returns None from advance.
    """

    def place(self, call) -> Step: ...

    def advance(self, call) -> Step | None: ...

    def hang_up(self, call) -> None: ...


QUOTA_REASON = "quota"  # the reason of a call hung up when its answered seconds ran out


def quota_cut(call, planned: float | None) -> bool:
    """Whether the quota granted the answered `call` less than the `planned` talk (None: up to
    SIP_MAX_CALL_SECONDS): then its provider hangs it up there, `completed` with reason
    `quota` (QUOTA_REASON)."""
    wanted = settings.SIP_MAX_CALL_SECONDS if planned is None else math.ceil(planned)
    return call.talk_limit is not None and call.talk_limit < wanted


def call_identity(call) -> dict:
    """The body of every voice hook request of an outbound call besides its result (voiceapps):
    which call (the client's `callId`, Relay's `call`), and between whom."""
    return {
        "callId": call.call_id,
        "call": str(call.pk),
        "direction": "outbound",
        "from": call.caller_id,
        "to": call.to,
    }


@cache
def get_provider() -> TelephonyProvider:
    path = PROVIDERS.get(settings.TELEPHONY_PROVIDER)
    if path is None:
        raise ValueError(f"unknown TELEPHONY_PROVIDER {settings.TELEPHONY_PROVIDER!r}")
    return import_string(path)()
