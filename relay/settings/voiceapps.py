"""Voice applications (docs/voice-apps.md): scripts of verbs, their hooks, and their limits."""

import re

from relay.settings.readers import must, seconds, text, whole_number

# A hook (actionHook, redirect, a number's voice URL) that has not answered by then fails,
# and the call goes on with its script.
VOICE_HOOK_TIMEOUT = seconds("VOICE_HOOK_TIMEOUT", 3.0, above=True, maximum=30)
# Per call: verbs run, redirects followed, requests to hooks. Past one, the call hangs up.
VOICE_MAX_STEPS = whole_number("VOICE_MAX_STEPS", 1000, minimum=1, maximum=100_000)
VOICE_MAX_REDIRECTS = whole_number("VOICE_MAX_REDIRECTS", 10, minimum=0, maximum=1000)
VOICE_MAX_HOOKS = whole_number("VOICE_MAX_HOOKS", 100, minimum=0, maximum=10_000)
# The simulated callee's keys: what it presses at each gather, comma-separated, in turn (the
# last again once they run out); "" presses nothing, so the gather times out.
SIMULATED_DIGITS = text("SIMULATED_DIGITS", "1")
must(
    re.fullmatch(r"[0-9*#]*(,[0-9*#]*)*", SIMULATED_DIGITS),
    "SIMULATED_DIGITS must be keys of a keypad (0-9, * and #), one group per gather, "
    "separated by commas",
)
