"""The console's pages. Each reads through a selector and writes through a service, checking
input with the API's own input serializer first, exactly as the API's view does; an
ApplicationError is shown on the form, with the API's status (and Retry-After)."""

import uuid

from django.contrib import messages
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST

from accounts import services as accounts
from accounts.serializers import CredentialsInput, RegisterInput
from captcha import services as captcha
from captcha.models import CaptchaChallenge
from console import signin
from console.forms import (
    AliasForm,
    ConsoleForm,
    LoginForm,
    NumberCreateForm,
    PinChangeForm,
    RegisterForm,
)
from console.signin import signed_in
from core.clientip import client_ip
from core.errors import ApplicationError
from core.fields import validated
from virtual_numbers import selectors as numbers
from virtual_numbers import services as numbers_services
from virtual_numbers.serializers import AliasInput, NumberCreateInput, PinChangeInput


def refused(request, template: str, form: ConsoleForm, error: ApplicationError, **context):
    """The page again, `error` placed on its form, answered with the API's status."""
    form.place(error)
    response = render(request, template, {"form": form, **context}, status=error.status)
    for name, value in error.headers.items():
        response[name] = value
    return response


def posted(request):
    """The submitted form data, or None for a page asked for with GET (an unbound form)."""
    return request.POST if request.method == "POST" else None


def home(request):
    return redirect("console:numbers")


