import logging
import time

logger = logging.getLogger("relay.access")


class AccessLogMiddleware:
    """One line per request: method, path (never the query string), status, ms, user id.

    The query string is left out because the WebSocket URL carries a JWT there, and headers
    are never logged, so no token, key or password can reach the log through this line.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        elapsed_ms = (time.perf_counter() - started) * 1000
        user = getattr(request, "user", None)
        user_id = user.pk if user is not None and user.is_authenticated else "-"
        logger.info(
            "%s %s %s %.1fms user=%s",
            request.method,
            request.path,
            response.status_code,
            elapsed_ms,
            user_id,
        )
        return response
