"""A script being run on one call: the verbs left, the limits, and what happens after a verb.

Who runs the verbs (the SIP agent on a real call, the simulated provider on none) asks
`Program.next()` for the next verb, performs it, and hands its result to `Program.finished()`,
which reports it, follows gather's branches and calls the verb's actionHook. The rest of the
script is replaced by a branch or a hook's answer; a redirect is a hook whose answer is the
script. Whatever fails in a hook is reported and the script goes on.

Limits (settings, each refused with a `limit` event and the call hung up): VOICE_MAX_STEPS
verbs run per call, VOICE_MAX_REDIRECTS redirects, VOICE_MAX_HOOKS requests to hooks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings

from voiceapps.hooks import HookAnswer

Event = dict  # {"event": "gathered", ...}: reported on the call (call_status, webhooks)
HookCaller = Callable[[str, dict], HookAnswer]  # (url, payload) -> answer


class LimitReached(Exception):
    """A limit of the call's program was reached: the call is hung up, with this event."""

    def __init__(self, limit: str, maximum: int) -> None:
        self.event = {
            "event": "limit",
            "limit": limit,
            "detail": f"more than {maximum} {LIMIT_WORDS[limit]}: the call was hung up",
        }
        super().__init__(self.event["detail"])


LIMIT_WORDS = {"steps": "verbs run", "redirects": "redirects", "hooks": "hook requests"}


@dataclass
class Program:
    """`script` (a checked one, voiceapps.verbs) run on the call `identity` describes (its
    callId, from, to, direction: the body of every hook request besides the result)."""

    script: list[dict]
    identity: dict
    call_hook: HookCaller
    verbs: list[dict] = field(init=False)
    steps: int = 0
    redirects: int = 0
    hooks: int = 0

    def __post_init__(self) -> None:
        self.verbs = list(self.script)

    def next(self) -> tuple[str, dict] | None:
        """The next verb, as (name, body), or None when the script has ended. LimitReached
        past VOICE_MAX_STEPS."""
        if not self.verbs:
            return None
        self.steps += 1
        if self.steps > settings.VOICE_MAX_STEPS:
            raise LimitReached("steps", settings.VOICE_MAX_STEPS)
        ((name, body),) = self.verbs.pop(0).items()
        return name, body

    def replace(self, script: list[dict]) -> None:
        self.verbs = list(script)

    def redirect(self, url: str) -> list[Event]:
        """Run a `redirect`: its answer is the rest of the script (a failure ends nothing:
        the script goes on after the redirect)."""
        self.redirects += 1
        if self.redirects > settings.VOICE_MAX_REDIRECTS:
            raise LimitReached("redirects", settings.VOICE_MAX_REDIRECTS)
        return self._hook(url, "redirect", {})

    def finished(self, name: str, body: dict, result: dict, *, report: bool = True) -> list[Event]:
        """After verb `name` ran with `result` (gather: digits and reason; record: its
        recordingId and duration; dial: dialStatus, answeredBy, duration): the events it
        reports (its own `reported` one first, unless `report` is False: its caller told it
        already), with the rest of the script replaced by a branch or the hook's answer."""
        events = [reported(name, result)] if report and name in REPORTS else []
        if name == "gather" and "branches" in body:
            branches = body["branches"]
            branch = branches.get(result.get("digits") or "", branches.get("default"))
            if branch is not None:
                self.replace(branch)
        if body.get("actionHook"):
            events += self._hook(body["actionHook"], name, result)
        return events

    def _hook(self, url: str, verb: str, result: dict) -> list[Event]:
        self.hooks += 1
        if self.hooks > settings.VOICE_MAX_HOOKS:
            raise LimitReached("hooks", settings.VOICE_MAX_HOOKS)
        body = {**self.identity, "verb": verb, "result": result}
        if "speech" in result:  # and in Twilio's names, for an app that came from Twilio
            body.update(SpeechResult=result["speech"], Confidence=result["confidence"])
        answer = self.call_hook(url, body)
        if answer.failure:
            return [{"event": "hook_failed", "verb": verb, "detail": answer.failure}]
        if answer.script is not None:
            self.replace(answer.script)
        return []


REPORTS = {"gather": "gathered", "record": "recorded", "dial": "dialed"}


def reported(name: str, result: dict) -> Event:
    """The event verb `name` (one of REPORTS) reports with its result: also reported alone
    when the call ended during the verb, with no hook to ask after it."""
    return {"event": REPORTS[name], "verb": name, "result": result}


def gather_result(digits: str, *, body: dict, timed_out: bool) -> dict:
    """gather's result for the keys pressed: what ended it (the finishing key, which is not
    part of the digits; enough digits; or the timeout). A speech gather's holds `speech` and
    `confidence` too, none here: keys won, or nothing was said."""
    finish = body.get("finishOnKey", "")
    if finish and digits.endswith(finish):
        result = {"digits": digits[: -len(finish)], "reason": "finishOnKey"}
    elif not timed_out and body.get("numDigits") and len(digits) >= body["numDigits"]:
        result = {"digits": digits[: body["numDigits"]], "reason": "numDigits"}
    else:
        result = {"digits": digits, "reason": "timeout"}
    if "speech" in body.get("input", ()):
        result.update(speech="", confidence=0.0)
    return result
