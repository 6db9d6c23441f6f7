"""TwiML, the XML of Twilio's voice apps, as Relay's verbs: a hook may answer it
(`application/xml` or `text/xml`), so a Twilio app moves to Relay by changing its URL.

The subset translated is the verbs Relay has: Say, Play, Gather (with Say or Play inside;
its `input`, `hints`, `speechTimeout` and `language` for speech),
Record, Dial (a number as text, or Number elements), Pause, Hangup and Redirect. Anything
else is refused as an invalid script, as is XML that is not well-formed. Parsed with
defusedxml: no entity expansion, no external entities, no DTD retrieval.

Every URL a document names (a Gather's, Record's or Dial's `action`, a Play's or a
Redirect's body) may be relative, as in Twilio's own examples (`<Gather action="/next">`): it
is resolved against the URL the document was requested at, by RFC 3986 (urljoin), so the
script holds absolute URLs only and is checked as any script is (voiceapps.verbs: http or
https with a host, a public address, at most 2,000 characters). What cannot be resolved is
left as written, for that check to refuse.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urljoin
from xml.etree.ElementTree import Element

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import ParseError, fromstring

from voiceapps.languages import LANGUAGES

TRUE = {"true", "1", "yes"}


class TwimlInvalid(ValueError):
    """Not TwiML this translation reads; the message says where."""


Resolve = Callable[[str | None], str | None]  # a URL as written -> as the script holds it


def url_resolver(base_url: str) -> Resolve:
    """How the URLs of the document requested at `base_url` are read: each resolved against
    it (RFC 3986: "/next", "next", "../x", "?a=b", "//host/x"), an absolute one kept. An
    absent or empty one stays so (refused as a blank URL is, not taken for the document's
    own: a Redirect to itself would loop), and so does one urljoin cannot read (a broken
    IPv6 host): the script's check names it. Without a base, a URL is kept as written."""

    def resolve(value: str | None) -> str | None:
        if value is None or not value.strip() or not base_url:
            return value
        try:
            return urljoin(base_url, value.strip())
        except ValueError:
            return value

    return resolve


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


def _play(element: Element, url: Resolve) -> dict:
    return _some(url=url((element.text or "").strip()), loop=_int(element, "loop"))


def _some(**fields) -> dict:
    return {key: value for key, value in fields.items() if value is not None}


def _gather(element: Element, url: Resolve) -> dict:
    body = _some(
        numDigits=_int(element, "numDigits"),
        finishOnKey=element.get("finishOnKey"),
        timeout=_int(element, "timeout"),
        actionHook=url(element.get("action")),
        input=_words(element.get("input")),
        hints=_hints(element.get("hints")),
        speechTimeout=_speech_timeout(element.get("speechTimeout")),
        language=_speech_language(element.get("language")),
    )
    for child in element:
        if child.tag == "Say":
            body["say"] = _say(child)
        elif child.tag == "Play":
            body["play"] = _play(child, url)
        elif child.tag != "Pause":  # Twilio allows a Pause inside; Relay's prompt has none
            raise TwimlInvalid(f"<Gather> cannot hold <{child.tag}>.")
    return body


def _words(value: str | None) -> list[str] | None:
    """`input="speech dtmf"` (Twilio separates by spaces) as ["speech", "dtmf"]."""
    return None if value is None else value.split()


def _speech_language(value: str | None) -> str | None:
    """Twilio's `en-US` as Relay's `en-us`, and a region Relay has no voice for (`en-AU`)
    as its language (`en`)."""
    if not value:
        return None
    value = value.lower()
    return value if value in LANGUAGES else value.split("-")[0]


def _hints(value: str | None) -> list[str] | None:
    """Twilio's comma-separated `hints` as the list Relay's gather takes."""
    if value is None:
        return None
    return [hint.strip() for hint in value.split(",") if hint.strip()]


def _speech_timeout(value: str | None) -> int | str | None:
    if value is None or value.strip() == "auto":
        return None if value is None else "auto"
    try:
        return int(value)
    except ValueError:
        return value  # left for the script's validation to name


def _record(element: Element, url: Resolve) -> dict:
    beep = element.get("playBeep")
    return _some(
        maxSeconds=_int(element, "maxLength"),
        finishOnKey=element.get("finishOnKey"),
        beep=None if beep is None else beep.lower() in TRUE,
        actionHook=url(element.get("action")),
    )


def _dial(element: Element, url: Resolve) -> dict:
    targets = [(child.text or "").strip() for child in element if child.tag == "Number"]
    if (element.text or "").strip():
        targets.insert(0, element.text.strip())
    return _some(
        targets=targets, timeout=_int(element, "timeout"), actionHook=url(element.get("action"))
    )


# Each TwiML verb: Relay's verb, and its body from the element and the document's resolver.
VERBS: dict[str, tuple[str, Callable[[Element, Resolve], dict]]] = {
    "Say": ("say", lambda e, url: _say(e)),
    "Play": ("play", _play),
    "Gather": ("gather", _gather),
    "Record": ("record", _record),
    "Dial": ("dial", _dial),
    "Pause": ("pause", lambda e, url: _some(seconds=_int(e, "length"))),
    "Hangup": ("hangup", lambda e, url: {}),
    "Redirect": ("redirect", lambda e, url: {"url": url((e.text or "").strip())}),
}


def twiml_to_script(text: bytes | str, *, base_url: str = "") -> list[dict]:
    """The verbs of a TwiML document (`<Response>...</Response>`) requested at `base_url`,
    its URLs resolved against it (url_resolver), not yet validated: the caller checks them as
    any script (voiceapps.verbs.script_check)."""
    url = url_resolver(base_url)
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
        script.append({name: translate(element, url)})
    return script
