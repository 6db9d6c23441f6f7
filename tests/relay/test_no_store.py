"""`Cache-Control: no-store` on every answer that carries a token, key, secret, export or
recording (issue 53): each route of relay.middleware.NO_STORE_ROUTES requested for real, as
its user would, and its answer never kept by a browser's or a proxy's cache."""

import re
from dataclasses import dataclass

import pyotp
import pytest
from django.core.files.base import ContentFile
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone
from rest_framework.test import APIClient

from accounts import services
from accounts.credentials import reset_token_make
from accounts.verification import verification_token_make
from calls.models import Recording
from core.recordings import recordings_storage
from mail.models import OutboundMail
from relay.middleware import NO_STORE_ROUTES
from tests.conftest import Clock
from tests.console.conftest import sign_in
from tests.factories import (
    DEFAULT_PASSWORD,
    CallFactory,
    NumberFactory,
    call_recorded_on,
    two_factor_on,
    voicemail_on,
    wav_bytes,
)
from virtual_numbers import services as number_services
from virtual_numbers.models import GREETING_PREFIX, OpeningHours

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-and-unusual-passphrase"
HOOK = "https://hooks.example.com/relay"


@dataclass
class Visitor:
    """A user and the clients they use: the API with their JWT, the console signed in, and
    the same two without credentials."""

    user: object
    api: APIClient
    browser: Client
    anonymous_api: APIClient
    anonymous_browser: Client
    clock: Clock


def code_now(secret: str) -> str:
    return pyotp.TOTP(secret).at(timezone.now())


def factor_on(visitor: Visitor) -> str:
    """The user's second factor turned on; the clock moved past the step of the code that
    confirmed it, so the next code is a fresh one. Its secret."""
    secret, _ = two_factor_on(visitor.user)
    visitor.clock.advance(seconds=30)
    return secret


def invitation_link(visitor: Visitor) -> str:
    """The path of an invitation to share someone's number, mailed to the visitor."""
    number = NumberFactory()
    access = number_services.NumberAccess(number=number, role="owner", user=number.owner)
    number_services.member_invite(
        access=access, email=visitor.user.email, role="member", base_url=""
    )
    mail = OutboundMail.objects.get(to=visitor.user.email, template="number_invitation")
    return next(word for word in mail.text_body.split() if word.startswith("/invitations/"))


def greeting_recorded(visitor: Visitor):
    number = NumberFactory(owner=visitor.user)
    name = recordings_storage().save(f"{GREETING_PREFIX}no-store.wav", ContentFile(wav_bytes()))
    return number_services.number_greeting_recording_set(number=number, name=name, seconds=1.0)


def closed_greeting_recorded(visitor: Visitor):
    number = NumberFactory(owner=visitor.user)
    OpeningHours.objects.create(number=number, time_zone="UTC")
    name = recordings_storage().save(f"{GREETING_PREFIX}closed.wav", ContentFile(wav_bytes()))
    return number_services.number_greeting_recording_set(
        number=number, name=name, seconds=1.0, closed=True
    )


def hold_music_uploaded(visitor: Visitor):
    number = NumberFactory(owner=visitor.user)
    return number_services.number_hold_music_set(number=number, wav=wav_bytes())


def call_recording(visitor: Visitor) -> Recording:
    call = CallFactory(owner=visitor.user)
    name = recordings_storage().save("no-store-call.wav", ContentFile(wav_bytes()))
    return Recording.objects.create(call=call, name=name, seconds=1.0)


def console_login_code(v: Visitor):
    secret = factor_on(v)
    credentials = {"email": v.user.email, "password": DEFAULT_PASSWORD}
    first = v.anonymous_browser.post("/login", credentials)
    assert first.url == "/login/code"
    return v.anonymous_browser.post("/login/code", {"otp": code_now(secret)})


def api_two_factor_confirm(v: Visitor):
    secret = v.api.post("/api/user/2fa", {"password": DEFAULT_PASSWORD}, format="json").json()[
        "secret"
    ]
    return v.api.post("/api/user/2fa/confirm", {"code": code_now(secret)}, format="json")


