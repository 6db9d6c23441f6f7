"""Telephony providers, chosen by the TELEPHONY_PROVIDER setting.

A provider turns a call into steps: `start(call)` is asked once when the call leaves the
queue, `advance(call)` each time the previous step's delay has passed. Each returns the next
Step (the state to enter, how long to wait before asking again, and what it learned) or None
when the call has ended. The pipeline persists every step before it is pushed, so a provider
never writes to the database itself. A provider driven by webhooks instead would call
`realtime.services.call_transition` from its webhook view and return None here.
"""

from dataclasses import dataclass, field
from functools import cache

from django.conf import settings
from django.utils.module_loading import import_string

PROVIDERS = {"simulated": "realtime.providers.simulated.SimulatedProvider"}


@dataclass(frozen=True)
class Step:
    status: str
    wait: float = 0.0  # seconds until advance() should be asked for the next step
    duration: int | None = None
    reason: str = ""
    provider_call_id: str = ""
    extra: dict = field(default_factory=dict)


@cache
def get_provider():
    path = PROVIDERS.get(settings.TELEPHONY_PROVIDER)
    if path is None:
        raise ValueError(f"unknown TELEPHONY_PROVIDER {settings.TELEPHONY_PROVIDER!r}")
    return import_string(path)()
