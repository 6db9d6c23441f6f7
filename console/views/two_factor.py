"""Two-step login on the account page: start enrolment (the secret and its QR code, inline
SVG markup: no script, no image from elsewhere), confirm it with a code (the recovery codes
shown once), and turn it off with the password and a code; through accounts.twofactor, as the
API does."""

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from accounts import selectors, services, twofactor
from accounts.serializers import PasswordConfirmInput, TwoFactorConfirmInput, TwoFactorDisableInput
from console.forms import PasswordConfirmForm, TwoFactorConfirmForm, TwoFactorDisableForm
from console.signin import signed_in
from console.views.common import form_page, posted
from core.clientip import client_ip
from core.fields import validated


@signed_in
@require_http_methods(["GET", "POST"])
def two_factor_start(request):
    """Start enrolment with the account's password, counted toward the login rate limit as
    POST /api/user/2fa counts it; then the secret's page (two_factor)."""
    if selectors.two_factor_enabled(user=request.user):
        return redirect("console:account")
    form = PasswordConfirmForm(posted(request))

    def start():
        user = request.user
        services.auth_rate_limit(scope="login", ip=client_ip(request), email=user.email)
        values = validated(PasswordConfirmInput, form.values("password"))
        twofactor.two_factor_start(user=user, password=values["password"])
        return redirect("console:two_factor")

    return form_page(request, "console/two_factor_start.html", form, start)


@signed_in
@require_http_methods(["GET", "POST"])
def two_factor(request):
    """The enrolment started (two_factor_start): its secret, QR code and the confirm form.
    A right code turns the factor on and shows the recovery codes, this once."""
    user = request.user
    enrolment = selectors.two_factor_pending(user=user)
    if enrolment is None:
        return redirect("console:account")
    form = TwoFactorConfirmForm(posted(request))

    def confirm():
        values = validated(TwoFactorConfirmInput, form.values("code"))
        codes = twofactor.two_factor_confirm(
            user=user, code=values["code"], keep=request.login_session
        )
        return render(request, "console/two_factor_codes.html", {"codes": codes})

    # Never cached, secret and codes alike: relay.middleware.NO_STORE_ROUTES.
    return form_page(request, "console/two_factor.html", form, confirm, enrolment=enrolment)


@signed_in
@require_http_methods(["GET", "POST"])
def two_factor_disable(request):
    user = request.user
    if not selectors.two_factor_enabled(user=user):
        return redirect("console:account")
    form = TwoFactorDisableForm(posted(request))

    def turn_off():
        values = validated(TwoFactorDisableInput, form.values("password", "code"))
        twofactor.two_factor_disable(user=user, password=values["password"], code=values["code"])
        messages.success(request, "Two-step login is off: your password alone logs you in.")
        return redirect("console:account")

    return form_page(request, "console/two_factor_disable.html", form, turn_off)
