from django.conf import settings


def client_ip(request) -> str:
    """The client's address, trusting exactly TRUSTED_PROXY_COUNT proxies.

    Each trusted proxy appends the address it saw to X-Forwarded-For, so the client is the
    entry that many places from the right. Entries further left were written by the client
    and are ignored: a forged header cannot change who is counted.
    """
    peer = request.META.get("REMOTE_ADDR") or "unknown"
    hops = settings.TRUSTED_PROXY_COUNT
    if hops <= 0:
        return peer
    forwarded = [p.strip() for p in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    forwarded = [p for p in forwarded if p]
    if len(forwarded) < hops:
        return peer
    return forwarded[-hops]
