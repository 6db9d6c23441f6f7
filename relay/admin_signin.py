"""The admin's sign-in (issue 53): the same service, limits and second factor as
`POST /api/auth/login` and the console's `/login`, and Django's session auth bound to the
LoginSession that service opens.

- The password step counts `accounts.services.auth_rate_limit` (per client IP and per
  address, the address normalised as the user manager normalises it) before anything else,
  so once either limit is reached every attempt, the right password too, gets the 429 page
  with `Retry-After` until the window ends. Then `user_login` checks the password (in the
  hashing slot RelayAdminSite.login takes) and, for a user with a second factor, answers
  OtpRequired: the code is asked on a page of the admin's own (`login/code/`), which keeps
  only the user's id, where to go next and a deadline in the server's session; never the
  password.
- A user who is not active staff gets Django's own refusal, the same as for a wrong password.
- With REQUIRE_STAFF_2FA on, staff without a confirmed factor get a page that says how to
  turn one on (the console's account page) and no admin.
- A sign-in binds the browser as `django.contrib.auth.login` does, and also to the
  LoginSession `user_login` opened (`SIGN_IN_KEY`, with whether a code was given). Every admin
  request checks that session is still active (RelayAdminSite.has_permission), so ending it
  (the dashboard, the admin's own "End all sessions", a password change) signs the admin out,
  and a session signed in any other way (before this existed) is not accepted.

No password or code reaches a log line: the lines here name the user's id only.
"""

from __future__ import annotations

import logging
from uuid import UUID

from django import forms
from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import REDIRECT_FIELD_NAME
from django.contrib.auth import login as auth_login
from django.contrib.auth import logout as auth_logout
from django.core.exceptions import ValidationError
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme

from accounts import selectors
from accounts import services as accounts
from accounts.models import User
from accounts.serializers import CredentialsInput, LoginCodeInput
from accounts.twofactor import OtpRequired, PendingLogin
from core.clientip import client_ip
from core.errors import ApplicationError, InvalidRequest, RateLimited
from core.fields import validated

logger = logging.getLogger(__name__)

# {"session": the LoginSession's id, "second_factor": whether a code was given at sign-in}
SIGN_IN_KEY = "relay_admin_sign_in"
# A password found right whose code is still to come: {"user", "until", "next"}.
PENDING_KEY = "relay_admin_login_pending"
PENDING_SECONDS = 300
PENDING_LOGIN = PendingLogin(PENDING_KEY, PENDING_SECONDS, allowed=lambda user: _is_staff(user))
# The backend django.contrib.auth.login records; user_login authenticates through it.
BACKEND = "django.contrib.auth.backends.ModelBackend"


class AdminLoginForm(AdminAuthenticationForm):
    """Django's admin login form for its fields, template and messages; the check itself is
    accounts.services.user_login's, not the form's authenticate()."""

    def clean(self):
        return self.cleaned_data

    def refuse(self) -> None:
        """Django's own "correct e-mail and password for a staff account" error: the same
        words for an unknown address, a wrong password and a user who is not staff."""
        self.add_error(
            None,
            ValidationError(
                self.error_messages["invalid_login"],
                code="invalid_login",
                params={"username": self.username_field.verbose_name},
            ),
        )


class AdminLoginCodeForm(forms.Form):
    otp = forms.CharField(
        label="Code",
        max_length=64,
        help_text="The 6-digit code of your authenticator app, or one of your recovery codes.",
        widget=forms.TextInput(
            attrs={"autocomplete": "one-time-code", "inputmode": "numeric", "autofocus": True}
        ),
    )


# --- the pages ---------------------------------------------------------------------------
def login(site, request, extra_context=None):
    """The admin's login form: GET shows it (or the index to a browser signed in already);
    POST is the password step (module docstring)."""
    if request.method == "GET" and site.has_permission(request):
        return HttpResponseRedirect(reverse("admin:index", current_app=site.name))
    form = AdminLoginForm(request, data=request.POST if request.method == "POST" else None)
    next_url = _next_url(request, site)
    if request.method == "POST":
        try:
            answer = _password_step(site, request, form, next_url)
        except RateLimited as refused:
            return rate_limited(site, request, refused)
        if answer is not None:
            return answer
    context = {
        **site.each_context(request),
        "title": "Log in",
        "subtitle": None,
        "app_path": request.get_full_path(),
        "username": request.user.get_username(),
        "form": form,
        REDIRECT_FIELD_NAME: next_url,
        **(extra_context or {}),
    }
    request.current_app = site.name
    return TemplateResponse(request, site.login_template or "admin/login.html", context)


def _password_step(site, request, form: AdminLoginForm, next_url: str):
    """The response to a posted login form, or None to show the form again (with its
    errors). RateLimited past either limit, whatever the password."""
    # The address as typed: the limiter keys it as the lookup normalises it.
    accounts.auth_rate_limit(
        scope="login", ip=client_ip(request), email=request.POST.get("username", "")
    )
    if not form.is_valid():
        return None
    try:
        credentials = validated(
            CredentialsInput,
            {"email": form.cleaned_data["username"], "password": form.cleaned_data["password"]},
        )
        result = accounts.user_login(email=credentials["email"], password=credentials["password"])
    except (InvalidRequest, accounts.InvalidCredentials):
        form.refuse()
        return None
    except OtpRequired as asked:
        if not _is_staff(asked.user):
            form.refuse()
            return None
        _code_awaited(request, asked.user, next_url=next_url)
        return HttpResponseRedirect(reverse("admin:login_code", current_app=site.name))
    if not _is_staff(result.user):
        accounts.session_end(session=result.session)  # the password was right, but no admin
        form.refuse()
        return None
    if settings.REQUIRE_STAFF_2FA:
        accounts.session_end(session=result.session)
        logger.info("admin sign-in refused: staff user %s has no second factor", result.user.pk)
        return _page(site, request, "admin/staff_two_factor_required.html", status=403)
    _sign_in(request, result, second_factor=False)
    return HttpResponseRedirect(next_url)


