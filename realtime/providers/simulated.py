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

A call that asked for `machineDetection` is answered by a person (`answeredBy: human`, its
`detected` event reported as the call completes, its script's hooks told so).

A call with a script runs it when it completes, all at once (`run_script`), with a
deterministic callee: at each gather it presses the next group of SIMULATED_DIGITS (the last
again once they run out). Its hooks and redirects are requested for real. Each verb lasts:
say its words at 150 a minute, each loop; play 1 s a loop (the file is not fetched); pause its
seconds; gather its prompt, plus its timeout when the keys did not end it; record its
maxSeconds; dial the target's ending as for a call (0-6 answered, and talks 1 s).
"""

import math
import uuid
from dataclasses import replace

from django.conf import settings

from calls.states import CallState
from realtime.providers import QUOTA_REASON, Step, call_identity, quota_cut
from virtual_numbers.selectors import targets_dialable
from voiceapps.hooks import hook_request
from voiceapps.program import LimitReached, Program, gather_result

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
            sip_call_id=f"sim-{uuid.uuid4().hex[:16]}",
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
            if call.script is not None:  # its length is known once it has run
                return Step(status=CallState.IN_PROGRESS, wait=step)
            duration = spoken_seconds(call.message)
            return Step(
                status=CallState.IN_PROGRESS,
                wait=duration * settings.SIMULATED_TALK_SCALE,
                duration=duration,
                talk=duration,
            )
        if call.status == CallState.IN_PROGRESS and call.script is not None:
            return _detected(call, run_script(call))
        if call.status == CallState.IN_PROGRESS:
            if quota_cut(call, call.duration):
                return _detected(
                    call,
                    Step(status=CallState.COMPLETED, duration=call.talk_limit, reason=QUOTA_REASON),
                )
            return _detected(call, Step(status=CallState.COMPLETED, duration=call.duration))
        return None

    def hang_up(self, call) -> None:
        """Nothing was placed, so there is nothing to hang up."""


SIMULATED_ANSWER = "human"  # the simulated callee is a person
DETECTED = {"event": "detected", "answeredBy": SIMULATED_ANSWER, "detail": "the simulated callee"}


def _detected(call, step: Step) -> Step:
    """`step` (the call's last), with who answered it when the call asked for
    machineDetection: reported first, at in_progress, as the agent reports it."""
    if not call.machine_detection:
        return step
    reports = [DETECTED, *step.extra.get("reports", [])]
    return replace(step, extra={**step.extra, "reports": reports, "answered_as": SIMULATED_ANSWER})


def _identity(call) -> dict:
    identity = call_identity(call)
    if call.machine_detection:
        identity |= {"answeredBy": SIMULATED_ANSWER, "AnsweredBy": SIMULATED_ANSWER}
    return identity


def run_script(call) -> Step:
    """Run the call's script against the simulated callee: the step that ends the call, with
    what its verbs reported (`extra["reports"]`, recorded by the pipeline)."""
    program = Program(
        script=call.script,
        identity=_identity(call),
        call_hook=lambda url, payload: hook_request(
            url=url, payload=payload, user_id=call.owner_id
        ),
    )
    callee = _Callee(owner=call.owner)
    seconds, reports, reason = 0, [], ""
    limit = call.talk_limit if call.talk_limit is not None else settings.SIP_MAX_CALL_SECONDS
    try:
        while (verb := program.next()) is not None and seconds < limit:
            name, body = verb
            if name == "hangup":
                break
            if name == "redirect":
                reports += program.redirect(body["url"])
                continue
            lasted, result = callee.run(name, body)
            seconds += lasted
            if result is not None:
                reports += program.finished(name, body, result)
    except LimitReached as reached:
        reports.append(reached.event)
        reason = reached.event["detail"]
    if seconds >= limit and call.talk_limit is not None:
        return Step(
            status=CallState.COMPLETED,
            duration=call.talk_limit,
            reason=QUOTA_REASON,
            extra={"reports": reports},
        )
    return Step(
        status=CallState.COMPLETED,
        duration=max(1, math.ceil(seconds)),
        reason=reason,
        extra={"reports": reports},
    )


class _Callee:
    """The simulated callee: how long each verb lasts, and what it answers. `owner` is the
    call's: whom a dial rings on behalf of."""

    def __init__(self, *, owner) -> None:
        self.owner = owner
        self.keys = settings.SIMULATED_DIGITS.split(",")
        self.gathers = 0

    def run(self, name: str, body: dict) -> tuple[float, dict | None]:
        """(seconds the verb lasted, its result for Program.finished or None)."""
        if name == "say":
            return spoken_seconds(body["text"]) * body["loop"], None
        if name == "play":
            return body["loop"], None
        if name == "pause":
            return body["seconds"], None
        if name == "gather":
            return self._gather(body)
        if name == "record":
            return body["maxSeconds"], {"recordingId": None, "duration": body["maxSeconds"]}
        if name == "dial":
            return self._dial(body)
        return 0, None

    def _gather(self, body: dict) -> tuple[float, dict]:
        keys = self.keys[min(self.gathers, len(self.keys) - 1)]
        self.gathers += 1
        if "dtmf" not in body.get("input", ["dtmf"]):
            keys = ""  # a speech-only gather hears no keys, and the callee says nothing
        prompt = 0
        if "say" in body:
            prompt = spoken_seconds(body["say"]["text"]) * body["say"]["loop"]
        elif "play" in body:
            prompt = body["play"]["loop"]
        result = gather_result(keys, body=body, timed_out=False)
        if result["reason"] == "timeout":
            return prompt + body["timeout"], result
        return (1 if keys else prompt), result  # the first key interrupts the prompt

    def _dial(self, body: dict) -> tuple[float, dict]:
        """The first target the owner may ring now (a hook's answer was never checked at
        submit), answering or not by its last digit as a called number does."""
        allowed = targets_dialable(targets=body["targets"], owner=self.owner)
        if not allowed:
            return 0, {"dialStatus": "failed", "answeredBy": None, "duration": 0}
        target = allowed[0]
        ending = ENDINGS.get(target[-1])
        if ending is None:
            return 1, {"dialStatus": "completed", "answeredBy": target, "duration": 1}
        status = {CallState.BUSY: "busy", CallState.NO_ANSWER: "no_answer"}.get(ending, "failed")
        return 0, {"dialStatus": status, "answeredBy": None, "duration": 0}