def captcha_verify(v: Visitor):
    challenge = v.anonymous_api.get("/api/captcha").json()
    answer = {**challenge, "answer": challenge["a"] + challenge["b"]}
    return v.anonymous_api.post("/api/captcha/verify", answer, format="json")


def api_webhook_rotate(v: Visitor):
    v.api.put("/api/user/webhook", {"url": HOOK}, format="json")
    return v.api.post("/api/user/webhook/rotate-secret")


def api_call_recording(v: Visitor):
    recording = call_recording(v)
    return v.api.get(f"/api/calls/{recording.call.call_id}/recordings/{recording.pk}")


def console_two_factor(v: Visitor):
    v.browser.post("/account/2fa/start", {"password": DEFAULT_PASSWORD})
    return v.browser.get("/account/2fa")


def console_api_key_new(v: Visitor):
    services.user_api_key_regenerate(user=v.user, unseen=True)  # as a password reset does
    return v.browser.get("/account/api-key/new")


def console_webhook_rotate(v: Visitor):
    v.browser.post("/account/webhook", {"url": HOOK})
    return v.browser.post("/account/webhook/rotate")


# Each route of NO_STORE_ROUTES and the request that makes it answer its secret (or recording).
VISITS = {
    "auth-register": lambda v: v.anonymous_api.post(
        "/api/auth/register", {"email": "new@example.com", "password": PASSWORD}, format="json"
    ),
    "auth-login": lambda v: v.anonymous_api.post(
        "/api/auth/login", {"email": v.user.email, "password": DEFAULT_PASSWORD}, format="json"
    ),
    "auth-password-reset-confirm": lambda v: v.anonymous_api.post(
        "/api/auth/password-reset/confirm",
        {"token": reset_token_make(user=v.user), "newPassword": PASSWORD},
        format="json",
    ),
    "auth-verify-email": lambda v: v.anonymous_api.post(
        "/api/auth/verify-email", {"token": verification_token_make(user=v.user)}, format="json"
    ),
    "captcha-verify": captcha_verify,
    "dashboard-list": lambda v: v.api.get("/api/dashboard"),
    "user-regenerate-api-key": lambda v: v.api.post("/api/user/regenerate-api-key"),
    "user-two-factor": lambda v: v.api.post(
        "/api/user/2fa", {"password": DEFAULT_PASSWORD}, format="json"
    ),
    "user-two-factor-confirm": api_two_factor_confirm,
    "user-export": lambda v: v.api.get("/api/user/export"),
    "webhook": lambda v: v.api.put("/api/user/webhook", {"url": HOOK}, format="json"),
    "webhook-rotate-secret": api_webhook_rotate,
    "history-recording": lambda v: v.api.get(
        f"/api/history/{voicemail_on(NumberFactory(owner=v.user)).pk}/recording"
    ),
    "call-recording": api_call_recording,
    "number-greeting-recording": lambda v: v.api.get(
        f"/api/numbers/{greeting_recorded(v).pk}/greeting/recording"
    ),
    "number-closed-greeting": lambda v: v.api.get(
        f"/api/numbers/{closed_greeting_recorded(v).pk}/hours/closed-greeting"
    ),
    "number-hold-music": lambda v: v.api.get(
        f"/api/numbers/{hold_music_uploaded(v).pk}/hold-music"
    ),
    "recordings-detail": lambda v: v.api.get(
        f"/api/recordings/{call_recorded_on(NumberFactory(owner=v.user)).pk}"
    ),
    "console:login": lambda v: v.anonymous_browser.post(
        "/login", {"email": v.user.email, "password": DEFAULT_PASSWORD}
    ),
    "console:login_code": console_login_code,
    "console:register": lambda v: v.anonymous_browser.post(
        "/register", {"email": "new@example.com", "password": PASSWORD}
    ),
    "console:password_reset_confirm": lambda v: v.anonymous_browser.get(
        f"/password-reset/{reset_token_make(user=v.user)}"
    ),
    "console:verify_email": lambda v: v.anonymous_browser.get(
        f"/verify-email/{verification_token_make(user=v.user)}"
    ),
    "console:invitation": lambda v: v.browser.get(invitation_link(v)),
    "console:account": lambda v: v.browser.get("/account"),
    "console:api_key_regenerate": lambda v: v.browser.post("/account/api-key"),
    "console:api_key_reveal": lambda v: v.browser.post(
        "/account/api-key/reveal", {"password": DEFAULT_PASSWORD}
    ),
    "console:api_key_new": console_api_key_new,
    "console:webhook": lambda v: v.browser.post("/account/webhook", {"url": HOOK}),
    "console:webhook_rotate": console_webhook_rotate,
    "console:two_factor": console_two_factor,
    "console:account_export": lambda v: v.browser.post("/account/export"),
    "console:recording": lambda v: v.browser.get(
        f"/history/{voicemail_on(NumberFactory(owner=v.user)).pk}/recording"
    ),
    "console:greeting_recording": lambda v: v.browser.get(
        f"/numbers/{greeting_recorded(v).pk}/greeting/recording"
    ),
    "console:hold_music_file": lambda v: v.browser.get(
        f"/numbers/{hold_music_uploaded(v).pk}/hold-music/file"
    ),
    "console:closed_greeting_recording": lambda v: v.browser.get(
        f"/numbers/{closed_greeting_recorded(v).pk}/hours/closed-greeting"
    ),
    "console:call_recording_file": lambda v: v.browser.get(
        f"/call-recordings/{call_recorded_on(NumberFactory(owner=v.user)).pk}"
    ),
    "console:socket_token": lambda v: v.browser.post("/calls/socket-token"),
}


