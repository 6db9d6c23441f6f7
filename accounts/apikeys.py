"""API keys: `vr_` + 40 URL-safe characters.

Looked up by SHA-256 digest (unique index), so a request costs one indexed read and the
database never holds a usable key; the key itself is kept Fernet-encrypted so the dashboard
can show it again.
"""

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from functools import cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

KEY_RANDOM_BYTES = 30  # 30 bytes -> exactly 40 URL-safe base64 characters


@dataclass(frozen=True)
class IssuedApiKey:
    plaintext: str
    digest: str
    ciphertext: str


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def digests_match(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


@cache
def _fernet() -> MultiFernet:
    keys = list(settings.API_KEY_ENCRYPTION_KEYS)
    if not keys:
        derived = hashlib.sha256(b"relay.api-key-encryption:" + settings.SECRET_KEY.encode())
        keys = [base64.urlsafe_b64encode(derived.digest()).decode()]
    return MultiFernet([Fernet(k) for k in keys])


def issue() -> IssuedApiKey:
    plaintext = settings.API_KEY_PREFIX + secrets.token_urlsafe(KEY_RANDOM_BYTES)
    return IssuedApiKey(
        plaintext=plaintext,
        digest=digest(plaintext),
        ciphertext=_fernet().encrypt(plaintext.encode()).decode(),
    )


def encrypt(plaintext: str) -> str:
    """`plaintext` (a secret Relay must be able to read again: an API key, a webhook secret)
    encrypted with the newest configured Fernet key."""
    return _fernet().encrypt(plaintext.encode()).decode()


def decrypt(ciphertext: str) -> str | None:
    """The key behind `ciphertext`, or None when no configured Fernet key can open it."""
    if not ciphertext:
        return None
    try:
        return _fernet().decrypt(ciphertext.encode()).decode()
    except InvalidToken:
        return None


def looks_like_key(value: str) -> bool:
    return value.startswith(settings.API_KEY_PREFIX) and len(value) <= 128