def _next_page(request) -> str:
    wanted = request.POST.get("next") or request.GET.get("next") or ""
    if url_has_allowed_host_and_scheme(
        wanted, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return wanted
    return "console:numbers"


@require_http_methods(["GET", "POST"])
def login(request):
    """Log in: the API's rate limits (per IP and e-mail, shared with POST /api/auth/login),
    then accounts.services.user_login, which opens the LoginSession the browser is bound to."""
    if request.method == "GET" and signin.current_session(request) is not None:
        return redirect(_next_page(request))
    form = LoginForm(posted(request))
    context = {"next": request.POST.get("next") or request.GET.get("next", "")}
    if request.method == "POST" and form.is_valid():
        try:
            accounts.auth_rate_limit(
                scope="login", ip=client_ip(request), email=form.values("email")["email"].lower()
            )
            result = accounts.user_login(
                **validated(CredentialsInput, form.values("email", "password"))
            )
        except ApplicationError as error:
            return refused(request, "console/login.html", form, error, **context)
        signin.sign_in(request, result.session)
        return redirect(_next_page(request))
    return render(request, "console/login.html", {"form": form, **context})


@require_http_methods(["GET", "POST"])
def register(request):
    """Register: sign-up must be open, the API's rate limits, then user_register (its
    password rules and hashing cap), whose first LoginSession the browser is bound to."""
    if request.method == "GET" and signin.current_session(request) is not None:
        return redirect("console:numbers")
    form = RegisterForm(posted(request))
    if request.method == "POST" and form.is_valid():
        try:
            accounts.registration_check()
            accounts.auth_rate_limit(
                scope="register",
                ip=client_ip(request),
                email=form.values("email")["email"].lower(),
            )
            values = validated(RegisterInput, form.values("email", "password"))
            result = accounts.user_register(**values)
        except ApplicationError as error:
            return refused(request, "console/register.html", form, error)
        signin.sign_in(request, result.session)
        messages.success(request, "Welcome to Relay. Your account is ready.")
        return redirect("console:numbers")
    return render(request, "console/register.html", {"form": form})


@require_POST
def logout(request):
    signin.sign_out(request)
    return redirect("console:login")


@signed_in
def number_list(request):
    return render(
        request, "console/numbers.html", {"numbers": numbers.numbers_of(user=request.user)}
    )


def _challenge(request) -> tuple[CaptchaChallenge | None, ApplicationError | None]:
    """A new CAPTCHA challenge for the create form, counted like GET /api/captcha."""
    try:
        captcha.captcha_issue_rate_limit(ip=client_ip(request))
    except ApplicationError as error:
        return None, error
    return captcha.captcha_challenge_issue(), None


def _answered_token(request, answer: int) -> str:
    """Check the answer to the challenge the form carried (POST /api/captcha/verify's
    service and rate limit): the token number_create spends."""
    captcha.captcha_verify_rate_limit(ip=client_ip(request))
    try:
        a, b = int(request.POST.get("a", "")), int(request.POST.get("b", ""))
        challenge_id = uuid.UUID(request.POST.get("challengeId", ""))
        token = captcha.captcha_verify(a=a, b=b, answer=answer, challenge_id=challenge_id)
    except (ValueError, TypeError) as exc:  # the hidden fields were not the ones we sent
        raise captcha.CaptchaInvalid() from exc
    return str(token.pk)


@signed_in
@require_http_methods(["GET", "POST"])
def number_create(request):
    """Take a number: the CAPTCHA's question in the form, its answer checked by
    captcha.services, the token it gives spent by virtual_numbers' number_create."""
    form = NumberCreateForm(posted(request))
    error = None
    if form.is_bound:
        if form.is_valid():
            try:
                token = _answered_token(request, form.cleaned_data["answer"])
                values = form.values("alias", "pin") | {"captchaToken": token}
                values = validated(NumberCreateInput, values)
                number = numbers_services.number_create(
                    user=request.user,
                    alias=values["alias"],
                    pin=values["pin"],
                    captcha_token=values["captchaToken"],
                )
            except ApplicationError as refusal:
                error = refusal
            else:
                messages.success(request, f"{number.number} is yours.")
                return redirect("console:numbers")
        form.data = form.data.copy()
        form.data.pop("answer", None)  # a new question follows: the old answer goes
    challenge, issue_error = _challenge(request)  # a question for the page, every time
    refusals = [refusal for refusal in (error, issue_error) if refusal is not None]
    context = {"form": form, "challenge": challenge, "refusal": None}
    for refusal in refusals:
        if form.is_bound:
            form.place(refusal)
        else:
            context["refusal"] = refusal.message
    status = refusals[0].status if refusals else 400 if form.is_bound else 200
    response = render(request, "console/number_create.html", context, status=status)
    for name, value in (refusals[0].headers if refusals else {}).items():
        response[name] = value
    return response


@signed_in
@require_http_methods(["GET", "POST"])
def number_alias(request, number_id):
    number = numbers.number_access(user=request.user, number_id=number_id)
    form = AliasForm(posted(request), initial={"alias": number.alias})
    if request.method == "POST" and form.is_valid():
        try:
            alias = validated(AliasInput, form.values("alias"))["alias"]
            numbers_services.number_alias_set(number=number, alias=alias)
        except ApplicationError as error:
            return refused(request, "console/number_alias.html", form, error, number=number)
        messages.success(request, f"{number.number} is now called {alias}.")
        return redirect("console:numbers")
    return render(request, "console/number_alias.html", {"form": form, "number": number})


@signed_in
@require_http_methods(["GET", "POST"])
def number_pin(request, number_id):
    number = numbers.number_access(user=request.user, number_id=number_id)
    form = PinChangeForm(posted(request))
    if request.method == "POST" and form.is_valid():
        try:
            values = validated(PinChangeInput, form.values("currentPin", "newPin"))
            numbers_services.number_pin_change(
                number=number, current_pin=values["currentPin"], new_pin=values["newPin"]
            )
        except ApplicationError as error:
            return refused(request, "console/number_pin.html", form, error, number=number)
        messages.success(request, f"The PIN of {number.number} is changed.")
        return redirect("console:numbers")
    return render(request, "console/number_pin.html", {"form": form, "number": number})


@signed_in
@require_http_methods(["GET", "POST"])
def number_delete(request, number_id):
    number = numbers.number_access(user=request.user, number_id=number_id)
    if request.method == "POST":
        numbers_services.number_delete(number=number)
        messages.success(request, f"{number.number} is given back, with its history.")
        return redirect("console:numbers")
    return render(request, "console/number_delete.html", {"number": number})
