"""A browser's sign-in is a LoginSession like any other: the Django session holds only the
LoginSession's id, and every console request checks that session is still active, so ending
it from the API (or the dashboard) signs the browser out on its next request."""

from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import ValidationError
from django.shortcuts import render
from django.urls import reverse

from accounts import selectors, services
from accounts.models import LoginSession
from accounts.twofactor import PendingLogin
from core.errors import ApplicationError, ErrorCode, NotFound

SESSION_KEY = "console_login_session"
# A login whose password was right and whose second factor's code is still to come: the
# user's id, until when the code page takes it, and where to go next. Never the password.
PENDING_KEY = "console_login_pending"
PENDING_SECONDS = 300
PENDING_LOGIN = PendingLogin(PENDING_KEY, PENDING_SECONDS, allowed=lambda user: user.is_active)


def sign_in(request, session: LoginSession) -> None:
    """Bind the browser to `session`, under a new session key (no session fixation). A
    session it was bound to before is ended: nothing could use it any more."""
    previous = current_session(request)
    if previous is not None and previous.pk != session.pk:
        services.session_end(session=previous)
    request.session.cycle_key()
    request.session[SESSION_KEY] = str(session.pk)


def current_session(request) -> LoginSession | None:
    """The active LoginSession this browser is bound to (last_seen moved), or None."""
    session_id = request.session.get(SESSION_KEY)
    if not session_id:
        return None
    try:
        session = selectors.session_with_user(session_id=session_id)
    except (ValidationError, ValueError, TypeError):
        session = None
    if session is None or not session.active or not session.user.is_active:
        return None
    services.session_touch(session=session)
    return session


def sign_out(request) -> None:
    """End the bound LoginSession (its JWTs and sockets with it) and forget the browser."""
    session = current_session(request)
    if session is not None:
        services.session_end(session=session)
    request.session.flush()


def _bound(request) -> bool:
    """Whether the browser is signed in; if so request.user and request.login_session are
    its user and LoginSession. A session ended elsewhere is forgotten here too."""
    session = current_session(request)
    if session is None:
        if SESSION_KEY in request.session:
            request.session.flush()
        return False
    request.user = session.user
    request.login_session = session
    return True


def signed_in(view):
    """A console page for a signed-in person: request.user and request.login_session are
    theirs; anyone else is sent to log in. A NotFound (an id that is unknown or another
    user's) is the console's 404 page."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not _bound(request):
            return redirect_to_login(request.get_full_path(), reverse("console:login"))
        try:
            return view(request, *args, **kwargs)
        except NotFound:
            return render(request, "console/not_found.html", status=404)

    return wrapper


def signed_in_json(view):
    """signed_in for what a page's script fetches: a signed-out browser gets the API's 401
    body (`not_authenticated`), on which the script stops, not a redirect to log in."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not _bound(request):
            return ApplicationError(
                "Sign in again.", code=ErrorCode.NOT_AUTHENTICATED
            ).as_response()
        return view(request, *args, **kwargs)

    return wrapper