def login_code(site, request):
    """The second step of an admin login: the code of the staff member whose password was
    right in the last PENDING_SECONDS, checked as the API checks `otp`
    (user_login_second_step: single use, RATE_LIMIT_OTP_PER_USER, the 429 page past it)."""
    pending = PENDING_LOGIN.take(request)
    if pending is None:
        return HttpResponseRedirect(reverse("admin:login", current_app=site.name))
    user, next_url = pending
    form = AdminLoginCodeForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            code = validated(LoginCodeInput, {"otp": form.cleaned_data["otp"]})["otp"]
            result = accounts.user_login_second_step(user=user, otp=code)
        except RateLimited as refused:
            return rate_limited(site, request, refused)
        except ApplicationError as refused:
            form.add_error("otp", refused.message)
        else:
            PENDING_LOGIN.forget(request)
            _sign_in(request, result, second_factor=selectors.two_factor_enabled(user=user))
            return HttpResponseRedirect(next_url or reverse("admin:index", current_app=site.name))
    return _page(
        site,
        request,
        "admin/login_code.html",
        {"form": form, "email": user.email, "title": "Log in: second step"},
    )


def rate_limited(site, request, refused: RateLimited):
    """429 with Retry-After (and the quota's headers), as a page that says when to retry."""
    response = _page(
        site,
        request,
        "admin/login_rate_limited.html",
        {"retry_after": refused.headers.get("Retry-After", "")},
        status=429,
    )
    for name, value in refused.headers.items():
        response[name] = value
    return response


def _page(site, request, template: str, context: dict | None = None, *, status: int = 200):
    request.current_app = site.name
    return TemplateResponse(
        request,
        template,
        {**site.each_context(request), "has_permission": False, **(context or {})},
        status=status,
    )


def _next_url(request, site) -> str:
    """Where to go after signing in: the `next` asked for if it is on this site, else the
    admin's index."""
    wanted = request.POST.get(REDIRECT_FIELD_NAME) or request.GET.get(REDIRECT_FIELD_NAME, "")
    if wanted and url_has_allowed_host_and_scheme(
        wanted, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return wanted
    return reverse("admin:index", current_app=site.name)


def _is_staff(user: User) -> bool:
    return user.is_active and user.is_staff


# --- the binding -------------------------------------------------------------------------
def _sign_in(request, result: accounts.AuthResult, *, second_factor: bool) -> None:
    """Django's login (a new session key: no session fixation), bound to `result`'s
    LoginSession."""
    auth_login(request, result.user, backend=BACKEND)
    bind(request.session, result.session, second_factor=second_factor)
    logger.info(
        "admin sign-in of staff user %s (second factor: %s)",
        result.user.pk,
        "yes" if second_factor else "no",
    )


def bind(session, login_session, *, second_factor: bool) -> None:
    """Record in the Django `session` the LoginSession its admin sign-in belongs to."""
    session[SIGN_IN_KEY] = {"session": str(login_session.pk), "second_factor": second_factor}


def signed_in(request) -> bool:
    """Whether the staff member of `request.user` signed in through this module's login and
    its LoginSession is still active (its last_seen moved), with a second factor given when
    REQUIRE_STAFF_2FA is on. Otherwise the browser is signed out of the admin (Django's
    logout), so its login page is offered afresh. Read once per request."""
    known = getattr(request, "_relay_admin_signed_in", None)
    if known is not None:
        return known
    bound = request.session.get(SIGN_IN_KEY)
    factor_given = isinstance(bound, dict) and bound.get("second_factor")
    login_session = (
        bound_session(request) if factor_given or not settings.REQUIRE_STAFF_2FA else None
    )
    holds = login_session is not None and login_session.active
    if holds:
        accounts.session_touch(session=login_session)
    else:
        auth_logout(request)
    request._relay_admin_signed_in = holds
    return holds


def bound_session(request):
    """The LoginSession the admin's sign-in in this browser is bound to, if it is the signed-in
    user's; None otherwise."""
    bound = request.session.get(SIGN_IN_KEY)
    if not isinstance(bound, dict):
        return None
    try:
        login_session = selectors.session_with_user(session_id=UUID(bound.get("session")))
    except (ValidationError, ValueError, TypeError):
        return None
    if login_session is None or login_session.user_id != request.user.pk:
        return None
    return login_session


def sign_out(request) -> None:
    """End the LoginSession the admin's sign-in is bound to (Django's logout follows)."""
    login_session = bound_session(request)
    if login_session is not None:
        accounts.session_end(session=login_session)


def password_changed(request, user: User) -> None:
    """A password set in the admin (staff's own, or a user's by staff) ends every session of
    its user, as a change through the API does: all of them but the admin's own sign-in when
    it is that user's."""
    keep = bound_session(request) if user.pk == request.user.pk else None
    ended = accounts.sessions_end_all(user=user, keep=keep)
    logger.info(
        "password of user %s set in the admin by staff user %s; %d session(s) ended",
        user.pk,
        request.user.pk,
        ended,
    )


# --- the code step's pending login --------------------------------------------------------
def _code_awaited(request, user: User, *, next_url: str) -> None:
    """Remember for PENDING_SECONDS that `user`'s password was right, under a new session
    key; whoever was signed in to the admin in this browser is signed out first."""
    if request.user.is_authenticated:
        auth_logout(request)
    PENDING_LOGIN.remember(request, user, next_url=next_url)
