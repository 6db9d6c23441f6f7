"""Digest authentication of requests (RFC 2617 / RFC 8760 with MD5, qop=auth), as a trunk
that answers 401 or 407 asks for it."""

from __future__ import annotations

import hashlib
import secrets

from telephony.sip.message import split_commas


def _challenge_params(header: str) -> dict[str, str]:
    scheme, _, rest = header.strip().partition(" ")
    out = {"scheme": scheme.lower()}
    for item in split_commas(rest):
        name, _, value = item.partition("=")
        out[name.strip().lower()] = value.strip().strip('"')
    return out


def _md5(text: str) -> str:
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


def authorization(
    *,
    challenge: str,
    method: str,
    uri: str,
    username: str,
    password: str,
    nc: int = 1,
    cnonce: str | None = None,
) -> str | None:
    """The Authorization (or Proxy-Authorization) value answering `challenge`; None when the
    challenge is not a Digest one this agent can answer (another algorithm or qop)."""
    params = _challenge_params(challenge)
    algorithm = params.get("algorithm", "MD5").upper()
    if params["scheme"] != "digest" or algorithm != "MD5":
        return None
    realm, nonce = params.get("realm", ""), params.get("nonce", "")
    ha1 = _md5(f"{username}:{realm}:{password}")
    ha2 = _md5(f"{method}:{uri}")
    qops = [q.strip() for q in params.get("qop", "").split(",") if q.strip()]
    fields = [
        f'username="{username}"',
        f'realm="{realm}"',
        f'nonce="{nonce}"',
        f'uri="{uri}"',
        "algorithm=MD5",
    ]
    if "auth" in qops:
        cnonce, count = cnonce or secrets.token_hex(8), f"{nc:08x}"
        response = _md5(f"{ha1}:{nonce}:{count}:{cnonce}:auth:{ha2}")
        fields += [f'response="{response}"', "qop=auth", f"nc={count}", f'cnonce="{cnonce}"']
    elif qops:
        return None  # auth-int only
    else:
        fields.append(f'response="{_md5(f"{ha1}:{nonce}:{ha2}")}"')
    if "opaque" in params:
        fields.append(f'opaque="{params["opaque"]}"')
    return "Digest " + ", ".join(fields)
