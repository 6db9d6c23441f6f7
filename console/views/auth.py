"""Sign-in pages: register, log in, log out. The same accounts, rate limits and services as
`POST /api/auth/*`; the browser is bound to the LoginSession they open (console.signin)."""

from django.contrib import messages
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from accounts import services as accounts
from accounts.serializers import CredentialsInput, RegisterInput
from console import signin
from console.forms import LoginForm, RegisterForm
from console.views.common import form_page, next_page, posted
from core.clientip import client_ip
from core.fields import validated


def home(request):
    return redirect("console:numbers")


@require_http_methods(["GET", "POST"])
def login(request):
    """Log in: the API's rate limits (per IP and e-mail, shared with POST /api/auth/login),
    then accounts.services.user_login, which opens the LoginSession the browser is bound to."""
    if request.method == "GET" and signin.current_session(request) is not None:
        return redirect(next_page(request, reverse("console:numbers")))
    form = LoginForm(posted(request))

    def log_in():
        accounts.auth_rate_limit(
            scope="login", ip=client_ip(request), email=form.values("email")["email"].lower()
        )
        result = accounts.user_login(
            **validated(CredentialsInput, form.values("email", "password"))
        )
        signin.sign_in(request, result.session)
        return redirect(next_page(request, reverse("console:numbers")))

    wanted = request.POST.get("next") or request.GET.get("next", "")  # kept through a refusal
    return form_page(request, "console/login.html", form, log_in, next=wanted)


@require_http_methods(["GET", "POST"])
def register(request):
    """Register: sign-up must be open, the API's rate limits, then user_register (its
    password rules and hashing cap), whose first LoginSession the browser is bound to."""
    if request.method == "GET" and signin.current_session(request) is not None:
        return redirect("console:numbers")
    form = RegisterForm(posted(request))

    def create():
        accounts.registration_check()
        accounts.auth_rate_limit(
            scope="register", ip=client_ip(request), email=form.values("email")["email"].lower()
        )
        result = accounts.user_register(
            **validated(RegisterInput, form.values("email", "password"))
        )
        signin.sign_in(request, result.session)
        messages.success(request, "Welcome to Relay. Your account is ready.")
        return redirect("console:numbers")

    return form_page(request, "console/register.html", form, create)


@require_POST
def logout(request):
    signin.sign_out(request)
    return redirect("console:login")
