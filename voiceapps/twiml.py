"""TwiML, the XML of Twilio's voice apps, as Relay's verbs: a hook may answer it
(`application/xml` or `text/xml`), so a Twilio app moves to Relay by changing its URL.

The subset translated is the verbs Relay has: Say, Play, Gather (with Say or Play inside),
Record, Dial (a number as text, or Number elements), Pause, Hangup and Redirect. Anything
else is refused as an invalid script, as is XML that is not well-formed. Parsed with
defusedxml: no entity expansion, no external entities, no DTD retrieval.
"""

from __future__ import annotations

from xml.etree.ElementTree import Element

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import ParseError, fromstring

TRUE = {"true", "1", "yes"}


class TwimlInvalid(ValueError):
    """Not TwiML this translation reads; the message says where."""


def _int(element: Element, attribute: str) -> int | str | None:
    value = element.get(attribute)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return value  # left for the script's validation to name


def _language(element: Element) -> str | None:
    value = element.get("language")
    return value.split("-")[0].lower() if value else None  # en-GB -> en


def _say(element: Element) -> dict:
    return _some(
        text=(element.text or "").strip(), language=_language(element), loop=_int(element, "loop")
    )


def _play(element: Element) -> dict:
    return _some(url=(element.text or "").strip(), loop=_int(element, "loop"))


def _some(**fields) -> dict:
    return {key: value for key, value in fields.items() if value is not None}


def _gather(element: Element) -> dict:
    body = _some(
        numDigits=_int(element, "numDigits"),
        finishOnKey=element.get("finishOnKey"),
        timeout=_int(element, "timeout"),
        actionHook=element.get("action"),
    )
    for child in element:
        if child.tag == "Say":
            body["say"] = _say(child)
        elif child.tag == "Play":
            body["play"] = _play(child)
        elif child.tag != "Pause":  # Twilio allows a Pause inside; Relay's prompt has none
            raise TwimlInvalid(f"<Gather> cannot hold <{child.tag}>.")
    return body


def _record(element: Element) -> dict:
    beep = element.get("playBeep")
    return _some(
        maxSeconds=_int(element, "maxLength"),
        finishOnKey=element.get("finishOnKey"),
        beep=None if beep is None else beep.lower() in TRUE,
        actionHook=element.get("action"),
    )


def _dial(element: Element) -> dict:
    targets = [(child.text or "").strip() for child in element if child.tag == "Number"]
    if (element.text or "").strip():
        targets.insert(0, element.text.strip())
    return _some(
        targets=targets, timeout=_int(element, "timeout"), actionHook=element.get("action")
    )


VERBS = {
    "Say": ("say", _say),
    "Play": ("play", _play),
    "Gather": ("gather", _gather),
    "Record": ("record", _record),
    "Dial": ("dial", _dial),
    "Pause": ("pause", lambda e: _some(seconds=_int(e, "length"))),
    "Hangup": ("hangup", lambda e: {}),
    "Redirect": ("redirect", lambda e: {"url": (e.text or "").strip()}),
}


def twiml_to_script(text: bytes | str) -> list[dict]:
    """The verbs of a TwiML document (`<Response>...</Response>`), not yet validated: the
    caller checks them as any script (voiceapps.verbs.script_check)."""
    try:
        root = fromstring(text)
    except (ParseError, DefusedXmlException, ValueError) as exc:
        raise TwimlInvalid(f"Not well-formed TwiML: {type(exc).__name__}.") from None
    if root.tag != "Response":
        raise TwimlInvalid("TwiML must be a <Response>.")
    script = []
    for element in root:
        if element.tag not in VERBS:
            raise TwimlInvalid(f"<{element.tag}> is not a verb Relay runs.")
        name, translate = VERBS[element.tag]
        script.append({name: translate(element)})
    return script
