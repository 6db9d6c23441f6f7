"""Sign-in pages: register, log in, log out, and a forgotten password. The same accounts, rate
limits and services as `POST /api/auth/*`; the browser is bound to the LoginSession they open
(console.signin)."""

from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from accounts import credentials, verification
from accounts import services as accounts
from accounts.serializers import (
    CredentialsInput,
    LoginCodeInput,
    PasswordResetConfirmInput,
    PasswordResetInput,
    RegisterInput,
    VerifyEmailInput,
)
from accounts.twofactor import OtpRequired
from console import signin
from console.forms import (
    LoginCodeForm,
    LoginForm,
    PasswordResetConfirmForm,
    PasswordResetForm,
    RegisterForm,
    VerifyEmailForm,
)
from console.views.common import form_page, next_page, posted
from core import ratelimit
from core.clientip import client_ip
from core.fields import validated
from mail.links import public_base_url


def home(request):
    return redirect("console:numbers")


def landing(user, wanted: str):
    """Where a sign-in goes: to `wanted`, by way of the API key a password reset replaced,
    shown once (account.api_key_new), when there is one the user has not seen."""
    if user.api_key_unseen:
        return redirect(f"{reverse('console:api_key_new')}?{urlencode({'next': wanted})}")
    return redirect(wanted)


@require_http_methods(["GET", "POST"])
def login(request):
    """Log in: the API's rate limits (per IP and e-mail, shared with POST /api/auth/login),
    then accounts.services.user_login, which opens the LoginSession the browser is bound to."""
    if request.method == "GET" and signin.current_session(request) is not None:
        return redirect(next_page(request, reverse("console:numbers")))
    form = LoginForm(posted(request))

    def log_in():
        accounts.auth_rate_limit(
            scope="login", ip=client_ip(request), email=form.values("email")["email"]
        )
        try:
            result = accounts.user_login(
                **validated(CredentialsInput, form.values("email", "password"))
            )
        except OtpRequired as asked:
            # The password was right: the code is asked for on a page of its own, and the
            # password is never sent again (nor kept anywhere).
            signin.PENDING_LOGIN.remember(
                request, asked.user, next_url=next_page(request, reverse("console:numbers"))
            )
            return redirect("console:login_code")
        signin.sign_in(request, result.session)
        return landing(result.user, next_page(request, reverse("console:numbers")))

    wanted = request.POST.get("next") or request.GET.get("next", "")  # kept through a refusal
    return form_page(request, "console/login.html", form, log_in, next=wanted)


@require_http_methods(["GET", "POST"])
def login_code(request):
    """The second step of logging in to an account with a second factor: the code of the
    authenticator app or a recovery code, for the login whose password was right a moment
    ago (signin.PENDING_LOGIN); its errors and rate limit are the API's."""
    pending = signin.PENDING_LOGIN.take(request)
    if pending is None:
        if request.method == "POST":
            messages.error(request, "That took too long: log in again.")
        return redirect("console:login")
    user, wanted = pending
    form = LoginCodeForm(posted(request))

    def finish():
        values = validated(LoginCodeInput, form.values("otp"))
        result = accounts.user_login_second_step(user=user, otp=values["otp"])
        signin.PENDING_LOGIN.forget(request)
        signin.sign_in(request, result.session)
        return landing(result.user, wanted or reverse("console:numbers"))

    return form_page(request, "console/login_code.html", form, finish)


@require_http_methods(["GET", "POST"])
def register(request):
    """Register: sign-up must be open, the API's rate limits, then user_register (its
    password rules and hashing cap), whose first LoginSession the browser is bound to; then
    to its `next`, a page of this site (an invitation's, issue 57), else the numbers."""
    if request.method == "GET" and signin.current_session(request) is not None:
        return redirect(next_page(request, reverse("console:numbers")))
    form = RegisterForm(posted(request))

    def create():
        accounts.registration_check()
        accounts.auth_rate_limit(
            scope="register", ip=client_ip(request), email=form.values("email")["email"]
        )
        result = accounts.user_register(
            **validated(RegisterInput, form.values("email", "password")),
            base_url=public_base_url(request),
        )
        signin.sign_in(request, result.session)
        messages.success(
            request,
            f"Welcome to Relay. Your account is ready: confirm {result.user.email} by the link "
            "we mailed to it.",
        )
        return redirect(next_page(request, reverse("console:numbers")))

    wanted = request.POST.get("next") or request.GET.get("next", "")  # kept through a refusal
    return form_page(request, "console/register.html", form, create, next=wanted)


@require_http_methods(["GET", "POST"])
def verify_email(request, token):
    """A mailed verification link. GET shows a button: mail programs open a mail's links to
    scan them, so only a person's POST verifies, through accounts.verification.email_verify
    and the rate limit of POST /api/auth/verify-email. Open to anyone, signed in or not: the
    token is the credential. Never cached (relay.middleware.NO_STORE_ROUTES), and no Referer
    carries the path elsewhere; the access log cuts the token out of it (relay.logging)."""
    form = VerifyEmailForm(posted(request))

    def confirm():
        ratelimit.hit("verify-email:ip", client_ip(request), settings.RATE_LIMIT_AUTH_PER_IP)
        values = validated(VerifyEmailInput, {"token": token})
        user = verification.email_verify(token=values["token"])
        messages.success(request, f"{user.email} is confirmed as your address.")
        if signin.current_session(request) is not None:
            return redirect("console:account")
        return redirect("console:login")

    response = form_page(request, "console/verify_email.html", form, confirm)
    # The link's token never leaves for another site in a Referer; same-origin, not
    # no-referrer, with which Chromium posts the page's own form with `Origin: null` and
    # Django's CSRF check refuses it.
    response["Referrer-Policy"] = "same-origin"
    return response


@require_POST
def logout(request):
    signin.sign_out(request)
    return redirect("console:login")


@require_http_methods(["GET", "POST"])
def password_reset(request):
    """ "Forgot your password?": the API's rate limits, then the same request for a link, and
    the same page after it whether or not an account has the address."""
    form = PasswordResetForm(posted(request))

    def ask():
        email = form.values("email")["email"]
        credentials.password_reset_rate_limit(ip=client_ip(request), email=email)
        values = validated(PasswordResetInput, {"email": email})
        credentials.password_reset_request(email=values["email"], base_url=public_base_url(request))
        return redirect("console:password_reset_sent")

    return form_page(request, "console/password_reset.html", form, ask)


def password_reset_sent(request):
    return render(request, "console/password_reset_sent.html")


@require_http_methods(["GET", "POST"])
def password_reset_confirm(request, token: str):
    """The mailed link: a form for the new password while the token is valid, else a page
    that says so and offers a new link. The token is in the path, which the access log
    redacts (relay.middleware)."""
    if credentials.reset_token_user(token=token) is None:
        return render(request, "console/password_reset_invalid.html", status=400)
    form = PasswordResetConfirmForm(posted(request))

    def confirm():
        credentials.password_reset_confirm_rate_limit(ip=client_ip(request))
        values = validated(
            PasswordResetConfirmInput, {"token": token, **form.values("newPassword")}
        )
        credentials.password_reset_confirm(
            token=token, new_password=values["newPassword"], base_url=public_base_url(request)
        )
        signin.sign_out(request)  # whoever was signed in here, their session just ended
        messages.success(request, "Your password is changed. Log in with it.")
        return redirect("console:login")

    return form_page(request, "console/password_reset_confirm.html", form, confirm)
