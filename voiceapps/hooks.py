"""The hook client: a call's POST to an actionHook, a redirect or a number's voice URL, and
its answer read as a script.

The request is core.signedhttp's, as webhooks are sent: signed with the call's owner's webhook
secret (Standard Webhooks headers), to an address checked against the SSRF guard. The answer:
- 204, an empty body or `[]`: go on with the script (`script` None);
- JSON (a list of verbs) or TwiML (`application/xml`, `text/xml`): the script that replaces
  the rest of the call's, checked as any script is (voiceapps.verbs). TwiML's relative URLs
  are resolved against the URL requested (voiceapps.twiml): no HTTP redirect is followed, so
  that is the document's URL. A JSON script's URLs are absolute;
- anything else is a failure, with its reason: an error status, no answer within
  VOICE_HOOK_TIMEOUT seconds (the whole request, not each read), an answer over 64 KiB, an
  invalid script, or no webhook secret to sign with. The call goes on with its script.

The request's body never reaches a log: it may hold the digits a caller pressed.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

import httpx
from django.conf import settings
from rest_framework import serializers

from core import parsing
from core.errors import InvalidRequest, flatten_field_errors
from core.signedhttp import Answer, fetch, signed_post
from voiceapps.twiml import TwimlInvalid, twiml_to_script
from voiceapps.verbs import PLAY_MAX_BYTES, script_check

MAX_ANSWER_BYTES = 64 * 1024
USER_AGENT = "Relay-Voice/1"
XML_TYPES = ("application/xml", "text/xml")
# The requests in flight, each bounded by its own deadline: a hook that hangs is left to time
# out here while the call it belonged to goes on.
_requests = ThreadPoolExecutor(max_workers=32, thread_name_prefix="voice-hook")

# The owner's signing secret (their webhook's `whsec_`), or "" when they have none. Read by a
# function the webhooks app registers (AppConfig.ready), since webhooks sits above.
_secret_of: Callable[[object], str] = lambda user_id: ""  # noqa: E731


def signing_secret_register(secret_of: Callable[[object], str]) -> None:
    global _secret_of
    _secret_of = secret_of


@dataclass(frozen=True)
class HookAnswer:
    """A hook's answer: the script that replaces the rest (None: go on), or why it failed."""

    script: list | None = None
    failure: str = ""


def hook_request(*, url: str, payload: dict, user_id) -> HookAnswer:
    """POST `payload` to `url` for the call of `user_id`, and read the answer as a script."""
    secret = _secret_of(user_id)
    if not secret:
        return HookAnswer(failure="no webhook secret to sign with: set a webhook first")
    body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    timeout = settings.VOICE_HOOK_TIMEOUT
    request = _requests.submit(
        signed_post,
        url=url,
        body=body,
        secret=secret,
        message_id="msg_" + secrets.token_hex(12),
        # The deadline that rules is the one below, on the whole request. httpx's own (on each
        # connect and read) is a second longer, only so the thread ends: were they equal, a
        # slow hook's failure would read either way, depending on which clock fired first.
        timeout=httpx.Timeout(timeout + 1.0),
        max_bytes=MAX_ANSWER_BYTES,
        allow_private=settings.WEBHOOK_ALLOW_PRIVATE,
        user_agent=USER_AGENT,
        keep_body=True,
    )
    try:
        answer = request.result(timeout=timeout)
    except FutureTimeout:
        return HookAnswer(failure=f"no answer within {timeout:g} s")
    return answer_read(answer, base_url=url)


class FetchFailed(Exception):
    """A `play`'s file could not be had; the message says why."""


PLAY_FETCH_TIMEOUT = 10.0  # seconds for a WAV to play: a file, not a hook's quick answer


def play_fetch(url: str) -> bytes:
    """The WAV a `play` names, through the SSRF guard (core.signedhttp), at most
    PLAY_MAX_BYTES; FetchFailed otherwise."""
    answer = fetch(
        url=url,
        timeout=httpx.Timeout(PLAY_FETCH_TIMEOUT),
        max_bytes=PLAY_MAX_BYTES,
        allow_private=settings.WEBHOOK_ALLOW_PRIVATE,
        user_agent=USER_AGENT,
    )
    if answer.status is None:
        raise FetchFailed(answer.error or "no answer")
    if not 200 <= answer.status < 300:
        raise FetchFailed(f"answered {answer.status}")
    if answer.too_large:
        raise FetchFailed(f"larger than {PLAY_MAX_BYTES // (1024 * 1024)} MB")
    return answer.body


def answer_read(answer: Answer, *, base_url: str) -> HookAnswer:
    """A hook's HTTP answer, to a request to `base_url`, as a HookAnswer."""
    if answer.status is None:
        return HookAnswer(failure=answer.error or "no answer")
    if not 200 <= answer.status < 300:
        return HookAnswer(failure=f"answered {answer.status}")
    if answer.too_large:
        return HookAnswer(failure=f"answered more than {MAX_ANSWER_BYTES // 1024} KiB")
    if answer.status == 204 or not answer.body.strip():
        return HookAnswer()
    kind = answer.content_type.split(";")[0].strip().lower()
    try:
        if kind in XML_TYPES:
            script = twiml_to_script(answer.body, base_url=base_url)
        else:
            script = parsing.loads(answer.body, what="answer")
            if script == []:
                return HookAnswer()
        return HookAnswer(script=script_check(script))
    except TwimlInvalid as invalid:
        return HookAnswer(failure=f"answered invalid TwiML: {invalid}")
    except serializers.ValidationError as invalid:
        name, messages = next(iter(flatten_field_errors({"script": invalid.detail}).items()))
        return HookAnswer(failure=f"answered an invalid script: {name}: {messages[0]}"[:200])
    except InvalidRequest as invalid:
        return HookAnswer(failure=f"answered no script: {invalid}"[:200])
