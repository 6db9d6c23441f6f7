"""The arithmetic CAPTCHA: issue a challenge, verify an answer, consume a token."""

from __future__ import annotations

import secrets
import uuid
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from captcha.models import CaptchaChallenge, CaptchaToken
from core import ratelimit
from core.errors import ApplicationError, ErrorCode

ADDEND_MIN, ADDEND_MAX = 1, 50
CHALLENGE_TTL = timedelta(minutes=5)
TOKEN_TTL = timedelta(minutes=10)
WRONG_ANSWER_TEXT = "答案错误"  # the interface document's error text: "wrong answer"


class CaptchaWrongAnswer(ApplicationError):
    code, message = ErrorCode.CAPTCHA_WRONG_ANSWER, WRONG_ANSWER_TEXT


class CaptchaInvalid(ApplicationError):
    code = ErrorCode.CAPTCHA_INVALID
    message = "This CAPTCHA is unknown, already used or expired. Ask for a new one."


def captcha_issue_rate_limit(*, ip: str) -> None:
    """Count one challenge issued to client `ip`; 429 past RATE_LIMIT_CAPTCHA_PER_IP."""
    ratelimit.hit("captcha-issue:ip", ip, settings.RATE_LIMIT_CAPTCHA_PER_IP)


def captcha_verify_rate_limit(*, ip: str) -> None:
    """Count one answer from client `ip`; 429 past RATE_LIMIT_CAPTCHA_VERIFY_PER_IP."""
    ratelimit.hit("captcha-verify:ip", ip, settings.RATE_LIMIT_CAPTCHA_VERIFY_PER_IP)


def _addend() -> int:
    return ADDEND_MIN + secrets.randbelow(ADDEND_MAX - ADDEND_MIN + 1)


def captcha_challenge_issue() -> CaptchaChallenge:
    """Store and return a new challenge with addends in 1..50, open for 5 minutes."""
    now = timezone.now()
    return CaptchaChallenge.objects.create(
        a=_addend(), b=_addend(), created_at=now, expires_at=now + CHALLENGE_TTL
    )


def _spend_challenge(*, a: int, b: int, challenge_id: uuid.UUID | None) -> CaptchaChallenge:
    """Mark one open challenge used and return it; CaptchaInvalid when there is none.

    With challenge_id, exactly that challenge is spent (even if a and b do not match it, so a
    client cannot probe); without, the oldest open challenge with the pair (a, b). The spend is
    a conditional UPDATE, so two verifies can never both spend the same challenge.
    """
    now = timezone.now()
    open_challenges = CaptchaChallenge.objects.filter(used_at__isnull=True, expires_at__gt=now)
    for _attempt in range(5):
        if challenge_id is not None:
            candidate = open_challenges.filter(pk=challenge_id).first()
        else:
            candidate = open_challenges.filter(a=a, b=b).order_by("created_at").first()
        if candidate is None:
            raise CaptchaInvalid()
        if open_challenges.filter(pk=candidate.pk).update(used_at=now):
            return candidate
        if challenge_id is not None:
            raise CaptchaInvalid()  # someone else spent it first
    raise CaptchaInvalid()


def captcha_verify(
    *, a: int, b: int, answer: int, challenge_id: uuid.UUID | None = None
) -> CaptchaToken:
    """Check an answer to an issued challenge and return a single-use token (10 minutes).

    Raises CaptchaInvalid for a challenge that was never issued, is spent or expired, and
    CaptchaWrongAnswer for a wrong sum. Either way the challenge is spent.
    """
    # The spend commits on its own (autocommit) so it stands whatever happens next.
    challenge = _spend_challenge(a=a, b=b, challenge_id=challenge_id)
    if (challenge.a, challenge.b) != (a, b):
        raise CaptchaInvalid()
    if answer != challenge.a + challenge.b:
        raise CaptchaWrongAnswer()
    now = timezone.now()
    return CaptchaToken.objects.create(created_at=now, expires_at=now + TOKEN_TTL)


def captcha_token_consume(*, token: str | uuid.UUID) -> None:
    """Spend a token inside the caller's transaction; CaptchaInvalid if it cannot be spent.

    A conditional UPDATE decides: of any number of concurrent consumers exactly one sees a
    row updated. If the caller's transaction rolls back, the token is unspent again.
    """
    try:
        token_id = uuid.UUID(str(token))
    except ValueError as exc:
        raise CaptchaInvalid() from exc
    now = timezone.now()
    spent = CaptchaToken.objects.filter(
        pk=token_id, used_at__isnull=True, expires_at__gt=now
    ).update(used_at=now)
    if not spent:
        raise CaptchaInvalid()


def captcha_purge_expired(*, now=None) -> tuple[int, int]:
    """Delete expired challenges and tokens. Returns (challenges, tokens) deleted."""
    now = now or timezone.now()
    challenges, _ = CaptchaChallenge.objects.filter(expires_at__lte=now).delete()
    tokens, _ = CaptchaToken.objects.filter(expires_at__lte=now).delete()
    return challenges, tokens
