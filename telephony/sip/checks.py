"""What a request earns before the user agent looks at what it asks: RFC 3261 §8.2, in its
order (§8.2: "the UAS should process requests in the order of the steps in this section").

Pure, like the parser: a Message in, a Refusal (or None) out, and the user agent sends it.
A response is never answered; `response_acceptable` says whether the UA should read it.
"""

from __future__ import annotations

from typing import NamedTuple

from telephony.sip.message import (
    NOT_GMT,
    SIP_VERSION,
    Message,
    new_tag,
    response_to,
    split_commas,
)

# RFC 3261's methods and those of the extensions in common use: the ones a UAS "recognizes"
# (§8.2.1), answered 405 when it does not take them; any other method is answered 501.
KNOWN_METHODS = frozenset(
    {
        "INVITE",
        "ACK",
        "CANCEL",
        "BYE",
        "OPTIONS",
        "REGISTER",
        "PRACK",  # RFC 3262
        "SUBSCRIBE",  # RFC 6665
        "NOTIFY",
        "PUBLISH",  # RFC 3903
        "INFO",  # RFC 6086
        "REFER",  # RFC 3515
        "MESSAGE",  # RFC 3428
        "UPDATE",  # RFC 3311
    }
)
URI_SCHEMES = frozenset({"sip", "sips", "tel"})  # what telephony/inbound.py reads a number from
OPTION_TAGS: frozenset[str] = frozenset()  # no extension is supported (§8.2.2.3)
BODY_TYPE = "application/sdp"  # the only body the agent reads, an INVITE's offer


class Refusal(NamedTuple):
    """The answer to a request that goes no further: status 0 means none at all."""

    status: int
    reason: str
    headers: tuple[tuple[str, str], ...] = ()


DROP = Refusal(0, "")


def check_request(request: Message, *, allow: str) -> Refusal | None:
    """The refusal `request` earns, or None when it may go on to the UA. `allow` is the
    UA's Allow header (the methods it takes). Never raises for a parsed message."""
    if request.method == "ACK":
        # §17.1.1.3 and §17.2.1: an ACK has no response. A malformed one acknowledges nothing.
        return DROP if request.defects or request.version != SIP_VERSION else None
    if request.version != SIP_VERSION:
        # §21.5.6 505 Version Not Supported (RFC 4475 3.1.2.16).
        return Refusal(505, "Version Not Supported")
    if request.defects:
        # §21.4.1 400: "The request could not be understood due to malformed syntax. The
        # Reason-Phrase SHOULD identify the syntax problem in more detail".
        return Refusal(400, f"Bad Request ({request.defects[0]})")
    if request.body and request.get("Content-Type") is None:
        # §20.15: "The Content-Type header field MUST be present if the body is not empty."
        return Refusal(400, "Bad Request (a body without Content-Type)")

    # §8.2.1 Method Inspection: "If the UAS recognizes but does not support the method of a
    # request, it MUST generate a 405 (Method Not Allowed) response. [...] The UAS MUST also
    # add an Allow header field". One it does not recognize is 501 (§21.5.2).
    methods = {method.strip() for method in allow.split(",")}
    if request.method not in methods:
        if request.method in KNOWN_METHODS:
            return Refusal(405, "Method Not Allowed", (("Allow", allow),))
        return Refusal(501, "Not Implemented", (("Allow", allow),))
    # §8.1.1.5: the CSeq method "MUST match that of the request" (RFC 4475 3.1.2.17). After
    # the method, so that an unknown method is 501 whatever its CSeq says (3.1.2.18).
    if request.cseq[1] != request.method:
        return Refusal(400, "Bad Request (CSeq method does not match)")

    # §8.2.2.1: "If the Request-URI uses a scheme not supported by the UAS, it SHOULD reject
    # the request with a 416 (Unsupported URI Scheme) response."
    if request.uri.partition(":")[0].lower() not in URI_SCHEMES:
        return Refusal(416, "Unsupported URI Scheme")
    # §8.2.2.3: "If a UAS does not understand an option-tag listed in a Require header field,
    # it MUST respond by generating a response with status code 420 (Bad Extension). The UAS
    # MUST add an Unsupported header field, and list in it those options it does not
    # understand". Proxy-Require is a proxy's business, not ours. A CANCEL carries none
    # (§9.1), and refusing one for it would leave its INVITE ringing.
    if request.method != "CANCEL":
        unknown = dict.fromkeys(
            tag
            for value in request.get_all("Require")
            for tag in split_commas(value)
            if tag.lower() not in OPTION_TAGS
        )
        if unknown:
            return Refusal(420, "Bad Extension", (("Unsupported", ", ".join(unknown)),))

    # §8.2.3 Content Processing, for the one body the agent reads.
    if request.method == "INVITE":
        return _invite_content(request)
    return None


def _invite_content(request: Message) -> Refusal | None:
    if request.body:
        media_type = (request.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        # §8.2.3: "If a UAS does not understand the body type [...] it MUST reject the
        # request with a 415 (Unsupported Media Type) response. The response MUST contain
        # an Accept header field listing the types of all bodies it understands".
        if media_type != BODY_TYPE:
            return Refusal(415, "Unsupported Media Type", (("Accept", BODY_TYPE),))
        # §8.2.3: likewise a Content-Encoding it does not understand, with Accept-Encoding.
        encodings = [
            coding.lower()
            for value in request.get_all("Content-Encoding")
            for coding in split_commas(value)
        ]
        if any(coding != "identity" for coding in encodings):
            return Refusal(415, "Unsupported Media Type", (("Accept-Encoding", "identity"),))
    # §20.1: the types acceptable in the response; our answer carries SDP, so one that
    # may not is 406 (RFC 4475 3.3.15). Without Accept, application/sdp is assumed.
    accepts = [
        part.split(";", 1)[0].strip().lower()
        for value in request.get_all("Accept")
        for part in split_commas(value)
    ]
    if request.get("Accept") is not None and not {BODY_TYPE, "application/*", "*/*"} & set(accepts):
        return Refusal(406, "Not Acceptable")
    return None


def refusal_response(request: Message, refusal: Refusal) -> Message:
    """The response carrying `refusal`, with a To tag of its own (§8.2.6.2)."""
    response = response_to(request, refusal.status, refusal.reason, to_tag=new_tag())
    for name, value in refusal.headers:
        response.set(name, value)
    return response


def response_acceptable(response: Message) -> bool:
    """Whether a response may be read at all. A malformed one is dropped, never answered
    (RFC 4475 3.1.2.5, 3.1.2.19), but for a Date, which a UAC never reads (3.1.2.12: reject
    it only "if the contents of the Date header field were actually important");
    §8.1.3.3: "If more than one Via header field value is present in a response, the UAC
    SHOULD discard the message" (RFC 4475 3.3.10)."""
    defects = [defect for defect in response.defects if defect != NOT_GMT]
    return not defects and len(response.get_all("Via")) == 1