@pytest.fixture
def visitor(user, login, clock) -> Visitor:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {login.token}")
    browser = Client()
    sign_in(browser, user)
    return Visitor(user, api, browser, APIClient(), Client(), clock)


def test_the_walk_covers_the_whole_list():
    assert set(VISITS) == NO_STORE_ROUTES


@pytest.mark.parametrize("route", sorted(NO_STORE_ROUTES))
def test_the_answer_is_never_stored(visitor, route):
    response = VISITS[route](visitor)

    assert response.resolver_match.view_name == route
    assert response.status_code < 400, (response.status_code, getattr(response, "content", b""))
    directives = {d.strip() for d in response["Cache-Control"].split(",")}
    assert "no-store" in directives


def test_an_answer_without_a_secret_may_be_cached(visitor):
    """The rule is the list: a route not on it is left to its view."""
    response = visitor.api.get("/api/user/me")

    assert response.status_code == 200 and not response.has_header("Cache-Control")


# A route whose name says it hands out a credential, an export or a recording belongs on the
# list; one added later without it fails here.
SECRET_SOUNDING = re.compile(
    r"login|register|password-reset-confirm|password_reset_confirm|verify|api-key|api_key"
    r"|two-factor|two_factor|export|webhook|secret|recording$|token|dashboard"
)
# Named like one, answering none: each says why.
NOT_SECRET = {
    "user-verify-email-resend": "answers 202; the link goes by mail",
    "console:verification_resend": "a redirect; the link goes by mail",
    "console:two_factor_start": "asks for the password; a redirect to console:two_factor",
    "console:two_factor_disable": "turns the factor off; shows nothing of it",
    "console:webhook_delete": "removes the webhook; shows no secret",
    "console:greeting_recording_remove": "deletes the recording; a redirect",
    "number-recording": "whether a number's calls are recorded; no recording",
    "console:call_recording": "the page of that setting; no recording",
}


def route_names(resolver: URLResolver, namespace: str = "") -> set[str]:
    names = set()
    for pattern in resolver.url_patterns:
        if isinstance(pattern, URLResolver):
            inner = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
            names |= route_names(pattern, inner)
        elif isinstance(pattern, URLPattern) and pattern.name:
            names.add(f"{namespace}{pattern.name}")
    return names


def test_every_route_named_like_a_secret_is_on_the_list():
    names = {n for n in route_names(get_resolver()) if not n.startswith("admin:")}
    sounding = {n for n in names if SECRET_SOUNDING.search(n)}

    assert sounding - NO_STORE_ROUTES - set(NOT_SECRET) == set()
    assert names >= NO_STORE_ROUTES  # no stale entry
