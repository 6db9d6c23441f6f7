"""Who answered an outbound call, in Relay's words and in Twilio's (issue 56).

Relay's machine detection (telephony.machine_detection) says `human`, `machine`, `fax` or
`unknown`: the `answeredBy` of the call's frames, its hooks and webhooks. Twilio's
`AnsweredBy` says more about a machine: `machine_start` when it stopped at the greeting
(Twilio's MachineDetection=Enable, Relay's `detect`), and `machine_end_beep`,
`machine_end_silence` or `machine_end_other` when it waited for the greeting's end
(DetectMessageEnd, Relay's `leave_message`). A voice hook of a call with detection gets both:
`answeredBy`, and `AnsweredBy` in Twilio's words, so that an app that came from Twilio reads
the name it knows; `answered_by_of` reads either back as Relay's.
"""

from __future__ import annotations

ANSWERED_BY = ("human", "machine", "fax", "unknown")

# How a message left on a machine was timed (telephony.machine_detection's speak_reason)
# -> Twilio's name for a machine whose greeting's end was waited for.
_MACHINE_END = {
    "beep": "machine_end_beep",
    "silence": "machine_end_silence",
    "cap": "machine_end_other",
}

# Every AnsweredBy Twilio sends -> Relay's answeredBy.
FROM_TWILIO = {
    "human": "human",
    "machine_start": "machine",
    "machine_end_beep": "machine",
    "machine_end_silence": "machine",
    "machine_end_other": "machine",
    "fax": "fax",
    "unknown": "unknown",
}


def twilio_answered_by(answered_by: str, *, message_end: str = "") -> str:
    """Twilio's AnsweredBy for Relay's `answered_by`: a machine is `machine_start`, or, when
    the greeting's end was waited for (`message_end`: beep, silence or cap),
    `machine_end_beep`, `machine_end_silence` or `machine_end_other`."""
    if answered_by != "machine":
        return answered_by if answered_by in ANSWERED_BY else "unknown"
    if not message_end:
        return "machine_start"
    return _MACHINE_END.get(message_end, "machine_end_other")


def answered_by_of(name: str) -> str:
    """Relay's answeredBy for a name of either vocabulary (`machine_end_beep` -> machine);
    a name of neither is `unknown`."""
    return FROM_TWILIO.get(name, "unknown")
